// SPDX-License-Identifier: Apache-2.0
/*
 * conn.c's bookkeeping, driven directly: two connections joined by an in-memory "wire" whose
 * packets the test holds, reorders, duplicates or drops at will. It checks what the receiver's
 * reassembly did (bytes placed, psns remembered, the selective-ack map it sends) and what the
 * sender's did with acks (records acked, losses found, retransmissions), with the clock in the
 * test's hands.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <arpa/inet.h>

#include "conn.h"
#include "pairs.h"
#include "sendq.h"

#define PAYLOAD 1000 /* payload bytes per DATA packet in these tests */
/* bytes of IP a full packet takes: what the windows count */
#define FULL (PAYLOAD + HARP_IP4_HLEN + HARP_UDP_HLEN + HARP_HDR_LEN)
#define WIRE_MAX 8192

struct pkt {
	struct harp_hdr h;
	uint16_t src_port, dst_port; /* the path it took, network order */
	uint8_t body[PAYLOAD > HARP_SACK_MAX_BYTES ? PAYLOAD : HARP_SACK_MAX_BYTES];
};

/* Packets in flight one way, in the order they were sent. */
struct wire {
	struct pkt *p;
	int n;
};

struct pair {
	struct harp_conn a, b; /* a sends, b receives (both can do both) */
	struct wire ab, ba;
	uint64_t now;
};

static void conn_init(struct harp_conn *c, uint32_t id, uint32_t peer_id, uint64_t now)
{
	memset(c, 0, sizeof(*c));
	c->id = id;
	c->peer_id = peer_id;
	c->token = 0x1122334455667788ull;
	c->payload_max = PAYLOAD;
	assert_int_equal(conn_alloc_state(c, 1024), 0);
	atomic_store(&c->state, CONN_READY);
	conn_start(c, now);
	assert_int_equal(conn_add_path(c, htons(47000), htons(47000), now), 0);
}

static int setup(void **state)
{
	struct pair *p = calloc(1, sizeof(*p));

	assert_non_null(p);
	p->now = 1000000000ull;
	conn_init(&p->a, 1, 2, p->now);
	conn_init(&p->b, 2, 1, p->now);
	p->ab.p = calloc(WIRE_MAX, sizeof(struct pkt));
	p->ba.p = calloc(WIRE_MAX, sizeof(struct pkt));
	assert_non_null(p->ab.p);
	assert_non_null(p->ba.p);
	*state = p;
	return 0;
}

static int teardown(void **state)
{
	struct pair *p = *state;

	conn_free(&p->a);
	conn_free(&p->b);
	free(p->ab.p);
	free(p->ba.p);
	free(p);
	return 0;
}

/* ---- requests, as api.c fills them ---------------------------------------------------------- */

static struct harp_req *post_send(struct harp_conn *c, const void *buf, uint64_t len, uint32_t tag)
{
	struct harp_req *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	r->kind = REQ_SEND;
	r->conn = c;
	r->send.buf = buf;
	r->send.len = len;
	r->send.tag = tag;
	atomic_store(&r->state, REQ_PENDING);
	assert_true(conn_take_request(c, r));
	return r;
}

static struct harp_req *post_recv(struct harp_conn *c, int n, uint8_t **bufs, const uint64_t *caps,
				  const uint32_t *tags)
{
	struct harp_req *r = calloc(1, sizeof(*r));
	int i;

	assert_non_null(r);
	r->kind = REQ_RECV;
	r->conn = c;
	r->recv.nbufs = n;
	r->recv.rsn = c->next_rsn++;
	for (i = 0; i < n; i++) {
		r->recv.bufs[i] = bufs[i];
		r->recv.cap[i] = caps[i];
		r->recv.tag[i] = tags[i];
		r->recv.msg_len[i] = UINT64_MAX;
	}
	atomic_store(&r->state, REQ_PENDING);
	assert_true(conn_take_request(c, r));
	return r;
}

static int req_state(struct harp_req *r)
{
	return atomic_load(&r->state);
}

/* ---- the wire ----------------------------------------------------------------------------- */

static void wire_put(struct wire *w, const struct conn_tx *tx)
{
	struct pkt *k;

	assert_true(w->n < WIRE_MAX);
	k = &w->p[w->n++];
	k->h = tx->h;
	k->src_port = tx->src_port;
	k->dst_port = tx->dst_port;
	if (tx->h.type == HARP_PKT_ACK) {
		assert_true(tx->h.len <= HARP_SACK_MAX_BYTES);
		memcpy(k->body, tx->sack, tx->h.len);
	} else if (tx->h.len) {
		assert_true(tx->h.len <= PAYLOAD);
		memcpy(k->body, tx->payload, tx->h.len);
	}
}

/* Everything c wants to send now (reliable packets, then an ack if one is due) goes on w. */
static int emit(struct harp_conn *c, struct wire *w, uint64_t now, bool force_ack)
{
	struct conn_tx tx;
	int n = 0;

	while (conn_next_tx(c, &tx, now)) {
		wire_put(w, &tx);
		n++;
	}
	if ((force_ack || conn_ack_wanted(c, now)) && conn_make_ack(c, &tx, now)) {
		wire_put(w, &tx);
		n++;
		if (tx.twin_src_port) { /* as the engine does: the same ack on a second path */
			tx.src_port = tx.twin_src_port;
			tx.dst_port = tx.twin_dst_port;
			wire_put(w, &tx);
		}
	}
	return n;
}

static void deliver_one(struct harp_conn *to, const struct pkt *k, uint64_t now)
{
	struct wire_pkt wp;

	memset(&wp, 0, sizeof(wp));
	wp.h = k->h;
	wp.body = k->body;
	conn_on_packet(to, &wp, now);
}

/* Delivers w's packets in their order and empties it. */
static void deliver_all(struct harp_conn *to, struct wire *w, uint64_t now)
{
	int i;

	for (i = 0; i < w->n; i++) {
		deliver_one(to, &w->p[i], now);
	}
	w->n = 0;
}

/* Runs both sides over a perfect wire until neither has anything to say. */
static void run_clean(struct pair *p)
{
	int rounds;

	for (rounds = 0; rounds < 10000; rounds++) {
		int n = emit(&p->a, &p->ab, p->now, false) + emit(&p->b, &p->ba, p->now, false);

		n += p->ab.n + p->ba.n; /* forced acks from the last round: they may open a window */
		deliver_all(&p->b, &p->ab, p->now);
		deliver_all(&p->a, &p->ba, p->now);
		p->now += 10000;
		if (!n && !p->a.ack_due && !p->b.ack_due) {
			return;
		}
		if (!n) {
			emit(&p->a, &p->ab, p->now, true);
			emit(&p->b, &p->ba, p->now, true);
		}
	}
	fail_msg("the connections never went quiet");
}

static void fill_pattern(uint8_t *buf, size_t len, uint32_t seed)
{
	size_t i;

	for (i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (uint8_t)(seed >> 16);
	}
}

/* Number of DATA packets on w. */
static int count_type(const struct wire *w, uint8_t type)
{
	int i, n = 0;

	for (i = 0; i < w->n; i++) {
		n += w->p[i].h.type == type;
	}
	return n;
}

/* Announces one receive of b's and lets a see its CTS. */
static struct harp_req *announce_recv(struct pair *p, uint8_t *buf, uint64_t cap, uint32_t tag)
{
	struct harp_req *r = post_recv(&p->b, 1, &buf, &cap, &tag);

	emit(&p->b, &p->ba, p->now, false);
	assert_int_equal(count_type(&p->ba, HARP_PKT_CTS), 1);
	deliver_all(&p->a, &p->ba, p->now);
	return r;
}

/* ---- tests -------------------------------------------------------------------------------------- */

static void test_in_order(void **state)
{
	struct pair *p = *state;
	size_t len = 10 * PAYLOAD + 17;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	struct harp_req *r, *s;

	fill_pattern(src, len, 1);
	r = announce_recv(p, dst, len, 7);
	s = post_send(&p->a, src, len, 7);
	run_clean(p);
	assert_int_equal(req_state(r), REQ_DONE);
	assert_int_equal(req_state(s), REQ_DONE);
	assert_int_equal(r->recv.got[0], len);
	assert_int_equal(r->recv.msg_len[0], len);
	assert_memory_equal(src, dst, len);
	/* b received 11 DATA packets in order: nothing remembered beyond rcv_nxt */
	assert_int_equal(p->b.rcv_nxt, 11);
	assert_int_equal(p->b.sacked_pending, 0);
	assert_int_equal(p->b.stats.rx_out_of_order, 0);
	assert_int_equal(p->b.stats.rx_duplicates, 0);
	/* a's every packet acked */
	assert_int_equal(p->a.snd_una, p->a.snd_nxt);
	assert_int_equal(p->a.inflight, 0);
	assert_int_equal(p->a.stats.retransmits, 0);
	free(src);
	free(dst);
	free(r);
	free(s);
}

/* Packets in reverse: each lands at its offset, the sack map says exactly what is held. */
static void test_reassembly_reverse(void **state)
{
	struct pair *p = *state;
	size_t len = 40 * PAYLOAD;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	struct harp_req *r, *s;
	struct conn_tx ack;
	int i, n;

	fill_pattern(src, len, 2);
	r = announce_recv(p, dst, len, 1);
	s = post_send(&p->a, src, len, 1);
	emit(&p->a, &p->ab, p->now, false);
	n = p->ab.n;
	assert_int_equal(n, 32); /* the initial window */
	for (i = n - 1; i >= 1; i--) {
		deliver_one(&p->b, &p->ab.p[i], p->now);
	}
	assert_int_equal(p->b.rcv_nxt, 0);
	assert_int_equal(p->b.sacked_pending, n - 1);
	assert_int_equal(p->b.stats.rx_out_of_order, n - 1);
	assert_int_equal(req_state(r), REQ_PENDING);
	/* payload already placed, straight into the buffer */
	assert_memory_equal(dst + PAYLOAD, src + PAYLOAD, (size_t)(n - 1) * PAYLOAD);
	assert_true(conn_ack_wanted(&p->b, p->now)); /* a hole: the ack goes at once */
	assert_true(conn_make_ack(&p->b, &ack, p->now));
	assert_int_equal(ack.h.type, HARP_PKT_ACK);
	assert_int_equal(ack.h.ack_psn, 0);
	assert_int_equal(ack.h.len, (n - 1 + 7) / 8); /* just the bytes the holes need */
	for (i = 0; i < ack.h.len * 8; i++) {
		bool want = i < n - 1; /* psn 1 + i held */
		bool got = ack.sack[i / 8] & (1u << (i % 8));

		assert_int_equal(got, want);
	}
	/* the sender learns from that map: 31 records acked, one in the pipe */
	{
		struct wire_pkt wp = { .h = ack.h, .body = ack.sack };

		conn_on_packet(&p->a, &wp, p->now + 1000);
	}
	assert_int_equal(p->a.snd_una, 0);
	assert_int_equal(p->a.inflight, 1);
	assert_true(p->a.txq[0].acked == false);
	for (i = 1; i < n; i++) {
		assert_true(p->a.txq[i].acked);
	}
	/* the hole fills: the cumulative edge jumps past every held psn and forgets them */
	deliver_one(&p->b, &p->ab.p[0], p->now);
	p->ab.n = 0;
	assert_int_equal(p->b.rcv_nxt, n);
	assert_int_equal(p->b.sacked_pending, 0);
	for (i = 0; i < CONN_TXQ / 64; i++) {
		assert_int_equal(p->b.rcv_bits[i], 0);
	}
	run_clean(p);
	assert_int_equal(req_state(r), REQ_DONE);
	assert_int_equal(req_state(s), REQ_DONE);
	assert_memory_equal(src, dst, len);
	assert_int_equal(p->a.stats.retransmits, 0);
	free(src);
	free(dst);
	free(r);
	free(s);
}

/* Every packet twice, and old ones again after the message completed: applied once. */
static void test_duplicates_once(void **state)
{
	struct pair *p = *state;
	size_t len = 5 * PAYLOAD;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	struct harp_req *r, *s;
	struct pkt old;
	int i, n;

	fill_pattern(src, len, 3);
	r = announce_recv(p, dst, len, 4);
	s = post_send(&p->a, src, len, 4);
	emit(&p->a, &p->ab, p->now, false);
	n = p->ab.n;
	assert_int_equal(n, 5);
	old = p->ab.p[2];
	for (i = 0; i < n; i++) {
		deliver_one(&p->b, &p->ab.p[i], p->now);
		deliver_one(&p->b, &p->ab.p[i], p->now);
	}
	p->ab.n = 0;
	assert_int_equal(p->b.stats.rx_duplicates, n);
	assert_int_equal(req_state(r), REQ_DONE);
	assert_int_equal(r->recv.got[0], len);
	assert_memory_equal(src, dst, len);
	/* a duplicate of something long acked: counted, ack_now set, buffer untouched */
	memset(dst, 0, len);
	p->b.ack_now = false;
	deliver_one(&p->b, &old, p->now);
	assert_int_equal(p->b.stats.rx_duplicates, n + 1);
	assert_true(p->b.ack_now);
	for (i = 0; i < (int)len; i++) {
		assert_int_equal(dst[i], 0);
	}
	run_clean(p);
	assert_int_equal(req_state(s), REQ_DONE);
	free(src);
	free(dst);
	free(r);
	free(s);
}

/* A psn beyond any window the sender may use is not trusted, and nothing is placed. */
static void test_beyond_window(void **state)
{
	struct pair *p = *state;
	uint8_t dst[64] = { 0 };
	struct harp_req *r;
	struct pkt k;

	r = announce_recv(p, dst, sizeof(dst), 0);
	memset(&k, 0, sizeof(k));
	k.h.version = HARP_WIRE_VERSION;
	k.h.type = HARP_PKT_DATA;
	k.h.psn = p->b.rcv_nxt + CONN_TXQ;
	k.h.rsn = 0;
	k.h.msg_len = 8;
	k.h.len = 8;
	memset(k.body, 0xab, 8);
	deliver_one(&p->b, &k, p->now);
	assert_int_equal(p->b.stats.rx_duplicates, 1);
	assert_int_equal(p->b.sacked_pending, 0);
	assert_int_equal(r->recv.got[0], 0);
	assert_int_equal(dst[0], 0);
	assert_int_equal(atomic_load(&p->b.state), CONN_READY);
	/* inside the window but for a receive never offered: a protocol error, the conn fails */
	k.h.psn = p->b.rcv_nxt + 1;
	k.h.rsn = 5;
	deliver_one(&p->b, &k, p->now);
	assert_int_equal(atomic_load(&p->b.state), CONN_FAILED);
	assert_int_equal(atomic_load(&p->b.fail_err), -EPROTO);
	assert_int_equal(req_state(r), REQ_FAILED);
	assert_int_equal(r->err, -EPROTO);
	free(r);
}

