/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The frame pool (umem.c, internal.h): init's argument checks and layout, counts, LIFO order,
 * addresses normalised to their frame's start on return, and no overflow past the pool's total.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"

#define FRAMES 16u
#define FRAME_SIZE 4096u

static void test_init_args(void **state)
{
	struct frame_pool fp;

	(void)state;
	assert_int_equal(frame_pool_init(&fp, 0, FRAME_SIZE), -EINVAL);
	assert_int_equal(frame_pool_init(&fp, FRAMES, 0), -EINVAL);
	assert_int_equal(frame_pool_init(&fp, FRAMES, 3000), -EINVAL);
	assert_int_equal(frame_pool_init(&fp, FRAMES, 2048), 0);
	assert_int_equal(fp.frame_size, 2048);
	frame_pool_fini(&fp);
	frame_pool_fini(NULL);
}

/* Every frame comes out exactly once, each at a distinct frame start inside the area. */
static void test_init_layout(void **state)
{
	uint64_t addrs[FRAMES];
	bool seen[FRAMES] = { false };
	struct frame_pool fp;
	uint32_t i;

	(void)state;
	assert_int_equal(frame_pool_init(&fp, FRAMES, FRAME_SIZE), 0);
	assert_int_equal(fp.free, FRAMES);
	assert_int_equal(fp.total, FRAMES);
	assert_int_equal(frame_pool_get(&fp, addrs, FRAMES), FRAMES);
	assert_int_equal(fp.free, 0);
	for (i = 0; i < FRAMES; i++) {
		assert_int_equal(addrs[i] % FRAME_SIZE, 0);
		assert_true(addrs[i] / FRAME_SIZE < FRAMES);
		assert_false(seen[addrs[i] / FRAME_SIZE]);
		seen[addrs[i] / FRAME_SIZE] = true;
	}
	frame_pool_fini(&fp);
}

static void test_counts(void **state)
{
	uint64_t addrs[FRAMES + 4];
	struct frame_pool fp;

	(void)state;
	assert_int_equal(frame_pool_init(&fp, FRAMES, FRAME_SIZE), 0);
	assert_int_equal(frame_pool_get(&fp, addrs, 5), 5);
	assert_int_equal(fp.free, FRAMES - 5);
	/* asking for more than is left takes what is left */
	assert_int_equal(frame_pool_get(&fp, addrs + 5, FRAMES), FRAMES - 5);
	assert_int_equal(fp.free, 0);
	/* empty is not an error */
	assert_int_equal(frame_pool_get(&fp, addrs, 1), 0);
	assert_int_equal(frame_pool_get(&fp, addrs, 0), 0);
	frame_pool_put(&fp, addrs, 3);
	assert_int_equal(fp.free, 3);
	frame_pool_put(&fp, addrs + 3, FRAMES - 3);
	assert_int_equal(fp.free, FRAMES);
	frame_pool_fini(&fp);
}

static void test_lifo(void **state)
{
	uint64_t a[3], b[3];
	struct frame_pool fp;

	(void)state;
	assert_int_equal(frame_pool_init(&fp, FRAMES, FRAME_SIZE), 0);
	assert_int_equal(frame_pool_get(&fp, a, 3), 3);
	frame_pool_put(&fp, a, 3);
	/* the last frame returned is the first handed out again */
	assert_int_equal(frame_pool_get(&fp, b, 3), 3);
	assert_true(b[0] == a[2] && b[1] == a[1] && b[2] == a[0]);
	frame_pool_put(&fp, &b[1], 1);
	assert_int_equal(frame_pool_get(&fp, a, 1), 1);
	assert_true(a[0] == b[1]);
	frame_pool_fini(&fp);
}

/* The kernel hands back addresses with an offset into the frame (headroom): put strips it. */
static void test_normalise(void **state)
{
	uint64_t taken[2], back[2], again[2];
	struct frame_pool fp;

	(void)state;
	assert_int_equal(frame_pool_init(&fp, FRAMES, FRAME_SIZE), 0);
	assert_int_equal(frame_pool_get(&fp, taken, 2), 2);
	back[0] = taken[0] + 256;
	back[1] = taken[1] + FRAME_SIZE - 1;
	frame_pool_put(&fp, back, 2);
	assert_int_equal(frame_pool_get(&fp, again, 2), 2);
	assert_true(again[0] == taken[1] && again[1] == taken[0]);
	frame_pool_fini(&fp);
}

/* Returning more frames than the pool holds (a double free upstream) cannot overrun it. */
static void test_no_overflow(void **state)
{
	uint64_t extra[FRAMES * 2];
	struct frame_pool fp;
	uint32_t i;

	(void)state;
	assert_int_equal(frame_pool_init(&fp, FRAMES, FRAME_SIZE), 0);
	for (i = 0; i < FRAMES * 2; i++) {
		extra[i] = (uint64_t)i * FRAME_SIZE;
	}
	frame_pool_put(&fp, extra, FRAMES * 2);
	assert_int_equal(fp.free, FRAMES);
	assert_int_equal(frame_pool_get(&fp, extra, FRAMES * 2), FRAMES);
	assert_int_equal(fp.free, 0);
	frame_pool_put(&fp, extra, FRAMES);
	frame_pool_put(&fp, extra, 1);
	assert_int_equal(fp.free, FRAMES);
	frame_pool_fini(&fp);
}

/*
 * A range: the frames from base on at first, room for more (a multi-buffer port's pool, which
 * takes the slots' frames when the bind refuses multi-buffer), and base must be frame-aligned.
 */
static void test_range(void **state)
{
	uint64_t out[FRAMES], addr;
	struct frame_pool fp;
	uint32_t i;

	(void)state;
	assert_int_equal(frame_pool_init_range(&fp, FRAMES, 100, 4, FRAME_SIZE), -EINVAL);
	assert_int_equal(frame_pool_init_range(&fp, 2, 0, 4, FRAME_SIZE), -EINVAL);
	assert_int_equal(frame_pool_init_range(&fp, FRAMES, 8 * FRAME_SIZE, 4, FRAME_SIZE), 0);
	assert_int_equal(fp.free, 4);
	assert_int_equal(fp.total, FRAMES);
	assert_int_equal(frame_pool_get(&fp, out, FRAMES), 4);
	for (i = 0; i < 4; i++) {
		assert_int_equal(out[i], (8 + i) * FRAME_SIZE); /* lowest first */
	}
	frame_pool_put(&fp, out, 4);
	for (i = 0; i < FRAMES; i++) { /* others join, up to the room there is */
		addr = (uint64_t)i * FRAME_SIZE;
		frame_pool_put(&fp, &addr, 1);
	}
	assert_int_equal(fp.free, FRAMES);
	frame_pool_fini(&fp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_args),
		cmocka_unit_test(test_init_layout),
		cmocka_unit_test(test_counts),
		cmocka_unit_test(test_lifo),
		cmocka_unit_test(test_normalise),
		cmocka_unit_test(test_no_overflow),
		cmocka_unit_test(test_range),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
