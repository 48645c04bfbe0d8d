// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * harp's steering program. It looks at each frame once, from the Ethernet header down to the UDP
 * destination port, and redirects only UDP packets aimed at harp's port range into the AF_XDP
 * socket bound to the frame's rx queue. Anything it does not fully understand goes to the kernel:
 * the program must never cost the node its SSH, kubelet or DNS traffic.
 *
 * One exception to "not understood: to the kernel": an IPv6 packet whose extension headers
 * (Hop-by-Hop, Routing, Fragment, Destination Options; at most HARP_XDP_IPV6_EXT_MAX of them) end
 * in a UDP header aimed at harp's port range is dropped and counted as refused. harp never sends
 * extension headers, and the kernel has no socket on those ports to give such a packet to. A
 * first fragment of such a packet is refused the same way (its UDP header is there); a later
 * fragment has none and goes to the kernel, as does a chain the walk cannot follow to its end
 * (AH, ESP, any other header, a chain longer than the limit or cut by the end of the buffer).
 * IPv4 with options or fragmented goes to the kernel.
 *
 * Settings live in the harp_config map (struct harp_xdp_config), written after load by whoever
 * loaded the program: the library (steer.c) or harp-attach. A map rather than read-only data, so
 * that a program loaded by xdp-loader, which cannot set rodata, can be configured after the fact.
 * Every map is pinned by name, so `xdp-loader load --pin-path DIR` leaves them in DIR for harp
 * processes to open; the library clears the pin paths when it loads the program itself.
 *
 * Multi-buffer aware (SEC "xdp.frags"): a driver that runs XDP on frames larger than one buffer
 * (veth, virtio-net, mlx5, ice, ENA from 2.14) takes it at any MTU, so a node keeps its jumbo
 * MTU (9001 on EKS, 8896 on GCP). The program reads only the first buffer (data to data_end),
 * which holds every header it looks at in any frame it steers: it never touches the rest, and a
 * frame too short there for a header goes to the kernel as before. harp's own packets larger
 * than one UMEM frame arrive in the socket as descriptor chains (XDP_USE_SG), and the copy-mode
 * socket takes a packet that the driver spread over buffers the same way.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "harp_shared.h"

struct vlan_hdr_min {
	__be16 tci;
	__be16 encapsulated_proto;
};

/* The IPv6 Fragment header (RFC 8200, 4.5): 8 bytes whatever its second byte says. */
struct ipv6_frag_min {
	__u8 nexthdr;
	__u8 reserved;
	__be16 frag_off; /* offset in 8-byte units (13 bits), 2 reserved bits, M (more follow) */
	__be32 identification;
};

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, HARP_XDP_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME); /* xdp-loader --pin-path pins it by name */
} xsks_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HARP_XDP_COUNTER_MAX);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME); /* xdp-loader --pin-path pins it by name */
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct harp_xdp_config);
	__uint(pinning, LIBBPF_PIN_BY_NAME); /* xdp-loader --pin-path pins it by name */
} harp_config SEC(".maps");

/* Per receiving connection, the rx queues its probes arrived on (bit q: queue q). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HARP_XDP_PROBE_ENTRIES);
	__type(key, struct harp_xdp_probe_key);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME); /* xdp-loader --pin-path pins it by name */
} probe_queues SEC(".maps");

/* Who holds each queue (struct harp_queue_owner), written by the harp processes themselves. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HARP_XDP_MAX_QUEUES);
	__type(key, __u32);
	__type(value, struct harp_queue_owner);
	__uint(pinning, LIBBPF_PIN_BY_NAME); /* xdp-loader --pin-path pins it by name */
} queue_owners SEC(".maps");

static __always_inline int count(__u32 which, int verdict)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &which);

	if (c) {
		*c += 1;
	}
	return verdict;
}

/* Returns the UDP header if the L4 payload of this IPv4 packet is UDP we may inspect, else NULL. */
static __always_inline struct udphdr *udp_of_ipv4(void *l3, void *end)
{
	struct iphdr *ip = l3;

	if ((void *)(ip + 1) > end) {
		return NULL; /* truncated IPv4 header */
	}
	if (ip->version != 4 || ip->ihl != 5) {
		return NULL; /* not IPv4, or IP options: harp never sends options */
	}
	if (ip->protocol != IPPROTO_UDP) {
		return NULL;
	}
	if (ip->frag_off & bpf_htons(0x3fff)) {
		return NULL; /* a fragment (MF set or non-zero offset): the kernel reassembles */
	}
	return (struct udphdr *)(ip + 1);
}

/* The extension headers the walk steps over; AH and ESP are not among them. */
static __always_inline int ipv6_is_ext(__u8 nexthdr)
{
	return nexthdr == IPPROTO_HOPOPTS || nexthdr == IPPROTO_ROUTING ||
	       nexthdr == IPPROTO_FRAGMENT || nexthdr == IPPROTO_DSTOPTS;
}

/*
 * Steps over the chain of extension headers that starts at *hdr with kind *nexthdr, leaving both
 * at the first header that is not one. 0 once there; -1 when the walk stops short: a header cut
 * by the end of the first buffer, a chain longer than HARP_XDP_IPV6_EXT_MAX, or a fragment past
 * the first (the L4 header is in the first fragment alone).
 */
