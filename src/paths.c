// SPDX-License-Identifier: Apache-2.0
/*
 * A connection's paths: port pairs probed to reach the peer's engine for this connection, each
 * with its own window, RTT and loss clock (paths.h). A new packet goes to the path with room and
 * the least delay, a retransmission to another path than the one that lost it. A path that
 * stops acknowledging while others deliver is retired, and a probe round finds its replacement;
 * when every path falls silent at once, a rescue round replaces them (the peer is told, and
 * rescues the pairs that carry its acks). The peer's pairs to this engine are kept steered here
 * with STEERs, as a tap that steers each flow to the queue that last sent it needs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "conn.h"
#include "pairs.h"
#include "paths.h"
#include "sendq.h"

#define CWND_INIT 32 /* packets, the connection's: shared over its paths */
#define CWND_MIN 4   /* packets, the connection's floor: shared too, at least 1 a path */

/* The peer's address as the port-pair table keys it (pairs.h). */
static inline uint32_t peer_key(const struct harp_conn *c)
{
	return wire_ip_fold(&c->path.dst_ip);
}

/* A loss is taken for congestion when the path's srtt is above 2 x min_rtt + this, */
#define RANDOM_LOSS_SLACK_US 1000
/* or when more than 1 in this many of the path's recent packets were lost. */
#define RANDOM_LOSS_MAX_RATE 32
#define PATH_AGE_ACKED 4096	/* acked packets after which the loss count is halved */
#define PATH_RETIRE_RTOS 3	/* a path silent this many of its RTOs, while others ack, retires */
#define PATH_RETIRE_MIN_NS (20 * 1000000ull)
#define PROBE_INTERVAL_NS (2 * 1000000ull) /* first wait for a round's results */
#define PROBE_INTERVAL_MAX_NS (200 * 1000000ull)
#define PROBE_WAIT_MAX_NS (1000 * 1000000ull) /* longest wait for answers before a new round */
#define PROBE_CANDS_PER_PATH 16 /* candidates per path still wanted, in a round */
#define RESCUE_TIMEOUTS 2	/* timeouts in a row, no ack between, before a rescue round */
#define RESCUE_GAP_NS (10 * 1000000ull) /* the peer's rescues, at most one this often: its
					  * timeouts are further apart (CONN_RTO_MIN_US) */

static uint32_t xorshift(uint32_t *state)
{
	uint32_t x = *state ? *state : 0x9e3779b9u;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*state = x;
	return x;
}

void conn_paths_init(struct harp_conn *c, uint32_t want, uint16_t port_lo, uint16_t port_span,
		     uint16_t peer_port_lo, uint16_t peer_port_span, uint32_t seed)
{
	c->paths_want = want < 1 ? 1 : want > CONN_MAX_PATHS ? CONN_MAX_PATHS : want;
	c->port_lo = port_lo;
	c->port_span = port_span;
	c->peer_port_lo = peer_port_lo;
	c->peer_port_span = peer_port_span ? peer_port_span : 1;
	c->probe.rng = seed;
	c->probe.interval_ns = PROBE_INTERVAL_NS;
}

/* Whether a live path of c runs on this port pair (network order). */
static bool path_live_on(const struct harp_conn *c, uint16_t src_port, uint16_t dst_port)
{
	uint32_t i;

	for (i = 0; i < c->npaths; i++) {
		if (c->paths[i].live && c->paths[i].src_port == src_port &&
		    c->paths[i].dst_port == dst_port) {
			return true;
		}
	}
	return false;
}

