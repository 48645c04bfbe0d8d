// SPDX-License-Identifier: Apache-2.0
/*
 * wire.c: every packet type built and parsed back over IPv4 and over IPv6, checksums recomputed
 * here independently (each pseudo-header laid out as its RFC draws it), and every way a frame can
 * be malformed refused with its own reason. Frames are parsed from a heap copy of exactly their
 * length, and packets in pieces from pieces each in a heap buffer of its own size, so the ASan
 * build (unit_wire_asan) catches any read past the end.
 *
 * A mutation that should trip one check has its checksums recomputed first, so the frame fails
 * for the reason under test and not for a checksum that the mutation broke on the way.
 *
 * A test that holds for both families runs twice (BOTH in main): as named over IPv4, and with
 * "_ip6" after its name over IPv6, which its state says (ip6_of).
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "wire.h"

#define L3 HARP_ETH_HLEN
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

struct frame {
	uint8_t b[4096];
	uint32_t len;
	uint32_t l3; /* offset of the IP header: 14, or 18 behind a VLAN tag */
	bool ip6;    /* built on path6 (IPv6 headers), else on path4 */
};

static const struct wire_path path4 = {
	.src_mac = { 0x02, 0x11, 0x22, 0x33, 0x44, 0x55 },
	.dst_mac = { 0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee },
	.src_ip = { .b = { [10] = 0xff, 0xff, 10, 0, 0, 1 } }, /* 10.0.0.1, IPv4 mapped */
	.dst_ip = { .b = { [10] = 0xff, 0xff, 10, 0, 0, 2 } },
	.src_port = 0x5cb7, /* 47004 */
	.dst_port = 0x5db7, /* 47005 */
};

static const struct wire_path path6 = {
	.src_mac = { 0x02, 0x11, 0x22, 0x33, 0x44, 0x55 },
	.dst_mac = { 0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee },
	.ip6 = true,
	/* 2001:db8:0:7::1201 and ::1202 */
	.src_ip = { .b = { 0x20, 0x01, 0x0d, 0xb8, 0, 7, [14] = 0x12, 0x01 } },
	.dst_ip = { .b = { 0x20, 0x01, 0x0d, 0xb8, 0, 7, [14] = 0x12, 0x02 } },
	.src_port = 0x5cb7,
	.dst_port = 0x5db7,
};

/* The state of a test run over IPv6; a test's state is NULL over IPv4. */
static bool over_ip6 = true;

static bool ip6_of(void **state)
{
	return *state == &over_ip6;
}

static const struct wire_path *path_of(bool ip6)
{
	return ip6 ? &path6 : &path4;
}

/* Where a frame's UDP header and first harp header start, behind its IP header. */
static uint32_t udp_off(const struct frame *f)
{
	return f->l3 + (f->ip6 ? HARP_IP6_HLEN : HARP_IP4_HLEN);
}

static uint32_t hdr_off(const struct frame *f)
{
	return udp_off(f) + HARP_UDP_HLEN;
}

/* Where the first record's body starts in an untagged frame of the family. */
static uint32_t body_at(bool ip6)
{
	return HARP_ETH_HLEN + (ip6 ? HARP_IP6_HLEN : HARP_IP4_HLEN) + HARP_UDP_HLEN + HARP_HDR_LEN;
}

/* ---- independent checksums and field access -------------------------------------------------- */

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

static void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)(v & 0xff);
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++) {
		v = v << 8 | p[i];
	}
	return v;
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)rd16(p) << 16 | rd16(p + 2);
}

static void wr32(uint8_t *p, uint32_t v)
{
	wr16(p, (uint16_t)(v >> 16));
	wr16(p + 2, (uint16_t)v);
}

/* Sum of big-endian 16-bit words, an odd last byte padded with zero; 64-bit so nothing is lost. */
static uint64_t sum_words(const uint8_t *p, size_t n)
{
	uint64_t s = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		s += (i & 1) ? p[i] : (uint64_t)p[i] << 8;
	}
	return s;
}

/* Folds to 16 bits with end-around carry; a valid checksummed region folds to 0xffff. */
static uint16_t fold(uint64_t s)
{
	while (s > 0xffff) {
		s = (s & 0xffff) + (s >> 16);
	}
	return (uint16_t)s;
}

/*
 * The pseudo-header the UDP checksum covers, laid out as bytes. IPv4 (RFC 768): source and
 * destination address, a zero byte, protocol 17, the UDP length. IPv6 (RFC 8200 section 8.1):
 * the 16-byte source and destination addresses, the UDP length in 32 bits, three zero bytes and
 * next header 17.
 */
static uint64_t pseudo_sum(const struct frame *f, uint16_t udp_len)
{
	const uint8_t *ip = f->b + f->l3;
	uint8_t ph[40] = { 0 };

	if (!f->ip6) {
		memcpy(ph, ip + 12, 8);
		ph[9] = 17;
		wr16(ph + 10, udp_len);
		return sum_words(ph, 12);
	}
	memcpy(ph, ip + 8, 32);
	wr32(ph + 32, udp_len);
	ph[39] = 17;
	return sum_words(ph, 40);
}

/* The UDP checksum's sum over a datagram of udp_len bytes at udp_at (past the IP header, or
 * past extension headers put behind it). */
static uint64_t udp_sum_at(const struct frame *f, uint32_t udp_at, uint16_t udp_len)
{
	return pseudo_sum(f, udp_len) + sum_words(f->b + udp_at, udp_len);
}

static int udp_csum_ok(const struct frame *f)
{
	const uint8_t *udp = f->b + udp_off(f);

	return rd16(udp + 6) != 0 && fold(udp_sum_at(f, udp_off(f), rd16(udp + 4))) == 0xffff;
}

static void fix_ip4_csum(struct frame *f)
{
	uint8_t *ip = f->b + f->l3;

	wr16(ip + 10, 0);
	wr16(ip + 10, (uint16_t)~fold(sum_words(ip, HARP_IP4_HLEN)));
}

/* Recomputes the checksums (IPv4's header one, and UDP's) over the lengths the headers claim. */
static void fix_csums(struct frame *f)
{
	uint8_t *udp = f->b + udp_off(f);
	uint16_t udp_len = rd16(udp + 4);
	uint16_t c;

	if (!f->ip6) {
		fix_ip4_csum(f);
	}
	if (udp_off(f) + udp_len > f->len) {
		return; /* a UDP length past the frame: the parser must refuse it before summing */
	}
	wr16(udp + 6, 0);
	c = (uint16_t)~fold(udp_sum_at(f, udp_off(f), udp_len));
	wr16(udp + 6, c ? c : 0xffff);
}

/* Writes the lengths of a UDP datagram of udp_len bytes: IPv4's total length or IPv6's payload
 * length, and UDP's own. */
static void set_lengths(struct frame *f, uint16_t udp_len)
{
	uint8_t *ip = f->b + f->l3;

	if (f->ip6) {
		wr16(ip + 4, udp_len);
	} else {
		wr16(ip + 2, (uint16_t)(HARP_IP4_HLEN + udp_len));
	}
	wr16(f->b + udp_off(f) + 4, udp_len);
}

/* ---- building and parsing -------------------------------------------------------------------- */

static void build(struct frame *f, bool ip6, const struct harp_hdr *h, uint32_t body_len)
{
	uint32_t i;

	memset(f->b, 0x5a, sizeof(f->b));
	for (i = 0; i < body_len; i++) {
		f->b[body_at(ip6) + i] = (uint8_t)(i * 7 + 3);
	}
	f->len = wire_build(f->b, path_of(ip6), h, body_len, 0x1234);
	f->l3 = L3;
	f->ip6 = ip6;
	assert_int_equal(f->len, body_at(ip6) + body_len);
}

/* Parses a heap copy of exactly f->len bytes; on WIRE_OK checks where the body points. */
static enum wire_err parse(const struct frame *f, struct wire_pkt *out)
{
	uint8_t *copy = malloc(f->len ? f->len : 1);
	struct wire_pkt p;
	enum wire_err e;

	assert_non_null(copy);
	memcpy(copy, f->b, f->len);
	e = wire_parse(copy, f->len, &p);
	if (e == WIRE_OK) {
		uint32_t body_off = hdr_off(f) + HARP_HDR_LEN;

		assert_int_equal(p.ip6, f->ip6);
		assert_ptr_equal(p.body, copy + body_off);
		assert_true(body_off + p.h.len <= f->len);
		assert_memory_equal(p.body, f->b + body_off, p.h.len);
		if (out) {
			*out = p;
			out->body = NULL; /* it pointed into the copy */
		}
	}
	free(copy);
	return e;
}

static void expect_err(const struct frame *f, enum wire_err want)
{
	enum wire_err got = parse(f, NULL);

	if (got != want) {
		fail_msg("parse (%s): got %s (%d), expected %s (%d)", f->ip6 ? "IPv6" : "IPv4",
			 wire_err_name(got), got, wire_err_name(want), want);
	}
}

/* Puts an 802.1Q tag (VLAN 7) between the MAC addresses and the ethertype. */
static void add_vlan(struct frame *f, uint16_t tpid)
{
	memmove(f->b + 16, f->b + 12, f->len - 12);
	wr16(f->b + 12, tpid);
	wr16(f->b + 14, 7);
	f->len += HARP_VLAN_HLEN;
	f->l3 += HARP_VLAN_HLEN;
}

static struct harp_hdr hdr_data(uint64_t msg_len, uint64_t offset, uint16_t len)
{
	struct harp_hdr h = {
		.version = HARP_WIRE_VERSION,
		.type = HARP_PKT_DATA,
		.buf_idx = 3,
		.nbufs = 0,
		.conn_id = 0x01020304,
		.token = 0x1122334455667788ull,
		.psn = 0xfffffffe, /* near the wrap, to show all 32 bits travel */
		.ack_psn = 0x80000001,
		.ts = 0xdeadbeef,
		.ts_echo = 0xcafef00d,
		.rsn = 42,
		.tag = 0x7fffffff,
		.msg_len = msg_len,
		.offset = offset,
		.len = len,
	};

	return h;
}

static struct harp_hdr hdr_of(uint8_t type, uint16_t len)
{
	struct harp_hdr h = hdr_data(0, 0, len);

	h.type = type;
	if (type == HARP_PKT_CTS) {
		h.nbufs = 8;
		h.msg_len = 1ull << 40; /* capacity of the posted buffer */
	} else if (type == HARP_PKT_MSGERR) {
		h.msg_len = 123456789; /* the rejected length */
	}
	return h;
}

/* ---- round trips ----------------------------------------------------------------------------- */

