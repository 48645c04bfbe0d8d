// SPDX-License-Identifier: Apache-2.0
/*
 * harp's XDP steering program, run by the kernel on crafted frames with BPF_PROG_TEST_RUN.
 *
 * The test moves itself into a private network namespace (unshare(CLONE_NEWNET)) and makes a veth
 * pair there with 65 queues, so it can name real rx queues in the test run's context (the kernel
 * refuses an rx_queue_index the ingress device does not have) and bind real AF_XDP sockets to
 * them. Everything it creates goes away with the process.
 *
 * How the kernel reports a redirect: a plain test run executes the program and hands back its
 * return value, but performs no redirect; XDP_REDIRECT there means bpf_redirect_map() found a
 * socket in the XSKMAP at that queue. To see frames really arrive (IPv4, IPv6, 802.1Q IPv6), or
 * one refused not arrive, a few runs use BPF_F_TEST_XDP_LIVE_FRAMES, where the kernel does carry
 * out the verdict. Live runs present the frame on rx queue 0 of the ingress device whatever the
 * context says, so the live check uses a socket bound to queue 0; the plain runs use queue 1
 * (socket bound), 2 (none bound) and 64 (past the map).
 *
 * IPv6 frames carry whatever chain of extension headers their shape lists: UDP to harp's ports
 * behind one is refused (dropped), and whatever the program's walk cannot follow is passed.
 *
 * Every run checks that exactly one counter moved (a probe moves the probe counter beside its
 * verdict's), and that the frame comes back unchanged; the last test checks the per-CPU sums
 * against the tally of every verdict expected.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* unshare() */
#endif
#include <endian.h>
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "harp_shared.h"
#include "harp_xdp.skel.h"

#define PORT_LO 47000
#define PORT_HI 47063
#define VETH_NAME "harpt0"
#define VETH_PEER "harpt1"
#define VETH_QUEUES 65 /* one more than the XSKMAP holds */

#define Q_LIVE 0   /* socket bound; used by the live-frames run */
#define Q_SOCKET 1 /* socket bound and in the map */
#define Q_EMPTY 2  /* no socket in the map */
#define Q_BEYOND 64

/* Offsets of the headers in an untagged frame. */
#define OFF_L3 14
#define OFF_L4_4 (OFF_L3 + 20)
#define OFF_L4_6 (OFF_L3 + 40)

#define XSK_RING 4
#define XSK_FRAME 4096

#define ETH_P_IP4 0x0800
#define ETH_P_IP6 0x86dd
#define ETH_P_ARP_ 0x0806
#define ETH_P_VLAN 0x8100
#define ETH_P_QINQ 0x88a8

/* An AF_XDP socket in copy mode with its own small UMEM; only the fill and rx rings are used. */
struct test_xsk {
	int fd;
	uint8_t *umem;
	uint8_t *fill, *rx;
	size_t fill_len, rx_len;
	struct xdp_mmap_offsets off;
};

static struct {
	struct harp_xdp *skel;
	int prog_fd, xsks_fd, counters_fd, config_fd;
	int ifindex;
	int ncpus;
	struct test_xsk xsk_live, xsk_q1;
	uint64_t expect[HARP_XDP_COUNTER_MAX]; /* tally of every counter a run should have bumped */
} env;

/* ---- network namespace and veth -------------------------------------------------------------- */

static struct rtattr *nl_put(struct nlmsghdr *n, unsigned short type, const void *data,
			     size_t len)
{
	struct rtattr *rta = (struct rtattr *)((uint8_t *)n + NLMSG_ALIGN(n->nlmsg_len));

	rta->rta_type = type;
	rta->rta_len = (unsigned short)RTA_LENGTH(len);
	if (len) {
		memcpy(RTA_DATA(rta), data, len);
	}
	n->nlmsg_len = NLMSG_ALIGN(n->nlmsg_len) + RTA_ALIGN(rta->rta_len);
	return rta;
}

static void nl_nest_end(struct nlmsghdr *n, struct rtattr *nest)
{
	nest->rta_len = (unsigned short)((uint8_t *)n + n->nlmsg_len - (uint8_t *)nest);
}

static void nl_put_link(struct nlmsghdr *n, const char *name, uint32_t queues)
{
	nl_put(n, IFLA_IFNAME, name, strlen(name) + 1);
	nl_put(n, IFLA_NUM_TX_QUEUES, &queues, sizeof(queues));
	nl_put(n, IFLA_NUM_RX_QUEUES, &queues, sizeof(queues));
}

/* ip link add NAME numtxqueues Q numrxqueues Q type veth peer name PEER (same queues). */
static int veth_create(const char *name, const char *peer, uint32_t queues)
{
	union {
		struct nlmsghdr n;
		uint8_t buf[1024];
	} req = { 0 };
	union {
		struct nlmsghdr n;
		uint8_t buf[1024];
	} ans;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	struct rtattr *linkinfo, *data, *peer_info;
	struct nlmsgerr *ack;
	ssize_t got;
	int fd, err;

	req.n.nlmsg_len = NLMSG_LENGTH(sizeof(ifi));
	req.n.nlmsg_type = RTM_NEWLINK;
	req.n.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
	memcpy(NLMSG_DATA(&req.n), &ifi, sizeof(ifi));
	nl_put_link(&req.n, name, queues);
	linkinfo = nl_put(&req.n, IFLA_LINKINFO, NULL, 0);
	nl_put(&req.n, IFLA_INFO_KIND, "veth", 5);
	data = nl_put(&req.n, IFLA_INFO_DATA, NULL, 0);
	peer_info = nl_put(&req.n, VETH_INFO_PEER, &ifi, sizeof(ifi));
	nl_put_link(&req.n, peer, queues);
	nl_nest_end(&req.n, peer_info);
	nl_nest_end(&req.n, data);
	nl_nest_end(&req.n, linkinfo);

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0) {
		return -errno;
	}
	if (sendto(fd, &req, req.n.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
		err = -errno;
		goto close_fd;
	}
	got = recv(fd, &ans, sizeof(ans), 0);
	if (got < 0) {
		err = -errno;
		goto close_fd;
	}
	if (!NLMSG_OK(&ans.n, (size_t)got) || ans.n.nlmsg_type != NLMSG_ERROR) {
		err = -EPROTO;
		goto close_fd;
	}
	ack = NLMSG_DATA(&ans.n);
	err = ack->error; /* 0, or a negative errno */
close_fd:
	close(fd);
	return err;
}

/* ---- AF_XDP ---------------------------------------------------------------------------------- */

