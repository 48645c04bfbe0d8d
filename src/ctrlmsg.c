// SPDX-License-Identifier: Apache-2.0
/*
 * The control messages' checkers (ctrlmsg.h). Each copies the bytes into its struct before it
 * reads a field, so that a buffer of any alignment will do, and reads no field the bytes do not
 * cover (the node agent's header is read from a message of any length, to name its version).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "agent.h"
#include "ctrlmsg.h"

void ctrlmsg_handle_build(uint8_t bytes[HARP_HANDLE_SIZE], const struct ctrlmsg_handle *h)
{
	struct handle_wire hw = {
		.magic = htonl(HANDLE_MAGIC),
		.version = htons(HANDLE_VERSION),
		.family = htons(wire_ip_is4(&h->ip) ? AF_INET : AF_INET6),
		.tcp_port = h->tcp_port,
		.nonce = h->nonce,
	};

	if (wire_ip_is4(&h->ip)) {
		hw.ipv4 = h->ip.w[3];
	} else {
		memcpy(hw.ipv6, h->ip.b, 16);
	}
	memset(bytes, 0, HARP_HANDLE_SIZE);
	memcpy(bytes, &hw, sizeof(hw));
}

/* An IPv6 address a peer may have: not unspecified, multicast, loopback or IPv4 mapped. */
static bool ip6_unicast(const uint8_t a[16])
{
	static const uint8_t zero[16], loop[16] = { [15] = 1 };
	union wire_ip ip;

	memcpy(ip.b, a, 16);
	return memcmp(a, zero, 16) && memcmp(a, loop, 16) && a[0] != 0xff && !wire_ip_is4(&ip);
}

/* The address a handle names, with the other family's field empty; false: none. */
static bool handle_address(const struct handle_wire *hw, union wire_ip *ip)
{
	static const uint8_t zero[16];

	if (ntohs(hw->family) == AF_INET && hw->ipv4 && !memcmp(hw->ipv6, zero, 16)) {
		*ip = wire_ip4(hw->ipv4);
		return true;
	}
	if (ntohs(hw->family) == AF_INET6 && !hw->ipv4 && ip6_unicast(hw->ipv6)) {
		memcpy(ip->b, hw->ipv6, 16);
		return true;
	}
	return false;
}

int ctrlmsg_handle_parse(const void *bytes, size_t len, struct ctrlmsg_handle *out, char *why,
			 size_t whylen)
{
	struct handle_wire hw;

	if (len < sizeof(hw)) {
		snprintf(why, whylen, "a handle of %zu bytes, shorter than a harp handle's %zu",
			 len, sizeof(hw));
		return -EINVAL;
	}
	memcpy(&hw, bytes, sizeof(hw));
	if (ntohl(hw.magic) != HANDLE_MAGIC) {
		snprintf(why, whylen,
			 "the handle is not a harp handle (magic 0x%08x, expected 0x%08x)",
			 ntohl(hw.magic), HANDLE_MAGIC);
		return -EINVAL;
	}
	if (ntohs(hw.version) != HANDLE_VERSION || !hw.tcp_port ||
	    !handle_address(&hw, &out->ip)) {
		snprintf(why, whylen, "unsupported harp handle (version %u, family %u, port %u)",
			 ntohs(hw.version), ntohs(hw.family), ntohs(hw.tcp_port));
		return -EINVAL;
	}
	out->tcp_port = hw.tcp_port;
	out->nonce = hw.nonce;
	return 0;
}

/* The hello's data address: of its family, that family's field alone filled. */
static bool hello_address(const struct hello *h)
{
	static const uint8_t zero[16];

	return h->family == 4 ? h->ipv4 && !memcmp(h->ipv6, zero, 16)
			      : h->family == 6 && !h->ipv4 && ip6_unicast(h->ipv6);
}

/*
 * The numbers the connection will run on: a data address, an MTU its family allows, an id, a
 * UDP range in bounds.
 */
static int hello_numbers(const struct hello *h, char *why, size_t whylen)
{
	unsigned int mtu = ntohs(h->mtu), port = ntohs(h->udp_port), count = ntohs(h->port_count);

	if (!hello_address(h)) {
		snprintf(why, whylen, "nonsense in hello (address family %u, or no address of it)",
			 h->family);
		return -EPROTO;
	}
	if (mtu < (h->family == 6 ? HELLO_MIN_MTU6 : HELLO_MIN_MTU) || !h->conn_id ||
	    port < 1024 || !count || port + count - 1 > 65535) {
		snprintf(why, whylen, "nonsense in hello (mtu %u, id %u, UDP ports %u+%u)", mtu,
			 ntohl(h->conn_id), port, count);
		return -EPROTO;
	}
	return 0;
}

/*
 * The errno a listener refuses with (control.c): those it sends, else ECONNREFUSED. Nothing a
 * peer says makes this side take a refusal for "try again" (EAGAIN) or for its own failure.
 */
