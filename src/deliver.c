// SPDX-License-Identifier: Apache-2.0
/*
 * The receiver's side of a connection's reliable packets. DATA carries (receive, buffer, offset)
 * and is copied straight into place whatever order it arrives in; a psn is applied once, as
 * rcv_bits remembers it until the cumulative ack passes it. A small send that went before its
 * CTS (unsolicited) names its send sequence number instead: it lands in the receive it falls to,
 * or is held until that receive is posted. The peer's CTS describe its receives (cts_group),
 * which the sends here take in order, tag by tag; unsolicited sends learn their buffer as they
 * come (bind_unsol). deliver.c owns the receiver's state (rcv_nxt, rcv_bits, the receives taken,
 * held messages, the ack owed) and the peer's CTS groups; it calls down only: reqs.h, pmtu.h
 * (parts of packets cut again), sendq.h.
 */
#include <errno.h>
#include <string.h>

#include "conn.h"
#include "deliver.h"
#include "pmtu.h"
#include "reqs.h"
#include "sendq.h"

/* The open receive the peer's send ssn falls to, among those taken; NULL if none. */
static struct harp_req *recv_covering(const struct harp_conn *c, uint32_t ssn)
{
	uint32_t rsn = c->rcv_rsn_next, n;

	for (n = 0; n < c->rcv_taken; n++) {
		struct harp_req *r;

		rsn--;
		if (psn_before(ssn, c->rcv_first_ssn[rsn & (CONN_RECV_SLOTS - 1)])) {
			continue;
		}
		r = c->recv_slots[rsn & (CONN_RECV_SLOTS - 1)];
		if (!r || r->recv.rsn != rsn ||
		    ssn - c->rcv_first_ssn[rsn & (CONN_RECV_SLOTS - 1)] >= (uint32_t)r->recv.nbufs) {
			return NULL; /* that receive is complete: the send was already placed */
		}
		return r;
	}
	return NULL;
}

/* n bytes into a receive's buffer in device memory, through its engine's copies */
static int body_to_device(void *conn, uint8_t *dst, const uint8_t *src, uint32_t n)
{
	struct harp_conn *c = conn;

	return c->device ? c->device->copy_in(c->engine, dst, src, n) : -EIO;
}

/* Unsolicited message ssn (tag, len bytes at data) lands in r, the receive it falls to. */
static int unsol_place(struct harp_conn *c, struct harp_req *r, uint32_t ssn, uint32_t tag,
		       const uint8_t *data, uint16_t len)
{
	int i;

	for (i = 0; i < r->recv.nbufs && r->recv.tag[i] != tag; i++) {
	}
	if (i == r->recv.nbufs) {
		pr_err("conn %u: the peer's send %u carries tag %u, but the receive it falls to (%u, "
		       "%d buffers) has no buffer with that tag",
		       c->id, ssn, tag, r->recv.rsn, r->recv.nbufs);
		return -EPROTO;
	}
	if ((r->recv.done_mask & (1u << i)) || r->recv.got[i]) {
		pr_err("conn %u: the peer's send %u and another both name buffer %d (tag %u) of "
		       "receive %u",
		       c->id, ssn, i, tag, r->recv.rsn);
		return -EPROTO;
	}
	r->recv.msg_len[i] = len;
	if (len > r->recv.cap[i]) {
		r->recv.err = -EMSGSIZE; /* the sender fails it too, once it learns the capacity */
	} else {
		if (len && (r->recv.device_mask & (1u << i))) {
			int err = body_to_device(c, r->recv.bufs[i], data, len);

			if (err) {
				return err;
			}
		} else if (len) {
			memcpy(r->recv.bufs[i], data, len);
		}
		r->recv.got[i] = len;
		r->recv.placed_end[i] = len;
		c->stats.rx_bytes += len;
		c->stats.msgs_received++;
	}
	r->recv.done_mask |= 1u << i;
	reqs_recv_try_finish(c, r, true);
	return 0;
}

/* A receive was taken: the messages held for it land in it. */
int deliver_unsol_claim(struct harp_conn *c, struct harp_req *r)
{
	uint32_t k;

	for (k = 0; k < (uint32_t)r->recv.nbufs; k++) {
		uint32_t ssn = c->rcv_first_ssn[r->recv.rsn & (CONN_RECV_SLOTS - 1)] + k;
		struct unsol_held *m = &c->held[ssn & (CONN_UNSOL_CREDITS - 1)];
		int err;

		if (!m->valid || m->ssn != ssn) {
			continue;
		}
		m->valid = false;
		err = unsol_place(c, r, ssn, m->tag,
				  c->held_bytes + (size_t)(ssn & (CONN_UNSOL_CREDITS - 1)) *
							  CONN_EAGER_BYTES,
				  m->len);
		if (err) {
			return err;
		}
	}
	return 0;
}

