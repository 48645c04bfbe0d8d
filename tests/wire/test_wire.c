// SPDX-License-Identifier: Apache-2.0
/*
 * wire.c: every packet type built and parsed back, checksums recomputed here independently, and
 * every way a frame can be malformed refused with its own reason. Frames are parsed from a heap
 * copy of exactly their length, so the ASan build (unit_wire_asan) catches any read past the end.
 *
 * A mutation that should trip one check has its checksums recomputed first, so the frame fails
 * for the reason under test and not for a checksum that the mutation broke on the way.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "wire.h"

#define L3 HARP_ETH_HLEN
#define HDR_AT (HARP_ETH_HLEN + HARP_IP4_HLEN + HARP_UDP_HLEN) /* harp header in a plain frame */

struct frame {
	uint8_t b[4096];
	uint32_t len;
	uint32_t l3; /* offset of the IPv4 header: 14, or 18 behind a VLAN tag */
};

static const struct wire_path path = {
	.src_mac = { 0x02, 0x11, 0x22, 0x33, 0x44, 0x55 },
	.dst_mac = { 0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee },
	.src_ip = { .b = { [10] = 0xff, 0xff, 10, 0, 0, 1 } }, /* 10.0.0.1, IPv4 mapped */
	.dst_ip = { .b = { [10] = 0xff, 0xff, 10, 0, 0, 2 } },
	.src_port = 0x5cb7, /* 47004 */
	.dst_port = 0x5db7, /* 47005 */
};

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

static int ip_csum_ok(const struct frame *f)
{
	return fold(sum_words(f->b + f->l3, HARP_IP4_HLEN)) == 0xffff;
}

static uint64_t udp_sum(const struct frame *f, uint16_t udp_len)
{
	const uint8_t *ip = f->b + f->l3;

	return sum_words(ip + 12, 8) + 17 + udp_len + sum_words(ip + HARP_IP4_HLEN, udp_len);
}

static int udp_csum_ok(const struct frame *f)
{
	const uint8_t *udp = f->b + f->l3 + HARP_IP4_HLEN;

	return rd16(udp + 6) != 0 && fold(udp_sum(f, rd16(udp + 4))) == 0xffff;
}

/* Recomputes both checksums after a mutation, over the lengths the headers now claim. */
static void fix_csums(struct frame *f)
{
	uint8_t *ip = f->b + f->l3, *udp = ip + HARP_IP4_HLEN;
	uint16_t udp_len = rd16(udp + 4);
	uint16_t c;

	wr16(ip + 10, 0);
	wr16(ip + 10, (uint16_t)~fold(sum_words(ip, HARP_IP4_HLEN)));
	if (f->l3 + HARP_IP4_HLEN + udp_len > f->len) {
		return; /* a UDP length past the frame: the parser must refuse it before summing */
	}
	wr16(udp + 6, 0);
	c = (uint16_t)~fold(udp_sum(f, udp_len));
	wr16(udp + 6, c ? c : 0xffff);
}

/* ---- building and parsing -------------------------------------------------------------------- */