int conn_add_path(struct harp_conn *c, uint16_t src_port, uint16_t dst_port, uint64_t now)
{
	uint32_t per_max = c->cwnd_max / c->paths_want, init = CWND_INIT / c->paths_want, i;
	uint32_t floor = CWND_MIN / c->paths_want ? CWND_MIN / c->paths_want : 1;
	uint32_t mss = pkt_bytes(c, c->payload_max);
	uint32_t largest = c->pmtu.ceiling > mss ? c->pmtu.ceiling : mss;
	struct conn_path *p;

	if (path_live_on(c, src_port, dst_port)) {
		return -EEXIST;
	}
	if (c->paths_live >= c->paths_want) {
		return -ENOSPC;
	}
	/* a retired path's slot, else a new one: fewer live than wanted, so one is free */
	for (i = 0; i < c->npaths && c->paths[i].live; i++) {
	}
	if (i == CONN_MAX_PATHS) {
		return -ENOSPC;
	}
	if (i == c->npaths) {
		c->npaths++;
	}
	p = &c->paths[i];
	memset(p, 0, sizeof(*p));
	p->src_port = src_port;
	p->dst_port = dst_port;
	p->live = true;
	p->last_ack_ns = now;
	rtt_init(&p->rtt, CONN_RTO_INIT_US, CONN_RTO_MIN_US, CONN_RTO_MAX_US);
	pace_init(&p->pace, now);
	/* The window starts at the path's share of CWND_INIT packets of the base size (not of a
	 * ceiling the path may not carry) and stops at its share of HARP_CWND_MAX packets of the
	 * largest size it may come to carry (a floor of 16 a path let HARP_CWND_MAX=16 send 128). Its floor is a share too: 8 paths each held at 4
	 * packets kept 32 in flight through a hop whose queue and round trip held 21, and lost a
	 * third of what they sent (300 Mbit/s, a 16-packet queue). */
	p->inflight_max = per_max ? per_max : 1; /* and paths_pick holds the sum to HARP_CWND_MAX */
	cc_init(&p->cc, mss,
		(init > floor ? init : floor) * (mss < CONN_PMTU_BASE ? mss : CONN_PMTU_BASE), floor,
		p->inflight_max * largest);
	c->paths_live++;
	return (int)(p - c->paths);
}

uint32_t conn_cwnd(const struct harp_conn *c)
{
	uint32_t i, w = 0;

	for (i = 0; i < c->npaths; i++) {
		if (c->paths[i].live) {
			w += c->paths[i].cc.cwnd;
		}
	}
	return w;
}

/*
 * The path for the next packet, among those with room in their window and not `avoid` (unless
 * it is the only one with room); -1 when every path is full. New data goes to the path with the
 * least smoothed RTT (one not yet measured counts as the fastest, so it gets measured), a
 * retransmission to the path that most recently proved it delivers (its last ack): a path that
 * just lost a packet, or went dark, must not get the packet that repairs the loss. Ties rotate.
 */
int paths_pick(struct harp_conn *c, int avoid, bool rtx, uint64_t now)
{
	int best = -1, fallback = -1;
	uint64_t best_score = UINT64_MAX;
	uint32_t k = c->npaths ? c->path_rr % c->npaths : 0; /* one division, not one a path */
	uint32_t i;

	if (c->inflight >= c->cwnd_max) {
		return -1; /* HARP_CWND_MAX, over all paths (32 paths of 1 would pass 16 otherwise) */
	}
	for (i = 0; i < c->npaths; i++, k = k + 1 == c->npaths ? 0 : k + 1) {
		const struct conn_path *p = &c->paths[k];
		uint64_t score;

		if (!p->live || p->inflight_bytes >= p->cc.cwnd || p->inflight >= p->inflight_max) {
			continue;
		}
		if (c->pacing && !pace_ready(&c->paths[k].pace, &p->cc, &p->rtt, now)) {
			c->pace_held = true;
			continue;
		}
		if ((int)k == avoid) {
			fallback = (int)k;
			continue;
		}
		if (rtx) {
			score = UINT64_MAX - p->last_ack_ns;
		} else {
			score = p->rtt.have_sample ? p->rtt.srtt_us : 0;
		}
		if (score < best_score) {
			best_score = score;
			best = (int)k;
		}
	}
	c->path_rr++;
	return best >= 0 ? best : fallback;
}

/* Any live path, in turn: for packets outside the windows (ACKs). */
int paths_any(struct harp_conn *c)
{
	uint32_t i;

	for (i = 0; i < c->npaths; i++) {
		uint32_t k = (c->path_rr + i) % c->npaths;

		if (c->paths[k].live) {
			c->path_rr = k + 1;
			return (int)k;
		}
	}
	return -1;
}

/* A lost packet: a congestion signal unless the path shows every sign of random loss. */
void paths_on_loss(struct harp_conn *c, struct conn_path *p, uint32_t psn)
{
	bool queueing = p->rtt.have_sample &&
			p->rtt.srtt_us > 2 * p->rtt.min_rtt_us + RANDOM_LOSS_SLACK_US;

	p->losses++;
	if (!queueing && p->losses * RANDOM_LOSS_MAX_RATE < p->acked + p->losses) {
		c->stats.random_losses++;
		return;
	}
	cc_on_loss(&p->cc, psn, c->snd_nxt);
}

/*
 * The least wait between probe rounds: twice the time answers have taken to come (the peer's
 * engine, then the control channel), so that a loaded pair of hosts whose answers take a second
 * is not sent a round every few milliseconds, each drawing more answers to wait behind. Before
 * any answer, and on a quick pair, PROBE_INTERVAL_NS. The engine's own average counts too:
 * connections that start together learn from the first of them answered.
 */
