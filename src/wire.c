// SPDX-License-Identifier: Apache-2.0
/*
 * Building and checking harp's frames. The builder writes the headers around a body already in
 * place, so payload is copied once (from the sender's buffer into the UMEM frame). The parser
 * bounds every length by the one before it: frame length, then the IP packet's length (IPv4's
 * total length, IPv6's payload length), then the UDP length, then each record's len; a frame
 * passes only when all agree, every checksum holds and every record in it is well formed.
 *
 * IPv6 packets are taken only as harp sends them: the UDP header right after the fixed header.
 * harp never sends extension headers, and nothing on a path adds them to a unicast packet (RFC
 * 8200 lets only the source do that), so a packet that carries one (a fragment, a jumbogram's
 * Hop-by-Hop option, a routing header) is refused, not walked. The XDP program already drops
 * such packets aimed at harp's ports (bpf/harp_xdp.bpf.c); this check stands behind it.
 */
#include <arpa/inet.h>
#include <string.h>
#include <stddef.h>

#include "wire.h"

#define ETH_P_IPV4 0x0800
#define ETH_P_IPV6 0x86dd
#define ETH_P_VLAN 0x8100
#define IPPROTO_UDP_NUM 17

/*
 * One's-complement sum of len bytes, as a 16-bit big-endian sum folded into 32 bits. The sum does
 * not care about byte order until the end (RFC 1071), so it adds native-order 16-bit halves of
 * 32-bit words: eight 32-bit lanes side by side, two vectors of them per 64 bytes. A lane takes
 * at most 2 x 0xffff a round, so even the two vectors' lanes added after a run of 16,384 rounds
 * (1 MiB) stay below 2^32. With AVX2 (one
 * clone of the function, picked when the library loads) that is about 3x the 27 GB/s of four
 * scalar 32-bit sums over a 3.4 KB payload on these machines; without, the compiler splits each
 * vector in two and it runs about as fast as they did.
 */
typedef uint32_t csum_vec __attribute__((vector_size(32)));

/* The clone is picked by a resolver that runs while the loader relocates, before a
 * ThreadSanitizer runtime is up, and crashes in its instrumentation: a TSan build has one. */
#ifdef __SANITIZE_THREAD__
#define CSUM_CLONES
#else
#define CSUM_CLONES __attribute__((target_clones("avx2", "default")))
#endif
/* The last len & 63 bytes of a sum, after the vectors: words, then a byte padded with zero. */
static inline uint64_t csum_tail(uint64_t acc, const uint8_t *p, size_t len)
{
	uint32_t w;
	uint16_t h;

	while (len >= 4) {
		memcpy(&w, p, 4);
		acc += w;
		p += 4;
		len -= 4;
	}
	if (len >= 2) {
		memcpy(&h, p, 2);
		acc += h;
		p += 2;
		len -= 2;
	}
	if (len) {
		uint8_t last[2] = { p[0], 0 };

		memcpy(&h, last, 2);
		acc += h;
	}
	return acc;
}

/* acc, the sum in memory (network) order, folded and made a host-order value. */
static inline uint32_t csum_host(uint64_t acc)
{
	while (acc >> 16) {
		acc = (acc & 0xffff) + (acc >> 16);
	}
	return ntohs((uint16_t)acc);
}

/*
 * The vector rounds of a sum over the first len & ~63 bytes at src, as a 64-bit sum in memory
 * order, storing each vector at dst as it goes when dst is given. Inlined into each clone below
 * (so it takes the clone's target), where dst is a constant or not: no test per round survives.
 */
static inline __attribute__((always_inline)) uint64_t csum_rounds(uint8_t *dst,
								   const uint8_t *src,
								   size_t len)
{
	const csum_vec low = { 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff };
	size_t rounds = len / 64, run;
	uint64_t acc = 0;
	int i;

	while (rounds) {
		csum_vec a = { 0 }, b = { 0 }, v, u;

		run = rounds < 16384 ? rounds : 16384;
		rounds -= run;
		for (; run; run--) {
			memcpy(&v, src, 32);
			memcpy(&u, src + 32, 32);
			if (dst) {
				memcpy(dst, &v, 32);
				memcpy(dst + 32, &u, 32);
				dst += 64;
			}
			a += (v & low) + (v >> 16);
			b += (u & low) + (u >> 16);
			src += 64;
		}
		a += b;
		for (i = 0; i < 8; i++) {
			acc += a[i];
		}
	}
	return acc;
}