static int xsk_open(struct test_xsk *x, int ifindex, uint32_t queue)
{
	struct xdp_umem_reg reg = { 0 };
	struct sockaddr_xdp sxdp = { 0 };
	socklen_t optlen = sizeof(x->off);
	int ring = XSK_RING;
	uint64_t *fill_addrs;
	uint32_t i;

	x->umem = mmap(NULL, XSK_RING * XSK_FRAME, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (x->umem == MAP_FAILED) {
		return -errno;
	}
	x->fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (x->fd < 0) {
		return -errno;
	}
	reg.addr = (uintptr_t)x->umem;
	reg.len = XSK_RING * XSK_FRAME;
	reg.chunk_size = XSK_FRAME;
	if (setsockopt(x->fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof(reg)) ||
	    setsockopt(x->fd, SOL_XDP, XDP_UMEM_FILL_RING, &ring, sizeof(ring)) ||
	    setsockopt(x->fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &ring, sizeof(ring)) ||
	    setsockopt(x->fd, SOL_XDP, XDP_RX_RING, &ring, sizeof(ring)) ||
	    getsockopt(x->fd, SOL_XDP, XDP_MMAP_OFFSETS, &x->off, &optlen)) {
		return -errno;
	}
	x->fill_len = x->off.fr.desc + XSK_RING * sizeof(uint64_t);
	x->fill = mmap(NULL, x->fill_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, x->fd,
		       XDP_UMEM_PGOFF_FILL_RING);
	if (x->fill == MAP_FAILED) {
		return -errno;
	}
	x->rx_len = x->off.rx.desc + XSK_RING * sizeof(struct xdp_desc);
	x->rx = mmap(NULL, x->rx_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, x->fd,
		     XDP_PGOFF_RX_RING);
	if (x->rx == MAP_FAILED) {
		return -errno;
	}
	fill_addrs = (uint64_t *)(x->fill + x->off.fr.desc);
	for (i = 0; i < XSK_RING; i++) {
		fill_addrs[i] = (uint64_t)i * XSK_FRAME;
	}
	/* Release: the kernel must see the addresses before the producer index that covers them. */
	__atomic_store_n((uint32_t *)(x->fill + x->off.fr.producer), XSK_RING, __ATOMIC_RELEASE);

	sxdp.sxdp_family = AF_XDP;
	sxdp.sxdp_ifindex = (uint32_t)ifindex;
	sxdp.sxdp_queue_id = queue;
	sxdp.sxdp_flags = XDP_COPY; /* veth has no zero-copy */
	if (bind(x->fd, (struct sockaddr *)&sxdp, sizeof(sxdp))) {
		return -errno;
	}
	return 0;
}

static void xsk_close(struct test_xsk *x)
{
	if (x->rx && x->rx != MAP_FAILED) {
		munmap(x->rx, x->rx_len);
	}
	if (x->fill && x->fill != MAP_FAILED) {
		munmap(x->fill, x->fill_len);
	}
	if (x->fd > 0) {
		close(x->fd);
	}
	if (x->umem && x->umem != MAP_FAILED) {
		munmap(x->umem, XSK_RING * XSK_FRAME);
	}
}

/* ---- frames ---------------------------------------------------------------------------------- */

enum l3_kind { L3_IP4, L3_IP6, L3_ARP, L3_RAW };

/* What a crafted frame looks like; zero fields mean the plain harp case. */
struct shape {
	int vlans;	  /* 802.1Q tags in front of the L3 header */
	uint16_t outer;	  /* ethertype of the first tag instead of 802.1Q (QinQ) */
	enum l3_kind l3;
	uint16_t raw_type; /* L3_RAW: the ethertype */
	uint8_t l4;	   /* IP protocol / next header; 0 means UDP */
	uint16_t dport;
	uint16_t frag;	  /* IPv4 flags and fragment offset, host order */
	uint8_t ihl;	  /* 0 means 5 */
	uint8_t version;  /* 0 means the right one */
	uint8_t exts;	  /* IPv6: extension headers before the L4 header, their kinds in ext */
	uint8_t ext[HARP_XDP_IPV6_EXT_MAX + 1];
	uint8_t ext_len;  /* Hop-by-Hop, Routing, Destination Options: hdrlen (0: 8 bytes) */
	uint16_t frag6;	  /* IPv6 Fragment headers: offset (8-byte units) << 3 | M, host order */
	uint8_t jumbo;	  /* IPv6: a jumbogram (payload length 0, Hop-by-Hop Jumbo option) */
};

/* Extension header kinds for shape.ext; EXTS(...) lists them. */
#define EXT_HOP IPPROTO_HOPOPTS
#define EXT_RT IPPROTO_ROUTING
#define EXT_FRAG IPPROTO_FRAGMENT
#define EXT_DST IPPROTO_DSTOPTS
#define EXT_AH IPPROTO_AH
#define EXT_ESP IPPROTO_ESP
#define EXTS(...) .ext = { __VA_ARGS__ }, .exts = sizeof((uint8_t[]){ __VA_ARGS__ })

struct frame {
	uint8_t b[256];
	uint32_t len;
};

static void put8(struct frame *f, uint8_t v)
{
	assert_true(f->len < sizeof(f->b));
	f->b[f->len++] = v;
}

static void put16(struct frame *f, uint16_t v)
{
	put8(f, (uint8_t)(v >> 8));
	put8(f, (uint8_t)v);
}

static void put32(struct frame *f, uint32_t v)
{
	put16(f, (uint16_t)(v >> 16));
	put16(f, (uint16_t)v);
}

static void put_zero(struct frame *f, uint32_t n)
{
	assert_true(n <= sizeof(f->b) - f->len);
	memset(f->b + f->len, 0, n);
	f->len += n;
}

static void set16(struct frame *f, uint32_t at, uint16_t v)
{
	f->b[at] = (uint8_t)(v >> 8);
	f->b[at + 1] = (uint8_t)v;
}

/* UDP: 8-byte header and 16 bytes of payload; TCP/ICMP: 20 bytes, ports first. */
static void put_l4(struct frame *f, uint8_t proto, uint16_t dport)
{
	uint32_t i;

	if (proto == IPPROTO_UDP) {
		put16(f, 40000);
		put16(f, dport);
		put16(f, 8 + 16);
		put16(f, 0); /* no checksum: the program does not look */
		for (i = 0; i < 16; i++) {
			put8(f, (uint8_t)(0xa0 + i));
		}
		return;
	}
	if (proto == IPPROTO_ICMP) {
		put8(f, 8); /* echo request */
		put_zero(f, 19);
		return;
	}
	put16(f, 40000); /* TCP */
	put16(f, dport);
	put_zero(f, 16);
}

static void put_ip4(struct frame *f, const struct shape *s, uint8_t proto)
{
	uint32_t start = f->len;
	uint8_t ihl = s->ihl ? s->ihl : 5;

	put8(f, (uint8_t)((s->version ? s->version : 4) << 4 | ihl));
	put8(f, 0);
	put16(f, 0); /* total length, below */
	put16(f, 0x1234);
	put16(f, s->frag);
	put8(f, 64);
	put8(f, proto);
	put16(f, 0);
	put16(f, 0x0a00);
	put16(f, 0x0001);
	put16(f, 0x0a00);
	put16(f, 0x0002);
	put_zero(f, (uint32_t)(ihl - 5) * 4); /* options: end-of-list padding */
	put_l4(f, proto, s->dport);
	set16(f, start + 2, (uint16_t)(f->len - start));
}

/* One IPv6 extension header of kind, followed by one of kind next. */
static void put_ip6_ext(struct frame *f, const struct shape *s, uint8_t kind, uint8_t next)
{
	uint32_t end = f->len + ((uint32_t)s->ext_len + 1) * 8;

	switch (kind) {
	case EXT_FRAG:
		put8(f, next);
		put8(f, 0);
		put16(f, s->frag6);
		put32(f, 0x5eed);
		return;
	case EXT_AH:
		put8(f, next);
		put8(f, 4); /* 24 bytes, in 4-byte units less 2 */
		put16(f, 0);
		put32(f, 0x1000); /* SPI */
		put32(f, 1);	  /* sequence number */
		put_zero(f, 12);  /* ICV */
		return;
	case EXT_ESP:
		/* SPI and sequence number; the rest is ciphertext with no next header in the clear
		 * (here the L4 header follows as it would before encryption) */
		put32(f, 0x1000);
		put32(f, 1);
		return;
	}
	put8(f, next);
	put8(f, s->ext_len);
	if (kind == EXT_HOP && s->jumbo) {
		put8(f, 0xc2); /* Jumbo Payload */
		put8(f, 4);
		put32(f, 65536 + 4096); /* a jumbogram's length: the program reads no lengths */
	}
	put_zero(f, end - f->len); /* Pad1 options, or a routing header of type 0, all read as 0 */
}

static void put_ip6(struct frame *f, const struct shape *s, uint8_t proto)
{
	uint32_t start = f->len, i;

	put8(f, (uint8_t)((s->version ? s->version : 6) << 4));
	put_zero(f, 3);
	put16(f, 0); /* payload length, below */
	put8(f, s->exts ? s->ext[0] : proto);
	put8(f, 64);
	for (i = 0; i < 2; i++) {
		put16(f, 0xfd00);
		put_zero(f, 13);
		put8(f, (uint8_t)(i + 1));
	}
	for (i = 0; i < s->exts; i++) {
		put_ip6_ext(f, s, s->ext[i], i + 1 < s->exts ? s->ext[i + 1] : proto);
	}
	put_l4(f, proto, s->dport);
	set16(f, start + 4, s->jumbo ? 0 : (uint16_t)(f->len - start - 40));
}

static void put_arp(struct frame *f)
{
	put16(f, 1);	     /* Ethernet */
	put16(f, ETH_P_IP4); /* IPv4 */
	put8(f, 6);
	put8(f, 4);
	put16(f, 1); /* request */
	put_zero(f, 20);
}

static void frame_build(struct frame *f, const struct shape *s)
{
	static const uint8_t dst[6] = { 0x02, 0, 0, 0, 0, 0x02 };
	static const uint8_t src[6] = { 0x02, 0, 0, 0, 0, 0x01 };
	uint16_t l3_type = s->l3 == L3_IP4 ? ETH_P_IP4 : s->l3 == L3_IP6 ? ETH_P_IP6
				       : s->l3 == L3_ARP ? ETH_P_ARP_ : s->raw_type;
	uint8_t proto = s->l4 ? s->l4 : IPPROTO_UDP;
	int i;

	f->len = 0;
	memcpy(f->b, dst, 6);
	memcpy(f->b + 6, src, 6);
	f->len = 12;
	for (i = 0; i < s->vlans; i++) {
		put16(f, i == 0 && s->outer ? s->outer : ETH_P_VLAN);
		put16(f, 100); /* the tag: priority 0, VLAN 100 */
	}
	put16(f, l3_type);
	switch (s->l3) {
	case L3_IP4:
		put_ip4(f, s, proto);
		break;
	case L3_IP6:
		put_ip6(f, s, proto);
		break;
	case L3_ARP:
		put_arp(f);
		break;
	case L3_RAW:
		put_zero(f, 46);
		break;
	}
}

/* ---- running the program --------------------------------------------------------------------- */

static void counters_read(uint64_t sums[HARP_XDP_COUNTER_MAX])
{
	uint64_t per_cpu[env.ncpus];
	uint32_t key;
	int cpu;

	for (key = 0; key < HARP_XDP_COUNTER_MAX; key++) {
		assert_int_equal(bpf_map_lookup_elem(env.counters_fd, &key, per_cpu), 0);
		sums[key] = 0;
		for (cpu = 0; cpu < env.ncpus; cpu++) {
			sums[key] += per_cpu[cpu];
		}
	}
}

/*
 * Runs the program once on the first keep bytes of f, as received on queue, and checks the verdict,
 * that exactly the counters in `bumped` (a bit per counter) moved, by one, and that the frame comes
 * back unchanged.
 *
 * This kernel refuses test data shorter than an Ethernet header, but lets the context end the
 * linear part early and carries the rest as a fragment. A program without xdp.frags sees only
 * the linear part (data_end), so a shorter frame is sent as keep linear bytes followed by the
 * rest of a 14-byte header in a fragment: the program's bounds checks face exactly keep bytes.
 */
static void run_counted(const char *name, const struct frame *f, uint32_t keep, uint32_t queue,
			uint32_t verdict, uint32_t bumped)
{
	uint32_t size = keep < OFF_L3 ? OFF_L3 : keep;
	uint8_t out[sizeof(f->b) + 64];
	struct xdp_md md = {
		.data_end = keep,
		.ingress_ifindex = (uint32_t)env.ifindex,
		.rx_queue_index = queue,
	};
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = f->b, .data_size_in = size,
		    .data_out = out, .data_size_out = sizeof(out), .ctx_in = &md,
		    .ctx_size_in = sizeof(md), .repeat = 1);
	uint64_t before[HARP_XDP_COUNTER_MAX], after[HARP_XDP_COUNTER_MAX];
	int err, i;

	counters_read(before);
	err = bpf_prog_test_run_opts(env.prog_fd, &opts);
	if (err) {
		fail_msg("%s: BPF_PROG_TEST_RUN: %s", name, strerror(-err));
	}
	if (opts.retval != verdict) {
		fail_msg("%s: verdict %u, expected %u", name, opts.retval, verdict);
	}
	if (opts.data_size_out != size || memcmp(out, f->b, size)) {
		fail_msg("%s: the program changed the frame", name);
	}
	counters_read(after);
	for (i = 0; i < HARP_XDP_COUNTER_MAX; i++) {
		uint64_t want = before[i] + !!(bumped & (1u << i));

		if (after[i] != want) {
			fail_msg("%s: counter %d went %llu -> %llu", name, i,
				 (unsigned long long)before[i], (unsigned long long)after[i]);
		}
		env.expect[i] += !!(bumped & (1u << i));
	}
}