static int deliver_unsol(struct harp_conn *c, const struct wire_pkt *p)
{
	const struct harp_hdr *h = &p->h;
	uint32_t ssn = h->rsn;
	struct unsol_held *m;
	struct harp_req *r;

	if (h->buf_idx || h->nbufs || h->offset || h->len != h->msg_len ||
	    h->len > CONN_EAGER_BYTES) {
		return -EPROTO; /* it cannot know its buffer, and is small and whole */
	}
	if (psn_before(ssn, c->rcv_ssn_next)) {
		r = recv_covering(c, ssn);
		return r ? unsol_place(c, r, ssn, h->tag, p->body, h->len) : -EPROTO;
	}
	if (ssn - c->rcv_ssn_next >= CONN_UNSOL_CREDITS) {
		return -EPROTO; /* beyond the sender's credit */
	}
	m = &c->held[ssn & (CONN_UNSOL_CREDITS - 1)];
	if (m->valid) {
		return -EPROTO;
	}
	m->valid = true;
	m->ssn = ssn;
	m->tag = h->tag;
	m->len = h->len;
	if (h->len) {
		memcpy(c->held_bytes + (size_t)(ssn & (CONN_UNSOL_CREDITS - 1)) * CONN_EAGER_BYTES,
		       p->body, h->len);
	}
	c->stats.msgs_held++;
	return 0;
}

static int deliver_data(struct harp_conn *c, const struct wire_pkt *p)
{
	const struct harp_hdr *h = &p->h;
	struct harp_req *r = c->recv_slots[h->rsn & (CONN_RECV_SLOTS - 1)];
	uint8_t i = h->buf_idx;

	if (h->flags & HARP_DATA_F_UNSOL) {
		return deliver_unsol(c, p);
	}
	if (!r || r->recv.rsn != h->rsn || i >= r->recv.nbufs || (r->recv.done_mask & (1u << i))) {
		return -EPROTO; /* data for a receive we never offered */
	}
	if (h->msg_len > r->recv.cap[i]) {
		return -EPROTO; /* the sender had to refuse this with MSGERR */
	}
	if (r->recv.msg_len[i] == UINT64_MAX) {
		r->recv.msg_len[i] = h->msg_len;
	} else if (r->recv.msg_len[i] != h->msg_len) {
		return -EPROTO;
	}
	if (h->len && (r->recv.device_mask & (1u << i))) {
		int err = wire_body_each(r->recv.bufs[i] + h->offset, p, body_to_device, c);

		if (err) {
			return err;
		}
	} else if (h->len && !p->placed) {
		wire_body_copy(r->recv.bufs[i] + h->offset, p);
	}
	if (h->offset + h->len > r->recv.placed_end[i]) {
		r->recv.placed_end[i] = h->offset + h->len;
	}
	r->recv.got[i] += h->len;
	c->stats.rx_bytes += h->len;
	if (r->recv.got[i] == h->msg_len) {
		r->recv.done_mask |= 1u << i;
		c->stats.msgs_received++;
		reqs_recv_try_finish(c, r, h->flags & HARP_DATA_F_DONE);
	}
	return 0;
}

static int deliver_msgerr(struct harp_conn *c, const struct harp_hdr *h)
{
	struct harp_req *r = c->recv_slots[h->rsn & (CONN_RECV_SLOTS - 1)];
	uint8_t i = h->buf_idx;

	if (!r || r->recv.rsn != h->rsn || i >= r->recv.nbufs || (r->recv.done_mask & (1u << i))) {
		return -EPROTO;
	}
	if (h->msg_len <= r->recv.cap[i] || r->recv.got[i]) {
		return -EPROTO; /* refusing what fits, or what already began to arrive */
	}
	r->recv.msg_len[i] = h->msg_len;
	r->recv.err = -EMSGSIZE;
	r->recv.done_mask |= 1u << i;
	reqs_recv_try_finish(c, r, false);
	return 0;
}

/*
 * The next send in order, of this tag, takes the buffer of its tag in the peer's oldest receive
 * not fully taken (*g). Returns the buffer's index; CTS_NOT_YET while that receive is not
 * (completely) announced; CTS_NO_TAG if it has no free buffer with the tag.
 */
