/* SPDX-License-Identifier: Apache-2.0 */
/*
 * harp: a reliable, message-oriented transport over AF_XDP.
 *
 * Objects and who owns them:
 *   harp_ctx       one interface and its engines (one per queue). Created and destroyed by the
 *                  caller; owns every listener, connection and request made from it.
 *   harp_listener  a passive endpoint named by a harp_handle (at most 128 bytes, copyable to
 *                  another host by any means).
 *   harp_conn      one reliable, ordered message connection. After harp_conn__close() the
 *                  caller must not touch it or its requests again.
 *   harp_req       one isend or irecv. Owned by the library; invalid once harp_req__test() has
 *                  reported it done or failed.
 *   harp_mr        a registered memory region (host memory, or device memory reached
 *                  through the caller's copies: harp_mr__reg_device).
 *
 * Every function returns 0 (or a count) on success and a negative errno on failure; constructors
 * return NULL and set errno. -EAGAIN means "not yet, call again". Nothing blocks: connection
 * set-up and data both progress when the caller calls harp_conn__establish(), harp_req__test()
 * or harp_ctx__progress().
 *
 * Threads: set-up calls (listen, accept, connect, establish, close) and data calls (isend, irecv,
 * test) may come from two different threads; one connection's data calls come from one thread.
 */
#ifndef HARP_HARP_H
#define HARP_HARP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HARP_API __attribute__((visibility("default")))

/* The opaque connection handle. It must fit NCCL_NET_HANDLE_MAXSIZE. */
#define HARP_HANDLE_SIZE 128
/*
 * harp_listen() zeroes a handle and fills its first HARP_HANDLE_USED bytes; harp_connect() reads
 * only those. The rest are the caller's, e.g. for set-up state kept beside the handle.
 */
#define HARP_HANDLE_USED 64
struct harp_handle {
	unsigned char bytes[HARP_HANDLE_SIZE];
};

struct harp_ctx;
struct harp_listener;
struct harp_conn;
struct harp_req;
struct harp_mr;

enum harp_log_level {
	HARP_LOG_ERROR = 0,
	HARP_LOG_WARN = 1,
	HARP_LOG_INFO = 2,
	HARP_LOG_DEBUG = 3,
};

typedef void (*harp_print_fn)(enum harp_log_level level, const char *msg);
/* Routes the library's log lines to fn (NULL: stderr). Returns the previous function. */
HARP_API harp_print_fn harp_set_print(harp_print_fn fn);

/*
 * Options for harp_ctx__create(). Zero or NULL fields take the value of the matching HARP_*
 * environment variable, then the built-in default (see `harp-params --dump`).
 */
struct harp_ctx_opts {
	size_t sz;		/* sizeof(struct harp_ctx_opts) */
	const char *ifname;	/* HARP_IFNAME */
	int queues;		/* HARP_QUEUES: engines on queues 0..queues-1 */
	int port_base;		/* HARP_PORT_BASE */
	int mtu;		/* HARP_MTU: cap below the interface's MTU */
	size_t :0;
};
#define HARP_CTX_OPTS_SZ_V1 (offsetof(struct harp_ctx_opts, mtu) + sizeof(int))

HARP_API struct harp_ctx *harp_ctx__create(const struct harp_ctx_opts *opts);
/* Closes what is still open and detaches; first waits (at most HARP_PEER_TIMEOUT_MS and a
 * second) until closed connections' small sends, complete but not yet acked, are acked. */
HARP_API void harp_ctx__destroy(struct harp_ctx *ctx);
/* Runs every engine once: receive, transmit, timers. Returns packets handled or -errno. */
HARP_API int harp_ctx__progress(struct harp_ctx *ctx);

enum harp_xdp_mode {
	HARP_MODE_COPY = 1,	 /* AF_XDP copy mode */
	HARP_MODE_ZEROCOPY = 2, /* AF_XDP zero-copy */
};

