/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spsc: creation rules, FIFO order, peek, full and empty, indexes wrapping past 2^32, and a
 * producer and a consumer thread moving a million sequential values that must arrive complete
 * and in order.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "spsc.h"

#define ITEM(v) ((void *)(uintptr_t)(v))

static void test_create(void **state)
{
	static const uint32_t bad[] = { 0, 3, 6, 100, 0x80000001u, 0xffffffffu };
	struct spsc *r;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		assert_null(spsc_create(bad[i]));
		assert_int_equal(errno, EINVAL);
	}
	r = spsc_create(1);
	assert_non_null(r);
	assert_int_equal(r->mask, 0);
	spsc_destroy(r);

	r = spsc_create(256);
	assert_non_null(r);
	assert_int_equal((uintptr_t)r % 64, 0);
	assert_int_equal(r->mask, 255);
	assert_int_equal(atomic_load(&r->head), 0);
	assert_int_equal(atomic_load(&r->tail), 0);
	assert_int_equal(spsc_count(r), 0);
	spsc_destroy(r);
	spsc_destroy(NULL);
}

static void test_order_full_empty(void **state)
{
	struct spsc *r = spsc_create(8);
	uintptr_t i;

	(void)state;
	assert_non_null(r);
	assert_null(spsc_pop(r));
	assert_null(spsc_peek(r));
	for (i = 1; i <= 8; i++) {
		assert_true(spsc_push(r, ITEM(i)));
		assert_int_equal(spsc_count(r), i);
	}
	assert_false(spsc_push(r, ITEM(99)));
	assert_int_equal(spsc_count(r), 8);
	for (i = 1; i <= 8; i++) {
		/* peek shows the next item and leaves it in place */
		assert_ptr_equal(spsc_peek(r), ITEM(i));
		assert_int_equal(spsc_count(r), 9 - i);
		assert_ptr_equal(spsc_pop(r), ITEM(i));
	}
	assert_null(spsc_peek(r));
	assert_null(spsc_pop(r));
	assert_int_equal(spsc_count(r), 0);

	/* interleaved: the ring keeps FIFO order across its own end */
	for (i = 1; i <= 100; i++) {
		assert_true(spsc_push(r, ITEM(i)));
		assert_true(spsc_push(r, ITEM(i + 1000)));
		assert_ptr_equal(spsc_pop(r), ITEM(i));
		assert_ptr_equal(spsc_pop(r), ITEM(i + 1000));
	}
	assert_null(spsc_pop(r));
	spsc_destroy(r);
}

/* Indexes are free-running 32-bit counters: start just below 2^32 and cross it. */
static void test_wraparound(void **state)
{
	struct spsc *r = spsc_create(4);
	uint32_t start = UINT32_MAX - 5;
	uintptr_t next_push = 1, next_pop = 1;
	int round;

	(void)state;
	assert_non_null(r);
	atomic_store(&r->head, start);
	atomic_store(&r->tail, start);
	for (round = 0; round < 8; round++) {
		while (spsc_push(r, ITEM(next_push))) {
			next_push++;
		}
		/* full means exactly size items, even while head has wrapped and tail has not */
		assert_int_equal(spsc_count(r), 4);
		assert_ptr_equal(spsc_pop(r), ITEM(next_pop));
		next_pop++;
		assert_ptr_equal(spsc_pop(r), ITEM(next_pop));
		next_pop++;
		assert_int_equal(spsc_count(r), 2);
	}
	while (next_pop < next_push) {
		assert_ptr_equal(spsc_pop(r), ITEM(next_pop));
		next_pop++;
	}
	assert_null(spsc_pop(r));
	assert_true(atomic_load(&r->head) < start); /* it did wrap */
	assert_int_equal(atomic_load(&r->head), atomic_load(&r->tail));
	spsc_destroy(r);
}

#define THREAD_ITEMS 1000000u

static void *producer(void *arg)
{
	struct spsc *r = arg;
	uintptr_t v;

	for (v = 1; v <= THREAD_ITEMS; v++) {
		while (!spsc_push(r, ITEM(v))) {
			sched_yield();
		}
	}
	return NULL;
}

static void test_two_threads(void **state)
{
	struct spsc *r = spsc_create(64);
	uintptr_t expect = 1;
	pthread_t thread;
	void *item;

	(void)state;
	assert_non_null(r);
	/* start near the wrap so the threads cross it too */
	atomic_store(&r->head, UINT32_MAX - 1000);
	atomic_store(&r->tail, UINT32_MAX - 1000);
	assert_int_equal(pthread_create(&thread, NULL, producer, r), 0);
	while (expect <= THREAD_ITEMS) {
		item = spsc_pop(r);
		if (!item) {
			sched_yield();
			continue;
		}
		if (item != ITEM(expect)) {
			fail_msg("got %lu, expected %lu", (unsigned long)(uintptr_t)item,
				 (unsigned long)expect);
		}
		expect++;
	}
	assert_int_equal(pthread_join(thread, NULL), 0);
	assert_null(spsc_pop(r));
	spsc_destroy(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create),
		cmocka_unit_test(test_order_full_empty),
		cmocka_unit_test(test_wraparound),
		cmocka_unit_test(test_two_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
