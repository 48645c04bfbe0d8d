// SPDX-License-Identifier: Apache-2.0
/*
 * One engine per queue: receive a batch, apply it, answer with acks, take new requests, run the
 * timers, transmit within each connection's window, and kick the TX ring once. No lock and no
 * allocation here; the only system calls are one sendto() per TX batch (copy mode asks for it)
 * and a zero-timeout epoll_wait() on the control sockets every few milliseconds.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "engine.h"
#include "pairs.h"

#define RX_BATCH 64
#define TX_BATCH 256
_Static_assert(TX_BATCH <= ENGINE_UNSEALED, "a pass's frames may all wait for device copies");
#define CONN_BURST 64		     /* packets one connection may send per round */
#define CTRL_PERIOD_NS (2 * 1000000ull) /* how often control sockets are looked at */
/* How often every connection's timers run: a tenth of the shortest retransmission timeout. The
 * delayed ack (20 us) has a list of its own, looked at every pass. */
#define TIMER_PERIOD_NS 1000000ull

int engine_init(struct harp_engine *e, const struct engine_env *env, int queue, int busy_wait_ms)
{
	int err;

	memset(e, 0, sizeof(*e));
	e->env = *env;
	e->queue = queue;
	e->rng = (uint32_t)env->params->fault_seed * 2654435761u + (uint32_t)queue + 1;
	e->rx_joined = malloc(ENGINE_JOINED_BYTES);
	if (!e->rx_joined) {
		return -ENOMEM;
	}
	e->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (e->epfd < 0) {
		err = -errno;
		goto err_joined;
	}
	err = xsk_port_open(&e->port, env->ifname, queue, env->params, busy_wait_ms);
	if (err) { /* -EBUSY: another socket holds the queue; the caller says whose */
		goto err_epoll;
	}
	err = steer_enter(env->steer, queue, e->port.fd);
	if (err) {
		xsk_port_close(&e->port);
		goto err_epoll;
	}
	steer_claim(env->steer, queue);
	e->rx_last_ns = now_ns();
	e->zc_opened_ns = e->rx_last_ns;
	e->zc_first = e->port.zerocopy;
	return 0;

err_epoll:
	close(e->epfd);
	e->epfd = -1;
err_joined:
	free(e->rx_joined);
	e->rx_joined = NULL;
	e->env.params = NULL;
	return err;
}

/* ---- device memory ----------------------------------------------------------------------------- */

static void fail_all(struct harp_engine *e);

/* Before the port's frames go: the device lets go of them. */
static void dev_give_frames(struct harp_engine *e)
{
	const struct harp_device_ops *d = e->env.device;

	if (e->dev.registered && d && d->host_unregister) {
		d->host_unregister(d->arg, e->dev.registered);
	}
	e->dev.registered = NULL;
}

/* The port's frames are the device's to copy into and out of: host_register, once per area. */
static int dev_take_frames(struct harp_engine *e)
{
	const struct harp_device_ops *d = e->env.device;
	const struct umem_area *a = &e->port.area;
	int err;

	if (e->dev.registered == a->base) {
		return 0;
	}
	dev_give_frames(e);
	if (d->host_register) {
		err = d->host_register(d->arg, a->base, a->size);
		if (err) {
			return err;
		}
	}
	e->dev.registered = a->base;
	return 0;
}

/*
 * The copies queued one way, handed to the device and waited for. A failure fails the engine's
 * connections with -EIO, as a lost port does: what the device did with memory it was given is
 * unknown, so nothing it touched may be delivered or sent.
 */
static int dev_flush(struct harp_engine *e, enum harp_copy_dir dir)
{
	const struct harp_device_ops *d = e->env.device;
	bool out = dir == HARP_COPY_TO_HOST;
	struct harp_copy *v = out ? e->dev.out : e->dev.in;
	int *n = out ? &e->dev.nout : &e->dev.nin;
	const char *what = "registering its frames";
	int k = *n, err;

	*n = 0;
	if (e->port_err) {
		return -EIO;
	}
	if (!k) {
		return 0;
	}
	err = dev_take_frames(e);
	if (!err) {
		what = out ? "a copy from device memory" : "a copy into device memory";
		err = d->copy(d->arg, e->lane, dir, v, k);
	}
	if (!err) {
		what = "waiting for copies to or from device memory";
		err = d->wait(d->arg, e->lane);
	}
	if (!err) {
		return 0;
	}
	pr_err("engine %d: %s failed (%s); the engine's connections fail", e->queue, what,
	       strerror(err < 0 ? -err : err));
	e->port_err = -EIO;
	fail_all(e);
	return -EIO;
}

/*
 * For a connection's receive into device memory (its conn_device): a copy of n bytes from src to
 * dst queued, and waited for at once unless src is one of the engine's frames (which stay until
 * the pass gives them back, having waited). 0, or -EIO once a copy failed.
 */
static int engine_copy_in(struct harp_engine *e, uint8_t *dst, const uint8_t *src, uint32_t n)
{
	const uint8_t *base = e->port.area.base;
	bool frame = src >= base && n <= e->port.area.size && src - base <= (ptrdiff_t)(
		e->port.area.size - n);

	if (e->dev.nin == ENGINE_COPIES && dev_flush(e, HARP_COPY_TO_DEVICE)) {
		return -EIO;
	}
	e->dev.in[e->dev.nin++] = (struct harp_copy){ .dst = dst, .src = src, .len = n };
	/* a frame stays until the pass gives it back (rx_batch waits first); anything else, such
	 * as a chain's pieces joined or a message held for a later receive, may change sooner */
	return frame && !e->port_err ? 0 : dev_flush(e, HARP_COPY_TO_DEVICE);
}

/* Every copy into device memory queued so far, waited for: a receive completes only after. */
static int engine_copies_wait(struct harp_engine *e)
{
	return dev_flush(e, HARP_COPY_TO_DEVICE);
}

static const struct conn_device engine_device = {
	.copy_in = engine_copy_in,
	.wait = engine_copies_wait,
};

static void engine_release_conn(struct harp_engine *e, struct harp_conn *c)
{
	int err;

	e->by_slot[c->id & (HARP_MAX_CONNS - 1)] = NULL;
	err = steer_probe_forget(e->env.steer, c->id, c->token);
	if (err) {
		/* a stale record costs the map a slot; the XDP program ages none out */
		pr_debug("conn %u: its probe record stays in the map: %s", c->id, strerror(-err));
	}
	epoll_ctl(e->epfd, EPOLL_CTL_DEL, c->ctrl_fd, NULL);
	e->env.release(c);
}

void engine_fini(struct harp_engine *e)
{
	struct harp_conn *c, *next;

	if (!e || !e->env.params) {
		return; /* never opened, or closed already */
	}
	c = atomic_exchange(&e->handover, NULL);
	for (; c; c = next) {
		next = c->links.next_new;
		c->links.next_active = e->conns;
		e->conns = c;
	}
	for (c = e->conns; c; c = next) {
		next = c->links.next_active;
		if (atomic_load_explicit(&c->state, memory_order_relaxed) == CONN_READY) {
			chan_send_close(c); /* our final ack lets the peer's last sends complete */
		}
		engine_release_conn(e, c);
	}
	e->conns = NULL;
	steer_release(e->env.steer, e->queue);
	(void)steer_leave(e->env.steer, e->queue); /* it says what failed; the engine goes anyway */
	dev_give_frames(e);
	xsk_port_close(&e->port);
	if (e->epfd >= 0) {
		close(e->epfd);
	}
	free(e->rx_joined);
	e->rx_joined = NULL;
	e->env.params = NULL;
}

void engine_handover(struct harp_engine *e, struct harp_conn *c)
{
	struct harp_conn *head = atomic_load_explicit(&e->handover, memory_order_relaxed);

	do {
		c->links.next_new = head;
		/* release: the connection's set-up is visible before the engine can see it */
	} while (!atomic_compare_exchange_weak_explicit(&e->handover, &head, c,
							memory_order_release, memory_order_relaxed));
}

/* Takes c, which is on it, off the engine list at *head linked through field link. */
#define LIST_UNLINK(head, c, link)                       \
	do {                                             \
		struct harp_conn **pp_ = (head);         \
		while (*pp_ != (c)) {                    \
			pp_ = &(*pp_)->link;             \
		}                                        \
		*pp_ = (c)->link;                        \
	} while (0)

/*
 * A connection that may have something to send now: a request taken, a packet received (an ack
 * opens the window, a CTS lets a send go, a sack shows a loss), a timer or probe round due. The
 * transmit step visits only these, in turn, and drops each that has nothing to send. A newcomer
 * queues behind those already waiting: pushed to the front, the connections that acks keep
 * bringing back took every frame a starved host freed, and one that waited behind them sent
 * nothing for the whole peer timeout (vm_copy_rss_q2 under load: 164 packets queued to go
 * again, every path with room, none sent in 5 s).
 */
static void tx_list_add(struct harp_engine *e, struct harp_conn *c)
{
	if (!c->links.on_tx) {
		c->links.on_tx = true;
		c->links.next_tx = NULL;
		if (e->tx_list) {
			e->tx_last->links.next_tx = c;
		} else {
			e->tx_list = c;
		}
		e->tx_last = c;
	}
}

/* Takes c, which follows prev (NULL: c is the first), off the tx list. */
static void tx_list_drop(struct harp_engine *e, struct harp_conn *prev, struct harp_conn *c)
{
	if (prev) {
		prev->links.next_tx = c->links.next_tx;
	} else {
		e->tx_list = c->links.next_tx;
	}
	if (e->tx_last == c) {
		e->tx_last = prev;
	}
	c->links.on_tx = false;
}

