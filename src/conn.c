// SPDX-License-Identifier: Apache-2.0
/*
 * Per-connection reliability, run only by the connection's engine.
 *
 * Each direction is a stream of reliable packets numbered by psn: DATA (a slice of a message),
 * CTS (one posted receive buffer, the receiver-driven rendezvous) and MSGERR (a message refused
 * for not fitting). ACKs are not numbered; they carry the cumulative ack (every psn before
 * ack_psn arrived) and a 512-bit selective-ack map of what arrived beyond it, and every packet
 * piggybacks the cumulative ack too.
 *
 * Sends make progress only against the peer's CTS: the k-th send takes, by tag, a buffer of the
 * oldest receive of the peer that still has one free, so nothing is ever sent without a place
 * to land. DATA carries (receive, buffer, offset), so the receiver copies each payload straight
 * into place whatever order packets arrive in, and a packet is applied exactly once because its
 * psn is remembered in a bitmap until the cumulative ack passes it.
 *
 * Loss is found the RACK way (a packet sent before one that has been acked, by more than a
 * quarter of the RTT, is lost) and by the retransmission timer; a retransmission re-reads the
 * sender's buffer (valid until the send completes), so no frame is held for it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"

#define RTO_INIT_US 20000
#define RTO_MIN_US 10000
#define RTO_MAX_US 2000000
#define CWND_INIT 32
#define CWND_MIN 4
#define RACK_SCAN_MAX 2048 /* psns examined per ack for loss */

int conn_alloc_state(struct harp_conn *c, uint32_t cwnd_max)
{
	c->txq = calloc(CONN_TXQ, sizeof(*c->txq));
	c->rtxq = calloc(CONN_TXQ, sizeof(*c->rtxq));
	c->cts = calloc(CONN_RECV_SLOTS, sizeof(*c->cts));
	c->rcv_bits = calloc(CONN_TXQ / 64, sizeof(*c->rcv_bits));
	c->recv_slots = calloc(CONN_RECV_SLOTS, sizeof(*c->recv_slots));
	c->send_slots = calloc(CONN_REQS, sizeof(*c->send_slots));
	if (!c->txq || !c->rtxq || !c->cts || !c->rcv_bits || !c->recv_slots || !c->send_slots) {
		return -ENOMEM;
	}
	rtt_init(&c->rtt, RTO_INIT_US, RTO_MIN_US, RTO_MAX_US);
	cc_init(&c->cc, CWND_INIT < cwnd_max ? CWND_INIT : cwnd_max, CWND_MIN, cwnd_max);
	return 0;
}

void conn_free(struct harp_conn *c)
{
	if (!c) {
		return;
	}
	free(c->txq);
	free(c->rtxq);
	free(c->cts);
	free(c->rcv_bits);
	free(c->recv_slots);
	free(c->send_slots);
	c->txq = NULL;
	c->rtxq = NULL;
	c->cts = NULL;
	c->rcv_bits = NULL;
	c->recv_slots = NULL;
	c->send_slots = NULL;
}

void conn_start(struct harp_conn *c, uint64_t now)
{
	c->rto_base_ns = now;
	c->last_ack_ns = now;
}

static struct tx_rec *rec_of(struct harp_conn *c, uint32_t psn)
{
	return &c->txq[psn & (CONN_TXQ - 1)];
}

/* ---- requests ------------------------------------------------------------------------------ */

bool conn_take_request(struct harp_conn *c, struct harp_req *r)
{
	if (r->kind == REQ_SEND) {
		uint32_t slot = c->ssn_next & (CONN_REQS - 1);

		if (c->send_slots[slot]) {
			return false; /* an old send still holds the slot: wait for it */
		}
		r->send.ssn = c->ssn_next++;
		c->send_slots[slot] = r;
		return true;
	}
	if (c->recv_slots[r->recv.rsn & (CONN_RECV_SLOTS - 1)]) {
		return false;
	}
	c->recv_slots[r->recv.rsn & (CONN_RECV_SLOTS - 1)] = r;
	c->recvs_open++;
	r->next = NULL;
	if (c->cts_out_tail) {
		c->cts_out_tail->next = r;
	} else {
		c->cts_out_head = r;
	}
	c->cts_out_tail = r;
	return true;
}

