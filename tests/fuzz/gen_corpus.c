// SPDX-License-Identifier: Apache-2.0
/*
 * Writes the fuzzer's seed corpus: a few valid frames of every packet type and one bundle of
 * several records, over IPv4 and over IPv6 (names starting "ip6-"), built by wire.c itself, one
 * file each in the directory named on the command line. Run at build time, so the repository
 * holds no binary files. Each file is a mode byte (see fuzz_wire.c) and a frame; every frame is
 * written in both modes, plain and 802.1Q-tagged ("vlan-"). The larger DATA frames are written
 * once more with the mode bytes that cut them into 140-byte pieces ("pieces-"), long enough to
 * hold every header of either family behind a tag, so that wire_parse_pieces parses them where
 * they lie rather than sending them to be joined.
 */
#include <stdio.h>
#include <string.h>

#include "seed_file.h"
#include "wire.h"

static const struct wire_path seed_path4 = {
	.src_mac = { 0x02, 0, 0, 0, 0, 0x01 },
	.dst_mac = { 0x02, 0, 0, 0, 0, 0x02 },
	.src_ip = { .b = { [10] = 0xff, 0xff, 10, 0, 0, 1 } }, /* 10.0.0.1, IPv4 mapped */
	.dst_ip = { .b = { [10] = 0xff, 0xff, 10, 0, 0, 2 } },
	.src_port = 0x5cb7,
	.dst_port = 0x5db7,
};

static const struct wire_path seed_path6 = {
	.src_mac = { 0x02, 0, 0, 0, 0, 0x01 },
	.dst_mac = { 0x02, 0, 0, 0, 0, 0x02 },
	.ip6 = true,
	.src_ip = { .b = { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 } }, /* 2001:db8::1 */
	.dst_ip = { .b = { 0x20, 0x01, 0x0d, 0xb8, [15] = 2 } },
	.src_port = 0x5cb7,
	.dst_port = 0x5db7,
};

/* The mode bytes (raw, then with checksums fixed) that cut a frame into 140-byte pieces. */
#define PIECES_MODE 4

/* One family's seeds: where they go, the addresses they carry, what their names start with. */
struct seeds {
	const char *dir;
	const struct wire_path *path;
	const char *prefix; /* "" over IPv4, "ip6-" over IPv6 */
};

/* buf[0] is the fuzzer's mode byte; the Ethernet frame starts at buf + 1. */
static uint8_t buf[1 + HARP_ETH_HLEN + HARP_VLAN_HLEN + HARP_IP6_HLEN + HARP_UDP_HLEN +
		   HARP_HDR_LEN + 4096];

/* Writes the frame in buf + 1 with mode bytes mode (raw) and mode + 1 (checksums fixed). */
static int write_seed(const char *dir, const char *name, uint32_t frame_len, uint8_t mode)
{
	char mode_name[256];
	int i, err = 0;

	for (i = 0; i < 2; i++) {
		buf[0] = (uint8_t)(mode + i);
		if (seed_join(mode_name, sizeof(mode_name), name, "-", i ? "fixcsum" : "raw")) {
			return -1;
		}
		err |= seed_write(dir, mode_name, buf, frame_len + 1);
	}
	return err;
}

/* Writes the frame in buf + 1 under the family's name for it, and with pieces once more cut in
 * pieces ("pieces-"). */
static int write_modes(const struct seeds *s, const char *name, uint32_t len, bool pieces)
{
	char full[256];

	if (seed_join(full, sizeof(full), s->prefix, "", name)) {
		return -1;
	}
	if (write_seed(s->dir, full, len, 0)) {
		return -1;
	}
	if (pieces && (seed_join(full, sizeof(full), "pieces-", s->prefix, name) ||
		       write_seed(s->dir, full, len, PIECES_MODE))) {
		return -1;
	}
	return 0;
}

/* Checks the frame of len bytes in buf + 1 and writes it, plain and 802.1Q-tagged. */
static int seed_frame(const struct seeds *s, const char *name, uint32_t len, bool pieces)
{
	uint8_t *frame = buf + 1;
	char tagged[256];
	struct wire_pkt check;

	if (wire_parse(frame, len, &check) != WIRE_OK || check.ip6 != s->path->ip6) {
		fprintf(stderr, "gen_corpus: %s%s does not parse: %s\n", s->prefix, name,
			wire_err_name(wire_parse(frame, len, &check)));
		return -1;
	}
	if (write_modes(s, name, len, pieces)) {
		return -1;
	}
	memmove(frame + 16, frame + 12, len - 12);
	frame[12] = 0x81;
	frame[13] = 0x00;
	frame[14] = 0x00;
	frame[15] = 0x05; /* VLAN 5 */
	if (seed_join(tagged, sizeof(tagged), "vlan", "-", name)) {
		return -1;
	}
	return write_modes(s, tagged, len + HARP_VLAN_HLEN, pieces);
}