/* The pass ran out of room at c, which follows prev: c and those after it go first next time. */
static void tx_list_turn(struct harp_engine *e, struct harp_conn *prev, struct harp_conn *c)
{
	if (!prev || !c) {
		return; /* it stopped at the first, or after the last: the order stands */
	}
	e->tx_last->links.next_tx = e->tx_list;
	e->tx_list = c;
	prev->links.next_tx = NULL;
	e->tx_last = prev;
}

void engine_notify(struct harp_engine *e, struct harp_conn *c)
{
	struct harp_conn *head;

	/* acq_rel: when the flag was already set, the engine has yet to clear it, and its clearing
	 * exchange reads ours (so it sees the request pushed before it, see take_requests) */
	if (atomic_exchange_explicit(&c->links.wants_take, true, memory_order_acq_rel)) {
		return;
	}
	head = atomic_load_explicit(&e->to_take, memory_order_relaxed);
	do {
		c->links.next_take = head;
		/* release: the request in c's ring is visible before the engine can see c here */
	} while (!atomic_compare_exchange_weak_explicit(&e->to_take, &head, c, memory_order_release,
							memory_order_relaxed));
}

/*
 * A connection was declared dead for silence. The cause may be ours: the XDP program that steers
 * our packets here was detached or replaced (another tool, an operator). Say so, at most once a
 * second per engine, since every connection of the engine goes silent together.
 */
static void explain_silence(struct harp_engine *e, uint64_t now)
{
	char why[200];

	if (now - e->silence_checked_ns < 1000000000ull) {
		return;
	}
	e->silence_checked_ns = now;
	steer_check_attached(e->env.steer, why, sizeof(why));
	if (why[0]) {
		pr_err("engine %d on %s: %s; check with `harp-attach status %s` or `ip link show %s`",
		       e->queue, e->env.ifname, why, e->env.ifname, e->env.ifname);
	}
}

static void adopt(struct harp_engine *e, uint64_t now)
{
	struct harp_conn *c, *next;

	if (!atomic_load_explicit(&e->handover, memory_order_relaxed)) {
		return; /* the usual case: no exchange (a locked instruction) every pass */
	}
	/* acquire: pairs with engine_handover's release */
	c = atomic_exchange_explicit(&e->handover, NULL, memory_order_acquire);

	for (; c; c = next) {
		/* edge-triggered: a partial message (chan_poll leaves it) does not keep the set
		 * ready, so the keeper's poll() on it cannot spin */
		struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = c };

		next = c->links.next_new;
		if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, c->ctrl_fd, &ev)) {
			pr_err("engine %d: watching the control socket of conn %u failed: %s",
			       e->queue, c->id, strerror(errno));
			conn_fail(c, -errno);
		}
		c->pairs = e->env.pairs;
		c->pair_owner = e->queue;
		c->device = &engine_device;
		conn_start(c, now);
		/* until its probes are answered, rounds wait on the set-up's round trip: hosts
		 * that took long to set it up answer probes no sooner */
		conn_probe_answers(c, chan_rtt_ns(c), &e->probe_answer_ns);
		tx_list_add(e, c); /* its probes */
		e->probing++;	   /* and their answers: timers and control every pass */
		c->links.next_active = e->conns;
		e->conns = c;
		e->by_slot[c->id & (HARP_MAX_CONNS - 1)] = c;
	}
}

/* ---- receive ------------------------------------------------------------------------------- */

#ifdef HARP_FAULT_INJECTION
static bool fault_drop(struct harp_engine *e)
{
	uint32_t x = e->rng;

	if (!e->env.params->fault_drop_ppm) {
		return false;
	}
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	e->rng = x;
	return x % 1000000u < (uint32_t)e->env.params->fault_drop_ppm;
}

/* HARP_FAULT_DEAF_CONN: one connection (by id slot) stops hearing anything, mid-transfer. */
static bool fault_deaf(struct harp_engine *e, const struct harp_conn *c)
{
	int slot = e->env.params->fault_deaf_conn;

	if (!slot || (int)(c->id & (HARP_MAX_CONNS - 1)) != slot || c->stats.rx_packets < 256) {
		return false;
	}
	if (!e->fault_deaf_said) {
		e->fault_deaf_said = true;
		pr_info("conn %u: HARP_FAULT_DEAF_CONN: every packet it receives is dropped from now "
			"on",
			c->id);
	}
	return true;
}
#else
static bool fault_deaf(struct harp_engine *e, const struct harp_conn *c)
{
	(void)e;
	(void)c;
	return false;
}

static bool fault_drop(struct harp_engine *e)
{
	(void)e;
	return false;
}
#endif

static void ack_list_add(struct harp_engine *e, struct harp_conn *c)
{
	if (!c->links.on_ack_list) {
		c->links.on_ack_list = true;
		c->links.next_ack = e->ack_list;
		e->ack_list = c;
	}
}

/*
 * A packet in one piece, or in several (pk); a frame that is not bulk DATA is joined first. A
 * bulk DATA frame's body is left out of its checksum (p->sum_due): rx_settle adds it.
 */
static enum wire_err rx_parse(struct harp_engine *e, const uint8_t *frame, uint32_t len,
			      const struct wire_pieces *pk, struct wire_pkt *p)
{
	enum wire_err err;
	bool join = false;
	uint32_t i;

	if (!pk) {
		return wire_parse_defer(frame, len, p);
	}
	err = wire_parse_pieces(pk, p, &join, true);
	if (join) { /* its pieces copied together, parsed whole */
		for (i = 0, len = 0; i < pk->n; len += pk->len[i], i++) {
			memcpy(e->rx_joined + len, pk->at[i], pk->len[i]);
		}
		err = wire_parse(e->rx_joined, len, p);
	}
	return err;
}

/* The ready connection a packet is for, or NULL when none here is. */
static struct harp_conn *rx_conn_find(struct harp_engine *e, const struct wire_pkt *p)
{
	struct harp_conn *c = e->by_slot[p->h.conn_id & (HARP_MAX_CONNS - 1)];

	/* the addresses too: a frame of ours reflected back at us (its conn_id is the peer's,
	 * which may equal one of ours, and its token is the session's) is not the peer's */
	if (c && c->id == p->h.conn_id && c->token == p->h.token &&
	    p->ip6 == c->path.ip6 && wire_ip_eq(&p->src_ip, &c->path.dst_ip) &&
	    wire_ip_eq(&p->dst_ip, &c->path.src_ip) &&
	    atomic_load_explicit(&c->state, memory_order_relaxed) == CONN_READY) {
		return c;
	}
	return NULL;
}

/* A packet no connection here takes, counted by what it was. */
static void rx_no_conn(struct harp_engine *e, const struct wire_pkt *p)
{
	if (p->h.type == HARP_PKT_PROBE) {
		/* a port pair that hashes to this queue, not the connection's: the prober hears
		 * nothing of it and does not use it */
		e->stats.rx_probes_elsewhere++;
	} else {
		e->stats.rx_unknown_conn++;
	}
}

/*
 * A frame whose body's part of the checksum is still due gets it added, before anything of the
 * frame is used; false when the sum fails (counted). Where its body may go straight into place
 * (conn_place_at: a hole in the receive that no verified packet has written), the sum rides
 * along that copy (p->placed); a frame that fails it leaves bytes there that count for nothing
 * and that the packet sent again overwrites. Anywhere else it is summed where it lies first.
 */
static bool rx_settle(struct harp_engine *e, struct harp_conn *c, struct wire_pkt *p)
{
	uint8_t *dst;
	bool ok;

	p->placed = false;
	if (!p->sum_due) {
		return true;
	}
	dst = c ? conn_place_at(c, p) : NULL;
	if (dst) {
		ok = wire_body_copy_check(dst, p);
		p->placed = ok;
		e->stats.rx_placed += ok;
	} else {
		ok = wire_body_check(p);
	}
	if (!ok) {
		e->stats.rx_bad++;
	}
	return ok;
}

/*
 * HARP_AUTH: nothing of a frame is applied before its MAC holds and its counter is new; a
 * connection without it takes no frame that has one (and the reverse).
 */
static bool rx_auth_ok(struct harp_engine *e, struct harp_conn *c, const struct wire_pkt *p)
{
	enum auth_verdict v;

	if (unlikely(!c->auth != !p->trailer)) {
		e->stats.rx_bad_auth++;
		return false;
	}
	if (!c->auth) {
		return true;
	}
	v = auth_open(c->auth, p->src_port, p->dst_port, p->records, p->records_len, p->trailer);
	if (v == AUTH_OK) {
		return true;
	}
	if (v == AUTH_REPLAYED) {
		e->stats.rx_replayed++;
	} else {
		e->stats.rx_bad_auth++;
	}
	return false;
}

/*
 * A probe's port pair reaches the connection's engine: tell the prober, unless another engine
 * here owns the pair (its sends would draw the pair to its queue).
 */
static void rx_probe(struct harp_engine *e, struct harp_conn *c, const struct wire_pkt *p,
		     uint64_t now)
{
	if (e->env.pairs) {
		uint32_t peer = wire_ip_fold(&p->src_ip);

		/* another engine here sent on the flow lately (a probe): the tap may steer it
		 * there yet, whatever brought this probe here */
		if (pairs_leased_by_other(e->env.pairs, peer, p->dst_port, p->src_port, e->queue,
					  now / 1000000) ||
		    !pairs_claim(e->env.pairs, peer, p->dst_port, p->src_port, e->queue, NULL)) {
			e->stats.rx_probes_pair_taken++;
			return;
		}
		conn_on_peer_probe(c, p->dst_port, p->src_port, now);
	}
	e->stats.rx_probes++;
	if (chan_note_path(c, p->h.rsn, p->h.tag)) {
		c->links.next_report = e->report_list;
		e->report_list = c;
	}
}