/*
 * A packet that was only late: RACK sends it again, the receiver then sees it twice and says so
 * in its next ACK (HARP_ACK_F_DUP), and the sender widens its reordering window, once per RTT.
 */
static void test_reorder_window_widens(void **state)
{
	struct pair *p = *state;
	size_t len = 20 * PAYLOAD;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	struct harp_req *r, *s;
	struct pkt late, dup_ack;
	struct conn_tx tx;
	int i;

	fill_pattern(src, len, 6);
	r = announce_recv(p, dst, len, 9);
	s = post_send(&p->a, src, len, 9);
	assert_int_equal(p->a.reo_mult, 1);
	for (i = 0; i < 10; i++) {
		assert_true(conn_next_tx(&p->a, &tx, p->now));
		wire_put(&p->ab, &tx);
	}
	p->now += 5000000;
	emit(&p->a, &p->ab, p->now, false);
	late = p->ab.p[3];
	for (i = 0; i < 20; i++) {
		if (i != 3) {
			deliver_one(&p->b, &p->ab.p[i], p->now);
		}
	}
	p->ab.n = 0;
	p->now += 1000000;
	emit(&p->b, &p->ba, p->now, false);
	deliver_all(&p->a, &p->ba, p->now);
	assert_int_equal(p->a.stats.fast_retransmits, 1);
	/* the original arrives after all, then the copy: a duplicate, reported once */
	deliver_one(&p->b, &late, p->now);
	assert_true(conn_next_tx(&p->a, &tx, p->now));
	assert_int_equal(tx.h.psn, 3);
	wire_put(&p->ab, &tx);
	deliver_all(&p->b, &p->ab, p->now);
	assert_int_equal(p->b.stats.rx_duplicates, 1);
	emit(&p->b, &p->ba, p->now, true);
	assert_true(p->ba.n >= 1);
	assert_int_equal(p->ba.p[0].h.type, HARP_PKT_ACK);
	assert_true(p->ba.p[0].h.flags & HARP_ACK_F_DUP);
	dup_ack = p->ba.p[0];
	deliver_all(&p->a, &p->ba, p->now);
	assert_int_equal(p->a.reo_mult, 2);
	/* the next ACK says nothing of it again */
	p->b.ack_due = true;
	emit(&p->b, &p->ba, p->now, true);
	assert_true(p->ba.n >= 1);
	assert_false(p->ba.p[0].h.flags & HARP_ACK_F_DUP);
	p->ba.n = 0;
	/* reports widen it at most once per RTT (set back to 1 here to see that), and never past
	 * CONN_REO_MULT_MAX */
	p->a.reo_mult = 1;
	deliver_one(&p->a, &dup_ack, p->now + 1000);
	assert_int_equal(p->a.reo_mult, 1);
	deliver_one(&p->a, &dup_ack, p->now + 2 * (uint64_t)p->a.rtt.srtt_us * 1000 + 1000);
	assert_int_equal(p->a.reo_mult, 2);
	deliver_one(&p->a, &dup_ack, p->now + 4 * (uint64_t)p->a.rtt.srtt_us * 1000 + 1000);
	assert_int_equal(p->a.reo_mult, CONN_REO_MULT_MAX);
	p->now += 4 * (uint64_t)p->a.rtt.srtt_us * 1000 + 2000;
	run_clean(p);
	assert_int_equal(req_state(r), REQ_DONE);
	assert_int_equal(req_state(s), REQ_DONE);
	assert_memory_equal(src, dst, len);
	free(src);
	free(dst);
	free(r);
	free(s);
}

/* One lost packet among later ones that are acked: RACK finds it, it goes again, same bytes. */
static void test_rack_fast_retransmit(void **state)
{
	struct pair *p = *state;
	size_t len = 20 * PAYLOAD;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	struct harp_req *r, *s;
	struct pkt lost;
	struct conn_tx tx;
	int i;

	fill_pattern(src, len, 5);
	r = announce_recv(p, dst, len, 9);
	s = post_send(&p->a, src, len, 9);
	/* psns 0..9 now, 10..19 5 ms later */
	assert_true(conn_cwnd(&p->a) >= 20 * FULL);
	for (i = 0; i < 10; i++) {
		assert_true(conn_next_tx(&p->a, &tx, p->now));
		wire_put(&p->ab, &tx);
	}
	p->now += 5000000;
	emit(&p->a, &p->ab, p->now, false); /* 10 more DATA, then a's ack of the CTS */
	assert_int_equal(count_type(&p->ab, HARP_PKT_DATA), 20);
	lost = p->ab.p[3];
	for (i = 0; i < 20; i++) {
		if (i != 3) {
			deliver_one(&p->b, &p->ab.p[i], p->now);
		}
	}
	p->ab.n = 0;
	assert_int_equal(p->b.rcv_nxt, 3);
	assert_int_equal(p->b.sacked_pending, 16);
	p->now += 1000000;
	assert_true(emit(&p->b, &p->ba, p->now, false) >= 1); /* its ack, alone or carried */
	assert_false(p->b.ack_due);
	deliver_all(&p->a, &p->ba, p->now);
	assert_int_equal(p->a.snd_una, 3);
	assert_int_equal(p->a.stats.fast_retransmits, 1);
	assert_int_equal(p->a.stats.timeouts, 0);
	/* the retransmission comes first and carries the lost packet's exact slice */
	assert_true(conn_next_tx(&p->a, &tx, p->now));
	assert_int_equal(tx.h.psn, 3);
	assert_int_equal(tx.h.offset, lost.h.offset);
	assert_int_equal(tx.h.len, lost.h.len);
	assert_memory_equal(tx.payload, lost.body, lost.h.len);
	assert_int_equal(p->a.stats.retransmits, 1);
	wire_put(&p->ab, &tx);
	run_clean(p);
	assert_int_equal(req_state(r), REQ_DONE);
	assert_int_equal(req_state(s), REQ_DONE);
	assert_memory_equal(src, dst, len);
	assert_int_equal(p->b.rcv_nxt, 20);
	free(src);
	free(dst);
	free(r);
	free(s);
}

/* Nothing acked: the timer sends everything again, and an ack of the originals undoes it. */
static void test_timeout_and_undo(void **state)
{
	struct pair *p = *state;
	size_t len = 4 * PAYLOAD;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	struct harp_req *r, *s;
	struct wire held;
	uint32_t cwnd_before;

	fill_pattern(src, len, 6);
	r = announce_recv(p, dst, len, 2);
	s = post_send(&p->a, src, len, 2);
	emit(&p->a, &p->ab, p->now, false);
	held = p->ab;
	held.p = malloc(sizeof(struct pkt) * (size_t)held.n);
	memcpy(held.p, p->ab.p, sizeof(struct pkt) * (size_t)held.n);
	p->ab.n = 0;
	cwnd_before = conn_cwnd(&p->a);
	p->now += (uint64_t)p->a.rtt.rto_us * 1000 + 1;
	conn_on_timer(&p->a, p->now, UINT64_MAX / 2);
	assert_int_equal(p->a.stats.timeouts, 1);
	assert_true(conn_cwnd(&p->a) < cwnd_before);
	emit(&p->a, &p->ab, p->now, false);
	assert_true(count_type(&p->ab, HARP_PKT_DATA) >= 1);
	assert_int_equal(p->a.stats.retransmits, (uint64_t)count_type(&p->ab, HARP_PKT_DATA));
	p->ab.n = 0; /* the retransmissions are lost; the late originals arrive */
	deliver_all(&p->b, &held, p->now);
	emit(&p->b, &p->ba, p->now, true);
	deliver_all(&p->a, &p->ba, p->now);
	assert_int_equal(p->a.stats.spurious_timeouts, 1);
	assert_true(conn_cwnd(&p->a) >= cwnd_before); /* restored, then grown by the ack */
	run_clean(p);
	assert_int_equal(req_state(r), REQ_DONE);
	assert_int_equal(req_state(s), REQ_DONE);
	assert_memory_equal(src, dst, len);
	free(held.p);
	free(src);
	free(dst);
	free(r);
	free(s);
}

/*
 * A rebind of the engine's queue (a zero-copy stall's fall back, or zero copy again) loses what
 * its rings held: what a has unacked goes again at once, not at a timer backed off by the
 * timeouts before it, and the timer starts again from the measured round trip; each side owes
 * its ack again. Not a timeout: the count and the windows stay.
 */
static void test_rebind_resends(void **state)
{
	struct pair *p = *state;
	size_t len = 4 * PAYLOAD;
	uint8_t *src = malloc(len), *dst = calloc(1, len), one[PAYLOAD], got[PAYLOAD];
	struct harp_req *r, *s;
	uint32_t rto_measured, cwnd;
	uint64_t timeouts;
	int i;

	fill_pattern(one, sizeof(one), 7);
	fill_pattern(src, len, 8);
	r = announce_recv(p, got, sizeof(got), 1);
	s = post_send(&p->a, one, sizeof(one), 1);
	run_clean(p); /* a round trip measured */
	assert_int_equal(req_state(s), REQ_DONE);
	free(r);
	free(s);
	assert_true(p->a.rtt.have_sample);
	rto_measured = p->a.rtt.rto_us;

	r = announce_recv(p, dst, len, 2);
	s = post_send(&p->a, src, len, 2);
	emit(&p->a, &p->ab, p->now, false);
	for (i = 0; i < 4; i++) { /* every copy lost: the timer backs off */
		p->ab.n = 0;
		p->now += (uint64_t)p->a.rtt.rto_us * 1000 + 1;
		conn_on_timer(&p->a, p->now, UINT64_MAX / 2);
		emit(&p->a, &p->ab, p->now, false);
	}
	p->ab.n = 0;
	assert_true(p->a.rtt.rto_us >= 8 * rto_measured);
	timeouts = p->a.stats.timeouts;
	cwnd = conn_cwnd(&p->a);

	p->now += 1000000; /* well inside the backed-off timeout */
	conn_on_rebind(&p->a, p->now);
	conn_on_rebind(&p->b, p->now);
	assert_int_equal(p->a.rtt.rto_us, rto_measured);
	assert_int_equal(p->a.stats.timeouts, timeouts);
	assert_int_equal(conn_cwnd(&p->a), cwnd);
	assert_true(conn_ack_wanted(&p->a, p->now));
	assert_true(conn_ack_wanted(&p->b, p->now));
	emit(&p->a, &p->ab, p->now, false); /* at once, no timer; its DATA carries a's ack */
	assert_true(count_type(&p->ab, HARP_PKT_DATA) >= 1);
	assert_true(emit(&p->b, &p->ba, p->now, false) >= 1); /* its ack, alone or carried */
	assert_false(p->b.ack_due);
	run_clean(p);
	assert_int_equal(req_state(r), REQ_DONE);
	assert_int_equal(req_state(s), REQ_DONE);
	assert_memory_equal(src, dst, len);
	assert_memory_equal(one, got, sizeof(one));
	free(src);
	free(dst);
	free(r);
	free(s);
}

/*
 * Liveness with nothing in flight: b waits on a receive; after a quarter of the peer timeout of
 * silence b's ACK asks a to answer (the ping flag), a answers at once, and that answer counts as
 * hearing from a. Once a falls silent for the whole timeout, b's receive fails with ETIMEDOUT.
 * a, with nothing waiting, neither pings nor times out.
 */
static void test_idle_peer_ping(void **state)
{
	struct pair *p = *state;
	const uint64_t timeout = 1000000000ull, step = timeout / 16;
	uint8_t dst[64];
	struct harp_req *r = announce_recv(p, dst, sizeof(dst), 3);
	uint64_t heard, t;
	int i;

	run_clean(p); /* the CTS is acked: nothing in flight either way */
	assert_int_equal(p->b.snd_una, p->b.snd_nxt);
	conn_on_timer(&p->b, p->now, timeout);
	p->now += timeout / 5;
	conn_on_timer(&p->b, p->now, timeout);
	assert_false(conn_ack_wanted(&p->b, p->now)); /* a fifth of the timeout: not yet */
	p->now += timeout / 10;
	conn_on_timer(&p->b, p->now, timeout);
	assert_int_equal(emit(&p->b, &p->ba, p->now, false), 1);
	assert_int_equal(p->ba.p[0].h.type, HARP_PKT_ACK);
	assert_int_equal(p->ba.p[0].h.flags, HARP_ACK_F_PING);
	assert_int_equal(p->b.stats.pings, 1);
	deliver_all(&p->a, &p->ba, p->now);
	assert_int_equal(emit(&p->a, &p->ab, p->now, false), 1); /* answered at once */
	assert_int_equal(p->ab.p[0].h.type, HARP_PKT_ACK);
	assert_int_equal(p->ab.p[0].h.flags, 0);
	deliver_all(&p->b, &p->ab, p->now);
	heard = p->now;
	/* a freezes: b keeps pinging into the void and gives up one timeout after it heard a */
	for (i = 0; i < 32 && atomic_load(&p->b.state) == CONN_READY; i++) {
		p->now += step;
		conn_on_timer(&p->b, p->now, timeout);
		conn_on_timer(&p->a, p->now, timeout);
		emit(&p->b, &p->ba, p->now, false);
		p->ba.n = 0;
		emit(&p->a, &p->ab, p->now, false);
		assert_int_equal(p->ab.n, 0); /* a waits on nothing: it says nothing */
	}
	t = p->now - heard;
	assert_int_equal(atomic_load(&p->b.state), CONN_FAILED);
	assert_true(t > timeout && t <= timeout + step);
	assert_int_equal(req_state(r), REQ_FAILED);
	assert_int_equal(r->err, -ETIMEDOUT);
	assert_true(p->b.stats.pings >= 5);
	assert_int_equal(p->a.stats.pings, 0);
	assert_int_equal(atomic_load(&p->a.state), CONN_READY);
	free(r);
}

