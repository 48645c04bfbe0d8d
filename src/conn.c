// SPDX-License-Identifier: Apache-2.0
/*
 * Per-connection reliability, run only by the connection's engine: its design, and the map of
 * the files that hold it.
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
 *
 * The connection's files, each owning its part of struct harp_conn (conn.h marks which), and
 * calling only those below it in this list:
 *
 *   conn.c      its life (state, start, free), the packets and requests the engine hands it,
 *               its timers: the retransmission timeout and the dead peer
 *   transmit.c  what goes next: CTS, retransmissions, new DATA (bound or unsolicited), parts of
 *               a packet cut again, ACKs; and the packets outside the windows
 *   ack.c       the sender's side of acks: records acked, sends completed, RACK's losses
 *   deliver.c   the receiver's side: DATA, CTS and MSGERR placed, unsolicited messages held
 *   reqs.c      requests taken, completed, failed; lingering
 *   pmtu.c      the path MTU search, and the receiver's parts of packets cut again
 *   paths.c     the paths, their windows, probing, rescues, STEERs
 *   sendq.h     the send queue's records and their place in a path's pipe
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ack.h"
#include "auth.h"
#include "conn.h"
#include "deliver.h"
#include "paths.h"
#include "pmtu.h"
#include "reqs.h"
#include "sendq.h"

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
	rtt_init(&c->rtt, CONN_RTO_INIT_US, CONN_RTO_MIN_US, CONN_RTO_MAX_US);
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
	pmtu_start(c, now);
}


bool conn_take_request(struct harp_conn *c, struct harp_req *r)
{
	int err;

	if (!reqs_take(c, r)) {
		return false;
	}
	err = r->kind == REQ_RECV ? deliver_unsol_claim(c, r) : 0;
	if (err) {
		conn_fail(c, err);
	}
	return true;
}

void conn_on_packet(struct harp_conn *c, const struct wire_pkt *p, uint64_t now)
{
	const struct harp_hdr *h = &p->h;

	c->heard_ns = now;
	c->rx_any_ns = now;
	if (h->type == HARP_PKT_ACK) {
		ack_on_ack(c, h->ack_psn, p->body, h->len * 8u, h->ts_echo, now);
		if (h->flags & HARP_ACK_F_DUP) {
			ack_on_dup(c, now);
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
	ack_on_ack(c, h->ack_psn, NULL, 0, h->ts_echo, now);
	if (c->lingering) {
		/* its receives are gone: nothing is delivered; closed, it acks again what came
		 * before (the peer's last sends complete on that) */
		if (c->answering) {
			deliver_closed(c, p, now);
		}
		return;
	}
	deliver_packet(c, p, now);
}

uint8_t *conn_place_at(struct harp_conn *c, const struct wire_pkt *p)
{
	return deliver_place_at(c, p);
}

/*
 * The peer closed (CHAN_CLOSE with its rcv_nxt). That value is a bound, never an ack: a send
 * completes on ACK frames alone, so whoever writes into the control connection can end this
 * connection but cannot complete a send that did not arrive. What was sent before the bound is
 * waited for: the peer lingers answering it (deliver_closed) until we close too; what is past
 * it will never be taken. Returns conn_peer_close_check's verdict.
 */
bool conn_on_peer_close(struct harp_conn *c, uint32_t peer_rcv_nxt)
{
	uint32_t bound = peer_rcv_nxt;

	if (psn_before(bound, c->snd_una)) {
		bound = c->snd_una;
	}
	if (psn_before(c->snd_nxt, bound)) {
		bound = c->snd_nxt;
	}
	c->close_psn = bound;
	c->peer_closing = true;
	return conn_peer_close_check(c);
}

