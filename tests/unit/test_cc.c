/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cc.c: the RFC 6298 estimator (first sample, convergence, clamps, backoff doubling and cap) and
 * the congestion window (slow start, additive increase, one decrease per window of losses,
 * timeout collapse, delay-based decrease, clamps). Everything is fed synthetic inputs: cc.c
 * reads no clock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "internal.h"

#define MS 1000u		   /* us */
#define M 1000u		   /* bytes of a full packet, in the window tests */
#define T0 (1000ull * 1000000000) /* a "now" in ns, far from zero like a real monotonic clock */

static void test_rtt_init(void **state)
{
	struct rtt_est r;

	(void)state;
	rtt_init(&r, 100 * MS, 1 * MS, 2000 * MS);
	assert_false(r.have_sample);
	assert_int_equal(r.rto_us, 100 * MS);
	/* the initial RTO obeys the clamps too */
	rtt_init(&r, 10, 1 * MS, 2000 * MS);
	assert_int_equal(r.rto_us, 1 * MS);
	rtt_init(&r, 5000 * MS, 1 * MS, 2000 * MS);
	assert_int_equal(r.rto_us, 2000 * MS);
}

static void test_rtt_first_sample(void **state)
{
	struct rtt_est r;

	(void)state;
	rtt_init(&r, 100 * MS, 100, 2000 * MS);
	rtt_sample(&r, 1000);
	assert_true(r.have_sample);
	assert_int_equal(r.srtt_us, 1000);
	assert_int_equal(r.rttvar_us, 500);
	assert_int_equal(r.min_rtt_us, 1000);
	assert_int_equal(r.rto_us, 1000 + 4 * 500);
}

static void test_rtt_second_sample(void **state)
{
	struct rtt_est r;

	(void)state;
	rtt_init(&r, 100 * MS, 100, 2000 * MS);
	rtt_sample(&r, 1000);
	rtt_sample(&r, 1800);
	/* rttvar = 3/4 * 500 + 1/4 * |1000 - 1800| (old srtt); srtt = 7/8 * 1000 + 1800/8 */
	assert_int_equal(r.rttvar_us, 575);
	assert_int_equal(r.srtt_us, 1100);
	assert_int_equal(r.rto_us, 1100 + 4 * 575);
	assert_int_equal(r.min_rtt_us, 1000);
	rtt_sample(&r, 400);
	assert_int_equal(r.min_rtt_us, 400);
}

static void test_rtt_convergence(void **state)
{
	struct rtt_est r;
	int i;

	(void)state;
	rtt_init(&r, 100 * MS, 100, 2000 * MS);
	rtt_sample(&r, 10000);
	for (i = 0; i < 200; i++) {
		rtt_sample(&r, 2000);
	}
	/* integer arithmetic may leave srtt a few us from the sample, never more */
	assert_in_range(r.srtt_us, 2000, 2008);
	assert_in_range(r.rttvar_us, 0, 4);
	assert_in_range(r.rto_us, 2000, 2030);
	assert_int_equal(r.min_rtt_us, 2000);

	for (i = 0; i < 200; i++) {
		rtt_sample(&r, 5000);
	}
	assert_in_range(r.srtt_us, 4992, 5000);
}

static void test_rtt_clamps(void **state)
{
	struct rtt_est r;

	(void)state;
	rtt_init(&r, 100 * MS, 5 * MS, 60 * MS);
	rtt_sample(&r, 100);
	assert_int_equal(r.rto_us, 5 * MS);
	rtt_init(&r, 100 * MS, 5 * MS, 60 * MS);
	rtt_sample(&r, 50 * MS);
	assert_int_equal(r.rto_us, 60 * MS);
	/* huge samples must not overflow the sum */
	rtt_init(&r, 100 * MS, 5 * MS, 60 * MS);
	rtt_sample(&r, UINT32_MAX);
	assert_int_equal(r.rto_us, 60 * MS);
	rtt_sample(&r, UINT32_MAX);
	assert_int_equal(r.rto_us, 60 * MS);
}

