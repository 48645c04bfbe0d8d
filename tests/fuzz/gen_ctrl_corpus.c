// SPDX-License-Identifier: Apache-2.0
/*
 * Writes the seed corpora of fuzz_handle and fuzz_ctrl, one message a file, into the two
 * directories named on the command line: handles as harp_listen writes them; hellos of each type,
 * with and without HARP_AUTH's flags and key; both control messages; and a node agent message of
 * every op. Run at build time, so the repository holds no binary files. Each seed is first put to
 * the checker it feeds, so a seed the protocol has left behind fails the build instead of seeding
 * nothing.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "ctrlmsg.h"
#include "fuzz_ctrl.h"
#include "seed_file.h"

/* buf[0] is fuzz_ctrl's kind byte; the message starts at buf + 1. */
static uint8_t buf[1 + sizeof(struct harp_agent_msg)];

static int check(enum fuzz_ctrl_kind kind, size_t len, char *why, size_t whylen)
{
	struct ctrlmsg_hello_view view;
	struct ctrlmsg_chan msg;

	switch (kind) {
	case FUZZ_CTRL_HELLO_REQ:
		return ctrlmsg_hello_check(buf + 1, len, HELLO_REQ, FUZZ_CTRL_NONCE, &view, why,
					   whylen);
	case FUZZ_CTRL_HELLO_OK:
		return ctrlmsg_hello_check(buf + 1, len, HELLO_OK, FUZZ_CTRL_NONCE, &view, why,
					   whylen);
	case FUZZ_CTRL_CHAN:
		return ctrlmsg_chan_check(buf + 1, len, &msg, why, whylen);
	default:
		return ctrlmsg_agent_check(buf + 1, len, why, whylen);
	}
}

/* Writes the len bytes of message in buf + 1, with kind, once its checker answers want_err. */
static int seed(const char *dir, const char *name, enum fuzz_ctrl_kind kind, size_t len,
		int want_err)
{
	char why[256] = "";
	int err;

	buf[0] = (uint8_t)kind;
	err = check(kind, len, why, sizeof(why));
	if (err != want_err) {
		fprintf(stderr, "gen_ctrl_corpus: seed %s: checked %d, not %d (%s)\n", name, err,
			want_err, why);
		return -1;
	}
	return seed_write(dir, name, buf, len + 1);
}

/* A handle naming ip, whole and as far as harp_connect reads it, as seeds name and name-used. */
static int seed_handle(const char *dir, const char *name, union wire_ip ip)
{
	const struct ctrlmsg_handle h = {
		.ip = ip,
		.tcp_port = htons(40123),
		.nonce = FUZZ_CTRL_NONCE,
	};
	uint8_t bytes[HARP_HANDLE_SIZE];
	struct ctrlmsg_handle check;
	char why[128], used[64];

	ctrlmsg_handle_build(bytes, &h);
	if (ctrlmsg_handle_parse(bytes, sizeof(bytes), &check, why, sizeof(why))) {
		fprintf(stderr, "gen_ctrl_corpus: the handle seed %s does not parse: %s\n", name,
			why);
		return -1;
	}
	snprintf(used, sizeof(used), "%s-used", name);
	return seed_write(dir, name, bytes, sizeof(bytes)) |
	       seed_write(dir, used, bytes, HARP_HANDLE_USED);
}

static int seed_handles(const char *dir)
{
	/* 10.0.0.1; 2001:2::1; fe80::1 (link-local) */
	const union wire_ip v6 = { .b = { 0x20, 0x01, 0, 2, [15] = 1 } };
	const union wire_ip link = { .b = { 0xfe, 0x80, [15] = 1 } };

	return seed_handle(dir, "handle", wire_ip4(htonl(0x0a000001))) |
	       seed_handle(dir, "handle6", v6) | seed_handle(dir, "handle6-link", link);
}

/* A hello as hello_fill in control.c makes one, into buf + 1; ip6: with an IPv6 address. */
static size_t hello_at_buf_of(enum hello_type type, uint8_t auth, uint16_t refuse_errno, bool ip6)
{
	struct hello h = {
		.magic = htonl(CHAN_MAGIC),
		.version = htons(HELLO_VERSION),
		.type = htons(type),
		.nonce = FUZZ_CTRL_NONCE,
		.token = 0x1122334455667788ull,
		.conn_id = htonl(7),
		.ipv4 = htonl(0x0a000002),
		.udp_port = htons(47000),
		.queue = htons(type == HELLO_REQ ? 4 : 1),
		.mtu = htons(1500),
		.refuse_errno = htons(refuse_errno),
		.port_count = htons(16),
		.auth = auth,
	};
	size_t i;

	for (i = 0; (auth & AUTH_F_KEY) && i < sizeof(h.auth_pk); i++) {
		h.auth_pk[i] = (uint8_t)(i * 37 + 9);
	}
	h.family = ip6 ? 6 : 4;
	if (ip6) {
		static const uint8_t addr[16] = { 0x20, 0x01, 0, 2, [15] = 2 }; /* 2001:2::2 */

		h.ipv4 = 0;
		memcpy(h.ipv6, addr, 16);
	}
	memcpy(buf + 1, &h, sizeof(h));
	return sizeof(h);
}