/* Builds one frame with body_len bytes of patterned body and writes it. */
static int seed(const struct seeds *s, const char *name, const struct harp_hdr *h,
		uint32_t body_len)
{
	uint8_t *frame = buf + 1;
	uint8_t *body = frame + wire_records_at(s->path->ip6) + HARP_HDR_LEN;
	uint32_t i;

	for (i = 0; i < body_len; i++) {
		body[i] = (uint8_t)(i * 31 + 1);
	}
	return seed_frame(s, name, wire_build(frame, s->path, h, body_len, 7),
			  h->type == HARP_PKT_DATA && body_len >= 1400);
}

/* A bundle as a sender makes one: the CTS of a receive, a small DATA, an ACK with holes. */
static int seed_bundle(const struct seeds *s, struct harp_hdr h)
{
	uint8_t *at = buf + 1 + wire_records_at(s->path->ip6);
	uint32_t used = 0;

	h.type = HARP_PKT_CTS;
	h.nbufs = 1;
	h.msg_len = 4096;
	h.len = 0;
	wire_put_record(at, &h);
	used += HARP_HDR_LEN;
	h.type = HARP_PKT_DATA;
	h.psn++;
	h.nbufs = 0;
	h.msg_len = h.len = 100;
	memset(at + used + HARP_HDR_LEN, 0x3c, h.len);
	wire_put_record(at + used, &h);
	used += HARP_HDR_LEN + h.len;
	h.type = HARP_PKT_ACK;
	h.psn = 0;
	h.msg_len = 0;
	h.len = 8;
	memset(at + used + HARP_HDR_LEN, 0xa5, h.len);
	wire_put_record(at + used, &h);
	used += HARP_HDR_LEN + h.len;
	return seed_frame(s, "bundle", wire_seal(buf + 1, s->path, used, 7, true), false);
}

/* DATA of several sizes, an empty message, and an unsolicited one. */
static int seed_data(const struct seeds *s, struct harp_hdr h)
{
	const uint16_t data_lens[] = { 1, 100, 1400, 4096 };
	char name[64];
	size_t i;
	int err = 0;

	h.type = HARP_PKT_DATA;
	for (i = 0; i < sizeof(data_lens) / sizeof(data_lens[0]); i++) {
		h.msg_len = 8192;
		h.offset = 8192 - data_lens[i];
		h.len = data_lens[i];
		snprintf(name, sizeof(name), "data-%u", (unsigned)data_lens[i]);
		err |= seed(s, name, &h, h.len);
	}
	h.msg_len = 0;
	h.offset = 0;
	h.len = 0;
	err |= seed(s, "data-empty", &h, 0);

	h.flags = HARP_DATA_F_DONE | HARP_DATA_F_UNSOL;
	h.msg_len = 100;
	h.len = 100;
	return err | seed(s, "data-unsolicited", &h, h.len);
}

/* Every other type, and a bundle. */
static int seed_control(const struct seeds *s, struct harp_hdr h)
{
	int err = 0;

	h.type = HARP_PKT_ACK;
	h.len = 64;
	h.ts_echo = 999;
	err |= seed(s, "ack", &h, 64);

	h.type = HARP_PKT_CTS;
	h.len = 0;
	h.buf_idx = 1;
	h.nbufs = 4;
	h.msg_len = 1 << 20;
	err |= seed(s, "cts", &h, 0);

	h.type = HARP_PKT_MSGERR;
	h.nbufs = 0;
	h.msg_len = 5u << 20;
	err |= seed(s, "msgerr", &h, 0);

	h.type = HARP_PKT_PROBE;
	h.msg_len = 0;
	h.rsn = 2;
	h.tag = 17;
	err |= seed(s, "probe", &h, 0);

	h.type = HARP_PKT_STEER;
	h.rsn = 0;
	h.tag = 0;
	err |= seed(s, "steer", &h, 0);

	h.type = HARP_PKT_PROBE;
	h.rsn = 4;
	h.tag = 9;
	return err | seed_bundle(s, h);
}

int main(int argc, char **argv)
{
	const struct harp_hdr h = {
		.version = HARP_WIRE_VERSION,
		.conn_id = 7,
		.token = 0x0123456789abcdefull,
		.psn = 100,
		.ack_psn = 50,
		.ts = 1000,
		.rsn = 3,
		.tag = 9,
	};
	struct seeds v4 = { .path = &seed_path4, .prefix = "" };
	struct seeds v6 = { .path = &seed_path6, .prefix = "ip6-" };
	int err;

	if (argc != 2) {
		fprintf(stderr, "usage: gen_corpus DIR\n");
		return 2;
	}
	v4.dir = v6.dir = argv[1];
	err = seed_data(&v4, h) | seed_control(&v4, h);
	err |= seed_data(&v6, h) | seed_control(&v6, h);
	return err ? 1 : 0;
}
