// SPDX-License-Identifier: Apache-2.0
/*
 * The sender's side of a connection's packets: what goes next, within the windows. CTS first
 * (they let the peer send), then retransmissions, then new DATA against the peer's CTS, or
 * unsolicited before it for a small send with credit left; a send that small completes as its
 * copy is made (eager), as a kernel socket's would once in the socket buffer. A packet the path
 * MTU has shrunk under goes in parts (seg_out). ACKs and the PROBE, STEER and PMTU packets go
 * outside the windows. transmit.c owns snd_nxt, the send sequence cursors, the eager copy slots,
 * seg_out and pace_held, and clears the ack owed as one goes; it calls down only: deliver.h (the
 * peer's CTS, what arrived), pmtu.h, paths.h, reqs.h, sendq.h.
 */
#include <string.h>

#include "conn.h"
#include "deliver.h"
#include "paths.h"
#include "pmtu.h"
#include "reqs.h"
#include "sendq.h"

static void header_of(struct harp_conn *c, const struct tx_rec *rec, uint32_t psn,
		      struct conn_tx *tx, uint64_t now)
{
	struct harp_hdr *h = &tx->h;

	memset(h, 0, sizeof(*h));
	h->version = HARP_WIRE_VERSION;
	h->type = rec->type;
	h->buf_idx = rec->buf_idx;
	h->nbufs = rec->nbufs;
	h->conn_id = c->peer_id;
	h->token = c->token;
	h->psn = psn;
	h->ack_psn = c->rcv_nxt;
	h->ts = (uint32_t)(now / 1000);
	h->ts_echo = c->last_ts;
	h->rsn = rec->rsn;
	h->tag = rec->tag;
	h->msg_len = rec->msg_len;
	h->offset = rec->offset;
	h->len = rec->len;
	tx->payload = NULL;
	tx->device = false;
	if (rec->eager) {
		h->flags = HARP_DATA_F_DONE | (rec->unsol ? HARP_DATA_F_UNSOL : 0);
		tx->payload = c->eager_copies + (size_t)(rec->eager - 1) * CONN_EAGER_BYTES;
	} else if (rec->type == HARP_PKT_DATA) {
		tx->payload = rec->sreq->send.buf + rec->offset;
		tx->device = rec->sreq->send.device;
	}
}

/* Binds the first unmatched send to a buffer of the peer's oldest open receive, by tag. */
static bool match_send(struct harp_conn *c, struct harp_req *s)
{
	const struct cts_group *g;
	int i = deliver_cts_take(c, s->send.tag, &g);

	if (i < 0) {
		return false; /* not announced yet, or no buffer with this tag: wait */
	}
	s->send.matched = true;
	s->send.cap = g->cap[i];
	s->send.rsn = g->rsn;
	s->send.buf_idx = (uint8_t)i;
	return true;
}

/* Copies s's payload (at most CONN_EAGER_BYTES) into a free slot, which rec then sends from. */
static void eager_copy(struct harp_conn *c, struct tx_rec *rec, const struct harp_req *s)
{
	_Static_assert(CONN_EAGER_SLOTS == 64, "one bit per slot in eager_used");
	int slot = __builtin_ctzll(~c->eager_used);

	c->eager_used |= 1ull << slot;
	if (s->send.len) {
		memcpy(c->eager_copies + (size_t)slot * CONN_EAGER_BYTES, s->send.buf, s->send.len);
	}
	rec->eager = (uint8_t)(slot + 1);
}

/*
 * A send whose one packet is rec, small enough for a slot: its payload is copied there and the
 * send completes now, as a kernel socket's would once its bytes are in the socket buffer. The
 * caller can then reuse its buffer, and no ack need hurry back (HARP_DATA_F_DONE): in a 8 B
 * ping-pong each side's ack had been a packet on the critical path.
 */