static void check_ip4_header(const uint8_t *ip, uint16_t udp_len, uint16_t ip_id)
{
	assert_int_equal(ip[0], 0x45);
	assert_int_equal(ip[1], 0);
	assert_int_equal(rd16(ip + 2), HARP_IP4_HLEN + udp_len);
	assert_int_equal(rd16(ip + 4), ip_id);
	assert_int_equal(rd16(ip + 6), 0x4000); /* DF, no fragment */
	assert_int_equal(ip[8], 64);
	assert_int_equal(ip[9], 17);
	assert_memory_equal(ip + 12, &path4.src_ip.b[12], 4);
	assert_memory_equal(ip + 16, &path4.dst_ip.b[12], 4);
	assert_int_equal(fold(sum_words(ip, HARP_IP4_HLEN)), 0xffff);
	assert_int_equal(wire_ip_csum(ip, HARP_IP4_HLEN), 0);
}

/* As docs/PROTOCOL.md says a sender writes it: version 6, traffic class 0, flow label 0, payload
 * length the UDP length, next header 17 with nothing between, hop limit 64. */
static void check_ip6_header(const uint8_t *ip, uint16_t udp_len)
{
	assert_int_equal(ip[0], 0x60);
	assert_int_equal(ip[1], 0);
	assert_int_equal(rd16(ip + 2), 0);
	assert_int_equal(rd16(ip + 4), udp_len);
	assert_int_equal(ip[6], 17);
	assert_int_equal(ip[7], 64);
	assert_memory_equal(ip + 8, path6.src_ip.b, 16);
	assert_memory_equal(ip + 24, path6.dst_ip.b, 16);
}

static void check_headers(const struct frame *f, uint32_t body_len, uint16_t ip_id)
{
	const struct wire_path *path = path_of(f->ip6);
	const uint8_t *udp = f->b + udp_off(f);
	uint16_t udp_len = (uint16_t)(HARP_UDP_HLEN + HARP_HDR_LEN + body_len);

	assert_memory_equal(f->b, path->dst_mac, 6);
	assert_memory_equal(f->b + 6, path->src_mac, 6);
	assert_int_equal(rd16(f->b + 12), f->ip6 ? 0x86dd : 0x0800);
	if (f->ip6) {
		check_ip6_header(f->b + f->l3, udp_len);
	} else {
		check_ip4_header(f->b + f->l3, udp_len, ip_id);
	}
	assert_memory_equal(udp, &path->src_port, 2);
	assert_memory_equal(udp + 2, &path->dst_port, 2);
	assert_int_equal(rd16(udp + 4), udp_len);
	assert_true(udp_csum_ok(f));
}

/* The harp header's bytes on the wire: offsets and network byte order (docs/PROTOCOL.md). */
static void check_wire_header(const struct frame *f, const struct harp_hdr *h)
{
	const uint8_t *w = f->b + hdr_off(f);

	assert_int_equal(w[0], h->version);
	assert_int_equal(w[1], h->type);
	assert_int_equal(w[2], h->buf_idx);
	assert_int_equal(w[3], h->nbufs);
	assert_int_equal(rd32(w + 4), h->conn_id);
	assert_int_equal(rd64(w + 8), h->token);
	assert_int_equal(rd32(w + 16), h->psn);
	assert_int_equal(rd32(w + 20), h->ack_psn);
	assert_int_equal(rd32(w + 24), h->ts);
	assert_int_equal(rd32(w + 28), h->ts_echo);
	assert_int_equal(rd32(w + 32), h->rsn);
	assert_int_equal(rd32(w + 36), h->tag);
	assert_int_equal(rd64(w + 40), h->msg_len);
	assert_int_equal(rd64(w + 48), h->offset);
	assert_int_equal(rd16(w + 56), h->len);
	assert_int_equal(rd16(w + 58), h->flags);
	assert_int_equal(rd16(w + 60), h->trailer);
	assert_int_equal(rd16(w + 62), h->seg);
}

static void round_trip(bool ip6, const struct harp_hdr *h, uint32_t body_len)
{
	const struct wire_path *path = path_of(ip6);
	struct frame f;
	struct wire_pkt p;

	build(&f, ip6, h, body_len);
	check_headers(&f, body_len, 0x1234);
	check_wire_header(&f, h);
	assert_int_equal(parse(&f, &p), WIRE_OK);
	assert_memory_equal(&p.h, h, sizeof(*h));
	assert_memory_equal(&p.src_ip, &path->src_ip, 16);
	assert_memory_equal(&p.dst_ip, &path->dst_ip, 16);
	assert_int_equal(p.ip6, ip6);
	assert_int_equal(p.src_port, path->src_port);
	assert_int_equal(p.dst_port, path->dst_port);
	assert_memory_equal(p.src_mac, path->src_mac, 6);
}

static void test_round_trip_data(void **state)
{
	bool ip6 = ip6_of(state);
	struct harp_hdr h = hdr_data(10000, 4096, 1000);

	round_trip(ip6, &h, 1000);
	h = hdr_data(3840, 0, (uint16_t)(3840 - body_at(ip6))); /* fills a 3840-byte frame */
	round_trip(ip6, &h, h.len);
	h = hdr_data(1, 0, 1); /* odd length: the checksum pads the last byte */
	round_trip(ip6, &h, 1);
}

static void test_round_trip_zero_length_data(void **state)
{
	struct harp_hdr h = hdr_data(0, 0, 0);

	round_trip(ip6_of(state), &h, 0);
}

static void test_round_trip_ack(void **state)
{
	static const uint16_t lens[] = { 0, 1, 64, HARP_SACK_MAX_BYTES };
	struct harp_hdr h;
	size_t i;

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		h = hdr_of(HARP_PKT_ACK, lens[i]);
		round_trip(ip6_of(state), &h, lens[i]);
	}
}

static void test_round_trip_cts(void **state)
{
	struct harp_hdr h = hdr_of(HARP_PKT_CTS, 0);

	round_trip(ip6_of(state), &h, 0);
}

static void test_round_trip_msgerr(void **state)
{
	struct harp_hdr h = hdr_of(HARP_PKT_MSGERR, 0);

	round_trip(ip6_of(state), &h, 0);
}

static void harp_mutation(bool ip6, struct harp_hdr h, uint32_t body_len, enum wire_err want);

/* A PROBE names its round and candidate in rsn and tag, and has no body. */
static void test_round_trip_probe(void **state)
{
	bool ip6 = ip6_of(state);
	struct harp_hdr h = hdr_of(HARP_PKT_PROBE, 0);

	h.rsn = 7;
	h.tag = 63;
	round_trip(ip6, &h, 0);
	harp_mutation(ip6, hdr_of(HARP_PKT_PROBE, 8), 8, WIRE_ERR_LEN);
	/* a STEER, like a probe, has no body */
	h = hdr_of(HARP_PKT_STEER, 0);
	round_trip(ip6, &h, 0);
	harp_mutation(ip6, hdr_of(HARP_PKT_STEER, 4), 4, WIRE_ERR_LEN);
}

/*
 * A PMTU probe is padded to the IP size it asks about: msg_len is its body and the IP, UDP and
 * harp headers of its family (IPv4: len + 20 + 8 + 64; IPv6: len + 40 + 8 + 64), or 24 more with
 * a MAC trailer, at most HARP_IP_MAX; the other family's size is refused. Its answer has no body.
 */
static void test_pmtu_probe(void **state)
{
	bool ip6 = ip6_of(state);
	struct harp_hdr h = hdr_of(HARP_PKT_PMTU, 1000);
	const uint64_t ip_size = 1000 + (ip6 ? 40 : 20) + 8 + 64;

	h.msg_len = ip_size;
	h.tag = 5;
	round_trip(ip6, &h, 1000);
	h.msg_len = ip_size + HARP_AUTH_TRAILER; /* the size an authenticated connection's has */
	round_trip(ip6, &h, 1000);
	h.msg_len = ip6 ? ip_size - 20 : ip_size + 20; /* its size over the other family */
	harp_mutation(ip6, h, 1000, WIRE_ERR_LEN);
	h.msg_len = ip_size + 4;
	harp_mutation(ip6, h, 1000, WIRE_ERR_LEN);
	h.msg_len = 1000;
	harp_mutation(ip6, h, 1000, WIRE_ERR_LEN);
	h = hdr_of(HARP_PKT_PMTU_ACK, 0);
	h.msg_len = 9000;
	round_trip(ip6, &h, 0);
	harp_mutation(ip6, hdr_of(HARP_PKT_PMTU_ACK, 8), 8, WIRE_ERR_LEN);
}

/* A part of a packet cut again names 2 to HARP_SEG_MAX parts and one of them, and is never
 * unsolicited. */
static void test_parts(void **state)
{
	struct harp_hdr h = hdr_data(100000, 8192, 1000);

	(void)state;
	h.flags = HARP_DATA_F_SEG;
	h.seg = 3 << 8 | 2;
	round_trip(false, &h, 1000);
	h.seg = HARP_SEG_MAX << 8 | (HARP_SEG_MAX - 1);
	round_trip(false, &h, 1000);
	h.seg = 3 << 8 | 3; /* no such part */
	harp_mutation(false, h, 1000, WIRE_ERR_LEN);
	h.seg = 1 << 8; /* one part is no cut */
	harp_mutation(false, h, 1000, WIRE_ERR_LEN);
	h.seg = (HARP_SEG_MAX + 1) << 8;
	harp_mutation(false, h, 1000, WIRE_ERR_LEN);
	h = hdr_data(100, 0, 100);
	h.flags = HARP_DATA_F_SEG | HARP_DATA_F_UNSOL;
	h.seg = 2 << 8;
	harp_mutation(false, h, 100, WIRE_ERR_LEN);
}

/* The reserved fields are carried, not interpreted: a receiver sees what was sent. */
static void test_reserved_fields_carried(void **state)
{
	struct harp_hdr h = hdr_of(HARP_PKT_CTS, 0);

	h.flags = 0xa55a;
	h.seg = 0x0102;
	round_trip(ip6_of(state), &h, 0);
}

/* A computed UDP checksum of 0 must travel as 0xffff (0 means "none" in IPv4, and is refused in
 * IPv6). */
static void test_udp_csum_zero_sent_as_ffff(void **state)
{
	bool ip6 = ip6_of(state);
	struct harp_hdr h = hdr_data(2, 0, 2);
	struct frame f = { .l3 = L3, .ip6 = ip6 };
	uint32_t w;
	int found = 0;

	memset(f.b, 0, sizeof(f.b));
	for (w = 0; w <= 0xffff && !found; w++) {
		wr16(f.b + body_at(ip6), (uint16_t)w);
		f.len = wire_build(f.b, path_of(ip6), &h, 2, 0);
		found = rd16(f.b + udp_off(&f) + 6) == 0xffff;
	}
	assert_true(found);
	assert_true(udp_csum_ok(&f));
	assert_int_equal(parse(&f, NULL), WIRE_OK);
}

