// SPDX-License-Identifier: Apache-2.0
/*
 * engine.c's passes over fake rings: two engines whose AF_XDP rings are plain memory, joined by
 * a "kernel" in this file that moves each TX descriptor of one into a fill-ring frame and an RX
 * descriptor of the other (or drops it). It checks the lists a pass works from: connections with
 * new requests, those that may send, those owing a delayed ack, those whose next request waits
 * for a slot, and that a closed connection leaves none of them behind. With multi-buffer sides,
 * the kernel takes chains of TX descriptors and hands packets on as chains of RX pieces the way
 * copy mode does (256 bytes of headroom in each frame); chains it could never make (too long, a
 * piece past its frame, a chain cut short) are put on a ring by hand.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <arpa/inet.h>

#include "engine.h"

#define FRAMES 4096
#define RING 2048
#define PAYLOAD 1400
#define JUMBO_PAYLOAD (9000 - HARP_IP4_HLEN - HARP_UDP_HLEN - HARP_HDR_LEN)
#define JUMBO_PAYLOAD6 (9000 - HARP_IP6_HLEN - HARP_UDP_HLEN - HARP_HDR_LEN)
#define MAX_PAIRS 200

/* ---- what engine.c needs from the rest of the library ---------------------------------------- */

static int destroyed;

void chan_send_close(struct harp_conn *c)
{
	(void)c;
}

void chan_send_silent(struct harp_conn *c, uint32_t ms)
{
	(void)c;
	(void)ms;
}

bool chan_note_path(struct harp_conn *c, uint32_t round, uint32_t cand)
{
	(void)round;
	(void)cand;
	return c->nreports++ == 0;
}

void chan_send_paths(struct harp_conn *c)
{
	c->nreports = 0;
}

void chan_send_unheard(struct harp_conn *c, uint32_t ms)
{
	(void)c;
	(void)ms;
}

uint64_t chan_rtt_ns(const struct harp_conn *c)
{
	(void)c;
	return 0;
}

int chan_poll(struct harp_conn *c, uint64_t now)
{
	(void)c;
	(void)now;
	return 0;
}

int steer_enter(struct steer *s, int queue, int fd)
{
	(void)s;
	(void)queue;
	(void)fd;
	return 0;
}

int steer_leave(struct steer *s, int queue)
{
	(void)s;
	(void)queue;
	return 0;
}

void steer_claim(struct steer *s, int queue)
{
	(void)s;
	(void)queue;
}

void steer_release(struct steer *s, int queue)
{
	(void)s;
	(void)queue;
}

int steer_probe_forget(struct steer *s, uint32_t conn_id, uint64_t token)
{
	(void)s;
	(void)conn_id;
	(void)token;
	return 0;
}

void steer_check_attached(struct steer *s, char *buf, size_t len)
{
	(void)s;
	if (len) {
		buf[0] = '\0';
	}
}

int steer_probe_queues(struct steer *s, uint32_t conn_id, uint64_t token, uint64_t *queues)
{
	(void)s;
	(void)conn_id;
	(void)token;
	*queues = 0;
	return -ENOENT;
}

/* engine_env.release: the engine is done with c */
static void conn_destroy(struct harp_conn *c)
{
	destroyed++;
	conn_free(c);
	spsc_destroy(c->submit);
	close(c->ctrl_fd);
	c->submit = NULL;
}

/* ---- fake rings -------------------------------------------------------------------------------- */

/* The shared part of one ring: what the kernel and the socket's user both see. */
struct ring_mem {
	uint32_t producer, consumer, flags;
	void *ring;
};

struct side {
	bool sg; /* multi-buffer: TX slots, chains both ways */
	struct harp_params params;
	struct steer steer;
	struct harp_engine e;
	struct ring_mem fill, comp, tx, rx;
	struct harp_conn conns[MAX_PAIRS];
};

static void ring_prod(struct xsk_ring_prod *r, struct ring_mem *m, size_t elem)
{
	m->ring = calloc(RING, elem);
	assert_non_null(m->ring);
	r->cached_prod = 0;
	r->cached_cons = RING;
	r->mask = RING - 1;
	r->size = RING;
	r->producer = &m->producer;
	r->consumer = &m->consumer;
	r->ring = m->ring;
	r->flags = &m->flags; /* no wake-up ever needed */
}

static void ring_cons(struct xsk_ring_cons *r, struct ring_mem *m, size_t elem)
{
	m->ring = calloc(RING, elem);
	assert_non_null(m->ring);
	r->cached_prod = 0;
	r->cached_cons = 0;
	r->mask = RING - 1;
	r->size = RING;
	r->producer = &m->producer;
	r->consumer = &m->consumer;
	r->ring = m->ring;
	r->flags = &m->flags;
}

static void side_init(struct side *s, bool sg)
{
	struct xsk_port *p = &s->e.port;

	memset(s, 0, sizeof(*s));
	s->sg = sg;
	params_defaults(&s->params);
	s->steer.xsks_map_fd = -1;
	s->e.env = (struct engine_env){
		.params = &s->params,
		.steer = &s->steer,
		.ifname = "fake0",
		.release = conn_destroy,
	};
	s->e.epfd = epoll_create1(EPOLL_CLOEXEC);
	assert_true(s->e.epfd >= 0);
	assert_int_equal(xsk_port_layout(p, FRAMES, 4096, sg, HARP_HUGEPAGES_OFF), 0);
	p->sg = sg; /* as a bind with XDP_USE_SG leaves it */
	s->e.rx_joined = malloc(ENGINE_JOINED_BYTES);
	assert_non_null(s->e.rx_joined);
	ring_prod(&p->fill, &s->fill, sizeof(uint64_t));
	ring_prod(&p->tx, &s->tx, sizeof(struct xdp_desc));
	ring_cons(&p->comp, &s->comp, sizeof(uint64_t));
	ring_cons(&p->rx, &s->rx, sizeof(struct xdp_desc));
	p->fd = -1;
	p->ring_size = RING;
	xsk_port_expect(p, XSK_FILL_START / 2); /* the fill ring's first frames */
}

static void side_fini(struct side *s)
{
	struct xsk_port *p = &s->e.port;
	int i;

	for (i = 0; i < MAX_PAIRS; i++) {
		if (s->conns[i].submit) {
			conn_destroy(&s->conns[i]);
		}
	}
	close(s->e.epfd);
	free(s->e.rx_joined);
	xsk_port_unlayout(p);
	free(s->fill.ring);
	free(s->tx.ring);
	free(s->comp.ring);
	free(s->rx.ring);
}

/* The kernel drops frames longer than this on the way (a smaller MTU in the middle); 0: none. */
static uint32_t wire_drop_above;

/* One RX descriptor on to's ring: len bytes at offset off of frame addr, CONTD or not. */
static void rx_desc_put(struct side *to, uint64_t addr, uint32_t len, bool contd)
{
	struct xdp_desc *rd = &((struct xdp_desc *)to->rx.ring)[to->rx.producer & (RING - 1)];

	rd->addr = addr;
	rd->len = len;
	rd->options = contd ? XDP_PKT_CONTD : 0;
	to->rx.producer++;
}

/* A frame from to's fill ring. */
static uint64_t fill_take(struct side *to)
{
	uint64_t addr;

	assert_true(to->fill.consumer != to->fill.producer);
	addr = ((uint64_t *)to->fill.ring)[to->fill.consumer & (RING - 1)];
	to->fill.consumer++;
	return addr;
}

/*
 * The kernel's receive: len bytes of packet into to's fill-ring frames. A multi-buffer side gets
 * them as copy mode gives them, after XSK_RX_HEADROOM in each frame, chained; any other side in
 * one frame from its start. The first `pieces` pieces only (all when negative): the rest of the
 * chain is left off the ring.
 */
static void rx_packet(struct side *to, const uint8_t *pkt, uint32_t len, int pieces)
{
	uint32_t room = to->sg ? 4096 - XSK_RX_HEADROOM : 4096, off = to->sg ? XSK_RX_HEADROOM : 0;
	uint32_t done = 0, n;
	int k = 0;

	assert_true(to->sg || len <= room);
	do {
		uint64_t addr = fill_take(to) + off;

		n = len - done < room ? len - done : room;
		memcpy((uint8_t *)to->e.port.area.base + addr, pkt + done, n);
		done += n;
		if (pieces < 0 || k < pieces) {
			rx_desc_put(to, addr, n, done < len);
		}
		k++;
	} while (done < len);
}

/*
 * The wire holds PMTU answers back this long, as a loaded peer's come late; 0: it does not. They
 * wait here, in the order they are due, each with the side it goes to. The latest answer to
 * wire_answers_to is kept as well, to be sent again later: an old answer.
 */
static uint64_t wire_late_ns;
static struct side *wire_answers_to;
static struct late_pkt {
	struct side *to;
	uint64_t due_ns;
	uint32_t len;
	uint8_t pkt[256]; /* a PMTU answer goes alone: headers only */
} late_pkts[64], wire_answer;
static uint32_t late_head, late_tail;

static void late_pkt_set(struct late_pkt *l, struct side *to, const uint8_t *pkt, uint32_t len)
{
	assert_true(len <= sizeof(l->pkt));
	l->to = to;
	l->due_ns = now_ns() + wire_late_ns;
	l->len = len;
	memcpy(l->pkt, pkt, len);
}