/*
 * A connection whose probes never found a path waits on the peer with nothing to hear: its
 * silence is the network's, not the peer's, and the probing judges it (conn_paths_hopeless,
 * whose error names the queues the probes reached). It used to be declared dead first, "nothing
 * came from peer", one peer timeout after the receive was posted.
 */
static void test_no_path_not_dead(void **state)
{
	struct pair *p = *state;
	const uint64_t timeout = 1000000000ull;
	uint8_t dst[64], *buf = dst;
	uint64_t cap = sizeof(dst);
	uint32_t tag = 1;
	struct harp_req *r;
	struct conn_tx tx;
	int i;

	conn_paths_init(&p->b, 2, 47000, 16, 50000, 8, 5);
	p->b.paths[0].live = false; /* none found yet */
	p->b.paths_live = 0;
	r = post_recv(&p->b, 1, &buf, &cap, &tag);
	for (i = 0; i < 40; i++) {
		p->now += timeout / 8;
		conn_on_timer(&p->b, p->now, timeout);
		while (conn_next_probe(&p->b, &tx, p->now)) {
		}
	}
	assert_int_equal(atomic_load(&p->b.state), CONN_READY); /* five timeouts on */
	assert_int_equal(req_state(r), REQ_PENDING);
	/* the probing's to judge: once its last round has gone unanswered long enough */
	assert_true(conn_paths_hopeless(&p->b, p->now + 300000000ull, timeout));
	free(r);
}

/* A grouped receive: sends in another order find their buffers by tag. */
static void test_grouped_tags(void **state)
{
	struct pair *p = *state;
	uint8_t src[3][3000], dst[3][3000];
	uint8_t *bufs[3] = { dst[0], dst[1], dst[2] };
	uint64_t caps[3] = { 3000, 3000, 3000 };
	uint32_t tags[3] = { 10, 11, 12 };
	uint64_t lens[3] = { 2500, 0, 3000 };
	struct harp_req *r, *s[3];
	int order[3] = { 2, 0, 1 }, i;

	memset(dst, 0, sizeof(dst));
	for (i = 0; i < 3; i++) {
		fill_pattern(src[i], sizeof(src[i]), 20u + (uint32_t)i);
	}
	r = post_recv(&p->b, 3, bufs, caps, tags);
	for (i = 0; i < 3; i++) {
		int k = order[i];

		s[i] = post_send(&p->a, src[k], lens[k], tags[k]);
	}
	run_clean(p);
	assert_int_equal(req_state(r), REQ_DONE);
	for (i = 0; i < 3; i++) {
		assert_int_equal(req_state(s[i]), REQ_DONE);
		assert_int_equal(r->recv.msg_len[i], lens[i]);
		assert_memory_equal(src[i], dst[i], lens[i]);
		free(s[i]);
	}
	free(r);
}

/* Too big for the posted buffer: both sides fail with EMSGSIZE, and the next message flows. */
static void test_msgsize(void **state)
{
	struct pair *p = *state;
	uint8_t src[200], dst[100], dst2[100];
	struct harp_req *r, *s, *r2, *s2;

	fill_pattern(src, sizeof(src), 30);
	memset(dst, 0, sizeof(dst));
	r = announce_recv(p, dst, 100, 3);
	s = post_send(&p->a, src, 101, 3);
	r2 = announce_recv(p, dst2, 100, 3);
	s2 = post_send(&p->a, src + 100, 100, 3);
	run_clean(p);
	assert_int_equal(req_state(s), REQ_FAILED);
	assert_int_equal(s->err, -EMSGSIZE);
	assert_int_equal(req_state(r), REQ_FAILED);
	assert_int_equal(r->err, -EMSGSIZE);
	assert_int_equal(r->recv.msg_len[0], 101);
	assert_int_equal(r->recv.got[0], 0);
	for (int i = 0; i < 100; i++) {
		assert_int_equal(dst[i], 0); /* nothing truncated into it */
	}
	assert_int_equal(req_state(s2), REQ_DONE);
	assert_int_equal(req_state(r2), REQ_DONE);
	assert_memory_equal(dst2, src + 100, 100);
	assert_int_equal(atomic_load(&p->a.state), CONN_READY);
	assert_int_equal(atomic_load(&p->b.state), CONN_READY);
	free(r);
	free(s);
	free(r2);
	free(s2);
}

/* ---- a seeded bad network, both directions, many messages ---------------------------------- */

static uint64_t rng_state;

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)rng_state;
}

/* Moves w's packets to conn `to`, dropping, duplicating and shuffling some. */
static void deliver_bad(struct harp_conn *to, struct wire *w, uint64_t now)
{
	int i;

	for (i = w->n - 1; i > 0; i--) { /* reorder: swap a quarter of neighbours */
		if (rnd() % 4 == 0) {
			struct pkt t = w->p[i];

			w->p[i] = w->p[i - 1];
			w->p[i - 1] = t;
		}
	}
	for (i = 0; i < w->n; i++) {
		uint32_t x = rnd() % 100;

		if (x < 5) {
			continue; /* 5% lost */
		}
		deliver_one(to, &w->p[i], now);
		if (x < 8) {
			deliver_one(to, &w->p[i], now); /* 3% duplicated */
		}
	}
	w->n = 0;
}

static void test_lossy_many_messages(void **state)
{
	enum { MSGS = 300, WINDOW = 8, MAXLEN = 40000 };
	struct pair *p = *state;
	uint8_t *src = malloc(MAXLEN), *dst = malloc((size_t)WINDOW * MAXLEN);
	struct harp_req *rq[WINDOW] = { 0 }, *sq[WINDOW] = { 0 };
	uint64_t lens[MSGS], verified = 0;
	int posted_r = 0, posted_s = 0, done_r = 0, done_s = 0, rounds;

	rng_state = 0x9e3779b97f4a7c15ull;
	fill_pattern(src, MAXLEN, 40);
	for (int i = 0; i < MSGS; i++) {
		lens[i] = rnd() % MAXLEN;
	}
	for (rounds = 0; rounds < 200000 && (done_r < MSGS || done_s < MSGS); rounds++) {
		while (posted_r < MSGS && posted_r - done_r < WINDOW) {
			uint8_t *b = dst + (size_t)(posted_r % WINDOW) * MAXLEN;
			uint64_t cap = MAXLEN;
			uint32_t tag = 0;

			memset(b, 0, MAXLEN);
			rq[posted_r % WINDOW] = post_recv(&p->b, 1, &b, &cap, &tag);
			posted_r++;
		}
		while (posted_s < MSGS && posted_s - done_s < WINDOW) {
			/* message i starts at byte i of the pattern: a misplaced slice shows */
			uint64_t off = (uint64_t)posted_s % 97;
			uint64_t len = lens[posted_s] < MAXLEN - off ? lens[posted_s] : MAXLEN - off;

			lens[posted_s] = len;
			sq[posted_s % WINDOW] = post_send(&p->a, src + off, len, 0);
			posted_s++;
		}
		emit(&p->a, &p->ab, p->now, false);
		emit(&p->b, &p->ba, p->now, false);
		deliver_bad(&p->b, &p->ab, p->now);
		deliver_bad(&p->a, &p->ba, p->now);
		p->now += 20000;
		conn_on_timer(&p->a, p->now, UINT64_MAX / 2);
		conn_on_timer(&p->b, p->now, UINT64_MAX / 2);
		while (done_r < posted_r && req_state(rq[done_r % WINDOW]) != REQ_PENDING) {
			struct harp_req *r = rq[done_r % WINDOW];
			uint64_t off = (uint64_t)done_r % 97;

			assert_int_equal(req_state(r), REQ_DONE);
			assert_int_equal(r->recv.msg_len[0], lens[done_r]);
			assert_memory_equal(r->recv.bufs[0], src + off, lens[done_r]);
			verified += lens[done_r];
			free(r);
			done_r++;
		}
		while (done_s < posted_s && req_state(sq[done_s % WINDOW]) != REQ_PENDING) {
			assert_int_equal(req_state(sq[done_s % WINDOW]), REQ_DONE);
			free(sq[done_s % WINDOW]);
			done_s++;
		}
	}
	printf("# %d messages, %llu bytes verified in %d rounds; a: %llu retransmits (%llu fast, "
	       "%llu timeouts); b: %llu duplicates, %llu out of order\n",
	       done_r, (unsigned long long)verified, rounds,
	       (unsigned long long)p->a.stats.retransmits,
	       (unsigned long long)p->a.stats.fast_retransmits,
	       (unsigned long long)p->a.stats.timeouts, (unsigned long long)p->b.stats.rx_duplicates,
	       (unsigned long long)p->b.stats.rx_out_of_order);
	assert_int_equal(done_r, MSGS);
	assert_int_equal(done_s, MSGS);
	assert_true(p->a.stats.retransmits > 0);
	assert_true(p->b.stats.rx_duplicates > 0);
	assert_true(p->b.stats.rx_out_of_order > 0);
	assert_int_equal(p->b.stats.msgs_received, MSGS);
	free(src);
	free(dst);
}

/* Adds paths 47001.. to both sides, so each has n. */
static void more_paths(struct pair *p, int n)
{
	int i;

	p->a.paths_want = p->b.paths_want = (uint32_t)n;
	for (i = 1; i < n; i++) {
		assert_int_equal(conn_add_path(&p->a, htons((uint16_t)(47000 + i)), htons(47000),
					       p->now),
				 i);
		assert_int_equal(conn_add_path(&p->b, htons((uint16_t)(47000 + i)), htons(47000),
					       p->now),
				 i);
	}
}

/*
 * A send of at most CONN_EAGER_BYTES completes when its packet first goes out, from a copy: the
 * caller may overwrite its buffer at once, a loss is repaired with the original bytes, and the
 * receiver's ack need not hurry. A larger one completes on the ack.
 */
static void test_eager_send(void **state)
{
	struct pair *p = *state;
	uint8_t src[CONN_EAGER_BYTES], dst[CONN_EAGER_BYTES], big[CONN_EAGER_BYTES + 1];
	uint8_t big_dst[sizeof(big)], orig[sizeof(src)];
	struct harp_req *r, *s;
	struct pkt lost;

	fill_pattern(src, sizeof(src), 11);
	memcpy(orig, src, sizeof(src));
	r = announce_recv(p, dst, sizeof(dst), 3);
	s = post_send(&p->a, src, sizeof(src), 3);
	emit(&p->a, &p->ab, p->now, false);
	assert_int_equal(count_type(&p->ab, HARP_PKT_DATA), 1);
	assert_int_equal(req_state(s), REQ_DONE); /* no ack yet */
	assert_int_equal(p->ab.p[0].h.flags, HARP_DATA_F_DONE);
	assert_true(p->a.eager_used != 0);
	memset(src, 0xee, sizeof(src)); /* the caller reuses its buffer */
	lost = p->ab.p[0];
	p->ab.n = 0;
	/* lost: the timer sends it again, from the copy */
	p->now += 2000000000ull;
	conn_on_timer(&p->a, p->now, UINT64_MAX / 2);
	emit(&p->a, &p->ab, p->now, false);
	assert_int_equal(count_type(&p->ab, HARP_PKT_DATA), 1);
	assert_int_equal(p->ab.p[0].h.psn, lost.h.psn);
	assert_memory_equal(p->ab.p[0].body, orig, sizeof(orig));
	deliver_all(&p->b, &p->ab, p->now);
	assert_int_equal(req_state(r), REQ_DONE);
	assert_memory_equal(dst, orig, sizeof(orig));
	/* the receiver's last receive is done, but the sender is not waiting: no ack at once */
	assert_false(conn_ack_wanted(&p->b, p->now));
	assert_true(conn_ack_wanted(&p->b, p->now + CONN_ACK_DELAY_NS));
	run_clean(p);
	assert_int_equal(p->a.eager_used, 0); /* the slot is free once acked */
	free(r);
	free(s);

	/* one byte more: the send waits for the ack, and the ack goes at once */
	fill_pattern(big, sizeof(big), 12);
	r = announce_recv(p, big_dst, sizeof(big_dst), 4);
	s = post_send(&p->a, big, sizeof(big), 4);
	emit(&p->a, &p->ab, p->now, false);
	assert_int_equal(p->ab.p[0].h.flags, 0);
	assert_int_equal(req_state(s), REQ_PENDING);
	deliver_all(&p->b, &p->ab, p->now);
	assert_true(conn_ack_wanted(&p->b, p->now));
	run_clean(p);
	assert_int_equal(req_state(s), REQ_DONE);
	assert_memory_equal(big_dst, big, sizeof(big));
	free(r);
	free(s);
}

/*
 * The copies are the eager path's credit: with all CONN_EAGER_SLOTS sends unacked, the next
 * small send completes on its ack, as a large one does, and an ack gives the slots back.
 */
static void test_eager_credit(void **state)
{
	enum { N = CONN_EAGER_SLOTS + 1 };
	struct pair *p = *state;
	static uint8_t src[N][8], dst[N][8];
	struct harp_req *r[N], *s[N];
	int i;

	p->a.paths[0].cc.cwnd = p->b.paths[0].cc.cwnd = 2 * N * FULL; /* room for all at once */
	for (i = 0; i < N; i++) {
		uint8_t *buf = dst[i];
		uint64_t cap = sizeof(dst[i]);
		uint32_t tag = 7;

		r[i] = post_recv(&p->b, 1, &buf, &cap, &tag);
	}
	emit(&p->b, &p->ba, p->now, false);
	deliver_all(&p->a, &p->ba, p->now);
	for (i = 0; i < N; i++) {
		fill_pattern(src[i], sizeof(src[i]), (uint32_t)i);
		s[i] = post_send(&p->a, src[i], sizeof(src[i]), 7);
	}
	emit(&p->a, &p->ab, p->now, false);
	assert_int_equal(count_type(&p->ab, HARP_PKT_DATA), N);
	for (i = 0; i < CONN_EAGER_SLOTS; i++) {
		assert_int_equal(req_state(s[i]), REQ_DONE);
	}
	assert_int_equal(req_state(s[N - 1]), REQ_PENDING); /* no copy left for it */
	assert_int_equal(p->ab.p[N - 1].h.flags, 0);
	assert_true(p->a.eager_used == ~0ull);
	deliver_all(&p->b, &p->ab, p->now);
	run_clean(p);
	assert_int_equal(req_state(s[N - 1]), REQ_DONE);
	assert_int_equal(p->a.eager_used, 0);
	for (i = 0; i < N; i++) {
		assert_int_equal(req_state(r[i]), REQ_DONE);
		assert_memory_equal(dst[i], src[i], sizeof(src[i]));
		free(r[i]);
		free(s[i]);
	}
}