static uint64_t probe_wait_floor(const struct conn_probe *pr)
{
	uint64_t answer = pr->answer_ns, floor;

	/* the engine's connections answered slowly lately: so will this one's (64 of them
	 * probing at once, none answered yet, each sent round after round) */
	if (pr->shared_answer_ns && *pr->shared_answer_ns > answer) {
		answer = *pr->shared_answer_ns;
	}
	floor = 2 * answer;

	if (floor < PROBE_INTERVAL_NS) {
		return PROBE_INTERVAL_NS;
	}
	return floor < PROBE_WAIT_MAX_NS ? floor : PROBE_WAIT_MAX_NS;
}

/*
 * Whether the running rescue replaces path p (a path added since it began never): our own,
 * after timeouts here: p has had no ack since it began; the peer's: nothing p sent since the
 * peer stopped hearing us has been acked (an ack that comes now of a packet sent before proves
 * nothing of the pair today).
 */
static bool rescue_victim_ok(const struct harp_conn *c, const struct conn_path *p)
{
	const struct conn_probe *pr = &c->probe;

	if (!p->live || p->last_ack_ns >= pr->rescue_ns) {
		return false;
	}
	return !pr->for_peer || p->rack_xmit_ns <= pr->deaf_from_ns;
}

/* A path that sent while the peer heard nothing of us, with nothing sent since acked: dark. */
static bool path_unheard(const struct conn_path *p, uint64_t from_ns, uint64_t to_ns)
{
	return p->live && p->rack_xmit_ns <= from_ns && p->sent_ns > from_ns && p->sent_ns <= to_ns;
}

/* The paths the running rescue would replace. */
static uint32_t rescue_silent(const struct harp_conn *c)
{
	uint32_t i, n = 0;

	for (i = 0; i < c->npaths; i++) {
		n += rescue_victim_ok(c, &c->paths[i]);
	}
	return n;
}

/*
 * Starts the next probe round: fresh candidate port pairs, none of them a live path's or one
 * another engine of this context owns (pairs.h); PROBE_CANDS_PER_PATH of them for each path
 * still wanted, at most CONN_PROBE_CANDS.
 */
static void probe_round(struct harp_conn *c, uint64_t now)
{
	struct conn_probe *pr = &c->probe;
	uint32_t want = c->paths_want > c->paths_live ? c->paths_want - c->paths_live : 1;
	uint32_t n = 0, tries = 0, i, cands;
	uint64_t floor = probe_wait_floor(pr);

	/* what the peer can still answer of the round before: the candidates it was sent */
	pr->prev.ncands = pr->sent < pr->ncands ? pr->sent : pr->ncands;
	pr->prev.round_ns = pr->round_ns;
	pr->prev.answered = pr->answered;
	pr->prev.rescue = pr->round_rescue;
	memcpy(pr->prev.src, pr->cand_src, sizeof(pr->prev.src));
	memcpy(pr->prev.dst, pr->cand_dst, sizeof(pr->prev.dst));
	pr->round++;
	if (pr->rescue_ns && !pr->rescue_round) {
		uint32_t silent = rescue_silent(c);

		want = silent > want ? silent : want;
		pr->rescue_round = pr->round;
	}
	pr->round_rescue = pr->rescue_ns && pr->rescue_round == pr->round;
	cands = want * PROBE_CANDS_PER_PATH < CONN_PROBE_CANDS ? want * PROBE_CANDS_PER_PATH
							       : CONN_PROBE_CANDS;
	pr->answered = false;
	while (n < cands && tries++ < 4 * CONN_PROBE_CANDS) {
		uint16_t sp = htons((uint16_t)(c->port_lo + xorshift(&pr->rng) % c->port_span));
		uint16_t dp = htons(
			(uint16_t)(c->peer_port_lo + xorshift(&pr->rng) % c->peer_port_span));
		bool used = path_live_on(c, sp, dp);

		for (i = 0; i < n && !used; i++) {
			used = pr->cand_src[i] == sp && pr->cand_dst[i] == dp;
		}
		if (!used && c->pairs) {
			used = !pairs_free_for(c->pairs, peer_key(c), sp, dp, c->pair_owner);
		}
		if (!used) {
			pr->cand_src[n] = sp;
			pr->cand_dst[n] = dp;
			n++;
		}
	}
	pr->ncands = n;
	pr->sent = 0;
	pr->round_ns = now;
	pr->next_ns = now + (pr->interval_ns > floor ? pr->interval_ns : floor);
	pr->interval_ns = pr->interval_ns * 2 < PROBE_INTERVAL_MAX_NS ? pr->interval_ns * 2
								    : PROBE_INTERVAL_MAX_NS;
}