/* Holds pkt back, if it is a PMTU answer and wire_late_ns says so (keeping it, for to). */
static bool wire_hold(struct side *to, const uint8_t *pkt, uint32_t len)
{
	struct wire_pkt p;

	if ((!wire_late_ns && to != wire_answers_to) || wire_parse(pkt, len, &p) != WIRE_OK ||
	    p.h.type != HARP_PKT_PMTU_ACK) {
		return false;
	}
	if (to == wire_answers_to) {
		late_pkt_set(&wire_answer, to, pkt, len);
	}
	if (!wire_late_ns) {
		return false;
	}
	assert_true(late_tail - late_head < ARRAY_SIZE(late_pkts));
	late_pkt_set(&late_pkts[late_tail++ % ARRAY_SIZE(late_pkts)], to, pkt, len);
	return true;
}

/* The held packets that are due go on. */
static void wire_release(void)
{
	uint64_t now = now_ns();

	while (late_head != late_tail &&
	       late_pkts[late_head % ARRAY_SIZE(late_pkts)].due_ns <= now) {
		struct late_pkt *l = &late_pkts[late_head++ % ARRAY_SIZE(late_pkts)];

		rx_packet(l->to, l->pkt, l->len, -1);
	}
}

/*
 * The kernel: every packet on from's TX ring (one descriptor, or a chain of them on a
 * multi-buffer side) goes into frames from to's fill ring and on to to's RX ring (all of them
 * when drop_after < 0, else only the first drop_after; the rest are lost), and every descriptor
 * back to from's completion ring. Returns how many packets were on the TX ring.
 */
static int wire_move(struct side *from, struct side *to, int drop_after)
{
	static uint8_t pkt[XSK_SLOT_BYTES];
	int moved = 0;

	wire_release();
	while (from->tx.consumer != from->tx.producer) {
		uint32_t len = 0;
		bool more;

		do {
			const struct xdp_desc *d =
				&((struct xdp_desc *)from->tx.ring)[from->tx.consumer & (RING - 1)];
			uint64_t *comp =
				&((uint64_t *)from->comp.ring)[from->comp.producer & (RING - 1)];

			/* each piece lies within its own frame, the chain within a packet */
			assert_true((d->addr & 4095) + d->len <= 4096);
			assert_true(len + d->len <= sizeof(pkt));
			memcpy(pkt + len, (uint8_t *)from->e.port.area.base + d->addr, d->len);
			len += d->len;
			more = d->options & XDP_PKT_CONTD;
			assert_true(!more || from->sg);
			*comp = d->addr;
			from->comp.producer++;
			from->tx.consumer++;
		} while (more);
		if ((drop_after < 0 || moved < drop_after) &&
		    (!wire_drop_above || len <= wire_drop_above) && !wire_hold(to, pkt, len)) {
			rx_packet(to, pkt, len, -1);
		}
		moved++;
	}
	return moved;
}

/* The newest packet on s's TX ring, not yet moved, parsed as the peer will parse it. */
static struct wire_pkt last_sent(struct side *s)
{
	const struct xdp_desc *d;
	struct wire_pkt p;

	assert_true(s->tx.producer != s->tx.consumer);
	d = &((struct xdp_desc *)s->tx.ring)[(s->tx.producer - 1) & (RING - 1)];
	assert_int_equal(wire_parse((uint8_t *)s->e.port.area.base + d->addr, d->len, &p), WIRE_OK);
	return p;
}

struct world {
	struct side a, b;
	int npairs;
	uint32_t payload; /* each connection's payload_max */
	uint32_t ceiling; /* path MTU discovery up to this (conn_pmtu_init); 0: none */
	bool ip6;	  /* the connections run IPv6 (2001:2::1 and ::2), else IPv4 */
};


/* Pair i: a.conns[i] and b.conns[i], one path, no probing, handed to their engines. */
static void pair_open(struct world *w, int i)
{
	struct harp_conn *ca = &w->a.conns[i], *cb = &w->b.conns[i];
	struct side *sides[2] = { &w->a, &w->b };
	struct harp_conn *cs[2] = { ca, cb };
	int k;

	for (k = 0; k < 2; k++) {
		struct harp_conn *c = cs[k];

		memset(c, 0, sizeof(*c));
		c->engine = &sides[k]->e;
		c->id = (uint32_t)(i + 1) | (1u << 12);
		c->peer_id = c->id;
		c->token = 0x0123456789abcdefull;
		c->payload_max = w->payload;
		if (w->ceiling) {
			conn_pmtu_init(c, w->ceiling);
		}
		c->path.ip6 = w->ip6;
		c->path.src_ip = wire_ip4(htonl(0xc6120001u + (uint32_t)k));
		c->path.dst_ip = wire_ip4(htonl(0xc6120002u - (uint32_t)k));
		if (w->ip6) { /* 2001:2::1 and 2001:2::2 */
			c->path.src_ip = (union wire_ip){ .b = { 0x20, 0x01, 0, 2 } };
			c->path.dst_ip = c->path.src_ip;
			c->path.src_ip.b[15] = (uint8_t)(1 + k);
			c->path.dst_ip.b[15] = (uint8_t)(2 - k);
		}
		c->ctrl_fd = eventfd(0, EFD_CLOEXEC);
		c->submit = spsc_create(CONN_REQS);
		assert_true(c->ctrl_fd >= 0);
		assert_non_null(c->submit);
		assert_int_equal(conn_alloc_state(c, 1024), 0);
		atomic_store(&c->state, CONN_READY);
		assert_int_equal(conn_add_path(c, htons(47000), htons(47000), now_ns()), 0);
		engine_handover(&sides[k]->e, c);
	}
}

/* Two fresh sides, multi-buffer or not, whose connections carry payload bytes a packet. */
static int world_new(void **state, bool sg, uint32_t payload)
{
	struct world *w = calloc(1, sizeof(*w));

	assert_non_null(w);
	side_init(&w->a, sg);
	side_init(&w->b, sg);
	w->payload = payload;
	*state = w;
	return 0;
}

static int setup(void **state)
{
	return world_new(state, false, PAYLOAD);
}

/* Both sides multi-buffer, with the payload of a 9000-byte IP MTU. */
static int setup_sg(void **state)
{
	return world_new(state, true, JUMBO_PAYLOAD);
}

/* The same two over IPv6. */
static int setup6(void **state)
{
	int err = world_new(state, false, PAYLOAD);

	((struct world *)*state)->ip6 = true;
	return err;
}

static int setup_sg6(void **state)
{
	int err = world_new(state, true, JUMBO_PAYLOAD6);

	((struct world *)*state)->ip6 = true;
	return err;
}

static int teardown(void **state)
{
	struct world *w = *state;

	wire_drop_above = 0;
	wire_late_ns = 0;
	wire_answers_to = NULL;
	late_head = late_tail; /* what is still held went to these sides */
	side_fini(&w->a);
	side_fini(&w->b);
	free(w);
	return 0;
}

/* ---- requests, as api.c posts them --------------------------------------------------------------- */

static struct harp_req *post(struct harp_conn *c, struct harp_req *r)
{
	r->conn = c;
	atomic_store(&r->state, REQ_PENDING);
	assert_true(spsc_push(c->submit, r));
	engine_notify(c->engine, c);
	return r;
}

static struct harp_req *post_send(struct harp_conn *c, const void *buf, uint64_t len)
{
	struct harp_req *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	r->kind = REQ_SEND;
	r->send.buf = buf;
	r->send.len = len;
	return post(c, r);
}

static struct harp_req *post_recv(struct harp_conn *c, void *buf, uint64_t cap)
{
	struct harp_req *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	r->kind = REQ_RECV;
	r->recv.nbufs = 1;
	r->recv.bufs[0] = buf;
	r->recv.cap[0] = cap;
	r->recv.msg_len[0] = UINT64_MAX;
	r->recv.rsn = c->next_rsn++;
	return post(c, r);
}

static int state_of(struct harp_req *r)
{
	return atomic_load(&r->state);
}

/* Both engines run and the wire moves everything, until done() or a bound. */
static void run_until(struct world *w, struct harp_req *r1, struct harp_req *r2)
{
	int i;

	for (i = 0; i < 20000; i++) {
		engine_progress(&w->a.e);
		wire_move(&w->a, &w->b, -1);
		engine_progress(&w->b.e);
		wire_move(&w->b, &w->a, -1);
		if ((!r1 || state_of(r1) != REQ_PENDING) && (!r2 || state_of(r2) != REQ_PENDING)) {
			return;
		}
	}
	fail_msg("requests still pending after 20000 rounds");
}

static int list_len(struct harp_conn *c, size_t link_off)
{
	int n = 0;

	for (; c; c = *(struct harp_conn **)((char *)c + link_off)) {
		n++;
	}
	return n;
}

/* ---- tests ------------------------------------------------------------------------------------ */

/* A 300 KB message crosses the fake wire byte-exact, and every list is empty afterwards. */
static void test_message_crosses(void **state)
{
	struct world *w = *state;
	size_t len = 300 * 1000, i;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	struct harp_req *s, *r;

	assert_non_null(src);
	assert_non_null(dst);
	for (i = 0; i < len; i++) {
		src[i] = (uint8_t)(i * 7 + 3);
	}
	pair_open(w, 0);
	r = post_recv(&w->b.conns[0], dst, len);
	s = post_send(&w->a.conns[0], src, len);
	run_until(w, s, r);
	assert_int_equal(state_of(s), REQ_DONE);
	assert_int_equal(state_of(r), REQ_DONE);
	assert_memory_equal(src, dst, len);
	engine_progress(&w->a.e);
	engine_progress(&w->b.e);
	assert_null(atomic_load(&w->a.e.to_take));
	assert_null(w->a.e.tx_list);
	assert_null(w->b.e.tx_list);
	assert_null(w->a.e.retry);
	free(s);
	free(r);
	free(src);
	free(dst);
}