struct harp_ctx_info {
	char ifname[16];
	int ifindex;
	int queues;
	int mtu;		/* IP MTU harp uses */
	int payload_max;	/* message payload bytes per packet */
	enum harp_xdp_mode mode;
	int hugepages;		/* 1 when UMEM sits on hugepages */
	int xdp_native;		/* 1: the XDP program runs in the driver; 0: generic (skb) mode */
	uint32_t ipv4;		/* network order; 0: the interface has none */
	uint16_t port_base;
	int xdp_pinned;		/* 1: harp-attach's program and pinned maps; 0: loaded by this process */
	int speed_mbps;		/* link speed: the driver's, else HARP_SPEED_MBPS, else 10000 */
	int speed_assumed;	/* 1: neither the driver nor HARP_SPEED_MBPS said (ENA): 10000 */
	int multi_buffer;	/* 1: packets larger than a UMEM frame span descriptor chains */
	int conns_max;		/* HARP_CONNS_MAX: connections open at once, at most */
	int cuda;		/* HARP_CUDA=on: the NCCL plugin takes GPU buffers */
	int nccl_devices;	/* HARP_NCCL_DEVICES: devices the NCCL plugin shows; 0: its choice */
	int engine_threads;	/* HARP_ENGINE_THREADS: engines running on threads of their own */
	int stripes;		/* HARP_STRIPES: connections the NCCL plugin spreads a comm over */
	int family;		/* AF_INET or AF_INET6: harp's listeners' family (HARP_FAMILY) */
	unsigned char ip6[16];	/* the interface's IPv6 address (as harp picks it); 0: none */
	int peer_timeout_ms;	/* HARP_PEER_TIMEOUT_MS */
};
HARP_API int harp_ctx__info(const struct harp_ctx *ctx, struct harp_ctx_info *info);

/*
 * Reads the node profile (HARP_CONF) and every HARP_* variable as harp_ctx__create() would,
 * without opening anything: 0, or a negative errno with err holding one line that names the
 * setting, its value and what is accepted.
 */
HARP_API int harp_settings_check(char *err, size_t errlen);

/* Per-queue counters: AF_XDP's XDP_STATISTICS plus the engine's own. */
struct harp_queue_stats {
	uint64_t rx_packets, tx_packets;
	uint64_t rx_bad;		/* failed a header, checksum or bounds check: dropped */
	uint64_t rx_unknown_conn;	/* no connection with that id and token: dropped */
	uint64_t tx_ring_full;
	uint64_t xdp_rx_dropped, xdp_rx_invalid_descs, xdp_tx_invalid_descs;
	uint64_t xdp_rx_ring_full, xdp_rx_fill_ring_empty, xdp_tx_ring_empty;
	uint64_t xdp_steered, xdp_passed, xdp_no_socket; /* the XDP program's counters */
	uint64_t xdp_probes;	      /* path probes the program saw, on any queue */
	uint64_t xdp_probe_no_socket; /* of those, on a queue with no socket (dropped) */
	uint64_t rx_probes;	      /* probes that reached their connection's engine */
	uint64_t rx_probes_elsewhere; /* probes of a connection another engine owns: ignored */
	uint64_t fill_depth;	      /* frames kept on the fill ring now */
	uint64_t fill_grows;	      /* times a burst nearly emptied it, and it grew */
	uint64_t rx_kicks;	      /* wake-ups the fill ring asked for (zero-copy drivers) */
	uint64_t tx_kick_errors;      /* TX wake-ups that failed (each WARN line says how many) */
	uint64_t tx_bundled;	      /* records sent in a frame another record opened */
	uint64_t rx_bad_auth; /* HARP_AUTH: a frame of a connection whose MAC failed: dropped */
	uint64_t rx_probes_pair_taken; /* probes on a port pair another engine here owns: not
					* confirmed (a tap's flow steering would move the pair) */
	uint64_t rx_steer; /* STEER frames the peer sent to keep a tap's steering: ignored */
	uint64_t rx_chains;    /* multi-buffer: packets that came as chains of descriptors */
	uint64_t tx_chains;    /* multi-buffer: packets sent as chains of descriptors */
	uint64_t rx_bad_chain; /* descriptor chains given back unread (too long, a piece past its
				* frame, larger than a packet harp takes) */
	uint64_t busy_polls; /* HARP_BUSY_POLL_US: polls of the NIC queue the engine made */
	uint64_t tx_kicks;   /* TX wake-ups (sendto) made: tx_packets / tx_kicks frames per kick */
	uint64_t rx_replayed; /* HARP_AUTH: a frame with the peer's MAC whose counter was taken
			       * already or is past the replay window: dropped */
	uint64_t xdp_refused; /* the XDP program's count of packets to harp's ports in a shape
			       * harp never sends (IPv6 extension headers): dropped */
	uint64_t tx_kick_busy; /* TX wake-ups the kernel pushed back (EAGAIN, EBUSY, ENOBUFS) */
	uint64_t tx_kick_held; /* passes that held their wake-up back after one, waiting for
				* transmitted frames to complete */
	uint64_t tx_sndbuf;    /* the AF_XDP socket's send buffer in bytes (copy mode's skbs) */
	uint64_t rx_placed;    /* bulk DATA whose checksum was checked as its body was copied
				* into place: one pass over the bytes, not two */
};
HARP_API int harp_ctx__queue_stats(struct harp_ctx *ctx, int queue, struct harp_queue_stats *st);

