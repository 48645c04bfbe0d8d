// SPDX-License-Identifier: Apache-2.0
/*
 * Per-connection reliability, run only by the connection's engine.
 *
 * Each direction is a stream of reliable packets numbered by psn: DATA (a slice of a message),
 * CTS (one posted receive buffer, the receiver-driven rendezvous) and MSGERR (a message refused
 * for not fitting). ACKs are not numbered; they carry the cumulative ack (every psn before
 * ack_psn arrived) and a selective-ack map of up to 512 bytes of what arrived beyond it, and
 * every packet piggybacks the cumulative ack too.
 *
 * Receives take the peer's sends in order, nbufs each, and within a receive each send takes the
 * buffer of its tag. A send is numbered (ssn) in its posting order, so both sides know which
 * receive it falls to. Sends go against the peer's CTS, which names the buffer: DATA then
 * carries (receive, buffer, offset), so the receiver copies each payload straight into place
 * whatever order packets arrive in, and a packet is applied exactly once because its psn is
 * remembered in a bitmap until the cumulative ack passes it. A small send need not wait for the
 * CTS: it goes unsolicited, as one DATA record naming its ssn; the receiver places it in the
 * receive it falls to, or holds it until that receive is posted. Credits bound what the receiver
 * holds: at most CONN_UNSOL_CREDITS sends wait for their CTS, which completes them (or fails
 * them, if their buffer is too small). A request-response exchange over two connections thus
 * needs no rendezvous round trip on its critical path.
 *
 * A connection spreads its packets over several paths (UDP port pairs that probing showed to
 * reach the peer's engine for this connection), each with its own window, RTT and loss clock: a
 * new packet goes to the path with room and the least delay, a retransmission to another path
 * than the one that lost it, and a path that stops acknowledging is retired and replaced.
 *
 * Loss is found the RACK way, per path (a packet sent on a path before one that has been acked
 * on the same path, by more than a quarter of that path's RTT, is lost), and by the
 * retransmission timer. A loss with no queueing delay behind it and a low loss rate is taken for
 * random loss and does not shrink the window. A retransmission re-reads the sender's buffer
 * (valid until the send completes), so no frame is held for it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "conn.h"
#include "pairs.h"

#define RTO_INIT_US 20000
#define RTO_MIN_US 10000
#define RTO_MAX_US 2000000
#define CWND_INIT 32 /* packets, the connection's: shared over its paths */
#define CWND_MIN 4   /* packets, the connection's floor: shared too, at least 1 a path */
#define RACK_SCAN_MAX 2048 /* psns examined per ack for loss */
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
					  * timeouts are further apart (RTO_MIN_US) */

int conn_alloc_state(struct harp_conn *c, uint32_t cwnd_max)
{
	c->txq = table_alloc(CONN_TXQ * sizeof(*c->txq)); /* 224 KiB: what a full window uses */
	c->rtxq = table_alloc(CONN_TXQ * sizeof(*c->rtxq));
	c->cts = table_alloc(CONN_RECV_SLOTS * sizeof(*c->cts));
	c->rcv_bits = calloc(CONN_TXQ / 64, sizeof(*c->rcv_bits));
	c->recv_slots = calloc(CONN_RECV_SLOTS, sizeof(*c->recv_slots));
	c->send_slots = calloc(CONN_REQS, sizeof(*c->send_slots));
	c->eager_copies = table_alloc(CONN_EAGER_SLOTS * CONN_EAGER_BYTES);
	c->rcv_first_ssn = calloc(CONN_RECV_SLOTS, sizeof(*c->rcv_first_ssn));
	c->held = calloc(CONN_UNSOL_CREDITS, sizeof(*c->held));
	c->held_bytes = table_alloc(CONN_UNSOL_CREDITS * CONN_EAGER_BYTES);
	if (!c->txq || !c->rtxq || !c->cts || !c->rcv_bits || !c->recv_slots || !c->send_slots ||
	    !c->eager_copies || !c->rcv_first_ssn || !c->held || !c->held_bytes) {
		return -ENOMEM;
	}
	rtt_init(&c->rtt, RTO_INIT_US, RTO_MIN_US, RTO_MAX_US);
	c->cwnd_max = cwnd_max;
	c->paths_want = 1;
	c->reo_mult = 1;
	return 0;
}

void conn_free(struct harp_conn *c)
{
	if (!c) {
		return;
	}
	auth_free(c->auth);
	table_free(c->txq, CONN_TXQ * sizeof(*c->txq));
	table_free(c->rtxq, CONN_TXQ * sizeof(*c->rtxq));
	table_free(c->cts, CONN_RECV_SLOTS * sizeof(*c->cts));
	free(c->rcv_bits);
	free(c->recv_slots);
	free(c->send_slots);
	table_free(c->eager_copies, CONN_EAGER_SLOTS * CONN_EAGER_BYTES);
	free(c->rcv_first_ssn);
	free(c->held);
	table_free(c->held_bytes, CONN_UNSOL_CREDITS * CONN_EAGER_BYTES);
	c->eager_copies = NULL;
	c->rcv_first_ssn = NULL;
	c->held = NULL;
	c->held_bytes = NULL;
	c->txq = NULL;
	c->rtxq = NULL;
	c->cts = NULL;
	c->rcv_bits = NULL;
	c->recv_slots = NULL;
	c->send_slots = NULL;
}

static void pmtu_use(struct harp_conn *c, uint32_t mtu);
static uint32_t pmtu_base(const struct conn_pmtu *pm);

void conn_start(struct harp_conn *c, uint64_t now)
{
	/* Every clock starts here, on the adopting engine's now: a time read by the thread that
	 * handed the connection over can be later than this pass's, and a start in the future
	 * makes now - start wrap (probing was judged hopeless before its first probe). */
	c->rto_base_ns = now;
	c->last_ack_ns = now;
	c->heard_ns = now;
	c->rx_any_ns = now;
	c->probe.first_ns = now;
	c->probe.next_ns = now;
	if (c->pmtu.ceiling) {
		struct conn_pmtu *pm = &c->pmtu;

		/* the floor, until a probe is answered: data larger than the path carries
		 * would be dropped without a word, every packet of it */
		pmtu_use(c, pmtu_base(pm));
		pm->lo = pm->mtu;
		pm->hi = pm->ceiling + 1;
		pm->next_ns = now;
	}
}

static struct tx_rec *rec_of(struct harp_conn *c, uint32_t psn)
{
	return &c->txq[psn & (CONN_TXQ - 1)];
}

/* Bytes of IP a packet of payload bytes takes: what the windows count. */
static uint32_t pkt_bytes(const struct harp_conn *c, uint32_t payload)
{
	return payload + HARP_IP4_HLEN + HARP_UDP_HLEN + HARP_HDR_LEN +
	       (c->auth ? HARP_AUTH_TRAILER : 0);
}

/* A packet of payload bytes of rec goes out: its bytes count against the path's window, and
 * spend its pacer's credit, until rec is acked or judged lost. */
static void pipe_add(struct harp_conn *c, struct tx_rec *rec, uint32_t payload)
{
	struct conn_path *p = &c->paths[rec->path];
	uint32_t bytes = pkt_bytes(c, payload);

	/* a record cut in HARP_SEG_MAX parts, each with headers: under 19 KB in all */
	rec->pipe_bytes = (uint16_t)(rec->pipe_bytes + bytes);
	p->inflight_bytes += bytes;
	if (c->pacing) {
		pace_spend(&p->pace, bytes);
	}
}

/* A record goes out on path, whole or as its first part of payload bytes (pipe_add the rest). */
static void pipe_enter(struct harp_conn *c, struct tx_rec *rec, int path, uint32_t payload)
{
	rec->in_pipe = true;
	rec->path = (uint8_t)path;
	rec->pipe_bytes = 0;
	c->inflight++;
	c->paths[path].inflight++;
	pipe_add(c, rec, payload);
}

static void pipe_leave(struct harp_conn *c, struct tx_rec *rec)
{
	struct conn_path *p = &c->paths[rec->path];

	if (!rec->in_pipe) {
		return;
	}
	rec->in_pipe = false;
	c->inflight--;
	p->inflight--;
	p->inflight_bytes -= rec->pipe_bytes;
}

/* ---- paths ------------------------------------------------------------------------------------ */

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