/*
 * A pass has room for TX_BATCH descriptors, CONN_BURST a connection a round: 8 connections with
 * open windows and long messages want more than one pass holds. Each must get its turn. The tx
 * list used to take newcomers at its head and begin every pass there, and a connection cut
 * short by the pass's room kept its place: the first 4 took every pass, the others sent nothing
 * until those were done (on a starved guest, whose kernel takes few descriptors a pass, a
 * connection so left behind sent nothing for the peer timeout: vm_copy_rss_q2 under load, its
 * 8 paths with room and 448 packets queued to go again).
 */
static void test_tx_turns(void **state)
{
	struct world *w = *state;
	const size_t warm = 2u << 20, len = 8u << 20;
	const int pass_descs = 256; /* engine.c's TX_BATCH */
	struct harp_req *s[8], *r[8];
	uint8_t *src = malloc(len), *dst[8];
	uint64_t before[8], least = UINT64_MAX, most = 0;
	int i, k, done;

	assert_non_null(src);
	for (i = 0; i < (int)len; i++) {
		src[i] = (uint8_t)(i * 13 + 5);
	}
	/* each pair's window opened by a first message */
	for (i = 0; i < 8; i++) {
		pair_open(w, i);
		dst[i] = calloc(1, len);
		assert_non_null(dst[i]);
		r[i] = post_recv(&w->b.conns[i], dst[i], warm);
		s[i] = post_send(&w->a.conns[i], src, warm);
		run_until(w, s[i], r[i]);
		assert_int_equal(state_of(s[i]), REQ_DONE);
		assert_memory_equal(src, dst[i], warm);
		free(s[i]);
		free(r[i]);
		memset(dst[i], 0, warm);
	}
	/* the receives' CTSs reach a first: the sends go as soon as they are posted */
	for (i = 0; i < 8; i++) {
		r[i] = post_recv(&w->b.conns[i], dst[i], len);
	}
	engine_progress(&w->b.e);
	wire_move(&w->b, &w->a, -1);
	for (i = 0; i < 8; i++) {
		before[i] = w->a.conns[i].stats.tx_packets;
		s[i] = post_send(&w->a.conns[i], src, len);
	}
	for (k = 0; k < 30; k++) {
		engine_progress(&w->a.e);
		wire_move(&w->a, &w->b, -1);
		engine_progress(&w->b.e);
		wire_move(&w->b, &w->a, -1);
	}
	for (i = 0; i < 8; i++) {
		uint64_t n = w->a.conns[i].stats.tx_packets - before[i];

		least = n < least ? n : least;
		most = n > most ? n : most;
	}
	print_message("# 8 connections with open windows, 30 passes of %d descriptors: %llu to %llu "
		      "packets each\n",
		      pass_descs, (unsigned long long)least, (unsigned long long)most);
	/* 30 passes hold 7,680 descriptors: about 960 each in turn, none left out */
	assert_true(least >= (uint64_t)(30 * pass_descs / 8 / 2));
	for (k = 0, done = 0; k < 20000 && done < 8; k++) {
		engine_progress(&w->a.e);
		wire_move(&w->a, &w->b, -1);
		engine_progress(&w->b.e);
		wire_move(&w->b, &w->a, -1);
		for (done = 0, i = 0; i < 8; i++) {
			done += state_of(s[i]) == REQ_DONE && state_of(r[i]) == REQ_DONE;
		}
	}
	for (i = 0; i < 8; i++) {
		assert_int_equal(state_of(s[i]), REQ_DONE);
		assert_int_equal(state_of(r[i]), REQ_DONE);
		assert_memory_equal(src, dst[i], len);
		free(s[i]);
		free(r[i]);
		free(dst[i]);
	}
	free(src);
}

/*
 * 200 connection pairs, one of them busy: after the first pass (which looks at each new one) the
 * idle connections are on no list, and a message on pair 7 puts only pair 7 on them.
 */
static void test_idle_connections_stay_off_the_lists(void **state)
{
	struct world *w = *state;
	/* larger than an unsolicited send: it waits for its CTS */
	uint8_t msg[HARP_UNSOL_MAX_BYTES + 44] = { 1, 2, 3 }, got[sizeof(msg)] = { 0 };
	struct harp_req *s, *r;
	uint64_t sent;
	int i;

	for (i = 0; i < MAX_PAIRS; i++) {
		pair_open(w, i);
	}
	engine_progress(&w->a.e);
	engine_progress(&w->b.e);
	assert_null(w->a.e.tx_list);
	assert_null(w->b.e.tx_list);
	assert_int_equal(wire_move(&w->a, &w->b, -1), 0);

	s = post_send(&w->a.conns[7], msg, sizeof(msg));
	assert_true(w->a.conns[7].links.wants_take);
	assert_ptr_equal(atomic_load(&w->a.e.to_take), &w->a.conns[7]);
	engine_progress(&w->a.e);
	/* taken, nothing to send (no CTS yet): off every list again */
	assert_null(atomic_load(&w->a.e.to_take));
	assert_false(w->a.conns[7].links.wants_take);
	assert_null(w->a.e.tx_list);
	assert_int_equal(wire_move(&w->a, &w->b, -1), 0);

	r = post_recv(&w->b.conns[7], got, sizeof(got));
	sent = w->b.e.stats.tx_packets;
	engine_progress(&w->b.e);
	assert_int_equal(w->b.e.stats.tx_packets - sent, 1); /* the CTS, and nothing else */
	assert_int_equal(last_sent(&w->b).h.type, HARP_PKT_CTS);
	assert_int_equal(last_sent(&w->b).h.conn_id, w->a.conns[7].id);
	assert_null(w->b.e.tx_list);
	assert_int_equal(wire_move(&w->b, &w->a, -1), 1);

	sent = w->a.e.stats.tx_packets;
	engine_progress(&w->a.e); /* the CTS arrives: pair 7 sends its DATA */
	assert_int_equal(w->a.e.stats.tx_packets - sent, 1);
	assert_int_equal(last_sent(&w->a).h.type, HARP_PKT_DATA);
	assert_int_equal(last_sent(&w->a).h.len, sizeof(msg));
	run_until(w, s, r);
	assert_int_equal(state_of(r), REQ_DONE);
	assert_memory_equal(msg, got, sizeof(msg));
	for (i = 0; i < MAX_PAIRS; i++) {
		assert_false(w->a.conns[i].links.on_tx);
		assert_false(w->b.conns[i].links.on_tx);
	}
	free(s);
	free(r);
}

/*
 * Records of one connection posted together share a frame: twenty receives' CTSs go as one
 * frame, twenty small sends as two (eleven records of 128 bytes fit a 1,400-byte payload and its
 * header), and a reply with the next receive's CTS as one. Every message arrives intact.
 */
static void test_records_share_frames(void **state)
{
	struct world *w = *state;
	uint8_t msg[20][64], got[20][64], pong[8] = "pong!!!", back[8] = { 0 };
	struct harp_req *s[20], *r[20], *ps, *pr;
	uint64_t sent, bundled;
	int i, acks_alone;

	pair_open(w, 0);
	for (i = 0; i < 20; i++) {
		memset(msg[i], 'a' + i, sizeof(msg[i]));
		r[i] = post_recv(&w->b.conns[0], got[i], sizeof(got[i]));
	}
	sent = w->b.e.stats.tx_packets;
	bundled = w->b.e.stats.tx_bundled;
	engine_progress(&w->b.e);
	assert_int_equal(w->b.e.stats.tx_packets - sent, 1);
	assert_int_equal(w->b.e.stats.tx_bundled - bundled, 19);
	assert_int_equal(wire_move(&w->b, &w->a, -1), 1);

	engine_progress(&w->a.e); /* the twenty CTSs arrive */
	for (i = 0; i < 20; i++) {
		s[i] = post_send(&w->a.conns[0], msg[i], sizeof(msg[i]));
	}
	sent = w->a.e.stats.tx_packets;
	engine_progress(&w->a.e);
	assert_int_equal(w->a.e.stats.tx_packets - sent, 2);
	assert_int_equal(wire_move(&w->a, &w->b, -1), 2);
	engine_progress(&w->b.e);
	for (i = 0; i < 20; i++) {
		assert_int_equal(state_of(s[i]), REQ_DONE); /* small: done once sent */
		assert_int_equal(state_of(r[i]), REQ_DONE);
		assert_memory_equal(got[i], msg[i], sizeof(msg[i]));
	}

	/* a ping-pong's turn: B answers and posts its next receive in one pass, one frame */
	pr = post_recv(&w->a.conns[0], back, sizeof(back));
	engine_progress(&w->a.e);
	assert_int_equal(wire_move(&w->a, &w->b, -1), 1); /* A's CTS, and its ack of B's */
	sent = w->b.e.stats.tx_packets;
	engine_progress(&w->b.e);
	/* B owes A an ack now: it waits for company, unless its delay ran out within that pass
	 * (a busy machine can stretch a pass past CONN_ACK_DELAY_NS), and then it went alone */
	acks_alone = (int)(w->b.e.stats.tx_packets - sent);
	assert_true(acks_alone <= 1);
	if (acks_alone) {
		struct wire_pkt p = last_sent(&w->b);

		assert_int_equal(p.h.type, HARP_PKT_ACK);
		assert_false(wire_next(&p));
	}
	free(r[0]);
	r[0] = post_recv(&w->b.conns[0], got[0], sizeof(got[0]));
	ps = post_send(&w->b.conns[0], pong, sizeof(pong));
	sent = w->b.e.stats.tx_packets;
	engine_progress(&w->b.e);
	assert_int_equal(w->b.e.stats.tx_packets - sent, 1);
	{
		struct wire_pkt p = last_sent(&w->b);
		int types = 0;

		do {
			types |= 1 << p.h.type;
		} while (wire_next(&p));
		/* the CTS and the DATA, with the ack B owed A if its delay ran out meanwhile */
		assert_int_equal(types & ~(1 << HARP_PKT_ACK), 1 << HARP_PKT_CTS | 1 << HARP_PKT_DATA);
	}
	assert_int_equal(wire_move(&w->b, &w->a, -1), 1 + acks_alone);
	engine_progress(&w->a.e);
	assert_int_equal(state_of(pr), REQ_DONE);
	assert_memory_equal(back, pong, sizeof(pong));
	for (i = 0; i < 20; i++) {
		free(s[i]);
		free(r[i]);
	}
	free(ps);
	free(pr);
}