/* A frame's records applied to its connection, which may now send, and owe an ack now or later. */
static void rx_apply(struct harp_engine *e, struct harp_conn *c, struct wire_pkt *p,
		     uint64_t now)
{
	if (e->env.pairs) {
		/* the peer sends its data and acks on its paths: keep this one steered here */
		conn_on_peer_data(c, p->dst_port, p->src_port, now);
	}
	/* every record of the frame is this connection's (wire_parse checked) */
	do {
		conn_on_packet(c, p, now);
	} while (atomic_load_explicit(&c->state, memory_order_relaxed) == CONN_READY &&
		 wire_next(p));
	tx_list_add(e, c);
	if (conn_ack_wanted(c, now)) {
		ack_list_add(e, c);
	} else if (c->ack_due && !c->links.on_ack_wait) {
		c->links.on_ack_wait = true; /* owed, not yet due */
		c->links.next_ack_wait = e->ack_wait;
		e->ack_wait = c;
	}
}

/* A packet in one piece, or in several (pk, with frame and len NULL and 0). */
static void rx_one(struct harp_engine *e, const uint8_t *frame, uint32_t len,
		   const struct wire_pieces *pk, uint64_t now)
{
	struct wire_pkt p;
	struct harp_conn *c;

	e->stats.rx_packets++;
	if (fault_drop(e)) {
		return;
	}
	if (rx_parse(e, frame, len, pk, &p) != WIRE_OK) {
		e->stats.rx_bad++;
		return;
	}
	if (p.h.type == HARP_PKT_STEER) {
		e->stats.rx_steer++; /* its work was done on the way, in the peer's host */
		return;
	}
	c = rx_conn_find(e, &p);
	if (c && fault_deaf(e, c)) {
		return;
	}
	if (!rx_settle(e, c, &p)) {
		return;
	}
	if (!c) {
		rx_no_conn(e, &p);
		return;
	}
	if (!rx_auth_ok(e, c, &p)) {
		return;
	}
	if (p.h.type == HARP_PKT_PROBE) {
		rx_probe(e, c, &p, now);
		return;
	}
	rx_apply(e, c, &p, now);
}

/* Delayed acks whose time has come go on the ack list; those paid by a piggyback leave. */
static void acks_due(struct harp_engine *e, uint64_t now)
{
	struct harp_conn **pp = &e->ack_wait, *c;

	while ((c = *pp)) {
		bool due = conn_ack_wanted(c, now);

		if (due) {
			ack_list_add(e, c);
		}
		if (due || !c->ack_due) {
			*pp = c->links.next_ack_wait;
			c->links.on_ack_wait = false;
		} else {
			pp = &c->links.next_ack_wait;
		}
	}
}

static uint32_t rx_batch(struct harp_engine *e, uint64_t now)
{
	struct xsk_port *p = &e->port;
	uint32_t idx_rx, idx_more, n, i;
	bool looked_again = false;
	struct wire_pieces pk;
	int k;

	n = xsk_ring_cons__peek(&p->rx, RX_BATCH, &idx_rx);
	if (!n) {
		return 0;
	}
	for (i = 0; i < n; i += (uint32_t)(k < 0 ? -k : k)) {
		bool tail = p->rx_skip; /* the rest of a chain counted when its head went */

		k = xsk_port_gather(p, idx_rx + i, n - i, ENGINE_JOINED_BYTES, &pk);
		if (k == 0 && !looked_again) {
			/* A chain whose end is not among those peeked. libxdp reads the producer
			 * again only once its cached entries are used up, so read it now and peek
			 * on from the chain's head (the same descriptors, and any that came). */
			looked_again = true;
			xsk_ring_cons__cancel(&p->rx, n - i);
			p->rx.cached_prod = __atomic_load_n(p->rx.producer, __ATOMIC_ACQUIRE);
			n = i + xsk_ring_cons__peek(&p->rx, RX_BATCH - i, &idx_more);
			continue;
		}
		if (k == 0) {
			break; /* still not there: the next batch starts at its head */
		}
		if (k < 0) {
			e->stats.rx_bad_chain += !tail;
			continue;
		}
		if (k == 1) {
			rx_one(e, pk.at[0], pk.len[0], NULL, now);
		} else {
			e->stats.rx_chains++;
			rx_one(e, NULL, 0, &pk, now);
		}
	}
	if (i < n) {
		xsk_ring_cons__cancel(&p->rx, n - i);
	}
	if (e->dev.nin) {
		(void)dev_flush(e, HARP_COPY_TO_DEVICE); /* copies out of these frames done first */
	}
	xsk_port_refill(p, idx_rx, i); /* every frame straight back to the fill ring */
	xsk_ring_cons__release(&p->rx, i);
	return i;
}

/* ---- transmit ------------------------------------------------------------------------------- */

/*
 * The TX descriptors reserved for a pass, and the frame last opened in them: records of the
 * same connection and path that fit join it (a CTS and the DATA posted after it, a window of
 * small messages), so they cost the kernel one packet. It is sealed (headers and checksums)
 * when another record cannot join, and at the end of the pass. An open frame holds descriptors
 * for the longest chain a frame may need; sealing cuts it into the chain it needs and gives the
 * rest back (it is always the batch's last frame).
 */
struct tx_batch {
	uint32_t idx, reserved, used;
	uint32_t first;		/* the open frame's first descriptor (it holds room for a chain) */
	struct harp_conn *open; /* whose frame is open, NULL: none */
	uint8_t *frame;
	uint32_t records;	 /* bytes of records in it */
	uint16_t src_port, dst_port;
	bool alone;		 /* a PROBE or STEER: the XDP program reads only a frame's first header */
	bool device;		 /* a copy from device memory fills part of the open frame */
	bool summed;		 /* sum holds the sum of the open frame's records (no MAC, no
				  * device copy): sealing need not read them again */
	uint32_t sum;
	bool corrupt;		 /* HARP_FAULT_ZC_TX_CORRUPT_MS: frames leave with a bad IP checksum */
};

/* The open frame's len bytes as its chain of descriptors, each at most one UMEM frame. */
static void tx_chain(struct harp_engine *e, struct tx_batch *b, uint32_t len)
{
	struct xsk_port *p = &e->port;
	uint32_t pieces = xsk_port_chain(p, b->idx + b->first,
					 xsk_ring_prod__tx_desc(&p->tx, b->idx + b->first)->addr, len);

	b->used = b->first + pieces;
	e->stats.tx_chains += pieces > 1;
}

/* Whether a frame of the most pieces can open: descriptors in the batch, a frame in the pool. */
static bool tx_room(struct harp_engine *e, const struct tx_batch *b)
{
	struct xsk_port *p = &e->port;

	return b->reserved - b->used >= xsk_port_tx_pieces(p, xsk_port_tx_max(p)) &&
	       xsk_port_txpool(p)->free;
}

/*
 * A frame's headers and checksums (or MAC) written over its records, from the sum of the records
 * when records_sum gives it; returns its length.
 */
static uint32_t frame_seal(struct harp_conn *c, uint8_t *frame, uint32_t records_len,
			   uint16_t src_port, uint16_t dst_port, uint16_t ip_id, bool corrupt,
			   const uint32_t *records_sum)
{
	struct wire_path path = c->path;
	uint32_t len;

	path.src_port = src_port;
	path.dst_port = dst_port;
	if (c->auth) {
		/* the first record names the trailer; the MAC covers every record, and stands in
		 * for the UDP checksum */
		uint8_t *records = frame + wire_records_at(path.ip6);
		uint16_t trailer = htons(HARP_AUTH_TRAILER);

		memcpy(records + offsetof(struct harp_hdr, trailer), &trailer, sizeof(trailer));
		auth_seal(c->auth, src_port, dst_port, records, records_len);
		len = wire_seal(frame, &path, records_len + HARP_AUTH_TRAILER, ip_id, false);
	} else if (records_sum) {
		len = wire_seal_summed(frame, &path, records_len, ip_id, *records_sum);
	} else {
		len = wire_seal(frame, &path, records_len, ip_id, true);
	}
	if (corrupt) {
		/* the IPv4 header checksum, or IPv6's UDP one: the peer drops the frame */
		frame[path.ip6 ? wire_records_at(true) - 2 : HARP_ETH_HLEN + 10] ^= 0x5a;
	}
	return len;
}

/*
 * The open frame sealed and cut into its chain. One that a copy from device memory fills is
 * sealed only after the copy (tx_seal_device): its length is known now, its checksum is not.
 */
static void tx_seal(struct harp_engine *e, struct tx_batch *b)
{
	struct harp_conn *c = b->open;
	uint16_t ip_id;

	if (!c) {
		return;
	}
	ip_id = c->ip_id++;
	if (b->device) {
		e->dev.unsealed[e->dev.nunsealed++] = (struct engine_unsealed){
			.conn = c, .frame = b->frame, .records = b->records,
			.src_port = b->src_port, .dst_port = b->dst_port, .ip_id = ip_id,
		};
		tx_chain(e, b, wire_records_at(c->path.ip6) + b->records +
				       (c->auth ? HARP_AUTH_TRAILER : 0));
	} else {
		tx_chain(e, b, frame_seal(c, b->frame, b->records, b->src_port, b->dst_port, ip_id,
					  b->corrupt, b->summed ? &b->sum : NULL));
	}
	b->open = NULL;
	b->device = false;
}