static void test_rtt_backoff(void **state)
{
	struct rtt_est r;

	(void)state;
	rtt_init(&r, 100 * MS, 1 * MS, 1000 * MS);
	rtt_sample(&r, 10 * MS);
	assert_int_equal(r.rto_us, 30 * MS);
	rtt_backoff(&r);
	assert_int_equal(r.rto_us, 60 * MS);
	rtt_backoff(&r);
	assert_int_equal(r.rto_us, 120 * MS);
	rtt_backoff(&r);
	rtt_backoff(&r);
	assert_int_equal(r.rto_us, 480 * MS);
	rtt_backoff(&r);
	assert_int_equal(r.rto_us, 960 * MS);
	rtt_backoff(&r);
	assert_int_equal(r.rto_us, 1000 * MS);
	rtt_backoff(&r);
	assert_int_equal(r.rto_us, 1000 * MS);
	/* a fresh sample brings the RTO back from the backed-off value */
	rtt_sample(&r, 10 * MS);
	assert_true(r.rto_us < 100 * MS);

	/* the cap holds even where doubling would overflow 32 bits */
	rtt_init(&r, UINT32_MAX, 1, UINT32_MAX);
	rtt_backoff(&r);
	assert_int_equal(r.rto_us, UINT32_MAX);
}

/* An estimator with a steady RTT, so the delay signal stays quiet. */
static void rtt_steady(struct rtt_est *r)
{
	rtt_init(r, 100 * MS, 1 * MS, 1000 * MS);
	rtt_sample(r, 100);
}

static void test_cc_init(void **state)
{
	struct cc c;

	(void)state;
	cc_init(&c, M, 10 * M, 2, 1024 * M);
	assert_int_equal(c.cwnd, 10 * M);
	assert_int_equal(c.cwnd_min, 2 * M);
	assert_int_equal(c.cwnd_max, 1024 * M);
	assert_false(c.in_recovery);
	cc_init(&c, M, 1 * M, 2, 1024 * M);
	assert_int_equal(c.cwnd, 2 * M);
	cc_init(&c, M, 5000 * M, 2, 1024 * M);
	assert_int_equal(c.cwnd, 1024 * M);
}

static void test_cc_slow_start(void **state)
{
	struct rtt_est r;
	struct cc c;
	uint32_t psn = 0;

	(void)state;
	rtt_steady(&r);
	cc_init(&c, M, 4 * M, 2, 1024 * M);
	/* one window acked one packet at a time doubles it */
	while (psn < 4) {
		psn++;
		cc_on_ack(&c, 1 * M, psn, &r, T0);
	}
	assert_int_equal(c.cwnd, 8 * M);
	/* a stretch ack counts every packet it covers */
	cc_on_ack(&c, 8 * M, psn + 8, &r, T0);
	assert_int_equal(c.cwnd, 16 * M);
	/* no ack, no growth */
	cc_on_ack(&c, 0, psn + 8, &r, T0);
	assert_int_equal(c.cwnd, 16 * M);
}

static void test_cc_slow_start_stops_at_ssthresh(void **state)
{
	struct rtt_est r;
	struct cc c;

	(void)state;
	rtt_steady(&r);
	cc_init(&c, M, 40 * M, 2, 1024 * M);
	cc_on_loss(&c, 10, 50); /* ssthresh = cwnd = 20 */
	assert_int_equal(c.ssthresh, 20 * M);
	cc_on_timeout(&c, 60); /* cwnd = 2, ssthresh = 10 */
	assert_int_equal(c.cwnd, 2 * M);
	assert_int_equal(c.ssthresh, 10 * M);
	/* 12 acked: 8 take slow start to ssthresh, the other 4 count towards avoidance */
	cc_on_ack(&c, 12 * M, 72, &r, T0);
	assert_int_equal(c.cwnd, 10 * M);
	assert_int_equal(c.acked_since_growth, 4 * M);
}