/* Listening: the handle names this listener to one peer. */
HARP_API int harp_listen(struct harp_ctx *ctx, struct harp_handle *handle,
			 struct harp_listener **listener);
/*
 * Returns 0 and a connection whose peer presented this listener's handle (finish it with
 * harp_conn__establish()), or -EAGAIN while none has. Each call also moves on the set-ups under
 * way; one that fails (a stray or hostile connection, a wrong handle, silence past
 * HARP_CONNECT_TIMEOUT_MS) is dropped and logged, never returned. Another error is the
 * listener's own (e.g. -EMFILE).
 */
HARP_API int harp_listener__accept(struct harp_listener *listener, struct harp_conn **conn);
HARP_API void harp_listener__close(struct harp_listener *listener);

/* Starts connecting to the listener named by handle; finish with harp_conn__establish(). */
HARP_API int harp_connect(struct harp_ctx *ctx, const struct harp_handle *handle,
			  struct harp_conn **conn);
/* Drives set-up: 0 once established, -EAGAIN while in progress, another -errno on failure. */
HARP_API int harp_conn__establish(struct harp_conn *conn);
/* The NIC queue whose engine runs the connection once established; -ENOTCONN before. */
HARP_API int harp_conn__queue(const struct harp_conn *conn);
/* Releases the connection; pending requests are abandoned. Accepts NULL. */
HARP_API void harp_conn__close(struct harp_conn *conn);

HARP_API int harp_mr__reg(struct harp_ctx *ctx, void *addr, size_t len, struct harp_mr **mr);
HARP_API void harp_mr__dereg(struct harp_mr *mr);

/*
 * Device memory (a GPU's), which harp never reads or writes itself: every payload byte between
 * a buffer registered with harp_mr__reg_device() and harp's frames moves through the caller's
 * copies. copy() queues n asynchronous copies on a lane (an engine's index: one thread at a
 * time queues and waits on one lane); wait() returns once every copy queued on the lane is done.
 * harp waits before it seals a frame that a copy filled and before it completes a receive or
 * reuses a frame that a copy reads, so a copy's source and destination stay as they are until
 * then. host_register() is called once for each region of frames (UMEM) harp copies into or out
 * of, before the first copy that touches it, and host_unregister() when it goes (optional: NULL).
 * Each returns 0 or a negative errno; a failed copy or wait fails the lane's connections with
 * -EIO.
 */
enum harp_copy_dir {
	HARP_COPY_TO_HOST = 1,	 /* device buffer to frames: a send */
	HARP_COPY_TO_DEVICE = 2, /* frames to device buffer: a receive */
};
struct harp_copy {
	void *dst;
	const void *src;
	size_t len;
};
struct harp_device_ops {
	size_t sz; /* sizeof(struct harp_device_ops) */
	void *arg;
	int (*copy)(void *arg, int lane, enum harp_copy_dir dir, const struct harp_copy *v, int n);
	int (*wait)(void *arg, int lane);
	int (*host_register)(void *arg, void *addr, size_t len);
	void (*host_unregister)(void *arg, void *addr);
};
/* Once per context, before any device registration; ops is copied. -EBUSY if set already. */
HARP_API int harp_ctx__set_device(struct harp_ctx *ctx, const struct harp_device_ops *ops);
/* Like harp_mr__reg, for device memory; -EOPNOTSUPP without harp_ctx__set_device(). */
HARP_API int harp_mr__reg_device(struct harp_ctx *ctx, void *addr, size_t len,
				 struct harp_mr **mr);

/*
 * Posts a send of len bytes at buf with tag. buf must stay untouched until the request is done.
 * mr may be NULL. Returns 0 and *req, -EAGAIN when no request slot is free yet. Posting sends
 * nothing: the next harp_req__test() (or harp_ctx__progress()) sends what was posted since the
 * last one, together (the keeper thread does after HARP_IDLE_PROGRESS_US if no call comes).
 */
HARP_API int harp_conn__isend(struct harp_conn *conn, const void *buf, size_t len, uint32_t tag,
			      struct harp_mr *mr, struct harp_req **req);
/* Largest number of buffers one irecv may carry. */
#define HARP_RECV_MAX_BUFS 8
/*
 * Posts one receive of n buffers (1..HARP_RECV_MAX_BUFS), each with a capacity and a tag; the
 * tags of one receive differ. Receives take the peer's sends in order, n at a time, and each
 * send lands in the buffer of its tag (as NCCL's grouped receives do). A send larger than its
 * buffer fails on both sides with -EMSGSIZE. Like isend, it sends nothing itself (the peer
 * learns of it at the next harp_req__test()); a send of up to 256 bytes does not wait for that.
 */