/* The pair's slot in the steer list, or CONN_STEER_PAIRS. */
static uint32_t steer_find(const struct conn_steer *st, uint16_t local_port, uint16_t peer_port)
{
	uint32_t i;

	for (i = 0; i < st->n; i++) {
		if (st->local_port[i] == local_port && st->peer_port[i] == peer_port) {
			return i;
		}
	}
	return CONN_STEER_PAIRS;
}

/* Enters a pair in the steer list, in place of the one the peer used least lately when it is
 * full. Its first STEER goes at once (the peer sends on the pair already), and the early rounds
 * start again for all. */
static void steer_add(struct conn_steer *st, uint16_t local_port, uint16_t peer_port,
		      uint64_t now)
{
	uint32_t i, j;

	if (st->n < CONN_STEER_PAIRS) {
		i = st->n++;
	} else {
		for (i = 0, j = 1; j < st->n; j++) {
			i = st->used_ns[j] < st->used_ns[i] ? j : i;
		}
	}
	st->local_port[i] = local_port;
	st->peer_port[i] = peer_port;
	st->used_ns[i] = now;
	st->fresh |= 1u << i;
	st->sent = 0;
	st->repeats = 1; /* its first STEER is the first round; the next is the 5 ms one */
	st->next_ns = now + 5000000;
}

void conn_on_peer_probe(struct harp_conn *c, uint16_t local_port, uint16_t peer_port,
			uint64_t now)
{
	if (steer_find(&c->steer, local_port, peer_port) == CONN_STEER_PAIRS) {
		steer_add(&c->steer, local_port, peer_port, now);
	}
}

void conn_on_peer_data(struct harp_conn *c, uint16_t local_port, uint16_t peer_port,
		       uint64_t now)
{
	uint32_t i = steer_find(&c->steer, local_port, peer_port);

	if (i < CONN_STEER_PAIRS) {
		c->steer.used_ns[i] = now;
		return;
	}
	/* a path of the peer's whose pair left the list (or whose probe came before a restart
	 * of ours): steered here again, unless another engine here owns it */
	if (!c->pairs ||
	    pairs_free_for(c->pairs, peer_key(c), local_port, peer_port, c->pair_owner)) {
		steer_add(&c->steer, local_port, peer_port, now);
	}
}

bool conn_steer_due(const struct harp_conn *c, uint64_t now)
{
	return c->steer.fresh || (c->steer.n && now >= c->steer.next_ns);
}

/* The next STEER of a round that is due, or false when none is (the round ends, the next one
 * is scheduled). */
static bool next_steer(struct harp_conn *c, struct conn_tx *tx, uint64_t now)
{
	struct conn_steer *st = &c->steer;
	uint32_t i;

	if (st->fresh) {
		i = (uint32_t)__builtin_ctz(st->fresh);
		st->fresh &= st->fresh - 1;
	} else if (!conn_steer_due(c, now)) {
		return false;
	} else if (st->sent >= st->n) {
		static const uint64_t early_ns[] = { 5000000, 50000000, 250000000 };

		st->sent = 0;
		st->next_ns = now + (st->repeats < 3 ? early_ns[st->repeats++] : CONN_STEER_PERIOD_NS);
		return false;
	} else {
		i = st->sent++;
	}
	unreliable_hdr(c, &tx->h, HARP_PKT_STEER, now);
	tx->src_port = st->local_port[i];
	tx->dst_port = st->peer_port[i];
	if (c->pairs) {
		pairs_lease(c->pairs, peer_key(c), tx->src_port, tx->dst_port, c->pair_owner,
			    now / 1000000);
	}
	tx->twin_src_port = 0;
	tx->twin_dst_port = 0;
	tx->payload = NULL;
	tx->device = false;
	c->stats.steers_sent++;
	return true;
}

/* Path i stops carrying: what it holds unacked goes again elsewhere. */
static void path_retire(struct harp_conn *c, uint32_t i)
{
	struct conn_path *p = &c->paths[i];
	uint32_t psn;

	p->live = false;
	c->paths_live--;
	for (psn = c->snd_una; psn_before(psn, c->snd_nxt); psn++) {
		struct tx_rec *rec = rec_of(c, psn);

		if (!rec->acked && rec->path == i) {
			queue_rtx(c, rec, psn);
		}
	}
	p->inflight = 0;
	p->inflight_bytes = 0;
}

/*
 * The path a rescue's answered candidate replaces: the one without an ack longest among those
 * it replaces; -1: none (each has been acked or replaced since: it is over).
 */