static void test_cc_avoidance(void **state)
{
	struct rtt_est r;
	struct cc c;
	uint32_t psn = 100, i;

	(void)state;
	rtt_steady(&r);
	cc_init(&c, M, 20 * M, 2, 1024 * M);
	cc_on_loss(&c, 50, 100);
	assert_int_equal(c.cwnd, 10 * M);
	/* the recovery point passes; from here on +1 per window */
	for (i = 0; i < 9; i++) {
		cc_on_ack(&c, 1 * M, ++psn, &r, T0);
	}
	assert_int_equal(c.cwnd, 10 * M);
	cc_on_ack(&c, 1 * M, ++psn, &r, T0);
	assert_int_equal(c.cwnd, 11 * M);
	for (i = 0; i < 11; i++) {
		cc_on_ack(&c, 1 * M, ++psn, &r, T0);
	}
	assert_int_equal(c.cwnd, 12 * M);
	/* a large stretch ack: 12 + 13 packets grow it twice */
	cc_on_ack(&c, 25 * M, psn + 25, &r, T0);
	assert_int_equal(c.cwnd, 14 * M);
}

static void test_cc_one_decrease_per_window(void **state)
{
	struct rtt_est r;
	struct cc c;

	(void)state;
	rtt_steady(&r);
	cc_init(&c, M, 64 * M, 2, 1024 * M);
	cc_on_loss(&c, 1000, 1064);
	assert_int_equal(c.cwnd, 32 * M);
	assert_true(c.in_recovery);
	assert_int_equal(c.recovery_psn, 1064);
	/* more losses from the same window: the same congestion event */
	cc_on_loss(&c, 1001, 1064);
	cc_on_loss(&c, 1030, 1070);
	cc_on_loss(&c, 1063, 1080);
	assert_int_equal(c.cwnd, 32 * M);
	/* acks short of the recovery point keep recovery on */
	cc_on_ack(&c, 10 * M, 1063, &r, T0);
	assert_true(c.in_recovery);
	/* a loss of a packet sent after the decrease is a new event, even in recovery */
	cc_on_loss(&c, 1064, 1100);
	assert_int_equal(c.cwnd, 16 * M);
	assert_int_equal(c.recovery_psn, 1100);
	/* once the ack reaches the recovery point, recovery is over */
	cc_on_ack(&c, 1 * M, 1100, &r, T0);
	assert_false(c.in_recovery);
	cc_on_loss(&c, 1050, 1120);
	assert_int_equal(c.cwnd, 8 * M);
}

static void test_cc_recovery_wraps(void **state)
{
	struct rtt_est r;
	struct cc c;

	(void)state;
	rtt_steady(&r);
	cc_init(&c, M, 64 * M, 2, 1024 * M);
	cc_on_loss(&c, UINT32_MAX - 10, 20); /* the window spans psn 2^32 */
	assert_int_equal(c.cwnd, 32 * M);
	cc_on_loss(&c, 5, 30);
	cc_on_loss(&c, UINT32_MAX, 30);
	assert_int_equal(c.cwnd, 32 * M);
	cc_on_ack(&c, 1 * M, UINT32_MAX - 2, &r, T0);
	assert_true(c.in_recovery);
	cc_on_ack(&c, 1 * M, 20, &r, T0);
	assert_false(c.in_recovery);
}

static void test_cc_timeout(void **state)
{
	struct rtt_est r;
	struct cc c;

	(void)state;
	rtt_steady(&r);
	cc_init(&c, M, 100 * M, 2, 1024 * M);
	cc_on_timeout(&c, 500);
	assert_int_equal(c.cwnd, 2 * M);
	assert_int_equal(c.ssthresh, 50 * M);
	assert_true(c.in_recovery);
	assert_int_equal(c.recovery_psn, 500);
	/* losses of what was outstanding at the timeout do not cut again */
	cc_on_loss(&c, 450, 510);
	assert_int_equal(c.cwnd, 2 * M);
	assert_int_equal(c.ssthresh, 50 * M);
	/* slow start resumes at once */
	cc_on_ack(&c, 2 * M, 450, &r, T0);
	assert_int_equal(c.cwnd, 4 * M);
	/* timeouts in a row: ssthresh never below cwnd_min */
	cc_on_timeout(&c, 510);
	cc_on_timeout(&c, 510);
	cc_on_timeout(&c, 510);
	assert_int_equal(c.cwnd, 2 * M);
	assert_int_equal(c.ssthresh, 2 * M);
}

