// SPDX-License-Identifier: Apache-2.0
/*
 * Writes the fuzzer's seed corpus: a few valid frames of every packet type and one bundle of
 * several records, built by wire.c itself, one file each in the directory named on the command
 * line. Run at build time, so the repository holds no binary files. Each file is a mode byte (see
 * fuzz_wire.c) and a frame; every frame is written in both modes, plain and 802.1Q-tagged.
 */
#include <stdio.h>
#include <string.h>

#include "seed_file.h"
#include "wire.h"

static const struct wire_path seed_path = {
	.src_mac = { 0x02, 0, 0, 0, 0, 0x01 },
	.dst_mac = { 0x02, 0, 0, 0, 0, 0x02 },
	.src_ip = { .b = { [10] = 0xff, 0xff, 10, 0, 0, 1 } }, /* 10.0.0.1, IPv4 mapped */
	.dst_ip = { .b = { [10] = 0xff, 0xff, 10, 0, 0, 2 } },
	.src_port = 0x5cb7,
	.dst_port = 0x5db7,
};

/* buf[0] is the fuzzer's mode byte; the Ethernet frame starts at buf + 1. */
static uint8_t buf[1 + HARP_FRAME_OVERHEAD + 4096 + HARP_VLAN_HLEN];

/* Writes the frame in buf + 1 once per fuzzer mode. */
static int write_seed(const char *dir, const char *name, uint32_t frame_len)
{
	char mode_name[256];
	int mode, err = 0;

	for (mode = 0; mode < 2; mode++) {
		buf[0] = (uint8_t)mode;
		if (seed_join(mode_name, sizeof(mode_name), name, "-", mode ? "fixcsum" : "raw")) {
			return -1;
		}
		err |= seed_write(dir, mode_name, buf, frame_len + 1);
	}
	return err;
}

/* Checks the frame of len bytes in buf + 1 and writes it, plain and 802.1Q-tagged. */
static int seed_frame(const char *dir, const char *name, uint32_t len)
{
	uint8_t *frame = buf + 1;
	char tagged[256];
	struct wire_pkt check;

	if (wire_parse(frame, len, &check) != WIRE_OK) {
		fprintf(stderr, "gen_corpus: %s does not parse: %s\n", name,
			wire_err_name(wire_parse(frame, len, &check)));
		return -1;
	}
	if (write_seed(dir, name, len)) {
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
	return write_seed(dir, tagged, len + HARP_VLAN_HLEN);
}

/* Builds one frame with body_len bytes of patterned body and writes it. */
static int seed(const char *dir, const char *name, const struct harp_hdr *h, uint32_t body_len)
{
	uint8_t *frame = buf + 1;
	uint32_t i;

	for (i = 0; i < body_len; i++) {
		frame[HARP_FRAME_OVERHEAD + i] = (uint8_t)(i * 31 + 1);
	}
	return seed_frame(dir, name, wire_build(frame, &seed_path, h, body_len, 7));
}

/* A bundle as a sender makes one: the CTS of a receive, a small DATA, an ACK with holes. */
static int seed_bundle(const char *dir, struct harp_hdr h)
{
	uint8_t *at = buf + 1 + HARP_FRAME_OVERHEAD - HARP_HDR_LEN;
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
	return seed_frame(dir, "bundle", wire_seal(buf + 1, &seed_path, used, 7, true));
}

int main(int argc, char **argv)
{
	struct harp_hdr h = {
		.version = HARP_WIRE_VERSION,
		.conn_id = 7,
		.token = 0x0123456789abcdefull,
		.psn = 100,
		.ack_psn = 50,
		.ts = 1000,
		.rsn = 3,
		.tag = 9,
	};
	const uint16_t data_lens[] = { 1, 100, 1400, 4096 };
	char name[64];
	size_t i;
	int err = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: gen_corpus DIR\n");
		return 2;
	}
	h.type = HARP_PKT_DATA;
	for (i = 0; i < sizeof(data_lens) / sizeof(data_lens[0]); i++) {
		h.msg_len = 8192;
		h.offset = 8192 - data_lens[i];
		h.len = data_lens[i];
		snprintf(name, sizeof(name), "data-%u", (unsigned)data_lens[i]);
		err |= seed(argv[1], name, &h, h.len);
	}
	h.msg_len = 0;
	h.offset = 0;
	h.len = 0;
	err |= seed(argv[1], "data-empty", &h, 0);

	h.flags = HARP_DATA_F_DONE | HARP_DATA_F_UNSOL;
	h.msg_len = 100;
	h.len = 100;
	err |= seed(argv[1], "data-unsolicited", &h, h.len);
	h.flags = 0;
	h.msg_len = 0;
	h.len = 0;

	h.type = HARP_PKT_ACK;
	h.len = 64;
	h.ts_echo = 999;
	err |= seed(argv[1], "ack", &h, 64);

	h.type = HARP_PKT_CTS;
	h.len = 0;
	h.buf_idx = 1;
	h.nbufs = 4;
	h.msg_len = 1 << 20;
	err |= seed(argv[1], "cts", &h, 0);

	h.type = HARP_PKT_MSGERR;
	h.nbufs = 0;
	h.msg_len = 5u << 20;
	err |= seed(argv[1], "msgerr", &h, 0);

	h.type = HARP_PKT_PROBE;
	h.msg_len = 0;
	h.rsn = 2;
	h.tag = 17;
	err |= seed(argv[1], "probe", &h, 0);

	h.type = HARP_PKT_STEER;
	h.rsn = 0;
	h.tag = 0;
	err |= seed(argv[1], "steer", &h, 0);
	h.type = HARP_PKT_PROBE;

	h.rsn = 4;
	h.tag = 9;
	err |= seed_bundle(argv[1], h);
	return err ? 1 : 0;
}
