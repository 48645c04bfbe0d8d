// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for wire_parse. libFuzzer hands each input in a heap buffer of exactly its
 * size, so ASan reports any read past the frame. Whatever the parser accepts must also satisfy
 * what its callers rely on: the body lies inside the frame and all h.len bytes of it are
 * readable, the type's length rules hold, a DATA slice lies inside its message without
 * wrapping, the family's promises hold (IPv6: UDP right behind the fixed header, a checksum,
 * no address wire_parse refuses), and the packet survives being built again, in its family,
 * from what was parsed.
 *
 * The first input byte picks a mode. Even: the rest is parsed as it is. Odd: the checksums
 * (IPv4's header checksum, and UDP's over the pseudo-header of the family the ethertype names)
 * are first recomputed over whatever lengths the mutated headers claim, so the fuzzer can
 * explore the length and field checks behind them instead of stopping at a checksum mismatch.
 *
 * Every frame is also cut into pieces, each in a heap buffer of its own size (a descriptor
 * chain, pieces of 110 + 15 * (first byte / 2) bytes), and given to wire_parse_pieces: where it
 * parses in place, it must say what wire_parse says of the whole, and the body it copies out of
 * the pieces must be the whole frame's body.
 *
 * Both ways are parsed again with the body's part of the checksum deferred (wire_parse_defer,
 * wire_parse_pieces with defer), as the engine receives: the sum added afterwards, along a copy
 * of the body, must give the verdict the whole check gives, and the copy must be the body.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "wire.h"

/* the largest UDP payload behind IPv6's headers, the longer family's */
static uint8_t rebuilt[65536 + HARP_ETH_HLEN + HARP_IP6_HLEN + HARP_UDP_HLEN + HARP_HDR_LEN];

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint16_t fold_inverted(uint64_t sum)
{
	while (sum >> 16) {
		sum = (sum & 0xffff) + (sum >> 16);
	}
	return (uint16_t)~sum;
}

static uint64_t sum16(const uint8_t *p, size_t n)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i + 1 < n; i += 2) {
		sum += rd16(p + i);
	}
	if (n & 1) {
		sum += (uint64_t)p[n - 1] << 8;
	}
	return sum;
}

/*
 * Rewrites the checksums where the headers they cover lie inside the frame: IPv4's header
 * checksum and UDP's behind 20 bytes, or (ethertype 0x86dd) UDP's behind IPv6's 40, over the
 * pseudo-header of its family (IPv4's two addresses at 12, IPv6's at 8, then 17 and the length).
 */
static void fix_checksums(uint8_t *f, size_t n)
{
	size_t l3 = HARP_ETH_HLEN, ip_hlen = HARP_IP4_HLEN;
	uint8_t *ip, *udp;
	uint64_t pseudo;
	uint16_t udp_len;

	if (n >= HARP_ETH_HLEN && rd16(f + 12) == 0x8100) {
		l3 += HARP_VLAN_HLEN;
	}
	if (n >= l3 && rd16(f + l3 - 2) == 0x86dd) {
		ip_hlen = HARP_IP6_HLEN;
	}
	if (n < l3 + ip_hlen) {
		return;
	}
	ip = f + l3;
	if (ip_hlen == HARP_IP4_HLEN) {
		wr16(ip + 10, 0);
		wr16(ip + 10, fold_inverted(sum16(ip, HARP_IP4_HLEN)));
	}
	if (n < l3 + ip_hlen + HARP_UDP_HLEN) {
		return;
	}
	udp = ip + ip_hlen;
	udp_len = rd16(udp + 4);
	if (udp_len < HARP_UDP_HLEN || l3 + ip_hlen + udp_len > n) {
		return;
	}
	pseudo = ip_hlen == HARP_IP4_HLEN ? sum16(ip + 12, 8) : sum16(ip + 8, 32);
	wr16(udp + 6, 0);
	wr16(udp + 6, fold_inverted(pseudo + 17 + udp_len + sum16(udp, udp_len)));
}

/* Bytes of IP, UDP and harp headers in front of a record's body, in the packet's family. */
static uint32_t headers_of(const struct wire_pkt *p)
{
	return (p->ip6 ? HARP_IP6_HLEN : HARP_IP4_HLEN) + HARP_UDP_HLEN + HARP_HDR_LEN;
}