/*
 * The frames that waited for copies from device memory, sealed once the copies are done; if
 * they failed, sealed broken (a bad checksum), so the peer drops them.
 */
static void tx_seal_device(struct harp_engine *e, const struct tx_batch *b)
{
	bool failed;
	int i;

	if (!e->dev.nunsealed) {
		return;
	}
	failed = dev_flush(e, HARP_COPY_TO_HOST) != 0;
	for (i = 0; i < e->dev.nunsealed; i++) {
		const struct engine_unsealed *u = &e->dev.unsealed[i];

		(void)frame_seal(u->conn, u->frame, u->records, u->src_port, u->dst_port, u->ip_id,
				 b->corrupt || failed, NULL);
	}
	e->dev.nunsealed = 0;
}

/* A record's payload from device memory: the copy is queued, and the frame sealed after it. */
static bool tx_copy_out(struct harp_engine *e, struct tx_batch *b, uint8_t *dst,
			const uint8_t *src, uint32_t n)
{
	if (e->dev.nout == ENGINE_COPIES && dev_flush(e, HARP_COPY_TO_HOST)) {
		return false;
	}
	e->dev.out[e->dev.nout++] = (struct harp_copy){ .dst = dst, .src = src, .len = n };
	b->device = true;
	b->summed = false;
	return true;
}

static bool tx_put(struct harp_engine *e, struct tx_batch *b, struct harp_conn *c,
		   const struct conn_tx *tx)
{
	struct xsk_port *p = &e->port;
	uint32_t body = tx->h.len;
	struct xdp_desc *d;
	uint8_t *record;
	uint64_t addr;

	if (b->open == c && !b->alone && !wire_alone(tx->h.type) &&
	    b->src_port == tx->src_port && b->dst_port == tx->dst_port &&
	    b->records + HARP_HDR_LEN + body <= HARP_HDR_LEN + c->payload_max) {
		record = b->frame + wire_records_at(c->path.ip6) + b->records;
		e->stats.tx_bundled++;
	} else {
		tx_seal(e, b);
		if (!tx_room(e, b) || frame_pool_get(xsk_port_txpool(p), &addr, 1) != 1) {
			return false;
		}
		b->first = b->used;
		b->used += xsk_port_tx_pieces(p, xsk_port_tx_max(p));
		d = xsk_ring_prod__tx_desc(&p->tx, b->idx + b->first);
		d->addr = addr;
		d->options = 0;
		b->open = c;
		b->frame = xsk_port_frame(p, addr);
		b->records = 0;
		b->src_port = tx->src_port;
		b->dst_port = tx->dst_port;
		b->alone = wire_alone(tx->h.type);
		b->summed = !c->auth; /* a MAC covers the trailer too, and is written at the seal */
		b->sum = 0;
		record = b->frame + wire_records_at(c->path.ip6);
		e->stats.tx_packets++;
	}
	/* the checksum's sum rides along the writes: one pass over the payload, not two */
	wire_put_record(record, &tx->h);
	if (b->summed) {
		b->sum += wire_sum(record, HARP_HDR_LEN, b->records);
	}
	if (body && tx->device && tx->h.type != HARP_PKT_ACK) {
		if (!tx_copy_out(e, b, record + HARP_HDR_LEN, tx->payload, body)) {
			return false; /* the device failed: the engine's connections fail */
		}
	} else if (body && b->summed) {
		b->sum += wire_copy_sum(record + HARP_HDR_LEN,
					tx->h.type == HARP_PKT_ACK ? tx->sack : tx->payload, body,
					b->records + HARP_HDR_LEN);
	} else if (body) {
		memcpy(record + HARP_HDR_LEN, tx->h.type == HARP_PKT_ACK ? tx->sack : tx->payload,
		       body);
	}
	b->records += HARP_HDR_LEN + body;
	return true;
}


static void send_acks(struct harp_engine *e, struct tx_batch *b, uint64_t now)
{
	struct harp_conn *c;
	struct conn_tx tx;

	for (c = e->ack_list; c; c = c->links.next_ack) {
		c->links.on_ack_list = false;
		if (tx_room(e, b) && conn_make_ack(c, &tx, now)) {
			if (!tx_put(e, b, c, &tx)) {
				conn_ack_unsent(c); /* no frame free: ack next round */
				continue;
			}
			if (tx.twin_src_port && tx_room(e, b)) {
				tx.src_port = tx.twin_src_port;
				tx.dst_port = tx.twin_dst_port;
				tx_put(e, b, c, &tx); /* best effort: the first copy is out */
			}
		}
	}
	e->ack_list = NULL;
}

static void send_data(struct harp_engine *e, struct tx_batch *b, uint64_t now)
{
	struct harp_conn *c = NULL, *prev = NULL, *next;
	struct conn_tx tx;
	bool more = true;

	/* Round-robin in bursts, so one busy connection cannot starve the others. A connection
	 * that had nothing more to send leaves the list; one cut short by the batch or the frame
	 * pool stays for the next pass, and the next pass begins where this one ran out of room
	 * (tx_list_turn): a host short of frames serves each in turn, not the first ones only. */
	while (more && tx_room(e, b)) {
		more = false;
		for (prev = NULL, c = e->tx_list; c && tx_room(e, b); c = next) {
			int burst = 0;

			while (tx_room(e, b) && conn_next_probe(c, &tx, now)) {
				if (!tx_put(e, b, c, &tx)) {
					break;
				}
			}
			while (burst < CONN_BURST && tx_room(e, b)) {
				if (!conn_next_tx(c, &tx, now)) {
					break;
				}
				if (!tx_put(e, b, c, &tx)) {
					break;
				}
				burst++;
			}
			next = c->links.next_tx;
			if (burst == CONN_BURST || !tx_room(e, b) || conn_paced(c)) {
				more |= burst == CONN_BURST;
				prev = c; /* cut short, or paced: it stays */
				continue;
			}
			tx_list_drop(e, prev, c); /* it said it has nothing more */
		}
	}
	if (!tx_room(e, b)) {
		tx_list_turn(e, prev, c);
	}
}

/* ---- connections ------------------------------------------------------------------------------ */

/* A receive says how many packets may come at once: the fill ring must hold them. */
static void expect_packets(struct harp_engine *e, const struct harp_conn *c,
			   const struct harp_req *r)
{
	uint32_t frame = wire_records_at(c->path.ip6) + HARP_HDR_LEN + c->payload_max;
	uint64_t bytes = 0;
	int i;

	for (i = 0; i < r->recv.nbufs; i++) {
		bytes += r->recv.cap[i];
	}
	/* each packet takes as many fill-ring frames as its chain has pieces */
	xsk_port_expect(&e->port,
			(bytes / c->payload_max + 1) * xsk_port_rx_pieces(&e->port, frame));
}

/* Takes c's new requests in order; false when the next one must wait for a free slot. */
static bool take_from(struct harp_engine *e, struct harp_conn *c)
{
	struct harp_req *r;

	tx_list_add(e, c);
	while ((r = spsc_peek(c->submit))) {
		if (atomic_load_explicit(&c->state, memory_order_relaxed) != CONN_READY ||
		    c->lingering) {
			spsc_pop(c->submit);
			req_finish(r, c->lingering ? c->linger_err : atomic_load(&c->fail_err));
			continue;
		}
		if (!conn_take_request(c, r)) {
			return false;
		}
		spsc_pop(c->submit);
		if (r->kind == REQ_RECV) {
			expect_packets(e, c, r);
		}
	}
	return true;
}

static void retry_add(struct harp_engine *e, struct harp_conn *c)
{
	if (!c->links.on_retry) {
		c->links.on_retry = true;
		c->links.next_retry = e->retry;
		e->retry = c;
	}
}

/*
 * New requests: only the connections that said they have some (engine_notify), and those whose
 * next request waited for a slot, so a pass costs what was posted, not the number of connections.
 */
static void take_requests(struct harp_engine *e, uint64_t now)
{
	struct harp_conn *c, *next, **pp;

	for (pp = &e->retry; (c = *pp);) {
		if (take_from(e, c)) {
			*pp = c->links.next_retry;
			c->links.on_retry = false;
		} else {
			pp = &c->links.next_retry;
		}
	}
	if (!atomic_load_explicit(&e->to_take, memory_order_relaxed)) {
		return;
	}
	/* acquire: pairs with engine_notify's release */
	c = atomic_exchange_explicit(&e->to_take, NULL, memory_order_acquire);
	adopt(e, now); /* a connection is handed over before its first request is posted */
	/* The list is newest first, and taken so: the connection posted to last joins the tx list
	 * first of them (tx_list_add queues) and sends first: after "receive, then send" (a
	 * request-response's order: NCCL's proxy, the ping-pong), the DATA leaves before the CTS,
	 * which an unsolicited send does not wait for. */
	for (; c; c = next) {
		next = c->links.next_take;
		/* acquire: a notify that found the flag still set is visible, and so is its request */
		atomic_exchange_explicit(&c->links.wants_take, false, memory_order_acq_rel);
		if (!take_from(e, c)) {
			retry_add(e, c);
		}
	}
}

