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
	int xsks_map_fd, counters_fd;
	int lock_fd; /* flock held while attached: one harp per interface */
};

int steer_attach(struct steer *s, const char *ifname, int ifindex, uint16_t port_lo,
		 uint16_t port_hi, int xdp_mode_param);
void steer_detach(struct steer *s);
/* Sums the per-CPU counters into st's xdp_steered/passed/no_socket. */
int steer_counters(const struct steer *s, struct harp_queue_stats *st);

#endif