static void build(struct frame *f, const struct harp_hdr *h, uint32_t body_len)
{
	uint32_t i;

	memset(f->b, 0x5a, sizeof(f->b));
	for (i = 0; i < body_len; i++) {
		f->b[HARP_FRAME_OVERHEAD + i] = (uint8_t)(i * 7 + 3);
	}
	f->len = wire_build(f->b, &path, h, body_len, 0x1234);
	f->l3 = L3;
	assert_int_equal(f->len, HARP_FRAME_OVERHEAD + body_len);
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
		uint32_t body_off = f->l3 + HARP_IP4_HLEN + HARP_UDP_HLEN + HARP_HDR_LEN;

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
		fail_msg("parse: got %s (%d), expected %s (%d)", wire_err_name(got), got,
			 wire_err_name(want), want);
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

static void check_headers(const struct frame *f, uint32_t body_len, uint16_t ip_id)
{
	const uint8_t *ip = f->b + L3, *udp = ip + HARP_IP4_HLEN;

	assert_memory_equal(f->b, path.dst_mac, 6);
	assert_memory_equal(f->b + 6, path.src_mac, 6);
	assert_int_equal(rd16(f->b + 12), 0x0800);
	assert_int_equal(ip[0], 0x45);
	assert_int_equal(ip[1], 0);
	assert_int_equal(rd16(ip + 2), HARP_IP4_HLEN + HARP_UDP_HLEN + HARP_HDR_LEN + body_len);
	assert_int_equal(rd16(ip + 4), ip_id);
	assert_int_equal(rd16(ip + 6), 0x4000); /* DF, no fragment */
	assert_int_equal(ip[8], 64);
	assert_int_equal(ip[9], 17);
	assert_memory_equal(ip + 12, &path.src_ip.b[12], 4);
	assert_memory_equal(ip + 16, &path.dst_ip.b[12], 4);
	assert_memory_equal(udp, &path.src_port, 2);
	assert_memory_equal(udp + 2, &path.dst_port, 2);
	assert_int_equal(rd16(udp + 4), HARP_UDP_HLEN + HARP_HDR_LEN + body_len);
	assert_true(ip_csum_ok(f));
	assert_true(udp_csum_ok(f));
	assert_int_equal(wire_ip_csum(ip, HARP_IP4_HLEN), 0);
}

/* The harp header's bytes on the wire: offsets and network byte order (docs/PROTOCOL.md). */
static void check_wire_header(const struct frame *f, const struct harp_hdr *h)
{
	const uint8_t *w = f->b + HDR_AT;

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

static void round_trip(const struct harp_hdr *h, uint32_t body_len)
{
	struct frame f;
	struct wire_pkt p;

	build(&f, h, body_len);
	check_headers(&f, body_len, 0x1234);
	check_wire_header(&f, h);
	assert_int_equal(parse(&f, &p), WIRE_OK);
	assert_memory_equal(&p.h, h, sizeof(*h));
	assert_memory_equal(&p.src_ip, &path.src_ip, 16);
	assert_memory_equal(&p.dst_ip, &path.dst_ip, 16);
	assert_false(p.ip6);
	assert_int_equal(p.src_port, path.src_port);
	assert_int_equal(p.dst_port, path.dst_port);
	assert_memory_equal(p.src_mac, path.src_mac, 6);
}

static void test_round_trip_data(void **state)
{
	struct harp_hdr h = hdr_data(10000, 4096, 1000);

	(void)state;
	round_trip(&h, 1000);
	h = hdr_data(3840, 0, 3840 - HARP_FRAME_OVERHEAD); /* fills a 3840-byte frame */
	round_trip(&h, h.len);
	h = hdr_data(1, 0, 1); /* odd length: the checksum pads the last byte */
	round_trip(&h, 1);
}

static void test_round_trip_zero_length_data(void **state)
{
	struct harp_hdr h = hdr_data(0, 0, 0);

	(void)state;
	round_trip(&h, 0);
}

static void test_round_trip_ack(void **state)
{
	static const uint16_t lens[] = { 0, 1, 64, HARP_SACK_MAX_BYTES };
	struct harp_hdr h;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		h = hdr_of(HARP_PKT_ACK, lens[i]);
		round_trip(&h, lens[i]);
	}
}

static void test_round_trip_cts(void **state)
{
	struct harp_hdr h = hdr_of(HARP_PKT_CTS, 0);

	(void)state;
	round_trip(&h, 0);
}

static void test_round_trip_msgerr(void **state)
{
	struct harp_hdr h = hdr_of(HARP_PKT_MSGERR, 0);

	(void)state;
	round_trip(&h, 0);
}

static void harp_mutation(struct harp_hdr h, uint32_t body_len, enum wire_err want);

/* A PROBE names its round and candidate in rsn and tag, and has no body. */
static void test_round_trip_probe(void **state)
{
	struct harp_hdr h = hdr_of(HARP_PKT_PROBE, 0);

	(void)state;
	h.rsn = 7;
	h.tag = 63;
	round_trip(&h, 0);
	harp_mutation(hdr_of(HARP_PKT_PROBE, 8), 8, WIRE_ERR_LEN);
	/* a STEER, like a probe, has no body */
	h = hdr_of(HARP_PKT_STEER, 0);
	round_trip(&h, 0);
	harp_mutation(hdr_of(HARP_PKT_STEER, 4), 4, WIRE_ERR_LEN);
}

/*
 * A PMTU probe is padded to the IP size it asks about (msg_len; with a MAC trailer, 24 more), at
 * most HARP_IP_MAX; its answer has no body. A part of a packet cut again names 2 to
 * HARP_SEG_MAX parts and one of them, and is never unsolicited.
 */
static void test_pmtu_and_parts(void **state)
{
	struct harp_hdr h = hdr_of(HARP_PKT_PMTU, 1000);

	(void)state;
	h.msg_len = 1000 + HARP_IP4_HLEN + HARP_UDP_HLEN + HARP_HDR_LEN;
	h.tag = 5;
	round_trip(&h, 1000);
	h.msg_len += HARP_AUTH_TRAILER; /* the size an authenticated connection's probe has */
	round_trip(&h, 1000);
	h.msg_len += 4;
	harp_mutation(h, 1000, WIRE_ERR_LEN);
	h.msg_len = 1000;
	harp_mutation(h, 1000, WIRE_ERR_LEN);
	h = hdr_of(HARP_PKT_PMTU_ACK, 0);
	h.msg_len = 9000;
	round_trip(&h, 0);
	harp_mutation(hdr_of(HARP_PKT_PMTU_ACK, 8), 8, WIRE_ERR_LEN);

	h = hdr_data(100000, 8192, 1000);
	h.flags = HARP_DATA_F_SEG;
	h.seg = 3 << 8 | 2;
	round_trip(&h, 1000);
	h.seg = HARP_SEG_MAX << 8 | (HARP_SEG_MAX - 1);
	round_trip(&h, 1000);
	h.seg = 3 << 8 | 3; /* no such part */
	harp_mutation(h, 1000, WIRE_ERR_LEN);
	h.seg = 1 << 8; /* one part is no cut */
	harp_mutation(h, 1000, WIRE_ERR_LEN);
	h.seg = (HARP_SEG_MAX + 1) << 8;
	harp_mutation(h, 1000, WIRE_ERR_LEN);
	h = hdr_data(100, 0, 100);
	h.flags = HARP_DATA_F_SEG | HARP_DATA_F_UNSOL;
	h.seg = 2 << 8;
	harp_mutation(h, 100, WIRE_ERR_LEN);
}

/* The reserved fields are carried, not interpreted: a receiver sees what was sent. */
static void test_reserved_fields_carried(void **state)
{
	struct harp_hdr h = hdr_of(HARP_PKT_CTS, 0);

	(void)state;
	h.flags = 0xa55a;
	h.seg = 0x0102;
	round_trip(&h, 0);
}

/* A computed UDP checksum of 0 must travel as 0xffff (0 means "none" in IPv4). */
static void test_udp_csum_zero_sent_as_ffff(void **state)
{
	struct harp_hdr h = hdr_data(2, 0, 2);
	struct frame f;
	uint32_t w;
	int found = 0;

	(void)state;
	memset(f.b, 0, sizeof(f.b));
	for (w = 0; w <= 0xffff && !found; w++) {
		wr16(f.b + HARP_FRAME_OVERHEAD, (uint16_t)w);
		f.len = wire_build(f.b, &path, &h, 2, 0);
		f.l3 = L3;
		found = rd16(f.b + L3 + HARP_IP4_HLEN + 6) == 0xffff;
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

static void test_truncated_every_length(void **state)
{
	const uint8_t types[] = { HARP_PKT_DATA, HARP_PKT_ACK, HARP_PKT_CTS, HARP_PKT_MSGERR,
				  HARP_PKT_PROBE, HARP_PKT_STEER };
	struct frame f;
	struct harp_hdr h;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(types); i++) {
		uint16_t len = types[i] == HARP_PKT_DATA	? 300
			       : types[i] == HARP_PKT_ACK ? 64
							  : 0;

		h = types[i] == HARP_PKT_DATA ? hdr_data(300, 0, 300) : hdr_of(types[i], len);
		build(&f, &h, len);
		truncate_all(&f);
		add_vlan(&f, 0x8100);
		truncate_all(&f);
	}
	h = hdr_data(0, 0, 0);
	build(&f, &h, 0);
	truncate_all(&f);
}

/* Ethernet pads short frames: bytes after the IPv4 total length are ignored. */
static void test_trailing_padding_accepted(void **state)
{
	struct harp_hdr h = hdr_of(HARP_PKT_CTS, 0);
	struct frame f;
	struct wire_pkt p;

	(void)state;
	build(&f, &h, 0);
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

	(void)state;
	for (payload = 0; payload < HARP_HDR_LEN; payload += 9) {
		build(&f, &h, 0);
		f.len = HDR_AT + payload;
		wr16(f.b + L3 + 2, (uint16_t)(HARP_IP4_HLEN + HARP_UDP_HLEN + payload));
		wr16(f.b + L3 + HARP_IP4_HLEN + 4, (uint16_t)(HARP_UDP_HLEN + payload));
		fix_csums(&f);
		expect_err(&f, WIRE_ERR_SHORT);
	}
}

/* ---- Ethernet -------------------------------------------------------------------------------- */

static void test_ethertype(void **state)
{
	const uint16_t others[] = { 0x0806, 0x88cc, 0x0000, 0xffff, 0x88a8 };
	struct harp_hdr h = hdr_of(HARP_PKT_CTS, 0);
	struct frame f;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		build(&f, &h, 0);
		wr16(f.b + 12, others[i]);
		expect_err(&f, WIRE_ERR_NOT_IP4);
	}
	/* an IPv4 packet that calls itself IPv6: its version disagrees */
	build(&f, &h, 0);
	wr16(f.b + 12, 0x86dd);
	expect_err(&f, WIRE_ERR_IP_HDR);
	/* A tagged frame whose inner type is not IP; and QinQ, which harp does not parse. */
	build(&f, &h, 0);
	add_vlan(&f, 0x8100);
	wr16(f.b + 16, 0x0806);
	expect_err(&f, WIRE_ERR_NOT_IP4);
	build(&f, &h, 0);
	add_vlan(&f, 0x88a8);
	expect_err(&f, WIRE_ERR_NOT_IP4);
}

static void test_vlan_accepted(void **state)
{
	struct harp_hdr h = hdr_data(5000, 1000, 777);
	struct frame f;
	struct wire_pkt p;

	(void)state;
	build(&f, &h, 777);
	add_vlan(&f, 0x8100);
	assert_int_equal(parse(&f, &p), WIRE_OK);
	assert_memory_equal(&p.h, &h, sizeof(h));
	assert_memory_equal(&p.src_ip, &path.src_ip, 16);
	assert_memory_equal(p.src_mac, path.src_mac, 6);
}

/* ---- IPv4 ------------------------------------------------------------------------------------ */

static void ip_mutation(uint32_t at, uint8_t value, int vlan, enum wire_err want)
{
	struct harp_hdr h = hdr_data(100, 0, 100);
	struct frame f;

	build(&f, &h, 100);
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
		ip_mutation(0, 0x65, vlan, WIRE_ERR_IP_HDR); /* version 6 */
		ip_mutation(0, 0x35, vlan, WIRE_ERR_IP_HDR); /* version 3 */
		ip_mutation(0, 0x46, vlan, WIRE_ERR_IP_HDR); /* ihl 6: options */
		ip_mutation(0, 0x4f, vlan, WIRE_ERR_IP_HDR); /* ihl 15 */
		ip_mutation(0, 0x44, vlan, WIRE_ERR_IP_HDR); /* ihl 4: shorter than a header */
		ip_mutation(6, 0x60, vlan, WIRE_ERR_IP_HDR); /* DF and MF */
		ip_mutation(6, 0x20, vlan, WIRE_ERR_IP_HDR); /* MF alone */
		ip_mutation(7, 0x01, vlan, WIRE_ERR_IP_HDR); /* fragment offset 8 bytes, DF kept */
		ip_mutation(6, 0x5f, vlan, WIRE_ERR_IP_HDR); /* DF and offset's high bits */
		ip_mutation(6, 0x00, vlan, WIRE_OK);	     /* DF clear: not a fragment */
		ip_mutation(1, 0xb8, vlan, WIRE_OK);	     /* DSCP/ECN are not judged */
		ip_mutation(8, 1, vlan, WIRE_OK);	     /* nor the TTL */
		ip_mutation(9, 6, vlan, WIRE_ERR_NOT_UDP);   /* TCP */
		ip_mutation(9, 1, vlan, WIRE_ERR_NOT_UDP);   /* ICMP */
		ip_mutation(9, 0, vlan, WIRE_ERR_NOT_UDP);
	}
}