int conn_add_path(struct harp_conn *c, uint16_t src_port, uint16_t dst_port, uint64_t now)
{
	uint32_t per_max = c->cwnd_max / c->paths_want, init = CWND_INIT / c->paths_want, i;
	uint32_t floor = CWND_MIN / c->paths_want ? CWND_MIN / c->paths_want : 1;
	uint32_t mss = pkt_bytes(c, c->payload_max);
	uint32_t largest = c->pmtu.ceiling > mss ? c->pmtu.ceiling : mss;
	struct conn_path *p;

	for (i = 0; i < c->npaths; i++) {
		if (c->paths[i].live && c->paths[i].src_port == src_port &&
		    c->paths[i].dst_port == dst_port) {
			return -EEXIST;
		}
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
	rtt_init(&p->rtt, RTO_INIT_US, RTO_MIN_US, RTO_MAX_US);
	pace_init(&p->pace, now);
	/* The window starts at the path's share of CWND_INIT packets of the base size (not of a
	 * ceiling the path may not carry) and stops at its share of HARP_CWND_MAX packets of the
	 * largest size it may come to carry (a floor of 16 a path let HARP_CWND_MAX=16 send 128). Its floor is a share too: 8 paths each held at 4
	 * packets kept 32 in flight through a hop whose queue and round trip held 21, and lost a
	 * third of what they sent (300 Mbit/s, a 16-packet queue). */
	p->inflight_max = per_max ? per_max : 1; /* and pick_path holds the sum to HARP_CWND_MAX */
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
static int pick_path(struct harp_conn *c, int avoid, bool rtx, uint64_t now)
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
static int any_path(struct harp_conn *c)
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
static void path_on_loss(struct harp_conn *c, struct conn_path *p, uint32_t psn)
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

	pr->round++;
	if (pr->rescue_ns && !pr->rescue_round) {
		uint32_t silent = rescue_silent(c);

		want = silent > want ? silent : want;
		pr->rescue_round = pr->round;
	}
	cands = want * PROBE_CANDS_PER_PATH < CONN_PROBE_CANDS ? want * PROBE_CANDS_PER_PATH
							       : CONN_PROBE_CANDS;
	pr->answered = false;
	while (n < cands && tries++ < 4 * CONN_PROBE_CANDS) {
		uint16_t sp = htons((uint16_t)(c->port_lo + xorshift(&pr->rng) % c->port_span));
		uint16_t dp = htons(
			(uint16_t)(c->peer_port_lo + xorshift(&pr->rng) % c->peer_port_span));
		bool used = false;

		for (i = 0; i < c->npaths && !used; i++) {
			used = c->paths[i].live && c->paths[i].src_port == sp &&
			       c->paths[i].dst_port == dp;
		}
		for (i = 0; i < n && !used; i++) {
			used = pr->cand_src[i] == sp && pr->cand_dst[i] == dp;
		}
		if (!used && c->pairs) {
			used = !pairs_free_for(c->pairs, c->path.dst_ip, sp, dp, c->pair_owner);
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
	    pairs_free_for(c->pairs, c->path.dst_ip, local_port, peer_port, c->pair_owner)) {
		steer_add(&c->steer, local_port, peer_port, now);
	}
}

bool conn_steer_due(const struct harp_conn *c, uint64_t now)
{
	return c->steer.fresh || (c->steer.n && now >= c->steer.next_ns);
}

/* The header of a PROBE or STEER: no psn, no body, never acknowledged. */
static void unreliable_hdr(const struct harp_conn *c, struct harp_hdr *h, uint8_t type,
			   uint64_t now)
{
	memset(h, 0, sizeof(*h));
	h->version = HARP_WIRE_VERSION;
	h->type = type;
	h->conn_id = c->peer_id;
	h->token = c->token;
	h->ts = (uint32_t)(now / 1000);
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
		pairs_lease(c->pairs, c->path.dst_ip, tx->src_port, tx->dst_port, c->pair_owner,
			    now / 1000000);
	}
	tx->twin_src_port = 0;
	tx->twin_dst_port = 0;
	tx->payload = NULL;
	tx->device = false;
	c->stats.steers_sent++;
	return true;
}

/* ---- path MTU (conn_pmtu, conn.h) ------------------------------------------------------------ */

static const uint8_t pmtu_padding[HARP_IP_MAX]; /* a PMTU probe's body */

void conn_pmtu_init(struct harp_conn *c, uint32_t ceiling)
{
	c->pmtu.ceiling = ceiling;
}

/* Packets of mtu bytes of IP from now on: their payload, less a MAC trailer where there is one. */
static void pmtu_use(struct harp_conn *c, uint32_t mtu)
{
	uint32_t i;

	c->pmtu.mtu = mtu;
	c->payload_max = mtu - HARP_IP4_HLEN - HARP_UDP_HLEN - HARP_HDR_LEN -
			 (c->auth ? HARP_AUTH_TRAILER : 0);
	for (i = 0; i < c->npaths; i++) {
		cc_set_mss(&c->paths[i].cc, mtu);
	}
}

static uint32_t pmtu_base(const struct conn_pmtu *pm)
{
	return pm->ceiling < CONN_PMTU_BASE ? pm->ceiling : CONN_PMTU_BASE;
}

static bool pmtu_searching(const struct conn_pmtu *pm)
{
	return pm->hi > pm->lo + CONN_PMTU_STEP;
}

static uint64_t pmtu_wait_ns(const struct harp_conn *c)
{
	uint64_t w = 4ull * c->rtt.srtt_us * 1000;

	return w > CONN_PMTU_WAIT_MIN_NS ? w : CONN_PMTU_WAIT_MIN_NS;
}

bool conn_pmtu_due(const struct harp_conn *c, uint64_t now)
{
	const struct conn_pmtu *pm = &c->pmtu;

	if (!pm->ceiling || !c->paths_live) {
		return false;
	}
	if (pm->nanswers || (pm->probe && (!pm->tries || now - pm->sent_ns >= pmtu_wait_ns(c)))) {
		return true;
	}
	return !pm->probe && now >= pm->next_ns && (pmtu_searching(pm) || pm->mtu < pm->ceiling);
}

/* Every unacked packet larger than the path now carries goes again, in parts. */
static void queue_rtx(struct harp_conn *c, struct tx_rec *rec, uint32_t psn);
static void pmtu_resend_large(struct harp_conn *c)
{
	uint32_t psn;

	for (psn = c->snd_una; psn_before(psn, c->snd_nxt); psn++) {
		struct tx_rec *rec = rec_of(c, psn);

		if (!rec->acked && !rec->dead && rec->len > c->payload_max) {
			queue_rtx(c, rec, psn);
		}
	}
}

/*
 * Size was refused: the search's new upper bound. The old one is kept, for a late answer that
 * belies this one to bring back (pmtu_on_ack); the oldest makes room when they are too many, and
 * ceiling + 1, nothing known, stands in for it.
 */
static void pmtu_bound(struct conn_pmtu *pm, uint32_t size)
{
	if (pm->nabove == ARRAY_SIZE(pm->above)) {
		memmove(pm->above, pm->above + 1, sizeof(pm->above) - sizeof(pm->above[0]));
		pm->nabove--;
	}
	pm->above[pm->nabove++] = pm->hi;
	pm->hi = size;
}

/* The probe in flight went unanswered CONN_PMTU_TRIES times. */
static void pmtu_refused(struct harp_conn *c, uint64_t now)
{
	struct conn_pmtu *pm = &c->pmtu;

	if (pm->confirming) {
		/* the size in use no longer gets through: a black hole (a late answer may have
		 * raised mtu above the size asked about since; that is refused all the more) */
		uint32_t was = pm->probe;

		c->stats.pmtu_drops++;
		pmtu_bound(pm, was);
		pmtu_use(c, pmtu_base(pm));
		pm->lo = pm->mtu;
		pm->confirming = false;
		pm->fall_id = pm->id; /* answers to older probes tell of the path before it */
		pr_info("conn %u: the path no longer carries %u-byte packets; %u from now on, the "
			"packets in flight sent again in parts, and the search starts over below %u",
			c->id, was, pm->mtu, was);
		pmtu_resend_large(c);
	} else {
		pmtu_bound(pm, pm->probe);
	}
	pm->probe = 0;
	pm->next_ns = pmtu_searching(pm) ? now : now + CONN_PMTU_RAISE_NS;
}

/* Picks the next size to ask about; false when the search is done (or waits). */
static bool pmtu_next_size(struct conn_pmtu *pm, uint64_t now)
{
	uint32_t size;

	if (now < pm->next_ns) {
		return false;
	}
	if (!pmtu_searching(pm)) {
		if (pm->mtu >= pm->ceiling) {
			return false;
		}
		pm->lo = pm->mtu; /* a finished search looks up again, now and then */
		pm->hi = pm->ceiling + 1;
		pm->nabove = 0;
	}
	size = pm->hi == pm->ceiling + 1 ? pm->ceiling : ((pm->lo + pm->hi) / 2) & ~3u;
	if (size <= pm->lo) {
		pm->hi = pm->lo + 1;
		pm->next_ns = now + CONN_PMTU_RAISE_NS;
		return false;
	}
	pm->probe = size;
	pm->tries = 0;
	pm->id++;
	return true;
}

/*
 * Receiver: the peer's probe of size bytes came. Each probe that came since answers last went
 * is answered, not only the latest: one that came while this side could not answer (no live
 * path yet, or a loaded host) proves its size to the peer all the same, late (pmtu_on_ack). Too
 * many, and the smallest gives way: the largest proves the most.
 */
static void pmtu_on_probe(struct harp_conn *c, uint32_t id, uint32_t size)
{
	struct conn_pmtu *pm = &c->pmtu;
	uint32_t i, min = 0;

	for (i = 0; i < pm->nanswers; i++) {
		if (pm->answers[i].id == id) {
			return; /* another try of one to answer already */
		}
		if (pm->answers[i].size < pm->answers[min].size) {
			min = i;
		}
	}
	if (pm->nanswers < ARRAY_SIZE(pm->answers)) {
		i = pm->nanswers++;
	} else if (size > pm->answers[min].size) {
		i = min;
	} else {
		return;
	}
	pm->answers[i].id = id;
	pm->answers[i].size = size;
}

/* The next PMTU probe, or the answers to the peer's, if any are due. */
static bool pmtu_next(struct harp_conn *c, struct conn_tx *tx, uint64_t now)
{
	struct conn_pmtu *pm = &c->pmtu;
	struct harp_hdr *h = &tx->h;
	int path;

	if (!pm->ceiling || !c->paths_live) {
		return false;
	}
	if (pm->nanswers) {
		pm->nanswers--;
		path = any_path(c);
		unreliable_hdr(c, h, HARP_PKT_PMTU_ACK, now);
		h->tag = pm->answers[pm->nanswers].id;
		h->msg_len = pm->answers[pm->nanswers].size;
		tx->payload = NULL;
		tx->device = false;
		goto out;
	}
	if (pm->probe && pm->tries && now - pm->sent_ns < pmtu_wait_ns(c)) {
		return false;
	}
	if (pm->probe && pm->tries >= CONN_PMTU_TRIES) {
		pmtu_refused(c, now);
	}
	if (!pm->probe && !pmtu_next_size(pm, now)) {
		return false;
	}
	path = any_path(c);
	unreliable_hdr(c, h, HARP_PKT_PMTU, now);
	h->tag = pm->id;
	h->msg_len = pm->probe;
	h->len = (uint16_t)(pm->probe - HARP_IP4_HLEN - HARP_UDP_HLEN - HARP_HDR_LEN -
			    (c->auth ? HARP_AUTH_TRAILER : 0));
	tx->payload = pmtu_padding;
	tx->device = false;
	pm->tries++;
	pm->sent_ns = now;
	c->stats.pmtu_probes++;
out:
	c->paths[path].sent_ns = now;
	tx->src_port = c->paths[path].src_port;
	tx->dst_port = c->paths[path].dst_port;
	tx->twin_src_port = 0;
	tx->twin_dst_port = 0;
	return true;
}

/* The path carried size bytes: the search's floor, and the size in use if larger. */
static void pmtu_carried(struct harp_conn *c, uint32_t size)
{
	c->pmtu.lo = size;
	if (size > c->pmtu.mtu) {
		pmtu_use(c, size);
	}
}

/*
 * Does the answer to a probe no longer in flight count? A loaded peer or path can answer after
 * pmtu_wait_ns, when the probe was given up on, and the answer proves the size all the same.
 * Were it ignored, a refusal that was only slowness would hold the search below the path's MTU,
 * and a false black hole would hold packets at the base for CONN_PMTU_RAISE_NS. It counts even
 * while the size in use is in doubt (the same load makes timeouts that doubt it): the probe
 * asking goes on, and if refused still drops packets to the base. Not for a probe older than
 * the one whose refusal last did: those tell of the path as it was. That probe's own answer
 * counts: it was asked after the doubt began, so the path still carries its size and the fall
 * was false.
 */
static bool pmtu_late_counts(const struct conn_pmtu *pm, uint32_t id, uint64_t size)
{
	return (int32_t)(id - pm->id) <= 0 && (int32_t)(id - pm->fall_id) >= 0 && size > pm->lo &&
	       size <= pm->ceiling;
}

/* The peer's answer: the path carried a probe of size bytes. */
static void pmtu_on_ack(struct harp_conn *c, uint32_t id, uint64_t size, uint64_t now)
{
	struct conn_pmtu *pm = &c->pmtu;

	if (pm->probe && id == pm->id && size == pm->probe) {
		if (!pm->confirming) {
			pmtu_carried(c, pm->probe);
		}
		pm->confirming = false;
		pm->probe = 0;
	} else if (pmtu_late_counts(pm, id, size)) {
		if (id == pm->fall_id) {
			pr_info("conn %u: %u-byte packets get through after all (a late answer)",
				c->id, (uint32_t)size);
		}
		pmtu_carried(c, (uint32_t)size);
		/* refusals it belies give way to those before them: the search goes on where it
		 * would have, had the answer come in time */
		while (pm->hi <= size) {
			pm->hi = pm->nabove ? pm->above[--pm->nabove] : pm->ceiling + 1;
		}
		if (pm->probe && !pm->confirming && pm->probe <= size) {
			pm->probe = 0; /* a search probe it answers already */
		}
	} else {
		return; /* an old probe's, one from before the fall, or none we sent */
	}
	pm->next_ns = pmtu_searching(pm) ? now : now + CONN_PMTU_RAISE_NS;
}

/*
 * A timeout with packets above the base in flight: does the path still carry the size in use?
 * (A search probe in flight asks about more, and is left to finish.)
 */
static void pmtu_suspect(struct harp_conn *c)
{
	struct conn_pmtu *pm = &c->pmtu;

	if (pm->ceiling && pm->mtu > pmtu_base(pm) && !pm->probe) {
		pm->probe = pm->mtu;
		pm->confirming = true;
		pm->tries = 0;
		pm->id++;
	}
}

/* Receiver: the slot of psn's parts, a new one for parts of it, or -1. */
static int seg_slot(struct harp_conn *c, uint32_t psn, uint16_t parts)
{
	int i, free_slot = -1;

	for (i = 0; i < (int)ARRAY_SIZE(c->pmtu.segs); i++) {
		if (c->pmtu.segs[i].parts && c->pmtu.segs[i].psn == psn) {
			return i;
		}
		if (!c->pmtu.segs[i].parts && free_slot < 0) {
			free_slot = i;
		}
	}
	if (parts && free_slot >= 0) {
		c->pmtu.segs[free_slot].psn = psn;
		c->pmtu.segs[free_slot].parts = parts;
		c->pmtu.segs[free_slot].got = 0;
		c->pmtu.segs_open++;
	}
	return parts ? free_slot : -1;
}

bool conn_next_probe(struct harp_conn *c, struct conn_tx *tx, uint64_t now)
{
	struct conn_probe *pr = &c->probe;
	struct harp_hdr *h = &tx->h;

	if (atomic_load_explicit(&c->state, memory_order_relaxed) != CONN_READY) {
		return false;
	}
	if (pmtu_next(c, tx, now)) {
		return true;
	}
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
	       (!pairs_free_for(c->pairs, c->path.dst_ip, pr->cand_src[pr->sent],
				pr->cand_dst[pr->sent], c->pair_owner) ||
		pairs_leased_by_other(c->pairs, c->path.dst_ip, pr->cand_src[pr->sent],
				      pr->cand_dst[pr->sent], c->pair_owner, now / 1000000))) {
		pr->sent++;
	}
	if (pr->sent == pr->ncands) {
		return false;
	}
	if (c->pairs) {
		pairs_lease(c->pairs, c->path.dst_ip, pr->cand_src[pr->sent], pr->cand_dst[pr->sent],
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

/* A rescue round's answered candidate: the pair reaches the peer's engine now, which is more
 * than the silent path it replaces can say. */
static void rescue_take(struct harp_conn *c, uint16_t src_port, uint16_t dst_port, uint64_t now)
{
	int victim = rescue_victim(c);
	const struct conn_path *p;

	if (victim < 0) {
		c->probe.rescue_ns = 0;
		return;
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
	conn_add_path(c, src_port, dst_port, now);
}

void conn_on_probe_result(struct harp_conn *c, uint32_t round, uint32_t cand, uint64_t now)
{
	struct conn_probe *pr = &c->probe;

	if (round != pr->round || cand >= pr->ncands) {
		return; /* an earlier round's: its candidates are gone */
	}
	if (!pr->answered) {
		uint64_t took = now - pr->round_ns;

		pr->answered = true;
		pr->answer_ns = pr->answer_ns ? (3 * pr->answer_ns + took) / 4 : took;
		if (pr->shared_answer_ns) {
			uint64_t *sh = pr->shared_answer_ns;

			*sh = *sh ? (7 * *sh + took) / 8 : took;
		}
	}
	/* another engine took the pair since the round began (its own probe, or the peer's) */
	if (c->pairs && !pairs_claim(c->pairs, c->path.dst_ip, pr->cand_src[cand],
				     pr->cand_dst[cand], c->pair_owner)) {
		c->stats.probes_pair_taken++;
		return;
	}
	if (conn_add_path(c, pr->cand_src[cand], pr->cand_dst[cand], now) >= 0) {
		pr->interval_ns = PROBE_INTERVAL_NS; /* rounds find paths: no need to wait longer */
	} else if (pr->rescue_ns && round == pr->rescue_round) {
		rescue_take(c, pr->cand_src[cand], pr->cand_dst[cand], now);
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

/* ---- requests ------------------------------------------------------------------------------ */

static int unsol_claim(struct harp_conn *c, struct harp_req *r);

bool conn_take_request(struct harp_conn *c, struct harp_req *r)
{
	int err;

	if (r->kind == REQ_SEND) {
		uint32_t slot = c->ssn_next & (CONN_REQS - 1);

		if (c->send_slots[slot]) {
			return false; /* an old send still holds the slot: wait for it */
		}
		r->send.ssn = c->ssn_next++;
		c->send_slots[slot] = r;
		return true;
	}
	if (c->recv_slots[r->recv.rsn & (CONN_RECV_SLOTS - 1)]) {
		return false;
	}
	c->recv_slots[r->recv.rsn & (CONN_RECV_SLOTS - 1)] = r;
	c->recvs_open++;
	c->rcv_first_ssn[r->recv.rsn & (CONN_RECV_SLOTS - 1)] = c->rcv_ssn_next;
	c->rcv_ssn_next += (uint32_t)r->recv.nbufs;
	c->rcv_rsn_next = r->recv.rsn + 1;
	if (c->rcv_taken < CONN_RECV_SLOTS) {
		c->rcv_taken++;
	}
	r->next = NULL;
	if (c->cts_out_tail) {
		c->cts_out_tail->next = r;
	} else {
		c->cts_out_head = r;
	}
	c->cts_out_tail = r;
	err = unsol_claim(c, r);
	if (err) {
		conn_fail(c, err);
	}
	return true;
}

static void send_release(struct harp_conn *c, struct harp_req *s, int err)
{
	c->send_slots[s->send.ssn & (CONN_REQS - 1)] = NULL;
	while (c->ssn_tail != c->ssn_cur && !c->send_slots[c->ssn_tail & (CONN_REQS - 1)]) {
		c->ssn_tail++;
	}
	if (!err) {
		c->stats.msgs_sent++;
	}
	req_finish(s, err);
}

static void recv_release(struct harp_conn *c, struct harp_req *r, bool sender_done)
{
	/* The sender's send completes only on our ack, unless it said it has completed already
	 * (HARP_DATA_F_DONE). With no other receive open our caller may not run this engine again
	 * soon: ack in this pass. With more open it keeps polling, and the ack rides on its next
	 * CTS or leaves after CONN_ACK_DELAY_NS. */
	if (!--c->recvs_open && !sender_done) {
		c->ack_now = true;
	}
	c->recv_slots[r->recv.rsn & (CONN_RECV_SLOTS - 1)] = NULL;
	if (r->recv.device_mask) {
		/* its copies into device memory are done before it is */
		int err = c->device ? c->device->wait(c->engine) : -EIO;

		if (err && !r->recv.err) {
			r->recv.err = err;
		}
	}
	req_finish(r, r->recv.err);
}

/*
 * Every buffer of r is done. It is released once its CTS have all been given a psn too: the
 * peer still needs them to bind its unsolicited sends, and they are read from r.
 */
static void recv_try_finish(struct harp_conn *c, struct harp_req *r, bool sender_done)
{
	if (r->recv.done_mask == (1u << r->recv.nbufs) - 1 && r->recv.cts_queued == r->recv.nbufs) {
		recv_release(c, r, sender_done);
	}
}

static bool overlaps(const void *a, uint64_t alen, const void *b, size_t blen)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	return alen && blen && x < y + blen && y < x + alen;
}

bool conn_uses_region(const struct harp_conn *c, const void *addr, size_t len)
{
	uint32_t i;
	int k;

	for (i = 0; i < CONN_REQS; i++) {
		const struct harp_req *s = c->send_slots[i];

		if (s && overlaps(s->send.buf, s->send.len, addr, len)) {
			return true;
		}
	}
	for (i = 0; i < CONN_RECV_SLOTS; i++) {
		const struct harp_req *r = c->recv_slots[i];

		for (k = 0; r && k < r->recv.nbufs; k++) {
			if (overlaps(r->recv.bufs[k], r->recv.cap[k], addr, len)) {
				return true;
			}
		}
	}
	return false;
}

/* Fails every request the connection holds with err; nothing more is asked of it. */
static void fail_requests(struct harp_conn *c, int err)
{
	uint32_t i;

	for (i = 0; i < CONN_REQS; i++) {
		if (c->send_slots[i]) {
			req_finish(c->send_slots[i], err);
			c->send_slots[i] = NULL;
		}
	}
	for (i = 0; i < CONN_RECV_SLOTS; i++) {
		if (c->recv_slots[i]) {
			req_finish(c->recv_slots[i], err);
			c->recv_slots[i] = NULL;
		}
	}
	c->recvs_open = 0;
	c->cts_out_head = c->cts_out_tail = NULL;
	c->ssn_tail = c->ssn_cur = c->ssn_bound = c->ssn_next;
}

bool conn_linger(struct harp_conn *c, int err)
{
	uint32_t psn;

	if (atomic_load_explicit(&c->state, memory_order_relaxed) != CONN_READY) {
		return false;
	}
	if (c->lingering) {
		return true;
	}
	/* Unsolicited sends not yet bound fail below with the rest: their copies go. */
	for (psn = c->snd_una; psn != c->snd_nxt; psn++) {
		struct tx_rec *rec = rec_of(c, psn);

		if (!rec->acked && rec->unsol && rec->eager && !psn_before(rec->rsn, c->ssn_bound)) {
			c->eager_used &= ~(1ull << (rec->eager - 1));
			rec->eager = 0;
		}
	}
	if (!c->eager_used) {
		return false;
	}
	/* What else is in flight reads or answers the caller's buffers: never sent again, and its
	 * request is not touched when an ack for it comes. */
	for (psn = c->snd_una; psn != c->snd_nxt; psn++) {
		struct tx_rec *rec = rec_of(c, psn);

		if (rec->acked || rec->eager) {
			continue;
		}
		rec->dead = true;
		rec->sreq = NULL;
		pipe_leave(c, rec);
	}
	fail_requests(c, err);
	c->lingering = true;
	c->linger_err = err;
	return true;
}

bool conn_linger_done(const struct harp_conn *c)
{
	return !c->eager_used || atomic_load_explicit(&c->state, memory_order_relaxed) != CONN_READY;
}

void conn_fail(struct harp_conn *c, int err)
{
	if (atomic_load_explicit(&c->state, memory_order_relaxed) == CONN_FAILED) {
		return;
	}
	atomic_store_explicit(&c->fail_err, err, memory_order_relaxed);
	/* release: fail_err is visible before the state says FAILED */
	atomic_store_explicit(&c->state, CONN_FAILED, memory_order_release);
	fail_requests(c, err);
	c->rtx_head = c->rtx_tail;
}

/* ---- acknowledgements ------------------------------------------------------------------------ */

/* What one ack did to each path, gathered while its records are acked. */
struct ack_tally {
	uint32_t newly[CONN_MAX_PATHS];		/* packets */
	uint32_t bytes[CONN_MAX_PATHS];		/* their bytes, for the window */
	uint64_t newest_sent[CONN_MAX_PATHS]; /* send time of the newest clean record acked */
	uint32_t touched;		      /* bit per path */
};

/* Acks one record into t; *newly counts the records this ack acked (t starts empty at 0). */
static void ack_rec(struct harp_conn *c, struct tx_rec *rec, struct ack_tally *t,
		    uint32_t *newly)
{
	struct conn_path *p = &c->paths[rec->path];

	if (!(*newly)++) {
		t->touched = 0;
		memset(t->newly, 0, sizeof(t->newly));
		memset(t->bytes, 0, sizeof(t->bytes));
		memset(t->newest_sent, 0, sizeof(t->newest_sent));
	}

	rec->acked = true;
	t->bytes[rec->path] += rec->pipe_bytes; /* as it last went */
	pipe_leave(c, rec);
	if (rec->sent_ns > p->rack_xmit_ns) {
		p->rack_xmit_ns = rec->sent_ns;
	}
	if (rec->sent_ns > c->rack_xmit_ns) {
		c->rack_xmit_ns = rec->sent_ns; /* over all paths: what later sends proved */
	}
	t->newly[rec->path]++;
	t->touched |= 1u << rec->path;
	if (!rec->resent && rec->sent_ns > t->newest_sent[rec->path]) {
		t->newest_sent[rec->path] = rec->sent_ns;
	}
	if (rec->eager) {
		c->eager_used &= ~(1ull << (rec->eager - 1));
		rec->eager = 0;
	}
	if (rec->sreq) { /* DATA or MSGERR */
		struct harp_req *s = rec->sreq;

		s->send.pkts_acked++;
		/* an unsolicited send completes when its buffer is known (bind_unsol) */
		if (!rec->unsol && s->send.all_queued && s->send.pkts_acked == s->send.pkts) {
			send_release(c, s, rec->type == HARP_PKT_MSGERR ? -EMSGSIZE : 0);
		}
	}
}

static void queue_rtx(struct harp_conn *c, struct tx_rec *rec, uint32_t psn)
{
	if (rec->rtx_queued) {
		return;
	}
	rec->rtx_queued = true;
	pipe_leave(c, rec);
	c->rtxq[c->rtx_tail++ & (CONN_TXQ - 1)] = psn;
}

/*
 * RACK, per path: unacked packets sent well before the newest one acked on their path are lost.
 * And across paths, with the largest path RTT as the reordering window: a path that went dark
 * has no newer acked packet of its own to prove its losses. The per-path window widens to half
 * an RTT while the peer reports duplicates (reo_on_dup): a network that reorders more than a
 * quarter of an RTT would otherwise have every late packet sent twice.
 */
static void detect_loss(struct harp_conn *c)
{
	uint64_t reo_wnd[CONN_MAX_PATHS], reo_conn = 1000000;
	uint32_t psn, scanned = 0, i, lost = 0;

	for (i = 0; i < c->npaths; i++) {
		const struct rtt_est *r = &c->paths[i].rtt;

		reo_wnd[i] = (uint64_t)(r->have_sample ? r->srtt_us / 4 : 1000) * 1000 * c->reo_mult;
		if (c->paths[i].live && r->have_sample && r->srtt_us * 1000ull > reo_conn) {
			reo_conn = r->srtt_us * 1000ull;
		}
	}
	for (psn = c->snd_una; psn_before(psn, c->highest_acked) && scanned < RACK_SCAN_MAX;
	     psn++, scanned++) {
		struct tx_rec *rec = rec_of(c, psn);
		struct conn_path *p = &c->paths[rec->path];

		if (rec->acked || rec->rtx_queued) {
			continue;
		}
		if (rec->sent_ns + reo_wnd[rec->path] < p->rack_xmit_ns ||
		    rec->sent_ns + reo_conn < c->rack_xmit_ns) {
			path_on_loss(c, p, psn);
			c->stats.fast_retransmits++;
			queue_rtx(c, rec, psn);
			lost++;
		}
	}
	/* losses the peer did not answer with a duplicate: the window may have grown too wide */
	if (lost && c->reo_mult > 1 && ++c->reo_quiet >= CONN_REO_QUIET) {
		c->reo_mult--;
		c->reo_quiet = 0;
	}
}

/* The peer saw a packet twice: what we judged lost was late. Widen RACK's window, once per RTT. */
static void reo_on_dup(struct harp_conn *c, uint64_t now)
{
	if (c->stats.timeouts != c->reo_timeouts) {
		/* a timeout sends everything out again: its copies are duplicates whatever the
		 * window; only those of fast retransmissions judge it */
		c->reo_timeouts = c->stats.timeouts;
		c->reo_bump_ns = now;
		return;
	}
	c->reo_quiet = 0;
	if (c->reo_mult < CONN_REO_MULT_MAX &&
	    now - c->reo_bump_ns > (uint64_t)c->rtt.srtt_us * 1000) {
		c->reo_mult++;
		c->reo_bump_ns = now;
	}
}

/*
 * An ack echoing a packet sent before the last timeout means the "lost" packets were only late
 * (a peer descheduled for a few milliseconds looks exactly like loss): put the window back.
 */
static void undo_spurious_timeout(struct harp_conn *c, uint32_t ts_echo)
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

/* Per path: RTT sample, window growth, and the path's proof of life. */
static void paths_on_ack(struct harp_conn *c, const struct ack_tally *t, uint64_t now)
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
		p->waiting_since_ns = p->inflight ? now : 0;
	}
}

static void on_ack(struct harp_conn *c, uint32_t ack_psn, const uint8_t *sack, uint32_t sack_bits,
		   uint32_t ts_echo, uint64_t now)
{
	struct ack_tally t;
	uint32_t newly = 0, i;

	if (psn_before(c->snd_nxt, ack_psn) || !psn_before(c->snd_una, ack_psn + 1)) {
		return; /* acks what was never sent, or nothing new at the cumulative edge */
	}
	while (psn_before(c->snd_una, ack_psn)) {
		struct tx_rec *rec = rec_of(c, c->snd_una);

		if (!rec->acked) {
			ack_rec(c, rec, &t, &newly);
		}
		c->snd_una++;
	}
	if (psn_before(c->highest_acked, ack_psn)) {
		c->highest_acked = ack_psn;
	}
	for (i = 0; i < sack_bits; i++) {
		uint32_t psn = ack_psn + 1 + i;
		struct tx_rec *rec;

		if (!sack[i / 8]) {
			i |= 7; /* skip an empty byte */
			continue;
		}
		if (!psn_before(psn, c->snd_nxt)) {
			break;
		}
		if (!(sack[i / 8] & (1u << (i % 8)))) {
			continue;
		}
		rec = rec_of(c, psn);
		if (!rec->acked) {
			ack_rec(c, rec, &t, &newly);
		}
		if (psn_before(c->highest_acked, psn + 1)) {
			c->highest_acked = psn + 1;
		}
	}
	if (!newly) {
		return;
	}
	if (sack || ts_echo) { /* a reliable packet echoes 0 when it has nothing to echo */
		rtt_sample(&c->rtt, (uint32_t)(now / 1000) - ts_echo);
		undo_spurious_timeout(c, ts_echo);
	}
	paths_on_ack(c, &t, now);
	c->rto_base_ns = now;
	c->rto_streak = 0;
	c->last_ack_ns = now;
	detect_loss(c);
}

/* ---- received reliable packets ---------------------------------------------------------------- */

/* ---- unsolicited messages: the receiver's side ---- */

/* The open receive the peer's send ssn falls to, among those taken; NULL if none. */
static struct harp_req *recv_covering(const struct harp_conn *c, uint32_t ssn)
{
	uint32_t rsn = c->rcv_rsn_next, n;

	for (n = 0; n < c->rcv_taken; n++) {
		struct harp_req *r;

		rsn--;
		if (psn_before(ssn, c->rcv_first_ssn[rsn & (CONN_RECV_SLOTS - 1)])) {
			continue;
		}
		r = c->recv_slots[rsn & (CONN_RECV_SLOTS - 1)];
		if (!r || r->recv.rsn != rsn ||
		    ssn - c->rcv_first_ssn[rsn & (CONN_RECV_SLOTS - 1)] >= (uint32_t)r->recv.nbufs) {
			return NULL; /* that receive is complete: the send was already placed */
		}
		return r;
	}
	return NULL;
}

/* n bytes into a receive's buffer in device memory, through its engine's copies */
static int body_to_device(void *conn, uint8_t *dst, const uint8_t *src, uint32_t n)
{
	struct harp_conn *c = conn;

	return c->device ? c->device->copy_in(c->engine, dst, src, n) : -EIO;
}

/* Unsolicited message ssn (tag, len bytes at data) lands in r, the receive it falls to. */
static int unsol_place(struct harp_conn *c, struct harp_req *r, uint32_t ssn, uint32_t tag,
		       const uint8_t *data, uint16_t len)
{
	int i;

	for (i = 0; i < r->recv.nbufs && r->recv.tag[i] != tag; i++) {
	}
	if (i == r->recv.nbufs) {
		pr_err("conn %u: the peer's send %u carries tag %u, but the receive it falls to (%u, "
		       "%d buffers) has no buffer with that tag",
		       c->id, ssn, tag, r->recv.rsn, r->recv.nbufs);
		return -EPROTO;
	}
	if ((r->recv.done_mask & (1u << i)) || r->recv.got[i]) {
		pr_err("conn %u: the peer's send %u and another both name buffer %d (tag %u) of "
		       "receive %u",
		       c->id, ssn, i, tag, r->recv.rsn);
		return -EPROTO;
	}
	r->recv.msg_len[i] = len;
	if (len > r->recv.cap[i]) {
		r->recv.err = -EMSGSIZE; /* the sender fails it too, once it learns the capacity */
	} else {
		if (len && (r->recv.device_mask & (1u << i))) {
			int err = body_to_device(c, r->recv.bufs[i], data, len);

			if (err) {
				return err;
			}
		} else if (len) {
			memcpy(r->recv.bufs[i], data, len);
		}
		r->recv.got[i] = len;
		c->stats.rx_bytes += len;
		c->stats.msgs_received++;
	}
	r->recv.done_mask |= 1u << i;
	recv_try_finish(c, r, true);
	return 0;
}

/* A receive was taken: the messages held for it land in it. */
static int unsol_claim(struct harp_conn *c, struct harp_req *r)
{
	uint32_t k;

	for (k = 0; k < (uint32_t)r->recv.nbufs; k++) {
		uint32_t ssn = c->rcv_first_ssn[r->recv.rsn & (CONN_RECV_SLOTS - 1)] + k;
		struct unsol_held *m = &c->held[ssn & (CONN_UNSOL_CREDITS - 1)];
		int err;

		if (!m->valid || m->ssn != ssn) {
			continue;
		}
		m->valid = false;
		err = unsol_place(c, r, ssn, m->tag,
				  c->held_bytes + (size_t)(ssn & (CONN_UNSOL_CREDITS - 1)) *
							  CONN_EAGER_BYTES,
				  m->len);
		if (err) {
			return err;
		}
	}
	return 0;
}

static int deliver_unsol(struct harp_conn *c, const struct wire_pkt *p)
{
	const struct harp_hdr *h = &p->h;
	uint32_t ssn = h->rsn;
	struct unsol_held *m;
	struct harp_req *r;

	if (h->buf_idx || h->nbufs || h->offset || h->len != h->msg_len ||
	    h->len > CONN_EAGER_BYTES) {
		return -EPROTO; /* it cannot know its buffer, and is small and whole */
	}
	if (psn_before(ssn, c->rcv_ssn_next)) {
		r = recv_covering(c, ssn);
		return r ? unsol_place(c, r, ssn, h->tag, p->body, h->len) : -EPROTO;
	}
	if (ssn - c->rcv_ssn_next >= CONN_UNSOL_CREDITS) {
		return -EPROTO; /* beyond the sender's credit */
	}
	m = &c->held[ssn & (CONN_UNSOL_CREDITS - 1)];
	if (m->valid) {
		return -EPROTO;
	}
	m->valid = true;
	m->ssn = ssn;
	m->tag = h->tag;
	m->len = h->len;
	if (h->len) {
		memcpy(c->held_bytes + (size_t)(ssn & (CONN_UNSOL_CREDITS - 1)) * CONN_EAGER_BYTES,
		       p->body, h->len);
	}
	c->stats.msgs_held++;
	return 0;
}

static int deliver_data(struct harp_conn *c, const struct wire_pkt *p)
{
	const struct harp_hdr *h = &p->h;
	struct harp_req *r = c->recv_slots[h->rsn & (CONN_RECV_SLOTS - 1)];
	uint8_t i = h->buf_idx;

	if (h->flags & HARP_DATA_F_UNSOL) {
		return deliver_unsol(c, p);
	}
	if (!r || r->recv.rsn != h->rsn || i >= r->recv.nbufs || (r->recv.done_mask & (1u << i))) {
		return -EPROTO; /* data for a receive we never offered */
	}
	if (h->msg_len > r->recv.cap[i]) {
		return -EPROTO; /* the sender had to refuse this with MSGERR */
	}
	if (r->recv.msg_len[i] == UINT64_MAX) {
		r->recv.msg_len[i] = h->msg_len;
	} else if (r->recv.msg_len[i] != h->msg_len) {
		return -EPROTO;
	}
	if (h->len && (r->recv.device_mask & (1u << i))) {
		int err = wire_body_each(r->recv.bufs[i] + h->offset, p, body_to_device, c);

		if (err) {
			return err;
		}
	} else if (h->len) {
		wire_body_copy(r->recv.bufs[i] + h->offset, p);
	}
	r->recv.got[i] += h->len;
	c->stats.rx_bytes += h->len;
	if (r->recv.got[i] == h->msg_len) {
		r->recv.done_mask |= 1u << i;
		c->stats.msgs_received++;
		recv_try_finish(c, r, h->flags & HARP_DATA_F_DONE);
	}
	return 0;
}

static int deliver_msgerr(struct harp_conn *c, const struct harp_hdr *h)
{
	struct harp_req *r = c->recv_slots[h->rsn & (CONN_RECV_SLOTS - 1)];
	uint8_t i = h->buf_idx;

	if (!r || r->recv.rsn != h->rsn || i >= r->recv.nbufs || (r->recv.done_mask & (1u << i))) {
		return -EPROTO;
	}
	if (h->msg_len <= r->recv.cap[i] || r->recv.got[i]) {
		return -EPROTO; /* refusing what fits, or what already began to arrive */
	}
	r->recv.msg_len[i] = h->msg_len;
	r->recv.err = -EMSGSIZE;
	r->recv.done_mask |= 1u << i;
	recv_try_finish(c, r, false);
	return 0;
}

/*
 * The next send in order, of this tag, takes the buffer of its tag in the peer's oldest receive
 * not fully taken (*g). Returns the buffer's index; CTS_NOT_YET while that receive is not
 * (completely) announced; CTS_NO_TAG if it has no free buffer with the tag.
 */
enum { CTS_NOT_YET = -1, CTS_NO_TAG = -2 };

static int cts_take(struct harp_conn *c, uint32_t tag, const struct cts_group **gp)
{
	struct cts_group *g = &c->cts[c->cts_head_rsn & (CONN_RECV_SLOTS - 1)];
	int i;

	*gp = g;
	if (!g->valid || g->rsn != c->cts_head_rsn || g->arrived < g->nbufs) {
		return CTS_NOT_YET;
	}
	for (i = 0; i < g->nbufs; i++) {
		if (!(g->matched_mask & (1u << i)) && g->tag[i] == tag) {
			break;
		}
	}
	if (i == g->nbufs) {
		return CTS_NO_TAG;
	}
	g->matched_mask |= 1u << i;
	if (g->matched_mask == (1u << g->nbufs) - 1) {
		g->valid = false; /* its fields stay readable until the slot is reused */
		c->cts_head_rsn++;
	}
	return i;
}

/* Completes an unsolicited send; its packet, if still unacked, goes on from the copy. */
static void unsol_release(struct harp_conn *c, struct harp_req *s, int err)
{
	struct tx_rec *rec = rec_of(c, s->send.unsol_psn);

	if (rec->sreq == s) {
		rec->sreq = NULL;
	}
	send_release(c, s, err);
}

/*
 * Sends that went unsolicited learn their buffer as the peer's CTS arrive, in order: each takes
 * the buffer of its tag in the receive it falls to, and completes (or fails, if it did not fit,
 * as the receiver's receive does). This frees their credit.
 */
static int bind_unsol(struct harp_conn *c)
{
	while (psn_before(c->ssn_bound, c->ssn_cur)) {
		struct harp_req *s = c->send_slots[c->ssn_bound & (CONN_REQS - 1)];
		uint32_t tag = c->unsol_tag[c->ssn_bound & (CONN_UNSOL_CREDITS - 1)];
		const struct cts_group *g;
		int i = cts_take(c, tag, &g);

		if (i == CTS_NOT_YET) {
			return 0;
		}
		if (i == CTS_NO_TAG) {
			pr_err("conn %u: send %u (tag %u) went ahead of the peer's receive %u, which "
			       "has no free buffer with that tag",
			       c->id, c->ssn_bound, tag, g->rsn);
			return -EPROTO;
		}
		if (s && s->send.ssn == c->ssn_bound) {
			unsol_release(c, s, s->send.len > g->cap[i] ? -EMSGSIZE : 0);
		}
		c->ssn_bound++;
	}
	return 0;
}

static int deliver_cts(struct harp_conn *c, const struct harp_hdr *h)
{
	struct cts_group *g = &c->cts[h->rsn & (CONN_RECV_SLOTS - 1)];

	if (h->nbufs == 0 || h->nbufs > HARP_RECV_MAX_BUFS || h->buf_idx >= h->nbufs) {
		return -EPROTO;
	}
	if (psn_before(h->rsn, c->cts_head_rsn)) {
		return -EPROTO; /* a receive we already matched completely */
	}
	if (!g->valid || g->rsn != h->rsn) {
		if (g->valid) {
			return -EPROTO; /* the peer exceeded its outstanding receives */
		}
		/* all but ready, which the data thread may be reading (harp_conn__peer_recv) */
		memset(g, 0, offsetof(struct cts_group, ready));
		g->valid = true;
		g->rsn = h->rsn;
		g->nbufs = h->nbufs;
	}
	if (g->nbufs != h->nbufs || (g->seen_mask & (1u << h->buf_idx))) {
		return -EPROTO;
	}
	g->seen_mask |= 1u << h->buf_idx;
	g->cap[h->buf_idx] = h->msg_len;
	g->tag[h->buf_idx] = h->tag;
	g->arrived++;
	if (g->arrived == g->nbufs) {
		atomic_store_explicit(&g->ready, 1ull << 32 | g->rsn, memory_order_release);
	}
	return bind_unsol(c);
}

static int deliver(struct harp_conn *c, const struct wire_pkt *p)
{
	switch (p->h.type) {
	case HARP_PKT_DATA:
		return deliver_data(c, p);
	case HARP_PKT_CTS:
		return deliver_cts(c, &p->h);
	default:
		return deliver_msgerr(c, &p->h);
	}
}

static bool rcv_bit(const struct harp_conn *c, uint32_t psn)
{
	uint32_t b = psn & (CONN_TXQ - 1);

	return c->rcv_bits[b / 64] & (1ull << (b % 64));
}

static void rcv_bit_set(struct harp_conn *c, uint32_t psn, bool on)
{
	uint32_t b = psn & (CONN_TXQ - 1);

	if (on) {
		c->rcv_bits[b / 64] |= 1ull << (b % 64);
	} else {
		c->rcv_bits[b / 64] &= ~(1ull << (b % 64));
	}
}

/*
 * One part of a packet the peer cut again (HARP_DATA_F_SEG): its bytes placed. Returns 0 when it
 * was the last part (the psn now counts as received), 1 when parts are still to come, 2 when it
 * is not taken (a part already here, or no slot free: the peer sends it again), or a negative
 * errno from deliver().
 */
static int deliver_part(struct harp_conn *c, const struct wire_pkt *p)
{
	uint16_t parts = p->h.seg >> 8, part = p->h.seg & 0xff;
	int k = seg_slot(c, p->h.psn, parts), err;

	if (k < 0 || c->pmtu.segs[k].parts != parts || (c->pmtu.segs[k].got & (1u << part))) {
		return 2;
	}
	err = deliver(c, p);
	if (err) {
		return err;
	}
	c->pmtu.segs[k].got |= (uint16_t)(1u << part);
	if (c->pmtu.segs[k].got != (uint16_t)((1u << parts) - 1)) {
		return 1;
	}
	c->pmtu.segs[k].parts = 0;
	c->pmtu.segs_open--;
	return 0;
}

void conn_on_packet(struct harp_conn *c, const struct wire_pkt *p, uint64_t now)
{
	const struct harp_hdr *h = &p->h;
	uint32_t psn = h->psn;
	int err;

	c->heard_ns = now;
	c->rx_any_ns = now;
	if (h->type == HARP_PKT_ACK) {
		on_ack(c, h->ack_psn, p->body, h->len * 8u, h->ts_echo, now);
		if (h->flags & HARP_ACK_F_DUP) {
			reo_on_dup(c, now);
		}
		if (h->flags & HARP_ACK_F_PING) {
			/* the peer asks whether we are alive */
			c->ack_due = c->ack_now = c->ack_twin = true;
			c->ack_due_ns = now;
		}
		return;
	}
	if (h->type == HARP_PKT_PMTU) {
		pmtu_on_probe(c, h->tag, (uint32_t)h->msg_len);
		return;
	}
	if (h->type == HARP_PKT_PMTU_ACK) {
		pmtu_on_ack(c, h->tag, h->msg_len, now);
		return;
	}
	on_ack(c, h->ack_psn, NULL, 0, h->ts_echo, now);
	if (c->lingering) {
		return; /* its receives are gone: nothing is delivered, nothing acked */
	}
	c->stats.rx_packets++;
	if (!c->ack_due) {
		c->ack_due = true;
		c->ack_due_ns = now;
	}
	c->rx_since_ack++;
	if (!psn_before(psn, c->rcv_nxt) && (uint32_t)(psn - c->rcv_nxt) >= CONN_TXQ) {
		c->stats.rx_duplicates++; /* beyond any window the sender may use: not trusted */
		return;
	}
	if (psn_before(psn, c->rcv_nxt) || rcv_bit(c, psn)) {
		c->stats.rx_duplicates++;
		c->dup_seen = true; /* tells the sender, whose reordering window may be too tight */
		/* our ack went missing, or the sender retransmitted early */
		c->ack_now = c->ack_twin = true;
		return;
	}
	if (c->pmtu.segs_open && h->type == HARP_PKT_DATA && !(h->flags & HARP_DATA_F_SEG) &&
	    seg_slot(c, psn, 0) >= 0) {
		/* the whole packet, after parts of it: its bytes would count twice */
		c->stats.rx_duplicates++;
		return;
	}
	err = (h->flags & HARP_DATA_F_SEG) && h->type == HARP_PKT_DATA ? deliver_part(c, p) :
									 deliver(c, p);
	if (err == 1) {
		c->last_ts = h->ts;
		return; /* a part: the psn counts once every part is in */
	}
	if (err == 2) {
		c->stats.rx_duplicates++;
		c->ack_now = true;
		return;
	}
	if (err) {
		pr_err("conn %u: packet type %u psn %u for receive %u buffer %u breaks the protocol; "
		       "failing the connection",
		       c->id, h->type, psn, h->rsn, h->buf_idx);
		conn_fail(c, err);
		return;
	}
	c->last_ts = h->ts;
	if (psn != c->rcv_nxt) {
		c->stats.rx_out_of_order++;
		c->ack_now = c->ack_twin = true;
		c->sacked_pending++;
		rcv_bit_set(c, psn, true);
		return;
	}
	c->rcv_nxt++;
	while (c->sacked_pending && rcv_bit(c, c->rcv_nxt)) {
		rcv_bit_set(c, c->rcv_nxt, false);
		c->sacked_pending--;
		c->rcv_nxt++;
	}
}

void conn_on_peer_close(struct harp_conn *c, uint32_t peer_rcv_nxt, uint64_t now)
{
	uint32_t ssn;

	on_ack(c, peer_rcv_nxt, NULL, 0, 0, now);
	/* Unsolicited sends the peer took before it closed were delivered, like a kernel socket's
	 * acknowledged bytes: they complete, though the CTS that would bind them may never come. */
	for (ssn = c->ssn_bound; psn_before(ssn, c->ssn_cur); ssn++) {
		struct harp_req *s = c->send_slots[ssn & (CONN_REQS - 1)];

		if (s && s->send.ssn == ssn && s->send.pkts_acked) {
			unsol_release(c, s, 0);
		}
	}
	conn_fail(c, -ECONNRESET);
}

/* ---- timers ------------------------------------------------------------------------------------ */

/*
 * A path that has left packets unanswered while packets sent on other paths PATH_RETIRE_RTOS of
 * its RTOs later have been acked (so the peer is alive and keeping up: not a pause of ours or
 * its) is a black hole: retire it, send what it holds again elsewhere, and probe for a
 * replacement. The last live path stays: with nothing to compare it to, silence is the peer's,
 * and the peer timeout judges that.
 */
static void retire_dead_paths(struct harp_conn *c, uint64_t now)
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
 * Every path silent through RESCUE_TIMEOUTS retransmission timeouts in a row: retire_dead_paths
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
static void paths_at_death(const struct harp_conn *c, uint64_t now)
{
	char list[CONN_MAX_PATHS * 32] = "";
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
		n = snprintf(list + off, sizeof(list) - off, "%s %u->%u %llu/%llu ms",
			     off ? ";" : "", ntohs(p->src_port), ntohs(p->dst_port),
			     (unsigned long long)ack_ms, (unsigned long long)wait_ms);
		off += n > 0 ? (size_t)n : 0;
	}
	pr_warn("conn %u: %u of %u paths live, %u retired (%u by rescues after every path fell "
		"silent), %llu probes sent, %u timeouts in a row; each live path's ports, time "
		"since its last ack / since its oldest unanswered send:%s",
		c->id, c->paths_live, c->paths_want, c->stats.paths_retired, c->stats.paths_rescued,
		(unsigned long long)c->stats.probes_sent, c->rto_streak, list);
}

static void declare_dead(struct harp_conn *c, uint64_t silent_ns, uint64_t peer_timeout_ns,
			 const char *what, uint64_t now)
{
	char peer[INET_ADDRSTRLEN] = "?";

	inet_ntop(AF_INET, &c->path.dst_ip, peer, sizeof(peer));
	pr_err("conn %u: %s peer %s for %llu ms (HARP_PEER_TIMEOUT_MS=%llu); declaring it dead",
	       c->id, what, peer, (unsigned long long)(silent_ns / 1000000),
	       (unsigned long long)(peer_timeout_ns / 1000000));
	paths_at_death(c, now);
	conn_fail(c, -ETIMEDOUT);
}

/*
 * Nothing in flight. While a receive waits for data or a send for its CTS, a peer that has
 * frozen (SIGSTOP, a paused VM) would leave them waiting for ever: once the peer has been silent
 * for a quarter of the timeout, ACKs ask it to answer (its engine, or its keeper thread when its
 * caller is busy elsewhere, does), and silence for the whole timeout is death. A connection with
 * nothing waiting sends nothing.
 */
static void check_idle_peer(struct harp_conn *c, uint64_t now, uint64_t peer_timeout_ns)
{
	uint64_t every = peer_timeout_ns / 8;

	if (!c->recvs_open && c->ssn_tail == c->ssn_next) {
		c->heard_ns = now; /* the silence that counts starts when something waits */
		return;
	}
	if (!c->paths_live && c->port_span) {
		/* no port pair has reached the peer's engine yet: nothing of its data path could
		 * come. The probing judges that (conn_paths_hopeless), with the queues the
		 * probes reached; a peer silent for its own reasons would be misnamed as dead
		 * (a bridge that sent every flow to one queue was). */
		c->heard_ns = now;
		return;
	}
	if (now - c->heard_ns > peer_timeout_ns) {
		declare_dead(c, now - c->heard_ns, peer_timeout_ns,
			     "requests wait and nothing came from", now);
		return;
	}
	if (now - c->heard_ns >= 2 * every && now - c->ping_ns >= every) {
		c->ping_due = true;
		c->ping_ns = now;
		c->stats.pings++;
	}
}

uint64_t conn_waited_ns(const struct harp_conn *c, uint64_t now)
{
	if (c->snd_una != c->snd_nxt) {
		return now - c->last_ack_ns;
	}
	if (c->recvs_open || c->ssn_tail != c->ssn_next) {
		return now - c->heard_ns;
	}
	return 0;
}

void conn_on_timer(struct harp_conn *c, uint64_t now, uint64_t peer_timeout_ns)
{
	uint32_t psn, i;

	retire_dead_paths(c, now);
	if (c->snd_una == c->snd_nxt) {
		c->rto_base_ns = now;
		c->last_ack_ns = now;
		check_idle_peer(c, now, peer_timeout_ns);
		return;
	}
	c->heard_ns = now; /* while packets are in flight, their acks judge the peer */
	if (now - c->last_ack_ns > peer_timeout_ns) {
		declare_dead(c, now - c->last_ack_ns, peer_timeout_ns, "no acknowledgement from",
			     now);
		return;
	}
	if (now - c->rto_base_ns < (uint64_t)c->rtt.rto_us * 1000) {
		return;
	}
	/* Timeout: everything unacknowledged goes again, from a collapsed window. */
	c->stats.timeouts++;
	pmtu_suspect(c);
	for (psn = c->snd_una; psn_before(psn, c->snd_nxt); psn++) {
		struct tx_rec *rec = rec_of(c, psn);

		if (!rec->acked) {
			queue_rtx(c, rec, psn);
		}
	}
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
	rtt_backoff(&c->rtt);
	c->rto_base_ns = now;
	if (++c->rto_streak >= RESCUE_TIMEOUTS && rescue_start(c, now)) {
		/* whole ms, rounded down: the peer's window of deafness starts after the last
		 * packet heard, never on it */
		c->probe.unheard_ms = (uint32_t)((now - c->rx_any_ns) / 1000000);
	}
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

	if (deaf_ns > now || deaf_ns <= rtt_ns ||
	    (pr->rescue_ns && now - pr->rescue_ns < RESCUE_GAP_NS)) {
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
	}
}

/* ---- transmit ------------------------------------------------------------------------------------ */

static void header_of(struct harp_conn *c, const struct tx_rec *rec, uint32_t psn,
		      struct conn_tx *tx, uint64_t now)
{
	struct harp_hdr *h = &tx->h;

	memset(h, 0, sizeof(*h));
	h->version = HARP_WIRE_VERSION;
	h->type = rec->type;
	h->buf_idx = rec->buf_idx;
	h->nbufs = rec->nbufs;
	h->conn_id = c->peer_id;
	h->token = c->token;
	h->psn = psn;
	h->ack_psn = c->rcv_nxt;
	h->ts = (uint32_t)(now / 1000);
	h->ts_echo = c->last_ts;
	h->rsn = rec->rsn;
	h->tag = rec->tag;
	h->msg_len = rec->msg_len;
	h->offset = rec->offset;
	h->len = rec->len;
	tx->payload = NULL;
	tx->device = false;
	if (rec->eager) {
		h->flags = HARP_DATA_F_DONE | (rec->unsol ? HARP_DATA_F_UNSOL : 0);
		tx->payload = c->eager_copies + (size_t)(rec->eager - 1) * CONN_EAGER_BYTES;
	} else if (rec->type == HARP_PKT_DATA) {
		tx->payload = rec->sreq->send.buf + rec->offset;
		tx->device = rec->sreq->send.device;
	}
}

/* Binds the first unmatched send to a buffer of the peer's oldest open receive, by tag. */
static bool match_send(struct harp_conn *c, struct harp_req *s)
{
	const struct cts_group *g;
	int i = cts_take(c, s->send.tag, &g);

	if (i < 0) {
		return false; /* not announced yet, or no buffer with this tag: wait */
	}
	s->send.matched = true;
	s->send.cap = g->cap[i];
	s->send.rsn = g->rsn;
	s->send.buf_idx = (uint8_t)i;
	return true;
}

/* Copies s's payload (at most CONN_EAGER_BYTES) into a free slot, which rec then sends from. */
static void eager_copy(struct harp_conn *c, struct tx_rec *rec, const struct harp_req *s)
{
	_Static_assert(CONN_EAGER_SLOTS == 64, "one bit per slot in eager_used");
	int slot = __builtin_ctzll(~c->eager_used);

	c->eager_used |= 1ull << slot;
	if (s->send.len) {
		memcpy(c->eager_copies + (size_t)slot * CONN_EAGER_BYTES, s->send.buf, s->send.len);
	}
	rec->eager = (uint8_t)(slot + 1);
}

/*
 * A send whose one packet is rec, small enough for a slot: its payload is copied there and the
 * send completes now, as a kernel socket's would once its bytes are in the socket buffer. The
 * caller can then reuse its buffer, and no ack need hurry back (HARP_DATA_F_DONE): in a 8 B
 * ping-pong each side's ack had been a packet on the critical path.
 */
static void send_eager(struct harp_conn *c, struct tx_rec *rec, struct harp_req *s)
{
	if (s->send.len > CONN_EAGER_BYTES || !~c->eager_used || s->send.device) {
		/* too big, every slot waits for an ack, or in device memory (read only through
		 * copies, as its packets go): completes on the ack */
		return;
	}
	eager_copy(c, rec, s);
	rec->sreq = NULL;
	send_release(c, s, 0);
}

/*
 * s cannot be bound to a buffer yet (its receive's CTS has not arrived, or sends before it went
 * unsolicited): may it go unsolicited? It must fit one record and a copy slot (the send
 * completes only when bound, but its packet may need sending again after that), and a credit
 * must be left.
 */
static bool unsol_ok(const struct harp_conn *c, const struct harp_req *s)
{
	return !s->send.device && s->send.len <= CONN_EAGER_BYTES && s->send.len <= c->payload_max &&
	       ~c->eager_used && c->ssn_cur - c->ssn_bound < CONN_UNSOL_CREDITS;
}

/* rec: s as one unsolicited DATA record, its payload copied to a slot. */
static void next_unsol(struct harp_conn *c, struct tx_rec *rec, struct harp_req *s)
{
	eager_copy(c, rec, s);
	rec->type = HARP_PKT_DATA;
	rec->unsol = true;
	rec->sreq = s; /* for its ack (see conn_on_peer_close), until it completes */
	s->send.unsol_psn = c->snd_nxt; /* rec is rec_of(c, snd_nxt) */
	rec->rsn = s->send.ssn;
	rec->tag = s->send.tag;
	rec->msg_len = s->send.len;
	rec->len = (uint16_t)s->send.len;
	c->unsol_tag[s->send.ssn & (CONN_UNSOL_CREDITS - 1)] = s->send.tag;
	s->send.pkts = 1;
	s->send.all_queued = true;
	c->ssn_cur++;
	c->stats.tx_bytes += rec->len;
	c->stats.msgs_unsolicited++;
}

/* Fills rec with the next new reliable packet, if there is one. */
static bool next_new(struct harp_conn *c, struct tx_rec *rec)
{
	struct harp_req *r = c->cts_out_head, *s;
	uint64_t left;

	memset(rec, 0, sizeof(*rec));
	if (r) {
		/* Receives first: a CTS lets the peer start sending. */
		int i = r->recv.cts_queued++;

		rec->type = HARP_PKT_CTS;
		rec->rsn = r->recv.rsn;
		rec->buf_idx = (uint8_t)i;
		rec->nbufs = (uint8_t)r->recv.nbufs;
		rec->msg_len = r->recv.cap[i];
		rec->tag = r->recv.tag[i];
		if (r->recv.cts_queued == r->recv.nbufs) {
			c->cts_out_head = r->next;
			if (!c->cts_out_head) {
				c->cts_out_tail = NULL;
			}
			/* filled already by unsolicited sends, which are complete */
			recv_try_finish(c, r, true);
		}
		return true;
	}
	if (c->ssn_cur == c->ssn_next) {
		return false;
	}
	s = c->send_slots[c->ssn_cur & (CONN_REQS - 1)];
	if (!s->send.matched) {
		if (c->ssn_bound == c->ssn_cur && match_send(c, s)) {
			c->ssn_bound++;
		} else if (unsol_ok(c, s)) {
			next_unsol(c, rec, s);
			return true;
		} else {
			return false;
		}
	}
	rec->rsn = s->send.rsn;
	rec->buf_idx = s->send.buf_idx;
	rec->tag = s->send.tag;
	rec->msg_len = s->send.len;
	if (s->send.len > s->send.cap) {
		/* Too big for its buffer: tell the receiver, and fail the send once the receiver has
		 * that (acked), as a good send completes; failing it sooner would let our caller
		 * close the connection while the MSGERR may still need a retransmission. */
		rec->type = HARP_PKT_MSGERR;
		rec->sreq = s;
		s->send.pkts = 1;
		s->send.all_queued = true;
		c->ssn_cur++;
		return true;
	}
	left = s->send.len - s->send.next_off;
	rec->type = HARP_PKT_DATA;
	rec->sreq = s;
	rec->offset = s->send.next_off;
	rec->len = (uint16_t)(left < c->payload_max ? left : c->payload_max);
	s->send.next_off += rec->len;
	s->send.pkts++;
	if (s->send.next_off == s->send.len) {
		s->send.all_queued = true;
		c->ssn_cur++;
	}
	c->stats.tx_bytes += rec->len;
	if (s->send.pkts == 1 && s->send.all_queued) {
		send_eager(c, rec, s);
	}
	return true;
}

/* Reliable packets to send: retransmissions, CTSs, sends not yet all given a psn. */
static bool reliable_waiting(const struct harp_conn *c)
{
	return c->rtx_head != c->rtx_tail || c->cts_out_head || c->ssn_cur != c->ssn_next;
}

bool conn_tx_pending(const struct harp_conn *c)
{
	return reliable_waiting(c) || (c->port_span && c->paths_live < c->paths_want);
}

/* tx, a whole packet's header, made into its next part. */
static void seg_cut(struct harp_conn *c, struct conn_seg_out *so, struct conn_tx *tx)
{
	uint32_t off = (uint32_t)so->next * so->part_len;
	uint32_t len = tx->h.len - off < so->part_len ? tx->h.len - off : so->part_len;

	tx->h.offset += off;
	tx->h.len = (uint16_t)len;
	tx->payload += off;
	tx->h.flags |= HARP_DATA_F_SEG;
	tx->h.seg = (uint16_t)(so->parts << 8 | so->next);
	if (++so->next == so->parts) {
		so->active = false;
	}
	c->stats.seg_parts++;
}

/*
 * May the next part of rec go? Its path's window and pacer hold parts as they hold packets: a
 * fall of the path MTU cuts every packet in flight into several, which must not leave as a
 * burst the window and the pacer never saw. The window gives way to a record alone on its
 * path, though: its ack, which is what opens the window, needs every part.
 */
static bool seg_room(struct harp_conn *c, const struct tx_rec *rec, uint64_t now)
{
	struct conn_path *p = &c->paths[rec->path];

	if (p->inflight_bytes >= p->cc.cwnd && p->inflight > 1) {
		return false;
	}
	if (c->pacing && !pace_ready(&p->pace, &p->cc, &p->rtt, now)) {
		c->pace_held = true;
		return false;
	}
	return true;
}

/*
 * The next part of the packet going out in parts, counted in flight. False when it needs none
 * any more (acked, or judged lost: its retransmission sends every part again), or, with
 * seg_out still active, when its path's window or pacer holds it back.
 */
static bool seg_part(struct harp_conn *c, struct conn_tx *tx, uint64_t now)
{
	struct conn_seg_out *so = &c->seg_out;
	struct tx_rec *rec = rec_of(c, so->psn);

	if (rec->acked || rec->dead || !rec->in_pipe || psn_before(so->psn, c->snd_una)) {
		so->active = false;
		return false;
	}
	if (!seg_room(c, rec, now)) {
		return false;
	}
	header_of(c, rec, so->psn, tx, now);
	tx->src_port = so->src_port;
	tx->dst_port = so->dst_port;
	seg_cut(c, so, tx);
	pipe_add(c, rec, tx->h.len);
	return true;
}

bool conn_next_tx(struct harp_conn *c, struct conn_tx *tx, uint64_t now)
{
	struct tx_rec *rec;
	uint32_t psn;

	int path;

	c->pace_held = false;
	if (atomic_load_explicit(&c->state, memory_order_relaxed) != CONN_READY) {
		return false;
	}
	if (c->seg_out.active) {
		if (seg_part(c, tx, now)) {
			return true;
		}
		if (c->seg_out.active) {
			/* held: nothing overtakes its parts, nor takes seg_out from them */
			return false;
		}
	}
	if (!reliable_waiting(c)) {
		return false; /* nothing to send: no need to look for a path */
	}
	while (c->rtx_head != c->rtx_tail) {
		psn = c->rtxq[c->rtx_head & (CONN_TXQ - 1)];
		rec = rec_of(c, psn);
		if (rec->acked || rec->dead || psn_before(psn, c->snd_una)) {
			rec->rtx_queued = false;
			c->rtx_head++;
			continue;
		}
		path = pick_path(c, rec->path, true, now); /* not the path that lost it */
		if (path < 0) {
			return false;
		}
		rec->rtx_queued = false;
		c->rtx_head++;
		rec->resent = true;
		c->stats.retransmits++;
		goto send;
	}
	path = pick_path(c, -1, false, now);
	if (path < 0) {
		return false;
	}
	if ((uint32_t)(c->snd_nxt - c->snd_una) >= CONN_TXQ - 1) {
		return false; /* the receiver's window: it remembers CONN_TXQ psns */
	}
	psn = c->snd_nxt;
	rec = rec_of(c, psn);
	if (!next_new(c, rec)) {
		return false;
	}
	if (c->snd_una == c->snd_nxt) {
		c->rto_base_ns = now; /* the timer starts with the first packet in flight */
	}
	c->snd_nxt++;
send:
	rec->sent_ns = now;
	c->paths[path].sent_ns = now;
	if (!c->paths[path].waiting_since_ns) {
		c->paths[path].waiting_since_ns = now;
	}
	c->stats.tx_packets++;
	header_of(c, rec, psn, tx, now);
	tx->src_port = c->paths[path].src_port;
	tx->dst_port = c->paths[path].dst_port;
	if (rec->type == HARP_PKT_DATA && (rec->seg_parts || rec->len > c->payload_max)) {
		/* cut before the path MTU fell: it goes in parts, this the first. Once cut, always
		 * cut the same way, whatever the path MTU is since: the receiver holds the parts
		 * that came, and takes neither the whole packet nor another cut of it. */
		struct conn_seg_out *so = &c->seg_out;
		uint32_t parts = rec->seg_parts ? rec->seg_parts :
						  (rec->len + c->payload_max - 1) / c->payload_max;

		so->active = true;
		so->psn = psn;
		so->parts = (uint16_t)(parts < HARP_SEG_MAX ? parts : HARP_SEG_MAX);
		rec->seg_parts = (uint8_t)so->parts;
		so->part_len = (rec->len + so->parts - 1) / so->parts;
		so->next = 0;
		so->src_port = tx->src_port;
		so->dst_port = tx->dst_port;
		seg_cut(c, so, tx);
	}
	pipe_enter(c, rec, path, tx->h.len); /* the whole record, or its first part */
	if (c->ack_due && !c->sacked_pending) {
		/* The cumulative ack this packet carries says all an ACK would: none is due now. */
		c->ack_due = false;
		c->ack_now = false;
		c->ack_twin = false;
		c->rx_since_ack = 0;
	}
	return true;
}

bool conn_ack_wanted(const struct harp_conn *c, uint64_t now)
{
	return c->ping_due ||
	       (c->ack_due && (c->ack_now || c->rx_since_ack >= CONN_ACK_EVERY ||
			       now - c->ack_due_ns >= CONN_ACK_DELAY_NS));
}

/*
 * The selective-ack map of everything received beyond rcv_nxt, into sack; returns its length in
 * bytes: 0 without holes, and never more than a packet's payload (only MTUs under ~600 bytes
 * shorten it below a whole window).
 */
static uint16_t sack_map(const struct harp_conn *c, uint8_t *sack)
{
	uint32_t limit = c->payload_max < HARP_SACK_MAX_BYTES ? c->payload_max : HARP_SACK_MAX_BYTES;
	uint32_t found = 0, used = 0, i;

	for (i = 0; found < c->sacked_pending && i < limit * 8; i++) {
		if (i % 8 == 0) {
			sack[i / 8] = 0;
		}
		if (rcv_bit(c, c->rcv_nxt + 1 + i)) {
			sack[i / 8] |= (uint8_t)(1u << (i % 8));
			used = i / 8 + 1;
			found++;
		}
	}
	return (uint16_t)used;
}

bool conn_make_ack(struct harp_conn *c, struct conn_tx *tx, uint64_t now)
{
	struct harp_hdr *h = &tx->h;
	int path = any_path(c);

	if ((!c->ack_due && !c->ping_due) || path < 0) {
		return false;
	}
	c->paths[path].sent_ns = now;
	tx->src_port = c->paths[path].src_port;
	tx->dst_port = c->paths[path].dst_port;
	tx->twin_src_port = tx->twin_dst_port = 0;
	/* An ack that reports a loss, or asks or answers whether the peer is alive, goes out twice,
	 * on two paths, so one lost copy or one dead path cannot stall recovery. One that says a
	 * message is done goes once: on 2 vCPUs the second copy cost the 8 B ping-pong a packet's
	 * copy-mode send on each side's critical path. */
	if ((c->ack_twin || c->ping_due) && c->paths_live > 1) {
		int twin = any_path(c); /* the rotation moved on: another path */

		c->paths[twin].sent_ns = now;
		tx->twin_src_port = c->paths[twin].src_port;
		tx->twin_dst_port = c->paths[twin].dst_port;
	}
	c->ack_due = false;
	c->ack_now = false;
	c->ack_twin = false;
	c->rx_since_ack = 0;
	memset(h, 0, sizeof(*h));
	if (c->ping_due) {
		h->flags = HARP_ACK_F_PING;
		c->ping_due = false;
	}
	if (c->dup_seen) {
		h->flags |= HARP_ACK_F_DUP;
		c->dup_seen = false;
	}
	h->version = HARP_WIRE_VERSION;
	h->type = HARP_PKT_ACK;
	h->conn_id = c->peer_id;
	h->token = c->token;
	h->ack_psn = c->rcv_nxt;
	h->ts = (uint32_t)(now / 1000);
	h->ts_echo = c->last_ts;
	h->len = sack_map(c, tx->sack);
	tx->payload = NULL;
	tx->device = false;
	return true;
}