/*
 * The packets on from's TX ring, taken off it as the kernel would send them (each descriptor
 * completed) but kept here instead of arriving: up to max of them, each into pkts[i], lens[i].
 */
static int wire_take(struct side *from, uint8_t (*pkts)[XSK_SLOT_BYTES], uint32_t *lens, int max)
{
	int n = 0;

	while (from->tx.consumer != from->tx.producer) {
		uint32_t len = 0;
		bool more;

		assert_true(n < max);
		do {
			const struct xdp_desc *d =
				&((struct xdp_desc *)from->tx.ring)[from->tx.consumer & (RING - 1)];

			memcpy(pkts[n] + len, (uint8_t *)from->e.port.area.base + d->addr, d->len);
			len += d->len;
			more = d->options & XDP_PKT_CONTD;
			((uint64_t *)from->comp.ring)[from->comp.producer & (RING - 1)] = d->addr;
			from->comp.producer++;
			from->tx.consumer++;
		} while (more);
		lens[n++] = len;
	}
	return n;
}

/* A frame of len bytes into b's engine, which takes it in one pass. */
static void arrive(struct world *w, const uint8_t *pkt, uint32_t len)
{
	rx_packet(&w->b, pkt, len, -1);
	engine_progress(&w->b.e);
}

/*
 * A frame whose checksum fails changes nothing the receiver holds, whatever its header says,
 * though bulk DATA's body is summed as it is copied into place. After the first packet of a
 * message has arrived: a corrupted frame whose header points into those bytes (its offset
 * flipped to 0, its body garbled) leaves them as they were; one whose header is right and whose
 * body was garbled on the way is copied past them as it is summed, and those bytes count for
 * nothing (the receive's count stays, the packet sent again overwrites them). Each is counted
 * bad, and the message arrives whole. Single frames, chains of pieces, IPv4 and IPv6.
 */
static void test_corrupt_frames_change_nothing(void **state)
{
	static uint8_t pkts[8][XSK_SLOT_BYTES], bad[XSK_SLOT_BYTES];
	struct world *w = *state;
	uint32_t lens[8], pay = w->payload, rec = wire_records_at(w->ip6), i;
	size_t len = 4 * (size_t)pay;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	struct harp_req *s, *r;
	struct wire_pkt p;
	uint64_t bad_before, placed_before;
	int n;

	assert_non_null(src);
	assert_non_null(dst);
	for (i = 0; i < len; i++) {
		src[i] = (uint8_t)(i * 11 + 1);
	}
	pair_open(w, 0);
	r = post_recv(&w->b.conns[0], dst, len);
	engine_progress(&w->b.e);
	wire_move(&w->b, &w->a, -1); /* the CTS */
	s = post_send(&w->a.conns[0], src, len);
	engine_progress(&w->a.e);
	n = wire_take(&w->a, pkts, lens, 8);
	assert_int_equal(n, 4);
	for (i = 0; i < 4; i++) { /* each a lone DATA record: what is summed along its copy */
		assert_int_equal(wire_parse(pkts[i], lens[i], &p), WIRE_OK);
		assert_int_equal(p.h.type, HARP_PKT_DATA);
		assert_int_equal(p.h.offset, (uint64_t)i * pay);
		assert_int_equal(p.records_len, HARP_HDR_LEN + pay);
	}
	placed_before = w->b.e.stats.rx_placed;
	arrive(w, pkts[0], lens[0]);
	assert_int_equal(r->recv.got[0], pay);
	assert_int_equal(w->b.e.stats.rx_placed - placed_before, 1);
	assert_memory_equal(dst, src, pay);

	/* the second packet, its offset flipped to 0 and its body garbled: into received bytes */
	bad_before = w->b.e.stats.rx_bad;
	memcpy(bad, pkts[1], lens[1]);
	memset(bad + rec + offsetof(struct harp_hdr, offset), 0, 8);
	memset(bad + rec + HARP_HDR_LEN, 0xee, pay);
	arrive(w, bad, lens[1]);
	assert_int_equal(w->b.e.stats.rx_bad - bad_before, 1);
	assert_int_equal(r->recv.got[0], pay);
	assert_memory_equal(dst, src, pay);

	/* the last packet, its offset moved into the first's bytes and a body byte changed */
	memcpy(bad, pkts[3], lens[3]);
	bad[rec + offsetof(struct harp_hdr, offset) + 6] ^= (uint8_t)((3 * pay) >> 8);
	bad[lens[3] - 1] ^= 0x10;
	arrive(w, bad, lens[3]);
	assert_int_equal(w->b.e.stats.rx_bad - bad_before, 2);
	assert_int_equal(r->recv.got[0], pay);
	assert_memory_equal(dst, src, pay);

	/* the second packet, its body garbled, its header right: copied into the hole it names as
	 * it is summed, and counted for nothing */
	memcpy(bad, pkts[1], lens[1]);
	memset(bad + lens[1] - 100, 0xee, 100);
	arrive(w, bad, lens[1]);
	assert_int_equal(w->b.e.stats.rx_bad - bad_before, 3);
	assert_int_equal(r->recv.got[0], pay);
	assert_int_equal(w->b.e.stats.rx_placed - placed_before, 1);
	assert_int_equal(dst[2 * pay - 1], 0xee); /* what came, where the hole is */
	assert_memory_equal(dst, src, pay);

	/* the real ones: the message whole */
	for (i = 1; i < 4; i++) {
		rx_packet(&w->b, pkts[i], lens[i], -1);
	}
	run_until(w, s, r);
	assert_int_equal(state_of(r), REQ_DONE);
	assert_int_equal(state_of(s), REQ_DONE);
	assert_memory_equal(dst, src, len);
	assert_int_equal(w->b.e.stats.rx_placed - placed_before, 4);
	assert_int_equal(w->b.e.stats.rx_bad - bad_before, 3);
	free(s);
	free(r);
	free(src);
	free(dst);
}

/*
 * Multi-buffer sides at a 9000-byte MTU: a 300 KB message goes in packets of three transmit
 * descriptors and arrives as chains of three received pieces, byte-exact; every slot and frame
 * comes back to its pool once the kernel completes it.
 */
static void test_jumbo_chains_cross(void **state)
{
	struct world *w = *state;
	size_t len = 300 * 1000, i;
	uint8_t *src = malloc(len), *dst = calloc(1, len);
	struct xsk_port *pa = &w->a.e.port;
	uint32_t frame = wire_records_at(w->ip6) + HARP_HDR_LEN + w->payload;
	struct harp_req *s, *r;

	assert_non_null(src);
	assert_non_null(dst);
	for (i = 0; i < len; i++) {
		src[i] = (uint8_t)(i * 13 + 1);
	}
	assert_int_equal(xsk_port_tx_pieces(pa, frame), 3);
	assert_int_equal(xsk_port_rx_pieces(pa, frame), 3);
	pair_open(w, 0);
	r = post_recv(&w->b.conns[0], dst, len);
	s = post_send(&w->a.conns[0], src, len);
	run_until(w, s, r);
	assert_int_equal(state_of(s), REQ_DONE);
	assert_int_equal(state_of(r), REQ_DONE);
	assert_memory_equal(src, dst, len);
	/* 34 packets of data (300,000 / 8,908), each a chain both ways */
	assert_true(w->a.e.stats.tx_chains >= (len + w->payload - 1) / w->payload);
	assert_true(w->b.e.stats.rx_chains >= (len + w->payload - 1) / w->payload);
	assert_int_equal(w->b.e.stats.rx_bad_chain, 0);
	assert_int_equal(w->b.e.stats.rx_bad, 0);
	engine_progress(&w->a.e); /* the last completions */
	assert_int_equal(pa->slots.free, pa->slots.total);
	assert_int_equal(w->b.e.port.slots.free, w->b.e.port.slots.total);
	free(s);
	free(r);
	free(src);
	free(dst);
}

/* The first packet a sends next, taken off its TX ring whole (chain joined) into pkt. */
static uint32_t take_sent(struct side *a, uint8_t *pkt)
{
	uint32_t len = 0;
	bool more;

	do {
		const struct xdp_desc *d = &((struct xdp_desc *)a->tx.ring)[a->tx.consumer & (RING - 1)];

		memcpy(pkt + len, (uint8_t *)a->e.port.area.base + d->addr, d->len);
		len += d->len;
		more = d->options & XDP_PKT_CONTD;
		((uint64_t *)a->comp.ring)[a->comp.producer++ & (RING - 1)] = d->addr;
		a->tx.consumer++;
	} while (more);
	return len;
}

/*
 * Chains the kernel never makes are given back unread, whole, and counted once, the fill ring
 * gets every frame back, and a chain whose end is not on the ring yet waits for it: too many
 * pieces (none of them read as a packet), a piece past its frame's end, more bytes than any
 * packet, and a good packet whose last piece comes a pass later.
 */