/* The sum against a byte-at-a-time reference: every length to 300, every alignment to 7. */
static void test_csum_every_length_and_alignment(void **state)
{
	uint8_t buf[320];
	size_t len, off, i;
	uint32_t x = 12345;

	(void)state;
	for (i = 0; i < sizeof(buf); i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (uint8_t)(x >> 16);
	}
	for (off = 0; off < 8; off++) {
		for (len = 0; len <= 300; len++) {
			uint16_t want = (uint16_t)~fold(sum_words(buf + off, len));

			assert_int_equal(wire_ip_csum(buf + off, len), want);
		}
	}
	memset(buf, 0xff, sizeof(buf)); /* every carry at once */
	assert_int_equal(wire_ip_csum(buf, 300), (uint16_t)~fold(sum_words(buf, 300)));
}

static void test_ip_csum_known_vector(void **state)
{
	/* A textbook IPv4 header whose checksum is 0xb861. */
	uint8_t ip[20] = { 0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
			   0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7 };

	(void)state;
	assert_int_equal(wire_ip_csum(ip, sizeof(ip)), 0xb861);
	wr16(ip + 10, 0xb861);
	assert_int_equal(wire_ip_csum(ip, sizeof(ip)), 0);
}

/* ---- truncation ------------------------------------------------------------------------------ */

static void truncate_all(struct frame *whole)
{
	struct frame f = *whole;
	uint32_t n;

	for (n = 0; n < whole->len; n++) {
		f.len = n;
		if (parse(&f, NULL) != WIRE_ERR_SHORT) {
			fail_msg("frame cut to %u of %u bytes: %s", n, whole->len,
				 wire_err_name(parse(&f, NULL)));
		}
	}
	f.len = whole->len;
	assert_int_equal(parse(&f, NULL), WIRE_OK);
}

/* Every cut, inside the Ethernet, IP (IPv6's 40 bytes too), UDP or harp header or the body. */
static void test_truncated_every_length(void **state)
{
	const uint8_t types[] = { HARP_PKT_DATA, HARP_PKT_ACK, HARP_PKT_CTS, HARP_PKT_MSGERR,
				  HARP_PKT_PROBE, HARP_PKT_STEER };
	bool ip6 = ip6_of(state);
	struct frame f;
	struct harp_hdr h;
	size_t i;

	for (i = 0; i < sizeof(types); i++) {
		uint16_t len = types[i] == HARP_PKT_DATA	? 300
			       : types[i] == HARP_PKT_ACK ? 64
							  : 0;

		h = types[i] == HARP_PKT_DATA ? hdr_data(300, 0, 300) : hdr_of(types[i], len);
		build(&f, ip6, &h, len);
		truncate_all(&f);
		add_vlan(&f, 0x8100);
		truncate_all(&f);
	}
	h = hdr_data(0, 0, 0);
	build(&f, ip6, &h, 0);
	truncate_all(&f);
}

/* Ethernet pads short frames: bytes after the IP packet's length are ignored. */
static void test_trailing_padding_accepted(void **state)
{
	struct harp_hdr h = hdr_of(HARP_PKT_CTS, 0);
	struct frame f;
	struct wire_pkt p;

	build(&f, ip6_of(state), &h, 0);
	memset(f.b + f.len, 0, 24);
	f.len += 24;
	assert_int_equal(parse(&f, &p), WIRE_OK);
	assert_int_equal(p.h.len, 0);
}

/* A UDP payload shorter than the harp header, all lengths and checksums consistent. */
static void test_udp_payload_shorter_than_header(void **state)
{
	struct harp_hdr h = hdr_of(HARP_PKT_CTS, 0);
	struct frame f;
	uint16_t payload;

	for (payload = 0; payload < HARP_HDR_LEN; payload += 9) {
		build(&f, ip6_of(state), &h, 0);
		f.len = hdr_off(&f) + payload;
		set_lengths(&f, (uint16_t)(HARP_UDP_HLEN + payload));
		fix_csums(&f);
		expect_err(&f, WIRE_ERR_SHORT);
	}
}

/* ---- Ethernet -------------------------------------------------------------------------------- */

static void test_ethertype(void **state)
{
	const uint16_t others[] = { 0x0806, 0x88cc, 0x0000, 0xffff, 0x88a8 };
	bool ip6 = ip6_of(state);
	struct harp_hdr h = hdr_of(HARP_PKT_CTS, 0);
	struct frame f;
	size_t i;

	for (i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		build(&f, ip6, &h, 0);
		wr16(f.b + 12, others[i]);
		expect_err(&f, WIRE_ERR_NOT_IP4);
	}
	/* a packet labelled as the other family: its version disagrees */
	build(&f, ip6, &h, 0);
	wr16(f.b + 12, ip6 ? 0x0800 : 0x86dd);
	expect_err(&f, WIRE_ERR_IP_HDR);
	/* A tagged frame whose inner type is not IP; and QinQ, which harp does not parse. */
	build(&f, ip6, &h, 0);
	add_vlan(&f, 0x8100);
	wr16(f.b + 16, 0x0806);
	expect_err(&f, WIRE_ERR_NOT_IP4);
	build(&f, ip6, &h, 0);
	add_vlan(&f, 0x88a8);
	expect_err(&f, WIRE_ERR_NOT_IP4);
}

static void test_vlan_accepted(void **state)
{
	bool ip6 = ip6_of(state);
	struct harp_hdr h = hdr_data(5000, 1000, 777);
	struct frame f;
	struct wire_pkt p;

	build(&f, ip6, &h, 777);
	add_vlan(&f, 0x8100);
	assert_int_equal(parse(&f, &p), WIRE_OK);
	assert_memory_equal(&p.h, &h, sizeof(h));
	assert_memory_equal(&p.src_ip, &path_of(ip6)->src_ip, 16);
	assert_memory_equal(&p.dst_ip, &path_of(ip6)->dst_ip, 16);
	assert_memory_equal(p.src_mac, path_of(ip6)->src_mac, 6);
}

/* ---- IPv4 ------------------------------------------------------------------------------------ */

/* Byte at of the IP header set to value, in a frame of the family (behind a VLAN tag or not). */
static void ip_mutation(bool ip6, uint32_t at, uint8_t value, int vlan, enum wire_err want)
{
	struct harp_hdr h = hdr_data(100, 0, 100);
	struct frame f;

	build(&f, ip6, &h, 100);
	if (vlan) {
		add_vlan(&f, 0x8100);
	}
	f.b[f.l3 + at] = value;
	fix_csums(&f);
	expect_err(&f, want);
}

static void test_ip_header_fields(void **state)
{
	int vlan;

	(void)state;
	for (vlan = 0; vlan < 2; vlan++) {
		ip_mutation(false, 0, 0x65, vlan, WIRE_ERR_IP_HDR); /* version 6 */
		ip_mutation(false, 0, 0x35, vlan, WIRE_ERR_IP_HDR); /* version 3 */
		ip_mutation(false, 0, 0x46, vlan, WIRE_ERR_IP_HDR); /* ihl 6: options */
		ip_mutation(false, 0, 0x4f, vlan, WIRE_ERR_IP_HDR); /* ihl 15 */
		ip_mutation(false, 0, 0x44, vlan, WIRE_ERR_IP_HDR); /* ihl 4: less than a header */
		ip_mutation(false, 6, 0x60, vlan, WIRE_ERR_IP_HDR); /* DF and MF */
		ip_mutation(false, 6, 0x20, vlan, WIRE_ERR_IP_HDR); /* MF alone */
		ip_mutation(false, 7, 0x01, vlan, WIRE_ERR_IP_HDR); /* fragment offset 8, DF kept */
		ip_mutation(false, 6, 0x5f, vlan, WIRE_ERR_IP_HDR); /* DF and offset's high bits */
		ip_mutation(false, 6, 0x00, vlan, WIRE_OK);	    /* DF clear: not a fragment */
		ip_mutation(false, 1, 0xb8, vlan, WIRE_OK);	    /* DSCP/ECN are not judged */
		ip_mutation(false, 8, 1, vlan, WIRE_OK);	    /* nor the TTL */
		ip_mutation(false, 9, 6, vlan, WIRE_ERR_NOT_UDP);   /* TCP */
		ip_mutation(false, 9, 1, vlan, WIRE_ERR_NOT_UDP);   /* ICMP */
		ip_mutation(false, 9, 0, vlan, WIRE_ERR_NOT_UDP);
	}
}

static void ip_total_length(uint16_t ip_len, enum wire_err want)
{
	struct harp_hdr h = hdr_data(100, 0, 100);
	struct frame f;

	build(&f, false, &h, 100);
	wr16(f.b + L3 + 2, ip_len);
	fix_csums(&f);
	expect_err(&f, want);
}

static void test_ip_total_length(void **state)
{
	const uint16_t right = HARP_IP4_HLEN + HARP_UDP_HLEN + HARP_HDR_LEN + 100;

	(void)state;
	ip_total_length(right + 1, WIRE_ERR_SHORT); /* claims bytes that did not arrive */
	ip_total_length(0xffff, WIRE_ERR_SHORT);
	ip_total_length(0, WIRE_ERR_IP_HDR); /* less than its own header */
	ip_total_length(HARP_IP4_HLEN - 1, WIRE_ERR_IP_HDR);
	ip_total_length(HARP_IP4_HLEN, WIRE_ERR_SHORT); /* no room for UDP */
	ip_total_length(HARP_IP4_HLEN + HARP_UDP_HLEN - 1, WIRE_ERR_SHORT);
	ip_total_length(right - 1, WIRE_ERR_UDP_LEN); /* UDP still claims the full length */
	ip_total_length(right, WIRE_OK);
}

static void test_ip_checksum(void **state)
{
	struct harp_hdr h = hdr_data(100, 0, 100);
	struct frame f;
	int bit;

	(void)state;
	for (bit = 0; bit < 16; bit++) {
		build(&f, false, &h, 100);
		f.b[L3 + 10 + bit / 8] ^= (uint8_t)(1u << (bit % 8));
		expect_err(&f, WIRE_ERR_IP_CSUM);
	}
	build(&f, false, &h, 100);
	f.b[L3 + 13] ^= 0x10; /* source address changed, checksum not */
	expect_err(&f, WIRE_ERR_IP_CSUM);
	build(&f, false, &h, 100);
	f.b[L3 + 8] = 63; /* TTL changed, checksum not */
	expect_err(&f, WIRE_ERR_IP_CSUM);
}

/* ---- IPv6 ------------------------------------------------------------------------------------ */

/* The fixed header's fields: version 6 only; traffic class, flow label and hop limit not judged;
 * a next header of another protocol, or any other (an extension header, known or not). */
