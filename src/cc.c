/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Round-trip time estimate and congestion window, both plain arithmetic on caller-owned structs:
 * no clock reads, no allocation, so the same inputs always give the same window.
 *
 * RTT follows RFC 6298: the first sample sets srtt = s and rttvar = s/2; later ones move rttvar
 * by 1/4 of |srtt - s| and srtt by 1/8 of (s - srtt); rto = srtt + 4 * rttvar, clamped to the
 * connection's bounds, and doubled (to the cap) by each retransmission timeout. The smallest
 * sample seen is kept as the path's base RTT for the delay signal.
 *
 * The window counts bytes (RFC 9002's way), so that a path MTU that rises from 1500 to 9000 does
 * not multiply what is in flight six times, nor a fall divide it: packets of every size draw on
 * one budget. Below ssthresh it grows by the bytes acked (slow start), above it by one full
 * packet (mss) per window of bytes acked (congestion avoidance, RFC 5681's byte counting). A loss
 * halves it once per window of data: the decrease records next_psn as the recovery point, and
 * losses of packets sent before that point are the same congestion event; recovery ends when the
 * cumulative ack reaches it. A timeout drops the window to its floor, min_segs full packets.
 * When the smoothed RTT climbs well above the base RTT (queues building), the window shrinks by
 * 1/8, at most once per smoothed RTT.
 *
 * The pacer (internal.h) spreads the window over the round trip, in bytes too.
 */
#include "internal.h"

/* The delay signal: srtt above DELAY_FACTOR * min_rtt + DELAY_SLACK_US. */
#define CC_DELAY_FACTOR 4
#define CC_DELAY_SLACK_US 2000

static uint32_t cc_clamp_u32(uint64_t v, uint32_t lo, uint32_t hi)
{
	if (v < lo) {
		return lo;
	}
	if (v > hi) {
		return hi;
	}
	return (uint32_t)v;
}

void rtt_init(struct rtt_est *r, uint32_t rto_init_us, uint32_t rto_min_us, uint32_t rto_max_us)
{
	if (rto_max_us < rto_min_us) {
		rto_max_us = rto_min_us;
	}
	r->srtt_us = 0;
	r->rttvar_us = 0;
	r->min_rtt_us = 0; /* unknown until have_sample */
	r->rto_min_us = rto_min_us;
	r->rto_max_us = rto_max_us;
	r->rto_us = cc_clamp_u32(rto_init_us, rto_min_us, rto_max_us);
	r->have_sample = false;
}

void rtt_sample(struct rtt_est *r, uint32_t sample_us)
{
	uint32_t delta;

	if (!r->have_sample) {
		r->srtt_us = sample_us;
		r->rttvar_us = sample_us / 2;
		r->min_rtt_us = sample_us;
		r->have_sample = true;
	} else {
		/* rttvar first: RFC 6298 updates it with the srtt from before this sample */
		delta = r->srtt_us > sample_us ? r->srtt_us - sample_us : sample_us - r->srtt_us;
		r->rttvar_us = (uint32_t)((3ull * r->rttvar_us + delta) / 4);
		r->srtt_us = (uint32_t)((7ull * r->srtt_us + sample_us) / 8);
		if (sample_us < r->min_rtt_us) {
			r->min_rtt_us = sample_us;
		}
	}
	rtt_rearm(r);
}

void rtt_backoff(struct rtt_est *r)
{
	r->rto_us = cc_clamp_u32(2ull * r->rto_us, r->rto_min_us, r->rto_max_us);
}

/* The timeout the measured round trip gives, any backoff undone (before a first sample, the
 * timeout stays as it is). */
void rtt_rearm(struct rtt_est *r)
{
	if (r->have_sample) {
		r->rto_us = cc_clamp_u32((uint64_t)r->srtt_us + 4ull * r->rttvar_us, r->rto_min_us,
					 r->rto_max_us);
	}
}

/* The floor: min_segs packets of today's size, never above the ceiling. */
static uint32_t cc_floor(uint32_t mss, uint32_t min_segs, uint32_t cwnd_max)
{
	uint64_t floor = (uint64_t)mss * min_segs;

	return floor < cwnd_max ? (uint32_t)floor : cwnd_max;
}

void cc_init(struct cc *c, uint32_t mss, uint32_t cwnd_init, uint32_t min_segs, uint32_t cwnd_max)
{
	c->mss = mss ? mss : 1;
	c->min_segs = min_segs ? min_segs : 1;
	c->cwnd_max = cwnd_max > c->mss ? cwnd_max : c->mss;
	c->cwnd_min = cc_floor(c->mss, c->min_segs, c->cwnd_max);
	c->cwnd = cc_clamp_u32(cwnd_init, c->cwnd_min, c->cwnd_max);
	c->ssthresh = c->cwnd_max; /* slow start until the first congestion signal */
	c->acked_since_growth = 0;
	c->recovery_psn = 0;
	c->in_recovery = false;
	c->delay_backoff_ns = 0;
}

void cc_set_mss(struct cc *c, uint32_t mss)
{
	c->mss = mss ? mss : 1;
	c->cwnd_min = cc_floor(c->mss, c->min_segs, c->cwnd_max);
	c->cwnd = cc_clamp_u32(c->cwnd, c->cwnd_min, c->cwnd_max);
	c->ssthresh = c->ssthresh > c->cwnd_min ? c->ssthresh : c->cwnd_min;
}

static void cc_grow(struct cc *c, uint32_t newly_acked)
{
	uint32_t ss;

	if (c->cwnd < c->ssthresh) {
		ss = c->ssthresh - c->cwnd;
		if (ss > newly_acked) {
			ss = newly_acked;
		}
		c->cwnd += ss;
		newly_acked -= ss;
	}
	/* what slow start did not use counts towards avoidance: one mss per window of bytes acked */
	if (newly_acked > UINT32_MAX - c->acked_since_growth) {
		newly_acked = UINT32_MAX - c->acked_since_growth;
	}
	c->acked_since_growth += newly_acked;
	while (c->acked_since_growth >= c->cwnd && c->cwnd < c->cwnd_max) {
		c->acked_since_growth -= c->cwnd;
		c->cwnd = c->cwnd_max - c->cwnd > c->mss ? c->cwnd + c->mss : c->cwnd_max;
	}
	if (c->cwnd >= c->cwnd_max) {
		c->cwnd = c->cwnd_max;
		c->acked_since_growth = 0;
	}
}

/* Queues are building: shrink by 1/8, at most once per smoothed RTT so each cut can take hold. */
static void cc_check_delay(struct cc *c, const struct rtt_est *r, uint64_t now)
{
	uint64_t threshold_us, srtt_ns;

	if (!r || !r->have_sample) {
		return;
	}
	threshold_us = (uint64_t)CC_DELAY_FACTOR * r->min_rtt_us + CC_DELAY_SLACK_US;
	if (r->srtt_us <= threshold_us) {
		return;
	}
	srtt_ns = (uint64_t)r->srtt_us * 1000;
	if (now < c->delay_backoff_ns || now - c->delay_backoff_ns < srtt_ns) {
		return;
	}
	c->cwnd = cc_clamp_u32(c->cwnd - c->cwnd / 8, c->cwnd_min, c->cwnd_max);
	/* leave slow start too, or the next RTT's doubling would undo the cut at once */
	if (c->ssthresh > c->cwnd) {
		c->ssthresh = c->cwnd;
	}
	c->acked_since_growth = 0;
	c->delay_backoff_ns = now;
}

void cc_on_ack(struct cc *c, uint32_t newly_acked, uint32_t ack_psn, const struct rtt_est *r,
	       uint64_t now)
{
	/* ack_psn means "every psn before this arrived": the window that lost data is all acked */
	if (c->in_recovery && !psn_before(ack_psn, c->recovery_psn)) {
		c->in_recovery = false;
	}
	cc_grow(c, newly_acked);
	cc_check_delay(c, r, now);
	c->cwnd = cc_clamp_u32(c->cwnd, c->cwnd_min, c->cwnd_max);
}

static uint32_t cc_half_window(const struct cc *c)
{
	return c->cwnd / 2 > c->cwnd_min ? c->cwnd / 2 : c->cwnd_min;
}

void cc_on_loss(struct cc *c, uint32_t psn, uint32_t next_psn)
{
	/* a packet sent before the recovery point belongs to the event already handled */
	if (c->in_recovery && psn_before(psn, c->recovery_psn)) {
		return;
	}
	c->ssthresh = cc_half_window(c);
	c->cwnd = cc_clamp_u32(c->ssthresh, c->cwnd_min, c->cwnd_max);
	c->acked_since_growth = 0;
	c->recovery_psn = next_psn;
	c->in_recovery = true;
}

void cc_on_timeout(struct cc *c, uint32_t next_psn)
{
	c->ssthresh = cc_half_window(c);
	c->cwnd = c->cwnd_min;
	c->acked_since_growth = 0;
	c->recovery_psn = next_psn;
	c->in_recovery = true;
}

void pace_init(struct pacer *pc, uint64_t now)
{
	pc->credit = 0;
	pc->at_ns = now;
}

bool pace_ready(struct pacer *pc, const struct cc *c, const struct rtt_est *r, uint64_t now)
{
	uint64_t srtt_ns, per_rtt, burst, dt, add;

	if (pc->credit > 0) {
		return true;
	}
	if (!r || !r->have_sample || !r->srtt_us) {
		pc->credit = 0; /* no round trip to spread over yet */
		pc->at_ns = now;
		return true;
	}
	srtt_ns = (uint64_t)r->srtt_us * 1000;
	/* bytes a round trip at the pacing rate: 2 x cwnd in slow start, 5/4 x cwnd after */
	per_rtt = c->cwnd < c->ssthresh ? 2ull * c->cwnd : (uint64_t)c->cwnd * 5 / 4;
	burst = per_rtt / 4 > (uint64_t)CC_PACE_BURST_SEGS * c->mss ? per_rtt / 4
								      : (uint64_t)CC_PACE_BURST_SEGS * c->mss;
	dt = now > pc->at_ns ? now - pc->at_ns : 0;
	if (dt >= srtt_ns) {
		add = burst;
		pc->at_ns = now;
	} else {
		/* per_rtt < 2^34 and dt < srtt_ns < 2^42: the product may need more than 64 bits */
		add = (uint64_t)((unsigned __int128)per_rtt * dt / srtt_ns);
		if (!add) {
			/* not a whole byte yet: the time since at_ns still counts. Dropped at each
			 * look, a window of a packet over a second's round trip, looked at by a
			 * spinning engine every few microseconds, never refilled. */
			return false;
		}
		/* the time those bytes took, not all of dt: the fraction of a byte carries over */
		pc->at_ns += (uint64_t)((unsigned __int128)add * srtt_ns / per_rtt);
	}
	pc->credit += (int64_t)add;
	if (pc->credit > (int64_t)burst) {
		pc->credit = (int64_t)burst;
		pc->at_ns = now;
	}
	return pc->credit > 0;
}