/* Posts one receive of one buffer on c. */
static struct harp_req *post_recv1(struct harp_conn *c, uint8_t *buf, uint64_t cap, uint32_t tag)
{
	return post_recv(c, 1, &buf, &cap, &tag);
}

/*
 * Small sends before any receive: they go at once as unsolicited DATA naming their sequence
 * numbers, the receiver holds them, and the receives posted later take them (byte-exact) without
 * waiting for anything. The sends complete once the CTS of their receives arrive; a larger send
 * still waits for its CTS.
 */
static void test_unsolicited_held(void **state)
{
	struct pair *p = *state;
	static const uint64_t lens[3] = { 8, 0, CONN_EAGER_BYTES };
	uint8_t src[3][CONN_EAGER_BYTES], dst[3][CONN_EAGER_BYTES], big[900], big_dst[900];
	struct harp_req *s[3], *r[3], *sb, *rb;
	int i;

	memset(dst, 0, sizeof(dst));
	for (i = 0; i < 3; i++) {
		fill_pattern(src[i], sizeof(src[i]), 40u + (uint32_t)i);
		s[i] = post_send(&p->a, src[i], lens[i], 5);
	}
	emit(&p->a, &p->ab, p->now, false);
	assert_int_equal(count_type(&p->ab, HARP_PKT_DATA), 3);
	for (i = 0; i < 3; i++) {
		assert_int_equal(p->ab.p[i].h.flags, HARP_DATA_F_DONE | HARP_DATA_F_UNSOL);
		assert_int_equal(p->ab.p[i].h.rsn, (uint32_t)i); /* the send's sequence number */
		assert_int_equal(p->ab.p[i].h.len, lens[i]);
		assert_int_equal(req_state(s[i]), REQ_PENDING); /* its buffer is not known yet */
	}
	assert_int_equal(p->a.stats.msgs_unsolicited, 3);
	deliver_all(&p->b, &p->ab, p->now);
	assert_int_equal(p->b.stats.msgs_held, 3);
	for (i = 0; i < 3; i++) {
		r[i] = post_recv1(&p->b, dst[i], sizeof(dst[i]), 5);
		/* placed at once; done as soon as its CTS has a psn */
		assert_int_equal(req_state(r[i]), REQ_PENDING);
	}
	emit(&p->b, &p->ba, p->now, false);
	assert_int_equal(count_type(&p->ba, HARP_PKT_CTS), 3);
	for (i = 0; i < 3; i++) {
		assert_int_equal(req_state(r[i]), REQ_DONE);
		assert_int_equal(r[i]->recv.msg_len[0], lens[i]);
		assert_memory_equal(dst[i], src[i], lens[i]);
	}
	deliver_all(&p->a, &p->ba, p->now);
	for (i = 0; i < 3; i++) {
		assert_int_equal(req_state(s[i]), REQ_DONE);
	}
	assert_int_equal(p->a.ssn_bound, p->a.ssn_cur);

	/* too big to go unsolicited: nothing leaves until the receive is announced */
	fill_pattern(big, sizeof(big), 44);
	sb = post_send(&p->a, big, sizeof(big), 5);
	emit(&p->a, &p->ab, p->now, false);
	assert_int_equal(count_type(&p->ab, HARP_PKT_DATA), 0);
	rb = post_recv1(&p->b, big_dst, sizeof(big_dst), 5);
	run_clean(p);
	assert_int_equal(req_state(sb), REQ_DONE);
	assert_int_equal(req_state(rb), REQ_DONE);
	assert_memory_equal(big_dst, big, sizeof(big));
	assert_int_equal(p->a.stats.msgs_unsolicited, 3);
	for (i = 0; i < 3; i++) {
		free(s[i]);
		free(r[i]);
	}
	free(sb);
	free(rb);
}

/*
 * A receive posted while an unsolicited send is on its way: the send lands in it directly, and
 * the CTS that crossed it on the wire binds the send. Lost on the way, the send is sent again
 * from its copy even after it completed.
 */
static void test_unsolicited_crossing(void **state)
{
	struct pair *p = *state;
	uint8_t src[64], orig[64], dst[64] = { 0 };
	struct harp_req *s, *r;
	struct wire cts;
	struct pkt held[4];

	fill_pattern(src, sizeof(src), 50);
	memcpy(orig, src, sizeof(src));
	r = post_recv1(&p->b, dst, sizeof(dst), 1);
	emit(&p->b, &p->ba, p->now, false); /* its CTS, not delivered yet */
	assert_int_equal(count_type(&p->ba, HARP_PKT_CTS), 1);
	memcpy(held, p->ba.p, sizeof(held[0]) * (size_t)p->ba.n);
	cts.p = held;
	cts.n = p->ba.n;
	p->ba.n = 0;
	s = post_send(&p->a, src, sizeof(src), 1);
	emit(&p->a, &p->ab, p->now, false);
	assert_int_equal(p->ab.p[0].h.flags, HARP_DATA_F_DONE | HARP_DATA_F_UNSOL);
	p->ab.n = 0; /* lost */
	deliver_all(&p->a, &cts, p->now);
	assert_int_equal(req_state(s), REQ_DONE); /* bound: the receive's buffer fits */
	memset(src, 0xee, sizeof(src));
	p->now += 2000000000ull;
	conn_on_timer(&p->a, p->now, UINT64_MAX / 2);
	emit(&p->a, &p->ab, p->now, false);
	assert_int_equal(count_type(&p->ab, HARP_PKT_DATA), 1);
	assert_int_equal(p->ab.p[0].h.flags, HARP_DATA_F_DONE | HARP_DATA_F_UNSOL);
	assert_memory_equal(p->ab.p[0].body, orig, sizeof(orig));
	deliver_all(&p->b, &p->ab, p->now);
	assert_int_equal(p->b.stats.msgs_held, 0); /* its receive was there */
	assert_int_equal(req_state(r), REQ_DONE);
	assert_memory_equal(dst, orig, sizeof(orig));
	run_clean(p);
	assert_int_equal(p->a.eager_used, 0);
	free(s);
	free(r);
}

/*
 * Credits: with CONN_UNSOL_CREDITS sends waiting for their CTS, the next small send waits too;
 * receives posted later take them all, in order.
 */
static void test_unsolicited_credits(void **state)
{
	enum { N = CONN_UNSOL_CREDITS + 4 };
	struct pair *p = *state;
	static uint8_t src[N][16], dst[N][16];
	struct harp_req *s[N], *r[N];
	int i;

	p->a.paths[0].cc.cwnd = p->b.paths[0].cc.cwnd = 4 * N * FULL;
	for (i = 0; i < N; i++) {
		fill_pattern(src[i], sizeof(src[i]), 60u + (uint32_t)i);
		s[i] = post_send(&p->a, src[i], sizeof(src[i]), 2);
	}
	emit(&p->a, &p->ab, p->now, false);
	assert_int_equal(count_type(&p->ab, HARP_PKT_DATA), CONN_UNSOL_CREDITS);
	deliver_all(&p->b, &p->ab, p->now);
	assert_int_equal(p->b.stats.msgs_held, CONN_UNSOL_CREDITS);
	for (i = 0; i < N; i++) {
		r[i] = post_recv1(&p->b, dst[i], sizeof(dst[i]), 2);
	}
	run_clean(p);
	assert_int_equal(p->a.stats.msgs_unsolicited, CONN_UNSOL_CREDITS);
	for (i = 0; i < N; i++) {
		assert_int_equal(req_state(s[i]), REQ_DONE);
		assert_int_equal(req_state(r[i]), REQ_DONE);
		assert_memory_equal(dst[i], src[i], sizeof(src[i]));
		free(s[i]);
		free(r[i]);
	}
	assert_int_equal(p->a.eager_used, 0);
}

/*
 * An unsolicited send too big for the buffer it falls to fails on both sides with EMSGSIZE, as
 * any send does, and the buffer stays untouched; a grouped receive takes unsolicited sends by
 * tag, whatever their order.
 */
static void test_unsolicited_msgsize_and_groups(void **state)
{
	struct pair *p = *state;
	uint8_t src[200], dst[100], g[3][200], gsrc[3][200];
	uint8_t *bufs[3] = { g[0], g[1], g[2] };
	uint64_t caps[3] = { 200, 200, 200 }, glens[3] = { 150, 1, 0 };
	uint32_t tags[3] = { 30, 31, 32 };
	int order[3] = { 2, 0, 1 }, i;
	struct harp_req *s, *r, *gs[3], *gr;

	fill_pattern(src, sizeof(src), 70);
	memset(dst, 0, sizeof(dst));
	s = post_send(&p->a, src, 101, 9);
	emit(&p->a, &p->ab, p->now, false);
	deliver_all(&p->b, &p->ab, p->now);
	r = post_recv1(&p->b, dst, sizeof(dst), 9);
	run_clean(p);
	assert_int_equal(req_state(s), REQ_FAILED);
	assert_int_equal(s->err, -EMSGSIZE);
	assert_int_equal(req_state(r), REQ_FAILED);
	assert_int_equal(r->err, -EMSGSIZE);
	assert_int_equal(r->recv.msg_len[0], 101);
	for (i = 0; i < 100; i++) {
		assert_int_equal(dst[i], 0);
	}

	memset(g, 0, sizeof(g));
	for (i = 0; i < 3; i++) {
		int k = order[i];

		fill_pattern(gsrc[k], sizeof(gsrc[k]), 80u + (uint32_t)k);
		gs[i] = post_send(&p->a, gsrc[k], glens[k], tags[k]);
	}
	emit(&p->a, &p->ab, p->now, false);
	assert_int_equal(count_type(&p->ab, HARP_PKT_DATA), 3);
	deliver_all(&p->b, &p->ab, p->now);
	gr = post_recv(&p->b, 3, bufs, caps, tags);
	run_clean(p);
	assert_int_equal(req_state(gr), REQ_DONE);
	for (i = 0; i < 3; i++) {
		assert_int_equal(req_state(gs[i]), REQ_DONE);
		assert_int_equal(gr->recv.msg_len[i], glens[i]);
		assert_memory_equal(g[i], gsrc[i], glens[i]);
		free(gs[i]);
	}
	assert_int_equal(atomic_load(&p->a.state), CONN_READY);
	assert_int_equal(atomic_load(&p->b.state), CONN_READY);
	free(s);
	free(r);
	free(gr);
}

/*
 * A send whose tag the receive it falls to does not have breaks the matching rule: both sides
 * fail the connection (EPROTO) instead of waiting for ever. So does an unsolicited record past
 * the sender's credit.
 */
static void test_unsolicited_refused(void **state)
{
	struct pair *p = *state;
	uint8_t src[8] = { 1 }, dst[8];
	struct harp_req *s, *r;
	struct wire_pkt wp;

	s = post_send(&p->a, src, sizeof(src), 4);
	emit(&p->a, &p->ab, p->now, false);
	deliver_all(&p->b, &p->ab, p->now);
	r = post_recv1(&p->b, dst, sizeof(dst), 6);
	assert_int_equal(atomic_load(&p->b.state), CONN_FAILED);
	assert_int_equal(req_state(r), REQ_FAILED);
	assert_int_equal(r->err, -EPROTO);
	free(r);

	/* the sender finds it out from the CTS */
	memset(&wp, 0, sizeof(wp));
	wp.h.version = HARP_WIRE_VERSION;
	wp.h.type = HARP_PKT_CTS;
	wp.h.psn = 0;
	wp.h.ack_psn = p->a.snd_una;
	wp.h.nbufs = 1;
	wp.h.msg_len = 8;
	wp.h.tag = 6;
	conn_on_packet(&p->a, &wp, p->now);
	assert_int_equal(atomic_load(&p->a.state), CONN_FAILED);
	assert_int_equal(req_state(s), REQ_FAILED);
	assert_int_equal(s->err, -EPROTO);
	free(s);
}

/*
 * The peer closes before the CTS that would bind them arrive, and its acks were lost: the close
 * acks nothing. The closed peer acks again what came before its close when it comes again;
 * unsolicited sends acked so were delivered and complete, one it never got fails with
 * ECONNRESET.
 */
static void test_unsolicited_peer_close(void **state)
{
	struct pair *p = *state;
	uint8_t src[3][8] = { { 1 }, { 2 }, { 3 } };
	struct harp_req *s[3];
	int i;

	for (i = 0; i < 3; i++) {
		s[i] = post_send(&p->a, src[i], sizeof(src[i]), 1);
	}
	emit(&p->a, &p->ab, p->now, false);
	assert_int_equal(count_type(&p->ab, HARP_PKT_DATA), 3);
	p->ab.n = 2; /* the third is lost */
	deliver_all(&p->b, &p->ab, p->now);
	assert_int_equal(p->b.stats.msgs_held, 2);
	emit(&p->b, &p->ba, p->now, true);
	p->ba.n = 0; /* and so is b's ack */
	assert_true(conn_linger(&p->b, -ECONNABORTED, true)); /* b's user closes it */
	assert_false(conn_on_peer_close(&p->a, p->b.rcv_nxt));
	for (i = 0; i < 3; i++) {
		assert_int_equal(req_state(s[i]), REQ_PENDING); /* not on the close's word */
	}
	p->now += 2000000000ull;
	conn_on_timer(&p->a, p->now, UINT64_MAX / 2);
	emit(&p->a, &p->ab, p->now, false);
	assert_int_equal(count_type(&p->ab, HARP_PKT_DATA), 3);
	deliver_all(&p->b, &p->ab, p->now); /* the first two again: acked again; the third not */
	assert_int_equal(p->b.stats.msgs_held, 2);
	emit(&p->b, &p->ba, p->now, true);
	deliver_all(&p->a, &p->ba, p->now);
	assert_true(conn_peer_close_check(&p->a));
	assert_int_equal(req_state(s[0]), REQ_DONE);
	assert_int_equal(req_state(s[1]), REQ_DONE);
	assert_int_equal(req_state(s[2]), REQ_FAILED);
	assert_int_equal(s[2]->err, -ECONNRESET);
	for (i = 0; i < 3; i++) {
		free(s[i]);
	}
}

/*
 * A close no one acks behind (forged, with a bound past what arrived): no send completes on it.
 * The sends wait for ACK frames, and with none the peer timeout fails them.
 */