static uint16_t refuse_errno_known(uint16_t e)
{
	switch (e) {
	case EKEYREJECTED: /* HARP_AUTH differs */
	case EPROTO:	   /* the request made no sense to it */
	case EINVAL:	   /* a handle of another listener */
	case EMFILE:	   /* it has HARP_CONNS_MAX connections */
	case ENOMEM:
	case EHOSTUNREACH: /* it finds no route back */
	case ENETUNREACH:
	case EXDEV:	   /* its route back leaves by another interface */
		return e;
	default:
		return ECONNREFUSED;
	}
}

int ctrlmsg_hello_check(const void *bytes, size_t len, enum hello_type want, uint64_t nonce,
			struct ctrlmsg_hello_view *view, char *why, size_t whylen)
{
	struct hello h;

	view->type = 0;
	view->refuse_errno = 0;
	if (len != sizeof(h)) {
		snprintf(why, whylen, "a hello of %zu bytes, not %zu", len, sizeof(h));
		return -EPROTO;
	}
	memcpy(&h, bytes, sizeof(h));
	if (ntohl(h.magic) != CHAN_MAGIC) {
		snprintf(why, whylen,
			 "the peer does not speak harp's control protocol (magic 0x%08x)",
			 ntohl(h.magic));
		return -EPROTO;
	}
	if (ntohs(h.version) != HELLO_VERSION) {
		snprintf(why, whylen, "the peer runs another version of harp (control protocol %u, "
			 "this side %u): run one harp release on every node",
			 ntohs(h.version), HELLO_VERSION);
		return -EPROTO;
	}
	view->type = ntohs(h.type);
	/* A refusal answers a request: only a connector waits for one, and it carries the
	 * listener's nonce, as the answer it replaces would. */
	if (view->type == HELLO_REFUSE && want == HELLO_OK && h.nonce == nonce) {
		view->refuse_errno = refuse_errno_known(ntohs(h.refuse_errno));
		snprintf(why, whylen, "the listener refused the connection: %s",
			 strerror(view->refuse_errno));
		return -(int)view->refuse_errno;
	}
	if (view->type == HELLO_REFUSE) {
		view->type = 0; /* not one this side takes: a protocol error like any other */
		snprintf(why, whylen, "a refusal where %s belongs",
			 want == HELLO_OK ? "an answer to this connection (wrong nonce)" : "a request");
		return -EPROTO;
	}
	if (view->type != want) {
		snprintf(why, whylen, "a hello of type %u where %u belongs", view->type,
			 (unsigned int)want);
		return -EPROTO;
	}
	if (want == HELLO_REQ && h.nonce != nonce) {
		snprintf(why, whylen,
			 "the connector used a handle of another listener (wrong nonce)");
		return -EINVAL;
	}
	return hello_numbers(&h, why, whylen);
}

int ctrlmsg_chan_check(const void *bytes, size_t len, struct ctrlmsg_chan *out, char *why,
		       size_t whylen)
{
	struct chan_msg m;

	if (len != sizeof(m)) {
		snprintf(why, whylen, "a control message of %zu bytes, not %zu", len, sizeof(m));
		return -EPROTO;
	}
	memcpy(&m, bytes, sizeof(m));
	out->type = ntohl(m.type);
	if (ntohl(m.magic) != CHAN_MAGIC ||
	    (out->type != CHAN_CLOSE && out->type != CHAN_PATH && out->type != CHAN_SILENT &&
	     out->type != CHAN_UNHEARD)) {
		snprintf(why, whylen, "unknown control message (magic 0x%08x type %u)",
			 ntohl(m.magic), out->type);
		return -EPROTO;
	}
	out->value = ntohl(m.value);
	out->round = ntohl(m.reserved);
	return 0;
}

int ctrlmsg_agent_check(const void *bytes, size_t len, char *why, size_t whylen)
{
	const size_t head = offsetof(struct harp_agent_msg, status);
	struct harp_agent_msg m = { 0 };

	memcpy(&m, bytes, len < sizeof(m) ? len : sizeof(m));
	if (len >= head && m.magic == HARP_AGENT_MAGIC && m.version != HARP_AGENT_VERSION) {
		/* every version begins with magic and version, whatever its size: name it */
		snprintf(why, whylen, "protocol version %u, and this side speaks %u", m.version,
			 HARP_AGENT_VERSION);
	} else if (len != sizeof(m)) {
		snprintf(why, whylen, "a message of %zu bytes, not %zu", len, sizeof(m));
	} else if (m.magic != HARP_AGENT_MAGIC) {
		snprintf(why, whylen, "not a harp agent message (magic 0x%08x)", m.magic);
	} else if (!m.op || m.op >= HARP_AGENT_OP_END) {
		snprintf(why, whylen, "unknown op %u", m.op);
	} else if (!memchr(m.ifname, '\0', sizeof(m.ifname)) ||
		   !memchr(m.text, '\0', sizeof(m.text))) {
		snprintf(why, whylen, "an unterminated string");
	} else {
		return 0;
	}
	return -EBADMSG;
}
