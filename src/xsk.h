/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One AF_XDP socket on one (interface, queue), with its own UMEM and frame pool. Frames cycle:
 * pool -> fill ring -> rx ring -> (engine copies payload out) -> fill ring again; and
 * pool -> tx ring -> completion ring -> pool. Only the engine that owns the port touches it.
 *
 * Multi-buffer (XDP_USE_SG, kernel 6.6+ in copy mode, drivers that say so in zero copy): a packet
 * larger than a frame travels as a chain of descriptors, XDP_PKT_CONTD on all but the last. A
 * UMEM frame is at most a page, so transmit frames then come from slots of XSK_SLOT_BYTES, whole
 * contiguous runs of frames in the UMEM's upper half: a frame is written as one buffer and cut
 * into its chain only when it leaves. A received chain lands in whatever frames the fill ring
 * gave (each holds frame_size - 256 bytes of it) and is gathered by xsk_port_gather.
 */
#ifndef HARP_XSK_H
#define HARP_XSK_H

#include <xdp/xsk.h>

#include "internal.h"
#include "wire.h"

#ifndef XDP_USE_SG
#define XDP_USE_SG (1 << 4) /* kernel 6.6+; Debian 12's headers predate it */
#endif
#ifndef XDP_PKT_CONTD
#define XDP_PKT_CONTD (1 << 0)
#endif

#define XSK_SLOT_BYTES 16384u /* a multi-buffer transmit frame: the largest frame harp sends */
/* The most descriptors a received packet may span: the kernel's limit (MAX_SKB_FRAGS + 1). */
#define XSK_CHAIN_MAX WIRE_PIECES_MAX
/* Bytes the kernel keeps in front of every received piece (XDP_PACKET_HEADROOM). */
#define XSK_RX_HEADROOM 256u

struct xsk_port {
	struct umem_area area;
	struct frame_pool pool;	 /* frames for the fill ring, and for transmit without slots */
	struct frame_pool slots; /* multi-buffer: transmit frames, XSK_SLOT_BYTES each */
	uint64_t slot_base;	 /* UMEM offset of the first slot; 0: no slots */
	bool sg;		 /* bound with XDP_USE_SG: packets may span descriptor chains */
	bool busy_poll;		 /* SO_PREFER_BUSY_POLL taken: each pass polls the queue */
	uint64_t busy_polls;	 /* polls of the queue (recvfrom) the engine made */
	bool sg_refused;	 /* multi-buffer was asked for and the bind refused it */
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	struct xsk_ring_prod fill, tx;
	struct xsk_ring_cons comp, rx;
	int fd;
	int queue;
	uint32_t ring_size;
	uint32_t fill_target; /* frames kept on the fill ring: grows with bursts, up to ring_size */
	uint32_t tx_pending;  /* descriptors submitted since the last kick */
	uint64_t fill_grows;  /* times the fill ring was deepened */
	uint64_t rx_kicks;    /* wake-ups asked for by the fill ring (zero-copy drivers) */
	uint64_t tx_kicks;    /* sendto() wake-ups of the TX ring */
	uint64_t tx_kick_busy; /* of those, the kernel pushed back (EAGAIN, EBUSY, ENOBUFS) */
	uint64_t tx_kick_held; /* kicks held back after a push-back, waiting for completions */
	bool kick_held;	       /* the last kick was pushed back: wait before the next */
	uint32_t kick_comp;    /* the completion ring's producer when it was */
	uint32_t kick_wait;    /* completions to see after it before kicking again */
	uint64_t kick_held_ns; /* when it was */
	int sndbuf;	       /* the send buffer the socket got (SO_SNDBUF's reading) */
	bool zerocopy;
	int zc_refused;       /* bound in copy mode after the zero-copy bind failed with this errno */
	const char *zc_quirk; /* bound in copy mode, zero copy untried: the driver's known fault */
	bool no_refill;	      /* test builds' stall fault: received frames go to the pool instead */
	bool rx_skip;	      /* giving back the rest of a chain longer than a peek (headless) */
};

/*
 * The fill ring starts this deep, not full. Frames go round it in order, so its depth is the
 * receive path's working set: a deep ring touches every frame before it reuses one, and a frame's
 * first touch is slow (cache, TLB, and on a VM with shadow paging a fault of the hypervisor's,
 * measured here at 3 us a page from user space and more from the kernel's side). A posted
 * receive deepens it to twice the packets it can take, and a burst that takes half of it
 * deepens it to ring_size: bulk transfers get the whole ring before their first burst.
 */
#define XSK_FILL_START 256

#define XSK_BUSY_WAIT_MS 1000 /* how long a queue another socket holds is waited for, normally */
/*
 * Creates the UMEM and the socket bound to ifname/queue (zero-copy first unless told otherwise)
 * and fills the fill ring; the caller enters the socket in the XSKMAP (steer_enter). A queue another
 * socket holds is tried again for busy_wait_ms (a dead process's socket outlives it a moment);
 * with 0, -EBUSY comes back at once and unreported, for a caller that can take another queue.
 */
