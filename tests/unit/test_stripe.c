/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nccl-net/stripe.h: how a striped comm cuts a message. For every buffer capacity and stripe
 * count, the receives' pieces tile the buffer without a gap or an overlap; a message of any
 * length, one byte each side of every boundary included, goes out in pieces that each fit the
 * receive of its stripe, fill the stripes in order and add up to the message; and a message
 * larger than its buffer overflows the last stripe's receive, where harp refuses it.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "stripe.h"

#define KIB ((size_t)1024)
#define MIB (1024 * KIB)

static void test_count(void **state)
{
	(void)state;
	assert_int_equal(hp_stripe_count(0, 4), 1);
	assert_int_equal(hp_stripe_count(64 * KIB, 4), 1);	 /* LL's slots stay whole */
	assert_int_equal(hp_stripe_count(2 * HP_STRIPE_MIN - 1, 4), 1);
	assert_int_equal(hp_stripe_count(2 * HP_STRIPE_MIN, 4), 2);
	assert_int_equal(hp_stripe_count(3 * HP_STRIPE_MIN, 4), 3);
	assert_int_equal(hp_stripe_count(512 * KIB, 4), 4);	 /* NCCL's Simple slot */
	assert_int_equal(hp_stripe_count(512 * KIB, 8), 4);
	assert_int_equal(hp_stripe_count(1024 * MIB, 8), 8);
	assert_int_equal(hp_stripe_count(1024 * MIB, 1), 1);
	assert_int_equal(hp_stripe_count(1024 * MIB, 0), 1);
}

/* The receives of a buffer of capacity cap on a comm of k stripes: a tiling of [0, cap). */
static void check_tiling(size_t cap, int k)
{
	int n = hp_stripe_count(cap, k), s;
	size_t end = 0;

	assert_true(n >= 1 && n <= (k > 1 ? k : 1));
	for (s = 0; s < n; s++) {
		size_t off = hp_stripe_off(cap, n, s);
		size_t piece = s == n - 1 ? cap - off : hp_stripe_piece(cap, n);

		assert_int_equal(off, end);		   /* no gap, no overlap */
		assert_int_equal(off % HP_STRIPE_ALIGN, 0);
		assert_true(n == 1 || piece > 0);	   /* no stripe of a cut buffer is idle */
		assert_true(n == 1 || piece >= HP_STRIPE_MIN / 2);
		/* stripe 0 announces the whole buffer (the sender learns cap there) */
		assert_int_equal(hp_stripe_cap(cap, n, s), s == 0 ? cap : piece);
		end = off + piece;
	}
	assert_int_equal(end, cap);
}

/* A len-byte message into that buffer: pieces that fit, in order, adding up to len. */
static void check_send(size_t cap, int k, size_t len)
{
	int n = hp_stripe_count(cap, k), s;
	size_t sum = 0;
	bool ended = false;

	for (s = 0; s < n; s++) {
		size_t off = hp_stripe_off(cap, n, s), got = hp_stripe_len(cap, n, s, len);
		size_t room = s == n - 1 ? cap - off : hp_stripe_piece(cap, n);

		if (ended) {
			assert_int_equal(got, 0); /* past the message's end: empty sends */
			continue;
		}
		assert_int_equal(off, sum); /* each piece starts where the last ended */
		if (len <= cap) {
			assert_true(got <= room);
		}
		sum += got;
		ended = got < room;
	}
	assert_int_equal(sum, len);
}

static void check_buffer(size_t cap, int k)
{
	int n = hp_stripe_count(cap, k), s;
	size_t off;

	check_tiling(cap, k);
	check_send(cap, k, 0);
	check_send(cap, k, 1);
	check_send(cap, k, cap - (cap > 0));
	check_send(cap, k, cap);
	for (s = 1; s < n; s++) {
		off = hp_stripe_off(cap, n, s);
		check_send(cap, k, off - 1);
		check_send(cap, k, off);
		check_send(cap, k, off + 1);
	}
}

static void test_boundaries(void **state)
{
	static const size_t caps[] = {
		0, 1, 4095, 4096, 64 * KIB, 2 * HP_STRIPE_MIN - 1, 2 * HP_STRIPE_MIN,
		2 * HP_STRIPE_MIN + 1, 3 * HP_STRIPE_MIN - 4097, 512 * KIB, 512 * KIB + 4097,
		4 * MIB + 12345, 64 * MIB, 64 * MIB + 4096, 1024 * MIB,
	};
	size_t i;
	int k;

	(void)state;
	for (k = 1; k <= HP_STRIPES_MAX; k++) {
		for (i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
			check_buffer(caps[i], k);
		}
	}
}

/* Capacities drawn at random, 1 byte to 1 GiB, on every stripe count. */
static void test_random(void **state)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	int i, k;

	(void)state;
	for (i = 0; i < 20000; i++) {
		size_t cap, len;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		cap = (size_t)(x % (1024 * MIB)) + 1;
		if (i & 1) {
			cap %= 8 * MIB; /* NCCL's slots: most of them small */
		}
		k = 1 + (int)(x >> 40) % HP_STRIPES_MAX;
		len = cap ? (size_t)((x >> 20) % (cap + 1)) : 0;
		check_tiling(cap, k);
		check_send(cap, k, len);
	}
}

/* A message larger than its buffer overflows the last stripe's receive: harp fails it there. */
static void test_too_large(void **state)
{
	size_t cap = 512 * KIB;
	int n = hp_stripe_count(cap, 4);

	(void)state;
	assert_true(hp_stripe_len(cap, n, n - 1, cap + 1) > hp_stripe_cap(cap, n, n - 1));
	assert_int_equal(hp_stripe_len(cap, 1, 0, cap + 1), cap + 1); /* one stripe: as before */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_count),
		cmocka_unit_test(test_boundaries),
		cmocka_unit_test(test_random),
		cmocka_unit_test(test_too_large),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