/* Takes c off the engine's lists, tells the peer, fails what is pending and frees it. */
static void reap(struct harp_engine *e, struct harp_conn *c)
{
	if (c->links.on_retry) {
		LIST_UNLINK(&e->retry, c, links.next_retry);
	}
	if (c->links.on_tx) {
		struct harp_conn *prev = NULL, *at;

		for (at = e->tx_list; at != c; at = at->links.next_tx) {
			prev = at;
		}
		tx_list_drop(e, prev, c);
	}
	if (c->links.on_ack_wait) {
		LIST_UNLINK(&e->ack_wait, c, links.next_ack_wait);
	}
	if (c->links.on_ack_list) {
		LIST_UNLINK(&e->ack_list, c, links.next_ack);
	}
	LIST_UNLINK(&e->conns, c, links.next_active); /* adopted: engine_close_conn adopts first */
	if (atomic_load_explicit(&c->state, memory_order_relaxed) == CONN_READY &&
	    !c->close_told_ns) {
		chan_send_close(c);
	}
	conn_fail(c, -ECONNABORTED);
	engine_release_conn(e, c);
}

/* No port pair reached the peer's engine in HARP_CONNECT_TIMEOUT_MS: say why, as far as we can. */
static void check_probing(struct harp_engine *e, struct harp_conn *c, uint64_t now)
{
	uint64_t limit = (uint64_t)e->env.params->connect_timeout_ms * 1000000ull, queues;
	char seen[160];
	int err;

	if (!conn_paths_hopeless(c, now, limit)) {
		return;
	}
	/* The peer's probes for this connection, as our XDP program recorded them, usually fail
	 * the same way ours did. */
	err = steer_probe_queues(e->env.steer, c->id, c->token, &queues);
	if (err) {
		snprintf(seen, sizeof(seen), "(unknown: %s)",
			 err == -ENOENT ? "nothing records them here" : strerror(-err));
	} else {
		queue_set_text(seen, sizeof(seen), queues);
	}
	pr_err("conn %u: none of %llu probes over random UDP port pairs reached the engine of peer "
	       "%s that owns this connection within HARP_CONNECT_TIMEOUT_MS=%d; here, the peer's "
	       "probes arrived on rx queue(s) %s of %s while this connection's engine runs queue %d "
	       "(a queue without a harp socket, or another process's: let harp run on every queue "
	       "the NIC hashes to, see HARP_QUEUES)",
	       c->id, (unsigned long long)c->stats.probes_sent,
	       WIRE_IP_STR(&c->path.dst_ip), e->env.params->connect_timeout_ms,
	       seen, e->env.ifname, e->queue);
	conn_fail(c, -EHOSTUNREACH);
}

/* Control messages: a path found, a close. Read before the timers judge a connection. */
static void read_control(struct harp_engine *e, uint64_t now, bool now_too)
{
	struct epoll_event evs[32];
	struct harp_conn *c;
	int n, i, err;

	/* A connection waiting for its first path waits for the peer's report on the control
	 * socket: read it every pass until then, so set-up takes one round trip, not 2 ms. The
	 * keeper reads it on each of its passes: it sleeps in poll() on the set. */
	if (now < e->next_ctrl_ns && !e->probing && !now_too) {
		return;
	}
	e->next_ctrl_ns = now + CTRL_PERIOD_NS;
	n = epoll_wait(e->epfd, evs, ARRAY_SIZE(evs), 0);
	for (i = 0; i < n; i++) {
		c = evs[i].data.ptr;
		tx_list_add(e, c); /* a path found: what waited for one may go */
		err = chan_poll(c, now);
		if (err < 0) {
			epoll_ctl(e->epfd, EPOLL_CTL_DEL, c->ctrl_fd, NULL);
		} else if (err) {
			e->silence_reports = true; /* zc_watch acts on it */
		}
	}
}

/* ---- the zero-copy watchdog (ENGINE_ZC_STALL_NUM) ------------------------------------------ */

#ifdef HARP_FAULT_INJECTION
/* HARP_FAULT_ZC_STALL_MS: the zero-copy socket's frames stop going back to the fill ring, so the
 * driver runs out of buffers and delivers nothing, as a stalled driver or hypervisor would.
 * HARP_FAULT_ZC_TX_CORRUPT_MS: every frame the zero-copy socket sends leaves with a bad IP
 * checksum: the driver completes it and the peer drops it, as with virtio_net's transmit
 * header fault (xsk.c, zerocopy_quirk). */
static void fault_zc_stall(struct harp_engine *e, uint64_t now)
{
	uint64_t after = (uint64_t)e->env.params->fault_zc_stall_ms * 1000000ull;
	uint64_t tx_after = (uint64_t)e->env.params->fault_zc_tx_corrupt_ms * 1000000ull;

	if (e->fault_zc_spent) {
		return; /* once: the socket bound again after the fallback works */
	}
	if (after && e->port.zerocopy && !e->port.no_refill && now - e->zc_opened_ns >= after) {
		e->port.no_refill = true;
		pr_info("engine %d: HARP_FAULT_ZC_STALL_MS: frames no longer go back to the fill ring "
			"of %s queue %d",
			e->queue, e->env.ifname, e->queue);
	}
	if (tx_after && e->port.zerocopy && !e->fault_tx_corrupt &&
	    now - e->zc_opened_ns >= tx_after) {
		e->fault_tx_corrupt = true;
		pr_info("engine %d: HARP_FAULT_ZC_TX_CORRUPT_MS: frames sent on %s queue %d leave "
			"with a bad IP checksum",
			e->queue, e->env.ifname, e->queue);
	}
}
#else
static void fault_zc_stall(struct harp_engine *e, uint64_t now)
{
	(void)e;
	(void)now;
}
#endif

uint64_t zc_quiet_ns(uint32_t retry_ms, uint32_t stalls)
{
	uint64_t ms = retry_ms;

	if (!retry_ms) {
		return UINT64_MAX;
	}
	for (; stalls > 1 && ms < ZC_RETRY_MAX_MS; stalls--) {
		ms *= 2;
	}
	return (ms < ZC_RETRY_MAX_MS ? ms : ZC_RETRY_MAX_MS) * 1000000ull;
}

/* Whether the context's engines are in copy mode for a stall now: one raised it (until_ns) and
 * its quiet period has not passed. */
static bool zc_fallen_back(const struct harp_engine *e, uint64_t now)
{
	uint64_t until;

	if (!e->env.copy_fallback) {
		return false;
	}
	until = atomic_load_explicit(&e->env.copy_fallback->until_ns, memory_order_relaxed);
	return until && now < until;
}

/* Raises the context's fall back to copy mode for this stall: false when another engine
 * raised it first. *quiet_ns: how long copy mode lasts (UINT64_MAX: for good). */
static bool zc_fall_back(struct harp_engine *e, uint64_t now, uint64_t *quiet_ns)
{
	struct zc_fallback *fb = e->env.copy_fallback;
	uint64_t until = atomic_load_explicit(&fb->until_ns, memory_order_relaxed), to;
	uint32_t stalls;

	if (until && now < until) {
		return false;
	}
	stalls = atomic_load_explicit(&fb->stalls, memory_order_relaxed) + 1;
	*quiet_ns = zc_quiet_ns((uint32_t)e->env.params->zc_retry_ms, stalls);
	to = *quiet_ns > UINT64_MAX - now ? UINT64_MAX : now + *quiet_ns;
	if (!atomic_compare_exchange_strong(&fb->until_ns, &until, to)) {
		return false;
	}
	atomic_fetch_add_explicit(&fb->stalls, 1, memory_order_relaxed);
	return true;
}

/* How long copy mode lasts, in words: "for 60 s", or "for good (HARP_ZC_RETRY_MS=0)". */
static const char *zc_quiet_text(uint64_t quiet_ns, char *buf, size_t len)
{
	if (quiet_ns == UINT64_MAX) {
		return "for good (HARP_ZC_RETRY_MS=0)";
	}
	snprintf(buf, len, "for %llu s, then binds zero copy again",
		 (unsigned long long)(quiet_ns / 1000000000ull));
	return buf;
}

/*
 * Whether this engine's zero-copy socket looks stalled: it delivered nothing for stall_ns while
 * a connection waited on its peer at least as long, or a peer said that nothing of ours reaches
 * it (CHAN_SILENT: a transmit that fails where only the receiver can see it). The first engine
 * to find one says so and raises the context's flag; each zero-copy engine then binds again in
 * copy mode.
 */
