/* SPDX-License-Identifier: Apache-2.0 */
/*
 * harp's wire format (docs/PROTOCOL.md): Ethernet, IPv4 without options or IPv6 without
 * extension headers, UDP, then one or more records, each the 64-byte harp header and its body.
 * Multi-byte fields travel in network byte order. Building writes every header and checksum;
 * parsing checks every length and checksum, and every record of the frame, before anything is
 * read from a body, and never trusts a field it has not bounded.
 */
#ifndef HARP_WIRE_H
#define HARP_WIRE_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#define HARP_WIRE_VERSION 3
#define HARP_ETH_HLEN 14
#define HARP_VLAN_HLEN 4
#define HARP_IP4_HLEN 20
#define HARP_IP6_HLEN 40
#define HARP_UDP_HLEN 8
#define HARP_HDR_LEN 64
/* ACK body: one bit per psn after the cumulative ack, as many bytes as the holes need, up to a
 * whole window (a connection's 4096 psns in flight) */
#define HARP_SACK_MAX_BYTES 512
#define HARP_SACK_MAX_BITS (HARP_SACK_MAX_BYTES * 8)
#define HARP_ACK_F_PING 0x0001 /* ACK flags: the peer must answer with an ACK at once */
/* ACK flags: a reliable packet arrived twice since the last ACK (the sender sent again what was
 * only late: its reordering window is too tight) */
#define HARP_ACK_F_DUP 0x0002
/* DATA flags: the sender's send already completed (it keeps a copy): its ack need not hurry */
#define HARP_DATA_F_DONE 0x0001
/* DATA flags: unsolicited, sent before the receive's CTS reached the sender: rsn holds the
 * send's sequence number, and the record is the whole message (offset 0, len = msg_len) */
#define HARP_DATA_F_UNSOL 0x0002
/* DATA flags: one part of a packet sent again in parts after its path MTU fell below it: seg
 * holds (parts << 8 | this part); the receiver takes the psn once it has every part */
#define HARP_DATA_F_SEG 0x0004
#define HARP_SEG_MAX 16 /* parts a packet may go in */
/* The largest IP packet harp sends (a multi-buffer slot less the Ethernet header). */
#define HARP_IP_MAX 16370
/* The largest unsolicited message: what the receiver holds until its receive is posted. */
#define HARP_UNSOL_MAX_BYTES 256
/* An authenticated connection's frames end in a 64-bit frame counter and a 16-byte MAC. */
#define HARP_AUTH_TRAILER 24
/* Bytes of headers in front of a data payload, over IPv4 (wire_frame_overhead: either family). */
#define HARP_FRAME_OVERHEAD (HARP_ETH_HLEN + HARP_IP4_HLEN + HARP_UDP_HLEN + HARP_HDR_LEN)

enum harp_pkt_type {
	HARP_PKT_DATA = 1,   /* reliable: a slice of a message */
	HARP_PKT_ACK = 2,    /* unreliable: cumulative and selective acknowledgement */
	HARP_PKT_CTS = 3,    /* reliable: a posted receive buffer (clear to send) */
	HARP_PKT_MSGERR = 4, /* reliable: a message that did not fit its receive buffer */
	HARP_PKT_PROBE = 5,  /* unreliable: does this port pair reach the connection's queue? */
	HARP_PKT_STEER = 6,  /* unreliable, ignored on arrival: sent on a port pair the peer's probe
			      * proved, so that a host's tap (tun) keeps steering it to this queue */
	HARP_PKT_PMTU = 7,   /* unreliable: an IP packet of msg_len bytes (padding after the
			      * header): does the path carry that size? tag: the probe's number */
	HARP_PKT_PMTU_ACK = 8, /* unreliable: the PMTU probe tag of msg_len bytes arrived */
	HARP_PKT_TYPE_MAX = 8,
};

/* These travel alone in their frame: the XDP program reads only the first header of a PROBE or
 * STEER, and a PMTU probe's size is the question. */
static inline bool wire_alone(uint8_t type)
{
	return type == HARP_PKT_PROBE || type == HARP_PKT_STEER || type == HARP_PKT_PMTU ||
	       type == HARP_PKT_PMTU_ACK;
}