int deliver_cts_take(struct harp_conn *c, uint32_t tag, const struct cts_group **gp)
{
	struct cts_group *g = &c->cts[c->cts_head_rsn & (CONN_RECV_SLOTS - 1)];
	int i;

	*gp = g;
	if (!g->valid || g->rsn != c->cts_head_rsn || g->arrived < g->nbufs) {
		return CTS_NOT_YET;
	}
	for (i = 0; i < g->nbufs; i++) {
		if (!(g->matched_mask & (1u << i)) && g->tag[i] == tag) {
			break;
		}
	}
	if (i == g->nbufs) {
		return CTS_NO_TAG;
	}
	g->matched_mask |= 1u << i;
	if (g->matched_mask == (1u << g->nbufs) - 1) {
		g->valid = false; /* its fields stay readable until the slot is reused */
		c->cts_head_rsn++;
	}
	return i;
}

/* Completes an unsolicited send; its packet, if still unacked, goes on from the copy. */
void deliver_unsol_release(struct harp_conn *c, struct harp_req *s, int err)
{
	struct tx_rec *rec = rec_of(c, s->send.unsol_psn);

	if (rec->sreq == s) {
		rec->sreq = NULL;
	}
	reqs_send_release(c, s, err);
}

/*
 * Sends that went unsolicited learn their buffer as the peer's CTS arrive, in order: each takes
 * the buffer of its tag in the receive it falls to, and completes (or fails, if it did not fit,
 * as the receiver's receive does). This frees their credit.
 */
static int bind_unsol(struct harp_conn *c)
{
	while (psn_before(c->ssn_bound, c->ssn_cur)) {
		struct harp_req *s = c->send_slots[c->ssn_bound & (CONN_REQS - 1)];
		uint32_t tag = c->unsol_tag[c->ssn_bound & (CONN_UNSOL_CREDITS - 1)];
		const struct cts_group *g;
		int i = deliver_cts_take(c, tag, &g);

		if (i == CTS_NOT_YET) {
			return 0;
		}
		if (i == CTS_NO_TAG) {
			pr_err("conn %u: send %u (tag %u) went ahead of the peer's receive %u, which "
			       "has no free buffer with that tag",
			       c->id, c->ssn_bound, tag, g->rsn);
			return -EPROTO;
		}
		if (s && s->send.ssn == c->ssn_bound) {
			deliver_unsol_release(c, s, s->send.len > g->cap[i] ? -EMSGSIZE : 0);
		}
		c->ssn_bound++;
	}
	return 0;
}

static int deliver_cts(struct harp_conn *c, const struct harp_hdr *h)
{
	struct cts_group *g = &c->cts[h->rsn & (CONN_RECV_SLOTS - 1)];

	if (h->nbufs == 0 || h->nbufs > HARP_RECV_MAX_BUFS || h->buf_idx >= h->nbufs) {
		return -EPROTO;
	}
	if (psn_before(h->rsn, c->cts_head_rsn)) {
		return -EPROTO; /* a receive we already matched completely */
	}
	if (!g->valid || g->rsn != h->rsn) {
		if (g->valid) {
			return -EPROTO; /* the peer exceeded its outstanding receives */
		}
		/* all but ready, which the data thread may be reading (harp_conn__peer_recv) */
		memset(g, 0, offsetof(struct cts_group, ready));
		g->valid = true;
		g->rsn = h->rsn;
		g->nbufs = h->nbufs;
	}
	if (g->nbufs != h->nbufs || (g->seen_mask & (1u << h->buf_idx))) {
		return -EPROTO;
	}
	g->seen_mask |= 1u << h->buf_idx;
	g->cap[h->buf_idx] = h->msg_len;
	g->tag[h->buf_idx] = h->tag;
	g->arrived++;
	if (g->arrived == g->nbufs) {
		atomic_store_explicit(&g->ready, 1ull << 32 | g->rsn, memory_order_release);
	}
	return bind_unsol(c);
}

uint8_t *deliver_place_at(struct harp_conn *c, const struct wire_pkt *p)
{
	const struct harp_hdr *h = &p->h;
	const struct harp_req *r = c->recv_slots[h->rsn & (CONN_RECV_SLOTS - 1)];
	uint8_t i = h->buf_idx;

	if (h->type != HARP_PKT_DATA || (h->flags & (HARP_DATA_F_UNSOL | HARP_DATA_F_SEG)) ||
	    !h->len || c->lingering || c->auth) {
		return NULL; /* parts and MACs: checked first, as any frame */
	}
	if (psn_before(h->psn, c->rcv_nxt) || (uint32_t)(h->psn - c->rcv_nxt) >= CONN_TXQ ||
	    rcv_bit(c, h->psn) || pmtu_has_parts(c, h->psn)) {
		return NULL; /* taken already, or beyond the window */
	}
	if (!r || r->recv.rsn != h->rsn || i >= r->recv.nbufs ||
	    ((r->recv.done_mask | r->recv.device_mask) & (1u << i)) ||
	    h->msg_len > r->recv.cap[i] ||
	    (r->recv.msg_len[i] != UINT64_MAX && r->recv.msg_len[i] != h->msg_len) ||
	    h->offset < r->recv.placed_end[i]) {
		return NULL;
	}
	return r->recv.bufs[i] + h->offset;
}