static void send_eager(struct harp_conn *c, struct tx_rec *rec, struct harp_req *s)
{
	if (s->send.len > CONN_EAGER_BYTES || !~c->eager_used || s->send.device) {
		/* too big, every slot waits for an ack, or in device memory (read only through
		 * copies, as its packets go): completes on the ack */
		return;
	}
	eager_copy(c, rec, s);
	rec->sreq = NULL;
	reqs_send_release(c, s, 0);
}

/*
 * s cannot be bound to a buffer yet (its receive's CTS has not arrived, or sends before it went
 * unsolicited): may it go unsolicited? It must fit one record and a copy slot (the send
 * completes only when bound, but its packet may need sending again after that), and a credit
 * must be left.
 */
static bool unsol_ok(const struct harp_conn *c, const struct harp_req *s)
{
	return !s->send.device && s->send.len <= CONN_EAGER_BYTES && s->send.len <= c->payload_max &&
	       ~c->eager_used && c->ssn_cur - c->ssn_bound < CONN_UNSOL_CREDITS;
}

/* rec: s as one unsolicited DATA record, its payload copied to a slot. */
static void next_unsol(struct harp_conn *c, struct tx_rec *rec, struct harp_req *s)
{
	eager_copy(c, rec, s);
	rec->type = HARP_PKT_DATA;
	rec->unsol = true;
	rec->sreq = s; /* for its ack (see conn_on_peer_close), until it completes */
	s->send.unsol_psn = c->snd_nxt; /* rec is rec_of(c, snd_nxt) */
	rec->rsn = s->send.ssn;
	rec->tag = s->send.tag;
	rec->msg_len = s->send.len;
	rec->len = (uint16_t)s->send.len;
	c->unsol_tag[s->send.ssn & (CONN_UNSOL_CREDITS - 1)] = s->send.tag;
	s->send.pkts = 1;
	s->send.all_queued = true;
	c->ssn_cur++;
	c->stats.tx_bytes += rec->len;
	c->stats.msgs_unsolicited++;
}

/* rec: the CTS of r's next buffer, r being the oldest receive whose CTS are not all given a psn. */
static void next_cts(struct harp_conn *c, struct tx_rec *rec, struct harp_req *r)
{
	int i = r->recv.cts_queued++;

	rec->type = HARP_PKT_CTS;
	rec->rsn = r->recv.rsn;
	rec->buf_idx = (uint8_t)i;
	rec->nbufs = (uint8_t)r->recv.nbufs;
	rec->msg_len = r->recv.cap[i];
	rec->tag = r->recv.tag[i];
	if (r->recv.cts_queued == r->recv.nbufs) {
		c->cts_out_head = r->next;
		if (!c->cts_out_head) {
			c->cts_out_tail = NULL;
		}
		/* filled already by unsolicited sends, which are complete */
		reqs_recv_try_finish(c, r, true);
	}
}

/* Fills rec with the next new reliable packet, if there is one. */
static bool next_new(struct harp_conn *c, struct tx_rec *rec)
{
	struct harp_req *r = c->cts_out_head, *s;
	uint64_t left;

	memset(rec, 0, sizeof(*rec));
	if (r) {
		next_cts(c, rec, r); /* receives first: a CTS lets the peer start sending */
		return true;
	}
	if (c->ssn_cur == c->ssn_next) {
		return false;
	}
	s = c->send_slots[c->ssn_cur & (CONN_REQS - 1)];
	if (!s->send.matched) {
		if (c->ssn_bound == c->ssn_cur && match_send(c, s)) {
			c->ssn_bound++;
		} else if (unsol_ok(c, s)) {
			next_unsol(c, rec, s);
			return true;
		} else {
			return false;
		}
	}
	rec->rsn = s->send.rsn;
	rec->buf_idx = s->send.buf_idx;
	rec->tag = s->send.tag;
	rec->msg_len = s->send.len;
	if (s->send.len > s->send.cap) {
		/* Too big for its buffer: tell the receiver, and fail the send once the receiver has
		 * that (acked), as a good send completes; failing it sooner would let our caller
		 * close the connection while the MSGERR may still need a retransmission. */
		rec->type = HARP_PKT_MSGERR;
		rec->sreq = s;
		s->send.pkts = 1;
		s->send.all_queued = true;
		c->ssn_cur++;
		return true;
	}
	left = s->send.len - s->send.next_off;
	rec->type = HARP_PKT_DATA;
	rec->sreq = s;
	rec->offset = s->send.next_off;
	rec->len = (uint16_t)(left < c->payload_max ? left : c->payload_max);
	s->send.next_off += rec->len;
	s->send.pkts++;
	if (s->send.next_off == s->send.len) {
		s->send.all_queued = true;
		c->ssn_cur++;
	}
	c->stats.tx_bytes += rec->len;
	if (s->send.pkts == 1 && s->send.all_queued) {
		send_eager(c, rec, s);
	}
	return true;
}

