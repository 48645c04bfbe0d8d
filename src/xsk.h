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
	uint32_t tx_pending; /* descriptors submitted since the last kick */
	bool zerocopy;
};

#define XSK_BUSY_WAIT_MS 1000 /* how long a queue another socket holds is waited for, normally */
/*
 * Creates the UMEM and the socket bound to ifname/queue (zero-copy first unless told otherwise),
 * fills the fill ring, and enters the socket in xsks_map_fd at index queue. A queue another
 * socket holds is tried again for busy_wait_ms (a dead process's socket outlives it a moment);
 * with 0, -EBUSY comes back at once and unreported, for a caller that can take another queue.
 */
int xsk_port_open(struct xsk_port *p, const char *ifname, int queue,
		  const struct harp_params *params, int xsks_map_fd, int busy_wait_ms);
void xsk_port_close(struct xsk_port *p, int xsks_map_fd);

static inline uint8_t *xsk_port_frame(struct xsk_port *p, uint64_t addr)
{
	return (uint8_t *)p->area.base + addr;
}

/* Moves every transmitted frame on the completion ring back to the pool; returns how many. */
uint32_t xsk_port_reclaim(struct xsk_port *p);
/* Tells the kernel about submitted TX descriptors when it asks for a wake-up. */
int xsk_port_kick(struct xsk_port *p);
/* Reads XDP_STATISTICS. */
int xsk_port_stats(const struct xsk_port *p, struct harp_queue_stats *st);

#endif