static void test_peer_close_forged(void **state)
{
	struct pair *p = *state;
	static uint8_t src[4 * PAYLOAD], dst[4 * PAYLOAD];
	struct harp_req *r, *s;

	fill_pattern(src, sizeof(src), 31);
	r = announce_recv(p, dst, sizeof(dst), 1);
	s = post_send(&p->a, src, sizeof(src), 1);
	emit(&p->a, &p->ab, p->now, false);
	assert_int_equal(count_type(&p->ab, HARP_PKT_DATA), 4);
	p->ab.n = 0; /* none arrives */
	assert_false(conn_on_peer_close(&p->a, p->a.snd_nxt));
	assert_int_equal(req_state(s), REQ_PENDING);
	p->now += 2000000000ull;
	conn_on_timer(&p->a, p->now, 1000000000ull);
	assert_int_equal(req_state(s), REQ_FAILED);
	assert_int_equal(s->err, -ETIMEDOUT);
	assert_int_equal(req_state(r), REQ_PENDING);
	free(r);
	free(s);
}

/* Beyond the credit a sender may use, or not whole: the receiver refuses it. */
static void test_unsolicited_beyond_credit(void **state)
{
	struct pair *p = *state;
	uint8_t body[8] = { 0 };
	struct wire_pkt wp;

	memset(&wp, 0, sizeof(wp));
	wp.h.version = HARP_WIRE_VERSION;
	wp.h.type = HARP_PKT_DATA;
	wp.h.flags = HARP_DATA_F_DONE | HARP_DATA_F_UNSOL;
	wp.h.psn = 0;
	wp.h.rsn = CONN_UNSOL_CREDITS; /* the receiver has taken no receive: ssn 0..credits-1 */
	wp.h.len = wp.h.msg_len = sizeof(body);
	wp.body = body;
	conn_on_packet(&p->b, &wp, p->now);
	assert_int_equal(atomic_load(&p->b.state), CONN_FAILED);
	assert_int_equal(p->b.stats.msgs_held, 0);
}

/*
 * Closed with an eager send still unacked: pending requests fail at once, the send goes on from
 * its copy, and the connection may go once it is acked.
 */
static void test_linger(void **state)
{
	struct pair *p = *state;
	uint8_t src[64], orig[64], dst[64], mine[64];
	uint64_t cap = sizeof(mine);
	uint32_t tag = 6;
	uint8_t *bufs[1] = { mine };
	struct harp_req *r, *s, *pending;

	assert_false(conn_linger(&p->a, -ECONNABORTED, false)); /* nothing unacked: close at once */
	pending = post_recv(&p->a, 1, bufs, &cap, &tag); /* a's own receive, never matched */
	emit(&p->a, &p->ab, p->now, false);		  /* its CTS */
	deliver_all(&p->b, &p->ab, p->now);
	emit(&p->b, &p->ba, p->now, true);
	deliver_all(&p->a, &p->ba, p->now); /* and b's ack of it */
	fill_pattern(src, sizeof(src), 13);
	memcpy(orig, src, sizeof(src));
	r = announce_recv(p, dst, sizeof(dst), 5);
	s = post_send(&p->a, src, sizeof(src), 5);
	emit(&p->a, &p->ab, p->now, false);
	assert_int_equal(req_state(s), REQ_DONE);
	p->ab.n = 0; /* the DATA is lost */

	assert_true(conn_linger(&p->a, -ECONNABORTED, false));
	assert_int_equal(req_state(pending), REQ_FAILED);
	assert_int_equal(pending->err, -ECONNABORTED);
	assert_false(conn_linger_done(&p->a, p->now, 0));
	memset(src, 0, sizeof(src)); /* the caller frees its buffers once close returns */
	p->now += 2000000000ull;
	conn_on_timer(&p->a, p->now, UINT64_MAX / 2);
	emit(&p->a, &p->ab, p->now, false);
	assert_int_equal(count_type(&p->ab, HARP_PKT_DATA), 1);
	deliver_all(&p->b, &p->ab, p->now);
	assert_int_equal(req_state(r), REQ_DONE);
	assert_memory_equal(dst, orig, sizeof(orig));
	emit(&p->b, &p->ba, p->now, true);
	deliver_all(&p->a, &p->ba, p->now);
	assert_true(conn_linger_done(&p->a, p->now, 0));
	free(r);
	free(s);
	free(pending);
}

/*
 * Aborted with a large send in flight behind a small one: the large one's packets are given up
 * (never sent again, its request failed and never touched again), the small one still arrives.
 */
static void test_linger_gives_up_the_rest(void **state)
{
	struct pair *p = *state;
	static uint8_t small[32], big[4 * PAYLOAD], dst_small[32], dst_big[4 * PAYLOAD];
	struct harp_req *rs, *rb, *ss, *sb;
	int i, data;

	fill_pattern(small, sizeof(small), 21);
	fill_pattern(big, sizeof(big), 22);
	rs = announce_recv(p, dst_small, sizeof(dst_small), 1);
	rb = announce_recv(p, dst_big, sizeof(dst_big), 1);
	ss = post_send(&p->a, small, sizeof(small), 1);
	sb = post_send(&p->a, big, sizeof(big), 1);
	emit(&p->a, &p->ab, p->now, false);
	assert_int_equal(count_type(&p->ab, HARP_PKT_DATA), 5);
	assert_int_equal(req_state(ss), REQ_DONE);
	assert_int_equal(req_state(sb), REQ_PENDING);
	p->ab.n = 0; /* all lost */

	assert_true(conn_linger(&p->a, -ECANCELED, false));
	assert_int_equal(req_state(sb), REQ_FAILED);
	assert_int_equal(sb->err, -ECANCELED);
	p->now += 2000000000ull;
	conn_on_timer(&p->a, p->now, UINT64_MAX / 2);
	emit(&p->a, &p->ab, p->now, false);
	for (i = 0, data = 0; i < p->ab.n; i++) {
		if (p->ab.p[i].h.type == HARP_PKT_DATA) {
			assert_int_equal(p->ab.p[i].h.msg_len, sizeof(small)); /* only the small one */
			data++;
		}
	}
	assert_int_equal(data, 1);
	deliver_all(&p->b, &p->ab, p->now);
	assert_int_equal(req_state(rs), REQ_DONE);
	assert_memory_equal(dst_small, small, sizeof(small));
	emit(&p->b, &p->ba, p->now, true);
	deliver_all(&p->a, &p->ba, p->now);
	assert_true(conn_linger_done(&p->a, p->now, 0));
	assert_int_equal(req_state(rb), REQ_PENDING); /* the peer's close fails it, not data */
	free(rs);
	free(rb);
	free(ss);
	free(sb);
}

/*
 * The ack that completes a message goes once; one that reports a hole goes on two paths, so a
 * lost copy cannot stall the loss's repair.
 */
static void test_ack_twins(void **state)
{
	struct pair *p = *state;
	uint8_t src[3 * PAYLOAD], dst[3 * PAYLOAD];
	struct harp_req *r, *s;
	struct conn_tx tx;
	struct pkt late;

	more_paths(p, 2);
	fill_pattern(src, sizeof(src), 7);
	r = announce_recv(p, dst, PAYLOAD, 1);
	s = post_send(&p->a, src, PAYLOAD, 1);
	emit(&p->a, &p->ab, p->now, false);
	deliver_all(&p->b, &p->ab, p->now);
	assert_int_equal(req_state(r), REQ_DONE);
	assert_true(conn_ack_wanted(&p->b, p->now)); /* the last receive open: ack at once */
	assert_true(conn_make_ack(&p->b, &tx, p->now));
	assert_int_equal(tx.twin_src_port, 0);
	deliver_one(&p->a, &(struct pkt){ .h = tx.h }, p->now);
	assert_int_equal(req_state(s), REQ_DONE);
	free(r);
	free(s);

	/* three packets, the middle one late: the ack that reports the hole has a twin */
	r = announce_recv(p, dst, sizeof(dst), 2);
	s = post_send(&p->a, src, sizeof(src), 2);
	emit(&p->a, &p->ab, p->now, false);
	assert_int_equal(count_type(&p->ab, HARP_PKT_DATA), 3);
	late = p->ab.p[1];
	deliver_one(&p->b, &p->ab.p[0], p->now);
	deliver_one(&p->b, &p->ab.p[2], p->now);
	p->ab.n = 0;
	assert_true(conn_ack_wanted(&p->b, p->now));
	assert_true(conn_make_ack(&p->b, &tx, p->now));
	assert_true(tx.twin_src_port != 0 && tx.twin_src_port != tx.src_port);
	assert_true(tx.h.len > 0); /* with its sack map */
	deliver_one(&p->b, &late, p->now);
	run_clean(p);
	assert_int_equal(req_state(r), REQ_DONE);
	assert_int_equal(req_state(s), REQ_DONE);
	assert_memory_equal(dst, src, sizeof(src));
	free(r);
	free(s);
}

/* New data goes to the path with the least RTT, while it has room; the others take the rest. */
static void test_path_choice(void **state)
{
	struct pair *p = *state;
	struct conn_tx tx;
	size_t len = 200 * PAYLOAD;
	uint8_t *src = calloc(1, len), *dst = calloc(1, len);
	struct harp_req *r, *s;
	uint32_t per_path[4] = { 0 };
	int i;

	more_paths(p, 4);
	for (i = 0; i < 4; i++) {
		rtt_sample(&p->a.paths[i].rtt, i == 2 ? 50 : 500); /* path 2 is the fast one */
	}
	r = announce_recv(p, dst, len, 1);
	s = post_send(&p->a, src, len, 1);
	while (conn_next_tx(&p->a, &tx, p->now)) {
		for (i = 0; i < 4; i++) {
			per_path[i] += tx.src_port == htons((uint16_t)(47000 + i));
		}
	}
	/* every path filled its window, the fast one first: the first packets took it */
	for (i = 0; i < 4; i++) {
		uint32_t cwnd = p->a.paths[i].cc.cwnd;

		assert_int_equal(per_path[i], (cwnd + FULL - 1) / FULL); /* full packets: bytes */
		assert_int_equal(p->a.paths[i].inflight, per_path[i]);
		assert_int_equal(p->a.paths[i].inflight_bytes, per_path[i] * FULL);
	}
	assert_int_equal(p->a.txq[1].path, 2);
	free(src);
	free(dst);
	free(r);
	free(s);
}

/* Pacing: a window goes out over the round trip, a quarter RTT's worth at a time, in bytes. */
static void test_pacing(void **state)
{
	struct pair *p = *state;
	struct conn_path *path = &p->a.paths[0];
	size_t len = 200 * PAYLOAD;
	uint8_t *src = calloc(1, len), *dst = calloc(1, len);
	struct harp_req *r, *s;
	struct conn_tx tx;
	uint32_t window, burst, sent = 0;

	p->a.pacing = true;
	rtt_sample(&path->rtt, 1000); /* 1 ms */
	window = path->cc.cwnd;	      /* 32 packets, in slow start: 2 windows a round trip */
	assert_int_equal(window, 32 * FULL);
	burst = 2 * window / 4;
	assert_true(burst >= CC_PACE_BURST_SEGS * FULL);
	pace_init(&path->pace, p->now - 2000000); /* idle for 2 RTTs: a full burst's credit */
	r = announce_recv(p, dst, len, 1);
	s = post_send(&p->a, src, len, 1);
	while (conn_next_tx(&p->a, &tx, p->now)) {
		sent++;
	}
	/* a quarter of the round trip's bytes left at once; the rest is held by pacing */
	assert_int_equal(sent, (burst + FULL - 1) / FULL);
	assert_true(conn_paced(&p->a));
	assert_true(path->inflight_bytes < window);
	/* nothing more until time passes; a quarter RTT later, as much again */
	assert_false(conn_next_tx(&p->a, &tx, p->now));
	p->now += 250000;
	while (conn_next_tx(&p->a, &tx, p->now)) {
		sent++;
	}
	/* the window is full now: held by it, not by pacing */
	assert_int_equal(path->inflight_bytes, window);
	assert_int_equal(sent, window / FULL);
	assert_false(conn_paced(&p->a));
	/* off: the whole window at once */
	p->a.pacing = false;
	path->cc.cwnd = 2 * window;
	sent = 0;
	while (conn_next_tx(&p->a, &tx, p->now)) {
		sent++;
	}
	assert_int_equal(sent, window / FULL);
	assert_false(conn_paced(&p->a));
	free(src);
	free(dst);
	free(r);
	free(s);
}

/*
 * A packet that went out in parts when the path MTU fell goes in the same parts ever after,
 * even once the MTU is back up: the receiver holds the parts that came, and would take neither
 * the whole packet nor another cut (the fault_xfer_reorder_mtu9000 runs that hung for 10 s).
 */
static void test_parts_stay_parts(void **state)
{
	struct pair *p = *state;
	size_t len = PAYLOAD;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	struct harp_req *r, *s;
	int i;

	fill_pattern(src, len, 9);
	r = announce_recv(p, dst, len, 3);
	s = post_send(&p->a, src, len, 3);
	emit(&p->a, &p->ab, p->now, false);
	p->ab.n = 0; /* the whole packet is lost */
	/* the path MTU falls: the timeout sends it again in 3 parts, of which one arrives */
	p->a.payload_max = 400;
	p->now += (uint64_t)p->a.rtt.rto_us * 1000 + 1;
	conn_on_timer(&p->a, p->now, UINT64_MAX / 2);
	emit(&p->a, &p->ab, p->now, false);
	assert_int_equal(count_type(&p->ab, HARP_PKT_DATA), 3);
	deliver_one(&p->b, &p->ab.p[0], p->now);
	p->ab.n = 0;
	/* and rises again before the next timeout: the same 3 parts go, not the whole packet */
	p->a.payload_max = PAYLOAD;
	p->now += (uint64_t)p->a.rtt.rto_us * 1000 * 4 + 1;
	conn_on_timer(&p->a, p->now, UINT64_MAX / 2);
	emit(&p->a, &p->ab, p->now, false);
	assert_int_equal(count_type(&p->ab, HARP_PKT_DATA), 3);
	for (i = 0; i < p->ab.n; i++) {
		assert_true(p->ab.p[i].h.type != HARP_PKT_DATA || (p->ab.p[i].h.seg >> 8) == 3);
	}
	run_clean(p);
	assert_int_equal(req_state(r), REQ_DONE);
	assert_int_equal(req_state(s), REQ_DONE);
	assert_memory_equal(src, dst, len);
	free(src);
	free(dst);
	free(r);
	free(s);
}