int xsk_port_open(struct xsk_port *p, const char *ifname, int queue,
		  const struct harp_params *params, int busy_wait_ms);
void xsk_port_close(struct xsk_port *p);

static inline uint8_t *xsk_port_frame(struct xsk_port *p, uint64_t addr)
{
	return (uint8_t *)p->area.base + addr;
}

/* Where transmit frames come from: slots when packets may span descriptors, else the pool. */
static inline struct frame_pool *xsk_port_txpool(struct xsk_port *p)
{
	return p->sg ? &p->slots : &p->pool;
}

/* Bytes one transmit frame may hold: a slot, or one frame. */
static inline uint32_t xsk_port_tx_max(const struct xsk_port *p)
{
	return p->sg ? XSK_SLOT_BYTES : p->pool.frame_size;
}

/* Descriptors a transmit frame of len bytes takes (one without multi-buffer). */
static inline uint32_t xsk_port_tx_pieces(const struct xsk_port *p, uint32_t len)
{
	return p->sg ? (len + p->pool.frame_size - 1) / p->pool.frame_size : 1;
}

/* Descriptors a received packet of len bytes spans (one without multi-buffer). */
static inline uint32_t xsk_port_rx_pieces(const struct xsk_port *p, uint32_t len)
{
	uint32_t room = p->pool.frame_size - XSK_RX_HEADROOM;

	return p->sg ? (len + room - 1) / room : 1;
}

/*
 * The frame of len bytes at addr (a slot, or one frame) as its chain of descriptors on the TX
 * ring from slot idx on (reserved by the caller); returns how many it wrote.
 */
uint32_t xsk_port_chain(struct xsk_port *p, uint32_t idx, uint64_t addr, uint32_t len);

/*
 * The UMEM area and pools for nframes frames of frame_size: all frames in the pool, or with
 * slots, the lower half in the pool and the upper half cut into transmit slots.
 */
int xsk_port_layout(struct xsk_port *p, uint32_t nframes, uint32_t frame_size, bool slots,
		    int hugepages_mode);
void xsk_port_unlayout(struct xsk_port *p);

/*
 * The packet whose first descriptor is rx descriptor idx, of n peeked from there (the rest of a
 * peek that began at the ring's consumer position): returns how many descriptors it spans (at
 * least 1) with its pieces in *pk, where they lie. Returns 0 when its chain goes on past the n
 * descriptors (the rest is not on the ring yet, or not in this peek: the caller peeks again from
 * idx), and -k when the k descriptors from idx are to be given back unread: a chain of more than
 * XSK_CHAIN_MAX pieces, a piece that crosses its frame's end, or a chain of more than cap bytes
 * (k = the whole chain). A chain longer than a whole peek goes as it comes: the n now, and the
 * rest from the next peek on, until its last piece (rx_skip), each batch of it a -k of its own.
 */
int xsk_port_gather(struct xsk_port *p, uint32_t idx, uint32_t n, uint32_t cap,
		    struct wire_pieces *pk);

/*
 * Gives the frames of rx descriptors idx..idx+n-1 back to the fill ring (the caller releases the
 * descriptors afterwards), with more from the pool, up to ring_size, when the kernel had under
 * half of the ring's depth left.
 */
void xsk_port_refill(struct xsk_port *p, uint32_t idx, uint32_t n);
/* Deepens the fill ring, if needed, so that it holds twice n packets (up to ring_size). */
void xsk_port_expect(struct xsk_port *p, uint64_t n);
/* Wakes the driver when the fill ring asks for it (zero-copy drivers stop when it ran dry). */
void xsk_port_wake_rx(struct xsk_port *p);
/* With busy polling: runs the queue's NAPI poll once, here (a recvfrom that does not wait). */
void xsk_port_busy_poll(struct xsk_port *p);
/* Moves every transmitted frame on the completion ring back to its pool; returns how many packets
 * completed (a chain counts once). */
uint32_t xsk_port_reclaim(struct xsk_port *p);
/*
 * Tells the kernel about submitted TX descriptors when it asks for a wake-up. After the kernel
 * pushed back (its send buffer full, the driver's queue busy) the next kick waits until half of
 * what the kernel then held has completed, or XSK_KICK_HOLD_NS have passed: kicking on every pass
 * meanwhile is a storm of system calls that each move a frame or none.
 */
#define XSK_KICK_HOLD_NS 1000000ull
int xsk_port_kick(struct xsk_port *p, uint64_t now);
/* The driver behind ifname as ethtool -i names it ("virtio_net"); "" where it cannot say. */
void xsk_driver_name(const char *ifname, char *out, size_t len);
/* Reads XDP_STATISTICS. */
int xsk_port_stats(const struct xsk_port *p, struct harp_queue_stats *st);

#endif