bool conn_peer_close_check(struct harp_conn *c)
{
	uint32_t ssn, psn;

	if (!c->peer_closing ||
	    atomic_load_explicit(&c->state, memory_order_relaxed) != CONN_READY) {
		return false;
	}
	/* what lingering gave up (dead) is never sent again: only the rest is waited for */
	for (psn = c->snd_una; psn_before(psn, c->close_psn); psn++) {
		const struct tx_rec *rec = rec_of(c, psn);

		if (!rec->acked && !rec->dead) {
			return false;
		}
	}
	c->peer_closing = false;
	/* Unsolicited sends the peer acked before it closed were delivered, like a kernel socket's
	 * acknowledged bytes: they complete, though the CTS that would bind them never comes. */
	for (ssn = c->ssn_bound; psn_before(ssn, c->ssn_cur); ssn++) {
		struct harp_req *s = c->send_slots[ssn & (CONN_REQS - 1)];

		if (s && s->send.ssn == ssn && s->send.pkts_acked) {
			deliver_unsol_release(c, s, 0);
		}
	}
	conn_fail(c, -ECONNRESET);
	return true;
}

static void declare_dead(struct harp_conn *c, uint64_t silent_ns, uint64_t peer_timeout_ns,
			 const char *what, uint64_t now)
{
	char peer[WIRE_IP_TEXT];

	wire_ip_text(&c->path.dst_ip, peer);
	pr_err("conn %u: %s peer %s for %llu ms (HARP_PEER_TIMEOUT_MS=%llu); declaring it dead",
	       c->id, what, peer, (unsigned long long)(silent_ns / 1000000),
	       (unsigned long long)(peer_timeout_ns / 1000000));
	paths_log_at_death(c, now);
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

/*
 * A rescue's answer sent the packet waited on again, on a pair its probe had just crossed, within
 * the last retransmission timeout (rescue_resend): the peer's engine answered that probe, so it
 * is not gone, and the ack is due within a round trip. The peer timeout waits for it, never past
 * half the timeout more (rescues that keep finding pairs and never an ack end).
 */
static bool rescue_ack_due(const struct harp_conn *c, uint64_t now, uint64_t peer_timeout_ns)
{
	uint64_t resent = c->probe.resent_ns;

	return resent && now - resent <= (uint64_t)c->rtt.rto_us * 1000 &&
	       now - c->last_ack_ns <= peer_timeout_ns + peer_timeout_ns / 2;
}

/* Every packet not yet acknowledged queued to go again. */
static void resend_unacked(struct harp_conn *c)
{
	uint32_t psn;

	for (psn = c->snd_una; psn_before(psn, c->snd_nxt); psn++) {
		struct tx_rec *rec = rec_of(c, psn);

		if (!rec->acked) {
			queue_rtx(c, rec, psn);
		}
	}
}

void conn_on_timer(struct harp_conn *c, uint64_t now, uint64_t peer_timeout_ns)
{
	paths_retire_dead(c, now);
	if (c->snd_una == c->snd_nxt) {
		c->rto_base_ns = now;
		c->last_ack_ns = now;
		check_idle_peer(c, now, peer_timeout_ns);
		return;
	}
	c->heard_ns = now; /* while packets are in flight, their acks judge the peer */
	if (now - c->last_ack_ns > peer_timeout_ns && !rescue_ack_due(c, now, peer_timeout_ns)) {
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
	resend_unacked(c);
	rtt_backoff(&c->rtt);
	c->rto_base_ns = now;
	c->rto_streak++;
	paths_on_timeout(c, now);
}

/*
 * The engine bound its queue again (a zero-copy stall's fall back to copy mode, or zero copy
 * again after it): whatever its old rings held is lost, and so is what arrived while no socket
 * was bound. The peer usually rebinds within moments too (the stall that moved us moved it), and
 * by then our timeouts may have backed off to CONN_RTO_MAX_US, leaving only a try or two before
 * the peer timeout: a retransmission round lost in the gap would cost the connection. So what is
 * unacknowledged goes again now, and the timer starts again from the measured round trip, not
 * the backed-off one, so that a round lost in the peer's own gap is tried again a round trip
 * later. The ack we owe goes at once too: ours to the peer were on the old rings as well.
 */
void conn_on_rebind(struct harp_conn *c, uint64_t now)
{
	if (c->snd_una != c->snd_nxt) {
		resend_unacked(c);
		rtt_rearm(&c->rtt);
		c->rto_base_ns = now;
	}
	c->ack_due = c->ack_now = true;
	c->ack_due_ns = now;
}
