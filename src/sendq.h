/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A connection's send queue, shared by the files of its reliability (conn.c has the map): the
 * record of each reliable packet by psn, and its place in its path's pipe (what the path's
 * window counts). A record enters the pipe when it goes out (transmit.c) and leaves it when it
 * is acked (ack.c), judged lost and queued to go again (queue_rtx), or given up (reqs.c). The
 * engine thread alone runs these, as every function of the connection's reliability.
 */
#ifndef HARP_SENDQ_H
#define HARP_SENDQ_H

#include <string.h>

#include "conn.h"

static inline struct tx_rec *rec_of(struct harp_conn *c, uint32_t psn)
{
	return &c->txq[psn & (CONN_TXQ - 1)];
}

/* Bytes of IP a packet of payload bytes takes: what the windows count. */
static inline uint32_t pkt_bytes(const struct harp_conn *c, uint32_t payload)
{
	return payload + wire_pkt_overhead(c->path.ip6) +
	       (c->auth ? HARP_AUTH_TRAILER : 0);
}

/* A packet of payload bytes of rec goes out: its bytes count against the path's window, and
 * spend its pacer's credit, until rec is acked or judged lost. */
static inline void pipe_add(struct harp_conn *c, struct tx_rec *rec, uint32_t payload)
{
	struct conn_path *p = &c->paths[rec->path];
	uint32_t bytes = pkt_bytes(c, payload);

	/* a record cut in HARP_SEG_MAX parts, each with headers: under 19 KB in all */
	rec->pipe_bytes = (uint16_t)(rec->pipe_bytes + bytes);
	p->inflight_bytes += bytes;
	if (c->pacing) {
		pace_spend(&p->pace, bytes);
	}
}

/* A record goes out on path, whole or as its first part of payload bytes (pipe_add the rest). */
static inline void pipe_enter(struct harp_conn *c, struct tx_rec *rec, int path, uint32_t payload)
{
	rec->in_pipe = true;
	rec->path = (uint8_t)path;
	rec->pipe_bytes = 0;
	c->inflight++;
	c->paths[path].inflight++;
	pipe_add(c, rec, payload);
}

static inline void pipe_leave(struct harp_conn *c, struct tx_rec *rec)
{
	struct conn_path *p = &c->paths[rec->path];

	if (!rec->in_pipe) {
		return;
	}
	rec->in_pipe = false;
	c->inflight--;
	p->inflight--;
	p->inflight_bytes -= rec->pipe_bytes;
}

static inline void queue_rtx(struct harp_conn *c, struct tx_rec *rec, uint32_t psn)
{
	if (rec->rtx_queued) {
		return;
	}
	rec->rtx_queued = true;
	pipe_leave(c, rec);
	c->rtxq[c->rtx_tail++ & (CONN_TXQ - 1)] = psn;
}

/* The header of a PROBE or STEER: no psn, no body, never acknowledged. */
static inline void unreliable_hdr(const struct harp_conn *c, struct harp_hdr *h, uint8_t type,
				  uint64_t now)
{
	memset(h, 0, sizeof(*h));
	h->version = HARP_WIRE_VERSION;
	h->type = type;
	h->conn_id = c->peer_id;
	h->token = c->token;
	h->ts = (uint32_t)(now / 1000);
}

#endif