/* Every packet carries this, after the UDP header. */
struct harp_hdr {
	uint8_t version;
	uint8_t type;
	uint8_t buf_idx;  /* DATA/CTS/MSGERR: buffer within the receive */
	uint8_t nbufs;	  /* CTS: buffers in that receive */
	uint32_t conn_id; /* the receiving side's connection id */
	uint64_t token;	  /* the connection's session token, from the handshake */
	uint32_t psn;	  /* reliable packets: packet sequence number */
	uint32_t ack_psn; /* every packet: all psn before this have arrived */
	uint32_t ts;	  /* sender's clock, microseconds (truncated) */
	uint32_t ts_echo; /* ACK: ts of the packet being acknowledged, for the RTT */
	uint32_t rsn;	  /* DATA/CTS/MSGERR: sequence number of the receive (unsolicited DATA: of
			   * the send); PROBE: round */
	uint32_t tag;	  /* DATA/CTS: the message's tag; PROBE: candidate within the round */
	uint64_t msg_len; /* DATA: message length; CTS: buffer capacity; MSGERR: rejected length */
	uint64_t offset;  /* DATA: this payload's byte offset in the message */
	uint16_t len;	  /* bytes after this header (payload, or the ACK's sack bitmap) */
	uint16_t flags;	  /* ACK: HARP_ACK_F_*; DATA: HARP_DATA_F_*; otherwise zero */
	uint16_t trailer; /* first record: bytes after the frame's records (HARP_AUTH_TRAILER: a
			   * MAC), 0: none; later records: 0 */
	uint16_t seg;	  /* DATA with HARP_DATA_F_SEG: parts << 8 | this part; otherwise 0 */
} __attribute__((packed));
_Static_assert(sizeof(struct harp_hdr) == HARP_HDR_LEN, "harp header is 64 bytes on the wire");

/*
 * An IP address in network byte order: IPv6's 16 bytes, or an IPv4 address as IPv6 maps it
 * (::ffff:a.b.c.d), so that one type and one comparison serve both families. A mapped address
 * never travels in an IPv6 header (wire_parse refuses one there), so the two never meet.
 */
union wire_ip {
	uint8_t b[16];
	uint32_t w[4];
};

static inline union wire_ip wire_ip4(uint32_t ipv4)
{
	union wire_ip a = { .w = { 0, 0, 0, 0 } };

	a.b[10] = 0xff;
	a.b[11] = 0xff;
	a.w[3] = ipv4;
	return a;
}

static inline bool wire_ip_is4(const union wire_ip *a)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return !memcmp(a->b, mapped, sizeof(mapped));
}

static inline bool wire_ip_eq(const union wire_ip *a, const union wire_ip *b)
{
	return !memcmp(a->b, b->b, sizeof(a->b));
}

/* The address folded to 32 bits, for hashing (pairs.h): the four words xored. */
static inline uint32_t wire_ip_fold(const union wire_ip *a)
{
	return a->w[0] ^ a->w[1] ^ a->w[2] ^ a->w[3];
}

/* An address as text (dotted quad, or IPv6's), in buf of WIRE_IP_TEXT bytes; returns buf. */
#define WIRE_IP_TEXT 46
const char *wire_ip_text(const union wire_ip *a, char *buf);
/* The same in a buffer that lives as long as the enclosing block, for a log line's argument. */
#define WIRE_IP_STR(a) wire_ip_text((a), (char[WIRE_IP_TEXT]){ 0 })

/* Bytes of IP header a family's packets carry. */
static inline uint32_t wire_ip_hlen(bool ip6)
{
	return ip6 ? HARP_IP6_HLEN : HARP_IP4_HLEN;
}

/* Bytes of a packet's IP, UDP and harp headers: an IP packet less its payload. */
static inline uint32_t wire_pkt_overhead(bool ip6)
{
	return wire_ip_hlen(ip6) + HARP_UDP_HLEN + HARP_HDR_LEN;
}

/* Where a frame's first record starts: past its Ethernet, IP and UDP headers. */
static inline uint32_t wire_records_at(bool ip6)
{
	return HARP_ETH_HLEN + wire_ip_hlen(ip6) + HARP_UDP_HLEN;
}

/* Addresses of one direction of a connection, in network byte order. */
struct wire_path {
	uint8_t src_mac[6], dst_mac[6];
	bool ip6; /* IPv6 headers; else IPv4 (the addresses mapped) */
	union wire_ip src_ip, dst_ip;
	uint16_t src_port, dst_port;
};

/*
 * Writes Ethernet/IP/UDP headers and h in front of a body of body_len bytes that the caller has
 * already placed at frame + wire_records_at(path->ip6) + HARP_HDR_LEN, and fills the checksums.
 * h is in host order. Returns the frame length.
 */