static void zc_watch(struct harp_engine *e, uint64_t now)
{
	uint64_t stall_ns = (uint64_t)e->env.params->peer_timeout_ms * 1000000ull *
			    ENGINE_ZC_STALL_NUM / ENGINE_ZC_STALL_DEN;
	struct harp_conn *c, *told = NULL;
	bool pending = false;
	char driver[64], quiet[64];
	uint64_t quiet_ns;

	for (c = e->silence_reports ? e->conns : NULL; c; c = c->links.next_active) {
		bool ready = atomic_load_explicit(&c->state, memory_order_relaxed) == CONN_READY;

		if (!c->peer_hears_nothing_ms) {
			continue;
		}
		/* Its own evidence first: data in flight with no ack for the stall time. A report
		 * with nothing of ours outstanding, or not borne out within the stall time of its
		 * coming (acks came), says nothing of our transmit, whoever sent it. */
		if (ready && c->snd_una != c->snd_nxt && now - c->last_ack_ns >= stall_ns) {
			told = c;
			break;
		}
		if (ready && c->snd_una != c->snd_nxt && now - c->peer_silent_ns < stall_ns) {
			pending = true; /* it may yet be borne out */
			continue;
		}
		if (ready) {
			pr_info("conn %u: peer %s said it heard nothing of it for %u ms, but %s: "
				"report ignored",
				c->id, WIRE_IP_STR(&c->path.dst_ip), c->peer_hears_nothing_ms,
				c->snd_una == c->snd_nxt ? "nothing of ours is in flight"
							 : "our data in flight is acked");
		}
		c->peer_hears_nothing_ms = 0;
	}
	e->silence_reports = told || pending; /* any other report waits for the next pass */
	/* A report is taken for a broken transmit only when this side agrees: none of the
	 * engine's connections with data in flight had an ack for as long. Under load one
	 * connection can wait that long while the others' acks come (64 connections on two
	 * 1-vCPU guests did), and nothing is wrong with the transmit then. */
	for (c = told ? e->conns : NULL; c; c = c->links.next_active) {
		if (atomic_load_explicit(&c->state, memory_order_relaxed) == CONN_READY &&
		    c->snd_una != c->snd_nxt && now - c->last_ack_ns < stall_ns) {
			told->peer_hears_nothing_ms = 0;
			told = NULL;
			break;
		}
	}
	if (!e->port.zerocopy || e->env.params->bind_mode == HARP_BIND_ZEROCOPY ||
	    !e->env.copy_fallback) {
		if (told) {
			pr_info("conn %u: peer %s has heard nothing of it for %u ms (%s mode here: "
				"nothing to change)",
				told->id, WIRE_IP_STR(&told->path.dst_ip),
				told->peer_hears_nothing_ms, e->port.zerocopy ? "zero-copy" : "copy");
			told->peer_hears_nothing_ms = 0;
		}
		return;
	}
	if (!told) {
		if (now - e->rx_last_ns < stall_ns) {
			return;
		}
		for (c = e->conns; c; c = c->links.next_active) {
			if (atomic_load_explicit(&c->state, memory_order_relaxed) == CONN_READY &&
			    conn_waited_ns(c, now) >= stall_ns) {
				break;
			}
		}
		if (!c) {
			return;
		}
	}
	if (!zc_fall_back(e, now, &quiet_ns)) {
		return;
	}
	xsk_driver_name(e->env.ifname, driver, sizeof(driver));
	if (told) {
		pr_warn("engine %d: peer %s has heard nothing of conn %u for %u ms, though %s "
			"queue %d (driver %s) sends it in zero-copy mode: taking the zero-copy "
			"transmit for broken, %s falls back to copy mode %s (HARP_BIND_MODE=zerocopy "
			"would keep zero copy)",
			e->queue, WIRE_IP_STR(&told->path.dst_ip), told->id,
			told->peer_hears_nothing_ms, e->env.ifname, e->queue,
			driver[0] ? driver : "unknown", e->env.ifname,
			zc_quiet_text(quiet_ns, quiet, sizeof(quiet)));
		told->peer_hears_nothing_ms = 0;
		return;
	}
	pr_warn("engine %d: the zero-copy socket of %s queue %d (driver %s) delivered nothing for "
		"%llu ms while conn %u waited on its peer: taking the driver for stalled, %s falls "
		"back to copy mode %s (HARP_BIND_MODE=zerocopy would keep zero copy)",
		e->queue, e->env.ifname, e->queue, driver[0] ? driver : "unknown",
		(unsigned long long)((now - e->rx_last_ns) / 1000000), c->id, e->env.ifname,
		zc_quiet_text(quiet_ns, quiet, sizeof(quiet)));
}

/*
 * A connection that has heard nothing of its peer for stall_ns while it waited on it tells the
 * peer so, once per silence (CHAN_SILENT): the peer's zero-copy transmit may be what fails, and
 * only this side can see that (the peer's zc_watch acts on it).
 */
static void report_silence(struct harp_conn *c, uint64_t now, uint64_t stall_ns)
{
	uint64_t waited = conn_waited_ns(c, now);

	if (waited < stall_ns) {
		c->silence_told_ns = 0; /* the peer was heard: a new silence may be told */
		return;
	}
	if (!c->silence_told_ns) {
		c->silence_told_ns = now;
		chan_send_silent(c, (uint32_t)(waited / 1000000));
	}
}

/* The port is gone (port_err): every connection of the engine fails with its error. */
static void fail_all(struct harp_engine *e)
{
	struct harp_conn *c;

	for (c = e->conns; c; c = c->links.next_active) {
		if (atomic_load_explicit(&c->state, memory_order_relaxed) == CONN_READY) {
			conn_fail(c, e->port_err);
		}
	}
}

/* What the old rings held is lost: each connection sends its unacked packets and its ack again. */
static void resend_after_rebind(struct harp_engine *e, uint64_t now)
{
	struct harp_conn *c;

	for (c = e->conns; c; c = c->links.next_active) {
		if (atomic_load_explicit(&c->state, memory_order_relaxed) == CONN_READY) {
			conn_on_rebind(c, now);
			tx_list_add(e, c);
			ack_list_add(e, c);
		}
	}
}

/*
 * Binds this engine's queue again, in copy mode (zero_copy false) or as at first (HARP_BIND_MODE
 * auto: zero copy, else copy): a new socket and UMEM, entered in the XSKMAP in place of the old.
 * What was on the old rings is lost, as a NIC drops it, and sent again. Fails every connection
 * of the engine when the queue cannot be bound again.
 */
static void rebind(struct harp_engine *e, bool zero_copy, uint64_t now)
{
	struct harp_params params = *e->env.params;
	const char *mode = zero_copy ? "zero-copy" : "copy";
	int err;

	if (!zero_copy) {
		params.bind_mode = HARP_BIND_COPY;
		e->fault_zc_spent = e->fault_zc_spent || e->fault_tx_corrupt || e->port.no_refill;
		e->fault_tx_corrupt = false;
	}
	dev_give_frames(e);
	xsk_port_close(&e->port);
	err = xsk_port_open(&e->port, e->env.ifname, e->queue, &params, XSK_BUSY_WAIT_MS);
	if (!err) {
		err = steer_enter(e->env.steer, e->queue, e->port.fd);
		if (err) {
			xsk_port_close(&e->port);
		}
	}
	e->rx_last_ns = now;
	e->zc_opened_ns = now;
	if (!err) {
		resend_after_rebind(e, now);
	}
	if (!err && zero_copy && !e->port.zerocopy) {
		pr_warn("engine %d: %s queue %d would not bind zero copy again: copy mode for good",
			e->queue, e->env.ifname, e->queue);
		e->zc_first = false;
		return;
	}
	if (!err) {
		pr_info("engine %d: %s queue %d bound again in %s mode", e->queue, e->env.ifname,
			e->queue, mode);
		return;
	}
	pr_err("engine %d: binding %s queue %d again in %s mode failed: %s; its connections fail",
	       e->queue, e->env.ifname, e->queue, mode, strerror(-err));
	e->port_err = err;
	e->port.fd = -1; /* the keeper polls nothing of it */
	fail_all(e);
}

/*
 * A lingering connection: once its eager sends are acked, one its user closed tells the peer so,
 * then acks again what the peer sent before until the peer closes too or is quiet for half the
 * peer timeout (the peer's own wait for those acks ends at the timeout). True when it is over.
 */
static bool conn_linger_step(struct harp_conn *c, uint64_t now, uint64_t peer_timeout)
{
	if (c->answering && !c->close_told_ns && !c->eager_used &&
	    atomic_load_explicit(&c->state, memory_order_relaxed) == CONN_READY) {
		chan_send_close(c);
		c->close_told_ns = now;
	}
	return conn_linger_done(c, now, peer_timeout / 2);
}

static void timers_and_control(struct harp_engine *e, uint64_t now, bool by_keeper)
{
	uint64_t peer_timeout = (uint64_t)e->env.params->peer_timeout_ms * 1000000ull;
	struct harp_conn *c, *next;

	acks_due(e, now);
	read_control(e, now, by_keeper);
	/* Timers run every TIMER_PERIOD_NS, not every pass: a pass under load takes a microsecond or
	 * two, and this loop visits every connection. While one probes for paths, every pass. */
	if (now < e->next_timer_ns && !e->probing) {
		return;
	}
	e->next_timer_ns = now + TIMER_PERIOD_NS;
	e->probing = 0;
	fault_zc_stall(e, now);
	zc_watch(e, now);
	for (c = e->conns; c; c = next) {
		next = c->links.next_active;
		if (c->lingering && conn_linger_step(c, now, peer_timeout)) {
			if (c->linger_reap) {
				reap(e, c); /* closed by its user, and its last sends acked (or failed) */
				continue;
			}
			/* aborted by its user: now it fails, and says so */
			if (atomic_load_explicit(&c->state, memory_order_relaxed) == CONN_READY) {
				chan_send_close(c);
			}
			conn_linger_fail(c);
		}
		if (c->peer_closing && conn_peer_close_check(c)) {
			chan_send_close(c); /* the peer lingers until we say we are done too */
		}
		if (atomic_load_explicit(&c->state, memory_order_relaxed) == CONN_READY) {
			uint32_t unheard_ms;

			conn_on_timer(c, now, peer_timeout);
			unheard_ms = conn_take_unheard(c);
			if (unheard_ms) {
				chan_send_unheard(c, unheard_ms);
			}
			report_silence(c, now, peer_timeout * ENGINE_ZC_STALL_NUM / ENGINE_ZC_STALL_DEN);
			if (atomic_load_explicit(&c->state, memory_order_relaxed) == CONN_FAILED &&
			    atomic_load_explicit(&c->fail_err, memory_order_relaxed) == -ETIMEDOUT) {
				explain_silence(e, now);
			}
			if (conn_tx_pending(c) || conn_steer_due(c, now) || conn_pmtu_due(c, now)) {
				tx_list_add(e, c); /* a retransmission, a probe round, a STEER round, or a
						    * safety net */
			}
			if (conn_ack_wanted(c, now)) {
				ack_list_add(e, c); /* a delayed ack whose time has come */
			}
			if (!c->paths_live) {
				e->probing++;
				check_probing(e, c, now);
			}
		}
	}
}

