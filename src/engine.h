/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Engines and the context that holds them. One engine per queue owns that queue's AF_XDP socket
 * and every connection placed on it; whichever thread calls engine_progress() runs it, one at a
 * time (a try-flag, never a wait). Connections arrive through a lock-free hand-over list, set up
 * by the layer above, which also says how to free one the engine is done with (engine_env).
 */
#ifndef HARP_ENGINE_H
#define HARP_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>

#include "chan.h"
#include "conn.h"
#include "steer.h"
#include "xsk.h"

#define HARP_MAX_CONNS 4096 /* per context; connection ids carry the slot in their low bits */

/* What an engine is given: it calls nothing above itself. */
struct engine_env {
	const struct harp_params *params;
	struct steer *steer;
	const char *ifname;
	/* Frees a connection the engine has finished with (closed, or the engine going away);
	 * the layer that made the connection owns its memory and sockets. */
	void (*release)(struct harp_conn *c);
};

struct harp_engine {
	struct engine_env env;
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

/*
 * The keeper thread: runs any of its engines that no caller has run for idle_us (no thread
 * when idle_us is 0).
 */
struct engine_keeper {
	struct harp_engine *engines;
	int nengines;
	uint64_t idle_ns;
	pthread_t thread;
	bool started;
	_Atomic bool stop;
};
int engine_keeper_start(struct engine_keeper *k, struct harp_engine *engines, int nengines,
			int idle_us);
void engine_keeper_stop(struct engine_keeper *k);

int engine_init(struct harp_engine *e, const struct engine_env *env, int queue, int busy_wait_ms);
void engine_fini(struct harp_engine *e);
/* Runs the engine once if no other thread is. Returns packets handled, or 0 when busy. */
int engine_progress(struct harp_engine *e);
/* Fails every connection with a request in [addr, addr+len): no pass touches it afterwards. */
void engine_forget_region(struct harp_engine *e, const void *addr, size_t len);
/* Connections closed or aborted whose completed small sends still go until acked. */
int engine_lingering(struct harp_engine *e);
/* Closes c on its engine at once: no pass touches its buffers after this returns. */
void engine_close_conn(struct harp_engine *e, struct harp_conn *c);
/* Hands an established connection to its engine (any thread). */
void engine_handover(struct harp_engine *e, struct harp_conn *c);
/* c's submit ring has a new request: the engine's next pass takes it (the data thread). */
void engine_notify(struct harp_engine *e, struct harp_conn *c);

#endif