/* Reliable packets to send: retransmissions, CTSs, sends not yet all given a psn. */
static bool reliable_waiting(const struct harp_conn *c)
{
	return c->rtx_head != c->rtx_tail || c->cts_out_head || c->ssn_cur != c->ssn_next;
}

bool conn_tx_pending(const struct harp_conn *c)
{
	return reliable_waiting(c) || (c->port_span && c->paths_live < c->paths_want);
}

/* tx, a whole packet's header, made into its next part. */
static void seg_cut(struct harp_conn *c, struct conn_seg_out *so, struct conn_tx *tx)
{
	uint32_t off = (uint32_t)so->next * so->part_len;
	uint32_t len = tx->h.len - off < so->part_len ? tx->h.len - off : so->part_len;

	tx->h.offset += off;
	tx->h.len = (uint16_t)len;
	tx->payload += off;
	tx->h.flags |= HARP_DATA_F_SEG;
	tx->h.seg = (uint16_t)(so->parts << 8 | so->next);
	if (++so->next == so->parts) {
		so->active = false;
	}
	c->stats.seg_parts++;
}

/*
 * May the next part of rec go? Its path's window and pacer hold parts as they hold packets: a
 * fall of the path MTU cuts every packet in flight into several, which must not leave as a
 * burst the window and the pacer never saw. The window gives way to a record alone on its
 * path, though: its ack, which is what opens the window, needs every part.
 */
static bool seg_room(struct harp_conn *c, const struct tx_rec *rec, uint64_t now)
{
	struct conn_path *p = &c->paths[rec->path];

	if (p->inflight_bytes >= p->cc.cwnd && p->inflight > 1) {
		return false;
	}
	if (c->pacing && !pace_ready(&p->pace, &p->cc, &p->rtt, now)) {
		c->pace_held = true;
		return false;
	}
	return true;
}

/*
 * The next part of the packet going out in parts, counted in flight. False when it needs none
 * any more (acked, or judged lost: its retransmission sends every part again), or, with
 * seg_out still active, when its path's window or pacer holds it back.
 */
static bool seg_part(struct harp_conn *c, struct conn_tx *tx, uint64_t now)
{
	struct conn_seg_out *so = &c->seg_out;
	struct tx_rec *rec = rec_of(c, so->psn);

	if (rec->acked || rec->dead || !rec->in_pipe || psn_before(so->psn, c->snd_una)) {
		so->active = false;
		return false;
	}
	if (!seg_room(c, rec, now)) {
		return false;
	}
	header_of(c, rec, so->psn, tx, now);
	tx->src_port = so->src_port;
	tx->dst_port = so->dst_port;
	seg_cut(c, so, tx);
	pipe_add(c, rec, tx->h.len);
	return true;
}

/*
 * rec, DATA cut before the path MTU fell (or cut once already), goes in parts: tx becomes the
 * first, seg_part sends the rest. Once cut, always cut the same way, whatever the path MTU is
 * since: the receiver holds the parts that came, and takes neither the whole packet nor another
 * cut of it.
 */