uint32_t wire_build(uint8_t *frame, const struct wire_path *path, const struct harp_hdr *h,
		    uint32_t body_len, uint16_t ip_id);
/*
 * A frame of several records, built in two steps: wire_put_record writes h (host order) at
 * record, in front of its h->len bytes of body that the caller places after it; wire_seal then
 * writes the Ethernet/IP/UDP headers in front of the records_len bytes of records starting at
 * frame + wire_records_at(path->ip6) (with the trailer the first record names, if any, after
 * them), fills the IPv4 header checksum and, when udp_csum, the UDP one, and returns the frame
 * length. Over IPv4 an authenticated frame leaves the UDP checksum 0 (its MAC covers more);
 * IPv6 has no such choice (RFC 8200: a UDP checksum of 0 is refused), so there udp_csum is
 * ignored and the checksum always written.
 */
void wire_put_record(uint8_t *record, const struct harp_hdr *h);
uint32_t wire_seal(uint8_t *frame, const struct wire_path *path, uint32_t records_len,
		   uint16_t ip_id, bool udp_csum);
/*
 * A frame's records summed as they are written, so that sealing need not read them again: the
 * one's-complement sum of len bytes that lie at byte at of the records (wire_sum), or of len
 * bytes copied from src to dst, summed in the same pass (wire_copy_sum). Parts add up with +.
 */
uint32_t wire_sum(const void *data, uint32_t len, uint32_t at);
uint32_t wire_copy_sum(uint8_t *dst, const void *src, uint32_t len, uint32_t at);
/* wire_seal with the UDP checksum (always), from records_sum, the sum of every record's bytes. */
uint32_t wire_seal_summed(uint8_t *frame, const struct wire_path *path, uint32_t records_len,
			  uint16_t ip_id, uint32_t records_sum);

/* Reasons a packet is refused; counted per queue. */
enum wire_err {
	WIRE_OK = 0,
	WIRE_ERR_SHORT,	   /* shorter than the headers it claims */
	WIRE_ERR_NOT_IP4,  /* neither IPv4 nor IPv6 (an unknown ethertype) */
	WIRE_ERR_IP_HDR,   /* IPv4 version/ihl/options/fragment/total length wrong; IPv6 version
			    * wrong, payload length 0 (a jumbogram), or an unspecified, multicast
			    * or IPv4-mapped address */
	WIRE_ERR_IP_CSUM,  /* IPv4 header checksum */
	WIRE_ERR_NOT_UDP,  /* another IP protocol */
	WIRE_ERR_IP6_EXT,  /* IPv6 extension headers: harp never sends them */
	WIRE_ERR_UDP_LEN,  /* UDP length disagrees with IP */
	WIRE_ERR_UDP_CSUM, /* UDP checksum */
	WIRE_ERR_VERSION,  /* harp version */
	WIRE_ERR_TYPE,	   /* unknown packet type */
	WIRE_ERR_LEN,	   /* harp len disagrees with the UDP payload, or body bounds wrong */
	WIRE_ERR_BUNDLE,   /* a later record of another connection, or a PROBE among records */
	WIRE_ERR_TRAILER,  /* a trailer of a size harp does not send, or named by a later record */
	WIRE_ERR_MAX,
};
const char *wire_err_name(enum wire_err e);

/* The most pieces a packet may arrive in: the kernel's limit on a chain (MAX_SKB_FRAGS + 1). */
#define WIRE_PIECES_MAX 18

/* A packet that arrived in pieces (an AF_XDP descriptor chain), in order. */
struct wire_pieces {
	const uint8_t *at[WIRE_PIECES_MAX];
	uint32_t len[WIRE_PIECES_MAX];
	uint32_t n;	/* pieces */
	uint32_t total; /* bytes in all of them */
};