static void test_cc_delay(void **state)
{
	struct rtt_est r;
	struct cc c;
	uint64_t now = T0;
	int i;

	(void)state;
	rtt_init(&r, 100 * MS, 1 * MS, 1000 * MS);
	cc_init(&c, M, 64 * M, 16, 1024 * M);
	rtt_sample(&r, 500);
	/* srtt within 4 * min + 2 ms: no delay signal */
	for (i = 0; i < 100; i++) {
		rtt_sample(&r, 3900);
	}
	assert_true(r.srtt_us <= 4 * 500 + 2000);
	cc_on_ack(&c, 0, 0, &r, now);
	assert_int_equal(c.cwnd, 64 * M);

	/* queues build: srtt far above the base */
	for (i = 0; i < 100; i++) {
		rtt_sample(&r, 10000);
	}
	assert_true(r.srtt_us > 4 * 500 + 2000);
	cc_on_ack(&c, 0, 0, &r, now);
	assert_int_equal(c.cwnd, 56 * M);
	assert_int_equal(c.delay_backoff_ns, now);
	/* at most once per srtt */
	cc_on_ack(&c, 0, 0, &r, now + 1000);
	cc_on_ack(&c, 0, 0, &r, now + (uint64_t)r.srtt_us * 1000 - 1);
	assert_int_equal(c.cwnd, 56 * M);
	now += (uint64_t)r.srtt_us * 1000;
	cc_on_ack(&c, 0, 0, &r, now);
	assert_int_equal(c.cwnd, 49 * M);
	/* and it leaves slow start, so growth is +1 per window from here */
	assert_int_equal(c.ssthresh, 49 * M);

	/* it never goes below cwnd_min: ..., 19, 17, then 15 is raised to 16 */
	for (i = 0; i < 100; i++) {
		now += (uint64_t)r.srtt_us * 1000;
		cc_on_ack(&c, 0, 0, &r, now);
	}
	assert_int_equal(c.cwnd, 16 * M);

	/* no sample, no signal; NULL estimator is allowed */
	cc_init(&c, M, 64 * M, 2, 1024 * M);
	rtt_init(&r, 100 * MS, 1 * MS, 1000 * MS);
	cc_on_ack(&c, 0, 0, &r, T0);
	cc_on_ack(&c, 0, 0, NULL, T0);
	assert_int_equal(c.cwnd, 64 * M);
}

static void test_cc_clamps(void **state)
{
	struct rtt_est r;
	struct cc c;
	int i;

	(void)state;
	rtt_steady(&r);
	cc_init(&c, M, 8 * M, 4, 64 * M);
	for (i = 0; i < 100; i++) {
		cc_on_ack(&c, 1000 * M, (uint32_t)i * 1000, &r, T0);
	}
	assert_int_equal(c.cwnd, 64 * M);
	cc_on_ack(&c, UINT32_MAX, 0, &r, T0);
	assert_int_equal(c.cwnd, 64 * M);
	/* from the top, every decrease stops at cwnd_min */
	for (i = 0; i < 10; i++) {
		cc_on_loss(&c, 0, 0);
		c.in_recovery = false;
	}
	assert_int_equal(c.cwnd, 4 * M);
	assert_int_equal(c.ssthresh, 4 * M);
	/* in avoidance at cwnd_max, the counter does not pile up */
	cc_init(&c, M, 64 * M, 4, 64 * M);
	cc_on_loss(&c, 0, 1);
	for (i = 0; i < 1000; i++) {
		cc_on_ack(&c, 1000 * M, 2, &r, T0);
	}
	assert_int_equal(c.cwnd, 64 * M);
	assert_true(c.acked_since_growth < 64 * M);
}

/* Bytes, not packets: the path MTU moves and the window keeps its bytes; small packets grow it by
 * their bytes; the floor and the growth step follow the packet size. */