static void test_chain_limits(void **state)
{
	struct world *w = *state;
	struct side *b = &w->b;
	static uint8_t pkt[XSK_SLOT_BYTES];
	static uint8_t src[20000], dst[20000];
	struct harp_req *s, *r;
	uint64_t rx, bad, chains;
	uint32_t len, fill_free, i;

	pair_open(w, 0);
	engine_progress(&w->a.e);
	engine_progress(&b->e);

	/* 20 pieces, all but the last saying more follows */
	rx = b->e.stats.rx_packets;
	bad = b->e.stats.rx_bad;
	for (i = 0; i < 20; i++) {
		rx_desc_put(b, fill_take(b) + XSK_RX_HEADROOM, 100, i < 19);
	}
	engine_progress(&b->e);
	assert_int_equal(b->rx.consumer, b->rx.producer); /* all 20 taken off the ring */
	assert_int_equal(b->e.stats.rx_bad_chain, 1);
	assert_int_equal(b->e.stats.rx_packets - rx, 0); /* its last 2 are no packet */
	assert_int_equal(b->e.stats.rx_bad - bad, 0);

	/* a piece that runs past its frame's end */
	rx_desc_put(b, fill_take(b) + XSK_RX_HEADROOM, 3000, true);
	rx_desc_put(b, fill_take(b) + XSK_RX_HEADROOM, 4096 - XSK_RX_HEADROOM + 1, false);
	engine_progress(&b->e);
	assert_int_equal(b->e.stats.rx_bad_chain, 2);
	/* five full pieces: more than the largest packet harp takes */
	for (i = 0; i < 5; i++) {
		rx_desc_put(b, fill_take(b) + XSK_RX_HEADROOM, 4096 - XSK_RX_HEADROOM, i < 4);
	}
	engine_progress(&b->e);
	assert_int_equal(b->e.stats.rx_bad_chain, 3);
	assert_int_equal(b->e.stats.rx_packets - rx, 0);
	assert_int_equal(b->rx.consumer, b->rx.producer);

	/* every frame of those chains went back to the fill ring */
	fill_free = b->fill.producer - b->fill.consumer;
	assert_true(fill_free >= XSK_FILL_START);

	/* a real jumbo packet, its last piece held back a pass */
	for (i = 0; i < sizeof(src); i++) {
		src[i] = (uint8_t)(i ^ 0x5a);
	}
	r = post_recv(&b->conns[0], dst, sizeof(src));
	s = post_send(&w->a.conns[0], src, sizeof(src));
	engine_progress(&b->e);
	wire_move(b, &w->a, -1); /* the CTS */
	engine_progress(&w->a.e);
	len = take_sent(&w->a, pkt);
	assert_true(len > 2 * (4096 - XSK_RX_HEADROOM)); /* three pieces */
	rx = b->e.stats.rx_packets;
	chains = b->e.stats.rx_chains;
	{
		uint32_t first = b->rx.producer;

		rx_packet(b, pkt, len, 2);
		engine_progress(&b->e);
		assert_int_equal(b->e.stats.rx_packets, rx); /* not a packet yet */
		assert_int_equal(b->rx.consumer, first);     /* its pieces wait on the ring */
		/* the kernel's last piece: the third frame rx_packet took */
		rx_desc_put(b, ((uint64_t *)b->fill.ring)[(b->fill.consumer - 1) & (RING - 1)] +
				       XSK_RX_HEADROOM,
			    len - 2 * (4096 - XSK_RX_HEADROOM), false);
	}
	engine_progress(&b->e);
	assert_int_equal(b->e.stats.rx_packets - rx, 1);
	assert_int_equal(b->e.stats.rx_chains - chains, 1);
	run_until(w, s, r);
	assert_int_equal(state_of(r), REQ_DONE);
	assert_memory_equal(src, dst, sizeof(src));
	assert_int_equal(b->e.stats.rx_bad_chain, 3);
	free(s);
	free(r);
}

/* A one-frame packet that is none (zeros: no IPv4 header) onto b's RX ring. */
static void rx_junk_put(struct side *b)
{
	uint64_t addr = fill_take(b);

	memset((uint8_t *)b->e.port.area.base + addr, 0, 64);
	rx_desc_put(b, addr, 64, false);
}

/*
 * A chain of too many pieces that a peek of the RX ring does not hold whole is still given back
 * whole, and none of its pieces is read as a packet's head, while the packets after it are read:
 * one the engine's batch of 64 cuts (it waits, and is dropped whole, counted once, from its head
 * a pass later), one whose tail comes to the ring a pass later (the same), and one longer than a
 * batch (dropped as it comes, and counted once, its tail in the next batch not again). Every
 * frame goes back to the fill ring.
 */
static void test_chain_too_long_spans_peeks(void **state)
{
	struct world *w = *state;
	struct side *b = &w->b;
	uint64_t rx, bad, bad_chain, chains;
	uint32_t fill_before, i;

	pair_open(w, 0);
	engine_progress(&w->a.e);
	engine_progress(&b->e);
	chains = b->e.stats.rx_chains;
	rx = b->e.stats.rx_packets;
	bad = b->e.stats.rx_bad;
	bad_chain = b->e.stats.rx_bad_chain;
	fill_before = b->fill.producer - b->fill.consumer;

	/* 40 packets, then 30 pieces the batch cuts after 24, then a packet */
	for (i = 0; i < 40; i++) {
		rx_junk_put(b);
	}
	for (i = 0; i < 30; i++) {
		rx_desc_put(b, fill_take(b) + XSK_RX_HEADROOM, 100, i < 29);
	}
	rx_junk_put(b);
	engine_progress(&b->e);
	engine_progress(&b->e);
	assert_int_equal(b->rx.consumer, b->rx.producer);
	assert_int_equal(b->e.stats.rx_bad_chain - bad_chain, 1);
	assert_int_equal(b->e.stats.rx_packets - rx, 41);
	assert_int_equal(b->e.stats.rx_bad - bad, 41);

	/* 20 pieces, the last still saying more follows; its tail and a packet a pass later */
	for (i = 0; i < 20; i++) {
		rx_desc_put(b, fill_take(b) + XSK_RX_HEADROOM, 100, true);
	}
	engine_progress(&b->e);
	rx_desc_put(b, fill_take(b) + XSK_RX_HEADROOM, 100, true);
	rx_desc_put(b, fill_take(b) + XSK_RX_HEADROOM, 100, false);
	rx_junk_put(b);
	engine_progress(&b->e);
	assert_int_equal(b->rx.consumer, b->rx.producer);
	assert_int_equal(b->e.stats.rx_bad_chain - bad_chain, 2);
	assert_int_equal(b->e.stats.rx_packets - rx, 42);
	assert_int_equal(b->e.stats.rx_bad - bad, 42);

	/* 70 pieces, more than a batch, then a packet */
	for (i = 0; i < 70; i++) {
		rx_desc_put(b, fill_take(b) + XSK_RX_HEADROOM, 100, i < 69);
	}
	rx_junk_put(b);
	engine_progress(&b->e);
	engine_progress(&b->e);
	assert_int_equal(b->rx.consumer, b->rx.producer);
	assert_int_equal(b->e.stats.rx_bad_chain - bad_chain, 3); /* once, though two batches */
	assert_int_equal(b->e.stats.rx_packets - rx, 43);
	assert_int_equal(b->e.stats.rx_bad - bad, 43);
	assert_int_equal(b->e.stats.rx_chains, chains);

	/* every frame those took came back to the fill ring */
	assert_true(b->fill.producer - b->fill.consumer >= fill_before);
}

/* Both engines and the wire, until done() holds or max_ms of real time (the PMTU timers'). */
static void run_for(struct world *w, bool (*done)(struct world *), int max_ms)
{
	uint64_t end = now_ns() + (uint64_t)max_ms * 1000000;

	while (now_ns() < end) {
		engine_progress(&w->a.e);
		wire_move(&w->a, &w->b, -1);
		engine_progress(&w->b.e);
		wire_move(&w->b, &w->a, -1);
		if (done(w)) {
			return;
		}
	}
	fail_msg("not done after %d ms", max_ms);
}

static struct harp_conn *pmtu_c; /* the connection searched() watches */
static bool searched(struct world *w)
{
	const struct conn_pmtu *pm = &pmtu_c->pmtu;

	(void)w;
	return pm->mtu && !pm->probe && pm->hi <= pm->lo + CONN_PMTU_STEP;
}

static struct harp_req *pmtu_s, *pmtu_r;
static bool both_done(struct world *w)
{
	(void)w;
	return atomic_load(&pmtu_s->state) != REQ_PENDING &&
	       atomic_load(&pmtu_r->state) != REQ_PENDING;
}

/* A PMTU test's message: len bytes of a pattern (seed), and where they are to land. */
struct pmtu_msg {
	uint8_t *src, *dst;
	size_t len;
};

static struct pmtu_msg pmtu_msg_new(size_t len, uint8_t seed)
{
	struct pmtu_msg m = { .src = malloc(len), .dst = calloc(1, len), .len = len };
	size_t i;

	assert_non_null(m.src);
	assert_non_null(m.dst);
	for (i = 0; i < len; i++) {
		m.src[i] = (uint8_t)(i * 31 + seed);
	}
	return m;
}

/* m from a to b: the receive and the send posted (pmtu_r, pmtu_s). */
static void pmtu_msg_post(struct pmtu_msg *m, struct harp_conn *a, struct harp_conn *b)
{
	memset(m->dst, 0, m->len);
	pmtu_r = post_recv(b, m->dst, m->len);
	pmtu_s = post_send(a, m->src, m->len);
}