/* A pass can fail its TX wake-up millions of times a second: count each, say it once a second. */
static void kick_failed(struct harp_engine *e, int err, uint64_t now)
{
	e->stats.tx_kick_errors++;
	if (e->kick_warned_ns && now - e->kick_warned_ns < 1000000000ull) {
		return;
	}
	e->kick_warned_ns = now;
	pr_warn("engine %d: TX wake-up of %s failed: %s (%llu times so far; said at most once a "
		"second)",
		e->queue, e->env.ifname, strerror(-err),
		(unsigned long long)e->stats.tx_kick_errors);
}

/*
 * When a pass must run next although no packet comes: an ack owed soon, a connection cut short
 * (waiting for frames or ring slots), or the timers. Packets end the keeper's poll() on their own.
 */
static uint64_t engine_due(const struct harp_engine *e, uint64_t now)
{
	if (e->ack_wait || e->ack_list || e->tx_list || e->retry) {
		return now + CONN_ACK_DELAY_NS;
	}
	return e->next_timer_ns;
}

/*
 * The copy-mode fallback a watchdog asked for, zero copy again once its quiet period is over,
 * and the port's health: false when the port is gone, and every connection adopted since has
 * failed with it.
 */
static bool port_usable(struct harp_engine *e, uint64_t now)
{
	if (e->zc_first && !e->port_err && e->port.zerocopy == zc_fallen_back(e, now)) {
		rebind(e, !e->port.zerocopy, now);
	}
	if (e->port_err) {
		fail_all(e);
		return false;
	}
	return true;
}

/* Up to four batches of the RX ring applied, and the probes among them answered. */
static uint32_t rx_pass(struct harp_engine *e, uint64_t now)
{
	struct xsk_port *p = &e->port;
	uint32_t rx = 0, n;
	int i;

	if (p->busy_poll) {
		xsk_port_busy_poll(p);
	}
	for (i = 0; i < 4; i++) {
		n = rx_batch(e, now);
		rx += n;
		if (n < RX_BATCH) {
			break;
		}
	}
	if (rx) {
		e->rx_last_ns = now;
	}
	/* the probes of the pass answered: one write per connection, not one per probe */
	while (e->report_list) {
		struct harp_conn *c = e->report_list;

		e->report_list = c->links.next_report;
		chan_send_paths(c);
	}
	xsk_port_wake_rx(p);
	return rx;
}

/* Acks and data into the TX descriptors the ring has room for, then the kick; frames sent. */
static uint32_t tx_pass(struct harp_engine *e, uint64_t now)
{
	struct xsk_port *p = &e->port;
	struct tx_batch b = { 0 };
	uint32_t free_slots;
	int err;

	free_slots = xsk_prod_nb_free(&p->tx, TX_BATCH);
	b.reserved = free_slots < TX_BATCH ? free_slots : TX_BATCH;
	b.corrupt = e->fault_tx_corrupt && p->zerocopy;
	if (b.reserved && xsk_ring_prod__reserve(&p->tx, b.reserved, &b.idx) == b.reserved) {
		send_acks(e, &b, now);
		send_data(e, &b, now);
		tx_seal(e, &b);
		tx_seal_device(e, &b);
		/* give back the slots reserved but not written */
		p->tx.cached_prod -= b.reserved - b.used;
		if (b.used) {
			xsk_ring_prod__submit(&p->tx, b.used);
			p->tx_pending += b.used;
		}
	} else {
		e->stats.tx_ring_full++;
	}
	err = xsk_port_kick(p, now);
	if (err < 0) {
		kick_failed(e, err, now);
	}
	return b.used;
}

/* One pass; -1 when another thread is in one. by_keeper: the keeper runs it, not a caller. */
static int engine_pass(struct harp_engine *e, bool by_keeper)
{
	uint32_t rx, tx;
	uint64_t now;

	/* acquire: everything the previous runner of this engine wrote is visible to us */
	if (atomic_exchange_explicit(&e->busy, true, memory_order_acquire)) {
		/* Someone else is in a pass: the keeper, or another thread. Let it finish rather
		 * than spin against it: if it was preempted mid-pass, nothing moves until it runs
		 * again (under valgrind, whose threads take turns, a spinning caller kept a keeper
		 * from finishing its pass for 16 s in CI). */
		sched_yield();
		return -1;
	}
	now = now_ns();
	if (!by_keeper) { /* only the flag's holder writes it: no locked add */
		atomic_store_explicit(&e->calls,
				      atomic_load_explicit(&e->calls, memory_order_relaxed) + 1,
				      memory_order_relaxed);
	}
	adopt(e, now);
	if (!port_usable(e, now)) {
		atomic_store_explicit(&e->busy, false, memory_order_release);
		return 0;
	}
	xsk_port_reclaim(&e->port);
	rx = rx_pass(e, now);
	take_requests(e, now);
	timers_and_control(e, now, by_keeper);
	tx = tx_pass(e, now);
	atomic_store_explicit(&e->next_due_ns, engine_due(e, now), memory_order_relaxed);
	/* release: our writes are visible to whichever thread runs the engine next */
	atomic_store_explicit(&e->busy, false, memory_order_release);
	return (int)(rx + tx);
}

int engine_progress(struct harp_engine *e)
{
	int n;

	if (atomic_load_explicit(&e->runner_awake, memory_order_relaxed)) {
		return 0; /* its thread spins on it: a pass here would only take turns with it */
	}
	n = engine_pass(e, false);

	return n < 0 ? 0 : n;
}

/*
 * The keeper. Progress normally runs in the caller's test(); but a rank whose receives are all
 * done stops calling (NCCL's proxy thread sleeps between operations), and then nothing would
 * answer a retransmission after a lost ack, take a peer's small sends off the ring, or keep the
 * connection's timers: its peer's send would hang until HARP_PEER_TIMEOUT_MS. The keeper runs
 * every engine whose callers began fewer than KEEPER_CALLER_PASSES passes in the last
 * HARP_IDLE_PROGRESS_US (keeper_watch), under the same try-flag.
 *
 * While callers spin on the engines, it only looks, once per idle_ns, and naps under SCHED_IDLE
 * in between, so that a wake-up never preempts a spinning caller: under the normal policy each
 * one took a core from one, and on 2 vCPUs the 8 B ping-pong's p99 was about twice that with no
 * keeper at all (perf/RESULTS.md). Once it runs engines itself it takes the normal policy (a
 * SCHED_IDLE runner went unscheduled for seconds on a node whose cores were busy with other
 * work, and a peer probing for paths gave up on a live connection) and keeps them: it runs
 * passes KEEPER_BATCH_NS apart while they find work, then sleeps in poll() on their AF_XDP and
 * control sockets until a packet comes or the earliest timer is due (keeper_plan). A request posted meanwhile waits
 * for its caller's test(), or for idle_ns at most: waking the keeper for it would cost the
 * caller a system call, and the keeper would then compete with that caller's own test().
 */
bool keeper_watch(struct keeper_watch *w, uint64_t calls, uint64_t now, uint64_t idle_ns)
{
	if (calls - w->calls >= KEEPER_CALLER_PASSES) {
		w->owned = false; /* callers spin on it */
	} else if (now - w->since_ns < idle_ns) {
		return w->owned; /* the window goes on */
	} else {
		w->owned = true; /* a whole window with few calls */
	}
	w->calls = calls;
	w->since_ns = now;
	return w->owned;
}

struct keeper_plan keeper_plan(int owned, bool worked, uint64_t now, uint64_t due_ns,
			       uint64_t idle_ns)
{
	struct keeper_plan plan = { KEEPER_NAP, idle_ns };

	if (!owned) {
		return plan;
	}
	if (due_ns <= now) {
		plan.step = KEEPER_AGAIN;
		plan.wait_ns = 0;
		return plan;
	}
	if (worked) {
		plan.step = KEEPER_AGAIN;
		plan.wait_ns = due_ns - now < KEEPER_BATCH_NS ? due_ns - now : KEEPER_BATCH_NS;
		return plan;
	}
	plan.step = KEEPER_POLL;
	/* at most idle_ns: engines the callers run go idle, requests posted with no test() */
	plan.wait_ns = due_ns - now < idle_ns ? due_ns - now : idle_ns;
	return plan;
}

static void keeper_sleep(struct engine_keeper *k, const struct keeper_plan *plan, int nfds)
{
	struct timespec ts = { .tv_sec = (time_t)(plan->wait_ns / 1000000000ull),
			       .tv_nsec = (long)(plan->wait_ns % 1000000000ull) };

	if (plan->step == KEEPER_NAP || (plan->step == KEEPER_AGAIN && plan->wait_ns)) {
		nanosleep(&ts, NULL);
	} else if (plan->step == KEEPER_POLL) {
		atomic_fetch_add_explicit(&k->polls, 1, memory_order_relaxed);
		if (ppoll(k->fds, (nfds_t)nfds, &ts, NULL) > 0) {
			atomic_fetch_add_explicit(&k->wakes, 1, memory_order_relaxed);
		}
	}
}

