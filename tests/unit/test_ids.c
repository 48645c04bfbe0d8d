/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ids.c: connection ids are never 0, carry their slot and a generation, stop at the limit, are
 * refused rather than overrun when the count and the slots disagree, and a second give of one
 * id (or a stale one) frees nothing.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "ids.h"

static void test_take_give(void **state)
{
	struct conn_ids *ids = calloc(1, sizeof(*ids));
	uint32_t a, b, c;

	(void)state;
	assert_int_equal(ids_take(ids, 2, &a), 0);
	assert_int_equal(ids_take(ids, 2, &b), 0);
	assert_int_equal(a & (IDS_SLOTS - 1), 1); /* slot 0 stays unused: no id is 0 */
	assert_int_equal(b & (IDS_SLOTS - 1), 2);
	assert_int_equal(ids_take(ids, 2, &c), -EMFILE);
	assert_int_equal(ids->n, 2);
	/* a slot given back comes again with a new generation */
	assert_int_equal(ids_give(ids, a), 0);
	assert_int_equal(ids_take(ids, 2, &c), 0);
	assert_int_equal(c & (IDS_SLOTS - 1), 1);
	assert_true(c != a);
	free(ids);
}

static void test_double_give(void **state)
{
	struct conn_ids *ids = calloc(1, sizeof(*ids));
	uint32_t a, b;

	(void)state;
	assert_int_equal(ids_take(ids, 10, &a), 0);
	assert_int_equal(ids_give(ids, a), 0);
	/* given twice: refused, the count stays right */
	assert_int_equal(ids_give(ids, a), -EINVAL);
	assert_int_equal(ids->n, 0);
	/* a stale id whose slot another connection holds now: refused, that slot stays held */
	assert_int_equal(ids_take(ids, 10, &b), 0);
	assert_int_equal(ids_give(ids, a), -EINVAL);
	assert_true(ids->used[b & (IDS_SLOTS - 1)]);
	assert_int_equal(ids->n, 1);
	assert_int_equal(ids_give(ids, 0), -EINVAL);
	free(ids);
}

/* Every slot taken while the count says fewer: the next take is refused, never past the table. */
static void test_disagreement(void **state)
{
	struct conn_ids *ids = calloc(1, sizeof(*ids));
	uint32_t id, i;

	(void)state;
	for (i = 1; i < IDS_SLOTS; i++) {
		assert_int_equal(ids_take(ids, IDS_SLOTS, &id), 0);
	}
	assert_int_equal(ids->n, IDS_SLOTS - 1);
	ids->n -= 5; /* what a double free would have done before ids_give refused it */
	assert_int_equal(ids_take(ids, IDS_SLOTS, &id), -EOVERFLOW);
	assert_int_equal(ids->n, IDS_SLOTS - 1 - 5);
	free(ids);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_take_give),
		cmocka_unit_test(test_double_give),
		cmocka_unit_test(test_disagreement),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
