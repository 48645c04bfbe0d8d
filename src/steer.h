/* SPDX-License-Identifier: Apache-2.0 */
/* The steering program on one interface: load with its settings, attach, count, detach. */
#ifndef HARP_STEER_H
#define HARP_STEER_H

#include "internal.h"

struct harp_xdp;
struct xdp_program;

struct steer {
	struct harp_xdp *skel;
	struct xdp_program *prog;
	int ifindex;
	int xdp_mode; /* enum xdp_attach_mode it was attached with */
	int xsks_map_fd, counters_fd, config_fd;
	int lock_fd; /* flock held while attached: one harp per interface */
	bool pinned; /* harp-attach's program and maps: nothing of ours to detach */
};

/*
 * Uses the program harp-attach pinned under params->pin_root/ifname when that directory exists,
 * else loads and attaches its own (params->xdp_mode) for UDP ports port_lo..port_hi.
 */
int steer_attach(struct steer *s, const char *ifname, int ifindex, uint16_t port_lo,
		 uint16_t port_hi, const struct harp_params *params);
void steer_detach(struct steer *s);
/* Sums the per-CPU counters into st's xdp_steered/passed/no_socket. */
int steer_counters(const struct steer *s, struct harp_queue_stats *st);

#endif
