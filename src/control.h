/* SPDX-License-Identifier: Apache-2.0 */
/* Connection set-up over TCP (set-up thread); the control channel afterwards is chan.h's. */
#ifndef HARP_CONTROL_H
#define HARP_CONTROL_H

#include "ctx.h"

/*
 * The listener runs the handshakes of the connections the kernel accepted, several at once,
 * and hands out only those whose hello checked out: a stray or hostile connection (a port
 * scanner, garbage, a wrong nonce, one that never speaks) is dropped and counted, and accepting
 * goes on. Each set-up is bounded in time (HARP_CONNECT_TIMEOUT_MS) and bytes (one fixed-size
 * hello); when LISTEN_PENDING set-ups are under way, a new one pushes out the oldest.
 */
#define LISTEN_PENDING 256
#define LISTEN_ACCEPT_BATCH 64 /* TCP accepts per call, so that one call stays short */

struct harp_listener {
	struct harp_ctx *ctx;
	int fd;
	uint64_t nonce;
	struct harp_conn *pending[LISTEN_PENDING]; /* oldest first */
	int npending;
	uint64_t dropped; /* set-ups that failed, timed out or were pushed out */
};

/* A peer's TCP address as text: "a.b.c.d:port" or "[IPv6]:port". */
#define CTRL_PEER_NAME (WIRE_IP_TEXT + 8)

/* Opens the TCP listener on the interface's address and writes its handle. */
int ctrl_listen(struct harp_ctx *ctx, struct harp_handle *handle, struct harp_listener *l);
/*
 * Takes one TCP connection from the backlog: its socket into *fd and the peer's address into
 * peer_name; 0, -EAGAIN when none is waiting, or -errno. Nothing is allocated.
 */
int ctrl_accept(struct harp_listener *l, int *fd, char *peer_name, size_t len);
/* Starts the listener's side of the handshake on fd (from ctrl_accept) in c, which owns fd. */
int ctrl_adopt(struct harp_listener *l, struct harp_conn *c, int fd, const char *peer_name);
/* Starts the TCP connection named by handle; -EINVAL when handle is not a harp handle. */
int ctrl_connect(struct harp_conn *c, const struct harp_handle *handle);
/*
 * Advances the handshake: -EAGAIN while waiting, 0 when the step is complete (check
 * ctrl_setup_reply_pending: the listener side then hands over and calls again to reply).
 */
int ctrl_establish(struct harp_conn *c);
bool ctrl_setup_reply_pending(const struct harp_conn *c);
/* "address:port" of the peer a set-up is with, and why it failed ("" when not said). */
const char *ctrl_setup_peer(const struct harp_conn *c);
const char *ctrl_setup_why(const struct harp_conn *c);
/* The queue (engine) both sides agreed on. */
int ctrl_setup_queue(const struct harp_conn *c);
/* Frees a connection's set-up state and closes its control socket. */
void ctrl_conn_destroy(struct harp_conn *c);

#endif