/* A checked record: h in host order, body pointing into the frame. */
struct wire_pkt {
	struct harp_hdr h;
	const uint8_t *body; /* h.len bytes, or body_here of them where rest is set */
	/* a body that runs on past the first piece of a packet in pieces: body_here bytes at body,
	 * the others in rest's pieces 1, 2, ... in order (wire_body_copy); NULL: all at body */
	const struct wire_pieces *rest;
	uint32_t body_here;
	const uint8_t *next; /* the frame's records after this one, already checked */
	uint32_t next_len;   /* their bytes; 0: this was the last */
	const uint8_t *records; /* the frame's first record */
	uint32_t records_len;	/* bytes of all its records */
	const uint8_t *trailer; /* h.trailer bytes after the records (first record's h), or NULL */
	bool ip6;
	union wire_ip src_ip, dst_ip;
	uint16_t src_port, dst_port;
	uint8_t src_mac[6];
	/* wire_parse_defer: the body's part of the UDP checksum is still to add (wire_body_check,
	 * wire_body_copy_check); sum_part is the sum of the rest. Until one of them says the sum
	 * holds, nothing in the frame is known good, its header included. */
	bool sum_due;
	uint32_t sum_part;
	bool placed; /* the receiver's: its body was copied into place as its sum was checked */
};

/*
 * Checks everything listed in enum wire_err, for every record of the frame; on WIRE_OK fills p
 * with the first record. Never reads past len.
 */
enum wire_err wire_parse(const uint8_t *frame, uint32_t len, struct wire_pkt *p);
/*
 * The smallest body whose part of the checksum wire_parse_defer leaves for later: below it, a
 * second pass over the body costs less than the care a deferred one needs.
 */
#define WIRE_DEFER_MIN 256
/*
 * wire_parse, but a frame that is one DATA record of a solicited message with at least
 * WIRE_DEFER_MIN bytes of body and a UDP checksum leaves the body's part of the sum for later
 * (p->sum_due): the receiver adds it as it copies the body into place (wire_body_copy_check),
 * one pass over the bytes instead of two, or in place (wire_body_check). Every other check is
 * made; the header is read as it came, and nothing of it may be applied before the sum holds.
 */
enum wire_err wire_parse_defer(const uint8_t *frame, uint32_t len, struct wire_pkt *p);
/* Moves p to the frame's next record (checked by wire_parse); false after the last one. */
bool wire_next(struct wire_pkt *p);
/*
 * A packet in pieces, parsed where it lies when it is what bulk transfer sends: one DATA record,
 * not unsolicited, no trailer, every header in the first piece, and every piece that the UDP
 * checksum runs across but the last of even length. Then it checks all that wire_parse checks
 * and fills p (its body in the pieces, p->rest). Anything else sets *join and returns WIRE_OK:
 * the caller copies the pieces together and calls wire_parse. With defer, the body's part of
 * the checksum is left for later, as wire_parse_defer leaves it.
 */
enum wire_err wire_parse_pieces(const struct wire_pieces *w, struct wire_pkt *p, bool *join,
				bool defer);
/*
 * Calls put for each run of p's h.len bytes of body, in order, with where it goes (from dst on;
 * NULL throughout when dst is NULL) and where it lies; stops at put's first non-zero return, and
 * returns it.
 */
static inline int wire_body_each(uint8_t *dst, const struct wire_pkt *p,
				 int (*put)(void *arg, uint8_t *dst, const uint8_t *src, uint32_t n),
				 void *arg)
{
	uint32_t left, n, i, off;
	int err;

	if (!p->rest) {
		return put(arg, dst, p->body, p->h.len);
	}
	err = put(arg, dst, p->body, p->body_here);
	off = p->body_here;
	left = p->h.len - p->body_here;
	for (i = 1; !err && left && i < p->rest->n; i++) {
		n = p->rest->len[i] < left ? p->rest->len[i] : left;
		err = put(arg, dst ? dst + off : NULL, p->rest->at[i], n);
		off += n;
		left -= n;
	}
	return err;
}

static inline int wire_put_copy(void *arg, uint8_t *dst, const uint8_t *src, uint32_t n)
{
	(void)arg;
	memcpy(dst, src, n);
	return 0;
}

/* Copies p's h.len bytes of body to dst, from every piece they lie in. */
static inline void wire_body_copy(uint8_t *dst, const struct wire_pkt *p)
{
	(void)wire_body_each(dst, p, wire_put_copy, NULL);
}

/*
 * A deferred body's part of the checksum added (p->sum_due; true at once when none is due):
 * true when the frame's checksum holds. wire_body_copy_check copies the body to dst in the same
 * pass; when it says false, dst's h.len bytes hold what came, and must count for nothing.
 */
bool wire_body_check(struct wire_pkt *p);
bool wire_body_copy_check(uint8_t *dst, struct wire_pkt *p);

/* One's-complement sum helpers, exposed for tests. */
uint16_t wire_ip_csum(const void *hdr, size_t len);

#endif