static void seg_start(struct harp_conn *c, struct tx_rec *rec, uint32_t psn, struct conn_tx *tx)
{
	struct conn_seg_out *so = &c->seg_out;
	uint32_t parts = rec->seg_parts ? rec->seg_parts :
					  (rec->len + c->payload_max - 1) / c->payload_max;

	so->active = true;
	so->psn = psn;
	so->parts = (uint16_t)(parts < HARP_SEG_MAX ? parts : HARP_SEG_MAX);
	rec->seg_parts = (uint8_t)so->parts;
	so->part_len = (rec->len + so->parts - 1) / so->parts;
	so->next = 0;
	so->src_port = tx->src_port;
	so->dst_port = tx->dst_port;
	seg_cut(c, so, tx);
}

/*
 * The next retransmission that still needs sending, into *psn, and the path it takes (not the
 * one that lost it). -1: none is queued; -2: one is, and no path has room for it.
 */
static int next_rtx(struct harp_conn *c, uint32_t *psn, uint64_t now)
{
	while (c->rtx_head != c->rtx_tail) {
		struct tx_rec *rec;
		int path;

		*psn = c->rtxq[c->rtx_head & (CONN_TXQ - 1)];
		rec = rec_of(c, *psn);
		if (rec->acked || rec->dead || psn_before(*psn, c->snd_una)) {
			rec->rtx_queued = false;
			c->rtx_head++;
			continue;
		}
		path = paths_pick(c, rec->path, true, now);
		if (path < 0) {
			return -2;
		}
		rec->rtx_queued = false;
		c->rtx_head++;
		rec->resent = true;
		c->stats.retransmits++;
		return path;
	}
	return -1;
}

/* The next new reliable packet, given the next psn (*psn), and the path it takes; -1: none now. */
static int next_fresh(struct harp_conn *c, uint32_t *psn, uint64_t now)
{
	int path = paths_pick(c, -1, false, now);

	if (path < 0) {
		return -1;
	}
	if ((uint32_t)(c->snd_nxt - c->snd_una) >= CONN_TXQ - 1) {
		return -1; /* the receiver's window: it remembers CONN_TXQ psns */
	}
	*psn = c->snd_nxt;
	if (!next_new(c, rec_of(c, *psn))) {
		return -1;
	}
	if (c->snd_una == c->snd_nxt) {
		c->rto_base_ns = now; /* the timer starts with the first packet in flight */
	}
	c->snd_nxt++;
	return path;
}

bool conn_next_tx(struct harp_conn *c, struct conn_tx *tx, uint64_t now)
{
	struct tx_rec *rec;
	uint32_t psn;
	int path;

	c->pace_held = false;
	if (atomic_load_explicit(&c->state, memory_order_relaxed) != CONN_READY) {
		return false;
	}
	if (c->seg_out.active) {
		if (seg_part(c, tx, now)) {
			return true;
		}
		if (c->seg_out.active) {
			/* held: nothing overtakes its parts, nor takes seg_out from them */
			return false;
		}
	}
	if (!reliable_waiting(c)) {
		return false; /* nothing to send: no need to look for a path */
	}
	path = next_rtx(c, &psn, now);
	if (path == -1) {
		path = next_fresh(c, &psn, now);
	}
	if (path < 0) {
		return false;
	}
	rec = rec_of(c, psn);
	rec->sent_ns = now;
	c->paths[path].sent_ns = now;
	if (!c->paths[path].waiting_since_ns) {
		c->paths[path].waiting_since_ns = now;
	}
	c->stats.tx_packets++;
	header_of(c, rec, psn, tx, now);
	tx->src_port = c->paths[path].src_port;
	tx->dst_port = c->paths[path].dst_port;
	if (rec->type == HARP_PKT_DATA && (rec->seg_parts || rec->len > c->payload_max)) {
		seg_start(c, rec, psn, tx);
	}
	pipe_enter(c, rec, path, tx->h.len); /* the whole record, or its first part */
	if (c->ack_due && !c->sacked_pending) {
		/* The cumulative ack this packet carries says all an ACK would: none is due now. */
		c->ack_due = false;
		c->ack_now = false;
		c->ack_twin = false;
		c->rx_since_ack = 0;
	}
	return true;
}