/* A window of a's packets lost; then the path MTU falls to 100-byte payloads and the timeout
 * sends them again, in 10 parts each (as pmtu_refused's resend would). */
#define PART (100 + FULL - PAYLOAD) /* bytes of IP a part takes */
static void lose_then_cut(struct pair *p, int packets)
{
	assert_int_equal(emit(&p->a, &p->ab, p->now, false), packets);
	p->ab.n = 0;
	p->a.payload_max = 100;
	p->now += (uint64_t)p->a.rtt.rto_us * 1000 + 1;
	conn_on_timer(&p->a, p->now, UINT64_MAX / 2);
	assert_int_equal(p->a.stats.timeouts, 1);
}

/*
 * Parts count against the window as they go, as packets do: a fall of the path MTU cuts each
 * packet in flight into 10, and a window's worth of records must not leave as 10 windows' worth
 * of parts. Held by a full window, they go on as acks of whole records open it.
 */
static void test_parts_obey_window(void **state)
{
	struct pair *p = *state;
	struct conn_path *path = &p->a.paths[0];
	size_t len = 8 * PAYLOAD;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	uint32_t bytes = 0, window = 4 * FULL;
	struct harp_req *r, *s;
	struct conn_tx tx;

	fill_pattern(src, len, 10);
	r = announce_recv(p, dst, len, 5);
	s = post_send(&p->a, src, len, 5);
	lose_then_cut(p, 8);
	path->cc.cwnd = window;
	while (conn_next_tx(&p->a, &tx, p->now)) {
		assert_true(tx.h.flags & HARP_DATA_F_SEG);
		assert_int_equal(tx.h.len, 100);
		wire_put(&p->ab, &tx);
		bytes += PART;
	}
	/* the window is full, by no more than the part that filled it */
	assert_false(conn_paced(&p->a));
	assert_true(bytes >= window && bytes < window + PART);
	assert_int_equal(path->inflight_bytes, bytes);
	run_clean(p);
	assert_int_equal(req_state(r), REQ_DONE);
	assert_int_equal(req_state(s), REQ_DONE);
	assert_memory_equal(src, dst, len);
	/* every part's bytes left the window with its record's ack */
	assert_int_equal(path->inflight_bytes, 0);
	assert_int_equal(p->a.inflight, 0);
	free(src);
	free(dst);
	free(r);
	free(s);
}

/*
 * Parts go through the pacer, each spending its own bytes: a record cut into 10 does not leave
 * as one burst because its first part found credit.
 */
static void test_parts_paced(void **state)
{
	struct pair *p = *state;
	struct conn_path *path = &p->a.paths[0];
	size_t len = PAYLOAD;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	struct harp_req *r, *s;
	struct conn_tx tx;
	int sent = 0;

	fill_pattern(src, len, 11);
	r = announce_recv(p, dst, len, 6);
	s = post_send(&p->a, src, len, 6);
	lose_then_cut(p, 1);
	p->a.pacing = true;
	rtt_sample(&path->rtt, 1000);
	path->cc.cwnd = 32 * FULL; /* the window holds nothing back here */
	path->pace.credit = PART + PART / 2;
	path->pace.at_ns = p->now;
	while (conn_next_tx(&p->a, &tx, p->now)) {
		assert_true(tx.h.flags & HARP_DATA_F_SEG);
		wire_put(&p->ab, &tx);
		sent++;
	}
	/* a part may go while the credit is above zero: two, then the pacer holds the rest */
	assert_int_equal(sent, 2);
	assert_true(conn_paced(&p->a));
	assert_int_equal(path->pace.credit, PART + PART / 2 - 2 * PART);
	/* a quarter of a round trip later, the other 8 */
	p->now += 250000;
	while (conn_next_tx(&p->a, &tx, p->now)) {
		wire_put(&p->ab, &tx);
		sent++;
	}
	assert_int_equal(sent, 10);
	run_clean(p);
	assert_int_equal(req_state(r), REQ_DONE);
	assert_int_equal(req_state(s), REQ_DONE);
	assert_memory_equal(src, dst, len);
	assert_int_equal(path->inflight_bytes, 0);
	free(src);
	free(dst);
	free(r);
	free(s);
}

/* HARP_CWND_MAX holds over all paths: 16 with 8 paths is 16 packets in flight, not 8 x 16. */
static void test_cwnd_max_all_paths(void **state)
{
	struct pair *p = *state;
	size_t len = 200 * PAYLOAD;
	uint8_t *src = calloc(1, len), *dst = calloc(1, len);
	struct harp_req *r, *s;
	struct conn_tx tx;
	uint32_t sent = 0, i;

	p->a.cwnd_max = 16;
	more_paths(p, 8);
	for (i = 0; i < 8; i++) {
		p->a.paths[i].cc.cwnd = 100 * FULL; /* the windows would take far more */
		assert_true(p->a.paths[i].inflight_max <= (i ? 2u : 1024u));
	}
	r = announce_recv(p, dst, len, 1);
	s = post_send(&p->a, src, len, 1);
	while (conn_next_tx(&p->a, &tx, p->now)) {
		wire_put(&p->ab, &tx);
		sent++;
	}
	assert_int_equal(sent, 16);
	assert_int_equal(p->a.inflight, 16);
	run_clean(p); /* and the rest follows, 16 at a time */
	assert_int_equal(req_state(r), REQ_DONE);
	assert_int_equal(req_state(s), REQ_DONE);
	free(src);
	free(dst);
	free(r);
	free(s);
}

/* Probe rounds: candidates within both port ranges, distinct; only reported ones become paths. */
static void test_probe_rounds(void **state)
{
	struct pair *p = *state;
	struct harp_conn *c = &p->a;
	struct conn_tx tx;
	uint16_t sp[CONN_PROBE_CANDS], dp[CONN_PROBE_CANDS];
	uint32_t n = 0, i, round = 0;

	c->paths[0].live = false; /* start with none, as after set-up */
	c->paths_live = 0;
	/* probing's clock starts when the engine adopts the connection (conn_start), never on
	 * the handing-over thread's: not judged hopeless before its first probe */
	conn_paths_init(c, 3, 47000, 16, 50000, 8, 1234);
	conn_start(c, p->now);
	assert_false(conn_paths_hopeless(c, p->now, 1000000));
	while (conn_next_probe(c, &tx, p->now)) {
		assert_int_equal(tx.h.type, HARP_PKT_PROBE);
		assert_int_equal(tx.h.conn_id, c->peer_id);
		assert_int_equal(tx.h.tag, n);
		assert_true(ntohs(tx.src_port) >= 47000 && ntohs(tx.src_port) < 47016);
		assert_true(ntohs(tx.dst_port) >= 50000 && ntohs(tx.dst_port) < 50008);
		for (i = 0; i < n; i++) {
			assert_false(sp[i] == tx.src_port && dp[i] == tx.dst_port);
		}
		sp[n] = tx.src_port;
		dp[n] = tx.dst_port;
		round = tx.h.rsn;
		n++;
	}
	assert_int_equal(n, 3 * 16); /* 16 for each path wanted (16 x 8 pairs: enough of them) */
	assert_int_equal(c->stats.probes_sent, n);
	/* nothing more until the round's time is up */
	assert_false(conn_next_probe(c, &tx, p->now + 1000));
	conn_on_probe_result(c, round + 1, 5, p->now); /* a round that never was: ignored */
	conn_on_probe_result(c, round, 9999, p->now); /* no such candidate: ignored */
	assert_int_equal(c->paths_live, 0);
	conn_on_probe_result(c, round, 7, p->now);
	conn_on_probe_result(c, round, 7, p->now); /* reported twice: one path */
	assert_int_equal(c->paths_live, 1);
	conn_on_probe_result(c, round, 3, p->now);
	assert_int_equal(c->paths_live, 2);
	assert_true(c->paths[0].src_port == sp[7] && c->paths[0].dst_port == dp[7]);
	/* one more wanted: the next round comes, and avoids the live pairs */
	p->now += 1000000000ull;
	n = 0;
	while (conn_next_probe(c, &tx, p->now)) {
		assert_false(tx.src_port == sp[7] && tx.dst_port == dp[7]);
		assert_false(tx.src_port == sp[3] && tx.dst_port == dp[3]);
		n++;
	}
	assert_true(n > 0);
	conn_on_probe_result(c, round + 1, 0, p->now);
	assert_int_equal(c->paths_live, 3);
	/* enough: no further rounds */
	p->now += 1000000000ull;
	assert_false(conn_next_probe(c, &tx, p->now));
	/* a connection that never finds a path gives up after the limit */
	c->paths_live = 0;
	assert_true(conn_paths_hopeless(c, p->now, 1000000));
}

/* The STEERs of one round sent at now: which of pairs (local port base + i) they covered. */
static uint32_t steer_round(struct harp_conn *c, uint64_t now, bool *covered, uint32_t max)
{
	struct conn_tx tx;
	uint32_t n = 0, i;

	memset(covered, 0, max * sizeof(*covered));
	while (conn_next_probe(c, &tx, now)) {
		assert_int_equal(tx.h.type, HARP_PKT_STEER);
		i = ntohs(tx.src_port) - 1000;
		assert_int_equal(ntohs(tx.dst_port), 2000 + i);
		assert_true(i < max);
		covered[i] = true;
		n++;
	}
	return n;
}

/*
 * Without RSS the peer's paths stay steered here while its data comes on them: a full steer
 * list drops the pair the peer used least lately, not the oldest probed one, and a pair the
 * peer sends on that left the list comes back at once. A new pair is steered at once on its
 * own; the whole list follows 5 ms later.
 */
static void test_steer_keeps_used_pairs(void **state)
{
	struct pair *p = *state;
	struct harp_conn *c = &p->a;
	const uint64_t s = 1000000000ull, ms = 1000000ull;
	bool covered[128];
	uint32_t i;

	/* one path wanted and live: conn_next_probe sends only STEERs */
	conn_paths_init(c, 1, 47000, 16, 50000, 8, 5);
	conn_start(c, p->now);
	for (i = 0; i < CONN_STEER_PAIRS; i++) {
		conn_on_peer_probe(c, htons(1000 + i), htons(2000 + i), p->now);
	}
	assert_int_equal(steer_round(c, p->now, covered, 128), CONN_STEER_PAIRS);
	/* the peer took the first 8 as its paths: its data comes on them */
	for (i = 0; i < 8; i++) {
		conn_on_peer_data(c, htons(1000 + i), htons(2000 + i), p->now + s);
	}
	/* a later round of the peer's finds 8 more pairs: they replace the 8 it never used, and
	 * only they are steered at once */
	for (i = 16; i < 24; i++) {
		conn_on_peer_probe(c, htons(1000 + i), htons(2000 + i), p->now + 2 * s);
	}
	assert_int_equal(steer_round(c, p->now + 2 * s, covered, 128), 8);
	for (i = 0; i < 24; i++) {
		assert_true(covered[i] == (i >= 16));
	}
	/* nothing more until the early round 5 ms on, which covers the whole list */
	assert_false(conn_steer_due(c, p->now + 2 * s + 4 * ms));
	assert_int_equal(steer_round(c, p->now + 2 * s + 5 * ms, covered, 128), CONN_STEER_PAIRS);
	for (i = 0; i < 24; i++) {
		assert_true(covered[i] == (i < 8 || i >= 16));
	}
	/* the rounds go on, every pair each time */
	assert_int_equal(steer_round(c, p->now + 3 * s, covered, 128), CONN_STEER_PAIRS);
	/* data on a pair the list lost: back in it at once, in place of the least used (the
	 * peer's paths carried data since) */
	for (i = 0; i < 8; i++) {
		conn_on_peer_data(c, htons(1000 + i), htons(2000 + i), p->now + 3 * s);
	}
	conn_on_peer_data(c, htons(1000 + 99), htons(2000 + 99), p->now + 4 * s);
	assert_true(conn_steer_due(c, p->now + 4 * s));
	assert_int_equal(steer_round(c, p->now + 4 * s, covered, 128), 1);
	assert_true(covered[99]);
	assert_int_equal(steer_round(c, p->now + 4 * s + 5 * ms, covered, 128), CONN_STEER_PAIRS);
	assert_true(covered[99]);
	for (i = 0; i < 8; i++) {
		assert_true(covered[i]); /* the paths in use stayed */
	}
	/* data on a pair held starts no round (the next is 50 ms after the last) */
	conn_on_peer_data(c, htons(1000 + 3), htons(2000 + 3), p->now + 4 * s + 6 * ms);
	assert_false(conn_steer_due(c, p->now + 4 * s + 6 * ms));
}

/*
 * Rounds wait on the answers: twice the time the last ones took to come (the control
 * connection's round trip before any came), never less than the usual first wait.
 */
static void test_probe_paced_by_answers(void **state)
{
	struct pair *p = *state;
	struct harp_conn *c = &p->a;
	const uint64_t ms = 1000000ull;
	struct conn_tx tx;
	uint64_t t0;
	int rounds = 0;

	c->paths[0].live = false;
	c->paths_live = 0;
	conn_paths_init(c, 4, 47000, 64, 50000, 64, 7);
	conn_start(c, p->now);
	c->probe.answer_ns = 50 * ms; /* the set-up's round trip, as the engine seeds it */
	t0 = p->now;
	while (conn_next_probe(c, &tx, p->now)) {
	}
	/* nothing answers: no second round before 100 ms */
	for (; p->now < t0 + 100 * ms; p->now += ms) {
		assert_false(conn_next_probe(c, &tx, p->now));
	}
	assert_true(conn_next_probe(c, &tx, p->now));
	rounds = (int)c->probe.round;
	while (conn_next_probe(c, &tx, p->now)) {
	}
	/* its answer comes 400 ms after it began: the wait grows to a quarter of the way there */
	t0 = c->probe.round_ns;
	p->now = t0 + 400 * ms;
	conn_on_probe_result(c, c->probe.round, 0, p->now);
	assert_int_equal(c->paths_live, 1);
	assert_int_equal(c->probe.answer_ns, (3 * 50 + 400) * ms / 4);
	/* a second answer of the same round does not count again */
	conn_on_probe_result(c, c->probe.round, 1, p->now + 300 * ms);
	assert_int_equal(c->probe.answer_ns, (3 * 50 + 400) * ms / 4);
	/* the next round waits twice that from its own start */
	while (conn_next_probe(c, &tx, p->now)) {
	}
	assert_int_equal((int)c->probe.round, rounds + 1);
	t0 = c->probe.round_ns;
	for (; p->now < t0 + 2 * c->probe.answer_ns; p->now += ms) {
		assert_false(conn_next_probe(c, &tx, p->now));
	}
	assert_true(conn_next_probe(c, &tx, p->now));
	while (conn_next_probe(c, &tx, p->now)) {
	}
	/* answers that take seconds: rounds wait at most 1 s */
	p->now = c->probe.next_ns;
	c->probe.answer_ns = 30000 * ms;
	assert_true(conn_next_probe(c, &tx, p->now));
	while (conn_next_probe(c, &tx, p->now)) {
	}
	t0 = c->probe.round_ns;
	assert_false(conn_next_probe(c, &tx, t0 + 999 * ms));
	assert_true(conn_next_probe(c, &tx, t0 + 1000 * ms));
}

