/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One AF_XDP socket on one (interface, queue), with its own UMEM and frame pool. Frames cycle:
 * pool -> fill ring -> rx ring -> (engine copies payload out) -> fill ring again; and
 * pool -> tx ring -> completion ring -> pool. Only the engine that owns the port touches it.
 */
#ifndef HARP_XSK_H
#define HARP_XSK_H

#include <xdp/xsk.h>

#include "internal.h"

struct xsk_port {
	struct umem_area area;
	struct frame_pool pool;
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
	bool zerocopy;
	int zc_refused;       /* bound in copy mode after the zero-copy bind failed with this errno */
	const char *zc_quirk; /* bound in copy mode, zero copy untried: the driver's known fault */
	bool no_refill;	      /* test builds' stall fault: received frames go to the pool instead */
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
/* Moves every transmitted frame on the completion ring back to the pool; returns how many. */
uint32_t xsk_port_reclaim(struct xsk_port *p);
/* Tells the kernel about submitted TX descriptors when it asks for a wake-up. */
int xsk_port_kick(struct xsk_port *p);
/* The driver behind ifname as ethtool -i names it ("virtio_net"); "" where it cannot say. */
void xsk_driver_name(const char *ifname, char *out, size_t len);
/* Reads XDP_STATISTICS. */
int xsk_port_stats(const struct xsk_port *p, struct harp_queue_stats *st);

#endif