static void check_rebuild(const struct wire_pkt *p)
{
	struct wire_path path = {
		.ip6 = p->ip6,
		.src_ip = p->src_ip,
		.dst_ip = p->dst_ip,
		.src_port = p->src_port,
		.dst_port = p->dst_port,
	};
	struct wire_pkt again;
	uint32_t len;

	memcpy(path.src_mac, p->src_mac, 6);
	memcpy(rebuilt + HARP_ETH_HLEN + headers_of(p), p->body, p->h.len);
	len = wire_build(rebuilt, &path, &p->h, p->h.len, 0);
	CHECK(len == HARP_ETH_HLEN + headers_of(p) + p->h.len);
	CHECK(rd16(rebuilt + 12) == (p->ip6 ? 0x86dd : 0x0800));
	CHECK(wire_parse(rebuilt, len, &again) == WIRE_OK);
	CHECK(memcmp(&again.h, &p->h, sizeof(p->h)) == 0);
	CHECK(memcmp(again.body, p->body, p->h.len) == 0);
	CHECK(again.ip6 == p->ip6 && wire_ip_eq(&again.src_ip, &p->src_ip) &&
	      wire_ip_eq(&again.dst_ip, &p->dst_ip));
	CHECK(again.src_port == p->src_port && again.dst_port == p->dst_port);
}

/* One accepted record: its body lies in the frame, and its fields within their bounds. */
static void check_record(const struct wire_pkt *p, const uint8_t *data, size_t size,
			 const struct harp_hdr *first)
{
	volatile uint8_t sink = 0;
	size_t body_off;
	uint32_t i;

	CHECK(p->body >= data && p->body <= data + size);
	body_off = (size_t)(p->body - data);
	CHECK(p->h.len <= size - body_off);
	for (i = 0; i < p->h.len; i++) {
		sink ^= p->body[i];
	}
	(void)sink;

	CHECK(p->h.version == HARP_WIRE_VERSION);
	CHECK(p->h.conn_id == first->conn_id && p->h.token == first->token);
	switch (p->h.type) {
	case HARP_PKT_DATA:
		CHECK(p->h.offset <= p->h.msg_len);
		CHECK(p->h.len <= p->h.msg_len - p->h.offset);
		CHECK(p->h.len > 0 || p->h.msg_len == 0);
		if (p->h.flags & HARP_DATA_F_UNSOL) { /* a whole small message */
			CHECK(p->h.offset == 0 && p->h.len == p->h.msg_len);
			CHECK(p->h.len <= HARP_UNSOL_MAX_BYTES);
		}
		if (p->h.flags & HARP_DATA_F_SEG) { /* a part: one of 2 to HARP_SEG_MAX */
			CHECK(!(p->h.flags & HARP_DATA_F_UNSOL));
			CHECK((p->h.seg >> 8) >= 2 && (p->h.seg >> 8) <= HARP_SEG_MAX);
			CHECK((p->h.seg & 0xff) < (p->h.seg >> 8));
		}
		break;
	case HARP_PKT_PMTU: /* padded to the size it asks about; alone */
		CHECK(p->h.msg_len <= HARP_IP_MAX && p->next_len == 0);
		CHECK(p->h.msg_len == (uint64_t)p->h.len + headers_of(p) ||
		      p->h.msg_len == (uint64_t)p->h.len + headers_of(p) + HARP_AUTH_TRAILER);
		break;
	case HARP_PKT_PMTU_ACK:
		CHECK(p->h.len == 0 && p->next_len == 0);
		break;
	case HARP_PKT_ACK:
		CHECK(p->h.len <= HARP_SACK_MAX_BYTES);
		break;
	case HARP_PKT_PROBE:
	case HARP_PKT_STEER:
		CHECK(p->h.len == 0 && p->next_len == 0); /* a PROBE or STEER travels alone */
		break;
	case HARP_PKT_CTS:
	case HARP_PKT_MSGERR:
		CHECK(p->h.len == 0);
		break;
	default:
		CHECK(0);
	}
}

/* What a packet of its family promises; ip is its IP header in the frame. */
static void check_family(const struct wire_pkt *p, const uint8_t *ip)
{
	static const uint8_t zero[16];

	if (!p->ip6) {
		CHECK(ip[0] == 0x45 && ip[9] == 17);
		CHECK(wire_ip_is4(&p->src_ip) && wire_ip_is4(&p->dst_ip));
		return;
	}
	CHECK((ip[0] >> 4) == 6 && ip[6] == 17 && rd16(ip + 4) >= HARP_UDP_HLEN + HARP_HDR_LEN);
	CHECK(rd16(ip + HARP_IP6_HLEN + 6) != 0); /* IPv6's UDP always carries its checksum */
	CHECK(!memcmp(p->src_ip.b, ip + 8, 16) && !memcmp(p->dst_ip.b, ip + 24, 16));
	CHECK(!wire_ip_is4(&p->src_ip) && !wire_ip_is4(&p->dst_ip));
	CHECK(p->src_ip.b[0] != 0xff && p->dst_ip.b[0] != 0xff);
	CHECK(memcmp(p->src_ip.b, zero, 16) && memcmp(p->dst_ip.b, zero, 16));
}

/*
 * A deferred parse, finished by the sum along a copy (d: its result before that), says what the
 * whole check (e, p) says: accepted or refused, and for an accepted frame the same header and
 * the same body.
 */