/* The usual case: exactly one counter, `counted`, rises. */
static void run_case(const char *name, const struct frame *f, uint32_t keep, uint32_t queue,
		     uint32_t verdict, enum harp_xdp_counter counted)
{
	run_counted(name, f, keep, queue, verdict, 1u << counted);
}

struct steer_case {
	const char *name;
	struct shape s;
	int keep; /* bytes of the frame to send; 0 means all of it */
	int truncate_to_zero;
	uint32_t queue;
	uint32_t verdict;
	enum harp_xdp_counter counted;
};

#define STEERED XDP_REDIRECT, HARP_XDP_STEERED
#define PASSED XDP_PASS, HARP_XDP_PASSED
#define NO_SOCKET XDP_PASS, HARP_XDP_NO_SOCKET
#define REFUSED XDP_DROP, HARP_XDP_REFUSED
#define IP4_UDP(port) { .l3 = L3_IP4, .dport = (port) }
#define IP6_UDP(port) { .l3 = L3_IP6, .dport = (port) }
/* UDP to port behind the IPv6 extension headers listed */
#define IP6_EXT_UDP(port, ...) { .l3 = L3_IP6, .dport = (port), EXTS(__VA_ARGS__) }
/* Chains as long as the program walks, and one longer */
#define DST4 EXT_DST, EXT_DST, EXT_DST, EXT_DST
_Static_assert(HARP_XDP_IPV6_EXT_MAX == 8, "the chains below are 8 and 9 headers long");
#define DST8 DST4, DST4
#define DST9 DST4, DST4, EXT_DST
/* Where the first extension header starts in an untagged frame */
#define OFF_EXT OFF_L4_6

