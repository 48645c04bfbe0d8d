/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What harp's modules share. Lower layers never include or call higher ones: params/log, frame
 * pool, xsk, wire, cc, conn, chan (a running connection's control channel), engine, control
 * (set-up), api with ctx.h; docs/DESIGN.md has every module and the two exceptions. An engine
 * is given what it needs from above (struct engine_env), a callback to free a connection
 * included.
 */
#ifndef HARP_INTERNAL_H
#define HARP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <sys/mman.h>

#include "harp/harp.h"

#define HARP_HIDDEN __attribute__((visibility("hidden")))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* ---- log.c ---------------------------------------------------------------------------------- */
extern enum harp_log_level harp_log_threshold;
void harp_log(enum harp_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define pr_err(...) harp_log(HARP_LOG_ERROR, __VA_ARGS__)
#define pr_warn(...) harp_log(HARP_LOG_WARN, __VA_ARGS__)
#define pr_info(...) harp_log(HARP_LOG_INFO, __VA_ARGS__)
#define pr_debug(...) harp_log(HARP_LOG_DEBUG, __VA_ARGS__)

/* ---- params.c (table in params.def) --------------------------------------------------------- */
struct harp_params {
#define HARP_PARAM_INT(field, env, def, min, max, doc) int field;
#define HARP_PARAM_STR(field, env, def, maxlen, doc) char field[(maxlen) + 1];
#define HARP_PARAM_ENUM(field, env, def, choices, doc) int field;
#include "params.def"
#undef HARP_PARAM_INT
#undef HARP_PARAM_STR
#undef HARP_PARAM_ENUM
};

/* Index values of the enum parameters, in the order of their choices in params.def. */
enum { HARP_HUGEPAGES_AUTO, HARP_HUGEPAGES_ON, HARP_HUGEPAGES_OFF };
enum { HARP_MULTI_BUFFER_AUTO, HARP_MULTI_BUFFER_OFF };
enum { HARP_PACING_ON, HARP_PACING_OFF };
enum { HARP_CUDA_ON, HARP_CUDA_OFF };
enum { HARP_ENGINE_THREADS_AUTO, HARP_ENGINE_THREADS_ON, HARP_ENGINE_THREADS_OFF };
#define HARP_MTU_MIN 576 /* the least IP MTU harp runs at (IPv4's minimum datagram) */
enum { HARP_BIND_AUTO, HARP_BIND_ZEROCOPY, HARP_BIND_COPY };
enum { HARP_XDP_NATIVE, HARP_XDP_SKB };
enum { HARP_FAMILY_AUTO, HARP_FAMILY_IPV4, HARP_FAMILY_IPV6 };

/* Fills p with every default. */
void params_defaults(struct harp_params *p);
/*
 * Sets one parameter, by environment name, from text. Returns 0, or -EINVAL with err holding one
 * line naming the variable, the value and what is accepted; -ENOENT for an unknown name.
 */
int params_set(struct harp_params *p, const char *env_name, const char *value, char *err,
	       size_t errlen);
/*
 * Defaults, then the node profile (HARP_CONF, default /etc/harp/harp.conf, when it exists), then
 * every HARP_* variable present in the environment. Errors as params_set, naming file and line.
 */
int params_load_env(struct harp_params *p, char *err, size_t errlen);
/* Cross-field checks (frame_count a power of two, queues within port_count, ...). */
int params_validate(const struct harp_params *p, char *err, size_t errlen);
#define HARP_MAX_QUEUES 64 /* queue numbers 0..63 */
/* A set of queues (bit q: queue q) as text, e.g. "0-3,6", or "none". */
void queue_set_text(char *out, size_t len, uint64_t bits);
#define HARP_AUTO_QUEUES_MAX 8 /* HARP_QUEUES=auto takes at most this many */
/*
 * The queues HARP_QUEUES names, ascending, into ids (room for HARP_MAX_QUEUES): a count N is
 * queues 0..N-1; a list (with a ',' or '-') names them, e.g. "0,2-3". Returns how many, 0 for
 * auto (params_pick_queues decides), or -EINVAL with err saying what is wrong.
 */
int params_queue_ids(const struct harp_params *p, int *ids, char *err, size_t errlen);
/*
 * The queues this process runs on, on an interface with nic_queues rx queues (0: unknown; auto
 * then takes one), ascending into ids. A count or list must fit the interface. auto is this rank's
 * share of the queues when the launcher says which of how many ranks on the node this is
 * (LOCAL_RANK and LOCAL_WORLD_SIZE; Open MPI's, MPICH's and Slurm's equivalents), at most
 * HARP_AUTO_QUEUES_MAX and HARP_PORT_COUNT; alone, every queue is a candidate and *take_free
 * says how many of them to take, the first that no other process holds (0: take all of ids).
 * Returns how many ids, or a negative errno with err naming what is wrong.
 */
int params_pick_queues(const struct harp_params *p, int nic_queues, int *ids, int *take_free,
		       char *err, size_t errlen);

/* ---- ifmatch.c: NCCL_SOCKET_IFNAME-style interface lists ---- */
/* Does the interface name match spec (NULL or "": the default list)? */
bool ifmatch_one(const char *spec, const char *name);
/* spec names one existing interface, with no list syntax. */
bool ifmatch_is_plain(const char *spec);
/* Prints name, value, accepted values and doc of every parameter, one per line. */
void params_dump(const struct harp_params *p, FILE *out);
/* The README's table of parameters, in Markdown. */
void params_dump_markdown(FILE *out);

/* ---- big tables -------------------------------------------------------------------------------- */
/*
 * Zeroed memory that the kernel backs a page at a time, as it is first touched: a connection's
 * big tables (packet records, request objects) cost the pages its traffic uses, not their size.
 * calloc() would touch them all when it reuses freed heap memory. NULL when out of memory.
 */
static inline void *table_alloc(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static inline void table_free(void *p, size_t bytes)
{
	if (p) {
		munmap(p, bytes);
	}
}

/* ---- time ------------------------------------------------------------------------------------ */
static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no system call */
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- umem.c: the frame pool ------------------------------------------------------------------ */
/*
 * A LIFO stack of free UMEM frame addresses, owned by one engine (no sharing, no atomics).
 * LIFO keeps recently used frames warm in cache.
 */
struct frame_pool {
	uint64_t *addrs;
	uint32_t free;	/* frames on the stack */
	uint32_t total; /* frames the stack has room for */
	uint32_t frame_size;
};

/* Puts frames 0, frame_size, ... (nframes of them) on the stack. */
int frame_pool_init(struct frame_pool *fp, uint32_t nframes, uint32_t frame_size);
/*
 * A stack with room for capacity frames, holding the nframes from base (a multiple of
 * frame_size) at first; frame_pool_put may add others up to capacity.
 */
int frame_pool_init_range(struct frame_pool *fp, uint32_t capacity, uint64_t base,
			  uint32_t nframes, uint32_t frame_size);
void frame_pool_fini(struct frame_pool *fp);

/* Takes up to n frames; returns how many it took (0 when empty: not an error). */
static inline uint32_t frame_pool_get(struct frame_pool *fp, uint64_t *out, uint32_t n)
{
	uint32_t i;

	if (n > fp->free) {
		n = fp->free;
	}
	for (i = 0; i < n; i++) {
		out[i] = fp->addrs[--fp->free];
	}
	return n;
}

/* Returns n frames. Frame addresses are normalised to their frame's start. */
static inline void frame_pool_put(struct frame_pool *fp, const uint64_t *in, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n && fp->free < fp->total; i++) {
		fp->addrs[fp->free++] = in[i] & ~((uint64_t)fp->frame_size - 1);
	}
}

/* Memory for a UMEM: hugepages when asked or available, else normal pages; locked in RAM. */
struct umem_area {
	void *base;
	size_t size;
	bool huge;
};
int umem_area_alloc(struct umem_area *a, size_t size, int hugepages_mode);
void umem_area_free(struct umem_area *a);

/* ---- cc.c: RTT estimate and congestion window ------------------------------------------------ */
struct rtt_est {
	uint32_t srtt_us;
	uint32_t rttvar_us;
	uint32_t rto_us;
	uint32_t min_rtt_us;
	uint32_t rto_min_us, rto_max_us;
	bool have_sample;
};
/* RFC 6298: rto = srtt + 4 * rttvar, clamped to [rto_min_us, rto_max_us]. */
void rtt_init(struct rtt_est *r, uint32_t rto_init_us, uint32_t rto_min_us, uint32_t rto_max_us);
void rtt_sample(struct rtt_est *r, uint32_t sample_us);
/* After a retransmission timeout: double the RTO, up to rto_max_us. */
void rtt_backoff(struct rtt_est *r);
void rtt_rearm(struct rtt_est *r);

/*
 * Window-based congestion control in bytes: slow start, additive increase (one mss per window),
 * multiplicative decrease at most once per window of data (NewReno's recovery point), a collapse
 * to cwnd_min on timeout, and a gentle decrease when the smoothed RTT climbs far above the path's
 * minimum.
 */
struct cc {
	uint32_t cwnd, ssthresh, cwnd_min, cwnd_max; /* bytes */
	uint32_t mss;		     /* bytes of a full packet now: the growth step */
	uint32_t min_segs;	     /* cwnd_min is this many full packets */
	uint32_t acked_since_growth; /* bytes acked since cwnd last grew in avoidance */
	uint32_t recovery_psn;	     /* no further decrease until acks pass this psn */
	bool in_recovery;
	uint64_t delay_backoff_ns; /* time of the last delay-based decrease */
};
/* Bytes throughout; cwnd_min is min_segs packets of mss bytes (at most cwnd_max). */
void cc_init(struct cc *c, uint32_t mss, uint32_t cwnd_init, uint32_t min_segs, uint32_t cwnd_max);
/* Packets are mss bytes from now on (the path MTU moved): the window keeps its bytes, the floor
 * and the growth step follow. */
void cc_set_mss(struct cc *c, uint32_t mss);
/* newly_acked bytes were acknowledged; ack_psn is the new cumulative ack. */
void cc_on_ack(struct cc *c, uint32_t newly_acked, uint32_t ack_psn, const struct rtt_est *r,
	       uint64_t now);
/* Loss of psn detected while next_psn is the next one to send. */
void cc_on_loss(struct cc *c, uint32_t psn, uint32_t next_psn);
void cc_on_timeout(struct cc *c, uint32_t next_psn);

/*
 * Pacing: a path's reliable packets leave at gain x cwnd per smoothed RTT (gain 2 in slow start,
 * 5/4 after, as Linux paces TCP), so that a window goes out spread over the round trip rather
 * than in one burst into the first queue on the way. The pacer holds a credit of bytes, refilled
 * for the time since it last ran dry, at most a quarter of a round trip's (and at least
 * CC_PACE_BURST_SEGS full packets) ahead; a packet may go while the credit is above zero, and
 * overdraws it by its size. Before the path's first RTT sample it does not hold anything back.
 */
#define CC_PACE_BURST_SEGS 16
struct pacer {
	int64_t credit; /* bytes that may go now */
	uint64_t at_ns; /* refilled up to then */
};
void pace_init(struct pacer *pc, uint64_t now);
/* May a packet go on this path now? Refills the credit first if it has run dry. */
bool pace_ready(struct pacer *pc, const struct cc *c, const struct rtt_est *r, uint64_t now);
static inline void pace_spend(struct pacer *pc, uint32_t bytes)
{
	pc->credit -= bytes;
}

/* Sequence-number comparison modulo 2^32. */
static inline bool psn_before(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

#endif