static void ip_total_length(uint16_t ip_len, enum wire_err want)
{
	struct harp_hdr h = hdr_data(100, 0, 100);
	struct frame f;

	build(&f, &h, 100);
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
	ip_total_length(0, WIRE_ERR_IP_HDR);			  /* less than its own header */
	ip_total_length(HARP_IP4_HLEN - 1, WIRE_ERR_IP_HDR);
	ip_total_length(HARP_IP4_HLEN, WIRE_ERR_SHORT);		  /* no room for UDP */
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
		build(&f, &h, 100);
		f.b[L3 + 10 + bit / 8] ^= (uint8_t)(1u << (bit % 8));
		expect_err(&f, WIRE_ERR_IP_CSUM);
	}
	build(&f, &h, 100);
	f.b[L3 + 13] ^= 0x10; /* source address changed, checksum not */
	expect_err(&f, WIRE_ERR_IP_CSUM);
	build(&f, &h, 100);
	f.b[L3 + 8] = 63; /* TTL changed, checksum not */
	expect_err(&f, WIRE_ERR_IP_CSUM);
}

/* ---- UDP ------------------------------------------------------------------------------------- */

static void test_udp_length(void **state)
{
	struct harp_hdr h = hdr_data(100, 0, 100);
	const uint16_t right = HARP_UDP_HLEN + HARP_HDR_LEN + 100;
	const uint16_t wrong[] = { right + 1, right - 1, 0, HARP_UDP_HLEN, 0xffff };
	struct frame f;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
		build(&f, &h, 100);
		wr16(f.b + L3 + HARP_IP4_HLEN + 4, wrong[i]);
		fix_csums(&f);
		expect_err(&f, WIRE_ERR_UDP_LEN);
	}
}