static void test_ip6_header_fields(void **state)
{
	const uint8_t not_udp[] = { 6, 58, 59 }; /* TCP, ICMPv6, no next header */
	/* Hop-by-Hop, Routing, Fragment, Destination Options, AH, ESP, Mobility, HIP, Shim6, the
	 * experimental 253 and 254, the reserved 255, and IPv4's ICMP and IP-in-IP */
	const uint8_t others[] = { 0, 43, 44, 60, 51, 50, 135, 139, 140, 253, 254, 255, 1, 4 };
	size_t i;
	int vlan;

	(void)state;
	for (vlan = 0; vlan < 2; vlan++) {
		ip_mutation(true, 0, 0x40, vlan, WIRE_ERR_IP_HDR); /* version 4 behind 0x86dd */
		ip_mutation(true, 0, 0x70, vlan, WIRE_ERR_IP_HDR);
		ip_mutation(true, 0, 0x00, vlan, WIRE_ERR_IP_HDR);
		ip_mutation(true, 0, 0xf6, vlan, WIRE_ERR_IP_HDR);
		ip_mutation(true, 0, 0x6b, vlan, WIRE_OK); /* traffic class */
		ip_mutation(true, 1, 0xff, vlan, WIRE_OK); /* traffic class and flow label */
		ip_mutation(true, 3, 0x5a, vlan, WIRE_OK); /* flow label */
		ip_mutation(true, 7, 1, vlan, WIRE_OK);	   /* hop limit */
		ip_mutation(true, 7, 0, vlan, WIRE_OK);
		for (i = 0; i < sizeof(not_udp); i++) {
			ip_mutation(true, 6, not_udp[i], vlan, WIRE_ERR_NOT_UDP);
		}
		for (i = 0; i < sizeof(others); i++) {
			ip_mutation(true, 6, others[i], vlan, WIRE_ERR_IP6_EXT);
		}
	}
}

/* An extension header's first bytes as its type lays them out; next is what follows it. */
static void fill_ext(uint8_t *ext, uint8_t type, uint8_t next, uint32_t len)
{
	switch (type) {
	case 44: /* Fragment, 8 bytes: offset 0, no more fragments (an atomic fragment) */
		ext[0] = next;
		wr32(ext + 4, 0x2a2a2a2a); /* identification */
		break;
	case 43: /* Routing: type 0, no segments left, one address */
		ext[0] = next;
		ext[1] = (uint8_t)(len / 8 - 1);
		break;
	case 51: /* Authentication Header: its length in 4-byte units less 2, an SPI */
		ext[0] = next;
		ext[1] = (uint8_t)(len / 4 - 2);
		wr32(ext + 4, 0x100);
		break;
	case 50: /* ESP: an SPI and sequence number; its next header would be in its trailer */
		wr32(ext, 0x100);
		wr32(ext + 4, 1);
		break;
	default: /* Hop-by-Hop, Destination Options and unknown ones: options, one PadN */
		ext[0] = next;
		ext[1] = (uint8_t)(len / 8 - 1);
		ext[2] = 1;
		ext[3] = (uint8_t)(len - 4);
	}
}

/*
 * Puts a len-byte extension header of the type between the IPv6 header and what follows it, as
 * a sender that used one would: the IPv6 header's next header names it, it names what it
 * displaced, and the payload length counts it. Nothing the UDP checksum covers changes.
 */
static void insert_ext(struct frame *f, uint8_t type, uint32_t len)
{
	uint8_t *ip = f->b + f->l3, *ext = ip + HARP_IP6_HLEN;

	assert_true(f->ip6 && len >= 8 && len % 8 == 0 && f->len + len <= sizeof(f->b));
	memmove(ext + len, ext, f->len - f->l3 - HARP_IP6_HLEN);
	memset(ext, 0, len);
	fill_ext(ext, type, ip[6], len);
	ip[6] = type;
	wr16(ip + 4, (uint16_t)(rd16(ip + 4) + len));
	f->len += len;
}

/* A DATA frame over IPv6 with extension headers types[0..n) of lens[0..n), in that order, before
 * its UDP header: refused as WIRE_ERR_IP6_EXT, its UDP checksum still good behind them. */
static void ext_chain(const uint8_t *types, const uint32_t *lens, int n, int vlan)
{
	struct harp_hdr h = hdr_data(100, 0, 100);
	const uint16_t udp_len = HARP_UDP_HLEN + HARP_HDR_LEN + 100;
	uint32_t ext_len = 0;
	struct frame f;
	int i;

	build(&f, true, &h, 100);
	if (vlan) {
		add_vlan(&f, 0x8100);
	}
	for (i = n - 1; i >= 0; i--) {
		insert_ext(&f, types[i], lens[i]);
		ext_len += lens[i];
	}
	assert_int_equal(f.b[f.l3 + 6], types[0]);
	assert_int_equal(fold(udp_sum_at(&f, udp_off(&f) + ext_len, udp_len)), 0xffff);
	expect_err(&f, WIRE_ERR_IP6_EXT);
}

/* Real extension headers in front of harp's UDP, each kind alone and in a chain: never walked. */
static void test_ip6_extension_headers(void **state)
{
	/* Hop-by-Hop, Routing, Fragment, Destination Options, AH, ESP, and an unknown one */
	const uint8_t types[] = { 0, 43, 44, 60, 51, 50, 253 };
	const uint32_t lens[] = { 8, 24, 8, 16, 24, 8, 8 };
	int vlan;
	size_t i;

	(void)state;
	for (vlan = 0; vlan < 2; vlan++) {
		for (i = 0; i < sizeof(types); i++) {
			ext_chain(&types[i], &lens[i], 1, vlan);
		}
		ext_chain(types, lens, 4, vlan); /* Hop-by-Hop, Routing, Fragment, Destination */
	}
}

/* A jumbogram (RFC 2675): payload length 0, its length in a Hop-by-Hop Jumbo Payload option; and
 * a payload length of 0 with UDP right behind, which has no length anywhere. */
static void test_ip6_jumbogram(void **state)
{
	struct harp_hdr h = hdr_data(100, 0, 100);
	struct frame f;
	uint8_t *ip, *hbh;

	(void)state;
	build(&f, true, &h, 100);
	insert_ext(&f, 0, 8);
	ip = f.b + f.l3;
	hbh = ip + HARP_IP6_HLEN;
	hbh[2] = 0xc2; /* Jumbo Payload */
	hbh[3] = 4;
	wr32(hbh + 4, rd16(ip + 4));
	wr16(ip + 4, 0);
	expect_err(&f, WIRE_ERR_IP_HDR);
	build(&f, true, &h, 100);
	wr16(f.b + f.l3 + 4, 0);
	expect_err(&f, WIRE_ERR_IP_HDR);
	add_vlan(&f, 0x8100);
	expect_err(&f, WIRE_ERR_IP_HDR);
}

static void ip6_payload_length(uint16_t payload, enum wire_err want)
{
	struct harp_hdr h = hdr_data(100, 0, 100);
	struct frame f;

	build(&f, true, &h, 100);
	wr16(f.b + L3 + 4, payload);
	fix_csums(&f);
	expect_err(&f, want);
}

/* The payload length against the frame and the UDP length; a frame cut inside the header. */
static void test_ip6_payload_length(void **state)
{
	const uint16_t right = HARP_UDP_HLEN + HARP_HDR_LEN + 100;
	struct harp_hdr h = hdr_data(100, 0, 100);
	struct frame f;

	(void)state;
	ip6_payload_length(right + 1, WIRE_ERR_SHORT); /* longer than the frame */
	ip6_payload_length(0xffff, WIRE_ERR_SHORT);
	ip6_payload_length(0, WIRE_ERR_IP_HDR); /* a jumbogram's */
	ip6_payload_length(1, WIRE_ERR_SHORT);	/* no room for UDP */
	ip6_payload_length(HARP_UDP_HLEN - 1, WIRE_ERR_SHORT);
	ip6_payload_length(HARP_UDP_HLEN, WIRE_ERR_UDP_LEN); /* UDP claims more */
	ip6_payload_length(right - 1, WIRE_ERR_UDP_LEN);
	ip6_payload_length(right, WIRE_OK);
	build(&f, true, &h, 100);
	f.len = L3 + HARP_IP6_HLEN - 1; /* the fixed header cut short */
	expect_err(&f, WIRE_ERR_SHORT);
	f.len = L3 + HARP_IP6_HLEN + HARP_UDP_HLEN - 1; /* and the UDP header */
	expect_err(&f, WIRE_ERR_SHORT);
}

/* One end's address (source at 8, destination at 24) set to addr, the checksum made to hold. */
static void ip6_address(uint32_t at, const uint8_t *addr, enum wire_err want)
{
	struct harp_hdr h = hdr_data(100, 0, 100);
	struct wire_pkt p;
	struct frame f;

	build(&f, true, &h, 100);
	memcpy(f.b + L3 + at, addr, 16);
	fix_csums(&f);
	expect_err(&f, want);
	if (want == WIRE_OK) {
		assert_int_equal(parse(&f, &p), WIRE_OK);
		assert_memory_equal(at == 8 ? p.src_ip.b : p.dst_ip.b, addr, 16);
	}
}

/* Unspecified, multicast and IPv4-mapped addresses no peer has, at either end, are refused;
 * link-local and unique local ones are taken. */
static void test_ip6_addresses(void **state)
{
	static const uint8_t refused[][16] = {
		{ 0 },					    /* :: */
		{ [10] = 0xff, 0xff, 10, 0, 0, 1 },	    /* ::ffff:10.0.0.1 */
		{ [10] = 0xff, 0xff },			    /* ::ffff:0.0.0.0 */
		{ 0xff, 0x02, [15] = 1 },		    /* ff02::1, all nodes */
		{ 0xff, 0x0e, [15] = 0x42 },		    /* ff0e::42, global scope */
		{ 0xff, 0x02, [11] = 1, 0xff, 0, 0x12, 0x02 }, /* ff02::1:ff00:1202 */
	};
	static const uint8_t taken[][16] = {
		{ 0xfe, 0x80, [8] = 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55 }, /* fe80:: */
		{ 0xfd, 0x12, 0x34, 0x56, [15] = 9 }, /* fd12:3456::9 */
	};
	uint32_t at;
	size_t i;

	(void)state;
	for (at = 8; at <= 24; at += 16) {
		for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
			ip6_address(at, refused[i], WIRE_ERR_IP_HDR);
		}
		for (i = 0; i < sizeof(taken) / sizeof(taken[0]); i++) {
			ip6_address(at, taken[i], WIRE_OK);
		}
	}
}

/* ---- UDP ------------------------------------------------------------------------------------- */