static void check_deferred(struct wire_pkt *d, enum wire_err ed, enum wire_err e,
			   const struct wire_pkt *p)
{
	static uint8_t body[65536];

	if (ed != WIRE_OK) {
		CHECK(e != WIRE_OK); /* refused both ways; the reason may differ when the sum,
				      * checked first by the whole check, fails as well */
		return;
	}
	if (!d->sum_due) {
		CHECK(e == WIRE_OK);
		return;
	}
	CHECK(d->h.type == HARP_PKT_DATA && d->h.len >= WIRE_DEFER_MIN);
	if (!wire_body_copy_check(body, d)) {
		CHECK(e == WIRE_ERR_UDP_CSUM);
		return;
	}
	CHECK(e == WIRE_OK);
	CHECK(memcmp(&d->h, &p->h, sizeof(p->h)) == 0);
	CHECK(memcmp(body, p->body, p->h.len) == 0);
}

static void check_accepted(const uint8_t *data, size_t size)
{
	struct harp_hdr first;
	struct wire_pkt p;
	size_t body_off, l3;
	int records = 1;
	struct wire_pkt d;
	enum wire_err e, ed;

	e = wire_parse(data, (uint32_t)size, &p);
	ed = wire_parse_defer(data, (uint32_t)size, &d);
	check_deferred(&d, ed, e, &p);
	if (e != WIRE_OK) {
		return;
	}
	/* The body starts right after the harp header, behind the IP header of the family the
	 * ethertype names and an optional 802.1Q tag. */
	CHECK(p.body >= data && p.body <= data + size);
	body_off = (size_t)(p.body - data);
	CHECK(body_off >= HARP_ETH_HLEN + headers_of(&p));
	l3 = body_off - headers_of(&p);
	CHECK(l3 == HARP_ETH_HLEN || l3 == HARP_ETH_HLEN + HARP_VLAN_HLEN);
	CHECK(rd16(data + l3 - 2) == (p.ip6 ? 0x86dd : 0x0800));
	check_family(&p, data + l3);
	first = p.h;
	check_record(&p, data, size, &first);
	check_rebuild(&p);
	/* the records after it (a bundle) hold to the same rules, and to the first's connection */
	while (wire_next(&p)) {
		CHECK(!wire_alone(p.h.type) && !wire_alone(first.type));
		check_record(&p, data, size, &first);
		CHECK(++records <= (int)(size / HARP_HDR_LEN));
	}
}

/* The frame cut into pieces of step bytes (the last takes the rest), each its own buffer. */
static void check_pieces(const uint8_t *data, size_t size, uint32_t step)
{
	static uint8_t body[65536];
	struct wire_pieces w = { .n = 0 };
	struct wire_pkt pp, p;
	enum wire_err ep, e;
	uint32_t off = 0, i;
	bool join;

	if (size > 65536 || !step) {
		return;
	}
	while (off < size && w.n < WIRE_PIECES_MAX) {
		uint32_t n = w.n + 1 == WIRE_PIECES_MAX || size - off < step ? (uint32_t)size - off :
									     step;
		uint8_t *piece = malloc(n ? n : 1);

		CHECK(piece);
		memcpy(piece, data + off, n);
		w.at[w.n] = piece;
		w.len[w.n++] = n;
		off += n;
	}
	w.total = off;
	e = wire_parse(data, (uint32_t)size, &p);
	ep = wire_parse_pieces(&w, &pp, &join, true);
	if (!join) {
		check_deferred(&pp, ep, e, &p);
	}
	ep = wire_parse_pieces(&w, &pp, &join, false);
	if (!join) {
		CHECK(ep == e);
		if (e == WIRE_OK) {
			CHECK(memcmp(&pp.h, &p.h, sizeof(p.h)) == 0);
			CHECK(pp.ip6 == p.ip6 && wire_ip_eq(&pp.src_ip, &p.src_ip) &&
			      wire_ip_eq(&pp.dst_ip, &p.dst_ip));
			CHECK(pp.src_port == p.src_port && pp.dst_port == p.dst_port);
			CHECK(pp.h.type == HARP_PKT_DATA && !p.next_len && !p.trailer);
			wire_body_copy(body, &pp);
			CHECK(memcmp(body, p.body, p.h.len) == 0);
		}
	}
	for (i = 0; i < w.n; i++) {
		free((void *)w.at[i]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *frame;

	if (size < 1 || size > UINT32_MAX) {
		return 0;
	}
	if (!(data[0] & 1)) {
		check_accepted(data + 1, size - 1);
		check_pieces(data + 1, size - 1, 110u + (data[0] >> 1) * 15u);
		return 0;
	}
	/* A copy of exactly the frame's size, so ASan still sees every overrun. */
	frame = malloc(size - 1 ? size - 1 : 1);
	CHECK(frame);
	memcpy(frame, data + 1, size - 1);
	fix_checksums(frame, size - 1);
	check_accepted(frame, size - 1);
	check_pieces(frame, size - 1, 110u + (data[0] >> 1) * 15u);
	free(frame);
	return 0;
}