static int rescue_victim(const struct harp_conn *c)
{
	uint64_t oldest = UINT64_MAX;
	int victim = -1;
	uint32_t i;

	for (i = 0; i < c->npaths; i++) {
		const struct conn_path *p = &c->paths[i];

		if (rescue_victim_ok(c, p) && p->last_ack_ns < oldest) {
			oldest = p->last_ack_ns;
			victim = (int)i;
		}
	}
	return victim;
}

/*
 * A rescue's answer added a pair that a probe just crossed: the oldest packet a path still silent
 * holds goes on it now, not at the next timeout. A retransmission takes the path acked last and
 * a rescue replaces the one acked longest ago first, so the packet the connection waits on can
 * sit on the last silent path, and after timeouts that found every path dark the next is up to
 * CONN_RTO_MAX_US away: a starved guest's connection died so, 693 ms after its rescue had
 * replaced every path but that one. One packet an answer: its ack, cumulative, proves the new
 * path and moves the window; the rest stays with the timer and loss detection (a starved peer
 * whose paths were never dark would get a window of duplicates otherwise).
 */
static void rescue_resend(struct harp_conn *c, uint64_t now)
{
	uint32_t psn;

	for (psn = c->snd_una; psn_before(psn, c->snd_nxt); psn++) {
		struct tx_rec *rec = rec_of(c, psn);

		if (!rec->acked && !rec->dead && !rec->rtx_queued &&
		    rescue_victim_ok(c, &c->paths[rec->path])) {
			queue_rtx(c, rec, psn);
			c->probe.resent_ns = now;
			return;
		}
	}
}

/* A rescue round's answered candidate: the pair reaches the peer's engine now, which is more
 * than the silent path it replaces can say. */
static bool rescue_take(struct harp_conn *c, uint16_t src_port, uint16_t dst_port, uint64_t now)
{
	int victim = rescue_victim(c);
	const struct conn_path *p;

	if (victim < 0) {
		c->probe.rescue_ns = 0;
		return false;
	}
	if (path_live_on(c, src_port, dst_port)) {
		return false; /* a path already (two rounds' candidates may share a pair) */
	}
	p = &c->paths[victim];
	pr_debug("conn %u: path %d (ports %u->%u) without an ack for %llu ms, as every path was; "
		 "replaced by %u->%u, which a probe just crossed",
		 c->id, victim, ntohs(p->src_port), ntohs(p->dst_port),
		 (unsigned long long)((now - p->last_ack_ns) / 1000000), ntohs(src_port),
		 ntohs(dst_port));
	path_retire(c, (uint32_t)victim);
	c->stats.paths_retired++;
	c->stats.paths_rescued++;
	if (conn_add_path(c, src_port, dst_port, now) < 0) {
		return false;
	}
	rescue_resend(c, now);
	return true;
}

/* A round's first answer: how long answers take, for the wait between rounds (probe_wait_floor). */
static void probe_answer_took(struct conn_probe *pr, uint64_t took)
{
	pr->answer_ns = pr->answer_ns ? (3 * pr->answer_ns + took) / 4 : took;
	if (pr->shared_answer_ns) {
		uint64_t *sh = pr->shared_answer_ns;

		*sh = *sh ? (7 * *sh + took) / 8 : took;
	}
}

/*
 * The peer's engine got candidate cand of round `round`. An answer to the round before this
 * one counts as well: a starved peer answers after the next round began (each timeout and each
 * CHAN_UNHEARD of its own begins a rescue round anew), and dropped as stale, its answers never
 * replaced a path nor taught the wait: 14 rescue rounds went unanswered so on vm_copy_rss_q2
 * under load while the peer was alive, until the peer timeout.
 */
void conn_on_probe_result(struct harp_conn *c, uint32_t round, uint32_t cand, uint64_t now)
{
	struct conn_probe *pr = &c->probe;
	const uint16_t *src, *dst;
	bool fresh = false, rescue, *answered;
	uint64_t began;

	if (round == pr->round && cand < pr->ncands) {
		src = pr->cand_src;
		dst = pr->cand_dst;
		began = pr->round_ns;
		answered = &pr->answered;
		rescue = pr->rescue_ns && round == pr->rescue_round;
	} else if (pr->round && round == pr->round - 1 && cand < pr->prev.ncands) {
		src = pr->prev.src;
		dst = pr->prev.dst;
		began = pr->prev.round_ns;
		answered = &pr->prev.answered;
		rescue = pr->rescue_ns && pr->prev.rescue;
	} else {
		return; /* an earlier round's: its candidates are gone */
	}
	if (!*answered) {
		*answered = true;
		probe_answer_took(pr, now - began);
	}
	/* another engine took the pair since the round began (its own probe, or the peer's) */
	if (c->pairs && !pairs_claim(c->pairs, peer_key(c), src[cand], dst[cand], c->pair_owner,
				     &fresh)) {
		c->stats.probes_pair_taken++;
		return;
	}
	if (conn_add_path(c, src[cand], dst[cand], now) >= 0) {
		pr->interval_ns = PROBE_INTERVAL_NS; /* rounds find paths: no need to wait longer */
		return;
	}
	if (rescue && rescue_take(c, src[cand], dst[cand], now)) {
		return;
	}
	if (fresh) {
		/* no path on it: another engine of ours may have it */
		pairs_release(c->pairs, peer_key(c), src[cand], dst[cand], c->pair_owner);
	}
}

