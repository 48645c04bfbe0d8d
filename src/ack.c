// SPDX-License-Identifier: Apache-2.0
/*
 * The sender's side of acknowledgements. An ACK carries the cumulative ack and a selective-ack
 * map of what arrived beyond it; every reliable packet carries the cumulative ack too. Each
 * record acked leaves its path's pipe, completes its send once the send's last packet is acked,
 * and feeds its path's RTT and window (paths_on_ack). Loss is found the RACK way, per path: a
 * packet sent on a path before one acked on the same path, by more than a quarter of that path's
 * RTT (widened while the peer reports duplicates), is lost. ack.c owns snd_una, highest_acked,
 * the RACK and reordering state and the retransmission timer's base; it calls down only: paths.h,
 * reqs.h, sendq.h.
 */
#include <errno.h>
#include <string.h>

#include "ack.h"
#include "conn.h"
#include "paths.h"
#include "reqs.h"
#include "sendq.h"

#define RACK_SCAN_MAX 2048 /* psns examined per ack for loss */

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
			reqs_send_release(c, s, rec->type == HARP_PKT_MSGERR ? -EMSGSIZE : 0);
		}
	}
}

/*
 * RACK, per path: unacked packets sent well before the newest one acked on their path are lost.
 * And across paths, with the largest path RTT as the reordering window: a path that went dark
 * has no newer acked packet of its own to prove its losses. The per-path window widens to half
 * an RTT while the peer reports duplicates (ack_on_dup): a network that reorders more than a
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
			paths_on_loss(c, p, psn);
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
void ack_on_dup(struct harp_conn *c, uint64_t now)
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

void ack_on_ack(struct harp_conn *c, uint32_t ack_psn, const uint8_t *sack, uint32_t sack_bits,
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
		paths_undo_timeout(c, ts_echo);
	}
	paths_on_ack(c, &t, now);
	c->rto_base_ns = now;
	c->rto_streak = 0;
	c->last_ack_ns = now;
	detect_loss(c);
}