/*
 * An engine that ran no pass for longer than the limit (its process busy, its threads starved)
 * probes again before it gives up: the round begun before the gap is not judged.
 */
static void test_probe_after_gap(void **state)
{
	struct pair *p = *state;
	struct harp_conn *c = &p->a;
	const uint64_t limit = 10000000000ull, ms = 1000000ull;
	struct conn_tx tx;
	uint32_t round = 0;
	int n = 0;

	c->paths[0].live = false;
	c->paths_live = 0;
	conn_paths_init(c, 1, 47000, 16, 50000, 8, 99);
	conn_start(c, p->now);
	while (conn_next_probe(c, &tx, p->now)) {
		n++;
	}
	assert_int_equal(n, 16); /* one path wanted */
	p->now += 3 * limit; /* no pass for three times the limit */
	assert_false(conn_paths_hopeless(c, p->now, limit));
	/* a fresh round, and rounds after it while nothing answers, with a hearing each */
	assert_true(conn_next_probe(c, &tx, p->now));
	assert_false(conn_paths_hopeless(c, p->now + 100 * ms, limit));
	while (!conn_paths_hopeless(c, p->now, limit)) {
		assert_true(p->now - c->probe.round_ns <= 200 * ms); /* never a stale round */
		while (conn_next_probe(c, &tx, p->now)) {
			round = tx.h.rsn;
		}
		p->now += ms;
		assert_true(c->probe.round_ns + 2000 * ms > p->now); /* the check comes in time */
	}
	assert_true(round > 3); /* several rounds after the gap had their time */
	/* an answer to the latest round still saves it */
	conn_on_probe_result(c, c->probe.round, 0, p->now);
	assert_int_equal(c->paths_live, 1);
	assert_false(conn_paths_hopeless(c, p->now, limit));
}

/* The pairs that went dark in test_rescue: every path either side had (47000..47003 -> 47000). */
static bool dark_pair(const struct pkt *k)
{
	return ntohs(k->src_port) >= 47000 && ntohs(k->src_port) < 47004 &&
	       ntohs(k->dst_port) == 47000;
}

/* Delivers w's packets that are not on a dark pair, drops the rest, and empties w. */
static void deliver_lit(struct harp_conn *to, struct wire *w, uint64_t now)
{
	int i;

	for (i = 0; i < w->n; i++) {
		if (!dark_pair(&w->p[i])) {
			deliver_one(to, &w->p[i], now);
		}
	}
	w->n = 0;
}

/*
 * Sends c's probes of now and answers each that is not on a dark pair at once, as the peer's
 * engine would over the control channel. Returns how many probes went out.
 */
static uint32_t answer_probes(struct harp_conn *c, uint64_t now)
{
	struct conn_tx tx;
	struct pkt k;
	uint32_t n = 0;

	while (conn_next_probe(c, &tx, now)) {
		if (tx.h.type != HARP_PKT_PROBE) {
			continue;
		}
		n++;
		k.src_port = tx.src_port;
		k.dst_port = tx.dst_port;
		if (!dark_pair(&k)) {
			conn_on_probe_result(c, tx.h.rsn, tx.h.tag, now);
		}
	}
	return n;
}

/* How many of c's live paths are on a dark pair. */
static uint32_t live_dark(const struct harp_conn *c)
{
	struct pkt k;
	uint32_t i, n = 0;

	for (i = 0; i < c->npaths; i++) {
		k.src_port = c->paths[i].src_port;
		k.dst_port = c->paths[i].dst_port;
		n += c->paths[i].live && dark_pair(&k);
	}
	return n;
}

/*
 * a and b exchange over the lit pairs, 100 us a step, with the timers, a's silence reports
 * carried to b and every probe answered at once, until r (b's receive) is done; then the
 * rest runs clean.
 */
static void lit_until_done(struct pair *p, struct harp_req *r)
{
	struct harp_conn *a = &p->a, *b = &p->b;
	int rounds;

	for (rounds = 0; rounds < 100000 && req_state(r) != REQ_DONE; rounds++) {
		emit(a, &p->ab, p->now, false);
		emit(b, &p->ba, p->now, false);
		deliver_lit(b, &p->ab, p->now);
		deliver_lit(a, &p->ba, p->now);
		p->now += 100000;
		conn_on_timer(a, p->now, UINT64_MAX / 2);
		conn_on_timer(b, p->now, UINT64_MAX / 2);
		if (a->probe.unheard_ms) {
			conn_on_peer_unheard(b, a->probe.unheard_ms, p->now);
			a->probe.unheard_ms = 0;
		}
		answer_probes(a, p->now);
		answer_probes(b, p->now);
	}
	run_clean(p);
}

/*
 * Every path goes dark at once, both ways, in the middle of a transfer (a flow hash moved every
 * pair; a stalled tap queue held them): no path delivers, so none can be judged against another,
 * and every wanted path is live, so nothing probed; the connection used to starve until the peer
 * timeout. Now one timeout does nothing, but a second in a row with no ack between starts a
 * rescue: a probe round though every path is live, each answered candidate replacing a silent
 * path. The peer is told how long nothing of it was heard (unheard_ms, CHAN_UNHEARD); it replaces
 * the pairs it sent on in that time, which carry its acks, and none when it sent nothing. The
 * transfer then completes, every byte, with no dark pair left.
 */
static void test_rescue(void **state)
{
	struct pair *p = *state;
	struct harp_conn *a = &p->a, *b = &p->b;
	size_t len = 64 * PAYLOAD;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	struct harp_req *r, *s;

	conn_paths_init(a, 4, 47000, 64, 47000, 64, 11);
	conn_paths_init(b, 4, 47000, 64, 47000, 64, 12);
	more_paths(p, 4);
	fill_pattern(src, len, 9);
	r = announce_recv(p, dst, len, 1);
	s = post_send(a, src, len, 1);
	emit(a, &p->ab, p->now, false);
	assert_true(p->ab.n > 4);
	deliver_lit(b, &p->ab, p->now); /* dark: every packet was on a path */
	assert_int_equal(b->rcv_nxt, 0);

	p->now += (uint64_t)a->rtt.rto_us * 1000 + 1;
	conn_on_timer(a, p->now, UINT64_MAX / 2);
	assert_int_equal(a->stats.timeouts, 1);
	assert_int_equal(answer_probes(a, p->now), 0); /* one timeout: a tail loss, maybe */
	assert_int_equal(a->probe.unheard_ms, 0);
	emit(a, &p->ab, p->now, false);
	deliver_lit(b, &p->ab, p->now);

	p->now += (uint64_t)a->rtt.rto_us * 1000 + 1;
	conn_on_timer(a, p->now, UINT64_MAX / 2);
	assert_int_equal(a->stats.timeouts, 2);
	assert_true(a->probe.unheard_ms > 0); /* for the engine to tell the peer */
	/* a round for every silent path, though all 4 are live; the answers replace all 4, and
	 * the next answer finds none silent and ends the rescue */
	assert_int_equal(answer_probes(a, p->now), 4 * 16);
	assert_int_equal(a->stats.paths_rescued, 4);
	assert_int_equal(a->paths_live, 4);
	assert_int_equal(a->probe.rescue_ns, 0);
	assert_int_equal(live_dark(a), 0);
	/* b sent nothing while a heard nothing: its pairs are not known dark, it keeps them */
	conn_on_peer_unheard(b, a->probe.unheard_ms, p->now);
	a->probe.unheard_ms = 0;
	assert_int_equal(answer_probes(b, p->now), 0);
	assert_int_equal(b->probe.rescue_ns, 0);

	/* a's data now reaches b, whose acks take its dark pairs: a's timeouts go on, and b,
	 * told, replaces the pairs it acked on */
	lit_until_done(p, r);
	assert_int_equal(req_state(r), REQ_DONE);
	assert_int_equal(req_state(s), REQ_DONE);
	assert_memory_equal(src, dst, len);
	print_message("# rescue: a %u paths replaced, %llu timeouts; b %u replaced, %u dark left\n",
		      a->stats.paths_rescued, (unsigned long long)a->stats.timeouts,
		      b->stats.paths_rescued, live_dark(b));
	assert_true(b->stats.paths_rescued > 0);
	assert_int_equal(live_dark(a), 0);
	assert_int_equal(live_dark(b), 0); /* those it did not ack on too: no better known */
	free(src);
	free(dst);
	free(r);
	free(s);
}

/*
 * A rescue's round, answered: the answers that replace no path (the rescue found no silent path
 * left) leave their pairs unclaimed, free for the process's other engines.
 */
static void test_rescue_releases_pairs(void **state)
{
	struct pair *p = *state;
	struct harp_conn *a = &p->a, *b = &p->b;
	struct pairs *t = calloc(1, sizeof(*t));
	size_t len = 64 * PAYLOAD;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	struct harp_req *r, *s;
	uint32_t i, held = 0, free_for_other = 0;

	assert_non_null(t);
	conn_paths_init(a, 4, 47000, 64, 47000, 64, 11);
	conn_paths_init(b, 4, 47000, 64, 47000, 64, 12);
	more_paths(p, 4);
	a->pairs = t;
	a->pair_owner = 0;
	fill_pattern(src, len, 9);
	r = announce_recv(p, dst, len, 1);
	s = post_send(a, src, len, 1);
	emit(a, &p->ab, p->now, false);
	deliver_lit(b, &p->ab, p->now);
	for (i = 0; i < 2; i++) {
		p->now += (uint64_t)a->rtt.rto_us * 1000 + 1;
		conn_on_timer(a, p->now, UINT64_MAX / 2);
		emit(a, &p->ab, p->now, false);
		deliver_lit(b, &p->ab, p->now);
	}
	assert_int_equal(answer_probes(a, p->now), 4 * 16);
	assert_int_equal(a->stats.paths_rescued, 4);
	assert_int_equal(a->probe.rescue_ns, 0);
	/* the pairs of the round's candidates: a's own where a path runs, else anyone's */
	for (i = 0; i < a->probe.ncands; i++) {
		uint16_t sp = a->probe.cand_src[i], dp = a->probe.cand_dst[i];
		uint32_t k;
		bool path = false;

		for (k = 0; k < a->npaths; k++) {
			path |= a->paths[k].live && a->paths[k].src_port == sp &&
				a->paths[k].dst_port == dp;
		}
		if (path) {
			held++;
			assert_false(pairs_free_for(t, wire_ip_fold(&a->path.dst_ip), sp, dp, 1));
		} else {
			free_for_other +=
				pairs_free_for(t, wire_ip_fold(&a->path.dst_ip), sp, dp, 1);
		}
	}
	assert_int_equal(held, 4);
	assert_int_equal(free_for_other, a->probe.ncands - 4);
	a->pairs = NULL;
	free(t);
	free(src);
	free(dst);
	free(r);
	free(s);
}

/*
 * The peer's CHAN_UNHEARD starts at most one rescue every RESCUE_GAP_NS, also when the last
 * one's round found no silent path and ended (rescue_ns back to 0).
 */
static void test_unheard_limit(void **state)
{
	struct pair *p = *state;
	struct harp_conn *a = &p->a;
	size_t len = 16 * PAYLOAD;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	struct harp_req *r, *s;

	conn_paths_init(a, 4, 47000, 64, 47000, 64, 11);
	conn_paths_init(&p->b, 4, 47000, 64, 47000, 64, 12);
	more_paths(p, 4);
	fill_pattern(src, len, 5);
	r = announce_recv(p, dst, len, 1);
	s = post_send(a, src, len, 1);
	p->now += 1000000;
	emit(a, &p->ab, p->now, false); /* none of it arrives: the peer hears nothing of a */
	p->ab.n = 0;
	p->now += 50 * 1000000ull;
	conn_on_peer_unheard(a, 51, p->now);
	assert_int_equal(a->probe.rescue_ns, p->now);
	a->probe.rescue_ns = 0; /* its round found nothing to replace (rescue_take) */
	p->now += 1000000;
	conn_on_peer_unheard(a, 52, p->now);
	assert_int_equal(a->probe.rescue_ns, 0);
	p->now += 10 * 1000000ull;
	conn_on_peer_unheard(a, 62, p->now);
	assert_int_equal(a->probe.rescue_ns, p->now);
	free(src);
	free(dst);
	free(r);
	free(s);
}

/* The one pair that test_one_dark blackholes, a to b only (network order); 0: none. */
static uint16_t one_dark_src, one_dark_dst;

/*
 * Every path but one delivers, on a slow pair of hosts (each step a tenth of a second): the
 * connection must stay alive and deliver every byte; a packet the dark path holds goes again on
 * a live path, and the peer's acks on the live paths keep the connection alive whatever the one
 * path does. Run after a rescue has replaced every path (as in test_rescue), then with the
 * rescue's new pair of the oldest ack black-holed.
 */