static void test_udp_length(void **state)
{
	struct harp_hdr h = hdr_data(100, 0, 100);
	const uint16_t right = HARP_UDP_HLEN + HARP_HDR_LEN + 100;
	const uint16_t wrong[] = { right + 1, right - 1, 0, HARP_UDP_HLEN, 0xffff };
	struct frame f;
	size_t i;

	for (i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
		build(&f, ip6_of(state), &h, 100);
		wr16(f.b + udp_off(&f) + 4, wrong[i]);
		fix_csums(&f);
		expect_err(&f, WIRE_ERR_UDP_LEN);
	}
}

static void test_udp_checksum(void **state)
{
	bool ip6 = ip6_of(state);
	struct harp_hdr h = hdr_data(100, 0, 100);
	struct frame f;
	uint32_t at;

	/* One flipped bit anywhere in the harp header or the payload. */
	for (at = body_at(ip6) - HARP_HDR_LEN; at < body_at(ip6) + 100; at += 7) {
		build(&f, ip6, &h, 100);
		f.b[at] ^= 0x04;
		expect_err(&f, WIRE_ERR_UDP_CSUM);
	}
	build(&f, ip6, &h, 100);
	f.b[hdr_off(&f) + 16] ^= 0x80; /* psn */
	expect_err(&f, WIRE_ERR_UDP_CSUM);
	build(&f, ip6, &h, 100);
	f.b[udp_off(&f) + 1] ^= 0x01; /* source port */
	expect_err(&f, WIRE_ERR_UDP_CSUM);
	build(&f, ip6, &h, 100);
	f.b[udp_off(&f) + 7] ^= 0x01; /* the checksum itself */
	expect_err(&f, WIRE_ERR_UDP_CSUM);
	/* The pseudo-header covers both addresses (IPv4: fix its header checksum, nothing else). */
	for (at = 0; at < 2; at++) {
		build(&f, ip6, &h, 100);
		f.b[f.l3 + (ip6 ? 23 + at * 16 : 15 + at * 4)] ^= 0x01;
		if (!ip6) {
			fix_ip4_csum(&f);
		}
		expect_err(&f, WIRE_ERR_UDP_CSUM);
	}
}

/* A checksum of 0: "none" over IPv4, taken; over IPv6 refused (RFC 8200), whatever follows. */
static void test_udp_checksum_zero(void **state)
{
	bool ip6 = ip6_of(state);
	struct harp_hdr h = hdr_data(100, 0, 100);
	struct frame f;
	struct wire_pkt p;

	build(&f, ip6, &h, 100);
	wr16(f.b + udp_off(&f) + 6, 0);
	if (!ip6) {
		assert_int_equal(parse(&f, &p), WIRE_OK);
		assert_memory_equal(&p.h, &h, sizeof(h));
		return;
	}
	expect_err(&f, WIRE_ERR_UDP_CSUM);
	add_vlan(&f, 0x8100);
	expect_err(&f, WIRE_ERR_UDP_CSUM);
	/* checked before the harp header: a wrong version behind it does not change the reason */
	build(&f, ip6, &h, 100);
	f.b[hdr_off(&f)] = HARP_WIRE_VERSION + 1;
	wr16(f.b + udp_off(&f) + 6, 0);
	expect_err(&f, WIRE_ERR_UDP_CSUM);
}

/* ---- harp header ----------------------------------------------------------------------------- */

static void harp_mutation(bool ip6, struct harp_hdr h, uint32_t body_len, enum wire_err want)
{
	struct frame f;

	build(&f, ip6, &h, body_len);
	assert_true(udp_csum_ok(&f)); /* the builder's checksums hold: the reason is the field */
	expect_err(&f, want);
}

static void test_harp_version(void **state)
{
	struct harp_hdr h = hdr_of(HARP_PKT_CTS, 0);

	(void)state;
	h.version = 0;
	harp_mutation(false, h, 0, WIRE_ERR_VERSION);
	h.version = HARP_WIRE_VERSION + 1;
	harp_mutation(false, h, 0, WIRE_ERR_VERSION);
	h.version = 0xff;
	harp_mutation(false, h, 0, WIRE_ERR_VERSION);
	h.version = HARP_WIRE_VERSION; /* version is checked before type */
	h.type = 0;
	harp_mutation(false, h, 0, WIRE_ERR_TYPE);
	h.version = 1; /* version 1 had no probes: its peers cannot find paths */
	harp_mutation(false, h, 0, WIRE_ERR_VERSION);
}

static void test_harp_type(void **state)
{
	const uint8_t bad[] = { 0, HARP_PKT_TYPE_MAX + 1, 0x40, 0x80, 0xff };
	struct harp_hdr h = hdr_of(HARP_PKT_CTS, 0);
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad); i++) {
		h.type = bad[i];
		harp_mutation(false, h, 0, WIRE_ERR_TYPE);
	}
	/* An unknown type is refused whatever its length. */
	h.type = HARP_PKT_TYPE_MAX + 1;
	h.len = 64;
	harp_mutation(false, h, 64, WIRE_ERR_TYPE);
}

static void test_harp_len_disagrees(void **state)
{
	struct harp_hdr h;

	(void)state;
	h = hdr_data(1000, 0, 101); /* header says 101, 100 bytes follow */
	harp_mutation(false, h, 100, WIRE_ERR_LEN);
	h = hdr_data(1000, 0, 99);
	harp_mutation(false, h, 100, WIRE_ERR_LEN);
	h = hdr_data(1000, 0, 0xffff);
	harp_mutation(false, h, 100, WIRE_ERR_LEN);
	h = hdr_of(HARP_PKT_CTS, 1); /* CTS claiming a byte that is not there */
	harp_mutation(false, h, 0, WIRE_ERR_LEN);
	h = hdr_of(HARP_PKT_ACK, 64); /* ACK missing its last sack byte */
	harp_mutation(false, h, 63, WIRE_ERR_LEN);
}

/* ---- bundles: several records in one frame ------------------------------------------------- */

/* The first record of a frame of the family, untagged. */
static uint8_t *records_of(struct frame *f, bool ip6)
{
	return f->b + body_at(ip6) - HARP_HDR_LEN;
}

/* Puts records h[0..n) after one another, each with a body of h[i].len patterned bytes, and seals. */
static void build_bundle(struct frame *f, bool ip6, const struct harp_hdr *h, int n)
{
	uint8_t *at = records_of(f, ip6);
	uint32_t used = 0, j;
	int i;

	memset(f->b, 0x5a, sizeof(f->b));
	for (i = 0; i < n; i++) {
		wire_put_record(at + used, &h[i]);
		for (j = 0; j < h[i].len; j++) {
			at[used + HARP_HDR_LEN + j] = (uint8_t)(i * 31 + j);
		}
		used += HARP_HDR_LEN + h[i].len;
	}
	f->len = wire_seal(f->b, path_of(ip6), used, 0x4321, true);
	f->l3 = L3;
	f->ip6 = ip6;
	assert_int_equal(f->len, body_at(ip6) - HARP_HDR_LEN + used);
}

/*
 * Records, then a trailer of n bytes the first record names (HARP_AUTH's counter and MAC: the
 * parser only locates it), sealed as the engine does: no UDP checksum asked for, which IPv6
 * writes all the same.
 */
static void build_trailed(struct frame *f, bool ip6, const struct harp_hdr *h, int nrec,
			  uint16_t named, uint32_t n)
{
	uint8_t *at = records_of(f, ip6);
	uint32_t used = 0, j;
	int i;

	memset(f->b, 0x5a, sizeof(f->b));
	for (i = 0; i < nrec; i++) {
		struct harp_hdr r = h[i];

		r.trailer = i == 0 ? named : r.trailer;
		wire_put_record(at + used, &r);
		used += HARP_HDR_LEN + r.len;
	}
	for (j = 0; j < n; j++) {
		at[used + j] = (uint8_t)(0xc0 + j);
	}
	f->len = wire_seal(f->b, path_of(ip6), used + n, 0x4321, false);
	f->l3 = L3;
	f->ip6 = ip6;
}

/* Over IPv4 an authenticated frame travels without a UDP checksum; over IPv6 with one, which
 * covers the trailer too. */
static void check_trailed_csum(struct frame *f)
{
	if (!f->ip6) {
		assert_int_equal(rd16(f->b + udp_off(f) + 6), 0);
		return;
	}
	assert_true(udp_csum_ok(f));
	f->b[f->len - 1] ^= 0x01; /* a MAC byte */
	expect_err(f, WIRE_ERR_UDP_CSUM);
	f->b[f->len - 1] ^= 0x01;
}

static void test_trailer_located(void **state)
{
	bool ip6 = ip6_of(state);
	struct harp_hdr h[2] = { hdr_data(8, 0, 8), hdr_of(HARP_PKT_ACK, 2) };
	uint32_t records = 2 * HARP_HDR_LEN + 8 + 2;
	struct wire_pkt p;
	struct frame f;

	build_trailed(&f, ip6, h, 2, HARP_AUTH_TRAILER, HARP_AUTH_TRAILER);
	check_trailed_csum(&f);
	assert_int_equal(wire_parse(f.b, f.len, &p), WIRE_OK);
	assert_ptr_equal(p.records, records_of(&f, ip6));
	assert_int_equal(p.records_len, records);
	assert_ptr_equal(p.trailer, p.records + records);
	assert_int_equal(p.trailer[0], 0xc0);
	assert_int_equal(p.h.trailer, HARP_AUTH_TRAILER);
	assert_true(wire_next(&p)); /* the trailer is not taken for a record */
	assert_int_equal(p.h.type, HARP_PKT_ACK);
	assert_false(wire_next(&p));
	/* without one: no trailer pointer, and records fill the payload */
	build_trailed(&f, ip6, h, 2, 0, 0);
	assert_int_equal(wire_parse(f.b, f.len, &p), WIRE_OK);
	assert_null(p.trailer);
	assert_int_equal(p.records_len, records);
}

static void test_trailer_refused(void **state)
{
	bool ip6 = ip6_of(state);
	struct harp_hdr h[2] = { hdr_data(8, 0, 8), hdr_of(HARP_PKT_ACK, 2) };
	struct harp_hdr one = hdr_of(HARP_PKT_CTS, 0);
	struct wire_pkt p;
	struct frame f;

	/* a size harp never sends */
	build_trailed(&f, ip6, h, 1, 8, 8);
	assert_int_equal(wire_parse(f.b, f.len, &p), WIRE_ERR_TRAILER);
	/* named, but the bytes are not there: the records would overrun it */
	build_trailed(&f, ip6, h, 1, HARP_AUTH_TRAILER, 10);
	assert_int_not_equal(wire_parse(f.b, f.len, &p), WIRE_OK);
	/* a payload too short to hold a header and the trailer it names */
	build_trailed(&f, ip6, h, 0, 0, 0);
	one.trailer = HARP_AUTH_TRAILER;
	wire_put_record(records_of(&f, ip6), &one);
	f.len = wire_seal(f.b, path_of(ip6), HARP_HDR_LEN + 4, 0, false);
	assert_int_equal(wire_parse(f.b, f.len, &p), WIRE_ERR_SHORT);
	/* named by a later record */
	h[1].trailer = HARP_AUTH_TRAILER;
	build_trailed(&f, ip6, h, 2, HARP_AUTH_TRAILER, HARP_AUTH_TRAILER);
	assert_int_equal(wire_parse(f.b, f.len, &p), WIRE_ERR_TRAILER);
	/* present but not named: taken for a record, which it cannot be */
	h[1].trailer = 0;
	build_trailed(&f, ip6, h, 2, 0, HARP_AUTH_TRAILER);
	assert_int_not_equal(wire_parse(f.b, f.len, &p), WIRE_OK);
}

