/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A running connection's control channel: the TCP connection that set it up (control.c) stays
 * open beside the data, and carries two messages, each 16 bytes. Its end of file or reset tells
 * the engine at once that the peer closed or died. The engine reads and writes it; set-up hands
 * it over with the connection.
 */
#ifndef HARP_CHAN_H
#define HARP_CHAN_H

#include "conn.h"

#define CHAN_MAGIC 0x48525043u /* "HRPC"; the set-up hellos start with it too */

enum chan_msg_type {
	CHAN_CLOSE = 1, /* value: the sender's rcv_nxt, its final cumulative ack */
	CHAN_PATH = 2,	/* value: a probe candidate that reached us; reserved: its round */
};

struct chan_msg {
	uint32_t magic;
	uint32_t type;
	uint32_t value;
	uint32_t reserved;
};
_Static_assert(sizeof(struct chan_msg) == 16, "control message is 16 bytes");

/* Reads what the peer said; 0, or -ECONNRESET (the connection failed) when it is gone. */
int chan_poll(struct harp_conn *c, uint64_t now);
/* Tells the peer that its probe (round, candidate) reached this connection's engine. */
void chan_send_path(struct harp_conn *c, uint32_t round, uint32_t cand);
/* Tells the peer we close, with our final cumulative ack. */
void chan_send_close(struct harp_conn *c);

#endif
