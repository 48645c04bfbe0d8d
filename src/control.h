/* SPDX-License-Identifier: Apache-2.0 */
/* Connection set-up over TCP (set-up thread); the control channel afterwards is chan.h's. */
#ifndef HARP_CONTROL_H
#define HARP_CONTROL_H

#include "ctx.h"

struct harp_listener {
	struct harp_ctx *ctx;
	int fd;
	uint64_t nonce;
};

/* Opens the TCP listener on the interface's address and writes its handle. */
int ctrl_listen(struct harp_ctx *ctx, struct harp_handle *handle, struct harp_listener *l);
/* Accepts one pending TCP connection into c: 0, -EAGAIN when none is waiting, or -errno. */
int ctrl_accept(struct harp_listener *l, struct harp_conn *c);
/* Starts the TCP connection named by handle; -EINVAL when handle is not a harp handle. */
int ctrl_connect(struct harp_conn *c, const struct harp_handle *handle);
/*
 * Advances the handshake: -EAGAIN while waiting, 0 when the step is complete (check
 * ctrl_setup_reply_pending: the listener side then hands over and calls again to reply).
 */
int ctrl_establish(struct harp_conn *c);
bool ctrl_setup_reply_pending(const struct harp_conn *c);
/* The queue (engine) both sides agreed on. */
int ctrl_setup_queue(const struct harp_conn *c);
/* Frees a connection's set-up state and closes its control socket. */
void ctrl_conn_destroy(struct harp_conn *c);

#endif