static void test_one_dark(void **state)
{
	struct pair *p = *state;
	struct harp_conn *a = &p->a, *b = &p->b;
	const uint64_t peer_timeout = 10000000000ull, step = 100000000ull;
	size_t len = 2000 * PAYLOAD;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	struct harp_req *r, *s;
	int rounds, i;

	conn_paths_init(a, 4, 47000, 64, 47000, 64, 11);
	conn_paths_init(b, 4, 47000, 64, 47000, 64, 12);
	more_paths(p, 4);
	fill_pattern(src, len, 7);
	r = announce_recv(p, dst, len, 1);
	s = post_send(a, src, len, 1);
	/* every path of both dark (test_rescue's pairs), until a's rescue replaces them */
	emit(a, &p->ab, p->now, false);
	deliver_lit(b, &p->ab, p->now);
	for (i = 0; i < 2; i++) {
		p->now += (uint64_t)a->rtt.rto_us * 1000 + 1;
		conn_on_timer(a, p->now, peer_timeout);
		emit(a, &p->ab, p->now, false);
		deliver_lit(b, &p->ab, p->now);
	}
	answer_probes(a, p->now);
	assert_int_equal(live_dark(a), 0);
	/* then one of the new pairs goes dark too, a to b only, and the hosts slow down */
	one_dark_src = a->paths[a->npaths - 1].src_port;
	one_dark_dst = a->paths[a->npaths - 1].dst_port;
	for (rounds = 0; rounds < 3000 && req_state(r) != REQ_DONE &&
			 atomic_load(&a->state) == CONN_READY;
	     rounds++) {
		emit(a, &p->ab, p->now, false);
		emit(b, &p->ba, p->now, false);
		for (i = 0; i < p->ab.n; i++) {
			struct pkt *k = &p->ab.p[i];

			if (!dark_pair(k) &&
			    (k->src_port != one_dark_src || k->dst_port != one_dark_dst)) {
				deliver_one(b, k, p->now);
			}
		}
		p->ab.n = 0;
		deliver_lit(a, &p->ba, p->now);
		p->now += step;
		conn_on_timer(a, p->now, peer_timeout);
		conn_on_timer(b, p->now, peer_timeout);
		if (a->probe.unheard_ms) {
			conn_on_peer_unheard(b, a->probe.unheard_ms, p->now);
			a->probe.unheard_ms = 0;
		}
		if (b->probe.unheard_ms) {
			conn_on_peer_unheard(a, b->probe.unheard_ms, p->now);
			b->probe.unheard_ms = 0;
		}
		answer_probes(a, p->now);
		answer_probes(b, p->now);
	}
	print_message("# one dark path: %d rounds, %u retired (%u rescued), %llu timeouts, "
		      "state %d\n",
		      rounds, a->stats.paths_retired, a->stats.paths_rescued,
		      (unsigned long long)a->stats.timeouts, atomic_load(&a->state));
	assert_int_equal(atomic_load(&a->state), CONN_READY);
	assert_int_equal(req_state(r), REQ_DONE);
	assert_memory_equal(src, dst, len);
	free(src);
	free(dst);
	free(r);
	free(s);
}

/* One message of len bytes from a to b, a hop each way: sent, received whole, acked. */
static void slow_message(struct pair *p, const uint8_t *src, uint8_t *dst, size_t len,
			 uint64_t hop)
{
	struct harp_req *r = announce_recv(p, dst, len, 1);
	struct harp_req *s = post_send(&p->a, src, len, 1);

	emit(&p->a, &p->ab, p->now, false);
	p->now += hop;
	deliver_all(&p->b, &p->ab, p->now);
	emit(&p->b, &p->ba, p->now, true);
	p->now += hop;
	deliver_all(&p->a, &p->ba, p->now);
	assert_int_equal(req_state(s), REQ_DONE);
	assert_int_equal(req_state(r), REQ_DONE);
	assert_memory_equal(src, dst, len);
	free(r);
	free(s);
}

/*
 * vm_copy_rss_q2's death on starved guests (srtt 0.5-0.9 s): every path fell silent, a rescue's
 * answers replaced all the silent paths but one, and the packet the connection waited on sat on
 * that one (a retransmission takes the path acked last, a rescue replaces the path acked
 * longest ago first) until the next timeout, backed off past the peer timeout: "dead" 693 ms
 * after the rescue, the rest of its paths new and idle. Here a's pairs to b go dark (a to b
 * only) once a round trip of 600 ms was measured; the answers to a rescue round come after the
 * last timeout whose retransmission could be acked within the peer timeout, for all of a's paths
 * but one, and that one stays dark. The waiting packet must go on a new path then, and the
 * message arrive whole.
 */
static void test_rescue_last_dark(void **state)
{
	struct pair *p = *state;
	struct harp_conn *a = &p->a, *b = &p->b;
	const uint64_t peer_timeout = 10000000000ull, hop = 300000000ull; /* one way */
	uint8_t src[3 * PAYLOAD], dst[3 * PAYLOAD];
	struct harp_req *r, *s;
	uint64_t silent_from, next_timeout = 0;
	uint32_t answered = 0;
	int i, steps;

	conn_paths_init(a, 4, 47000, 64, 47000, 64, 11);
	conn_paths_init(b, 4, 47000, 64, 47000, 64, 12);
	more_paths(p, 4);
	/* a slow pair of hosts: messages one at a time, each way a hop */
	for (i = 0; i < 8; i++) {
		fill_pattern(src, sizeof(src), (uint8_t)i);
		slow_message(p, src, dst, sizeof(src), hop);
	}
	assert_true(a->rtt.srtt_us >= 500000);
	/* a last one of a packet: its path was acked last, so a retransmission takes it and a
	 * rescue replaces it last */
	slow_message(p, src, dst, 100, hop);
	/* then every pair of a's to b goes dark; a message of one packet waits (nothing else in
	 * flight: no ack of another packet can show it lost) */
	fill_pattern(src, sizeof(src), 99);
	memset(dst, 0, sizeof(dst));
	r = announce_recv(p, dst, PAYLOAD / 2, 2);
	emit(a, &p->ab, p->now, true); /* the CTS's ack: b has nothing in flight */
	p->now += hop;
	deliver_all(b, &p->ab, p->now);
	conn_on_timer(a, p->now, peer_timeout);
	silent_from = p->now;
	s = post_send(a, src, PAYLOAD / 2, 2);
	for (steps = 0;
	     steps < 200 && req_state(s) != REQ_DONE && atomic_load(&a->state) == CONN_READY;
	     steps++) {
		struct conn_tx tx;
		struct pkt k;

		p->now += hop;
		deliver_lit(b, &p->ab, p->now);
		deliver_all(a, &p->ba, p->now);
		conn_on_timer(a, p->now, peer_timeout);
		conn_on_timer(b, p->now, peer_timeout);
		if (a->probe.unheard_ms) {
			conn_on_peer_unheard(b, a->probe.unheard_ms, p->now);
			a->probe.unheard_ms = 0;
		}
		emit(a, &p->ab, p->now, false);
		emit(b, &p->ba, p->now, false);
		/* once the next timeout's retransmission could not be acked within the peer
		 * timeout, b's engine answers lit probes at once, but only as many as replace all
		 * of a's paths but one */
		while (conn_next_probe(a, &tx, p->now)) {
			k.src_port = tx.src_port;
			k.dst_port = tx.dst_port;
			if (tx.h.type == HARP_PKT_PROBE && !dark_pair(&k) &&
			    a->rto_base_ns + (uint64_t)(a->rtt.rto_us + a->rtt.srtt_us) * 1000 >
				    silent_from + peer_timeout &&
			    answered < a->paths_want - 1) {
				conn_on_probe_result(a, tx.h.rsn, tx.h.tag, p->now);
				answered = a->stats.paths_rescued;
				if (answered == a->paths_want - 1) {
					next_timeout = a->rto_base_ns + (uint64_t)a->rtt.rto_us * 1000;
					assert_int_equal(live_dark(a), 1);
				}
			}
		}
	}
	print_message("# rescue leaves one dark path: %d steps, %llu timeouts, %u rescued, next "
		      "timeout %.1f s, state %d\n",
		      steps, (unsigned long long)a->stats.timeouts, a->stats.paths_rescued,
		      (double)(next_timeout - silent_from) / 1e9, atomic_load(&a->state));
	assert_int_equal(answered, a->paths_want - 1);
	assert_true(next_timeout - silent_from > peer_timeout); /* the timer would come too late */
	assert_int_equal(atomic_load(&a->state), CONN_READY);
	assert_int_equal(req_state(s), REQ_DONE);
	assert_int_equal(req_state(r), REQ_DONE);
	assert_memory_equal(src, dst, PAYLOAD / 2);
	free(r);
	free(s);
}

/* Takes c's probes due now: those on lit pairs into late[] (round, candidate), as a peer that
 * answers them later would; returns how many went out. */
struct late_answer {
	uint32_t round, cand;
};

static uint32_t probes_unanswered(struct harp_conn *c, uint64_t now, struct late_answer *late,
				  uint32_t *nlate, uint32_t cap)
{
	struct conn_tx tx;
	struct pkt k;
	uint32_t n = 0;

	while (conn_next_probe(c, &tx, now)) {
		if (tx.h.type != HARP_PKT_PROBE) {
			continue;
		}
		n++;
		k.src_port = tx.src_port;
		k.dst_port = tx.dst_port;
		if (!dark_pair(&k) && *nlate < cap) {
			late[*nlate].round = tx.h.rsn;
			late[*nlate].cand = tx.h.tag;
			(*nlate)++;
		}
	}
	return n;
}

/*
 * A starved peer answers a rescue round after the next one began (vm_copy_rss_q2 under load: a
 * connection's 8 paths silent, 14 rescue rounds sent, 896 probes, and not one path replaced in
 * the 10 s before the peer timeout, the peer alive). Each timeout, and each CHAN_UNHEARD of the
 * peer's, begins a rescue round anew once the wait for answers is over, and that wait is learnt
 * from the answers: those to the round before were dropped as stale, so they neither replaced a
 * path nor taught the wait, and the next round was as late. Here a's pairs to b go dark, a's
 * rescue round goes out, b's report begins another, and then the first round's answers come: they
 * replace every silent path, the wait is learnt, and the message arrives.
 */
static void test_rescue_late_answers(void **state)
{
	struct pair *p = *state;
	struct harp_conn *a = &p->a, *b = &p->b;
	const uint64_t ms = 1000000;
	size_t len = 64 * PAYLOAD;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	struct late_answer first[CONN_PROBE_CANDS], second[CONN_PROBE_CANDS];
	uint32_t nfirst = 0, nsecond = 0, i;
	uint64_t silent_from, first_ns;
	struct harp_req *r, *s;

	assert_non_null(src);
	assert_non_null(dst);
	conn_paths_init(a, 4, 47000, 64, 47000, 64, 11);
	conn_paths_init(b, 4, 47000, 64, 47000, 64, 12);
	more_paths(p, 4);
	fill_pattern(src, len, 21);
	r = announce_recv(p, dst, len, 1);
	s = post_send(a, src, len, 1);
	silent_from = p->now;
	emit(a, &p->ab, p->now, false);
	deliver_lit(b, &p->ab, p->now); /* dark: every packet was on a path */
	for (i = 0; i < 2; i++) {
		p->now += (uint64_t)a->rtt.rto_us * 1000 + 1;
		conn_on_timer(a, p->now, UINT64_MAX / 2);
		emit(a, &p->ab, p->now, false);
		deliver_lit(b, &p->ab, p->now);
	}
	/* the rescue's round goes out; the peer's answers are slow to come */
	first_ns = p->now;
	assert_int_equal(probes_unanswered(a, p->now, first, &nfirst, CONN_PROBE_CANDS), 4 * 16);
	assert_true(nfirst > 4);
	/* the peer's own timeouts: it heard nothing of a since the pairs went dark, and a round
	 * of a's begins anew, its answers as slow */
	p->now += 100 * ms;
	conn_on_peer_unheard(a, (uint32_t)((p->now - silent_from) / ms), p->now);
	assert_true(probes_unanswered(a, p->now, second, &nsecond, CONN_PROBE_CANDS) > 0);
	assert_int_equal(a->stats.paths_rescued, 0);
	/* now the first round's answers: each pair reached b's engine, which no silent path of
	 * a's can say */
	p->now += 400 * ms;
	for (i = 0; i < nfirst; i++) {
		conn_on_probe_result(a, first[i].round, first[i].cand, p->now);
	}
	print_message("# a round answered %.0f ms late, after the next began: %u of a's paths "
		      "replaced, answers learnt to take %.0f ms\n",
		      (double)(p->now - first_ns) / 1e6, a->stats.paths_rescued,
		      (double)a->probe.answer_ns / 1e6);
	assert_int_equal(a->stats.paths_rescued, 4);
	assert_int_equal(live_dark(a), 0);
	assert_true(a->probe.answer_ns >= (p->now - first_ns) / 4); /* an average: it moved */
	/* the second round's answers come too, and replace nothing more */
	for (i = 0; i < nsecond; i++) {
		conn_on_probe_result(a, second[i].round, second[i].cand, p->now);
	}
	assert_int_equal(a->paths_live, 4);
	assert_int_equal(live_dark(a), 0);
	lit_until_done(p, r);
	assert_int_equal(req_state(r), REQ_DONE);
	assert_int_equal(req_state(s), REQ_DONE);
	assert_memory_equal(src, dst, len);
	free(src);
	free(dst);
	free(r);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_one_dark, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rescue_last_dark, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rescue_late_answers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_in_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rescue_releases_pairs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unheard_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_path_choice, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pacing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cwnd_max_all_paths, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parts_stay_parts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parts_obey_window, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parts_paced, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ack_twins, setup, teardown),
		cmocka_unit_test_setup_teardown(test_eager_send, setup, teardown),
		cmocka_unit_test_setup_teardown(test_eager_credit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unsolicited_held, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unsolicited_crossing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unsolicited_credits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unsolicited_msgsize_and_groups, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unsolicited_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unsolicited_peer_close, setup, teardown),
		cmocka_unit_test_setup_teardown(test_peer_close_forged, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unsolicited_beyond_credit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_linger, setup, teardown),
		cmocka_unit_test_setup_teardown(test_linger_gives_up_the_rest, setup, teardown),
		cmocka_unit_test_setup_teardown(test_probe_rounds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_probe_paced_by_answers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_steer_keeps_used_pairs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_probe_after_gap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reassembly_reverse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_duplicates_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_beyond_window, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reorder_window_widens, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rack_fast_retransmit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout_and_undo, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rebind_resends, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rescue, setup, teardown),
		cmocka_unit_test_setup_teardown(test_idle_peer_ping, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_path_not_dead, setup, teardown),
		cmocka_unit_test_setup_teardown(test_grouped_tags, setup, teardown),
		cmocka_unit_test_setup_teardown(test_msgsize, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lossy_many_messages, setup, teardown),
	};

	return cmocka_run_group_tests_name("conn", tests, NULL, NULL);
}