static size_t hello_at_buf(enum hello_type type, uint8_t auth, uint16_t refuse_errno)
{
	return hello_at_buf_of(type, auth, refuse_errno, false);
}

static int seed_hellos(const char *dir)
{
	const uint8_t auth = AUTH_F_WANT | AUTH_F_KEY;
	const enum fuzz_ctrl_kind req = FUZZ_CTRL_HELLO_REQ, ok = FUZZ_CTRL_HELLO_OK;
	int err = 0;

	err |= seed(dir, "hello-req", req, hello_at_buf(HELLO_REQ, 0, 0), 0);
	err |= seed(dir, "hello-req-auth", req, hello_at_buf(HELLO_REQ, auth, 0), 0);
	err |= seed(dir, "hello-req-auth-aes", req,
		    hello_at_buf(HELLO_REQ, auth | AUTH_F_AES, 0), 0);
	err |= seed(dir, "hello-req6", req, hello_at_buf_of(HELLO_REQ, 0, 0, true), 0);
	err |= seed(dir, "hello-ok6", ok, hello_at_buf_of(HELLO_OK, auth, 0, true), 0);
	err |= seed(dir, "hello-ok", ok, hello_at_buf(HELLO_OK, 0, 0), 0);
	err |= seed(dir, "hello-ok-auth", ok, hello_at_buf(HELLO_OK, auth, 0), 0);
	err |= seed(dir, "hello-ok-auth-aes", ok, hello_at_buf(HELLO_OK, auth | AUTH_F_AES, 0),
		    0);
	/* the refusals a listener sends: HARP_AUTH differs, no route, none said */
	err |= seed(dir, "hello-refuse-auth", ok, hello_at_buf(HELLO_REFUSE, 0, EKEYREJECTED),
		    -EKEYREJECTED);
	err |= seed(dir, "hello-refuse-route", ok, hello_at_buf(HELLO_REFUSE, 0, EHOSTUNREACH),
		    -EHOSTUNREACH);
	err |= seed(dir, "hello-refuse-none", ok, hello_at_buf(HELLO_REFUSE, 0, 0),
		    -ECONNREFUSED);
	/* ... and what a stranger sends: "try again", which would keep a set-up waiting; a
	 * refusal sent to the listener, where none belongs */
	err |= seed(dir, "hello-refuse-eagain", ok, hello_at_buf(HELLO_REFUSE, 0, EAGAIN),
		    -ECONNREFUSED);
	err |= seed(dir, "hello-refuse-to-listener", req, hello_at_buf(HELLO_REFUSE, 0, EAGAIN),
		    -EPROTO);
	return err;
}

static int seed_chan(const char *dir, const char *name, uint32_t type, uint32_t value,
		     uint32_t reserved)
{
	const struct chan_msg m = {
		.magic = htonl(CHAN_MAGIC),
		.type = htonl(type),
		.value = htonl(value),
		.reserved = htonl(reserved),
	};

	memcpy(buf + 1, &m, sizeof(m));
	return seed(dir, name, FUZZ_CTRL_CHAN, sizeof(m), 0);
}

/* A message of op with what each op's request carries; an answer when status is set. */
static int seed_agent(const char *dir, const char *name, enum harp_agent_op op, int32_t status)
{
	struct harp_agent_msg m = {
		.magic = HARP_AGENT_MAGIC,
		.version = HARP_AGENT_VERSION,
		.op = (uint16_t)op,
		.status = status,
		.queue = 1,
		.conn_id = 7,
		.token = 0x1122334455667788ull,
		.owner = { .pid = 1234, .pidns = 4026531836u, .comm = "harp-xfer" },
	};

	snprintf(m.ifname, sizeof(m.ifname), "veth0");
	if (status) {
		snprintf(m.text, sizeof(m.text), "queue 1 of veth0 is held by pid 1234");
	}
	if (op == HARP_AGENT_HELLO) {
		m.port_lo = 47000;
		m.port_hi = 47015;
		m.attach_id = 42;
		m.xdp_mode = HARP_AGENT_XDP_NATIVE;
	}
	memcpy(buf + 1, &m, sizeof(m));
	return seed(dir, name, FUZZ_CTRL_AGENT, sizeof(m), 0);
}

static int seed_agents(const char *dir)
{
	char name[32];
	int op, err = 0;

	for (op = HARP_AGENT_HELLO; op < HARP_AGENT_OP_END; op++) {
		snprintf(name, sizeof(name), "agent-op%d", op);
		err |= seed_agent(dir, name, (enum harp_agent_op)op, 0);
	}
	err |= seed_agent(dir, "agent-enter-refused", HARP_AGENT_ENTER, -EBUSY);
	return err;
}

int main(int argc, char **argv)
{
	int err = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: gen_ctrl_corpus HANDLE_DIR CTRL_DIR\n");
		return 2;
	}
	err |= seed_handles(argv[1]);
	err |= seed_hellos(argv[2]);
	err |= seed_chan(argv[2], "chan-close", CHAN_CLOSE, 123456, 0);
	err |= seed_chan(argv[2], "chan-path", CHAN_PATH, 3, 2);
	err |= seed_chan(argv[2], "chan-silent", CHAN_SILENT, 2250, 0);
	err |= seed_chan(argv[2], "chan-unheard", CHAN_UNHEARD, 140, 0);
	err |= seed_agents(argv[2]);
	return err ? 1 : 0;
}