static void send_release(struct harp_conn *c, struct harp_req *s, int err)
{
	c->send_slots[s->send.ssn & (CONN_REQS - 1)] = NULL;
	while (c->ssn_tail != c->ssn_cur && !c->send_slots[c->ssn_tail & (CONN_REQS - 1)]) {
		c->ssn_tail++;
	}
	if (!err) {
		c->stats.msgs_sent++;
	}
	req_finish(s, err);
}

static void recv_release(struct harp_conn *c, struct harp_req *r)
{
	/* The sender's send completes only on our ack. With no other receive open our caller may
	 * not run this engine again soon: ack in this pass. With more open it keeps polling, and
	 * the ack rides on its next CTS or leaves after CONN_ACK_DELAY_NS. */
	if (!--c->recvs_open) {
		c->ack_now = true;
	}
	c->recv_slots[r->recv.rsn & (CONN_RECV_SLOTS - 1)] = NULL;
	req_finish(r, r->recv.err);
}

static bool overlaps(const void *a, uint64_t alen, const void *b, size_t blen)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	return alen && blen && x < y + blen && y < x + alen;
}

bool conn_uses_region(const struct harp_conn *c, const void *addr, size_t len)
{
	uint32_t i;
	int k;

	for (i = 0; i < CONN_REQS; i++) {
		const struct harp_req *s = c->send_slots[i];

		if (s && overlaps(s->send.buf, s->send.len, addr, len)) {
			return true;
		}
	}
	for (i = 0; i < CONN_RECV_SLOTS; i++) {
		const struct harp_req *r = c->recv_slots[i];

		for (k = 0; r && k < r->recv.nbufs; k++) {
			if (overlaps(r->recv.bufs[k], r->recv.cap[k], addr, len)) {
				return true;
			}
		}
	}
	return false;
}

void conn_fail(struct harp_conn *c, int err)
{
	uint32_t i;

	if (atomic_load_explicit(&c->state, memory_order_relaxed) == CONN_FAILED) {
		return;
	}
	atomic_store_explicit(&c->fail_err, err, memory_order_relaxed);
	/* release: fail_err is visible before the state says FAILED */
	atomic_store_explicit(&c->state, CONN_FAILED, memory_order_release);
	for (i = 0; i < CONN_REQS; i++) {
		if (c->send_slots[i]) {
			req_finish(c->send_slots[i], err);
			c->send_slots[i] = NULL;
		}
	}
	for (i = 0; i < CONN_RECV_SLOTS; i++) {
		if (c->recv_slots[i]) {
			req_finish(c->recv_slots[i], err);
			c->recv_slots[i] = NULL;
		}
	}
	c->recvs_open = 0;
	c->cts_out_head = c->cts_out_tail = NULL;
	c->ssn_tail = c->ssn_cur = c->ssn_next;
	c->rtx_head = c->rtx_tail;
}

/* ---- acknowledgements ------------------------------------------------------------------------ */

static void ack_rec(struct harp_conn *c, struct tx_rec *rec)
{
	rec->acked = true;
	if (rec->in_pipe) {
		rec->in_pipe = false;
		c->inflight--;
	}
	if (rec->sent_ns > c->rack_xmit_ns) {
		c->rack_xmit_ns = rec->sent_ns;
	}
	if (rec->sreq) { /* DATA or MSGERR */
		struct harp_req *s = rec->sreq;

		s->send.pkts_acked++;
		if (s->send.all_queued && s->send.pkts_acked == s->send.pkts) {
			send_release(c, s, rec->type == HARP_PKT_MSGERR ? -EMSGSIZE : 0);
		}
	}
}

static void queue_rtx(struct harp_conn *c, struct tx_rec *rec, uint32_t psn)
{
	if (rec->rtx_queued) {
		return;
	}
	rec->rtx_queued = true;
	if (rec->in_pipe) {
		rec->in_pipe = false;
		c->inflight--;
	}
	c->rtxq[c->rtx_tail++ & (CONN_TXQ - 1)] = psn;
}