static void test_cc_bytes_and_mss(void **state)
{
	struct rtt_est r;
	struct cc c;
	int i;

	(void)state;
	rtt_steady(&r);
	cc_init(&c, 1500, 32 * 1500, 4, 1024 * 9000);
	assert_int_equal(c.cwnd, 48000);
	assert_int_equal(c.cwnd_min, 6000);
	/* 100 acks of 100-byte packets: 10000 bytes more, not 100 packets more */
	for (i = 0; i < 100; i++) {
		cc_on_ack(&c, 100, (uint32_t)i, &r, T0);
	}
	assert_int_equal(c.cwnd, 58000);
	/* the path MTU rises to 9000: the same bytes in flight, a floor of 4 such packets */
	cc_set_mss(&c, 9000);
	assert_int_equal(c.cwnd, 58000);
	assert_int_equal(c.cwnd_min, 36000);
	cc_on_loss(&c, 10, 20); /* half is 29000, under the floor */
	assert_int_equal(c.cwnd, 36000);
	assert_int_equal(c.ssthresh, 36000);
	cc_on_ack(&c, 36000, 20, &r, T0); /* a window acked in avoidance: one 9000-byte step */
	assert_int_equal(c.cwnd, 45000);
	/* and falls to 1500 (a black hole): still the same bytes; a timeout goes to 4 x 1500 */
	cc_set_mss(&c, 1500);
	assert_int_equal(c.cwnd, 45000);
	assert_int_equal(c.cwnd_min, 6000);
	cc_on_ack(&c, 45000, 21, &r, T0);
	assert_int_equal(c.cwnd, 46500);
	cc_on_timeout(&c, 30);
	assert_int_equal(c.cwnd, 6000);
	/* a floor above the ceiling stops at the ceiling; a ceiling below one packet is one packet */
	cc_init(&c, 9000, 0, 4, 20000);
	assert_int_equal(c.cwnd_min, 20000);
	assert_int_equal(c.cwnd, 20000);
	cc_init(&c, 9000, 0, 4, 100);
	assert_int_equal(c.cwnd_max, 9000);
	assert_int_equal(c.cwnd, 9000);
	/* a floor raised past the window lifts the window and ssthresh with it */
	cc_init(&c, 1500, 8 * 1500, 4, 1024 * 9000);
	cc_on_loss(&c, 1, 2);
	cc_set_mss(&c, 9000);
	assert_int_equal(c.cwnd, 36000);
	assert_int_equal(c.ssthresh, 36000);
}