static void test_udp_checksum(void **state)
{
	struct harp_hdr h = hdr_data(100, 0, 100);
	struct frame f;
	uint32_t at;

	(void)state;
	/* One flipped bit anywhere in the harp header or the payload. */
	for (at = HDR_AT; at < HARP_FRAME_OVERHEAD + 100; at += 7) {
		build(&f, &h, 100);
		f.b[at] ^= 0x04;
		expect_err(&f, WIRE_ERR_UDP_CSUM);
	}
	build(&f, &h, 100);
	f.b[HDR_AT + 16] ^= 0x80; /* psn */
	expect_err(&f, WIRE_ERR_UDP_CSUM);
	build(&f, &h, 100);
	f.b[L3 + HARP_IP4_HLEN + 1] ^= 0x01; /* source port */
	expect_err(&f, WIRE_ERR_UDP_CSUM);
	build(&f, &h, 100);
	f.b[L3 + HARP_IP4_HLEN + 7] ^= 0x01; /* the checksum itself */
	expect_err(&f, WIRE_ERR_UDP_CSUM);
	/* The pseudo-header covers the addresses: change one and fix only the IPv4 checksum. */
	build(&f, &h, 100);
	f.b[L3 + 19] ^= 0x01;
	wr16(f.b + L3 + 10, 0);
	wr16(f.b + L3 + 10, (uint16_t)~fold(sum_words(f.b + L3, HARP_IP4_HLEN)));
	expect_err(&f, WIRE_ERR_UDP_CSUM);
}