static int deliver(struct harp_conn *c, const struct wire_pkt *p)
{
	switch (p->h.type) {
	case HARP_PKT_DATA:
		return deliver_data(c, p);
	case HARP_PKT_CTS:
		return deliver_cts(c, &p->h);
	default:
		return deliver_msgerr(c, &p->h);
	}
}


static void rcv_bit_set(struct harp_conn *c, uint32_t psn, bool on)
{
	uint32_t b = psn & (CONN_TXQ - 1);

	if (on) {
		c->rcv_bits[b / 64] |= 1ull << (b % 64);
	} else {
		c->rcv_bits[b / 64] &= ~(1ull << (b % 64));
	}
}

/*
 * One part of a packet the peer cut again (HARP_DATA_F_SEG): its bytes placed. Returns 0 when it
 * was the last part (the psn now counts as received), 1 when parts are still to come, 2 when it
 * is not taken (a part already here, or no slot free: the peer sends it again), or a negative
 * errno from deliver().
 */
static int deliver_part(struct harp_conn *c, const struct wire_pkt *p)
{
	uint16_t parts = p->h.seg >> 8, part = p->h.seg & 0xff;
	int k = pmtu_part_slot(c, p->h.psn, parts, part), err;

	if (k < 0) {
		return 2;
	}
	err = deliver(c, p);
	if (err) {
		return err;
	}
	return pmtu_part_placed(c, k, part) ? 0 : 1;
}


/*
 * A reliable packet (DATA, CTS, MSGERR) of a connection that takes them: placed where it belongs
 * exactly once, whatever order it came in, and the ack it calls for noted.
 */
void deliver_packet(struct harp_conn *c, const struct wire_pkt *p, uint64_t now)
{
	const struct harp_hdr *h = &p->h;
	uint32_t psn = h->psn;
	int err;

	c->stats.rx_packets++;
	if (!c->ack_due) {
		c->ack_due = true;
		c->ack_due_ns = now;
	}
	c->rx_since_ack++;
	if (!psn_before(psn, c->rcv_nxt) && (uint32_t)(psn - c->rcv_nxt) >= CONN_TXQ) {
		c->stats.rx_duplicates++; /* beyond any window the sender may use: not trusted */
		return;
	}
	if (rcv_taken(c, psn)) {
		c->stats.rx_duplicates++;
		c->dup_seen = true; /* tells the sender, whose reordering window may be too tight */
		/* our ack went missing, or the sender retransmitted early */
		c->ack_now = c->ack_twin = true;
		return;
	}
	if (h->type == HARP_PKT_DATA && !(h->flags & HARP_DATA_F_SEG) && pmtu_has_parts(c, psn)) {
		/* the whole packet, after parts of it: its bytes would count twice */
		c->stats.rx_duplicates++;
		return;
	}
	err = (h->flags & HARP_DATA_F_SEG) && h->type == HARP_PKT_DATA ? deliver_part(c, p) :
									 deliver(c, p);
	if (err == 1) {
		c->last_ts = h->ts;
		return; /* a part: the psn counts once every part is in */
	}
	if (err == 2) {
		c->stats.rx_duplicates++;
		c->ack_now = true;
		return;
	}
	if (err) {
		pr_err("conn %u: packet type %u psn %u for receive %u buffer %u breaks the protocol; "
		       "failing the connection",
		       c->id, h->type, psn, h->rsn, h->buf_idx);
		conn_fail(c, err);
		return;
	}
	c->last_ts = h->ts;
	if (psn != c->rcv_nxt) {
		c->stats.rx_out_of_order++;
		c->ack_now = c->ack_twin = true;
		c->sacked_pending++;
		rcv_bit_set(c, psn, true);
		return;
	}
	c->rcv_nxt++;
	while (c->sacked_pending && rcv_bit(c, c->rcv_nxt)) {
		rcv_bit_set(c, c->rcv_nxt, false);
		c->sacked_pending--;
		c->rcv_nxt++;
	}
}

void deliver_closed(struct harp_conn *c, const struct wire_pkt *p, uint64_t now)
{
	uint32_t psn = p->h.psn;

	if (!rcv_taken(c, psn)) {
		return; /* after the close: never taken, never acked */
	}
	/* the peer waits for our ack of it: it went missing */
	c->stats.rx_duplicates++;
	if (!c->ack_due) {
		c->ack_due = true;
		c->ack_due_ns = now;
	}
	c->ack_now = c->ack_twin = true;
}
