/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A connection's paths (paths.c): the UDP port pairs it sends on, each with its own window, RTT
 * and loss clock; the probe rounds that find them; the rescue that replaces them when all fall
 * silent; and the STEERs that keep the peer's pairs on this engine. paths.c owns the paths part
 * of struct harp_conn (conn.h: paths[], probe, steer, cc_before_rto and the fields beside them)
 * and writes no other state of the connection's but its stats, pace_held (paths_pick) and the
 * send queue's records of a path it retires (sendq.h). It calls down only: sendq.h, cc.c, pairs.c.
 */
#ifndef HARP_PATHS_H
#define HARP_PATHS_H

#include "internal.h"

struct harp_conn;
struct conn_tx;

#define CONN_MAX_PATHS 32	/* HARP_PATHS at most */
#define CONN_PROBE_CANDS 64	/* port pairs tried per probe round */

/*
 * One path of a connection: a UDP port pair that probing proved to land on the queue of the
 * peer's engine that owns the connection. Each has its own window, RTT and loss clock, so a
 * fabric that caps or drops one 5-tuple slows only that path.
 */
struct conn_path {
	uint16_t src_port, dst_port; /* network order */
	bool live;
	uint32_t inflight;	 /* packets sent on it and not yet acked or declared lost */
	uint32_t inflight_bytes; /* their bytes of IP: what the window (cc, bytes) bounds */
	uint32_t inflight_max;	 /* packets: its share of HARP_CWND_MAX */
	struct rtt_est rtt;
	struct cc cc;
	struct pacer pace;	 /* used where the connection paces (HARP_PACING) */
	uint64_t rack_xmit_ns;	 /* send time of the latest packet acked on this path */
	uint64_t last_ack_ns;	 /* last ack of a packet sent on it; until one, when it was added */
	bool ever_acked;	 /* a packet sent on it was acked */
	uint64_t sent_ns;	 /* last packet of any kind sent on it (acks too) */
	uint64_t waiting_since_ns; /* oldest send on it not answered by an ack since; 0: none */
	uint32_t losses;	 /* packets declared lost, for the random-loss judgement */
	uint32_t acked;		 /* packets acked since the last loss count was aged */
};

/* The probe round in progress: candidate port pairs sent, and when to try again. */
struct conn_probe {
	uint32_t round;
	uint32_t ncands;
	uint32_t sent;		/* candidates sent so far in this round */
	uint64_t next_ns;	/* when the next round may start */
	uint64_t interval_ns;	/* grows while rounds find nothing */
	uint64_t first_ns;	/* when probing for the first path began */
	uint64_t round_ns;	/* when this round began */
	uint64_t answer_ns;	/* smoothed wait from a round's start to its first answer (at first
				 * the control connection's round trip); 0: not known */
	bool answered;		/* this round has had an answer */
	uint64_t *shared_answer_ns; /* the engine's: answers its other connections waited for */
	/* A rescue: retransmission timeouts here found every path silent (conn_on_timer), or the
	 * peer's did and it heard nothing of ours (CHAN_UNHEARD, for_peer). A round goes out
	 * though every wanted path is live, and each answered candidate replaces a path added
	 * before rescue_ns and not acked since; for the peer's, also none of whose packets sent
	 * since deaf_from_ns (when the peer stopped hearing us) was acked (rescue_victim_ok).
	 * rescue_ns 0: none. rescue_round: the round that is the rescue's (0: not begun yet). */
	uint64_t rescue_ns, deaf_from_ns;
	bool for_peer;
	uint32_t rescue_round;
	bool round_rescue; /* this round is a rescue's (rescue_round names it until the next) */
	uint32_t unheard_ms; /* a rescue here to tell the peer of (CHAN_UNHEARD): whole ms since
			      * we last heard anything of it; 0: none (or heard within 1 ms) */
	uint64_t peer_rescue_ns; /* when the peer's CHAN_UNHEARD last started a rescue; 0: never */
	uint64_t resent_ns; /* when a rescue's answer last sent the packet waited on again; 0: never */
	uint16_t cand_src[CONN_PROBE_CANDS], cand_dst[CONN_PROBE_CANDS]; /* network order */
	/* The round before this one, whose answers still count: a starved peer's come after the
	 * next round began (conn_on_probe_result). Its candidates sent, when it began, whether it
	 * had an answer and whether it was a rescue's. */
	struct {
		uint32_t ncands;
		uint64_t round_ns;
		bool answered, rescue;
		uint16_t src[CONN_PROBE_CANDS], dst[CONN_PROBE_CANDS]; /* network order */
	} prev;
	uint32_t rng;
};

/*
 * Port pairs the peer's probes proved to reach this engine: the peer's paths to us. This side
 * sends a STEER on each new one at once, on all of them again after 5, 50 and 250 ms, and then
 * every CONN_STEER_PERIOD_NS: a host whose tap steers each flow to the queue that last sent it
 * (tun under vhost-net or QEMU, for 3 s after each send) then keeps steering them here, as a NIC's
 * RSS hash would. Without it a pair that a probe of another engine here had steered elsewhere
 * moves when that steering expires; and a probe another engine sent on the pair just before
 * it became ours can reach the tap after our first STEER (the repeats undo that). The pairs
 * the peer's data comes on are kept before those only probed: a full list drops the one the
 * peer used least lately (16 connections a side on 4 queues dropped paths in use when the
 * oldest probed pair went first, and their packets went to other engines). A new pair does
 * not start a whole round at once: a probe round's 64 pairs arriving over a few passes each
 * sent all 16 STEERs again, 30-50 us of a caller's pass each time (copy mode).
 */