static const struct steer_case cases[] = {
	/* harp's own traffic, on a queue with a socket */
	{ "IPv4 UDP, lowest port", IP4_UDP(PORT_LO), 0, 0, Q_SOCKET, STEERED },
	{ "IPv4 UDP, highest port", IP4_UDP(PORT_HI), 0, 0, Q_SOCKET, STEERED },
	{ "IPv4 UDP, mid range", IP4_UDP(PORT_LO + 17), 0, 0, Q_SOCKET, STEERED },
	{ "IPv4 UDP, DF set", { .l3 = L3_IP4, .dport = PORT_LO, .frag = 0x4000 }, 0, 0, Q_SOCKET,
	  STEERED },
	{ "IPv4 UDP, bare UDP header", IP4_UDP(PORT_LO), OFF_L4_4 + 8, 0, Q_SOCKET, STEERED },
	{ "IPv6 UDP", IP6_UDP(PORT_LO + 1), 0, 0, Q_SOCKET, STEERED },
	{ "IPv6 UDP, lowest port", IP6_UDP(PORT_LO), 0, 0, Q_SOCKET, STEERED },
	{ "IPv6 UDP, highest port", IP6_UDP(PORT_HI), 0, 0, Q_SOCKET, STEERED },
	{ "IPv6 UDP, bare UDP header", IP6_UDP(PORT_LO), OFF_L4_6 + 8, 0, Q_SOCKET, STEERED },
	{ "802.1Q IPv4 UDP", { .vlans = 1, .l3 = L3_IP4, .dport = PORT_LO + 2 }, 0, 0, Q_SOCKET,
	  STEERED },
	{ "802.1Q IPv6 UDP", { .vlans = 1, .l3 = L3_IP6, .dport = PORT_LO + 3 }, 0, 0, Q_SOCKET,
	  STEERED },

	/* harp's ports, no socket at that queue */
	{ "IPv4 UDP, queue without socket", IP4_UDP(PORT_LO), 0, 0, Q_EMPTY, NO_SOCKET },
	{ "IPv6 UDP, queue without socket", IP6_UDP(PORT_HI), 0, 0, Q_EMPTY, NO_SOCKET },
	{ "802.1Q IPv4 UDP, queue without socket", { .vlans = 1, .l3 = L3_IP4, .dport = PORT_LO },
	  0, 0, Q_EMPTY, NO_SOCKET },
	{ "IPv4 UDP, queue past the map", IP4_UDP(PORT_LO), 0, 0, Q_BEYOND, NO_SOCKET },
	{ "802.1Q IPv6 UDP, queue without socket", { .vlans = 1, .l3 = L3_IP6, .dport = PORT_LO },
	  0, 0, Q_EMPTY, NO_SOCKET },
	{ "IPv6 UDP, queue past the map", IP6_UDP(PORT_LO), 0, 0, Q_BEYOND, NO_SOCKET },

	/* someone else's UDP */
	{ "IPv4 UDP, one below the range", IP4_UDP(PORT_LO - 1), 0, 0, Q_SOCKET, PASSED },
	{ "IPv4 UDP, one above the range", IP4_UDP(PORT_HI + 1), 0, 0, Q_SOCKET, PASSED },
	{ "IPv4 UDP, DNS", IP4_UDP(53), 0, 0, Q_SOCKET, PASSED },
	{ "IPv4 UDP, port 0", IP4_UDP(0), 0, 0, Q_SOCKET, PASSED },
	{ "IPv4 UDP, port 65535", IP4_UDP(65535), 0, 0, Q_SOCKET, PASSED },
	{ "IPv6 UDP, one below the range", IP6_UDP(PORT_LO - 1), 0, 0, Q_SOCKET, PASSED },
	{ "IPv6 UDP, one above the range", IP6_UDP(PORT_HI + 1), 0, 0, Q_SOCKET, PASSED },
	{ "IPv6 UDP, DNS", IP6_UDP(53), 0, 0, Q_SOCKET, PASSED },
	{ "IPv6 UDP, port 0", IP6_UDP(0), 0, 0, Q_SOCKET, PASSED },
	{ "IPv6 UDP, port 65535", IP6_UDP(65535), 0, 0, Q_SOCKET, PASSED },
	{ "802.1Q IPv4 UDP, VXLAN", { .vlans = 1, .l3 = L3_IP4, .dport = 4789 }, 0, 0, Q_SOCKET,
	  PASSED },
	{ "802.1Q IPv6 UDP, below the range", { .vlans = 1, .l3 = L3_IP6, .dport = PORT_LO - 1 }, 0,
	  0, Q_SOCKET, PASSED },
	{ "other UDP, queue without socket", IP4_UDP(53), 0, 0, Q_EMPTY, PASSED },
	{ "other IPv6 UDP, queue without socket", IP6_UDP(53), 0, 0, Q_EMPTY, PASSED },

	/* not UDP, not IP */
	{ "ARP", { .l3 = L3_ARP }, 0, 0, Q_SOCKET, PASSED },
	{ "802.1Q ARP", { .vlans = 1, .l3 = L3_ARP }, 0, 0, Q_SOCKET, PASSED },
	{ "IPv4 ICMP", { .l3 = L3_IP4, .l4 = IPPROTO_ICMP }, 0, 0, Q_SOCKET, PASSED },
	{ "IPv4 TCP to a harp port", { .l3 = L3_IP4, .l4 = IPPROTO_TCP, .dport = PORT_LO }, 0, 0,
	  Q_SOCKET, PASSED },
	{ "IPv6 TCP to a harp port", { .l3 = L3_IP6, .l4 = IPPROTO_TCP, .dport = PORT_LO }, 0, 0,
	  Q_SOCKET, PASSED },
	{ "IPv6 ICMPv6", { .l3 = L3_IP6, .l4 = IPPROTO_ICMPV6 }, 0, 0, Q_SOCKET, PASSED },
	{ "IPv6 No Next Header", { .l3 = L3_IP6, .l4 = IPPROTO_NONE }, 0, 0, Q_SOCKET, PASSED },
	{ "unknown ethertype (LLDP)", { .l3 = L3_RAW, .raw_type = 0x88cc }, 0, 0, Q_SOCKET,
	  PASSED },
	{ "QinQ outer tag", { .vlans = 2, .outer = ETH_P_QINQ, .l3 = L3_IP4, .dport = PORT_LO }, 0,
	  0, Q_SOCKET, PASSED },
	{ "two 802.1Q tags", { .vlans = 2, .l3 = L3_IP4, .dport = PORT_LO }, 0, 0, Q_SOCKET,
	  PASSED },

	/* IPv4 the program leaves to the kernel */
	{ "IPv4 fragment, MF set", { .l3 = L3_IP4, .dport = PORT_LO, .frag = 0x2000 }, 0, 0,
	  Q_SOCKET, PASSED },
	{ "IPv4 fragment, non-zero offset", { .l3 = L3_IP4, .dport = PORT_LO, .frag = 0x0001 }, 0,
	  0, Q_SOCKET, PASSED },
	{ "IPv4 fragment, DF and offset", { .l3 = L3_IP4, .dport = PORT_LO, .frag = 0x4100 }, 0, 0,
	  Q_SOCKET, PASSED },
	{ "IPv4 with options (ihl 6)", { .l3 = L3_IP4, .dport = PORT_LO, .ihl = 6 }, 0, 0,
	  Q_SOCKET, PASSED },
	{ "IPv4 ethertype, version 6", { .l3 = L3_IP4, .dport = PORT_LO, .version = 6 }, 0, 0,
	  Q_SOCKET, PASSED },
	{ "IPv6 ethertype, version 4", { .l3 = L3_IP6, .dport = PORT_LO, .version = 4 }, 0, 0,
	  Q_SOCKET, PASSED },

	/* truncated frames */
	{ "empty frame", IP4_UDP(PORT_LO), 0, 1, Q_SOCKET, PASSED },
	{ "truncated Ethernet (1 byte)", IP4_UDP(PORT_LO), 1, 0, Q_SOCKET, PASSED },
	{ "truncated Ethernet (13 bytes)", IP4_UDP(PORT_LO), 13, 0, Q_SOCKET, PASSED },
	{ "Ethernet header only", IP4_UDP(PORT_LO), 14, 0, Q_SOCKET, PASSED },
	{ "truncated 802.1Q", { .vlans = 1, .l3 = L3_IP4, .dport = PORT_LO }, 17, 0, Q_SOCKET,
	  PASSED },
	{ "truncated IPv4", IP4_UDP(PORT_LO), OFF_L4_4 - 1, 0, Q_SOCKET, PASSED },
	{ "truncated IPv4 behind 802.1Q", { .vlans = 1, .l3 = L3_IP4, .dport = PORT_LO },
	  OFF_L4_4 + 4 - 1, 0, Q_SOCKET, PASSED },
	{ "truncated IPv6", IP6_UDP(PORT_LO), OFF_L4_6 - 1, 0, Q_SOCKET, PASSED },
	{ "truncated IPv6 behind 802.1Q", { .vlans = 1, .l3 = L3_IP6, .dport = PORT_LO },
	  OFF_L4_6 + 4 - 1, 0, Q_SOCKET, PASSED },
	{ "truncated UDP over IPv4", IP4_UDP(PORT_LO), OFF_L4_4 + 7, 0, Q_SOCKET, PASSED },
	{ "truncated UDP over IPv4, ports only", IP4_UDP(PORT_LO), OFF_L4_4 + 4, 0, Q_SOCKET,
	  PASSED },
	{ "truncated UDP over IPv6", IP6_UDP(PORT_LO), OFF_L4_6 + 7, 0, Q_SOCKET, PASSED },
	{ "truncated UDP over 802.1Q IPv6", { .vlans = 1, .l3 = L3_IP6, .dport = PORT_LO },
	  OFF_L4_6 + 4 + 7, 0, Q_SOCKET, PASSED },
};