CSUM_CLONES
static uint32_t csum_add(uint32_t sum, const void *data, size_t len)
{
	const uint8_t *p = data;
	size_t whole = len & ~(size_t)63;

	return sum + csum_host(csum_tail(csum_rounds(NULL, p, len), p + whole, len & 63));
}

/*
 * csum_add(0, src, len), with the bytes copied to dst on the way: one pass over them where a copy
 * and then a sum made two. The vectors are stored as they are loaded.
 */
CSUM_CLONES
static uint32_t csum_copy(uint8_t *dst, const uint8_t *src, size_t len)
{
	size_t whole = len & ~(size_t)63;
	uint64_t acc = csum_rounds(dst, src, len);

	memcpy(dst + whole, src + whole, len & 63);
	return csum_host(csum_tail(acc, src + whole, len & 63));
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16) {
		sum = (sum & 0xffff) + (sum >> 16);
	}
	return (uint16_t)~sum;
}

uint16_t wire_ip_csum(const void *hdr, size_t len)
{
	return csum_fold(csum_add(0, hdr, len));
}

/*
 * The sum of the pseudo-header the UDP checksum covers: the source and destination addresses
 * (IPv4's at bytes 12-19, IPv6's at 8-39, adjacent in both), the protocol and the UDP length.
 */
static uint32_t pseudo_sum(const uint8_t *ip, bool ip6, uint16_t udp_len)
{
	return csum_add(IPPROTO_UDP_NUM + udp_len, ip + (ip6 ? 8 : 12), ip6 ? 32 : 8);
}

/* The UDP checksum over the pseudo-header, the UDP header and the body (host order). */
static uint16_t udp_checksum(const uint8_t *ip, bool ip6, const uint8_t *udp, uint16_t udp_len)
{
	return csum_fold(csum_add(pseudo_sum(ip, ip6, udp_len), udp, udp_len));
}

/* A part of a sum whose bytes start at an odd offset: each sits in the other half of its word. */
static uint32_t sum_at(uint32_t part, uint32_t at)
{
	while (part >> 16) {
		part = (part & 0xffff) + (part >> 16);
	}
	return at & 1 ? (part & 0xff) << 8 | part >> 8 : part;
}

uint32_t wire_sum(const void *data, uint32_t len, uint32_t at)
{
	return sum_at(csum_add(0, data, len), at);
}

uint32_t wire_copy_sum(uint8_t *dst, const void *src, uint32_t len, uint32_t at)
{
	return sum_at(csum_copy(dst, src, len), at);
}