/* The pacer: 2 x cwnd a round trip in slow start, 5/4 x after; bursts of a quarter round trip. */
static void test_pace(void **state)
{
	struct rtt_est r;
	struct cc c;
	struct pacer pc;
	int i;

	(void)state;
	rtt_init(&r, 100 * MS, 1 * MS, 1000 * MS);
	cc_init(&c, M, 100 * M, 2, 1024 * M);
	pace_init(&pc, T0);
	/* no RTT yet: nothing held back, whatever was spent */
	for (i = 0; i < 1000; i++) {
		assert_true(pace_ready(&pc, &c, &r, T0));
		pace_spend(&pc, M);
	}
	assert_true(pace_ready(&pc, &c, NULL, T0));
	rtt_sample(&r, 100); /* 100 us: 200 packets a round trip, bursts of 50 */
	pace_init(&pc, T0);
	assert_false(pace_ready(&pc, &c, &r, T0)); /* no time, no credit */
	assert_true(pace_ready(&pc, &c, &r, T0 + 10000));
	assert_int_equal(pc.credit, 20 * M); /* 10 us: a tenth of 200 */
	pace_spend(&pc, 20 * M);
	assert_false(pace_ready(&pc, &c, &r, T0 + 10000));
	/* a long wait fills it only to the burst */
	assert_true(pace_ready(&pc, &c, &r, T0 + 10000 + 1000000));
	assert_int_equal(pc.credit, 50 * M);
	/* a packet may overdraw it; the debt is paid from later time */
	pace_spend(&pc, 49 * M);
	assert_true(pace_ready(&pc, &c, &r, T0 + 1010000));
	pace_spend(&pc, 10 * M);
	assert_false(pace_ready(&pc, &c, &r, T0 + 1010000));
	assert_false(pace_ready(&pc, &c, &r, T0 + 1014000)); /* 8 back of 9 owed */
	assert_true(pace_ready(&pc, &c, &r, T0 + 1015000));
	/* avoidance: 5/4 x cwnd a round trip; the burst never below 16 packets */
	cc_on_loss(&c, 1, 2); /* cwnd = ssthresh = 50 packets: 62.5 a round trip */
	pace_init(&pc, T0);
	assert_true(pace_ready(&pc, &c, &r, T0 + 20000));
	assert_int_equal(pc.credit, 12500);
	pace_init(&pc, T0);
	assert_true(pace_ready(&pc, &c, &r, T0 + 1000000));
	assert_int_equal(pc.credit, CC_PACE_BURST_SEGS * M);
	/* a clock read earlier than the last refill adds nothing */
	pace_spend(&pc, pc.credit);
	assert_false(pace_ready(&pc, &c, &r, T0));
	/* the largest window and RTT do not overflow the arithmetic */
	cc_init(&c, 16370, UINT32_MAX, 2, UINT32_MAX);
	rtt_init(&r, 100 * MS, 1, UINT32_MAX);
	rtt_sample(&r, UINT32_MAX);
	pace_init(&pc, T0);
	assert_true(pace_ready(&pc, &c, &r, T0 + (uint64_t)UINT32_MAX * 999));
	assert_true(pc.credit > 0 && pc.credit <= 2ll * UINT32_MAX / 4);
}

/*
 * A window of one packet over a round trip of a second, asked every 10 us (an engine spinning):
 * each refill is less than a byte. vm_copy_rss_q2's starved guests had such paths after their
 * timeouts, and a pacer that dropped the fraction with each look never refilled: every path
 * showed credit 0, room in its window and hundreds of packets waiting, and nothing went for the
 * whole peer timeout. The time since the last whole byte counts, so the next packet goes half
 * a second after the last (2 x 1500 bytes a round trip in slow start), neither sooner nor later.
 */
static void test_pace_slow_path(void **state)
{
	struct rtt_est r;
	struct cc c;
	struct pacer pc;
	uint64_t t;

	(void)state;
	rtt_init(&r, 100 * MS, 1 * MS, 1000 * MS);
	cc_init(&c, 1500, 1500, 1, 1024 * 1500); /* a window of one packet */
	rtt_sample(&r, 1000000); /* 1 s */
	pace_init(&pc, T0);
	pace_spend(&pc, 1500); /* the packet just sent */
	for (t = T0; t < T0 + 2000000000ull && !pace_ready(&pc, &c, &r, t); t += 10000) {
	}
	print_message("# a 1500-byte window over 1 s, asked every 10 us: ready after %.3f s\n",
		      (double)(t - T0) / 1e9);
	assert_true(t - T0 >= 490000000ull && t - T0 <= 510000000ull);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rtt_init),
		cmocka_unit_test(test_rtt_first_sample),
		cmocka_unit_test(test_rtt_second_sample),
		cmocka_unit_test(test_rtt_convergence),
		cmocka_unit_test(test_rtt_clamps),
		cmocka_unit_test(test_rtt_backoff),
		cmocka_unit_test(test_cc_init),
		cmocka_unit_test(test_cc_bytes_and_mss),
		cmocka_unit_test(test_pace),
		cmocka_unit_test(test_pace_slow_path),
		cmocka_unit_test(test_cc_slow_start),
		cmocka_unit_test(test_cc_slow_start_stops_at_ssthresh),
		cmocka_unit_test(test_cc_avoidance),
		cmocka_unit_test(test_cc_one_decrease_per_window),
		cmocka_unit_test(test_cc_recovery_wraps),
		cmocka_unit_test(test_cc_timeout),
		cmocka_unit_test(test_cc_delay),
		cmocka_unit_test(test_cc_clamps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
