/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Engines, and the keeper thread that runs those nobody calls (the context that holds them is
 * ctx.h's). One engine per queue owns that queue's AF_XDP socket and every connection placed on
 * it; whichever thread calls engine_progress() runs it, one at a time (a try-flag, never a wait).
 * Connections arrive through a lock-free hand-over list, set up by the layer above, which also
 * says how to free one the engine is done with (engine_env).
 */
#ifndef HARP_ENGINE_H
#define HARP_ENGINE_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

#include "chan.h"
#include "conn.h"
#include "ids.h"
#include "steer.h"
#include "xsk.h"

#define HARP_MAX_CONNS IDS_SLOTS /* per context; connection ids carry the slot in their low bits */

/*
 * A context's fall back from zero copy, shared by its engines: copy mode until until_ns (0: it
 * never fell back; UINT64_MAX: for good, HARP_ZC_RETRY_MS=0), after which the engines that bound
 * zero copy at first bind it again. Each stall doubles the quiet period (zc_quiet_ns).
 */
struct zc_fallback {
	_Atomic uint64_t until_ns;
	_Atomic uint32_t stalls;
};

/* The quiet period after a context's stalls-th zero-copy stall (1 the first): HARP_ZC_RETRY_MS,
 * doubled for each stall before, at most ZC_RETRY_MAX_MS (HARP_ZC_RETRY_MS's own most);
 * UINT64_MAX when retry_ms is 0 (never again). */
#define ZC_RETRY_MAX_MS 3600000ull
uint64_t zc_quiet_ns(uint32_t retry_ms, uint32_t stalls);

/* What an engine is given: it calls nothing above itself. */
struct engine_env {
	const struct harp_params *params;
	struct steer *steer;
	const char *ifname;
	/* Frees a connection the engine has finished with (closed, or the engine going away);
	 * the layer that made the connection owns its memory and sockets. */
	void (*release)(struct harp_conn *c);
	/* Shared by a context's engines: once one finds its zero-copy socket stalled, every
	 * zero-copy engine binds its queue again in copy mode until a quiet period has passed
	 * (ENGINE_ZC_STALL_NUM). */
	struct zc_fallback *copy_fallback;
	/* Shared by a context's engines: each port pair with a peer is one engine's (pairs.h). */
	struct pairs *pairs;
	/* The context's copies to and from device memory (copy NULL: none); set before the first
	 * device request reaches an engine. */
	const struct harp_device_ops *device;
};

/* Copies queued at once, each way (a full queue is waited for on the spot), and frames a pass
 * may leave unsealed: as many as it sends. */
#define ENGINE_COPIES 512
#define ENGINE_UNSEALED 256
/* A frame whose payload a copy from device memory fills: sealed once the copy is done. */
struct engine_unsealed {
	struct harp_conn *conn;
	uint8_t *frame;
	uint32_t records;
	uint16_t src_port, dst_port, ip_id;
};
struct engine_copies {
	struct harp_copy out[ENGINE_COPIES]; /* device to frames (sends) */
	struct harp_copy in[ENGINE_COPIES];  /* frames to device (receives) */
	int nout, nin;
	struct engine_unsealed unsealed[ENGINE_UNSEALED];
	int nunsealed;
	void *registered; /* the port's UMEM area, once host_register took it */
};

struct harp_engine {
	struct engine_env env;
	int queue;
	struct xsk_port port;
	_Atomic bool busy;			 /* someone is running this engine */
	_Atomic(struct harp_conn *) handover;	 /* established connections, not yet adopted */
	_Atomic(struct harp_conn *) to_take;	 /* connections with new requests (engine_notify) */
	struct harp_conn *retry; /* connections whose next request waits for a free slot */
	struct harp_conn *tx_list; /* connections that may have packets to send, in turn */
	struct harp_conn *tx_last; /* its last (valid while it is not empty) */
	struct harp_conn *conns;		 /* adopted connections */
	struct harp_conn *by_slot[HARP_MAX_CONNS]; /* adopted, by id slot */
	struct harp_conn *ack_list;
	struct harp_conn *report_list; /* owing probe reports: empty outside a pass's reading */
	struct harp_conn *ack_wait; /* connections owing a delayed ack (CONN_ACK_DELAY_NS) */
	int epfd; /* control sockets of adopted connections */
	uint64_t next_ctrl_ns;
	uint64_t next_timer_ns; /* when every connection's timers run next */
	uint32_t probing; /* connections without a path yet: control sockets read every pass */
	_Atomic uint64_t calls;	       /* passes callers (not the keeper) began */
	/* HARP_ENGINE_THREADS: the engine's own thread (engine_runner_start) is spinning on it, so
	 * callers leave its passes to it; false while that thread sleeps in poll(), or without one */
	_Atomic bool runner_awake;
	_Atomic bool runner_stop;
	bool runner_started;
	pthread_t runner;
	uint64_t runner_idle_ns; /* the longest it sleeps (a timer, or a request posted meanwhile) */
	_Atomic uint64_t next_due_ns;  /* when a pass must run next, packets aside (engine_due) */
	uint32_t rng;
	uint64_t kick_warned_ns; /* when a failed TX wake-up was last reported */
	uint64_t silence_checked_ns; /* when a silent peer last made us check our XDP program */
	uint64_t rx_last_ns;	     /* when the socket last delivered a packet (or opened) */
	uint64_t zc_opened_ns;	     /* when the zero-copy socket opened (the stall faults) */
	bool zc_first;		     /* its queue bound zero copy at first: it may do so again */
	bool fault_tx_corrupt;	     /* HARP_FAULT_ZC_TX_CORRUPT_MS has begun */
	bool fault_zc_spent;	     /* its zero-copy faults ran their course: they come once */
	bool fault_deaf_said;	     /* HARP_FAULT_DEAF_CONN's line was printed */
	bool silence_reports; /* a peer's CHAN_SILENT came for a connection here (zc_watch) */
	uint64_t probe_answer_ns; /* how long its connections' probe rounds waited for answers */
	int port_err; /* binding its queue again failed: the port is gone, connections fail */
	uint8_t *rx_joined; /* a received descriptor chain, its pieces copied together (ENGINE_JOINED) */
	struct harp_queue_stats stats;
	/* Device memory (env.device): the copies queued in this pass, the frames whose sealing
	 * waits for theirs, and the region of frames the device was given (host_register). */
	int lane; /* this engine's index in its context: the copies' lane */
	struct engine_copies dev;
};
/* Room for the largest packet harp takes: a transmit slot's worth, and a VLAN tag. */
#define ENGINE_JOINED_BYTES (XSK_SLOT_BYTES + 64)

/*
 * The keeper thread: runs the engines no caller has run for idle_us (no thread when idle_us is
 * 0). While callers run every engine it naps; while it runs some itself it sleeps in poll() on
 * their sockets, so a packet for an idle rank is answered at once, not at the next nap's end.
 */
struct keeper_watch {
	uint64_t calls;	   /* the engine's calls when this window began */
	uint64_t since_ns; /* when it began */
	bool owned;	   /* the keeper runs the engine */
};
struct engine_keeper {
	struct harp_engine *engines;
	struct keeper_watch *watch; /* one per engine */
	int nengines;
	uint64_t idle_ns;
	struct pollfd *fds; /* two per engine: its AF_XDP socket and its control sockets */
	pthread_t thread;
	bool started;
	_Atomic bool stop;
	_Atomic uint64_t polls, wakes; /* sleeps in poll(), and those a packet ended */
};
int engine_keeper_start(struct engine_keeper *k, struct harp_engine *engines, int nengines,
			int idle_us);
void engine_keeper_stop(struct engine_keeper *k);

/*
 * Whether the keeper runs an engine this round: its callers began fewer than
 * KEEPER_CALLER_PASSES passes in a whole window of idle_ns (a rank whose caller went to sleep or
 * to compute). As soon as they begin that many in one window (a caller spinning on test()
 * again), the engine is theirs, and the window starts over. Pure, as keeper_plan is.
 */
#define KEEPER_CALLER_PASSES 16
/*
 * While passes find work, the keeper sleeps this long between them (less when an ack or a timer
 * is due sooner), so that packets gather into batches, as a NIC moderates its interrupts: the engines it owns are those of callers who
 * are away, and none of them waits on a completion meanwhile. A pass that finds nothing sends it
 * to poll(). Spinning instead cost a receiver whose caller was away 1 ms after each round twice
 * the CPU per GiB for the same goodput (perf/RESULTS.md, "The keeper sleeps in poll()").
 */
#define KEEPER_BATCH_NS 50000
bool keeper_watch(struct keeper_watch *w, uint64_t calls, uint64_t now, uint64_t idle_ns);

/*
 * The keeper's next step, from what its last round saw (a pure function: unit_engine walks it
 * through its states). owned: engines it ran itself (keeper_watch); worked: a pass of its last
 * round found work; due_ns: the earliest next_due_ns among them.
 */
enum keeper_step {
	KEEPER_NAP,   /* callers run every engine: look again after wait_ns (SCHED_IDLE) */
	KEEPER_AGAIN, /* the last pass found work, or a timer is due: again after wait_ns */
	KEEPER_POLL,  /* nothing to do: sleep in poll() until a packet, or wait_ns */
};
struct keeper_plan {
	enum keeper_step step;
	uint64_t wait_ns;
};
struct keeper_plan keeper_plan(int owned, bool worked, uint64_t now, uint64_t due_ns,
			       uint64_t idle_ns);

/*
 * Engine threads (HARP_ENGINE_THREADS): a thread of its own runs each engine, so that a rank's
 * engines work at once, each on a core, instead of in turn on the one thread that calls test()
 * (NCCL's proxy thread). It spins while passes find work and RUNNER_SPIN_NS after, then sleeps in
 * poll() on the engine's sockets until a packet, a timer, or idle_us; while it sleeps, a caller's
 * test() runs the pass itself, as without it. No keeper runs beside them.
 */
#define RUNNER_SPIN_NS 200000ull
int engine_runner_start(struct harp_engine *e, int idle_us);
void engine_runner_stop(struct harp_engine *e);

int engine_init(struct harp_engine *e, const struct engine_env *env, int queue, int busy_wait_ms);
void engine_fini(struct harp_engine *e);
/* Runs the engine once if no other thread is, and its own thread is not awake (it runs it).
 * Returns packets handled, or 0 when busy. */
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

/*
 * A zero-copy socket that delivers nothing for 3/8 of HARP_PEER_TIMEOUT_MS while a connection
 * of its engine waits on its peer is taken for a stalled driver. A live peer answers the pings
 * that start at a quarter of the timeout within a round trip (its keeper thread does when its
 * caller is away), and a dead one leaves only its own connections silent, so such silence on a
 * whole socket is the driver's: a hypervisor that stops filling the receive queue (tests/vm).
 * Then the interface falls back to copy mode, unless HARP_BIND_MODE=zerocopy demanded zero
 * copy. The 5/8 left must hold the peer's next retransmission (2 s at most apart) and its ack:
 * at half the timeout, a 4 s timeout failed a connection in recovery.
 */
#define ENGINE_ZC_STALL_NUM 3
#define ENGINE_ZC_STALL_DEN 8

#endif