/*
 * IPv6 extension headers: harp never sends them, so UDP to its ports behind them is dropped and
 * counted as refused, on any queue; what the walk cannot follow to a UDP header goes to the kernel.
 */
static const struct steer_case ext_cases[] = {
	{ "Hop-by-Hop, then UDP to a harp port", IP6_EXT_UDP(PORT_LO, EXT_HOP), 0, 0, Q_SOCKET,
	  REFUSED },
	{ "Routing, then UDP to a harp port", IP6_EXT_UDP(PORT_HI, EXT_RT), 0, 0, Q_SOCKET,
	  REFUSED },
	{ "Destination Options, then UDP to a harp port", IP6_EXT_UDP(PORT_LO + 4, EXT_DST), 0, 0,
	  Q_SOCKET, REFUSED },
	{ "first fragment (M set), UDP to a harp port",
	  { .l3 = L3_IP6, .dport = PORT_LO, EXTS(EXT_FRAG), .frag6 = 1 }, 0, 0, Q_SOCKET, REFUSED },
	{ "atomic fragment (offset 0, M clear), UDP to a harp port",
	  IP6_EXT_UDP(PORT_LO, EXT_FRAG), 0, 0, Q_SOCKET, REFUSED },
	{ "Hop-by-Hop of 32 bytes, then UDP to a harp port",
	  { .l3 = L3_IP6, .dport = PORT_LO, EXTS(EXT_HOP), .ext_len = 3 }, 0, 0, Q_SOCKET,
	  REFUSED },
	{ "a chain of all four kinds, then UDP to a harp port",
	  IP6_EXT_UDP(PORT_LO, EXT_HOP, EXT_DST, EXT_RT, EXT_FRAG, EXT_DST), 0, 0, Q_SOCKET,
	  REFUSED },
	{ "as long a chain as the program walks", IP6_EXT_UDP(PORT_LO, DST8), 0, 0, Q_SOCKET,
	  REFUSED },
	{ "jumbogram (Hop-by-Hop Jumbo option), UDP to a harp port",
	  { .l3 = L3_IP6, .dport = PORT_LO, EXTS(EXT_HOP), .jumbo = 1 }, 0, 0, Q_SOCKET, REFUSED },
	{ "802.1Q, Hop-by-Hop, then UDP to a harp port",
	  { .vlans = 1, .l3 = L3_IP6, .dport = PORT_LO, EXTS(EXT_HOP) }, 0, 0, Q_SOCKET, REFUSED },
	{ "Hop-by-Hop, UDP to a harp port, queue without socket", IP6_EXT_UDP(PORT_LO, EXT_HOP), 0,
	  0, Q_EMPTY, REFUSED },
	{ "Routing, UDP to a harp port, queue past the map", IP6_EXT_UDP(PORT_LO, EXT_RT), 0, 0,
	  Q_BEYOND, REFUSED },
	{ "Hop-by-Hop, bare UDP header", IP6_EXT_UDP(PORT_LO, EXT_HOP), OFF_EXT + 8 + 8, 0,
	  Q_SOCKET, REFUSED },

	/* not harp's port, not UDP, or a header the walk does not step over */
	{ "Hop-by-Hop, then UDP one below the range", IP6_EXT_UDP(PORT_LO - 1, EXT_HOP), 0, 0,
	  Q_SOCKET, PASSED },
	{ "Routing, then UDP one above the range", IP6_EXT_UDP(PORT_HI + 1, EXT_RT), 0, 0,
	  Q_SOCKET, PASSED },
	{ "Fragment, then UDP to DNS", IP6_EXT_UDP(53, EXT_FRAG), 0, 0, Q_SOCKET, PASSED },
	{ "Hop-by-Hop, then TCP to a harp port",
	  { .l3 = L3_IP6, .l4 = IPPROTO_TCP, .dport = PORT_LO, EXTS(EXT_HOP) }, 0, 0, Q_SOCKET,
	  PASSED },
	{ "a later fragment (offset 8 bytes), which has no UDP header",
	  { .l3 = L3_IP6, .dport = PORT_LO, EXTS(EXT_FRAG), .frag6 = 1 << 3 }, 0, 0, Q_SOCKET,
	  PASSED },
	{ "a later fragment, the last", { .l3 = L3_IP6, .dport = PORT_LO, EXTS(EXT_FRAG),
	  .frag6 = 185 << 3 }, 0, 0, Q_SOCKET, PASSED },
	{ "a later fragment behind Hop-by-Hop",
	  { .l3 = L3_IP6, .dport = PORT_LO, EXTS(EXT_HOP, EXT_FRAG), .frag6 = 1 << 3 | 1 }, 0, 0,
	  Q_SOCKET, PASSED },
	{ "AH, then UDP to a harp port", IP6_EXT_UDP(PORT_LO, EXT_AH), 0, 0, Q_SOCKET, PASSED },
	{ "ESP", IP6_EXT_UDP(PORT_LO, EXT_ESP), 0, 0, Q_SOCKET, PASSED },
	{ "Hop-by-Hop, AH, then UDP to a harp port", IP6_EXT_UDP(PORT_LO, EXT_HOP, EXT_AH), 0, 0,
	  Q_SOCKET, PASSED },
	{ "a chain one longer than the program walks", IP6_EXT_UDP(PORT_LO, DST9), 0, 0, Q_SOCKET,
	  PASSED },
	{ "Hop-by-Hop, then DNS, queue without socket", IP6_EXT_UDP(53, EXT_HOP), 0, 0, Q_EMPTY,
	  PASSED },

	/* cut by the end of the first buffer */
	{ "Hop-by-Hop cut after one byte", IP6_EXT_UDP(PORT_LO, EXT_HOP), OFF_EXT + 1, 0, Q_SOCKET,
	  PASSED },
	{ "Fragment cut after 6 bytes", IP6_EXT_UDP(PORT_LO, EXT_FRAG), OFF_EXT + 6, 0, Q_SOCKET,
	  PASSED },
	{ "Hop-by-Hop of 32 bytes cut inside",
	  { .l3 = L3_IP6, .dport = PORT_LO, EXTS(EXT_HOP), .ext_len = 3 }, OFF_EXT + 20, 0,
	  Q_SOCKET, PASSED },
	{ "the second header of a chain cut", IP6_EXT_UDP(PORT_LO, EXT_HOP, EXT_DST),
	  OFF_EXT + 8 + 1, 0, Q_SOCKET, PASSED },
	{ "UDP cut behind Hop-by-Hop", IP6_EXT_UDP(PORT_LO, EXT_HOP), OFF_EXT + 8 + 7, 0, Q_SOCKET,
	  PASSED },
	{ "Routing, then nothing", IP6_EXT_UDP(PORT_LO, EXT_RT), OFF_EXT + 8, 0, Q_SOCKET, PASSED },
};

static void run_table(const char *prefix, const struct steer_case *table, size_t n)
{
	char name[160];
	struct frame f;
	size_t i;

	for (i = 0; i < n; i++) {
		const struct steer_case *c = &table[i];
		uint32_t keep;

		frame_build(&f, &c->s);
		keep = c->truncate_to_zero ? 0 : c->keep > 0 ? (uint32_t)c->keep : f.len;
		assert_true(keep <= f.len);
		snprintf(name, sizeof(name), "%s%s", prefix, c->name);
		run_case(name, &f, keep, c->queue, c->verdict, c->counted);
	}
}

