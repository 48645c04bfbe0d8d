// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the checkers of what arrives on harp's control sockets: the set-up hellos
 * (either side's check), a running connection's control messages and the node agent's messages.
 * The first input byte picks which (fuzz_ctrl.h); the rest is the message, passed where it lies:
 * libFuzzer's heap buffer ends right after it, so ASan reports any read past its length, and it
 * starts one byte in, so UBSan reports a checker that reads fields in place, misaligned.
 *
 * What a checker accepts must satisfy what the code after it relies on: a hello's numbers within
 * the bounds the connection is set up with, a known control message that reads back as it came,
 * an agent message whose strings end inside their fields. What it refuses must come with a reason,
 * and an errno the caller expects.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "ctrlmsg.h"
#include "fuzz_check.h"
#include "fuzz_ctrl.h"

static void check_hello_accepted(const struct hello *h, enum hello_type want)
{
	unsigned int port = ntohs(h->udp_port), count = ntohs(h->port_count);

	CHECK(ntohl(h->magic) == CHAN_MAGIC && ntohs(h->version) == HELLO_VERSION);
	CHECK(ntohs(h->type) == want);
	CHECK(want != HELLO_REQ || h->nonce == FUZZ_CTRL_NONCE);
	CHECK(ntohs(h->mtu) >= HELLO_MIN_MTU && h->conn_id);
	/* the peer's UDP range, which the probes walk: inside the ports that exist */
	CHECK(port >= 1024 && count >= 1 && port + count - 1 <= 65535);
}

static void fuzz_hello(const uint8_t *msg, size_t len, enum hello_type want)
{
	struct ctrlmsg_hello_view view;
	struct hello h;
	char why[192];
	int err;

	memset(why, 'x', sizeof(why));
	err = ctrlmsg_hello_check(msg, len, want, FUZZ_CTRL_NONCE, &view, why, sizeof(why));
	if (!err) {
		CHECK(len == sizeof(h) && view.type == want);
		memcpy(&h, msg, sizeof(h));
		check_hello_accepted(&h, want);
		return;
	}
	check_why(why, sizeof(why));
	if (view.type == HELLO_REFUSE) {
		/* taken only by a connector, with the listener's nonce; the listener's errno if it
		 * is one a listener sends, so the connector fails as the listener did; never one
		 * that would make it wait on (EAGAIN) */
		memcpy(&h, msg, sizeof(h));
		CHECK(want == HELLO_OK && h.nonce == FUZZ_CTRL_NONCE);
		CHECK(err == -(int)view.refuse_errno && view.refuse_errno != EAGAIN);
		CHECK(ntohs(h.refuse_errno) == view.refuse_errno ||
		      view.refuse_errno == ECONNREFUSED);
		return;
	}
	/* a wrong nonce is the one -EINVAL, and only the listener checks it */
	CHECK(err == -EPROTO || (err == -EINVAL && want == HELLO_REQ && view.type == want));
}

static void fuzz_chan(const uint8_t *msg, size_t len)
{
	struct ctrlmsg_chan out;
	struct chan_msg m;
	char why[96];
	int err;

	memset(why, 'x', sizeof(why));
	err = ctrlmsg_chan_check(msg, len, &out, why, sizeof(why));
	if (err) {
		CHECK(err == -EPROTO);
		check_why(why, sizeof(why));
		return;
	}
	CHECK(len == sizeof(m));
	CHECK(out.type == CHAN_CLOSE || out.type == CHAN_PATH || out.type == CHAN_SILENT ||
	      out.type == CHAN_UNHEARD);
	/* what chan.c acts on is all the message says: sent again, it reads the same */
	m = (struct chan_msg){
		.magic = htonl(CHAN_MAGIC),
		.type = htonl(out.type),
		.value = htonl(out.value),
		.reserved = htonl(out.round),
	};
	CHECK(memcmp(&m, msg, sizeof(m)) == 0);
}

static void fuzz_agent(const uint8_t *msg, size_t len)
{
	struct harp_agent_msg m;
	char why[128];
	int err;

	memset(why, 'x', sizeof(why));
	err = ctrlmsg_agent_check(msg, len, why, sizeof(why));
	if (err) {
		CHECK(err == -EBADMSG);
		check_why(why, sizeof(why));
		return;
	}
	CHECK(len == sizeof(m));
	memcpy(&m, msg, sizeof(m));
	CHECK(m.magic == HARP_AGENT_MAGIC && m.version == HARP_AGENT_VERSION);
	CHECK(m.op >= HARP_AGENT_HELLO && m.op < HARP_AGENT_OP_END);
	/* the agent prints both and opens pins by ifname: they must end inside their fields */
	CHECK(strnlen(m.ifname, sizeof(m.ifname)) < sizeof(m.ifname));
	CHECK(strnlen(m.text, sizeof(m.text)) < sizeof(m.text));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1) {
		return 0;
	}
	switch (data[0] % FUZZ_CTRL_KINDS) {
	case FUZZ_CTRL_HELLO_REQ:
		fuzz_hello(data + 1, size - 1, HELLO_REQ);
		break;
	case FUZZ_CTRL_HELLO_OK:
		fuzz_hello(data + 1, size - 1, HELLO_OK);
		break;
	case FUZZ_CTRL_CHAN:
		fuzz_chan(data + 1, size - 1);
		break;
	default:
		fuzz_agent(data + 1, size - 1);
		break;
	}
	return 0;
}