/* m, posted, arrives byte-exact within max_ms; its requests go. */
static void pmtu_msg_arrives(struct world *w, struct pmtu_msg *m, int max_ms)
{
	run_for(w, both_done, max_ms);
	assert_int_equal(state_of(pmtu_s), REQ_DONE);
	assert_int_equal(state_of(pmtu_r), REQ_DONE);
	assert_memory_equal(m->src, m->dst, m->len);
	free(pmtu_s);
	free(pmtu_r);
}

static void pmtu_msg_free(struct pmtu_msg *m)
{
	free(m->src);
	free(m->dst);
}

/* A clean path between 9000-byte ends: a's first probe, of the ceiling, is answered. */
static void pmtu_reach_9000(struct world *w, struct harp_conn *a)
{
	int i;

	for (i = 0; i < 50 && a->pmtu.mtu != 9000; i++) {
		engine_progress(&w->a.e);
		wire_move(&w->a, &w->b, -1);
		engine_progress(&w->b.e);
		wire_move(&w->b, &w->a, -1);
	}
	assert_int_equal(a->pmtu.mtu, 9000);
}

/*
 * Path MTU discovery over the fake wire, 9000-byte interfaces: with a 1500-byte hop between
 * them, the search up from the 1200-byte base ends at 1500 and packets stay there; on a clean
 * path it reaches 9000 in one probe; and when the path then shrinks to 1500 under a transfer,
 * the size in use is found refused, packets fall to the base, those in flight go again in
 * parts, and the search climbs back to 1500: the message arrives byte-exact.
 */
static void test_pmtu(void **state)
{
	struct world *w = *state;
	struct pmtu_msg m = pmtu_msg_new(2000 * 1000, 7);
	struct harp_conn *a = &w->a.conns[0], *b = &w->b.conns[0];

	w->ceiling = 9000;
	wire_drop_above = HARP_ETH_HLEN + 1500;
	pair_open(w, 0);
	pmtu_c = a;
	run_for(w, searched, 3000);
	assert_int_equal(a->pmtu.mtu, 1500);
	assert_int_equal(a->payload_max, 1500 - wire_pkt_overhead(w->ip6));
	/* 9000, then halving towards 1200: 7 sizes refused (3 tries each), 1440 and 1500 not */
	assert_true(a->stats.pmtu_probes >= 3 * 7 + 2);
	assert_int_equal(a->stats.pmtu_drops, 0);

	/* a clean path: a new pair finds 9000 at once */
	wire_drop_above = 0;
	pair_open(w, 1);
	a = &w->a.conns[1];
	b = &w->b.conns[1];
	pmtu_reach_9000(w, a);
	assert_int_equal(a->stats.pmtu_probes, 1);
	/* the window counts bytes: it started as 32 packets of the base and stays that, not 32 of
	 * 9000 */
	assert_int_equal(a->npaths, 1);
	assert_int_equal(conn_cwnd(a), 32 * 1200);
	assert_int_equal(a->paths[0].cc.mss, 9000);

	/* and then it shrinks, with a message under way */
	pmtu_msg_post(&m, a, b);
	engine_progress(&w->b.e);
	wire_move(&w->b, &w->a, -1); /* the CTS */
	engine_progress(&w->a.e);    /* a window of 9000-byte packets */
	assert_true(a->paths[0].inflight_bytes >= conn_cwnd(a));
	assert_true(a->paths[0].inflight_bytes < conn_cwnd(a) + 9000); /* 5 of them, not 32 */
	assert_int_equal(a->paths[0].inflight, (32 * 1200 + 8999) / 9000);
	wire_drop_above = HARP_ETH_HLEN + 1500;
	pmtu_msg_arrives(w, &m, 5000);
	assert_int_equal(a->stats.pmtu_drops, 1);
	assert_true(a->stats.seg_parts > 0);
	/* fallen to the base, the search may still be climbing when the message is in */
	pmtu_c = a;
	run_for(w, searched, 3000);
	assert_int_equal(a->pmtu.mtu, 1500);
	assert_int_equal(a->stats.pmtu_drops, 1);
	pmtu_msg_free(&m);
}

/*
 * A hop narrower than 1500 between 9000-byte interfaces (an overlay, a VPN): packets start at
 * 1200, which every IPv4 path carries, so a message sent at once crosses before the search is
 * done; the search then stops within CONN_PMTU_STEP below the hop (1260 under 1280), and the
 * next message crosses at that size. Both byte-exact.
 */
static void test_pmtu_narrow(void **state)
{
	struct world *w = *state;
	struct pmtu_msg m = pmtu_msg_new(300 * 1000, 3);
	struct harp_conn *a = &w->a.conns[0], *b = &w->b.conns[0];

	w->ceiling = 9000;
	wire_drop_above = HARP_ETH_HLEN + 1280;
	pair_open(w, 0);
	pmtu_msg_post(&m, a, b);
	engine_progress(&w->a.e);
	assert_int_equal(a->pmtu.mtu, 1200);
	pmtu_msg_arrives(w, &m, 5000);

	pmtu_c = a;
	run_for(w, searched, 3000);
	assert_int_equal(a->pmtu.mtu, 1260);
	assert_int_equal(a->payload_max, 1260 - wire_pkt_overhead(w->ip6));
	assert_int_equal(a->stats.pmtu_drops, 0);
	pmtu_msg_post(&m, a, b);
	pmtu_msg_arrives(w, &m, 5000);
	assert_int_equal(a->pmtu.mtu, 1260);
	pmtu_msg_free(&m);
}

/* searched(), and every PMTU answer is in: none held by the wire, on a ring, or owed. */
static bool searched_all_in(struct world *w)
{
	const struct harp_conn *peer = &w->b.conns[pmtu_c - w->a.conns];

	return searched(w) && late_head == late_tail && w->a.rx.consumer == w->a.rx.producer &&
	       w->b.rx.consumer == w->b.rx.producer && !peer->pmtu.nanswers;
}

/* PMTU answers come 150 ms late: a probe is given up on (3 tries, 20 ms apart) before its
 * answer is in, every one of them. */
#define LATE_NS (150 * 1000000ull)

/*
 * A loaded peer answers every PMTU probe after its wait: each is given up on, and its answer
 * comes later. An answer proves its size however late, so the search through a 1500-byte hop
 * does not end at the 1200-byte base: it ends where prompt answers take it, at 1500 (a late
 * answer brings back the bound the refusal it belies took the place of).
 */
static void test_pmtu_late_search(void **state)
{
	struct world *w = *state;
	struct harp_conn *a = &w->a.conns[0];

	w->ceiling = 9000;
	wire_drop_above = HARP_ETH_HLEN + 1500;
	wire_late_ns = LATE_NS;
	pair_open(w, 0);
	pmtu_c = a;
	run_for(w, searched_all_in, 10000);
	assert_int_equal(a->pmtu.mtu, 1500);
	assert_int_equal(a->payload_max, 1500 - wire_pkt_overhead(w->ip6));
	assert_int_equal(a->stats.pmtu_drops, 0);
}

/*
 * A timeout under a transfer of 9000-byte packets on a clean path makes the sender ask whether
 * 9000 still gets through; the answer comes late, so packets fall to the base and go in parts
 * (a false black hole). The late answer to that very probe proves the path carried 9000 after
 * the doubt began: packets go back to 9000 at once, not after CONN_PMTU_RAISE_NS, and the
 * message arrives byte-exact.
 */
static void test_pmtu_late_confirm(void **state)
{
	struct world *w = *state;
	struct pmtu_msg m = pmtu_msg_new(2000 * 1000, 11);
	struct harp_conn *a = &w->a.conns[0], *b = &w->b.conns[0];
	uint64_t end;

	w->ceiling = 9000;
	pair_open(w, 0);
	pmtu_reach_9000(w, a);

	/* a's packets are lost until a timeout doubts the size in use; answers come late */
	pmtu_msg_post(&m, a, b);
	wire_late_ns = LATE_NS;
	end = now_ns() + 2000 * 1000000ull;
	while (!a->pmtu.confirming && now_ns() < end) {
		engine_progress(&w->a.e);
		wire_move(&w->a, &w->b, 0);
		engine_progress(&w->b.e);
		wire_move(&w->b, &w->a, -1);
	}
	assert_true(a->pmtu.confirming);
	assert_int_equal(a->pmtu.probe, 9000);
	pmtu_msg_arrives(w, &m, 10000);
	pmtu_c = a;
	run_for(w, searched_all_in, 5000);
	/* it fell, falsely (again after any later timeout: each answer is late), and is back */
	assert_true(a->stats.pmtu_drops >= 1);
	assert_int_equal(a->pmtu.mtu, 9000);
	pmtu_msg_free(&m);
}

/*
 * The path shrinks from 9000 to 1500 under a transfer: packets fall to the base and the search
 * climbs back to 1500. An answer from before the fall, that 9000 got through, then comes (kept
 * by the wire, sent again): it tells of the path as it was, and changes nothing.
 */
static void test_pmtu_old_answer(void **state)
{
	struct world *w = *state;
	struct pmtu_msg m = pmtu_msg_new(1000 * 1000, 5);
	struct harp_conn *a = &w->a.conns[0], *b = &w->b.conns[0];
	struct late_pkt old;

	w->ceiling = 9000;
	wire_answers_to = &w->a;
	pair_open(w, 0);
	pmtu_reach_9000(w, a);
	old = wire_answer;
	assert_true(old.len > 0);

	pmtu_msg_post(&m, a, b);
	wire_drop_above = HARP_ETH_HLEN + 1500;
	pmtu_msg_arrives(w, &m, 5000);
	pmtu_c = a;
	run_for(w, searched_all_in, 3000);
	assert_int_equal(a->pmtu.mtu, 1500);
	assert_int_equal(a->stats.pmtu_drops, 1);

	rx_packet(&w->a, old.pkt, old.len, -1);
	run_for(w, searched_all_in, 3000);
	assert_int_equal(a->pmtu.mtu, 1500);
	assert_int_equal(a->stats.pmtu_drops, 1);
	pmtu_msg_free(&m);
}