static void test_verdicts(void **state)
{
	(void)state;
	run_table("", cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_ipv6_ext(void **state)
{
	(void)state;
	run_table("IPv6 ", ext_cases, sizeof(ext_cases) / sizeof(ext_cases[0]));
}

/* Entry 0 of harp_config: the program's port range. */
static int set_ports(uint16_t lo, uint16_t hi)
{
	struct harp_xdp_config cfg = { .port_lo = lo, .port_hi = hi };
	uint32_t key = 0;

	return bpf_map_update_elem(env.config_fd, &key, &cfg, BPF_ANY) ? -errno : 0;
}

/*
 * Until whoever loaded the program writes its port range (harp-attach does so right after
 * xdp-loader), it must hand everything to the kernel, harp's ports included; and a new range
 * takes effect on the next packet.
 */
static void test_config(void **state)
{
	struct shape lo = IP4_UDP(PORT_LO), past = IP4_UDP(PORT_HI + 1);
	struct shape ext = IP6_EXT_UDP(PORT_LO, EXT_HOP);
	struct shape ext_past = IP6_EXT_UDP(PORT_HI + 1, EXT_HOP);
	struct frame f, g;

	(void)state;
	assert_int_equal(set_ports(0, 0), 0);
	frame_build(&f, &lo);
	run_case("unconfigured, harp's first port", &f, f.len, Q_SOCKET, PASSED);
	frame_build(&f, &ext);
	run_case("unconfigured, IPv6 Hop-by-Hop to harp's first port", &f, f.len, Q_SOCKET, PASSED);
	assert_int_equal(set_ports(PORT_LO, PORT_HI + 1), 0);
	frame_build(&f, &past);
	run_case("range grown by one port", &f, f.len, Q_SOCKET, STEERED);
	frame_build(&g, &ext_past);
	run_case("range grown by one port, IPv6 Hop-by-Hop to it", &g, g.len, Q_SOCKET, REFUSED);
	assert_int_equal(set_ports(PORT_LO, PORT_HI), 0);
	run_case("range back", &f, f.len, Q_SOCKET, PASSED);
	run_case("range back, IPv6 Hop-by-Hop", &g, g.len, Q_SOCKET, PASSED);
}

/* Taking the socket out of the map turns harp's traffic on that queue back to the kernel. */
static void test_socket_removed(void **state)
{
	struct shape s = IP4_UDP(PORT_LO + 5);
	uint32_t queue = Q_SOCKET;
	uint32_t fd = (uint32_t)env.xsk_q1.fd;
	struct frame f;

	(void)state;
	frame_build(&f, &s);
	assert_int_equal(bpf_map_delete_elem(env.xsks_fd, &queue), 0);
	run_case("socket removed", &f, f.len, Q_SOCKET, NO_SOCKET);
	assert_int_equal(bpf_map_update_elem(env.xsks_fd, &queue, &fd, BPF_ANY), 0);
	run_case("socket back", &f, f.len, Q_SOCKET, STEERED);
}

/* One live-frames run of f on queue 0, in which exactly the counter `counted` rises. */
static void live_run(const char *name, struct frame *f, enum harp_xdp_counter counted)
{
	struct xdp_md md = { .ingress_ifindex = (uint32_t)env.ifindex, .rx_queue_index = Q_LIVE,
			     .data_end = f->len };
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = f->b, .data_size_in = f->len,
		    .ctx_in = &md, .ctx_size_in = sizeof(md), .repeat = 1,
		    .flags = BPF_F_TEST_XDP_LIVE_FRAMES);
	uint64_t before[HARP_XDP_COUNTER_MAX], after[HARP_XDP_COUNTER_MAX];
	int err, i;

	counters_read(before);
	err = bpf_prog_test_run_opts(env.prog_fd, &opts);
	if (err) {
		fail_msg("%s: live run: BPF_PROG_TEST_RUN: %s", name, strerror(-err));
	}
	counters_read(after);
	for (i = 0; i < HARP_XDP_COUNTER_MAX; i++) {
		if (after[i] != before[i] + (i == (int)counted)) {
			fail_msg("%s: live run: counter %d went %llu -> %llu", name, i,
				 (unsigned long long)before[i], (unsigned long long)after[i]);
		}
	}
	env.expect[counted]++;
}

/* Frames waiting in the rx ring of queue 0's socket. */
static uint32_t live_waiting(void)
{
	struct test_xsk *x = &env.xsk_live;

	/* Acquire: what the producer index covers is read only after it. */
	return __atomic_load_n((uint32_t *)(x->rx + x->off.rx.producer), __ATOMIC_ACQUIRE) -
	       *(uint32_t *)(x->rx + x->off.rx.consumer);
}

/*
 * A live-frames run carries out the redirect: the frame must land, byte for byte, in the rx ring
 * of the socket bound to queue 0 (the queue live runs present frames on). Each one takes one of
 * the socket's XSK_RING frames.
 */
static void run_live_steered(const char *name, const struct shape *s)
{
	struct test_xsk *x = &env.xsk_live;
	struct xdp_desc *d;
	struct frame f;
	uint32_t cons;

	frame_build(&f, s);
	live_run(name, &f, HARP_XDP_STEERED);
	assert_int_equal(live_waiting(), 1);
	cons = *(uint32_t *)(x->rx + x->off.rx.consumer);
	d = (struct xdp_desc *)(x->rx + x->off.rx.desc) + (cons & (XSK_RING - 1));
	assert_int_equal(d->len, f.len);
	assert_true(d->addr + d->len <= XSK_RING * XSK_FRAME);
	assert_memory_equal(x->umem + d->addr, f.b, f.len);
	/* Release: the kernel may reuse the slot only after we are done reading it. */
	__atomic_store_n((uint32_t *)(x->rx + x->off.rx.consumer), cons + 1, __ATOMIC_RELEASE);
}

static void test_live_redirect(void **state)
{
	const struct shape harp4 = IP4_UDP(PORT_LO + 9), harp6 = IP6_UDP(PORT_LO + 10);
	const struct shape vlan6 = { .vlans = 1, .l3 = L3_IP6, .dport = PORT_HI };
	const struct shape ext6 = IP6_EXT_UDP(PORT_LO + 9, EXT_HOP);
	struct frame f;

	(void)state;
	run_live_steered("IPv4", &harp4);
	run_live_steered("IPv6", &harp6);
	run_live_steered("802.1Q IPv6", &vlan6);
	/* refused: dropped, nothing arrives */
	frame_build(&f, &ext6);
	live_run("IPv6 Hop-by-Hop", &f, HARP_XDP_REFUSED);
	assert_int_equal(live_waiting(), 0);
}

/*
 * Frames larger than one buffer, as a driver hands a multi-buffer program a jumbo frame: the
 * headers in the first buffer (linear bytes), the rest in fragments. The program reads only the
 * first buffer: harp's packets are steered by it, every other frame of any size passes whole.
 */
static void run_jumbo(const char *name, const struct shape *s, uint32_t len, uint32_t linear,
		      uint32_t verdict, enum harp_xdp_counter counted)
{
	static uint8_t in[16384], out[16384 + 64];
	struct frame f;
	struct xdp_md md = {
		.data_end = linear,
		.ingress_ifindex = (uint32_t)env.ifindex,
		.rx_queue_index = Q_SOCKET,
	};
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = in, .data_size_in = len, .data_out = out,
		    .data_size_out = sizeof(out), .ctx_in = &md, .ctx_size_in = sizeof(md),
		    .repeat = 1);
	uint64_t before[HARP_XDP_COUNTER_MAX], after[HARP_XDP_COUNTER_MAX];
	uint32_t i;
	int err;

	assert_true(len <= sizeof(in) && linear <= len);
	frame_build(&f, s);
	for (i = 0; i < len; i++) {
		in[i] = (uint8_t)(i * 7 + 3); /* a payload whose every byte says where it sits */
	}
	memcpy(in, f.b, f.len);
	counters_read(before);
	err = bpf_prog_test_run_opts(env.prog_fd, &opts);
	if (err) {
		fail_msg("%s: BPF_PROG_TEST_RUN of %u bytes (%u linear): %s", name, len, linear,
			 strerror(-err));
	}
	if (opts.retval != verdict) {
		fail_msg("%s: verdict %u, expected %u", name, opts.retval, verdict);
	}
	if (opts.data_size_out != len || memcmp(out, in, len)) {
		fail_msg("%s: the frame came back changed (%u of %u bytes)", name,
			 opts.data_size_out, len);
	}
	counters_read(after);
	for (i = 0; i < HARP_XDP_COUNTER_MAX; i++) {
		assert_int_equal(after[i], before[i] + (i == (uint32_t)counted));
	}
	env.expect[counted]++;
}