static void test_bundle_round_trip(void **state)
{
	bool ip6 = ip6_of(state);
	struct harp_hdr h[3] = { hdr_of(HARP_PKT_CTS, 0), hdr_data(8, 0, 8), hdr_of(HARP_PKT_ACK, 2) };
	struct wire_pkt p;
	struct frame f;
	int i;

	h[1].psn = h[0].psn + 1;
	build_bundle(&f, ip6, h, 3);
	assert_true(udp_csum_ok(&f));
	assert_int_equal(wire_parse(f.b, f.len, &p), WIRE_OK);
	assert_int_equal(p.ip6, ip6);
	for (i = 0; i < 3; i++) {
		uint32_t j;

		if (i) {
			assert_true(wire_next(&p));
		}
		assert_memory_equal(&p.h, &h[i], sizeof(h[i]));
		for (j = 0; j < h[i].len; j++) {
			assert_int_equal(p.body[j], (uint8_t)(i * 31 + j));
		}
	}
	assert_false(wire_next(&p));
	assert_false(wire_next(&p));
	/* one record built in two steps is what wire_build writes */
	build_bundle(&f, ip6, h + 1, 1);
	assert_int_equal(wire_parse(f.b, f.len, &p), WIRE_OK);
	assert_int_equal(p.next_len, 0);
	assert_false(wire_next(&p));
}

static void bundle_expect(bool ip6, const struct harp_hdr *h, int n, enum wire_err want)
{
	struct frame f;

	build_bundle(&f, ip6, h, n);
	expect_err(&f, want);
}

static void test_bundle_refused(void **state)
{
	bool ip6 = ip6_of(state);
	struct harp_hdr h[2] = { hdr_of(HARP_PKT_CTS, 0), hdr_data(8, 0, 8) };
	struct frame f;

	bundle_expect(ip6, h, 2, WIRE_OK);
	h[1].conn_id++; /* another connection's record */
	bundle_expect(ip6, h, 2, WIRE_ERR_BUNDLE);
	h[1] = hdr_data(8, 0, 8);
	h[1].token ^= 1; /* another session's */
	bundle_expect(ip6, h, 2, WIRE_ERR_BUNDLE);
	h[1] = hdr_of(HARP_PKT_PROBE, 0); /* a probe travels alone: XDP reads the first header */
	bundle_expect(ip6, h, 2, WIRE_ERR_BUNDLE);
	h[1] = hdr_of(HARP_PKT_STEER, 0); /* so does a STEER */
	bundle_expect(ip6, h, 2, WIRE_ERR_BUNDLE);
	h[0] = hdr_of(HARP_PKT_PROBE, 0);
	h[1] = hdr_of(HARP_PKT_CTS, 0);
	bundle_expect(ip6, h, 2, WIRE_ERR_BUNDLE);
	h[0] = hdr_of(HARP_PKT_STEER, 0);
	bundle_expect(ip6, h, 2, WIRE_ERR_BUNDLE);
	h[0] = hdr_of(HARP_PKT_CTS, 0);
	h[1] = hdr_data(8, 0, 8);
	h[1].version++; /* every record is checked, not only the first */
	bundle_expect(ip6, h, 2, WIRE_ERR_VERSION);
	h[1] = hdr_data(8, 4, 8); /* the second record's payload lies outside its message */
	bundle_expect(ip6, h, 2, WIRE_ERR_LEN);
	h[1] = hdr_of(HARP_PKT_TYPE_MAX + 1, 0);
	bundle_expect(ip6, h, 2, WIRE_ERR_TYPE);

	/* bytes after the last record: fewer than a header, or a header claiming more body */
	h[1] = hdr_data(8, 0, 8);
	build_bundle(&f, ip6, h, 2);
	set_lengths(&f, (uint16_t)(rd16(f.b + udp_off(&f) + 4) - 1)); /* the DATA's last byte cut */
	f.len--;
	fix_csums(&f);
	expect_err(&f, WIRE_ERR_LEN);
	harp_mutation(ip6, hdr_of(HARP_PKT_CTS, 0), HARP_HDR_LEN - 1, WIRE_ERR_LEN);

	/* the UDP checksum covers every record */
	build_bundle(&f, ip6, h, 2);
	f.b[f.len - 1] ^= 0x10;
	expect_err(&f, WIRE_ERR_UDP_CSUM);
}

static void test_ack_length(void **state)
{
	/* a sack map longer than a whole window */
	const uint16_t wrong[] = { HARP_SACK_MAX_BYTES + 1, HARP_SACK_MAX_BYTES + 8, 1400 };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
		harp_mutation(false, hdr_of(HARP_PKT_ACK, wrong[i]), wrong[i], WIRE_ERR_LEN);
	}
}

static void test_cts_msgerr_with_payload(void **state)
{
	(void)state;
	harp_mutation(false, hdr_of(HARP_PKT_CTS, 8), 8, WIRE_ERR_LEN);
	harp_mutation(false, hdr_of(HARP_PKT_CTS, 1), 1, WIRE_ERR_LEN);
	harp_mutation(false, hdr_of(HARP_PKT_MSGERR, 8), 8, WIRE_ERR_LEN);
	harp_mutation(false, hdr_of(HARP_PKT_MSGERR, 64), 64, WIRE_ERR_LEN);
}

static void data_bounds(uint64_t msg_len, uint64_t offset, uint16_t len, enum wire_err want)
{
	harp_mutation(false, hdr_data(msg_len, offset, len), len, want);
}

static struct harp_hdr hdr_unsol(uint64_t msg_len, uint64_t offset, uint16_t len)
{
	struct harp_hdr h = hdr_data(msg_len, offset, len);

	h.flags = HARP_DATA_F_DONE | HARP_DATA_F_UNSOL;
	h.buf_idx = 0;
	return h;
}

/* Unsolicited DATA is one whole message of at most HARP_UNSOL_MAX_BYTES; anything else is refused. */
static void test_unsolicited_bounds(void **state)
{
	struct harp_hdr h = hdr_unsol(HARP_UNSOL_MAX_BYTES, 0, HARP_UNSOL_MAX_BYTES);

	(void)state;
	round_trip(false, &h, HARP_UNSOL_MAX_BYTES);
	h = hdr_unsol(0, 0, 0);
	round_trip(false, &h, 0);
	h = hdr_unsol(HARP_UNSOL_MAX_BYTES + 1, 0, HARP_UNSOL_MAX_BYTES + 1);
	harp_mutation(false, h, h.len, WIRE_ERR_LEN); /* too big to hold */
	h = hdr_unsol(200, 100, 100);
	harp_mutation(false, h, h.len, WIRE_ERR_LEN); /* a slice, not the message */
	h = hdr_unsol(200, 0, 100);
	harp_mutation(false, h, h.len, WIRE_ERR_LEN);
	/* the same slices without the flag are ordinary DATA */
	h = hdr_data(200, 100, 100);
	round_trip(false, &h, 100);
}

static void test_data_bounds(void **state)
{
	(void)state;
	data_bounds(1000, 900, 100, WIRE_OK);	   /* ends exactly at the message's end */
	data_bounds(1000, 901, 100, WIRE_ERR_LEN); /* one byte past it */
	data_bounds(1000, 1000, 1, WIRE_ERR_LEN);
	data_bounds(1000, 1001, 0, WIRE_ERR_LEN); /* offset beyond the message */
	data_bounds(1000, 2000, 10, WIRE_ERR_LEN);
	data_bounds(99, 0, 100, WIRE_ERR_LEN); /* payload longer than the message */
	data_bounds(0, 0, 1, WIRE_ERR_LEN);
	data_bounds(0, 0, 0, WIRE_OK);		  /* a zero-byte message */
	data_bounds(0, 5, 0, WIRE_ERR_LEN);	  /* ... at a nonsense offset */
	data_bounds(1000, 0, 0, WIRE_ERR_LEN);	  /* empty slice of a non-empty message */
	data_bounds(1000, 1000, 0, WIRE_ERR_LEN); /* the same, at the end */
	/* Offsets where offset + len wraps around 2^64. */
	data_bounds(1000, UINT64_MAX, 100, WIRE_ERR_LEN);
	data_bounds(UINT64_MAX, UINT64_MAX - 50, 100, WIRE_ERR_LEN);
	data_bounds(UINT64_MAX, UINT64_MAX, 1, WIRE_ERR_LEN);
	data_bounds(UINT64_MAX - 1, UINT64_MAX - 100, 100, WIRE_ERR_LEN);
	data_bounds(UINT64_MAX, UINT64_MAX - 100, 100, WIRE_OK); /* ends exactly at 2^64 - 1 */
	data_bounds(UINT64_MAX, 0, 100, WIRE_OK);
	data_bounds(1ull << 63, (1ull << 63) - 10, 10, WIRE_OK);
}

/* The checks run in the order the headers come: the first broken layer names the error. */
static void test_check_order(void **state)
{
	struct harp_hdr h = hdr_data(100, 0, 100);
	struct frame f;

	(void)state;
	build(&f, false, &h, 100);
	f.b[L3 + 10] ^= 0xff;	   /* IPv4 checksum */
	f.b[L3 + 9] = 6;	   /* and not UDP */
	f.b[hdr_off(&f)] = 9;	   /* and a bad version */
	expect_err(&f, WIRE_ERR_IP_CSUM);
	build(&f, false, &h, 100);
	f.b[hdr_off(&f) + 1] = 0; /* type 0, checksum left stale */
	expect_err(&f, WIRE_ERR_UDP_CSUM);
	fix_csums(&f);
	expect_err(&f, WIRE_ERR_TYPE);
}

/* The same over IPv6: version and addresses, the length, the next header, the UDP length, the
 * checksum, then harp. */