/* RACK: unacked packets sent well before the newest acked one are lost. */
static void detect_loss(struct harp_conn *c)
{
	uint64_t reo_wnd = (uint64_t)(c->rtt.have_sample ? c->rtt.srtt_us / 4 : 1000) * 1000;
	uint32_t psn, scanned = 0;

	for (psn = c->snd_una; psn_before(psn, c->highest_acked) && scanned < RACK_SCAN_MAX;
	     psn++, scanned++) {
		struct tx_rec *rec = rec_of(c, psn);

		if (rec->acked || rec->rtx_queued) {
			continue;
		}
		if (rec->sent_ns + reo_wnd < c->rack_xmit_ns) {
			cc_on_loss(&c->cc, psn, c->snd_nxt);
			c->stats.fast_retransmits++;
			queue_rtx(c, rec, psn);
		}
	}
}

/*
 * An ack echoing a packet sent before the last timeout means the "lost" packets were only late
 * (a peer descheduled for a few milliseconds looks exactly like loss): put the window back.
 */
static void undo_spurious_timeout(struct harp_conn *c, uint32_t ts_echo)
{
	if (!c->rto_undo_armed) {
		return;
	}
	c->rto_undo_armed = false;
	if ((int32_t)(ts_echo - c->rto_at_us) < 0) {
		c->cc = c->cc_before_rto;
		c->stats.spurious_timeouts++;
	}
}

static void on_ack(struct harp_conn *c, uint32_t ack_psn, const uint8_t *sack, uint32_t ts_echo,
		   uint64_t now)
{
	uint32_t newly = 0, i;

	if (psn_before(c->snd_nxt, ack_psn) || !psn_before(c->snd_una, ack_psn + 1)) {
		return; /* acks what was never sent, or nothing new at the cumulative edge */
	}
	while (psn_before(c->snd_una, ack_psn)) {
		struct tx_rec *rec = rec_of(c, c->snd_una);

		if (!rec->acked) {
			ack_rec(c, rec);
			newly++;
		}
		c->snd_una++;
	}
	if (psn_before(c->highest_acked, ack_psn)) {
		c->highest_acked = ack_psn;
	}
	for (i = 0; sack && i < HARP_SACK_BITS; i++) {
		uint32_t psn = ack_psn + 1 + i;
		struct tx_rec *rec;

		if (!sack[i / 8]) {
			i |= 7; /* skip an empty byte */
			continue;
		}
		if (!psn_before(psn, c->snd_nxt)) {
			break;
		}
		if (!(sack[i / 8] & (1u << (i % 8)))) {
			continue;
		}
		rec = rec_of(c, psn);
		if (!rec->acked) {
			ack_rec(c, rec);
			newly++;
		}
		if (psn_before(c->highest_acked, psn + 1)) {
			c->highest_acked = psn + 1;
		}
	}
	if (!newly) {
		return;
	}
	if (sack || ts_echo) { /* a reliable packet echoes 0 when it has nothing to echo */
		rtt_sample(&c->rtt, (uint32_t)(now / 1000) - ts_echo);
		undo_spurious_timeout(c, ts_echo);
	}
	cc_on_ack(&c->cc, newly, c->snd_una, &c->rtt, now);
	c->rto_base_ns = now;
	c->last_ack_ns = now;
	detect_loss(c);
}

/* ---- received reliable packets ---------------------------------------------------------------- */