static void test_udp_checksum_zero_accepted(void **state)
{
	struct harp_hdr h = hdr_data(100, 0, 100);
	struct frame f;
	struct wire_pkt p;

	(void)state;
	build(&f, &h, 100);
	wr16(f.b + L3 + HARP_IP4_HLEN + 6, 0); /* "no checksum" */
	assert_int_equal(parse(&f, &p), WIRE_OK);
	assert_memory_equal(&p.h, &h, sizeof(h));
}

/* ---- harp header ----------------------------------------------------------------------------- */

static void harp_mutation(struct harp_hdr h, uint32_t body_len, enum wire_err want)
{
	struct frame f;

	build(&f, &h, body_len);
	assert_true(udp_csum_ok(&f)); /* the builder's checksums hold: the reason is the field */
	expect_err(&f, want);
}

static void test_harp_version(void **state)
{
	struct harp_hdr h = hdr_of(HARP_PKT_CTS, 0);

	(void)state;
	h.version = 0;
	harp_mutation(h, 0, WIRE_ERR_VERSION);
	h.version = HARP_WIRE_VERSION + 1;
	harp_mutation(h, 0, WIRE_ERR_VERSION);
	h.version = 0xff;
	harp_mutation(h, 0, WIRE_ERR_VERSION);
	h.version = HARP_WIRE_VERSION; /* version is checked before type */
	h.type = 0;
	harp_mutation(h, 0, WIRE_ERR_TYPE);
	h.version = 1; /* version 1 had no probes: its peers cannot find paths */
	harp_mutation(h, 0, WIRE_ERR_VERSION);
}

static void test_harp_type(void **state)
{
	const uint8_t bad[] = { 0, HARP_PKT_TYPE_MAX + 1, 0x40, 0x80, 0xff };
	struct harp_hdr h = hdr_of(HARP_PKT_CTS, 0);
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad); i++) {
		h.type = bad[i];
		harp_mutation(h, 0, WIRE_ERR_TYPE);
	}
	/* An unknown type is refused whatever its length. */
	h.type = HARP_PKT_TYPE_MAX + 1;
	h.len = 64;
	harp_mutation(h, 64, WIRE_ERR_TYPE);
}