/* Part of a message arrives: the ack waits on the delayed-ack list, then leaves on its own. */
static void test_delayed_ack_list(void **state)
{
	struct world *w = *state;
	static uint8_t src[10 * PAYLOAD], dst[10 * PAYLOAD];
	struct harp_req *s, *r;
	struct timespec pause = { .tv_nsec = 2 * CONN_ACK_DELAY_NS };
	uint64_t sent, t0, due, calls;

	pair_open(w, 0);
	r = post_recv(&w->b.conns[0], dst, sizeof(dst));
	engine_progress(&w->b.e);
	wire_move(&w->b, &w->a, -1); /* the CTS */
	s = post_send(&w->a.conns[0], src, sizeof(src));
	engine_progress(&w->a.e);
	assert_int_equal(wire_move(&w->a, &w->b, 3), 10); /* only the first 3 of 10 arrive */

	sent = w->b.e.stats.tx_packets;
	t0 = now_ns();
	calls = atomic_load(&w->b.e.calls);
	engine_progress(&w->b.e);
	/* the keeper, were it running B, would wake for the ack's time, not the timers' */
	due = atomic_load(&w->b.e.next_due_ns);
	assert_true(due >= t0 + CONN_ACK_DELAY_NS && due <= now_ns() + CONN_ACK_DELAY_NS);
	assert_int_equal(atomic_load(&w->b.e.calls), calls + 1); /* a caller's pass */
	assert_true(w->b.conns[0].links.on_ack_wait);
	assert_ptr_equal(w->b.e.ack_wait, &w->b.conns[0]);
	assert_int_equal(w->b.e.stats.tx_packets, sent); /* in order, not due yet */

	nanosleep(&pause, NULL);
	engine_progress(&w->b.e);
	assert_int_equal(w->b.e.stats.tx_packets - sent, 1); /* the ACK */
	assert_int_equal(last_sent(&w->b).h.type, HARP_PKT_ACK);
	assert_int_equal(last_sent(&w->b).h.ack_psn, 3); /* the three that arrived, in order */
	assert_null(w->b.e.ack_wait);
	assert_false(w->b.conns[0].links.on_ack_wait);
	/* nothing owed and nothing cut short: the next pass is the timers' */
	assert_int_equal(atomic_load(&w->b.e.next_due_ns), w->b.e.next_timer_ns);
	free(s);
	free(r);
}

/*
 * A receive beyond the CONN_RECV_SLOTS outstanding waits on the retry list, and is taken once a
 * message completes an earlier one.
 */
static void test_retry_list(void **state)
{
	struct world *w = *state;
	struct harp_req *recvs[CONN_RECV_SLOTS + 1], *s;
	static uint8_t bufs[CONN_RECV_SLOTS + 1][8];
	uint8_t msg[8] = { 9 };
	int i;

	pair_open(w, 3);
	for (i = 0; i <= CONN_RECV_SLOTS; i++) {
		recvs[i] = post_recv(&w->b.conns[3], bufs[i], sizeof(bufs[i]));
	}
	engine_progress(&w->b.e);
	assert_ptr_equal(w->b.e.retry, &w->b.conns[3]);
	assert_int_equal(spsc_count(w->b.conns[3].submit), 1); /* the last one waits */

	s = post_send(&w->a.conns[3], msg, sizeof(msg));
	run_until(w, s, recvs[0]);
	assert_int_equal(state_of(recvs[0]), REQ_DONE);
	engine_progress(&w->b.e);
	assert_null(w->b.e.retry);
	assert_false(w->b.conns[3].links.on_retry);
	assert_int_equal(spsc_count(w->b.conns[3].submit), 0);
	free(s);
	for (i = 0; i <= CONN_RECV_SLOTS; i++) {
		free(recvs[i]);
	}
}

/*
 * Closing a connection whose request was posted but not taken fails it at once; the connection
 * lingers to ack the peer's last sends again until the peer closes too, then leaves nothing on
 * any list.
 */
static void test_close_before_take(void **state)
{
	struct world *w = *state;
	uint8_t buf[8];
	struct harp_req *r, *r0;

	pair_open(w, 0);
	pair_open(w, 1);
	engine_progress(&w->b.e);
	r = post_recv(&w->b.conns[1], buf, sizeof(buf));
	r0 = post_recv(&w->b.conns[0], buf, sizeof(buf)); /* stays with the open one */
	destroyed = 0;
	engine_close_conn(&w->b.e, &w->b.conns[1]);
	assert_int_equal(state_of(r), REQ_FAILED);
	assert_int_equal(r->err, -ECONNABORTED);
	assert_int_equal(destroyed, 0);
	assert_true(w->b.conns[1].lingering && w->b.conns[1].answering);
	/* the peer's end of file (chan_poll), then the timers' next pass */
	conn_fail(&w->b.conns[1], -ECONNRESET);
	w->b.e.next_timer_ns = 0;
	engine_progress(&w->b.e);
	assert_int_equal(destroyed, 1);
	assert_null(atomic_load(&w->b.e.to_take));
	/* the open one sent its CTS in that pass: no list holds anything but it */
	assert_true(w->b.e.tx_list == NULL || w->b.e.tx_list == &w->b.conns[0]);
	assert_true(w->b.e.ack_list == NULL || w->b.e.ack_list == &w->b.conns[0]);
	assert_true(w->b.e.ack_wait == NULL || w->b.e.ack_wait == &w->b.conns[0]);
	assert_int_equal(list_len(w->b.e.conns, offsetof(struct harp_conn, links.next_active)), 1);
	assert_ptr_equal(w->b.e.conns, &w->b.conns[0]);
	free(r);
	free(r0);
}

/*
 * A peer's CHAN_SILENT switches a zero-copy engine to copy mode only when this side bears it
 * out: a connection with nothing in flight ignores it (whoever wrote it); one with data in flight
 * holds it until its acks stop for the stall time, and then the fallback is raised.
 */
static void test_silence_report(void **state)
{
	struct world *w = *state;
	struct harp_conn *c = &w->a.conns[0];
	uint64_t stall = (uint64_t)w->a.params.peer_timeout_ms * 1000000ull * ENGINE_ZC_STALL_NUM /
			 ENGINE_ZC_STALL_DEN;
	uint8_t small[64] = { 1 };
	struct zc_fallback fallback = { 0 };
	struct harp_req *s;
	uint64_t until;

	pair_open(w, 0);
	w->a.e.port.zerocopy = true;
	w->a.e.env.copy_fallback = &fallback;
	/* nothing in flight */
	c->peer_hears_nothing_ms = (uint32_t)(stall / 1000000);
	c->peer_silent_ns = now_ns();
	w->a.e.silence_reports = true;
	w->a.e.next_timer_ns = 0;
	engine_progress(&w->a.e);
	assert_int_equal(atomic_load(&fallback.until_ns), 0);
	assert_int_equal(c->peer_hears_nothing_ms, 0);
	assert_false(w->a.e.silence_reports);

	/* data in flight (a small send goes at once), its ack not yet overdue: held */
	s = post_send(c, small, sizeof(small));
	engine_progress(&w->a.e);
	assert_true(c->snd_una != c->snd_nxt);
	c->peer_hears_nothing_ms = (uint32_t)(stall / 1000000);
	c->peer_silent_ns = now_ns();
	w->a.e.silence_reports = true;
	w->a.e.next_timer_ns = 0;
	engine_progress(&w->a.e);
	assert_int_equal(atomic_load(&fallback.until_ns), 0);
	assert_true(c->peer_hears_nothing_ms > 0);
	/* no ack for the stall time: borne out */
	c->last_ack_ns = now_ns() - stall - 1;
	w->a.e.next_timer_ns = 0;
	engine_progress(&w->a.e);
	/* copy mode for HARP_ZC_RETRY_MS, the first stall's quiet period */
	until = atomic_load(&fallback.until_ns);
	assert_true(until > now_ns() + 59000000000ull && until <= now_ns() + 60000000000ull);
	assert_int_equal(atomic_load(&fallback.stalls), 1);
	w->a.e.port.zerocopy = false; /* the fake port binds nothing again */
	w->a.e.env.copy_fallback = NULL;
	free(s);
}

/* The quiet period before zero copy is bound again: doubled each stall, at most an hour, never
 * with HARP_ZC_RETRY_MS=0. */
static void test_zc_quiet(void **state)
{
	(void)state;
	assert_true(zc_quiet_ns(0, 1) == UINT64_MAX);
	assert_true(zc_quiet_ns(60000, 1) == 60000000000ull);
	assert_true(zc_quiet_ns(60000, 2) == 120000000000ull);
	assert_true(zc_quiet_ns(60000, 4) == 480000000000ull);
	assert_true(zc_quiet_ns(60000, 7) == 3600000000000ull); /* 64 minutes, held to 60 */
	assert_true(zc_quiet_ns(60000, 4000000000u) == 3600000000000ull);
	assert_true(zc_quiet_ns(3600000, 3) == 3600000000000ull);
	assert_true(zc_quiet_ns(1, 40) == 3600000000000ull);
}