static int set_mtu(const char *ifname, int mtu)
{
	struct ifreq ifr = { .ifr_mtu = mtu };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), err = 0;

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (fd < 0 || ioctl(fd, SIOCSIFMTU, &ifr)) {
		err = -errno;
	}
	if (fd >= 0) {
		close(fd);
	}
	return err;
}

/*
 * The program as loaded is multi-buffer aware: veth takes it natively at MTU 9000, where it
 * refuses a single-buffer program (ERANGE above 3506). BPF_PROG_TEST_RUN cannot tell: it hands
 * fragments to either kind.
 */
static void test_jumbo_attach(void **state)
{
	int ifindex, err;

	(void)state;
	assert_int_equal(veth_create(VETH_NAME "j", VETH_PEER "j", 1), 0);
	assert_int_equal(set_mtu(VETH_NAME "j", 9000), 0);
	assert_int_equal(set_mtu(VETH_PEER "j", 9000), 0);
	ifindex = (int)if_nametoindex(VETH_NAME "j");
	assert_true(ifindex > 0);
	err = bpf_xdp_attach(ifindex, env.prog_fd, XDP_FLAGS_DRV_MODE, NULL);
	if (err) {
		fail_msg("native attach at MTU 9000: %s", strerror(-err));
	}
	assert_int_equal(bpf_xdp_detach(ifindex, XDP_FLAGS_DRV_MODE, NULL), 0);
}

static void test_jumbo(void **state)
{
	const struct shape harp4 = IP4_UDP(PORT_LO + 5), harp6 = IP6_UDP(PORT_HI);
	const struct shape hop6 = IP6_EXT_UDP(PORT_LO + 5, EXT_HOP);
	const struct shape dns = IP4_UDP(53), tcp = { .l3 = L3_IP4, .l4 = IPPROTO_TCP, .dport = 22 };
	const struct shape vlan_tcp = { .vlans = 1, .l3 = L3_IP4, .l4 = IPPROTO_TCP, .dport = 443 };

	(void)state;
	/* a full 9000-byte MTU frame of the kernel's: passed whole */
	run_jumbo("TCP, MTU 9000, 3500 bytes in the first buffer", &tcp, 9014, 3500, PASSED);
	run_jumbo("802.1Q TCP, MTU 9000", &vlan_tcp, 9018, 3500, PASSED);
	run_jumbo("UDP to DNS, MTU 9000", &dns, 9014, 3500, PASSED);
	run_jumbo("TCP, headers alone in the first buffer", &tcp, 9014, OFF_L4_4 + 20, PASSED);
	/* harp's packets: up to the MTU (multi-buffer sockets), which the driver splits too */
	run_jumbo("harp IPv4, MTU 9000 over the first buffer and fragments", &harp4, 9014, 3500,
		  STEERED);
	run_jumbo("harp IPv4, its largest packet (16384 bytes) over fragments", &harp4, 16384,
		  3500, STEERED);
	/* and one frame's worth (3840 bytes), as without multi-buffer */
	run_jumbo("harp IPv4, 3840 bytes over two buffers", &harp4, 3840, 3500, STEERED);
	run_jumbo("harp IPv6, 3840 bytes over two buffers", &harp6, 3840, 1024, STEERED);
	run_jumbo("IPv6 Hop-by-Hop to harp's port, MTU 9000", &hop6, 9014, 3500, REFUSED);
	run_jumbo("IPv6 Hop-by-Hop, UDP header cut by the first buffer", &hop6, 9014,
		  OFF_EXT + 8 + 4, PASSED);
	run_jumbo("harp IPv4, one buffer", &harp4, 3840, 3840, STEERED);
	/* a first buffer that ends inside the UDP header: the kernel's to judge, as before */
	run_jumbo("harp IPv4, UDP header cut by the first buffer", &harp4, 3840, OFF_L4_4 + 4,
		  PASSED);
}

/* Runs f on queue, expects verdict, and that exactly the counters in `bumped` rose by one. */
static void run_probe(const char *name, const struct frame *f, uint32_t queue, uint32_t verdict,
		      uint32_t bumped)
{
	run_counted(name, f, f->len, queue, verdict, bumped);
}

/* A frame of shape s with a harp header's first 16 bytes as the UDP payload. */
static void make_probe_as(struct frame *f, const struct shape *s, uint8_t version, uint8_t type,
			  uint32_t conn_id, uint64_t token)
{
	struct harp_xdp_hdr_min h = { .version = version, .type = type };

	frame_build(f, s);
	h.conn_id = htonl(conn_id);
	h.token = htobe64(token);
	_Static_assert(sizeof(h) == 16, "the frame's UDP payload is 16 bytes");
	memcpy(f->b + f->len - sizeof(h), &h, sizeof(h));
}

/* The same over IPv4: version, type, conn_id, token. */
static void make_probe(struct frame *f, uint8_t version, uint8_t type, uint32_t conn_id,
		       uint64_t token)
{
	const struct shape s = IP4_UDP(PORT_LO + 3);

	make_probe_as(f, &s, version, type, conn_id, token);
}

static uint64_t probe_queues_of(uint32_t conn_id, uint64_t token)
{
	struct harp_xdp_probe_key key = { .token = htobe64(token), .conn_id = htonl(conn_id) };
	uint64_t seen = 0;

	if (bpf_map_lookup_elem(bpf_map__fd(env.skel->maps.probe_queues), &key, &seen)) {
		return 0;
	}
	return seen;
}

/*
 * Probes: the program records the queue each arrived on, per connection, whether or not that
 * queue has a socket; one with a socket is steered as usual, one without is dropped (nobody
 * could answer it). Anything else that only resembles a probe is steered untouched.
 */
static void test_probes(void **state)
{
	const uint32_t probes = 1u << HARP_XDP_PROBES, steered = 1u << HARP_XDP_STEERED;
	const uint32_t dropped = 1u << HARP_XDP_PROBE_NO_SOCKET;
	struct frame f;

	(void)state;
	assert_int_equal(probe_queues_of(0x1234, 0xfeedfacecafef00dull), 0);
	make_probe(&f, HARP_XDP_WIRE_VERSION, HARP_XDP_PKT_PROBE, 0x1234, 0xfeedfacecafef00dull);
	run_probe("probe, queue with socket", &f, Q_SOCKET, XDP_REDIRECT, probes | steered);
	assert_int_equal(probe_queues_of(0x1234, 0xfeedfacecafef00dull), 1ull << Q_SOCKET);
	run_probe("probe, queue without socket", &f, Q_EMPTY, XDP_DROP, probes | dropped);
	assert_int_equal(probe_queues_of(0x1234, 0xfeedfacecafef00dull),
			 1ull << Q_SOCKET | 1ull << Q_EMPTY);
	/* another connection (same id, other token) has its own record */
	make_probe(&f, HARP_XDP_WIRE_VERSION, HARP_XDP_PKT_PROBE, 0x1234, 1);
	run_probe("probe of another connection", &f, Q_EMPTY, XDP_DROP, probes | dropped);
	assert_int_equal(probe_queues_of(0x1234, 1), 1ull << Q_EMPTY);
	/* not probes: other types, other versions */
	make_probe(&f, HARP_XDP_WIRE_VERSION, 1, 0x99, 7);
	run_probe("DATA", &f, Q_SOCKET, XDP_REDIRECT, steered);
	make_probe(&f, 1, HARP_XDP_PKT_PROBE, 0x99, 7);
	run_probe("version 1 'probe'", &f, Q_SOCKET, XDP_REDIRECT, steered);
	make_probe(&f, HARP_XDP_WIRE_VERSION, 1, 0x99, 7);
	run_probe("DATA, queue without socket", &f, Q_EMPTY, XDP_PASS,
		  1u << HARP_XDP_NO_SOCKET);
	assert_int_equal(probe_queues_of(0x99, 7), 0);
}