static void test_ip6_check_order(void **state)
{
	struct harp_hdr h = hdr_data(100, 0, 100);
	struct frame f;

	(void)state;
	build(&f, true, &h, 100);
	f.b[L3 + 24] = 0xff;			 /* a multicast destination */
	f.b[L3 + 6] = 44;			 /* behind a fragment header */
	wr16(f.b + L3 + 4, 0x7fff);		 /* longer than the frame */
	expect_err(&f, WIRE_ERR_IP_HDR);
	build(&f, true, &h, 100);
	f.b[L3 + 6] = 44;
	wr16(f.b + L3 + 4, 0x7fff);
	expect_err(&f, WIRE_ERR_SHORT);
	build(&f, true, &h, 100);
	f.b[L3 + 6] = 44;
	wr16(f.b + udp_off(&f) + 4, 9); /* and a UDP length that disagrees */
	expect_err(&f, WIRE_ERR_IP6_EXT);
	build(&f, true, &h, 100);
	wr16(f.b + udp_off(&f) + 4, 9);
	wr16(f.b + udp_off(&f) + 6, 0); /* and no checksum */
	expect_err(&f, WIRE_ERR_UDP_LEN);
	build(&f, true, &h, 100);
	f.b[hdr_off(&f) + 1] = 0; /* type 0, checksum left stale */
	expect_err(&f, WIRE_ERR_UDP_CSUM);
	fix_csums(&f);
	expect_err(&f, WIRE_ERR_TYPE);
}

/* ---- packets in pieces (an AF_XDP descriptor chain) ------------------------------------------ */

/* The shortest first piece wire_parse_pieces parses where it lies: IPv6's headers behind a tag. */
#define FIRST_MIN (HARP_ETH_HLEN + HARP_VLAN_HLEN + HARP_IP6_HLEN + HARP_UDP_HLEN + HARP_HDR_LEN)

/* f cut at the offsets cuts[0..n) (ascending, inside it) into n + 1 pieces, each in a heap buffer
 * of exactly its size. */
static void cut(struct wire_pieces *w, const struct frame *f, const uint32_t *cuts, uint32_t n)
{
	uint32_t i, from = 0, to;
	uint8_t *piece;

	assert_true(n < WIRE_PIECES_MAX);
	w->n = n + 1;
	w->total = f->len;
	for (i = 0; i <= n; i++) {
		to = i < n ? cuts[i] : f->len;
		assert_true(from <= to && to <= f->len);
		piece = malloc(to > from ? to - from : 1);
		assert_non_null(piece);
		memcpy(piece, f->b + from, to - from);
		w->at[i] = piece;
		w->len[i] = to - from;
		from = to;
	}
}

static void free_pieces(struct wire_pieces *w)
{
	uint32_t i;

	for (i = 0; i < w->n; i++) {
		free((void *)w->at[i]);
	}
}

/* f cut at cuts parses where it lies as wire_parse parses it whole: the same header, family,
 * addresses and ports, and its body gathered from the pieces. */
static void expect_in_place(const struct frame *f, const uint32_t *cuts, uint32_t n)
{
	uint32_t body_off = hdr_off(f) + HARP_HDR_LEN, here;
	struct wire_pkt p, whole;
	struct wire_pieces w;
	uint8_t body[4096];
	bool join = true;

	assert_int_equal(parse(f, &whole), WIRE_OK);
	cut(&w, f, cuts, n);
	assert_int_equal(wire_parse_pieces(&w, &p, &join, false), WIRE_OK);
	assert_false(join);
	assert_memory_equal(&p.h, &whole.h, sizeof(p.h));
	assert_int_equal(p.ip6, f->ip6);
	assert_memory_equal(&p.src_ip, &path_of(f->ip6)->src_ip, 16);
	assert_memory_equal(&p.dst_ip, &path_of(f->ip6)->dst_ip, 16);
	assert_int_equal(p.src_port, whole.src_port);
	assert_int_equal(p.dst_port, whole.dst_port);
	assert_memory_equal(p.src_mac, whole.src_mac, 6);
	assert_ptr_equal(p.records, w.at[0] + hdr_off(f));
	assert_int_equal(p.records_len, HARP_HDR_LEN + p.h.len);
	assert_null(p.trailer);
	assert_int_equal(p.next_len, 0);
	assert_ptr_equal(p.rest, &w);
	assert_ptr_equal(p.body, w.at[0] + body_off);
	here = w.len[0] - body_off;
	assert_int_equal(p.body_here, here < p.h.len ? here : p.h.len);
	memset(body, 0, sizeof(body));
	wire_body_copy(body, &p);
	assert_memory_equal(body, f->b + body_off, p.h.len);
	free_pieces(&w);
}

/* f cut at cuts is refused where it lies, for want. */
static void expect_refused_in_place(const struct frame *f, const uint32_t *cuts, uint32_t n,
				    enum wire_err want)
{
	struct wire_pieces w;
	struct wire_pkt p;
	bool join = true;

	cut(&w, f, cuts, n);
	assert_int_equal(wire_parse_pieces(&w, &p, &join, false), want);
	assert_false(join);
	free_pieces(&w);
}

/* f cut at cuts is left to the caller to join and give to wire_parse. */
static void expect_joined(const struct frame *f, const uint32_t *cuts, uint32_t n)
{
	struct wire_pieces w;
	struct wire_pkt p;
	bool join = false;

	cut(&w, f, cuts, n);
	assert_int_equal(wire_parse_pieces(&w, &p, &join, false), WIRE_OK);
	assert_true(join);
	free_pieces(&w);
}

/* DATA as bulk transfer sends it, in 2, 3 and WIRE_PIECES_MAX pieces, behind a tag or not, with
 * a first piece that ends where the body begins, a last piece of odd length, and one of only
 * padding. */
static void test_pieces_in_place(void **state)
{
	bool ip6 = ip6_of(state);
	struct harp_hdr h = hdr_data(100000, 5000, 3000);
	uint32_t cuts[WIRE_PIECES_MAX - 1], i;
	struct frame f;

	build(&f, ip6, &h, 3000);
	cuts[0] = FIRST_MIN;
	expect_in_place(&f, cuts, 1);
	cuts[0] = 1500;
	cuts[1] = 2000;
	expect_in_place(&f, cuts, 2);
	for (i = 0; i < WIRE_PIECES_MAX - 1; i++) {
		cuts[i] = FIRST_MIN + 160 * i;
	}
	expect_in_place(&f, cuts, WIRE_PIECES_MAX - 1);
	add_vlan(&f, 0x8100); /* over IPv6, the first piece now ends where the body begins */
	cuts[0] = FIRST_MIN;
	expect_in_place(&f, cuts, 1);
	h = hdr_data(100000, 5000, 2999);
	build(&f, ip6, &h, 2999);
	cuts[0] = 1000;
	expect_in_place(&f, cuts, 1);
	/* the whole body in the first piece, and only Ethernet padding after it */
	h = hdr_data(100000, 5000, 200);
	build(&f, ip6, &h, 200);
	memset(f.b + f.len, 0, 100);
	f.len += 100;
	cuts[0] = f.len - 50;
	expect_in_place(&f, cuts, 1);
}

/*
 * The UDP checksum summed across the pieces: a flipped bit in any piece, or in an address of the
 * pseudo-header, is refused where it lies. A middle piece of odd length cannot be summed there
 * (its last byte and the next piece's first share a word): that packet goes to be joined.
 */
static void test_pieces_checksum(void **state)
{
	bool ip6 = ip6_of(state);
	struct harp_hdr h = hdr_data(100000, 5000, 3000);
	const uint32_t cuts[] = { 1000, 2000 }, odd[] = { 1000, 2001 };
	uint32_t flips[] = { body_at(ip6) + 2, 1500, 2500, body_at(ip6) + 2999 };
	struct frame f, g;
	size_t i;

	build(&f, ip6, &h, 3000);
	for (i = 0; i < sizeof(flips) / sizeof(flips[0]); i++) {
		g = f;
		g.b[flips[i]] ^= 0x20;
		expect_refused_in_place(&g, cuts, 2, WIRE_ERR_UDP_CSUM);
	}
	g = f;
	g.b[g.l3 + (ip6 ? 39 : 19)] ^= 0x01; /* the destination address's last byte */
	if (!ip6) {
		fix_ip4_csum(&g);
	}
	expect_refused_in_place(&g, cuts, 2, WIRE_ERR_UDP_CSUM);
	expect_joined(&f, odd, 2);
	g = f;
	g.b[2500] ^= 0x20;
	expect_joined(&g, odd, 2);
	expect_err(&g, WIRE_ERR_UDP_CSUM); /* what wire_parse then says of the joined bytes */
}

/* A checksum of 0 in pieces: none over IPv4, taken in place; refused in place over IPv6. */
static void test_pieces_zero_checksum(void **state)
{
	bool ip6 = ip6_of(state);
	struct harp_hdr h = hdr_data(100000, 5000, 3000);
	const uint32_t cuts[] = { 1000, 2000 };
	struct frame f;

	build(&f, ip6, &h, 3000);
	wr16(f.b + udp_off(&f) + 6, 0);
	if (ip6) {
		expect_refused_in_place(&f, cuts, 2, WIRE_ERR_UDP_CSUM);
	} else {
		expect_in_place(&f, cuts, 2);
	}
}

/* What bulk transfer does not send is joined and parsed whole: one piece, a first piece short
 * of FIRST_MIN, any record but plain DATA, a bundle, a trailer, and whatever wire_parse refuses. */
static void test_pieces_joined(void **state)
{
	bool ip6 = ip6_of(state);
	struct harp_hdr data = hdr_data(100000, 5000, 1000);
	struct harp_hdr two[2] = { hdr_of(HARP_PKT_CTS, 0), hdr_data(600, 0, 600) };
	const uint32_t cuts[] = { FIRST_MIN + 20 }, short_first[] = { FIRST_MIN - 2 };
	struct harp_hdr h;
	struct frame f;

	build(&f, ip6, &data, 1000);
	expect_joined(&f, NULL, 0);
	expect_joined(&f, short_first, 1);
	h = hdr_of(HARP_PKT_ACK, HARP_SACK_MAX_BYTES);
	build(&f, ip6, &h, h.len);
	expect_joined(&f, cuts, 1);
	h = hdr_unsol(HARP_UNSOL_MAX_BYTES, 0, HARP_UNSOL_MAX_BYTES);
	build(&f, ip6, &h, h.len);
	expect_joined(&f, cuts, 1);
	build_bundle(&f, ip6, two, 2);
	expect_joined(&f, cuts, 1);
	build_trailed(&f, ip6, &data, 1, HARP_AUTH_TRAILER, HARP_AUTH_TRAILER);
	expect_joined(&f, cuts, 1);
	build(&f, ip6, &data, 1000);
	if (ip6) {
		insert_ext(&f, 44, 8);
	} else {
		f.b[f.l3 + 9] = 6;
		fix_csums(&f);
	}
	expect_joined(&f, cuts, 1);
	expect_err(&f, ip6 ? WIRE_ERR_IP6_EXT : WIRE_ERR_NOT_UDP);
	h = data;
	h.version++;
	build(&f, ip6, &h, 1000);
	expect_joined(&f, cuts, 1);
}