static void test_harp_len_disagrees(void **state)
{
	struct harp_hdr h;

	(void)state;
	h = hdr_data(1000, 0, 101); /* header says 101, 100 bytes follow */
	harp_mutation(h, 100, WIRE_ERR_LEN);
	h = hdr_data(1000, 0, 99);
	harp_mutation(h, 100, WIRE_ERR_LEN);
	h = hdr_data(1000, 0, 0xffff);
	harp_mutation(h, 100, WIRE_ERR_LEN);
	h = hdr_of(HARP_PKT_CTS, 1); /* CTS claiming a byte that is not there */
	harp_mutation(h, 0, WIRE_ERR_LEN);
	h = hdr_of(HARP_PKT_ACK, 64); /* ACK missing its last sack byte */
	harp_mutation(h, 63, WIRE_ERR_LEN);
}

/* ---- bundles: several records in one frame ------------------------------------------------- */

/* Puts records h[0..n) after one another, each with a body of h[i].len patterned bytes, and seals. */
static void build_bundle(struct frame *f, const struct harp_hdr *h, int n)
{
	uint8_t *at = f->b + HARP_FRAME_OVERHEAD - HARP_HDR_LEN;
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
	f->len = wire_seal(f->b, &path, used, 0x4321, true);
	f->l3 = L3;
	assert_int_equal(f->len, HARP_FRAME_OVERHEAD - HARP_HDR_LEN + used);
}

/*
 * Records, then a trailer of n bytes the first record names (HARP_AUTH's counter and MAC: the
 * parser only locates it), sealed as the engine does: no UDP checksum.
 */
static void build_trailed(struct frame *f, const struct harp_hdr *h, int nrec, uint16_t named,
			  uint32_t n)
{
	uint8_t *at = f->b + HARP_FRAME_OVERHEAD - HARP_HDR_LEN;
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
	f->len = wire_seal(f->b, &path, used + n, 0x4321, false);
	f->l3 = L3;
}

static void test_trailer_located(void **state)
{
	struct harp_hdr h[2] = { hdr_data(8, 0, 8), hdr_of(HARP_PKT_ACK, 2) };
	uint32_t records = 2 * HARP_HDR_LEN + 8 + 2;
	struct wire_pkt p;
	struct frame f;

	(void)state;
	build_trailed(&f, h, 2, HARP_AUTH_TRAILER, HARP_AUTH_TRAILER);
	assert_int_equal(rd16(f.b + L3 + HARP_IP4_HLEN + 6), 0); /* no UDP checksum */
	assert_int_equal(wire_parse(f.b, f.len, &p), WIRE_OK);
	assert_ptr_equal(p.records, f.b + HARP_FRAME_OVERHEAD - HARP_HDR_LEN);
	assert_int_equal(p.records_len, records);
	assert_ptr_equal(p.trailer, p.records + records);
	assert_int_equal(p.trailer[0], 0xc0);
	assert_int_equal(p.h.trailer, HARP_AUTH_TRAILER);
	assert_true(wire_next(&p)); /* the trailer is not taken for a record */
	assert_int_equal(p.h.type, HARP_PKT_ACK);
	assert_false(wire_next(&p));
	/* without one: no trailer pointer, and records fill the payload */
	build_trailed(&f, h, 2, 0, 0);
	assert_int_equal(wire_parse(f.b, f.len, &p), WIRE_OK);
	assert_null(p.trailer);
	assert_int_equal(p.records_len, records);
}

