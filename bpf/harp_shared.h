/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Structures shared between harp's XDP program and user space. Only fixed-width types, so the
 * same layout is read on both sides.
 */
#ifndef HARP_SHARED_H
#define HARP_SHARED_H

/* Index of each per-CPU counter in the program's `counters` map. */
enum harp_xdp_counter {
	HARP_XDP_STEERED = 0,	/* harp UDP packet redirected into the queue's AF_XDP socket */
	HARP_XDP_PASSED = 1,	/* anything else, handed to the kernel untouched */
	HARP_XDP_NO_SOCKET = 2, /* harp UDP packet, but no socket bound on this rx queue */
	HARP_XDP_PROBES = 3,	/* harp probes seen (steered or not); their queue is recorded */
	HARP_XDP_PROBE_NO_SOCKET = 4, /* of those, arrived on a queue with no socket: dropped */
	HARP_XDP_REFUSED = 5,	      /* UDP to harp's ports in a shape harp never sends (IPv6
				       * with extension headers): dropped */
	HARP_XDP_COUNTER_MAX = 6,
};

/*
 * Probes (docs/PROTOCOL.md, "Paths"): a peer sends them over candidate UDP port pairs, and the
 * program records which rx queue each arrived on, in the probe_queues map, keyed by the
 * receiving connection. Only probes pay for this; other packets are not looked at past UDP.
 */
#define HARP_XDP_WIRE_VERSION 3 /* HARP_WIRE_VERSION */
#define HARP_XDP_PKT_PROBE 5	/* HARP_PKT_PROBE */
#define HARP_XDP_PROBE_ENTRIES 4096

/* The first bytes of the harp header, as far as the program reads them. */
struct harp_xdp_hdr_min {
	__u8 version;
	__u8 type;
	__u8 buf_idx;
	__u8 nbufs;
	__u32 conn_id; /* network order */
	__u64 token;   /* as on the wire */
};

/* Key of probe_queues: the receiving connection, as its probes name it (wire byte order). */
struct harp_xdp_probe_key {
	__u64 token;
	__u32 conn_id;
	__u32 zero;
};

/*
 * IPv6 extension headers (Hop-by-Hop, Routing, Fragment, Destination Options) the program steps
 * over, at most, to find the UDP header behind them; a longer chain goes to the kernel.
 */
#define HARP_XDP_IPV6_EXT_MAX 8

/* Largest rx queue index the XSKMAP holds. */
#define HARP_XDP_MAX_QUEUES 64

/*
 * Entry q of queue_owners: the harp process that bound queue q, as it wrote itself in (user space
 * only; the program never reads it). Several harp processes share an interface that harp-attach
 * prepared, each on its own queues; the kernel lets one AF_XDP socket bind a queue and frees it
 * when its process dies, however it dies, and this record names the holder to the one refused.
 * pid 0: none recorded.
 */
struct harp_queue_owner {
	__u32 pid;	/* in the owner's pid namespace */
	__u32 pidns;	/* inode of that pid namespace */
	__u64 since_ns; /* CLOCK_REALTIME when it bound the queue */
	char comm[16];	/* its process name */
};

/*
 * The program's settings: entry 0 of the harp_config array map. Whoever loads the program writes
 * it before harp traffic is expected (the library before attaching; harp-attach right after
 * xdp-loader, with bpftool). Until then port_lo is 0 and every packet goes to the kernel.
 */
struct harp_xdp_config {
	__u16 port_lo;	 /* inclusive UDP destination port range that belongs to harp, host order */
	__u16 port_hi;
	__u32 attach_id; /* the XDP program id the interface reports while this program runs on it
			  * (the program's own, or libxdp's dispatcher's); 0: not recorded */
	__u32 ifindex;	 /* the interface it was attached to; 0: not recorded */
	__u32 reserved;	 /* 0 */
};

#endif
