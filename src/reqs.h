/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Completing a connection's requests (reqs.c), for the files of its reliability: a send once
 * its last packet is acked (ack.c) or its payload copied (transmit.c), or once an unsolicited
 * one learns its buffer (deliver.c); a receive once every buffer is done and its CTS have all
 * gone. conn_fail, conn_linger and conn_uses_region are the engine's, in conn.h.
 */
#ifndef HARP_REQS_H
#define HARP_REQS_H

#include <stdbool.h>

struct harp_conn;
struct harp_req;

/* Takes a posted request into its slot; false while an older request holds the slot. */
bool reqs_take(struct harp_conn *c, struct harp_req *r);
/* The send s completes (err 0) or fails; its slot is free for the send CONN_REQS later. */
void reqs_send_release(struct harp_conn *c, struct harp_req *s, int err);
/* Releases r if every buffer of it is done and its CTS have all been given a psn; sender_done:
 * the peer said its send is complete (HARP_DATA_F_DONE), so no ack need hurry back for it. */
void reqs_recv_try_finish(struct harp_conn *c, struct harp_req *r, bool sender_done);

#endif