static void test_trailer_refused(void **state)
{
	struct harp_hdr h[2] = { hdr_data(8, 0, 8), hdr_of(HARP_PKT_ACK, 2) };
	struct wire_pkt p;
	struct frame f;

	(void)state;
	/* a size harp never sends */
	build_trailed(&f, h, 1, 8, 8);
	assert_int_equal(wire_parse(f.b, f.len, &p), WIRE_ERR_TRAILER);
	/* named, but the bytes are not there: the records would overrun it */
	build_trailed(&f, h, 1, HARP_AUTH_TRAILER, 10);
	assert_int_not_equal(wire_parse(f.b, f.len, &p), WIRE_OK);
	/* a payload too short to hold a header and the trailer it names */
	build_trailed(&f, h, 0, 0, 0);
	{
		struct harp_hdr one = hdr_of(HARP_PKT_CTS, 0);

		one.trailer = HARP_AUTH_TRAILER;
		wire_put_record(f.b + HARP_FRAME_OVERHEAD - HARP_HDR_LEN, &one);
		f.len = wire_seal(f.b, &path, HARP_HDR_LEN + 4, 0, false);
		assert_int_equal(wire_parse(f.b, f.len, &p), WIRE_ERR_SHORT);
	}
	/* named by a later record */
	h[1].trailer = HARP_AUTH_TRAILER;
	build_trailed(&f, h, 2, HARP_AUTH_TRAILER, HARP_AUTH_TRAILER);
	assert_int_equal(wire_parse(f.b, f.len, &p), WIRE_ERR_TRAILER);
	/* present but not named: taken for a record, which it cannot be */
	h[1].trailer = 0;
	build_trailed(&f, h, 2, 0, HARP_AUTH_TRAILER);
	assert_int_not_equal(wire_parse(f.b, f.len, &p), WIRE_OK);
}

static void test_bundle_round_trip(void **state)
{
	struct harp_hdr h[3] = { hdr_of(HARP_PKT_CTS, 0), hdr_data(8, 0, 8), hdr_of(HARP_PKT_ACK, 2) };
	struct wire_pkt p;
	struct frame f;
	int i;

	(void)state;
	h[1].psn = h[0].psn + 1;
	build_bundle(&f, h, 3);
	assert_true(udp_csum_ok(&f));
	assert_int_equal(wire_parse(f.b, f.len, &p), WIRE_OK);
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
	build_bundle(&f, h + 1, 1);
	assert_int_equal(wire_parse(f.b, f.len, &p), WIRE_OK);
	assert_int_equal(p.next_len, 0);
	assert_false(wire_next(&p));
}

static void bundle_expect(const struct harp_hdr *h, int n, enum wire_err want)
{
	struct frame f;

	build_bundle(&f, h, n);
	expect_err(&f, want);
}

static void test_bundle_refused(void **state)
{
	struct harp_hdr h[2] = { hdr_of(HARP_PKT_CTS, 0), hdr_data(8, 0, 8) };
	struct frame f;

	(void)state;
	bundle_expect(h, 2, WIRE_OK);
	h[1].conn_id++; /* another connection's record */
	bundle_expect(h, 2, WIRE_ERR_BUNDLE);
	h[1] = hdr_data(8, 0, 8);
	h[1].token ^= 1; /* another session's */
	bundle_expect(h, 2, WIRE_ERR_BUNDLE);
	h[1] = hdr_of(HARP_PKT_PROBE, 0); /* a probe travels alone: XDP reads the first header */
	bundle_expect(h, 2, WIRE_ERR_BUNDLE);
	h[1] = hdr_of(HARP_PKT_STEER, 0); /* so does a STEER */
	bundle_expect(h, 2, WIRE_ERR_BUNDLE);
	h[0] = hdr_of(HARP_PKT_PROBE, 0);
	h[1] = hdr_of(HARP_PKT_CTS, 0);
	bundle_expect(h, 2, WIRE_ERR_BUNDLE);
	h[0] = hdr_of(HARP_PKT_STEER, 0);
	bundle_expect(h, 2, WIRE_ERR_BUNDLE);
	h[0] = hdr_of(HARP_PKT_CTS, 0);
	h[1] = hdr_data(8, 0, 8);
	h[1].version++; /* every record is checked, not only the first */
	bundle_expect(h, 2, WIRE_ERR_VERSION);
	h[1] = hdr_data(8, 4, 8); /* the second record's payload lies outside its message */
	bundle_expect(h, 2, WIRE_ERR_LEN);
	h[1] = hdr_of(HARP_PKT_TYPE_MAX + 1, 0);
	bundle_expect(h, 2, WIRE_ERR_TYPE);

	/* bytes after the last record: fewer than a header, or a header claiming more body */
	h[1] = hdr_data(8, 0, 8);
	build_bundle(&f, h, 2);
	wr16(f.b + L3 + 2, (uint16_t)(rd16(f.b + L3 + 2) - 1)); /* the DATA's last byte cut */
	wr16(f.b + L3 + HARP_IP4_HLEN + 4, (uint16_t)(rd16(f.b + L3 + HARP_IP4_HLEN + 4) - 1));
	f.len--;
	fix_csums(&f);
	expect_err(&f, WIRE_ERR_LEN);
	harp_mutation(hdr_of(HARP_PKT_CTS, 0), HARP_HDR_LEN - 1, WIRE_ERR_LEN);

	/* the UDP checksum covers every record */
	build_bundle(&f, h, 2);
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
		harp_mutation(hdr_of(HARP_PKT_ACK, wrong[i]), wrong[i], WIRE_ERR_LEN);
	}
}

