/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node agent's protocol (docs/OPERATIONS.md, "The node agent"), version 4, and its client.
 *
 * harp-agent runs beside harp-attach on a prepared node and serves a Unix socket of type
 * SOCK_SEQPACKET: one message per packet, each a struct harp_agent_msg in both directions,
 * the answer always of the request's op (every op but FORGET is answered). A harp process that
 * may not call bpf() (a pod under its runtime's default seccomp profile) says HELLO with its
 * interface, then hands each bound AF_XDP socket over with ENTER (the descriptor travels as
 * SCM_RIGHTS); the agent enters it in the pinned XSKMAP and records the process as the queue's
 * holder, and forgets those records when the connection closes (the kernel takes a closed
 * socket out of the map by itself). COUNTERS, PROBE, FORGET and OWNER read or clear the other
 * pinned maps for it. Both ends
 * check what they receive with ctrlmsg_agent_check (ctrlmsg.h).
 */
#ifndef HARP_AGENT_H
#define HARP_AGENT_H

#include <linux/types.h>
#include <stddef.h>
#include <stdint.h>

#include "harp_shared.h"

#define HARP_AGENT_MAGIC 0x68617270u /* "harp" */
/* 2: seq, a request's number echoed in its answer (a late answer to an abandoned request was
 * read as the next one's). 3: FORGET is not answered (answers nobody read piled up in the
 * agent's send buffer until the agent dropped the client, and its queues with it). 4: COUNTERS
 * carries six counters (HARP_XDP_REFUSED), so every message is 8 bytes longer. */
#define HARP_AGENT_VERSION 4
#define HARP_AGENT_TEXT 196

enum harp_agent_op {
	HARP_AGENT_HELLO = 1, /* ifname -> port_lo, port_hi, attach_id, xdp_mode */
	HARP_AGENT_ENTER,     /* queue, owner, and one AF_XDP socket: into the XSKMAP */
	HARP_AGENT_LEAVE,     /* queue: out of the XSKMAP and the holders' record */
	HARP_AGENT_COUNTERS,  /* -> value[0..HARP_XDP_COUNTER_MAX-1], summed over the CPUs */
	HARP_AGENT_PROBE,     /* conn_id, token -> value[0]: the probe_queues entry, 0 if none */
	HARP_AGENT_FORGET,    /* conn_id, token: the probe_queues entry deleted; no answer */
	HARP_AGENT_OWNER,     /* queue -> owner: the recorded holder (pid 0: none) */
	HARP_AGENT_OP_END,
};

enum harp_agent_xdp_mode {
	HARP_AGENT_XDP_NATIVE = 1,
	HARP_AGENT_XDP_SKB = 2,
};

struct harp_agent_msg {
	uint32_t magic;	  /* HARP_AGENT_MAGIC */
	uint16_t version; /* HARP_AGENT_VERSION; an answer to another version says which it speaks */
	uint16_t op;	  /* enum harp_agent_op */
	int32_t status;	  /* answers: 0, or a negative errno with text saying why */
	uint32_t queue;
	char ifname[16];  /* NUL-terminated */
	uint32_t conn_id; /* host order, as harp's connections name themselves */
	uint32_t attach_id;
	uint64_t token;
	uint16_t port_lo, port_hi;
	uint32_t xdp_mode; /* enum harp_agent_xdp_mode */
	uint64_t value[HARP_XDP_COUNTER_MAX];
	struct harp_queue_owner owner;
	char text[HARP_AGENT_TEXT]; /* NUL-terminated */
	uint32_t seq;		    /* requests: their number; answers: the request's, echoed */
};
_Static_assert(sizeof(struct harp_agent_msg) == 336, "harp_agent_msg is the protocol: keep it");

/* A request of op, everything else zero. */
void agent_msg_init(struct harp_agent_msg *m, enum harp_agent_op op);
/* Sends m on fd, with pass_fd as SCM_RIGHTS unless it is negative. 0 or -errno. */
int agent_send(int fd, const struct harp_agent_msg *m, int pass_fd);
/* The same with only the first len bytes of m (at most a message): an answer in the size of an
 * older version's message, whose header is ours, so that its client can read the refusal. */
int agent_send_bytes(int fd, const struct harp_agent_msg *m, size_t len, int pass_fd);
/*
 * Receives one message into m; *got_fd (if not NULL) gets a descriptor that came with it, or -1
 * (more than one is refused: they are closed and -EBADMSG returned). Returns 0 with the bytes
 * received in *len (0: the other end closed), or -errno.
 */
int agent_recv(int fd, struct harp_agent_msg *m, int *got_fd, size_t *len);

/*
 * Client: connects to the agent at path and says HELLO for ifname; on success returns the
 * connected socket and the agent's answer in hello. -ENOENT/-ECONNREFUSED: no agent there.
 */
int agent_connect(const char *path, const char *ifname, struct harp_agent_msg *hello);
/*
 * Client: req out, numbered, and its answer into resp (checked); pass_fd as in agent_send. An
 * answer to an earlier request, which timed out, is read and passed over. 0 or -errno.
 */
int agent_call(int fd, struct harp_agent_msg *req, int pass_fd, struct harp_agent_msg *resp);
/* Client: req out, numbered, without waiting (not even for room to send: -EAGAIN), for a
 * request the agent does not answer (FORGET). Late answers waiting to be read go first. */
int agent_post(int fd, struct harp_agent_msg *req);
/* The same, waiting timeout_ms for the answer rather than the agent's usual 5 s. */
int agent_call_ms(int fd, struct harp_agent_msg *req, int pass_fd, struct harp_agent_msg *resp,
		  int timeout_ms);

#endif