bool conn_paths_hopeless(const struct harp_conn *c, uint64_t now, uint64_t limit_ns)
{
	const struct conn_probe *pr = &c->probe;

	if (!c->port_span || c->paths_live || now - pr->first_ns <= limit_ns) {
		return false;
	}
	/* Judged on a round begun in the second half of the limit and unanswered for the longest
	 * wait between rounds. An engine that ran no pass for seconds (its process busy elsewhere,
	 * its threads starved of CPU) holds a round begun long ago whose answers missed it, or
	 * never came because the peer starved too: it probes again before it gives up. */
	return pr->round && pr->round_ns - pr->first_ns >= limit_ns / 2 &&
	       now - pr->round_ns >= PROBE_INTERVAL_MAX_NS &&
	       now - pr->round_ns >= probe_wait_floor(pr);
}

/* Per path: RTT sample, window growth, and the path's proof of life. */
void paths_on_ack(struct harp_conn *c, const struct ack_tally *t, uint64_t now)
{
	uint32_t i;

	for (i = 0; i < c->npaths; i++) {
		struct conn_path *p = &c->paths[i];

		if (!(t->touched & (1u << i))) {
			continue;
		}
		if (t->newest_sent[i] && now > t->newest_sent[i]) {
			rtt_sample(&p->rtt, (uint32_t)((now - t->newest_sent[i]) / 1000));
		}
		p->acked += t->newly[i];
		if (p->acked > PATH_AGE_ACKED) {
			p->acked /= 2;
			p->losses /= 2;
		}
		cc_on_ack(&p->cc, t->bytes[i], c->snd_una, &p->rtt, now);
		p->last_ack_ns = now;
		p->ever_acked = true;
		p->waiting_since_ns = p->inflight ? now : 0;
	}
}

/*
 * A path that has left packets unanswered while packets sent on other paths PATH_RETIRE_RTOS of
 * its RTOs later have been acked (so the peer is alive and keeping up: not a pause of ours or
 * its) is a black hole: retire it, send what it holds again elsewhere, and probe for a
 * replacement. The last live path stays: with nothing to compare it to, silence is the peer's,
 * and the peer timeout judges that.
 */
void paths_retire_dead(struct harp_conn *c, uint64_t now)
{
	uint32_t i;

	for (i = 0; i < c->npaths && c->paths_live > 1; i++) {
		struct conn_path *p = &c->paths[i];
		uint64_t limit = (uint64_t)p->rtt.rto_us * 1000 * PATH_RETIRE_RTOS;

		if (limit < PATH_RETIRE_MIN_NS) {
			limit = PATH_RETIRE_MIN_NS;
		}
		if (!p->live || !p->waiting_since_ns ||
		    c->rack_xmit_ns <= p->waiting_since_ns + limit) {
			continue;
		}
		path_retire(c, i);
		c->stats.paths_retired++;
		pr_debug("conn %u: path %u (ports %u->%u) silent for %llu ms while others deliver; "
			 "retired, probing for another",
			 c->id, i, ntohs(p->src_port), ntohs(p->dst_port),
			 (unsigned long long)((now - p->waiting_since_ns) / 1000000));
		c->probe.next_ns = now; /* a replacement, at once */
		c->probe.interval_ns = PROBE_INTERVAL_NS;
	}
}

/*
 * Every path silent through RESCUE_TIMEOUTS retransmission timeouts in a row: paths_retire_dead
 * cannot tell a dark path from a silent peer with none delivering, and no path is missing, so
 * nothing would probe. A flow the network moved or dropped (a tap queue that stalls, a hash a
 * middle box changed) can take all of a connection's pairs at once while fresh pairs cross:
 * probe for them now, a round per timeout, and let each answer replace a silent path
 * (rescue_take). The acks that did not come travel on the peer's pairs, which may be the dark
 * ones: the peer is told (CHAN_UNHEARD) and rescues its own. A peer that is gone answers
 * nothing, and the peer timeout judges it as before.
 */