#define CONN_STEER_PAIRS 16 /* at most 32: conn_steer.fresh has a bit for each */
#define CONN_STEER_PERIOD_NS 1000000000ull
_Static_assert(CONN_STEER_PAIRS <= 32, "conn_steer.fresh has 32 bits");
struct conn_steer {
	uint16_t local_port[CONN_STEER_PAIRS], peer_port[CONN_STEER_PAIRS]; /* network order */
	uint64_t used_ns[CONN_STEER_PAIRS]; /* the peer's last data on the pair (or its probe) */
	uint32_t n;	   /* pairs held, at most CONN_STEER_PAIRS */
	uint32_t fresh;	   /* bit i: pair i is new, its first STEER not sent yet */
	uint32_t sent;	   /* STEERs sent in this round */
	uint32_t repeats;  /* early rounds done since the newest pair came */
	uint64_t next_ns;  /* when the next round starts */
};

/* ---- the engine's (conn.h's callers) ---- */
/*
 * Paths. conn_paths_init sets probing up (conn_start starts its clock on the engine): rounds of
 * PROBE packets over random port pairs, the source port within our range and the destination
 * within the peer's, until want paths are live. The peer reports each probe that
 * reached the connection's engine over the control channel (conn_on_probe_result), and that port
 * pair becomes a path. conn_add_path adds one directly (tests, and a peer that needs no probing).
 */
void conn_paths_init(struct harp_conn *c, uint32_t want, uint16_t port_lo, uint16_t port_span,
		     uint16_t peer_port_lo, uint16_t peer_port_span, uint32_t seed);
int conn_add_path(struct harp_conn *c, uint16_t src_port, uint16_t dst_port, uint64_t now);
void conn_on_probe_result(struct harp_conn *c, uint32_t round, uint32_t cand, uint64_t now);
/*
 * No path found for limit_ns, and the latest round had a fair hearing: set-up has failed (the
 * caller logs and fails the connection).
 */
bool conn_paths_hopeless(const struct harp_conn *c, uint64_t now, uint64_t limit_ns);
/* The peer's probe on this pair (ports in network order, ours first) reached this engine. */
void conn_on_peer_probe(struct harp_conn *c, uint16_t local_port, uint16_t peer_port,
			uint64_t now);
/* The peer's data or acks came on this pair: one of its paths, kept steered here. */
void conn_on_peer_data(struct harp_conn *c, uint16_t local_port, uint16_t peer_port,
		       uint64_t now);
/* Whether a round of STEERs is due (conn_next_probe sends them). */
bool conn_steer_due(const struct harp_conn *c, uint64_t now);
/* The peer's timeouts found every path silent (CHAN_UNHEARD): our pairs to it, which carry its
 * acks, may be dark; probe for fresh ones, each answer replacing a path not acked since. */
void conn_on_peer_unheard(struct harp_conn *c, uint32_t ms, uint64_t now);
/* The engine adopts c: probe rounds wait answer_ns (the set-up's round trip) until one is
 * answered, and learn from the engine's other connections' answers (shared_answer_ns). */
void conn_probe_answers(struct harp_conn *c, uint64_t answer_ns, uint64_t *shared_answer_ns);
/* A rescue began here after timeouts (conn_on_timer): the whole ms we had heard nothing of the
 * peer then, for CHAN_UNHEARD, taken once; 0: none to tell. */
uint32_t conn_take_unheard(struct harp_conn *c);
/* Sum of the live paths' windows, in bytes. */
uint32_t conn_cwnd(const struct harp_conn *c);

/* ---- the connection's other files' ---- */
/* What one ack did to each path, gathered while its records are acked (ack.c). */
struct ack_tally {
	uint32_t newly[CONN_MAX_PATHS];		/* packets */
	uint32_t bytes[CONN_MAX_PATHS];		/* their bytes, for the window */
	uint64_t newest_sent[CONN_MAX_PATHS]; /* send time of the newest clean record acked */
	uint32_t touched;		      /* bit per path */
};

/* The path for the next packet, not `avoid` unless it is the only one with room; -1: none. */
int paths_pick(struct harp_conn *c, int avoid, bool rtx, uint64_t now);
/* Any live path, in turn, for packets outside the windows (ACKs, PMTU probes); -1: none. */
int paths_any(struct harp_conn *c);
/* Psn, sent on p, was judged lost: a congestion signal unless p shows random loss. */
void paths_on_loss(struct harp_conn *c, struct conn_path *p, uint32_t psn);
/* Per path: RTT sample, window growth, proof of life. */
void paths_on_ack(struct harp_conn *c, const struct ack_tally *t, uint64_t now);
void paths_set_mss(struct harp_conn *c, uint32_t mtu);
/* Timers: paths silent while others deliver retire; a timeout collapses the windows (and may
 * start a rescue), undone if an ack proves it spurious. */
void paths_retire_dead(struct harp_conn *c, uint64_t now);
void paths_on_timeout(struct harp_conn *c, uint64_t now);
void paths_undo_timeout(struct harp_conn *c, uint32_t ts_echo);
/* The warning line of what the paths went through, when the connection is declared dead. */
void paths_log_at_death(const struct harp_conn *c, uint64_t now);
bool paths_next_probe(struct harp_conn *c, struct conn_tx *tx, uint64_t now);

#endif