static void test_err_names(void **state)
{
	int i, j;

	(void)state;
	for (i = 0; i < WIRE_ERR_MAX; i++) {
		const char *name = wire_err_name((enum wire_err)i);

		assert_non_null(name);
		assert_string_not_equal(name, "unknown");
		for (j = 0; j < i; j++) {
			assert_string_not_equal(name, wire_err_name((enum wire_err)j));
		}
	}
	assert_string_equal(wire_err_name(WIRE_ERR_MAX), "unknown");
	assert_string_equal(wire_err_name((enum wire_err)-1), "unknown");
}

/* ---- sums that ride along the copies -------------------------------------------------------- */

/*
 * Records of odd and even lengths, their headers summed where they lie and their bodies summed
 * as they are copied in (wire_sum, wire_copy_sum at each one's offset, as the engine sends):
 * wire_seal_summed writes the frame wire_seal writes from the same records.
 */
static void test_summed_seal(void **state)
{
	static const uint16_t lens[] = { 1, 3, 300, 0, 7, 64, 2, 1000, 5 };
	bool ip6 = ip6_of(state);
	struct harp_hdr h[ARRAY_SIZE(lens)];
	uint8_t src[1024];
	struct frame summed, plain;
	uint32_t used = 0, sum = 0, i, j;
	uint8_t *at;

	for (i = 0; i < sizeof(src); i++) {
		src[i] = (uint8_t)(i * 13 + 5);
	}
	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		/* a record without payload is a zero-byte message */
		h[i] = lens[i] ? hdr_data(5000, i, lens[i]) : hdr_data(0, 0, 0);
	}
	memset(summed.b, 0x5a, sizeof(summed.b));
	at = records_of(&summed, ip6);
	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		wire_put_record(at + used, &h[i]);
		sum += wire_sum(at + used, HARP_HDR_LEN, used);
		sum += wire_copy_sum(at + used + HARP_HDR_LEN, src + i, lens[i],
				     used + HARP_HDR_LEN);
		used += HARP_HDR_LEN + lens[i];
	}
	summed.len = wire_seal_summed(summed.b, path_of(ip6), used, 0x4321, sum);
	summed.l3 = L3;
	summed.ip6 = ip6;
	/* the same records, copied first and sealed by reading them */
	memset(plain.b, 0x5a, sizeof(plain.b));
	at = records_of(&plain, ip6);
	for (i = 0, used = 0; i < ARRAY_SIZE(lens); i++) {
		wire_put_record(at + used, &h[i]);
		for (j = 0; j < lens[i]; j++) {
			at[used + HARP_HDR_LEN + j] = src[i + j];
		}
		used += HARP_HDR_LEN + lens[i];
	}
	plain.len = wire_seal(plain.b, path_of(ip6), used, 0x4321, true);
	assert_int_equal(summed.len, plain.len);
	assert_memory_equal(summed.b, plain.b, plain.len);
	assert_true(udp_csum_ok(&summed));
	assert_int_equal(parse(&summed, NULL), WIRE_OK);
}

/* p's deferred sum checked, with the body copied out: the verdict, and the body copied whole. */
static bool copy_check(struct wire_pkt *p, const struct frame *f, uint8_t *out)
{
	bool ok;

	memset(out, 0, 4096);
	ok = wire_body_copy_check(out, p);
	assert_false(p->sum_due);
	assert_memory_equal(out, f->b + hdr_off(f) + HARP_HDR_LEN, p->h.len);
	return ok;
}

/*
 * Bulk DATA parses with its body's part of the checksum left for later, and the sum added later
 * (in place, or along the copy) gives wire_parse's verdict: a frame whose body or header was
 * changed after its checksum fails it, though its header is sane. Everything else is checked
 * at once: small bodies, other types, unsolicited sends, bundles, no checksum.
 */
static void test_deferred_sum(void **state)
{
	bool ip6 = ip6_of(state);
	struct harp_hdr h = hdr_data(100000, 5000, 1001);
	static uint8_t out[4096];
	struct wire_pkt p;
	struct frame f;
	uint8_t *copy;
	uint32_t off;

	build(&f, ip6, &h, 1001);
	assert_int_equal(wire_parse_defer(f.b, f.len, &p), WIRE_OK);
	assert_true(p.sum_due);
	assert_memory_equal(&p.h, &h, sizeof(h));
	assert_true(wire_body_check(&p));
	assert_false(p.sum_due);
	assert_int_equal(wire_parse_defer(f.b, f.len, &p), WIRE_OK);
	assert_true(copy_check(&p, &f, out));

	/* a byte of the body, the first and the last; the message offset; the psn: each parses
	 * (nothing in the header says it is wrong) and fails the sum */
	for (off = 0; off < 4; off++) {
		uint32_t at = off == 0 ? hdr_off(&f) + HARP_HDR_LEN :
			      off == 1 ? f.len - 1 :
			      off == 2 ? hdr_off(&f) + offsetof(struct harp_hdr, offset) + 7 :
					 hdr_off(&f) + offsetof(struct harp_hdr, psn) + 3;

		build(&f, ip6, &h, 1001);
		f.b[at] ^= off == 2 ? 0x08 : 0x41;
		expect_err(&f, WIRE_ERR_UDP_CSUM);
		assert_int_equal(wire_parse_defer(f.b, f.len, &p), WIRE_OK);
		assert_true(p.sum_due);
		assert_false(wire_body_check(&p));
		assert_int_equal(wire_parse_defer(f.b, f.len, &p), WIRE_OK);
		assert_false(copy_check(&p, &f, out));
	}

	/* checked at once: a body under WIRE_DEFER_MIN */
	h = hdr_data(100000, 5000, WIRE_DEFER_MIN - 1);
	build(&f, ip6, &h, WIRE_DEFER_MIN - 1);
	f.b[f.len - 1] ^= 1;
	assert_int_equal(wire_parse_defer(f.b, f.len, &p), WIRE_ERR_UDP_CSUM);
	/* an unsolicited send (small and whole, never deferred whatever its size) */
	h = hdr_data(200, 0, 200);
	h.flags = HARP_DATA_F_UNSOL;
	build(&f, ip6, &h, 200);
	assert_int_equal(wire_parse_defer(f.b, f.len, &p), WIRE_OK);
	assert_false(p.sum_due);
	/* an ACK */
	h = hdr_of(HARP_PKT_ACK, HARP_SACK_MAX_BYTES);
	build(&f, ip6, &h, HARP_SACK_MAX_BYTES);
	f.b[f.len - 1] ^= 1;
	assert_int_equal(wire_parse_defer(f.b, f.len, &p), WIRE_ERR_UDP_CSUM);
	/* a PMTU probe: padding, checked with the rest */
	h = hdr_of(HARP_PKT_PMTU, 600);
	h.msg_len = 600 + wire_pkt_overhead(ip6);
	build(&f, ip6, &h, 600);
	assert_int_equal(wire_parse_defer(f.b, f.len, &p), WIRE_OK);
	assert_false(p.sum_due);
	/* two records: bundles are checked whole */
	{
		struct harp_hdr two[2] = { hdr_data(100000, 0, 600), hdr_data(100000, 600, 600) };

		build_bundle(&f, ip6, two, 2);
		assert_int_equal(wire_parse_defer(f.b, f.len, &p), WIRE_OK);
		assert_false(p.sum_due);
	}
	/* IPv4 without a checksum (an authenticated frame's MAC stands in): nothing to defer */
	if (!ip6) {
		h = hdr_data(100000, 5000, 1001);
		build(&f, ip6, &h, 1001);
		wr16(f.b + udp_off(&f) + 6, 0);
		assert_int_equal(wire_parse_defer(f.b, f.len, &p), WIRE_OK);
		assert_false(p.sum_due);
	}

	/* in a heap copy of exactly its bytes, as ASan watches */
	h = hdr_data(100000, 5000, 1001);
	build(&f, ip6, &h, 1001);
	copy = malloc(f.len);
	assert_non_null(copy);
	memcpy(copy, f.b, f.len);
	assert_int_equal(wire_parse_defer(copy, f.len, &p), WIRE_OK);
	assert_true(copy_check(&p, &f, out));
	free(copy);
}

/* A test that holds for both families: once over IPv4, once over IPv6 with _ip6 in its name. */
#define BOTH(f) cmocka_unit_test(f), { #f "_ip6", f, NULL, NULL, &over_ip6 }

int main(void)
{
	const struct CMUnitTest tests[] = {
		BOTH(test_round_trip_data),
		BOTH(test_round_trip_zero_length_data),
		BOTH(test_round_trip_ack),
		BOTH(test_round_trip_cts),
		BOTH(test_round_trip_msgerr),
		BOTH(test_round_trip_probe),
		BOTH(test_reserved_fields_carried),
		BOTH(test_trailer_located),
		BOTH(test_trailer_refused),
		BOTH(test_udp_csum_zero_sent_as_ffff),
		cmocka_unit_test(test_ip_csum_known_vector),
		BOTH(test_summed_seal),
		BOTH(test_deferred_sum),
		cmocka_unit_test(test_csum_every_length_and_alignment),
		BOTH(test_truncated_every_length),
		BOTH(test_trailing_padding_accepted),
		BOTH(test_udp_payload_shorter_than_header),
		BOTH(test_ethertype),
		BOTH(test_vlan_accepted),
		cmocka_unit_test(test_ip_header_fields),
		cmocka_unit_test(test_ip_total_length),
		cmocka_unit_test(test_ip_checksum),
		cmocka_unit_test(test_ip6_header_fields),
		cmocka_unit_test(test_ip6_extension_headers),
		cmocka_unit_test(test_ip6_jumbogram),
		cmocka_unit_test(test_ip6_payload_length),
		cmocka_unit_test(test_ip6_addresses),
		BOTH(test_udp_length),
		BOTH(test_udp_checksum),
		BOTH(test_udp_checksum_zero),
		cmocka_unit_test(test_harp_version),
		cmocka_unit_test(test_harp_type),
		BOTH(test_pmtu_probe),
		cmocka_unit_test(test_parts),
		cmocka_unit_test(test_harp_len_disagrees),
		cmocka_unit_test(test_ack_length),
		BOTH(test_bundle_round_trip),
		BOTH(test_bundle_refused),
		cmocka_unit_test(test_cts_msgerr_with_payload),
		cmocka_unit_test(test_unsolicited_bounds),
		cmocka_unit_test(test_data_bounds),
		cmocka_unit_test(test_check_order),
		cmocka_unit_test(test_ip6_check_order),
		BOTH(test_pieces_in_place),
		BOTH(test_pieces_checksum),
		BOTH(test_pieces_zero_checksum),
		BOTH(test_pieces_joined),
		cmocka_unit_test(test_err_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