static bool rescue_start(struct harp_conn *c, uint64_t now)
{
	struct conn_probe *pr = &c->probe;

	if (!c->port_span || !c->paths_live) {
		return false; /* no paths yet: the first rounds are under way */
	}
	if (pr->rescue_ns && pr->rescue_round == pr->round &&
	    now - pr->round_ns < probe_wait_floor(pr)) {
		return true; /* the last rescue round's answers may still come */
	}
	pr->rescue_ns = now;
	pr->for_peer = false;
	pr->rescue_round = 0;
	pr->sent = pr->ncands; /* an unfinished round gives way */
	pr->next_ns = now;
	pr->interval_ns = PROBE_INTERVAL_NS;
	return true;
}

/* What the paths of a connection declared dead went through: where a rare death under a real
 * network came from is read from this line (which paths fell silent, when, what probing did). */
void paths_log_at_death(const struct harp_conn *c, uint64_t now)
{
	char list[CONN_MAX_PATHS * 96] = "";
	size_t off = 0;
	uint32_t i;

	for (i = 0; i < c->npaths && off < sizeof(list); i++) {
		const struct conn_path *p = &c->paths[i];
		uint64_t ack_ms = (now - p->last_ack_ns) / 1000000;
		uint64_t wait_ms = p->waiting_since_ns ? (now - p->waiting_since_ns) / 1000000 : 0;
		int n;

		if (!p->live) {
			continue;
		}
		n = snprintf(list + off, sizeof(list) - off,
			     "%s %u->%u %s%llu/%llu ms %u/%u B %u/%u pkts pacer %lld B",
			     off ? ";" : "", ntohs(p->src_port), ntohs(p->dst_port),
			     p->ever_acked ? "" : "never acked, added ", (unsigned long long)ack_ms,
			     (unsigned long long)wait_ms, p->inflight_bytes, p->cc.cwnd, p->inflight,
			     p->inflight_max, (long long)p->pace.credit);
		off += n > 0 ? (size_t)n : 0;
	}
	pr_warn("conn %u: %u of %u paths live, %u retired (%u by rescues after every path fell "
		"silent), %llu probes sent, %u timeouts in a row, last packet of any kind from the "
		"peer %llu ms ago, %u packets unacked, %u in flight (at most %u), %u queued to go "
		"again%s%s; each live path's ports, time since its last ack / since its oldest "
		"unanswered send, bytes in flight / window, packets in flight / most, pacer "
		"credit:%s",
		c->id, c->paths_live, c->paths_want, c->stats.paths_retired, c->stats.paths_rescued,
		(unsigned long long)c->stats.probes_sent, c->rto_streak,
		(unsigned long long)((now - c->rx_any_ns) / 1000000), c->snd_nxt - c->snd_una,
		c->inflight, c->cwnd_max, c->rtx_tail - c->rtx_head,
		c->seg_out.active ? ", a packet going out in parts" : "",
		c->pace_held ? ", pacing held the last send" : "", list);
}

/*
 * The peer's timeouts found every path silent and it has heard nothing of us for ms: our pairs
 * to it carry its acks, and one we sent on in that time (less a round trip for the last packet
 * to arrive) is dark. Then every pair not acked since the peer went deaf is replaced: those we
 * did not send on are no better known. Nothing, when we sent nothing (we heard nothing either:
 * its pairs are what is dark, and it rescues those), or the peer heard us within a round trip.
 */
void conn_on_peer_unheard(struct harp_conn *c, uint32_t ms, uint64_t now)
{
	struct conn_probe *pr = &c->probe;
	uint64_t deaf_ns = (uint64_t)ms * 1000000, rtt_ns = (uint64_t)c->rtt.srtt_us * 1000;
	uint32_t i;

	/* at most one a RESCUE_GAP_NS, whatever became of the last (rescue_ns goes back to 0
	 * when a round finds no victim) */
	if (deaf_ns > now || deaf_ns <= rtt_ns ||
	    (pr->peer_rescue_ns && now - pr->peer_rescue_ns < RESCUE_GAP_NS)) {
		return;
	}
	for (i = 0; i < c->npaths; i++) {
		if (path_unheard(&c->paths[i], now - deaf_ns, now - rtt_ns)) {
			break;
		}
	}
	if (i == c->npaths) {
		return;
	}
	rescue_start(c, now);
	if (pr->rescue_ns == now) { /* else a rescue round of ours still waits for answers */
		pr->for_peer = true;
		pr->deaf_from_ns = now - deaf_ns;
		pr->peer_rescue_ns = now;
	}
}

