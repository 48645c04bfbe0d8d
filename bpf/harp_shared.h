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
	HARP_XDP_COUNTER_MAX = 3,
};

/* Largest rx queue index the XSKMAP holds. */
#define HARP_XDP_MAX_QUEUES 64

#endif
