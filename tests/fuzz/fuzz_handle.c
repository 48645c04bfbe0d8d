// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for ctrlmsg_handle_parse: a handle comes from another host by any means the
 * application likes, so harp_connect must take whatever bytes it is given. libFuzzer hands each
 * input in a heap buffer of exactly its size, so ASan reports any read past it.
 *
 * A handle the parser accepts must name a listener harp could connect to (an address of the family
 * it names, the other family's field empty, and a port), and building a handle from what was
 * parsed must give back the same bytes, save the reserved field and what lies after the handle.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ctrlmsg.h"
#include "fuzz_check.h"

static void check_accepted(const uint8_t *data, const struct ctrlmsg_handle *h)
{
	uint8_t built[HARP_HANDLE_SIZE];
	struct ctrlmsg_handle again;
	struct handle_wire hw;
	char why[128];
	size_t i;

	memcpy(&hw, data, sizeof(hw));
	CHECK(ntohl(hw.magic) == HANDLE_MAGIC && ntohs(hw.version) == HANDLE_VERSION);
	CHECK(h->tcp_port == hw.tcp_port && h->nonce == hw.nonce);
	if (ntohs(hw.family) == AF_INET) {
		CHECK(wire_ip_is4(&h->ip) && h->ip.w[3] && h->ip.w[3] == hw.ipv4);
	} else {
		CHECK(ntohs(hw.family) == AF_INET6 && !hw.ipv4);
		CHECK(!wire_ip_is4(&h->ip) && !memcmp(h->ip.b, hw.ipv6, 16));
		CHECK(h->ip.b[0] != 0xff); /* never multicast */
	}
	CHECK(h->tcp_port);

	ctrlmsg_handle_build(built, h);
	CHECK(memcmp(built, data, offsetof(struct handle_wire, reserved)) == 0);
	i = offsetof(struct handle_wire, nonce);
	CHECK(memcmp(built + i, data + i, sizeof(hw) - i) == 0);
	for (i = sizeof(hw); i < sizeof(built); i++) {
		CHECK(built[i] == 0);
	}
	CHECK(ctrlmsg_handle_parse(built, sizeof(built), &again, why, sizeof(why)) == 0);
	CHECK(wire_ip_eq(&again.ip, &h->ip) && again.tcp_port == h->tcp_port &&
	      again.nonce == h->nonce);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctrlmsg_handle h;
	char why[128];
	int err;

	memset(why, 'x', sizeof(why)); /* so that an unterminated why shows */
	err = ctrlmsg_handle_parse(data, size, &h, why, sizeof(why));
	if (err) {
		CHECK(err == -EINVAL);
		check_why(why, sizeof(why));
		return 0;
	}
	CHECK(size >= sizeof(struct handle_wire));
	check_accepted(data, &h);
	return 0;
}