bool conn_ack_wanted(const struct harp_conn *c, uint64_t now)
{
	return c->ping_due ||
	       (c->ack_due && (c->ack_now || c->rx_since_ack >= CONN_ACK_EVERY ||
			       now - c->ack_due_ns >= CONN_ACK_DELAY_NS));
}

/*
 * The selective-ack map of everything received beyond rcv_nxt, into sack; returns its length in
 * bytes: 0 without holes, and never more than a packet's payload (only MTUs under ~600 bytes
 * shorten it below a whole window).
 */
static uint16_t sack_map(const struct harp_conn *c, uint8_t *sack)
{
	uint32_t limit = c->payload_max < HARP_SACK_MAX_BYTES ? c->payload_max : HARP_SACK_MAX_BYTES;
	uint32_t found = 0, used = 0, i;

	for (i = 0; found < c->sacked_pending && i < limit * 8; i++) {
		if (i % 8 == 0) {
			sack[i / 8] = 0;
		}
		if (rcv_bit(c, c->rcv_nxt + 1 + i)) {
			sack[i / 8] |= (uint8_t)(1u << (i % 8));
			used = i / 8 + 1;
			found++;
		}
	}
	return (uint16_t)used;
}

void conn_ack_unsent(struct harp_conn *c)
{
	c->ack_due = true;
}

bool conn_make_ack(struct harp_conn *c, struct conn_tx *tx, uint64_t now)
{
	struct harp_hdr *h = &tx->h;
	int path = paths_any(c);

	if ((!c->ack_due && !c->ping_due) || path < 0) {
		return false;
	}
	c->paths[path].sent_ns = now;
	tx->src_port = c->paths[path].src_port;
	tx->dst_port = c->paths[path].dst_port;
	tx->twin_src_port = tx->twin_dst_port = 0;
	/* An ack that reports a loss, or asks or answers whether the peer is alive, goes out twice,
	 * on two paths, so one lost copy or one dead path cannot stall recovery. One that says a
	 * message is done goes once: on 2 vCPUs the second copy cost the 8 B ping-pong a packet's
	 * copy-mode send on each side's critical path. */
	if ((c->ack_twin || c->ping_due) && c->paths_live > 1) {
		int twin = paths_any(c); /* the rotation moved on: another path */

		c->paths[twin].sent_ns = now;
		tx->twin_src_port = c->paths[twin].src_port;
		tx->twin_dst_port = c->paths[twin].dst_port;
	}
	c->ack_due = false;
	c->ack_now = false;
	c->ack_twin = false;
	c->rx_since_ack = 0;
	memset(h, 0, sizeof(*h));
	if (c->ping_due) {
		h->flags = HARP_ACK_F_PING;
		c->ping_due = false;
	}
	if (c->dup_seen) {
		h->flags |= HARP_ACK_F_DUP;
		c->dup_seen = false;
	}
	h->version = HARP_WIRE_VERSION;
	h->type = HARP_PKT_ACK;
	h->conn_id = c->peer_id;
	h->token = c->token;
	h->ack_psn = c->rcv_nxt;
	h->ts = (uint32_t)(now / 1000);
	h->ts_echo = c->last_ts;
	h->len = sack_map(c, tx->sack);
	tx->payload = NULL;
	tx->device = false;
	return true;
}

bool conn_next_probe(struct harp_conn *c, struct conn_tx *tx, uint64_t now)
{
	if (atomic_load_explicit(&c->state, memory_order_relaxed) != CONN_READY) {
		return false;
	}
	return pmtu_next(c, tx, now) || paths_next_probe(c, tx, now);
}