static int deliver_data(struct harp_conn *c, const struct wire_pkt *p)
{
	const struct harp_hdr *h = &p->h;
	struct harp_req *r = c->recv_slots[h->rsn & (CONN_RECV_SLOTS - 1)];
	uint8_t i = h->buf_idx;

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
	if (h->len) {
		memcpy(r->recv.bufs[i] + h->offset, p->body, h->len);
	}
	r->recv.got[i] += h->len;
	c->stats.rx_bytes += h->len;
	if (r->recv.got[i] == h->msg_len) {
		r->recv.done_mask |= 1u << i;
		c->stats.msgs_received++;
		if (r->recv.done_mask == (1u << r->recv.nbufs) - 1) {
			recv_release(c, r);
		}
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
	if (r->recv.done_mask == (1u << r->recv.nbufs) - 1) {
		recv_release(c, r);
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
		memset(g, 0, sizeof(*g));
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
	return 0;
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

static bool rcv_bit(const struct harp_conn *c, uint32_t psn)
{
	uint32_t b = psn & (CONN_TXQ - 1);

	return c->rcv_bits[b / 64] & (1ull << (b % 64));
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

void conn_on_packet(struct harp_conn *c, const struct wire_pkt *p, uint64_t now)
{
	const struct harp_hdr *h = &p->h;
	uint32_t psn = h->psn;
	int err;

	if (h->type == HARP_PKT_ACK) {
		on_ack(c, h->ack_psn, p->body, h->ts_echo, now);
		return;
	}
	on_ack(c, h->ack_psn, NULL, h->ts_echo, now);
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
	if (psn_before(psn, c->rcv_nxt) || rcv_bit(c, psn)) {
		c->stats.rx_duplicates++;
		c->ack_now = true; /* our ack went missing, or the sender retransmitted early */
		return;
	}
	err = deliver(c, p);
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
		c->ack_now = true;
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

void conn_on_peer_close(struct harp_conn *c, uint32_t peer_rcv_nxt, uint64_t now)
{
	on_ack(c, peer_rcv_nxt, NULL, 0, now);
	conn_fail(c, -ECONNRESET);
}

/* ---- timers ------------------------------------------------------------------------------------ */

void conn_on_timer(struct harp_conn *c, uint64_t now, uint64_t peer_timeout_ns)
{
	uint32_t psn;

	if (c->snd_una == c->snd_nxt) {
		c->rto_base_ns = now;
		c->last_ack_ns = now;
		return;
	}
	if (now - c->last_ack_ns > peer_timeout_ns) {
		char peer[INET_ADDRSTRLEN] = "?";

		inet_ntop(AF_INET, &c->path.dst_ip, peer, sizeof(peer));
		pr_err("conn %u: no acknowledgement from peer %s for %llu ms "
		       "(HARP_PEER_TIMEOUT_MS); declaring it dead",
		       c->id, peer, (unsigned long long)(peer_timeout_ns / 1000000));
		conn_fail(c, -ETIMEDOUT);
		return;
	}
	if (now - c->rto_base_ns < (uint64_t)c->rtt.rto_us * 1000) {
		return;
	}
	/* Timeout: everything unacknowledged goes again, from a collapsed window. */
	c->stats.timeouts++;
	for (psn = c->snd_una; psn_before(psn, c->snd_nxt); psn++) {
		struct tx_rec *rec = rec_of(c, psn);

		if (!rec->acked) {
			queue_rtx(c, rec, psn);
		}
	}
	if (!c->rto_undo_armed) {
		c->cc_before_rto = c->cc;
		c->rto_undo_armed = true;
	}
	c->rto_at_us = (uint32_t)(now / 1000);
	cc_on_timeout(&c->cc, c->snd_nxt);
	rtt_backoff(&c->rtt);
	c->rto_base_ns = now;
}

/* ---- transmit ------------------------------------------------------------------------------------ */

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
	tx->payload = rec->type == HARP_PKT_DATA ? rec->sreq->send.buf + rec->offset : NULL;
}

/* Binds the first unmatched send to a buffer of the peer's oldest open receive, by tag. */
static bool match_send(struct harp_conn *c, struct harp_req *s)
{
	struct cts_group *g = &c->cts[c->cts_head_rsn & (CONN_RECV_SLOTS - 1)];
	uint8_t i;

	if (!g->valid || g->rsn != c->cts_head_rsn || g->arrived < g->nbufs) {
		return false; /* that receive is not (completely) announced yet */
	}
	for (i = 0; i < g->nbufs; i++) {
		if (!(g->matched_mask & (1u << i)) && g->tag[i] == s->send.tag) {
			break;
		}
	}
	if (i == g->nbufs) {
		return false; /* no buffer with this tag: wait for the receive that has one */
	}
	g->matched_mask |= 1u << i;
	s->send.matched = true;
	s->send.cap = g->cap[i];
	s->send.rsn = g->rsn;
	s->send.buf_idx = i;
	if (g->matched_mask == (1u << g->nbufs) - 1) {
		g->valid = false;
		c->cts_head_rsn++;
	}
	return true;
}

/* Fills rec with the next new reliable packet, if there is one. */
static bool next_new(struct harp_conn *c, struct tx_rec *rec)
{
	struct harp_req *r = c->cts_out_head, *s;
	uint64_t left;

	memset(rec, 0, sizeof(*rec));
	if (r) {
		/* Receives first: a CTS lets the peer start sending. */
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
		}
		return true;
	}
	if (c->ssn_cur == c->ssn_next) {
		return false;
	}
	s = c->send_slots[c->ssn_cur & (CONN_REQS - 1)];
	if (!s->send.matched && !match_send(c, s)) {
		return false;
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
	return true;
}

bool conn_next_tx(struct harp_conn *c, struct conn_tx *tx, uint64_t now)
{
	struct tx_rec *rec;
	uint32_t psn;

	if (atomic_load_explicit(&c->state, memory_order_relaxed) != CONN_READY) {
		return false;
	}
	if (c->inflight >= c->cc.cwnd) {
		return false;
	}
	while (c->rtx_head != c->rtx_tail) {
		psn = c->rtxq[c->rtx_head++ & (CONN_TXQ - 1)];
		rec = rec_of(c, psn);
		rec->rtx_queued = false;
		if (rec->acked || psn_before(psn, c->snd_una)) {
			continue;
		}
		c->stats.retransmits++;
		goto send;
	}
	if ((uint32_t)(c->snd_nxt - c->snd_una) >= CONN_TXQ - 1) {
		return false; /* the receiver's window: it remembers CONN_TXQ psns */
	}
	psn = c->snd_nxt;
	rec = rec_of(c, psn);
	if (!next_new(c, rec)) {
		return false;
	}
	if (c->snd_una == c->snd_nxt) {
		c->rto_base_ns = now; /* the timer starts with the first packet in flight */
	}
	c->snd_nxt++;
send:
	rec->sent_ns = now;
	rec->in_pipe = true;
	c->inflight++;
	c->stats.tx_packets++;
	header_of(c, rec, psn, tx, now);
	if (c->ack_due && !c->sacked_pending) {
		/* The cumulative ack this packet carries says all an ACK would: none is due now. */
		c->ack_due = false;
		c->ack_now = false;
		c->rx_since_ack = 0;
	}
	return true;
}

bool conn_ack_wanted(const struct harp_conn *c, uint64_t now)
{
	return c->ack_due && (c->ack_now || c->rx_since_ack >= CONN_ACK_EVERY ||
			      now - c->ack_due_ns >= CONN_ACK_DELAY_NS);
}

bool conn_make_ack(struct harp_conn *c, struct conn_tx *tx, uint64_t now)
{
	struct harp_hdr *h = &tx->h;
	uint32_t i;

	if (!c->ack_due) {
		return false;
	}
	c->ack_due = false;
	c->ack_now = false;
	c->rx_since_ack = 0;
	memset(h, 0, sizeof(*h));
	h->version = HARP_WIRE_VERSION;
	h->type = HARP_PKT_ACK;
	h->conn_id = c->peer_id;
	h->token = c->token;
	h->ack_psn = c->rcv_nxt;
	h->ts = (uint32_t)(now / 1000);
	h->ts_echo = c->last_ts;
	h->len = HARP_SACK_BYTES;
	memset(tx->sack, 0, sizeof(tx->sack));
	for (i = 0; c->sacked_pending && i < HARP_SACK_BITS; i++) {
		if (rcv_bit(c, c->rcv_nxt + 1 + i)) {
			tx->sack[i / 8] |= (uint8_t)(1u << (i % 8));
		}
	}
	tx->payload = NULL;
	return true;
}