static void *keeper_main(void *arg)
{
	struct engine_keeper *k = arg;
	struct sched_param prio = { 0 };
	struct keeper_plan plan;
	bool may_idle, idle;
	int q, err;

	err = pthread_setschedparam(pthread_self(), SCHED_IDLE, &prio);
	if (err) {
		pr_debug("keeper thread: SCHED_IDLE refused (%s); it runs at normal priority",
			 strerror(err));
	}
	may_idle = idle = !err;
	/* it sleeps 50 us between batches: the default slack of 50 us would double that */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);

	while (!atomic_load_explicit(&k->stop, memory_order_relaxed)) {
		uint64_t now = now_ns(), due = UINT64_MAX;
		uint32_t worked = 0;
		int owned = 0, nfds = 0;

		for (q = 0; q < k->nengines; q++) {
			struct harp_engine *e = &k->engines[q];
			uint64_t at;
			int n;

			if (!keeper_watch(&k->watch[q],
					  atomic_load_explicit(&e->calls, memory_order_relaxed), now,
					  k->idle_ns)) {
				continue; /* its callers run it */
			}
			if (idle) {
				idle = !!pthread_setschedparam(pthread_self(), SCHED_OTHER, &prio);
			}
			n = engine_pass(e, true);
			if (n < 0) {
				continue; /* a caller is in a pass: it runs it again */
			}
			worked += (uint32_t)n;
			at = atomic_load_explicit(&e->next_due_ns, memory_order_relaxed);
			due = at < due ? at : due;
			k->fds[nfds++] = (struct pollfd){ .fd = e->port.fd, .events = POLLIN };
			k->fds[nfds++] = (struct pollfd){ .fd = e->epfd, .events = POLLIN };
			owned++;
		}
		plan = keeper_plan(owned, worked > 0, now_ns(), due, k->idle_ns);
		if (plan.step == KEEPER_NAP && may_idle && !idle) {
			idle = !pthread_setschedparam(pthread_self(), SCHED_IDLE, &prio);
		}
		keeper_sleep(k, &plan, nfds);
	}
	return NULL;
}

int engine_keeper_start(struct engine_keeper *k, struct harp_engine *engines, int nengines,
			int idle_us)
{
	int err;

	memset(k, 0, sizeof(*k));
	if (!idle_us) {
		return 0;
	}
	k->engines = engines;
	k->nengines = nengines;
	k->idle_ns = (uint64_t)idle_us * 1000;
	k->fds = calloc((size_t)nengines * 2, sizeof(*k->fds));
	k->watch = calloc((size_t)nengines, sizeof(*k->watch));
	if (!k->fds || !k->watch) {
		free(k->fds);
		free(k->watch);
		return -ENOMEM;
	}
	err = pthread_create(&k->thread, NULL, keeper_main, k);
	if (err) {
		pr_err("keeper thread: pthread_create failed: %s", strerror(err));
		free(k->fds);
		free(k->watch);
		k->fds = NULL;
		k->watch = NULL;
		return -err;
	}
	pthread_setname_np(k->thread, "harp-keeper");
	k->started = true;
	return 0;
}

void engine_keeper_stop(struct engine_keeper *k)
{
	if (!k->started) {
		return;
	}
	atomic_store(&k->stop, true);
	pthread_join(k->thread, NULL);
	free(k->fds);
	free(k->watch);
	k->fds = NULL;
	k->watch = NULL;
	k->started = false;
}

static void *runner_main(void *arg)
{
	struct harp_engine *e = arg;
	uint64_t last = now_ns();

	/* its poll() wakes for timers 1 ms apart: the default slack of 50 us is too much */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
	while (!atomic_load_explicit(&e->runner_stop, memory_order_relaxed)) {
		int n = engine_pass(e, true);
		uint64_t now = now_ns(), due;
		struct pollfd fds[2];
		struct timespec ts;

		if (n > 0) {
			last = now;
		}
		if (n != 0 || now - last < RUNNER_SPIN_NS) {
			continue; /* n < 0: a caller's pass, between our sleep and its test() seeing us */
		}
		due = atomic_load_explicit(&e->next_due_ns, memory_order_relaxed);
		if (due <= now) {
			continue;
		}
		due = due - now < e->runner_idle_ns ? due - now : e->runner_idle_ns;
		ts = (struct timespec){ .tv_sec = (time_t)(due / 1000000000ull),
					.tv_nsec = (long)(due % 1000000000ull) };
		fds[0] = (struct pollfd){ .fd = e->port.fd, .events = POLLIN };
		fds[1] = (struct pollfd){ .fd = e->epfd, .events = POLLIN };
		/* callers run the passes from here on: a request posted now waits for its test() */
		atomic_store(&e->runner_awake, false);
		ppoll(fds, 2, &ts, NULL);
		atomic_store(&e->runner_awake, true);
		last = now_ns();
	}
	atomic_store(&e->runner_awake, false);
	return NULL;
}

int engine_runner_start(struct harp_engine *e, int idle_us)
{
	char name[16];
	int err;

	e->runner_idle_ns = (uint64_t)(idle_us ? idle_us : 1000) * 1000;
	atomic_store(&e->runner_stop, false);
	atomic_store(&e->runner_awake, true); /* before the first test() could race it */
	err = pthread_create(&e->runner, NULL, runner_main, e);
	if (err) {
		atomic_store(&e->runner_awake, false);
		pr_err("engine thread for queue %d: pthread_create failed: %s", e->queue,
		       strerror(err));
		return -err;
	}
	snprintf(name, sizeof(name), "harp-q%d", e->queue);
	pthread_setname_np(e->runner, name);
	e->runner_started = true;
	return 0;
}

void engine_runner_stop(struct harp_engine *e)
{
	if (!e->runner_started) {
		return;
	}
	atomic_store(&e->runner_stop, true);
	pthread_join(e->runner, NULL);
	e->runner_started = false;
}

/*
 * Closes a connection so that, once this returns, no engine pass reads the caller's buffers
 * again (NCCL frees them right after closing, requests still pending). It waits for whoever
 * runs the engine, a caller or the keeper, to finish its pass, then reaps the connection itself.
 */
static void engine_hold(struct harp_engine *e)
{
	while (atomic_exchange_explicit(&e->busy, true, memory_order_acquire)) {
		sched_yield(); /* a pass takes microseconds */
	}
}

void engine_close_conn(struct harp_engine *e, struct harp_conn *c)
{
	engine_hold(e);
	adopt(e, now_ns()); /* it may not have been adopted yet */
	take_requests(e, now_ns()); /* and it may be on the list of those with new requests */
	/* what an operator tuning a job asks for, read while no pass runs (an engine thread may be
	 * running this engine otherwise) */
	pr_info("conn %u closing: %llu messages sent, %llu received; %llu packets sent, %llu "
		"again (%llu on selective acks, %llu timeouts, %llu of them spurious); %llu "
		"duplicates, %llu out of order received; srtt %u us, window %u bytes",
		c->id, (unsigned long long)c->stats.msgs_sent,
		(unsigned long long)c->stats.msgs_received, (unsigned long long)c->stats.tx_packets,
		(unsigned long long)c->stats.retransmits,
		(unsigned long long)c->stats.fast_retransmits, (unsigned long long)c->stats.timeouts,
		(unsigned long long)c->stats.spurious_timeouts,
		(unsigned long long)c->stats.rx_duplicates,
		(unsigned long long)c->stats.rx_out_of_order, c->rtt.srtt_us, conn_cwnd(c));
	/* Sends it said were complete may still be on their way: they go on from their copies
	 * until acked, as a closed TCP socket still delivers its data. And the peer's last sends
	 * complete only on our acks, which may have been lost: the connection stays to ack them
	 * again until the peer closes too (the timers reap it then). Our ack of what came goes
	 * now. */
	if (conn_linger(c, -ECONNABORTED, true)) {
		c->linger_reap = true;
		c->ack_now = true;
		if (!c->ack_due) {
			c->ack_due = true;
			c->ack_due_ns = now_ns();
		}
		ack_list_add(e, c);
	} else {
		reap(e, c);
	}
	atomic_store_explicit(&e->busy, false, memory_order_release);
}

/* Closed or aborted connections whose completed small sends are not yet acked. */
int engine_lingering(struct harp_engine *e)
{
	struct harp_conn *c;
	int n = 0;

	engine_hold(e);
	adopt(e, now_ns());
	for (c = e->conns; c; c = c->links.next_active) {
		n += c->lingering;
	}
	atomic_store_explicit(&e->busy, false, memory_order_release);
	return n;
}

/*
 * Deregistering memory with requests still pending on it is how an aborting caller says "stop":
 * those connections fail (-ECANCELED) before the memory can be freed. The peer is told (a close):
 * at once, or, where small sends we said were complete are still unacked, once they are
 * (conn_linger).
 */
void engine_forget_region(struct harp_engine *e, const void *addr, size_t len)
{
	struct harp_conn *c;

	engine_hold(e);
	adopt(e, now_ns());
	take_requests(e, now_ns()); /* posted but not yet taken: they count too */
	for (c = e->conns; c; c = c->links.next_active) {
		if (atomic_load_explicit(&c->state, memory_order_relaxed) == CONN_READY &&
		    conn_uses_region(c, addr, len)) {
			pr_warn("conn %u: memory %p+%zu deregistered with requests pending on it; "
				"failing the connection",
				c->id, addr, len);
			if (!conn_linger(c, -ECANCELED, false)) {
				chan_send_close(c);
				conn_fail(c, -ECANCELED);
			} /* else its completed small sends go on first (the timers fail it after) */
		}
	}
	atomic_store_explicit(&e->busy, false, memory_order_release);
}