/* Who runs an engine: its callers while they spin on it, the keeper after a quiet window. */
static void test_keeper_watch(void **state)
{
	const uint64_t idle = 1000000, t = 5000000000ull;
	struct keeper_watch kw = { 0 };
	uint64_t calls = 500;

	(void)state;
	/* callers spinning: theirs, at every look */
	assert_false(keeper_watch(&kw, calls, t, idle));
	calls += 40000;
	assert_false(keeper_watch(&kw, calls, t + idle, idle));
	/* they stop (NCCL's proxy between operations): a whole window with none, then the keeper's */
	assert_false(keeper_watch(&kw, calls, t + idle + idle / 2, idle));
	assert_true(keeper_watch(&kw, calls, t + 2 * idle, idle));
	/* a caller that looks in once a millisecond (a rank computing) leaves it the keeper's */
	calls += 1;
	assert_true(keeper_watch(&kw, calls, t + 2 * idle + 5000, idle));
	calls += 1;
	assert_true(keeper_watch(&kw, calls, t + 3 * idle + 1, idle));
	assert_true(keeper_watch(&kw, calls + KEEPER_CALLER_PASSES - 1, t + 3 * idle + 2000, idle));
	/* a caller spinning again takes it back within KEEPER_CALLER_PASSES passes, mid-window */
	calls += KEEPER_CALLER_PASSES;
	assert_false(keeper_watch(&kw, calls, t + 3 * idle + 3000, idle));
	assert_false(keeper_watch(&kw, calls + 3, t + 3 * idle + 9000, idle));
	/* and the keeper has it again only after a whole quiet window */
	assert_true(keeper_watch(&kw, calls + 3, t + 4 * idle + 3000, idle));
}

/*
 * The keeper's steps: it naps while callers run every engine; once it runs one itself, it runs
 * passes KEEPER_BATCH_NS apart while they find work, at once when a timer is due, and otherwise
 * sleeps in poll() until the earliest timer, never longer than idle_ns.
 */
/*
 * TX wake-ups after the kernel pushed back. The port's socket is one end of a datagram socket
 * pair whose peer never reads: once its queue is full, each sendto() says EAGAIN, as an AF_XDP
 * socket in copy mode does when its send buffer is full. Holding descriptors (the TX ring's
 * consumer ahead of the completion ring's producer), the kick waits for half of them to complete
 * or for XSK_KICK_HOLD_NS, and counts each pass it held back; holding none (the kernel's per-call
 * budget), it kicks again at once; once a sendto goes through, pending is cleared.
 */
static void test_kick_backs_off(void **state)
{
	struct world *w = *state;
	struct xsk_port *p = &w->a.e.port;
	int sv[2], n = 0;
	uint64_t t = 1000000000ull;

	assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, sv), 0);
	while (send(sv[0], NULL, 0, MSG_DONTWAIT) == 0) {
		assert_true(++n < 100000);
	}
	assert_int_equal(errno, EAGAIN);
	p->fd = sv[0];
	w->a.tx.flags = XDP_RING_NEED_WAKEUP;
	/* the kernel took 10 descriptors and completed none */
	w->a.tx.producer = w->a.tx.consumer = 10;
	p->tx_pending = 10;
	assert_int_equal(xsk_port_kick(p, t), 0);
	assert_int_equal(p->tx_kicks, 1);
	assert_int_equal(p->tx_kick_busy, 1);
	assert_int_equal(p->tx_pending, 10);
	/* passes go by: held, no sendto */
	for (n = 0; n < 100; n++) {
		assert_int_equal(xsk_port_kick(p, t + 1000), 0);
	}
	assert_int_equal(p->tx_kicks, 1);
	assert_int_equal(p->tx_kick_held, 100);
	/* four complete: still held; the fifth is half of them */
	w->a.comp.producer = 4;
	assert_int_equal(xsk_port_kick(p, t + 2000), 0);
	assert_int_equal(p->tx_kicks, 1);
	w->a.comp.producer = 5;
	assert_int_equal(xsk_port_kick(p, t + 3000), 0);
	assert_int_equal(p->tx_kicks, 2);
	assert_int_equal(p->tx_kick_busy, 2); /* pushed back again: now holding 5 */
	assert_int_equal(xsk_port_kick(p, t + 4000), 0);
	assert_int_equal(p->tx_kicks, 2);
	/* nothing completes: the hold runs out */
	assert_int_equal(xsk_port_kick(p, t + 3000 + XSK_KICK_HOLD_NS), 0);
	assert_int_equal(p->tx_kicks, 3);
	/* everything completed, pushed back all the same (a per-call budget): kicks at once */
	w->a.comp.producer = 10;
	assert_int_equal(xsk_port_kick(p, t + 5000000), 0);
	assert_int_equal(p->tx_kicks, 4);
	assert_int_equal(xsk_port_kick(p, t + 5000001), 0);
	assert_int_equal(p->tx_kicks, 5);
	assert_int_equal(p->tx_kick_busy, 5);
	/* room in the socket: the kick goes through, and nothing is pending */
	while (recv(sv[1], NULL, 0, MSG_DONTWAIT) == 0) {
	}
	assert_int_equal(xsk_port_kick(p, t + 5000002), 0);
	assert_int_equal(p->tx_kicks, 6);
	assert_int_equal(p->tx_kick_busy, 5);
	assert_int_equal(p->tx_pending, 0);
	assert_int_equal(xsk_port_kick(p, t + 5000003), 0);
	assert_int_equal(p->tx_kicks, 6);
	p->fd = -1;
	w->a.tx.flags = 0;
	close(sv[0]);
	close(sv[1]);
}

static void test_keeper_plan(void **state)
{
	const uint64_t idle = 1000000, now = 5000000000ull;
	struct keeper_plan p;

	(void)state;
	p = keeper_plan(0, false, now, UINT64_MAX, idle); /* callers run them all */
	assert_int_equal(p.step, KEEPER_NAP);
	assert_int_equal(p.wait_ns, idle);
	p = keeper_plan(0, true, now, now, idle); /* what it found before a caller came back */
	assert_int_equal(p.step, KEEPER_NAP);

	/* packets handled: again, once the next batch had time to gather */
	p = keeper_plan(1, true, now, now + 300000, idle);
	assert_int_equal(p.step, KEEPER_AGAIN);
	assert_int_equal(p.wait_ns, KEEPER_BATCH_NS);
	/* but not past a timer due sooner */
	p = keeper_plan(1, true, now, now + KEEPER_BATCH_NS / 4, idle);
	assert_int_equal(p.step, KEEPER_AGAIN);
	assert_int_equal(p.wait_ns, KEEPER_BATCH_NS / 4);
	p = keeper_plan(2, false, now, now, idle); /* a timer due now: at once */
	assert_int_equal(p.step, KEEPER_AGAIN);
	assert_int_equal(p.wait_ns, 0);
	p = keeper_plan(1, true, now, now - 1, idle); /* overdue */
	assert_int_equal(p.step, KEEPER_AGAIN);
	assert_int_equal(p.wait_ns, 0);

	/* a pass that found nothing: it sleeps, until an ack owed soon */
	p = keeper_plan(1, false, now, now + CONN_ACK_DELAY_NS, idle);
	assert_int_equal(p.step, KEEPER_POLL);
	assert_int_equal(p.wait_ns, CONN_ACK_DELAY_NS);
	p = keeper_plan(1, false, now, now + 3 * idle, idle); /* a far timer: idle_ns at most */
	assert_int_equal(p.step, KEEPER_POLL);
	assert_int_equal(p.wait_ns, idle);
	p = keeper_plan(3, false, now, UINT64_MAX, idle); /* engines that said nothing */
	assert_int_equal(p.step, KEEPER_POLL);
	assert_int_equal(p.wait_ns, idle);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_message_crosses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kick_backs_off, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_frames_change_nothing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_frames_change_nothing, setup6,
						teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_frames_change_nothing, setup_sg,
						teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_frames_change_nothing, setup_sg6,
						teardown),
		cmocka_unit_test_setup_teardown(test_idle_connections_stay_off_the_lists, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_records_share_frames, setup, teardown),
		cmocka_unit_test_setup_teardown(test_delayed_ack_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retry_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_silence_report, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tx_turns, setup, teardown),
		cmocka_unit_test(test_zc_quiet),
		cmocka_unit_test_setup_teardown(test_close_before_take, setup, teardown),
		cmocka_unit_test_setup_teardown(test_jumbo_chains_cross, setup_sg, teardown),
		cmocka_unit_test_setup_teardown(test_chain_limits, setup_sg, teardown),
		cmocka_unit_test_setup_teardown(test_chain_too_long_spans_peeks, setup_sg,
						teardown),
		cmocka_unit_test_setup_teardown(test_pmtu, setup_sg, teardown),
		cmocka_unit_test_setup_teardown(test_pmtu_narrow, setup_sg, teardown),
		/* over IPv6: 20 bytes more of header in every packet */
		cmocka_unit_test_setup_teardown(test_message_crosses, setup6, teardown),
		cmocka_unit_test_setup_teardown(test_records_share_frames, setup6, teardown),
		cmocka_unit_test_setup_teardown(test_jumbo_chains_cross, setup_sg6, teardown),
		cmocka_unit_test_setup_teardown(test_pmtu, setup_sg6, teardown),
		cmocka_unit_test_setup_teardown(test_pmtu_narrow, setup_sg6, teardown),
		cmocka_unit_test_setup_teardown(test_pmtu_late_search, setup_sg, teardown),
		cmocka_unit_test_setup_teardown(test_pmtu_late_confirm, setup_sg, teardown),
		cmocka_unit_test_setup_teardown(test_pmtu_old_answer, setup_sg, teardown),
		cmocka_unit_test(test_keeper_watch),
		cmocka_unit_test(test_keeper_plan),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