HARP_API int harp_conn__irecv(struct harp_conn *conn, int n, void **bufs, const size_t *sizes,
			      const uint32_t *tags, struct harp_mr **mrs, struct harp_req **req);
/*
 * Drives progress and reports on req: returns 0 with *done = 0 while pending; 0 with *done = 1
 * when complete (sizes[i], if sizes is not NULL, receives each buffer's byte count; a send
 * reports one size); a negative errno when the request failed. Either way, once done or failed
 * the request is released.
 */
HARP_API int harp_req__test(struct harp_req *req, int *done, size_t *sizes);

/*
 * The peer's receive number rsn (the peer's irecvs on this connection count from 0, in the order
 * posted) as its announcements (CTS) described it: 0 with *n buffers, each one's capacity and
 * tag (room for HARP_RECV_MAX_BUFS), once all of them have arrived; -EAGAIN before (this call
 * runs the engine once when it may). For a caller that cuts a send by the buffer it will land in
 * (the NCCL plugin cuts large messages over several connections by the capacity the receiver
 * posted). Call it from the connection's data thread, for a receive that the sends it posted
 * have not all taken yet: the peer posts the receive that reuses its slot only later.
 */
HARP_API int harp_conn__peer_recv(struct harp_conn *conn, uint32_t rsn, int *n, size_t *caps,
				  uint32_t *tags);

struct harp_conn_stats {
	uint64_t tx_packets, tx_bytes, rx_packets, rx_bytes;
	uint64_t retransmits;		/* packets sent again, for any reason */
	uint64_t fast_retransmits;	/* of those, triggered by selective acks */
	uint64_t timeouts;		/* retransmission timer expiries */
	uint64_t spurious_timeouts;	/* of those, undone: the originals were acked after all */
	uint64_t rx_duplicates;		/* packets that arrived again and were dropped */
	uint64_t rx_out_of_order;
	uint64_t msgs_sent, msgs_received;
	uint32_t cwnd_bytes;		/* the paths' congestion windows, bytes of IP */
	uint32_t srtt_us, rto_us;
	int queue;
	uint32_t paths;		/* paths (UDP port pairs) in use now */
	uint32_t paths_retired; /* paths given up for not delivering */
	uint64_t probes_sent;	/* path probes sent */
	uint64_t random_losses; /* losses judged random (no queueing, low rate): window kept */
	uint64_t pings;		/* liveness pings sent while requests waited on a silent peer */
	uint64_t msgs_unsolicited; /* small sends that went before the peer's receive was known */
	uint64_t msgs_held;	   /* such messages that arrived before our receive: held for it */
	const char *auth;	   /* HARP_AUTH: the MAC every frame carries ("AES-256-GCM",
				    * "ChaCha20-Poly1305"), NULL: none */
	uint64_t probes_pair_taken; /* confirmed probes whose port pair another engine here
				     * took first: not used */
	uint64_t steers_sent; /* STEER frames sent on the peer's paths to us (conn_steer) */
	uint32_t pmtu;	      /* IP MTU its packets use now (path MTU discovery) */
	uint32_t pmtu_ceiling; /* the smaller of the two interfaces' MTUs */
	uint64_t pmtu_probes;  /* PMTU probes sent */
	uint64_t pmtu_drops;   /* times the path was found to carry less than the size in use */
	uint64_t seg_parts;    /* parts sent of packets cut again after the path MTU fell */
	uint32_t paths_rescued; /* of paths_retired, those replaced after retransmission
				 * timeouts found every path silent (none left to compare) */
	int family;		/* AF_INET or AF_INET6: the packets' (the listener's handle's) */
	uint64_t ctrl_refused;	/* HARP_AUTH: control messages whose MAC failed or whose counter
				 * was not new: not applied */
};
HARP_API int harp_conn__stats(const struct harp_conn *conn, struct harp_conn_stats *st);

/*
 * Interfaces that are up with an IPv4 or IPv6 address and match spec, read the way NCCL reads
 * NCCL_SOCKET_IFNAME: a comma-separated list of name prefixes; a leading '^' excludes them
 * instead; a leading '=' (after any '^') makes them exact names. NULL or "" means
 * "^docker,lo,virbr". Copies up to max names (kernel order) and returns how many matched, at
 * most HARP_IFMATCH_MAX, or a negative errno.
 */
#define HARP_IFMATCH_MAX 64
HARP_API int harp_ifname_match(const char *spec, char (*names)[16], int max);

/* Name of the interface's AF_XDP mode, for logs. */
HARP_API const char *harp_mode_name(enum harp_xdp_mode mode);

#ifdef __cplusplus
}
#endif
#endif