const char *wire_ip_text(const union wire_ip *a, char *buf)
{
	if (wire_ip_is4(a)) {
		inet_ntop(AF_INET, &a->w[3], buf, WIRE_IP_TEXT);
	} else {
		inet_ntop(AF_INET6, a->b, buf, WIRE_IP_TEXT);
	}
	return buf;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void hdr_to_net(struct harp_hdr *n, const struct harp_hdr *h)
{
	*n = *h;
	n->conn_id = htonl(h->conn_id);
	n->token = htobe64(h->token);
	n->psn = htonl(h->psn);
	n->ack_psn = htonl(h->ack_psn);
	n->ts = htonl(h->ts);
	n->ts_echo = htonl(h->ts_echo);
	n->rsn = htonl(h->rsn);
	n->tag = htonl(h->tag);
	n->msg_len = htobe64(h->msg_len);
	n->offset = htobe64(h->offset);
	n->len = htons(h->len);
	n->flags = htons(h->flags);
	n->trailer = htons(h->trailer);
	n->seg = htons(h->seg);
}

static void hdr_from_net(struct harp_hdr *h, const struct harp_hdr *n)
{
	*h = *n;
	h->conn_id = ntohl(n->conn_id);
	h->token = be64toh(n->token);
	h->psn = ntohl(n->psn);
	h->ack_psn = ntohl(n->ack_psn);
	h->ts = ntohl(n->ts);
	h->ts_echo = ntohl(n->ts_echo);
	h->rsn = ntohl(n->rsn);
	h->tag = ntohl(n->tag);
	h->msg_len = be64toh(n->msg_len);
	h->offset = be64toh(n->offset);
	h->len = ntohs(n->len);
	h->flags = ntohs(n->flags);
	h->trailer = ntohs(n->trailer);
	h->seg = ntohs(n->seg);
}

void wire_put_record(uint8_t *record, const struct harp_hdr *h)
{
	struct harp_hdr net;

	hdr_to_net(&net, h);
	memcpy(record, &net, sizeof(net));
}

/* IPv4's header, without options, fragments allowed: DF set, as path MTU discovery needs. */
static void put_ip4(uint8_t *ip, const struct wire_path *path, uint16_t udp_len, uint16_t ip_id)
{
	ip[0] = 0x45; /* version 4, 20-byte header */
	ip[1] = 0;
	put16(ip + 2, (uint16_t)(HARP_IP4_HLEN + udp_len));
	put16(ip + 4, ip_id);
	put16(ip + 6, 0x4000); /* don't fragment */
	ip[8] = 64;
	ip[9] = IPPROTO_UDP_NUM;
	put16(ip + 10, 0);
	memcpy(ip + 12, &path->src_ip.w[3], 4);
	memcpy(ip + 16, &path->dst_ip.w[3], 4);
	put16(ip + 10, wire_ip_csum(ip, HARP_IP4_HLEN));
}

/* IPv6's fixed header, UDP next: traffic class 0, flow label 0 (the ports tell flows apart). */
static void put_ip6(uint8_t *ip, const struct wire_path *path, uint16_t udp_len)
{
	ip[0] = 0x60;
	ip[1] = 0;
	ip[2] = 0;
	ip[3] = 0;
	put16(ip + 4, udp_len);
	ip[6] = IPPROTO_UDP_NUM;
	ip[7] = 64; /* hop limit */
	memcpy(ip + 8, path->src_ip.b, 16);
	memcpy(ip + 24, path->dst_ip.b, 16);
}

/* wire_seal, with the sum of the records' bytes given (records_sum) or not (NULL). */
static uint32_t seal(uint8_t *frame, const struct wire_path *path, uint32_t records_len,
		     uint16_t ip_id, bool udp_csum, const uint32_t *records_sum)
{
	uint8_t *ip = frame + HARP_ETH_HLEN;
	uint8_t *udp = ip + wire_ip_hlen(path->ip6);
	uint16_t udp_len = (uint16_t)(HARP_UDP_HLEN + records_len);
	uint16_t csum;

	memcpy(frame, path->dst_mac, 6);
	memcpy(frame + 6, path->src_mac, 6);
	if (path->ip6) {
		put16(frame + 12, ETH_P_IPV6);
		put_ip6(ip, path, udp_len);
		udp_csum = true; /* IPv6 takes no UDP packet without one */
	} else {
		put16(frame + 12, ETH_P_IPV4);
		put_ip4(ip, path, udp_len, ip_id);
	}
	memcpy(udp, &path->src_port, 2);
	memcpy(udp + 2, &path->dst_port, 2);
	put16(udp + 4, udp_len);
	put16(udp + 6, 0); /* 0 means "no checksum" in IPv4 UDP */
	if (udp_csum && records_sum) {
		uint32_t sum = pseudo_sum(ip, path->ip6, udp_len) + sum_at(*records_sum, 0);

		csum = csum_fold(csum_add(sum, udp, HARP_UDP_HLEN));
		put16(udp + 6, csum ? csum : 0xffff);
	} else if (udp_csum) {
		csum = udp_checksum(ip, path->ip6, udp, udp_len);
		put16(udp + 6, csum ? csum : 0xffff);
	}
	return (uint32_t)(udp - frame) + udp_len;
}

uint32_t wire_seal(uint8_t *frame, const struct wire_path *path, uint32_t records_len,
		   uint16_t ip_id, bool udp_csum)
{
	return seal(frame, path, records_len, ip_id, udp_csum, NULL);
}

uint32_t wire_seal_summed(uint8_t *frame, const struct wire_path *path, uint32_t records_len,
			  uint16_t ip_id, uint32_t records_sum)
{
	return seal(frame, path, records_len, ip_id, true, &records_sum);
}

uint32_t wire_build(uint8_t *frame, const struct wire_path *path, const struct harp_hdr *h,
		    uint32_t body_len, uint16_t ip_id)
{
	wire_put_record(frame + wire_records_at(path->ip6), h);
	return wire_seal(frame, path, HARP_HDR_LEN + body_len, ip_id, true);
}

static const char *const wire_err_names[WIRE_ERR_MAX] = {
	[WIRE_OK] = "ok",
	[WIRE_ERR_SHORT] = "truncated",
	[WIRE_ERR_NOT_IP4] = "not IPv4 or IPv6",
	[WIRE_ERR_IP_HDR] = "bad IP header",
	[WIRE_ERR_IP_CSUM] = "bad IPv4 checksum",
	[WIRE_ERR_NOT_UDP] = "not UDP",
	[WIRE_ERR_IP6_EXT] = "IPv6 extension headers",
	[WIRE_ERR_UDP_LEN] = "bad UDP length",
	[WIRE_ERR_UDP_CSUM] = "bad UDP checksum",
	[WIRE_ERR_VERSION] = "unknown harp version",
	[WIRE_ERR_TYPE] = "unknown harp packet type",
	[WIRE_ERR_LEN] = "bad harp length",
	[WIRE_ERR_BUNDLE] = "bad record in a bundle",
	[WIRE_ERR_TRAILER] = "bad trailer",
};

const char *wire_err_name(enum wire_err e)
{
	return (unsigned)e < WIRE_ERR_MAX ? wire_err_names[e] : "unknown";
}

/*
 * Per-type rules on the body, once the header is known to be complete. After the body, what is
 * left of the UDP payload is either nothing or another whole record (at least a header).
 */
static enum wire_err check_body(const struct harp_hdr *h, uint32_t body_avail, bool ip6)
{
	if (h->len > body_avail || (h->len < body_avail && body_avail - h->len < HARP_HDR_LEN)) {
		return WIRE_ERR_LEN;
	}
	switch (h->type) {
	case HARP_PKT_DATA:
		if (h->offset > h->msg_len || h->len > h->msg_len - h->offset) {
			return WIRE_ERR_LEN; /* payload would land outside its message */
		}
		if (h->len == 0 && h->msg_len != 0) {
			return WIRE_ERR_LEN; /* only a zero-byte message travels without payload */
		}
		if ((h->flags & HARP_DATA_F_UNSOL) &&
		    (h->offset || h->len != h->msg_len || h->len > HARP_UNSOL_MAX_BYTES)) {
			return WIRE_ERR_LEN; /* an unsolicited message is small and whole */
		}
		if ((h->flags & HARP_DATA_F_SEG) &&
		    ((h->flags & HARP_DATA_F_UNSOL) || (h->seg >> 8) < 2 ||
		     (h->seg >> 8) > HARP_SEG_MAX || (h->seg & 0xff) >= (h->seg >> 8))) {
			return WIRE_ERR_LEN; /* a part: of 2 to HARP_SEG_MAX, never unsolicited */
		}
		return WIRE_OK;
	case HARP_PKT_PMTU: {
		/* its padding (and a MAC trailer, if any) makes it the size it asks about */
		uint64_t ip = (uint64_t)h->len + wire_pkt_overhead(ip6);

		return h->msg_len <= HARP_IP_MAX &&
				       (h->msg_len == ip || h->msg_len == ip + HARP_AUTH_TRAILER) ?
			       WIRE_OK :
			       WIRE_ERR_LEN;
	}
	case HARP_PKT_ACK:
		return h->len <= HARP_SACK_MAX_BYTES ? WIRE_OK : WIRE_ERR_LEN;
	case HARP_PKT_CTS:
	case HARP_PKT_MSGERR:
	case HARP_PKT_PROBE:
	case HARP_PKT_STEER:
	case HARP_PKT_PMTU_ACK:
		return h->len == 0 ? WIRE_OK : WIRE_ERR_LEN;
	default:
		return WIRE_ERR_TYPE;
	}
}

static enum wire_err check_record(const uint8_t *at, uint32_t avail, bool ip6, struct harp_hdr *h)
{
	struct harp_hdr net;

	memcpy(&net, at, sizeof(net));
	hdr_from_net(h, &net);
	if (h->version != HARP_WIRE_VERSION) {
		return WIRE_ERR_VERSION;
	}
	if (h->type == 0 || h->type > HARP_PKT_TYPE_MAX) {
		return WIRE_ERR_TYPE;
	}
	return check_body(h, avail - HARP_HDR_LEN, ip6);
}

/*
 * Every record of a UDP payload of len bytes (at least one header), the first into p->h. Later
 * records belong to the first one's connection (id and token), and a PROBE or STEER travels
 * alone (the XDP program reads only the first header): a frame is taken whole or not at all.
 */
static enum wire_err check_records(const uint8_t *at, uint32_t len, struct wire_pkt *p)
{
	enum wire_err e = check_record(at, len, p->ip6, &p->h);
	struct harp_hdr h;

	if (e != WIRE_OK) {
		return e;
	}
	for (len -= HARP_HDR_LEN + p->h.len, at += HARP_HDR_LEN + p->h.len; len;
	     len -= HARP_HDR_LEN + h.len, at += HARP_HDR_LEN + h.len) {
		e = check_record(at, len, p->ip6, &h);
		if (e != WIRE_OK) {
			return e;
		}
		if (h.conn_id != p->h.conn_id || h.token != p->h.token || wire_alone(h.type) ||
		    wire_alone(p->h.type)) {
			return WIRE_ERR_BUNDLE;
		}
		if (h.trailer) {
			return WIRE_ERR_TRAILER; /* only the first record names it */
		}
	}
	return WIRE_OK;
}

bool wire_next(struct wire_pkt *p)
{
	struct harp_hdr net;

	if (!p->next_len) {
		return false;
	}
	memcpy(&net, p->next, sizeof(net));
	hdr_from_net(&p->h, &net);
	p->body = p->next + HARP_HDR_LEN;
	p->body_here = p->h.len;
	p->next = p->body + p->h.len;
	p->next_len -= HARP_HDR_LEN + p->h.len;
	return true;
}

/* IPv4's header at ip, here bytes of it in hand, len in the packet: its UDP length on WIRE_OK. */
static enum wire_err check_ip4(const uint8_t *ip, uint32_t here, uint32_t len, uint16_t *udp_len)
{
	uint16_t ip_len;

	if (here < HARP_IP4_HLEN) {
		return WIRE_ERR_SHORT;
	}
	ip_len = get16(ip + 2);
	if (ip[0] != 0x45 || (get16(ip + 6) & 0x3fff) || ip_len < HARP_IP4_HLEN) {
		return WIRE_ERR_IP_HDR; /* another version, options, fragments, a nonsense length */
	}
	if (ip_len > len) {
		return WIRE_ERR_SHORT; /* trailing bytes (Ethernet padding) may be, missing not */
	}
	if (wire_ip_csum(ip, HARP_IP4_HLEN) != 0) {
		return WIRE_ERR_IP_CSUM;
	}
	if (ip[9] != IPPROTO_UDP_NUM) {
		return WIRE_ERR_NOT_UDP;
	}
	if (ip_len < HARP_IP4_HLEN + HARP_UDP_HLEN || here < HARP_IP4_HLEN + HARP_UDP_HLEN) {
		return WIRE_ERR_SHORT;
	}
	*udp_len = (uint16_t)(ip_len - HARP_IP4_HLEN);
	return WIRE_OK;
}

/* Addresses no harp peer sends from or to: multicast (ff00::/8), unspecified, mapped IPv4. */
static bool ip6_addr_bad(const uint8_t *a)
{
	static const uint8_t zero[16];
	union wire_ip ip;

	memcpy(ip.b, a, 16);
	return a[0] == 0xff || !memcmp(a, zero, 16) || wire_ip_is4(&ip);
}

/* IPv6's fixed header at ip, as check_ip4; the UDP header must follow it at once. */
static enum wire_err check_ip6(const uint8_t *ip, uint32_t here, uint32_t len, uint16_t *udp_len)
{
	uint16_t payload;

	if (here < HARP_IP6_HLEN) {
		return WIRE_ERR_SHORT;
	}
	payload = get16(ip + 4);
	if ((ip[0] >> 4) != 6 || payload == 0 || ip6_addr_bad(ip + 8) || ip6_addr_bad(ip + 24)) {
		return WIRE_ERR_IP_HDR; /* another version, a jumbogram, an address no peer has */
	}
	if ((uint32_t)payload + HARP_IP6_HLEN > len) {
		return WIRE_ERR_SHORT;
	}
	if (ip[6] != IPPROTO_UDP_NUM) {
		/* the protocols harp cannot be: anything else is an extension header before UDP */
		return ip[6] == 6 || ip[6] == 58 || ip[6] == 59 ? WIRE_ERR_NOT_UDP
							       : WIRE_ERR_IP6_EXT;
	}
	if (payload < HARP_UDP_HLEN || here < HARP_IP6_HLEN + HARP_UDP_HLEN) {
		return WIRE_ERR_SHORT;
	}
	*udp_len = payload;
	return WIRE_OK;
}

/*
 * The Ethernet, IP and UDP headers of a packet of len bytes, all of them in the here bytes at
 * frame (a packet in one piece: here == len). On WIRE_OK *ip and *udp point at the headers,
 * *ip6 gives the family and *udp_len is the UDP length, at most what len holds.
 */
static enum wire_err check_headers(const uint8_t *frame, uint32_t here, uint32_t len,
				   const uint8_t **ipp, bool *ip6, const uint8_t **udpp,
				   uint16_t *udp_lenp)
{
	uint32_t l3_off = HARP_ETH_HLEN;
	uint16_t ethertype, ip_udp_len = 0;
	enum wire_err e;

	if (here < HARP_ETH_HLEN) {
		return WIRE_ERR_SHORT;
	}
	ethertype = get16(frame + 12);
	if (ethertype == ETH_P_VLAN) {
		if (here < HARP_ETH_HLEN + HARP_VLAN_HLEN) {
			return WIRE_ERR_SHORT;
		}
		ethertype = get16(frame + 16);
		l3_off += HARP_VLAN_HLEN;
	}
	if (ethertype != ETH_P_IPV4 && ethertype != ETH_P_IPV6) {
		return WIRE_ERR_NOT_IP4;
	}
	*ip6 = ethertype == ETH_P_IPV6;
	*ipp = frame + l3_off;
	e = *ip6 ? check_ip6(*ipp, here - l3_off, len - l3_off, &ip_udp_len)
		 : check_ip4(*ipp, here - l3_off, len - l3_off, &ip_udp_len);
	if (e != WIRE_OK) {
		return e;
	}
	*udpp = *ipp + wire_ip_hlen(*ip6);
	*udp_lenp = get16(*udpp + 4);
	return *udp_lenp == ip_udp_len ? WIRE_OK : WIRE_ERR_UDP_LEN;
}

static void fill_addresses(const uint8_t *frame, const uint8_t *ip, const uint8_t *udp,
			   struct wire_pkt *p)
{
	if (p->ip6) {
		memcpy(p->src_ip.b, ip + 8, 16);
		memcpy(p->dst_ip.b, ip + 24, 16);
	} else {
		uint32_t a;

		memcpy(&a, ip + 12, 4);
		p->src_ip = wire_ip4(a);
		memcpy(&a, ip + 16, 4);
		p->dst_ip = wire_ip4(a);
	}
	memcpy(&p->src_port, udp, 2);
	memcpy(&p->dst_port, udp + 2, 2);
	memcpy(p->src_mac, frame + 6, 6);
}

/*
 * Whether the UDP payload at udp (udp_len bytes, a checksum to check) is one DATA record of a
 * solicited message, with no trailer and a body of at least WIRE_DEFER_MIN bytes: what bulk
 * transfer sends, whose body's part of the checksum can ride along its copy into place. Read from
 * the bytes as they came: the record is checked after this, and nothing is known good until the
 * sum holds.
 */
static bool sum_deferrable(const uint8_t *udp, uint16_t udp_len)
{
	const uint8_t *rec = udp + HARP_UDP_HLEN;

	return udp_len >= HARP_UDP_HLEN + HARP_HDR_LEN + WIRE_DEFER_MIN &&
	       rec[offsetof(struct harp_hdr, type)] == HARP_PKT_DATA &&
	       !(get16(rec + offsetof(struct harp_hdr, flags)) & HARP_DATA_F_UNSOL) &&
	       get16(rec + offsetof(struct harp_hdr, trailer)) == 0 &&
	       get16(rec + offsetof(struct harp_hdr, len)) + HARP_UDP_HLEN + HARP_HDR_LEN ==
		       udp_len;
}

/* The sum of all the UDP checksum covers before a deferred body: pseudo-header, headers. */
static uint32_t sum_before_body(const uint8_t *ip, bool ip6, const uint8_t *udp, uint16_t udp_len)
{
	return csum_add(pseudo_sum(ip, ip6, udp_len), udp, HARP_UDP_HLEN + HARP_HDR_LEN);
}

static enum wire_err parse(const uint8_t *frame, uint32_t len, struct wire_pkt *p, bool defer)
{
	const uint8_t *ip, *udp;
	uint16_t udp_len, csum, trailer;
	uint32_t records_len;
	enum wire_err e;

	p->sum_due = false;
	p->placed = false;
	e = check_headers(frame, len, len, &ip, &p->ip6, &udp, &udp_len);
	if (e != WIRE_OK) {
		return e;
	}
	csum = get16(udp + 6);
	if (p->ip6 && csum == 0) {
		return WIRE_ERR_UDP_CSUM; /* IPv6 takes no UDP packet without one (RFC 8200) */
	}
	if (csum != 0 && defer && sum_deferrable(udp, udp_len)) {
		p->sum_due = true;
		p->sum_part = sum_before_body(ip, p->ip6, udp, udp_len);
	} else if (csum != 0 && udp_checksum(ip, p->ip6, udp, udp_len) != 0) {
		return WIRE_ERR_UDP_CSUM;
	}
	if (udp_len < HARP_UDP_HLEN + HARP_HDR_LEN) {
		return WIRE_ERR_SHORT;
	}
	/* the first record's trailer field (bytes 60-61 of its header) says where records end */
	trailer = get16(udp + HARP_UDP_HLEN + offsetof(struct harp_hdr, trailer));
	if (trailer != 0 && trailer != HARP_AUTH_TRAILER) {
		return WIRE_ERR_TRAILER;
	}
	if (udp_len < HARP_UDP_HLEN + HARP_HDR_LEN + trailer) {
		return WIRE_ERR_SHORT;
	}
	records_len = udp_len - HARP_UDP_HLEN - trailer;
	e = check_records(udp + HARP_UDP_HLEN, records_len, p);
	if (e != WIRE_OK) {
		return e;
	}
	p->records = udp + HARP_UDP_HLEN;
	p->records_len = records_len;
	p->trailer = trailer ? p->records + records_len : NULL;
	p->body = udp + HARP_UDP_HLEN + HARP_HDR_LEN;
	p->rest = NULL;
	p->body_here = p->h.len;
	p->next = p->body + p->h.len;
	p->next_len = records_len - HARP_HDR_LEN - p->h.len;
	fill_addresses(frame, ip, udp, p);
	return WIRE_OK;
}

enum wire_err wire_parse(const uint8_t *frame, uint32_t len, struct wire_pkt *p)
{
	return parse(frame, len, p, false);
}

enum wire_err wire_parse_defer(const uint8_t *frame, uint32_t len, struct wire_pkt *p)
{
	return parse(frame, len, p, true);
}

/*
 * Whether a sum across the pieces can add each piece's bytes as they lie: every piece the UDP
 * payload runs across, but the last, of even length from where the payload starts in it.
 */
static bool pieces_even(const struct wire_pieces *w, const uint8_t *udp, uint16_t udp_len)
{
	uint32_t left = udp_len, n, i;

	for (i = 0; left; i++) {
		const uint8_t *from = i ? w->at[i] : udp;

		if (i == w->n) {
			return false; /* fewer bytes than the headers say: wire_parse says so */
		}
		n = (uint32_t)(w->at[i] + w->len[i] - from);
		n = n < left ? n : left;
		if ((n & 1) && n < left) {
			return false; /* the next piece's bytes would sit in the other half */
		}
		left -= n;
	}
	return true;
}

/* The UDP checksum across the pieces (result as udp_checksum's); they are pieces_even. */
static uint16_t udp_csum_pieces(const struct wire_pieces *w, const uint8_t *ip, bool ip6,
				const uint8_t *udp, uint16_t udp_len)
{
	uint32_t sum = pseudo_sum(ip, ip6, udp_len), left = udp_len, n, i;

	for (i = 0; left; i++) {
		const uint8_t *from = i ? w->at[i] : udp;

		n = (uint32_t)(w->at[i] + w->len[i] - from);
		n = n < left ? n : left;
		sum = csum_add(sum, from, n);
		left -= n;
	}
	return csum_fold(sum);
}

enum wire_err wire_parse_pieces(const struct wire_pieces *w, struct wire_pkt *p, bool *join,
				bool defer)
{
	const uint8_t *ip, *udp;
	uint16_t udp_len, csum;
	uint32_t records_len, body_off;
	enum wire_err e;

	*join = true;
	p->sum_due = false;
	p->placed = false;
	if (w->n < 2 || w->len[0] < HARP_ETH_HLEN + HARP_VLAN_HLEN + HARP_IP6_HLEN +
					     HARP_UDP_HLEN + HARP_HDR_LEN) {
		return WIRE_OK;
	}
	e = check_headers(w->at[0], w->len[0], w->total, &ip, &p->ip6, &udp, &udp_len);
	if (e != WIRE_OK || udp_len < HARP_UDP_HLEN + HARP_HDR_LEN ||
	    get16(udp + HARP_UDP_HLEN + offsetof(struct harp_hdr, trailer)) != 0) {
		return WIRE_OK; /* wire_parse says what is wrong, or takes its trailer */
	}
	body_off = (uint32_t)(udp - w->at[0]) + HARP_UDP_HLEN + HARP_HDR_LEN;
	if (body_off > w->len[0]) {
		return WIRE_OK;
	}
	records_len = udp_len - HARP_UDP_HLEN;
	if (check_record(udp + HARP_UDP_HLEN, records_len, p->ip6, &p->h) != WIRE_OK ||
	    p->h.type != HARP_PKT_DATA || (p->h.flags & HARP_DATA_F_UNSOL) ||
	    HARP_HDR_LEN + (uint32_t)p->h.len != records_len) {
		return WIRE_OK;
	}
	csum = get16(udp + 6);
	if (p->ip6 && csum == 0) {
		*join = false;
		return WIRE_ERR_UDP_CSUM;
	}
	if (csum != 0 && !pieces_even(w, udp, udp_len)) {
		return WIRE_OK;
	}
	if (csum != 0 && defer && p->h.len >= WIRE_DEFER_MIN) {
		p->sum_due = true;
		p->sum_part = sum_before_body(ip, p->ip6, udp, udp_len);
	} else if (csum != 0 && udp_csum_pieces(w, ip, p->ip6, udp, udp_len) != 0) {
		*join = false;
		return WIRE_ERR_UDP_CSUM;
	}
	*join = false;
	p->records = udp + HARP_UDP_HLEN; /* its header; the body runs on in the pieces */
	p->records_len = records_len;
	p->trailer = NULL;
	p->body = w->at[0] + body_off;
	p->body_here = w->len[0] - body_off < p->h.len ? w->len[0] - body_off : p->h.len;
	p->rest = w;
	p->next = NULL;
	p->next_len = 0;
	fill_addresses(w->at[0], ip, udp, p);
	return WIRE_OK;
}

/* One run of a deferred body: summed where it lies, or summed as it is copied to dst. */
static int body_sum_put(void *arg, uint8_t *dst, const uint8_t *src, uint32_t n)
{
	*(uint32_t *)arg += dst ? csum_copy(dst, src, n) : csum_add(0, src, n);
	return 0;
}

bool wire_body_check(struct wire_pkt *p)
{
	uint32_t sum = p->sum_part;

	if (!p->sum_due) {
		return true;
	}
	(void)wire_body_each(NULL, p, body_sum_put, &sum);
	p->sum_due = false;
	return csum_fold(sum) == 0;
}

bool wire_body_copy_check(uint8_t *dst, struct wire_pkt *p)
{
	uint32_t sum = p->sum_part;

	if (!p->sum_due) {
		wire_body_copy(dst, p);
		return true;
	}
	(void)wire_body_each(dst, p, body_sum_put, &sum);
	p->sum_due = false;
	return csum_fold(sum) == 0;
}