static void test_cts_msgerr_with_payload(void **state)
{
	(void)state;
	harp_mutation(hdr_of(HARP_PKT_CTS, 8), 8, WIRE_ERR_LEN);
	harp_mutation(hdr_of(HARP_PKT_CTS, 1), 1, WIRE_ERR_LEN);
	harp_mutation(hdr_of(HARP_PKT_MSGERR, 8), 8, WIRE_ERR_LEN);
	harp_mutation(hdr_of(HARP_PKT_MSGERR, 64), 64, WIRE_ERR_LEN);
}

static void data_bounds(uint64_t msg_len, uint64_t offset, uint16_t len, enum wire_err want)
{
	harp_mutation(hdr_data(msg_len, offset, len), len, want);
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
	round_trip(&h, HARP_UNSOL_MAX_BYTES);
	h = hdr_unsol(0, 0, 0);
	round_trip(&h, 0);
	h = hdr_unsol(HARP_UNSOL_MAX_BYTES + 1, 0, HARP_UNSOL_MAX_BYTES + 1);
	harp_mutation(h, h.len, WIRE_ERR_LEN); /* too big to hold */
	h = hdr_unsol(200, 100, 100);
	harp_mutation(h, h.len, WIRE_ERR_LEN); /* a slice, not the message */
	h = hdr_unsol(200, 0, 100);
	harp_mutation(h, h.len, WIRE_ERR_LEN);
	/* the same slices without the flag are ordinary DATA */
	h = hdr_data(200, 100, 100);
	round_trip(&h, 100);
}

static void test_data_bounds(void **state)
{
	(void)state;
	data_bounds(1000, 900, 100, WIRE_OK);	    /* ends exactly at the message's end */
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
	build(&f, &h, 100);
	f.b[L3 + 10] ^= 0xff;	   /* IPv4 checksum */
	f.b[L3 + 9] = 6;	   /* and not UDP */
	f.b[HDR_AT] = 9;	   /* and a bad version */
	expect_err(&f, WIRE_ERR_IP_CSUM);
	build(&f, &h, 100);
	f.b[HDR_AT + 1] = 0;	   /* type 0, checksum left stale */
	expect_err(&f, WIRE_ERR_UDP_CSUM);
	fix_csums(&f);
	expect_err(&f, WIRE_ERR_TYPE);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_data),
		cmocka_unit_test(test_round_trip_zero_length_data),
		cmocka_unit_test(test_round_trip_ack),
		cmocka_unit_test(test_round_trip_cts),
		cmocka_unit_test(test_round_trip_msgerr),
		cmocka_unit_test(test_round_trip_probe),
		cmocka_unit_test(test_reserved_fields_carried),
		cmocka_unit_test(test_trailer_located),
		cmocka_unit_test(test_trailer_refused),
		cmocka_unit_test(test_udp_csum_zero_sent_as_ffff),
		cmocka_unit_test(test_ip_csum_known_vector),
		cmocka_unit_test(test_csum_every_length_and_alignment),
		cmocka_unit_test(test_truncated_every_length),
		cmocka_unit_test(test_trailing_padding_accepted),
		cmocka_unit_test(test_udp_payload_shorter_than_header),
		cmocka_unit_test(test_ethertype),
		cmocka_unit_test(test_vlan_accepted),
		cmocka_unit_test(test_ip_header_fields),
		cmocka_unit_test(test_ip_total_length),
		cmocka_unit_test(test_ip_checksum),
		cmocka_unit_test(test_udp_length),
		cmocka_unit_test(test_udp_checksum),
		cmocka_unit_test(test_udp_checksum_zero_accepted),
		cmocka_unit_test(test_harp_version),
		cmocka_unit_test(test_harp_type),
		cmocka_unit_test(test_pmtu_and_parts),
		cmocka_unit_test(test_harp_len_disagrees),
		cmocka_unit_test(test_ack_length),
		cmocka_unit_test(test_bundle_round_trip),
		cmocka_unit_test(test_bundle_refused),
		cmocka_unit_test(test_cts_msgerr_with_payload),
		cmocka_unit_test(test_unsolicited_bounds),
		cmocka_unit_test(test_data_bounds),
		cmocka_unit_test(test_check_order),
		cmocka_unit_test(test_err_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