/* Packets of mtu bytes of IP from now on (pmtu.c): each path's window counts in them. */
void paths_set_mss(struct harp_conn *c, uint32_t mtu)
{
	uint32_t i;

	for (i = 0; i < c->npaths; i++) {
		cc_set_mss(&c->paths[i].cc, mtu);
	}
}

/*
 * A retransmission timeout (conn_on_timer; c->rto_streak counts it already): every live path's
 * window collapses, kept as it was for paths_undo_timeout, and after RESCUE_TIMEOUTS in a row
 * with no ack between, a rescue round probes for fresh pairs.
 */
void paths_on_timeout(struct harp_conn *c, uint64_t now)
{
	uint32_t i;

	if (!c->rto_undo_armed) {
		for (i = 0; i < c->npaths; i++) {
			c->cc_before_rto[i] = c->paths[i].cc;
		}
		c->rto_undo_armed = true;
	}
	c->rto_at_us = (uint32_t)(now / 1000);
	for (i = 0; i < c->npaths; i++) {
		if (c->paths[i].live) {
			cc_on_timeout(&c->paths[i].cc, c->snd_nxt);
		}
	}
	if (c->rto_streak >= RESCUE_TIMEOUTS && rescue_start(c, now)) {
		/* whole ms, rounded down: the peer's window of deafness starts after the last
		 * packet heard, never on it */
		c->probe.unheard_ms = (uint32_t)((now - c->rx_any_ns) / 1000000);
	}
}

/*
 * An ack echoing a packet sent before the last timeout means the "lost" packets were only late
 * (a peer descheduled for a few milliseconds looks exactly like loss): put the windows back.
 */
void paths_undo_timeout(struct harp_conn *c, uint32_t ts_echo)
{
	if (!c->rto_undo_armed) {
		return;
	}
	c->rto_undo_armed = false;
	if ((int32_t)(ts_echo - c->rto_at_us) < 0) {
		uint32_t i;

		for (i = 0; i < c->npaths; i++) {
			c->paths[i].cc = c->cc_before_rto[i];
			cc_set_mss(&c->paths[i].cc, pkt_bytes(c, c->payload_max));
		}
		c->stats.spurious_timeouts++;
	}
}

/* The next STEER or PROBE of this connection's, if one is due (conn_next_probe). */
bool paths_next_probe(struct harp_conn *c, struct conn_tx *tx, uint64_t now)
{
	struct conn_probe *pr = &c->probe;
	struct harp_hdr *h = &tx->h;

	if (!c->port_span) {
		return false;
	}
	if (next_steer(c, tx, now)) {
		return true;
	}
	if (pr->sent == pr->ncands) {
		bool rescue = pr->rescue_ns && !pr->rescue_round && rescue_silent(c);

		if ((c->paths_live >= c->paths_want && !rescue) || now < pr->next_ns) {
			return false;
		}
		probe_round(c, now);
		if (!pr->ncands) {
			return false;
		}
	}
	/* A probe steers its pair's flow to this queue: a tap sends each flow to the queue the
	 * guest last sent it from (pairs.h). So none goes on a pair another engine took since
	 * the round began, or sent on lately. */
	while (c->pairs && pr->sent < pr->ncands &&
	       (!pairs_free_for(c->pairs, peer_key(c), pr->cand_src[pr->sent],
				pr->cand_dst[pr->sent], c->pair_owner) ||
		pairs_leased_by_other(c->pairs, peer_key(c), pr->cand_src[pr->sent],
				      pr->cand_dst[pr->sent], c->pair_owner, now / 1000000))) {
		pr->sent++;
	}
	if (pr->sent == pr->ncands) {
		return false;
	}
	if (c->pairs) {
		pairs_lease(c->pairs, peer_key(c), pr->cand_src[pr->sent], pr->cand_dst[pr->sent],
			    c->pair_owner, now / 1000000);
	}
	unreliable_hdr(c, h, HARP_PKT_PROBE, now);
	h->rsn = pr->round;
	h->tag = pr->sent;
	tx->src_port = pr->cand_src[pr->sent];
	tx->dst_port = pr->cand_dst[pr->sent];
	tx->payload = NULL;
	tx->device = false;
	pr->sent++;
	c->stats.probes_sent++;
	return true;
}

void conn_probe_answers(struct harp_conn *c, uint64_t answer_ns, uint64_t *shared_answer_ns)
{
	c->probe.answer_ns = answer_ns;
	c->probe.shared_answer_ns = shared_answer_ns;
}

uint32_t conn_take_unheard(struct harp_conn *c)
{
	uint32_t ms = c->probe.unheard_ms;

	c->probe.unheard_ms = 0;
	return ms;
}