/* IPv6 probes are recorded as IPv4 ones are; one behind an extension header is refused alone. */
static void test_probes_ipv6(void **state)
{
	const uint32_t probes = 1u << HARP_XDP_PROBES, steered = 1u << HARP_XDP_STEERED;
	const uint32_t dropped = 1u << HARP_XDP_PROBE_NO_SOCKET;
	const struct shape plain = IP6_UDP(PORT_LO + 6), vlan = { .vlans = 1, .l3 = L3_IP6,
								    .dport = PORT_HI };
	const struct shape hop = IP6_EXT_UDP(PORT_LO + 6, EXT_HOP);
	const uint64_t token = 0x0123456789abcdefull;
	struct frame f;

	(void)state;
	make_probe_as(&f, &plain, HARP_XDP_WIRE_VERSION, HARP_XDP_PKT_PROBE, 0x600d, token);
	run_probe("IPv6 probe, queue with socket", &f, Q_SOCKET, XDP_REDIRECT, probes | steered);
	assert_int_equal(probe_queues_of(0x600d, token), 1ull << Q_SOCKET);
	make_probe_as(&f, &vlan, HARP_XDP_WIRE_VERSION, HARP_XDP_PKT_PROBE, 0x600d, token);
	run_probe("802.1Q IPv6 probe, queue without socket", &f, Q_EMPTY, XDP_DROP,
		  probes | dropped);
	assert_int_equal(probe_queues_of(0x600d, token), 1ull << Q_SOCKET | 1ull << Q_EMPTY);
	make_probe_as(&f, &hop, HARP_XDP_WIRE_VERSION, HARP_XDP_PKT_PROBE, 0x0bad, token);
	run_probe("IPv6 probe behind Hop-by-Hop", &f, Q_SOCKET, XDP_DROP, 1u << HARP_XDP_REFUSED);
	run_probe("IPv6 probe behind Hop-by-Hop, queue without socket", &f, Q_EMPTY, XDP_DROP,
		  1u << HARP_XDP_REFUSED);
	assert_int_equal(probe_queues_of(0x0bad, token), 0);
}

static void test_counter_totals(void **state)
{
	uint64_t sums[HARP_XDP_COUNTER_MAX];
	size_t i;

	(void)state;
	counters_read(sums);
	for (i = 0; i < HARP_XDP_COUNTER_MAX; i++) {
		assert_int_equal(sums[i], env.expect[i]);
	}
	/* The table itself must exercise every counter. */
	assert_true(env.expect[HARP_XDP_STEERED] > 0);
	assert_true(env.expect[HARP_XDP_PASSED] > 0);
	assert_true(env.expect[HARP_XDP_NO_SOCKET] > 0);
	assert_true(env.expect[HARP_XDP_PROBES] > 0);
	assert_true(env.expect[HARP_XDP_PROBE_NO_SOCKET] > 0);
	assert_true(env.expect[HARP_XDP_REFUSED] > 0);
}

/* ---- set-up ---------------------------------------------------------------------------------- */

#define SKIP 77

/* Returns 0, SKIP with the reason printed when a privilege is missing, or 1 on a real failure. */
static int env_setup(void)
{
	uint32_t queue, fd;
	int err;

	if (unshare(CLONE_NEWNET)) {
		fprintf(stderr, "skip: unshare(CLONE_NEWNET): %s (needs CAP_SYS_ADMIN)\n",
			strerror(errno));
		return errno == EPERM ? SKIP : 1;
	}
	err = veth_create(VETH_NAME, VETH_PEER, VETH_QUEUES);
	if (err) {
		fprintf(stderr, "create veth %s: %s\n", VETH_NAME, strerror(-err));
		return err == -EPERM ? SKIP : 1;
	}
	env.ifindex = (int)if_nametoindex(VETH_NAME);
	env.ncpus = libbpf_num_possible_cpus();
	if (!env.ifindex || env.ncpus <= 0) {
		fprintf(stderr, "look up %s / possible CPUs failed\n", VETH_NAME);
		return 1;
	}

	env.skel = harp_xdp__open();
	if (!env.skel) {
		fprintf(stderr, "open skeleton: %s\n", strerror(errno));
		return 1;
	}
	bpf_map__set_pin_path(env.skel->maps.xsks_map, NULL);
	bpf_map__set_pin_path(env.skel->maps.counters, NULL);
	bpf_map__set_pin_path(env.skel->maps.harp_config, NULL);
	bpf_map__set_pin_path(env.skel->maps.probe_queues, NULL);
	/* pinned by name otherwise: the load fails where bpffs is not mounted at /sys/fs/bpf,
	 * and leaves the map pinned there where it is */
	bpf_map__set_pin_path(env.skel->maps.queue_owners, NULL);
	err = harp_xdp__load(env.skel);
	if (err) {
		fprintf(stderr, "%sload harp_xdp: %s\n", err == -EPERM ? "skip: " : "",
			strerror(-err));
		return err == -EPERM ? SKIP : 1;
	}
	env.config_fd = bpf_map__fd(env.skel->maps.harp_config);
	if (set_ports(PORT_LO, PORT_HI)) {
		fprintf(stderr, "write harp_config: %s\n", strerror(errno));
		return 1;
	}
	env.prog_fd = bpf_program__fd(env.skel->progs.harp_xdp_steer);
	env.xsks_fd = bpf_map__fd(env.skel->maps.xsks_map);
	env.counters_fd = bpf_map__fd(env.skel->maps.counters);

	err = xsk_open(&env.xsk_q1, env.ifindex, Q_SOCKET);
	if (!err) {
		err = xsk_open(&env.xsk_live, env.ifindex, Q_LIVE);
	}
	if (err) {
		fprintf(stderr, "AF_XDP socket on %s: %s\n", VETH_NAME, strerror(-err));
		return 1;
	}
	queue = Q_SOCKET;
	fd = (uint32_t)env.xsk_q1.fd;
	err = bpf_map_update_elem(env.xsks_fd, &queue, &fd, BPF_ANY);
	queue = Q_LIVE;
	fd = (uint32_t)env.xsk_live.fd;
	err = err ? err : bpf_map_update_elem(env.xsks_fd, &queue, &fd, BPF_ANY);
	if (err) {
		fprintf(stderr, "insert sockets into xsks_map: %s\n", strerror(-err));
		return 1;
	}
	return 0;
}

/* BPF_PROG_TEST_RUN itself may be refused (lockdown, missing CAP_BPF/CAP_NET_ADMIN). */
static int probe_test_run(void)
{
	struct frame f;
	struct shape s = IP4_UDP(53);
	LIBBPF_OPTS(bpf_test_run_opts, opts, .repeat = 1);
	int err;

	frame_build(&f, &s);
	opts.data_in = f.b;
	opts.data_size_in = f.len;
	err = bpf_prog_test_run_opts(env.prog_fd, &opts);
	if (err == -EPERM) {
		fprintf(stderr, "skip: BPF_PROG_TEST_RUN refused: %s\n", strerror(-err));
		return SKIP;
	}
	if (err) {
		fprintf(stderr, "BPF_PROG_TEST_RUN: %s\n", strerror(-err));
		return 1;
	}
	env.expect[HARP_XDP_PASSED]++; /* the probe ran the program on DNS traffic */
	return 0;
}

static void env_teardown(void)
{
	xsk_close(&env.xsk_live);
	xsk_close(&env.xsk_q1);
	harp_xdp__destroy(env.skel);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verdicts),
		cmocka_unit_test(test_ipv6_ext),
		cmocka_unit_test(test_config),
		cmocka_unit_test(test_socket_removed),
		cmocka_unit_test(test_live_redirect),
		cmocka_unit_test(test_jumbo),
		cmocka_unit_test(test_jumbo_attach),
		cmocka_unit_test(test_probes),
		cmocka_unit_test(test_probes_ipv6),
		cmocka_unit_test(test_counter_totals),
	};
	int rc;

	rc = env_setup();
	if (!rc) {
		rc = probe_test_run();
	}
	if (!rc) {
		rc = cmocka_run_group_tests(tests, NULL, NULL);
	}
	env_teardown();
	return rc;
}
