/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Engines and the context that holds them. One engine per queue owns that queue's AF_XDP socket
 * and every connection placed on it; whichever thread calls engine_progress() runs it, one at a
 * time (a try-flag, never a wait). Connections arrive through a lock-free hand-over list.
 */
#ifndef HARP_ENGINE_H
#define HARP_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>

#include "conn.h"
#include "netinfo.h"
#include "steer.h"
#include "xsk.h"

#define HARP_MAX_CONNS 4096 /* per context; connection ids carry the slot in their low bits */

struct harp_engine {
	struct harp_ctx *ctx;
	int queue;
	struct xsk_port port;
	_Atomic bool busy;			 /* someone is running this engine */
	_Atomic(struct harp_conn *) handover;	 /* established connections, not yet adopted */
	_Atomic(struct harp_conn *) to_take;	 /* connections with new requests (engine_notify) */
	struct harp_conn *retry; /* connections whose next request waits for a free slot */
	struct harp_conn *tx_list; /* connections that may have packets to send */
	struct harp_conn *conns;		 /* adopted connections */
	struct harp_conn *by_slot[HARP_MAX_CONNS]; /* adopted, by id slot */
	struct harp_conn *ack_list;
	struct harp_conn *ack_wait; /* connections owing a delayed ack (CONN_ACK_DELAY_NS) */
	int epfd; /* control sockets of adopted connections */
	uint64_t next_ctrl_ns;
	uint64_t next_timer_ns; /* when every connection's timers run next */
	uint32_t probing; /* connections without a path yet: control sockets read every pass */
	_Atomic uint64_t last_run_ns; /* when a pass last began (the keeper reads it) */
	uint32_t rng;
	uint64_t kick_warned_ns; /* when a failed TX wake-up was last reported */
	struct harp_queue_stats stats;
};

struct harp_ctx {
	struct harp_params params;
	struct if_info ifi;
	struct steer steer;
	int queue_ids[HARP_MAX_QUEUES]; /* HARP_QUEUES, ascending: engine i runs queue_ids[i] */
	int nqueues;
	int queues_take_free; /* auto, alone: take this many of queue_ids, the ones not held */
	int nengines;
	struct harp_engine *engines;
	int ip_mtu;
	uint32_t payload_max;
	pthread_mutex_t setup_lock; /* set-up path only: the id allocator */
	uint16_t id_gen[HARP_MAX_CONNS];
	bool id_used[HARP_MAX_CONNS];
	_Atomic uint32_t next_engine;
	pthread_t keeper; /* runs engines no caller has run lately (HARP_IDLE_PROGRESS_US) */
	bool keeper_started;
	_Atomic bool keeper_stop;
};

/* Starts and stops the keeper thread (no thread when HARP_IDLE_PROGRESS_US is 0). */
int engine_keeper_start(struct harp_ctx *ctx);
void engine_keeper_stop(struct harp_ctx *ctx);

int engine_init(struct harp_engine *e, struct harp_ctx *ctx, int queue, int busy_wait_ms);
void engine_fini(struct harp_engine *e);
/* Runs the engine once if no other thread is. Returns packets handled, or 0 when busy. */
int engine_progress(struct harp_engine *e);
/* Fails every connection with a request in [addr, addr+len): no pass touches it afterwards. */
void engine_forget_region(struct harp_engine *e, const void *addr, size_t len);
/* Closes c on its engine at once: no pass touches its buffers after this returns. */
void engine_close_conn(struct harp_engine *e, struct harp_conn *c);
/* Hands an established connection to its engine (any thread). */
void engine_handover(struct harp_engine *e, struct harp_conn *c);
/* c's submit ring has a new request: the engine's next pass takes it (the data thread). */
void engine_notify(struct harp_engine *e, struct harp_conn *c);

void conn_destroy(struct harp_conn *c);

/* Connection ids: slot in the low 12 bits, a generation above, never 0. */
int ctx_alloc_id(struct harp_ctx *ctx, uint32_t *id);
void ctx_free_id(struct harp_ctx *ctx, uint32_t id);

/* control.c: the frame of the control channel after set-up. */
#define CTRL_MAGIC 0x48525043u /* "HRPC" */
enum ctrl_msg_type {
	CTRL_CLOSE = 1, /* value: the sender's rcv_nxt, its final cumulative ack */
	CTRL_PATH = 2,	/* value: a probe candidate that reached us; reserved: its round */
};
struct ctrl_msg {
	uint32_t magic;
	uint32_t type;
	uint32_t value;
	uint32_t reserved;
};
_Static_assert(sizeof(struct ctrl_msg) == 16, "control message is 16 bytes");

/* Reads what the peer said on the control channel; 0, or -ECONNRESET when it is gone. */
int ctrl_poll_conn(struct harp_conn *c, uint64_t now);
/* Tells the peer that its probe (round, candidate) reached this connection's engine. */
void ctrl_send_path(struct harp_conn *c, uint32_t round, uint32_t cand);
/* Tells the peer we close, with our final cumulative ack. */
void ctrl_send_close(struct harp_conn *c);
/* Frees a connection's set-up state and closes its control socket. */
void ctrl_conn_destroy(struct harp_conn *c);

#endif
