/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The receiver's side of a connection's reliable packets (deliver.c), for the connection's other
 * files: conn.c hands it each DATA, CTS and MSGERR and each receive taken; transmit.c binds its
 * sends to the peer's CTS through it and reads what arrived for its ACKs.
 */
#ifndef HARP_DELIVER_H
#define HARP_DELIVER_H

#include "conn.h"

/*
 * Where p's body may be copied before its checksum is known to hold: a DATA record c would take
 * (new, for a buffer of a receive it offered, in host memory, not done) whose bytes all lie past
 * every byte a verified packet placed in that buffer (placed_end). Bytes copied there by a frame
 * whose sum then fails count for nothing, and the packet sent again overwrites them; no byte
 * received or delivered can change, whatever the failed frame's header said. NULL: anywhere
 * else (the caller checks the sum before the copy).
 */
uint8_t *deliver_place_at(struct harp_conn *c, const struct wire_pkt *p);
/* A reliable packet for c, which takes them (not lingering). */
void deliver_packet(struct harp_conn *c, const struct wire_pkt *p, uint64_t now);
/* A reliable packet for c, closed by its user and lingering (answering): nothing is delivered,
 * but one that arrived before is acked again. */
void deliver_closed(struct harp_conn *c, const struct wire_pkt *p, uint64_t now);
/* r, a receive, was taken: the unsolicited messages held for it land in it. */
int deliver_unsol_claim(struct harp_conn *c, struct harp_req *r);
/* Completes an unsolicited send; its packet, if still unacked, goes on from its copy. */
void deliver_unsol_release(struct harp_conn *c, struct harp_req *s, int err);

enum { CTS_NOT_YET = -1, CTS_NO_TAG = -2 };
int deliver_cts_take(struct harp_conn *c, uint32_t tag, const struct cts_group **gp);

/* Did psn arrive, beyond rcv_nxt? */
static inline bool rcv_bit(const struct harp_conn *c, uint32_t psn)
{
	uint32_t b = psn & (CONN_TXQ - 1);

	return c->rcv_bits[b / 64] & (1ull << (b % 64));
}

/* Was psn taken already: before rcv_nxt, or received within the window past it? */
static inline bool rcv_taken(const struct harp_conn *c, uint32_t psn)
{
	return psn_before(psn, c->rcv_nxt) ||
	       ((uint32_t)(psn - c->rcv_nxt) < CONN_TXQ && rcv_bit(c, psn));
}

#endif
