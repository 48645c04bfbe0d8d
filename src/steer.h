/* SPDX-License-Identifier: Apache-2.0 */
/* The steering program on one interface: load with its settings, attach, count, detach. */
#ifndef HARP_STEER_H
#define HARP_STEER_H

#include <pthread.h>

#include "internal.h"

struct harp_xdp;
struct xdp_program;

struct steer {
	struct harp_xdp *skel;
	struct xdp_program *prog;
	int ifindex;
	int xdp_mode; /* enum xdp_attach_mode it was attached with */
	uint32_t attached_id; /* the XDP program id on the interface once steering began; 0: not
			       * known (through the agent, this process asks the kernel nothing) */
	int xsks_map_fd, counters_fd, config_fd;
	int probe_map_fd; /* where probes arrived; -1 with a program older than probes */
	int owners_fd;	  /* queue_owners; -1 with a program older than shared interfaces */
	int lock_fd; /* flock held while attached: one harp per interface */
	char lock_path[128]; /* its file, removed as the lock goes */
	bool pinned; /* harp-attach's program and maps: nothing of ours to detach */
	int agent_fd; /* connected to the node agent, which holds the maps for us; else -1 */
	pthread_mutex_t agent_lock; /* one request at a time on agent_fd (engines in threads) */
	/* FORGETs an engine could not send at once (agent_lock was taken): whoever takes the
	 * lock next sends them. agent_forget_lock guards the list alone, never held over I/O. */
	pthread_mutex_t agent_forget_lock;
	struct {
		uint32_t conn_id;
		uint64_t token;
	} agent_forget[32];
	int agent_nforget;
	/* to connect again to an agent that went away (restarted): where, for what, and the
	 * socket of each queue entered through it (-1: none) */
	char agent_path[108];
	char agent_ifname[16];
	int agent_entered[64]; /* HARP_XDP_MAX_QUEUES (steer.c checks) */
};

/*
 * Uses, in this order: the node agent listening at params->agent_socket (harp-attach run starts
 * it), through which this process makes no bpf() call; the program harp-attach pinned under
 * params->pin_root/ifname when that directory exists; else its own (params->xdp_mode), loaded
 * and attached for UDP ports port_lo..port_hi. It says which.
 */
int steer_attach(struct steer *s, const char *ifname, int ifindex, uint16_t port_lo,
		 uint16_t port_hi, const struct harp_params *params);
void steer_detach(struct steer *s);
/*
 * When harp's connections go silent: is the XDP program that was attached when steering began
 * still there? Writes a sentence saying what changed (detached, or replaced by program id N)
 * into buf, or "" when nothing did or it cannot be known.
 */
void steer_check_attached(struct steer *s, char *buf, size_t len);
/*
 * Enters the AF_XDP socket fd bound to queue in the XSKMAP, or takes it out (a queue with no
 * socket there is out already). 0, or -errno, said in an ERROR or WARN line.
 */
int steer_enter(struct steer *s, int queue, int fd);
int steer_leave(struct steer *s, int queue);
/*
 * Sums the per-CPU counters into st's xdp_steered, passed, no_socket, probes, probe_no_socket and
 * refused (0 where a pinned program older than the counter has none).
 */
int steer_counters(struct steer *s, struct harp_queue_stats *st);
/*
 * The rx queues (bit q: queue q) on which the XDP program saw probes naming this connection (id
 * and token as the probes carry them, host order), into *queues: 0 when none arrived. Returns
 * 0; -ENOENT when nothing records probes here (an XDP program without the map); -EBUSY when it
 * cannot be known at once: called from an engine's pass, it does not wait for another request
 * to the node agent, and waits 20 ms at most for the agent's answer (-ETIMEDOUT); or the error
 * the map or the agent gave.
 */
int steer_probe_queues(struct steer *s, uint32_t conn_id, uint64_t token, uint64_t *queues);
/*
 * queue_owners: steer_claim records this process as the holder of queue (it has just bound it);
 * steer_release clears the record if it is still ours; steer_owner_text describes the recorded
 * holder of a queue that refused us, into buf ("" when nothing is recorded).
 */
void steer_claim(struct steer *s, int queue);
void steer_release(struct steer *s, int queue);
void steer_owner_text(struct steer *s, int queue, char *buf, size_t len);
/*
 * Forgets a connection's record (it closed). Called from engines' passes: never waits on the
 * agent (the request goes without waiting for its answer, or later with the next request).
 * 0 (a record that was not there is forgotten already), or the map's -errno.
 */
int steer_probe_forget(struct steer *s, uint32_t conn_id, uint64_t token);

#endif