static __always_inline int ipv6_skip_ext(void **hdr, __u8 *nexthdr, void *end)
{
	void *h = *hdr;
	__u8 next = *nexthdr;
	int i;

	for (i = 0; i < HARP_XDP_IPV6_EXT_MAX && ipv6_is_ext(next); i++) {
		struct ipv6_opt_hdr *opt = h;

		if (next == IPPROTO_FRAGMENT) {
			struct ipv6_frag_min *frag = h;

			if ((void *)(frag + 1) > end || (frag->frag_off & bpf_htons(0xfff8))) {
				return -1; /* truncated, or a later fragment: no UDP header in it */
			}
			next = frag->nexthdr;
			h = frag + 1;
			continue;
		}
		if ((void *)(opt + 1) > end) {
			return -1; /* truncated */
		}
		next = opt->nexthdr;
		h += ((__u32)opt->hdrlen + 1) * 8; /* hdrlen counts 8-byte units past the first */
	}
	if (ipv6_is_ext(next)) {
		return -1; /* a longer chain than any sender has reason for */
	}
	*hdr = h;
	*nexthdr = next;
	return 0;
}

/*
 * Returns the UDP header if the L4 payload of this IPv6 packet is UDP we may inspect, else NULL;
 * *ext says whether extension headers came before it.
 */
static __always_inline struct udphdr *udp_of_ipv6(void *l3, void *end, int *ext)
{
	struct ipv6hdr *ip6 = l3;
	void *l4;
	__u8 next;

	if ((void *)(ip6 + 1) > end) {
		return NULL; /* truncated IPv6 header */
	}
	if (ip6->version != 6) {
		return NULL; /* the IPv6 ethertype over another version */
	}
	next = ip6->nexthdr;
	l4 = ip6 + 1;
	*ext = next != IPPROTO_UDP;
	if (ipv6_skip_ext(&l4, &next, end) || next != IPPROTO_UDP) {
		return NULL; /* TCP, ICMPv6, AH, ESP, a chain the walk could not follow, ... */
	}
	return l4;
}

static __always_inline int is_probe(const void *l4data, const void *end)
{
	const struct harp_xdp_hdr_min *h = l4data;

	if ((const void *)(h + 1) > end) {
		return 0; /* too short for a harp header: user space will refuse it */
	}
	return h->version == HARP_XDP_WIRE_VERSION && h->type == HARP_XDP_PKT_PROBE;
}

/* Marks the queue this probe arrived on, for the connection it names. */
static __always_inline void record_probe(const struct harp_xdp_hdr_min *h, __u32 queue)
{
	struct harp_xdp_probe_key key = { .token = h->token, .conn_id = h->conn_id };
	__u64 bit = queue < 64 ? 1ull << queue : 0, *seen;

	count(HARP_XDP_PROBES, 0);
	seen = bpf_map_lookup_elem(&probe_queues, &key);
	if (seen) {
		__sync_fetch_and_or(seen, bit);
	} else if (bpf_map_update_elem(&probe_queues, &key, &bit, BPF_NOEXIST)) {
		/* another CPU inserted it first: add our bit to its entry */
		seen = bpf_map_lookup_elem(&probe_queues, &key);
		if (seen) {
			__sync_fetch_and_or(seen, bit);
		}
	}
}

SEC("xdp.frags")
int harp_xdp_steer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct udphdr *udp = NULL;
	void *l3;
	const struct harp_xdp_config *cfg;
	__u16 proto, dport;
	__u32 queue = ctx->rx_queue_index, zero = 0;
	int ext = 0;

	if ((void *)(eth + 1) > end) {
		return count(HARP_XDP_PASSED, XDP_PASS); /* runt frame: not ours to judge */
	}
	proto = eth->h_proto;
	l3 = eth + 1;
	if (proto == bpf_htons(ETH_P_8021Q)) {
		struct vlan_hdr_min *vlan = l3;

		if ((void *)(vlan + 1) > end) {
			return count(HARP_XDP_PASSED, XDP_PASS); /* truncated 802.1Q tag */
		}
		proto = vlan->encapsulated_proto;
		l3 = vlan + 1;
	}
	if (proto == bpf_htons(ETH_P_IP)) {
		udp = udp_of_ipv4(l3, end);
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		udp = udp_of_ipv6(l3, end, &ext);
	}
	if (!udp || (void *)(udp + 1) > end) {
		return count(HARP_XDP_PASSED, XDP_PASS); /* ARP, ICMP, TCP, truncated UDP, ... */
	}
	dport = bpf_ntohs(udp->dest);
	cfg = bpf_map_lookup_elem(&harp_config, &zero);
	if (!cfg || !cfg->port_lo || dport < cfg->port_lo || dport > cfg->port_hi) {
		return count(HARP_XDP_PASSED, XDP_PASS); /* someone else's UDP (DNS, VXLAN, ...) */
	}
	if (ext) {
		/* harp's port behind IPv6 extension headers: not harp's packet, and no socket of
		 * the kernel's would take it either */
		return count(HARP_XDP_REFUSED, XDP_DROP);
	}
	if (is_probe(udp + 1, end)) {
		record_probe((const struct harp_xdp_hdr_min *)(udp + 1), queue);
		if (queue >= HARP_XDP_MAX_QUEUES || !bpf_map_lookup_elem(&xsks_map, &queue)) {
			/* recorded; nobody here can answer it, and the kernel need not either */
			return count(HARP_XDP_PROBE_NO_SOCKET, XDP_DROP);
		}
	}
	if (queue >= HARP_XDP_MAX_QUEUES || !bpf_map_lookup_elem(&xsks_map, &queue)) {
		/* harp's port, but no harp socket on this queue: the kernel answers with ICMP. */
		return count(HARP_XDP_NO_SOCKET, XDP_PASS);
	}
	/* Ours: into the AF_XDP socket of this rx queue; XDP_PASS if it vanished meanwhile. */
	count(HARP_XDP_STEERED, 0);
	return bpf_redirect_map(&xsks_map, queue, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
