/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pairs: the first engine to claim a port pair with a peer owns it, for good; other engines are
 * refused it and see it as not free; the ports the other way round are the same pair (tun's
 * symmetric flow hash sorts them), the same ports with another peer another; a full run of
 * slots owns nothing more and refuses no one; four threads racing to claim the same 20,000
 * pairs end with exactly one owner for each; and a lease (the last sender on a flow) holds the
 * other engines off it for PAIRS_LEASE_MS, the mirrored ports too, and not its own engine.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "pairs.h"

#define IP_A 0xc6120001u /* 198.18.0.1 */
#define IP_B 0xc6120002u

static struct pairs *pairs_new(void)
{
	struct pairs *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	return t;
}

static void test_first_claim_owns(void **state)
{
	struct pairs *t = pairs_new();

	(void)state;
	assert_true(pairs_free_for(t, IP_A, 100, 200, 0));
	assert_true(pairs_free_for(t, IP_A, 100, 200, 3));
	assert_true(pairs_claim(t, IP_A, 100, 200, 3, NULL));
	assert_true(pairs_claim(t, IP_A, 100, 200, 3, NULL)); /* again: still its own */
	assert_true(pairs_free_for(t, IP_A, 100, 200, 3));
	assert_false(pairs_free_for(t, IP_A, 100, 200, 0));
	assert_false(pairs_claim(t, IP_A, 100, 200, 0, NULL));
	assert_false(pairs_claim(t, IP_A, 100, 200, 63, NULL));
	/* the same flow: our port 200 to their 100 */
	assert_false(pairs_free_for(t, IP_A, 200, 100, 0));
	assert_false(pairs_claim(t, IP_A, 200, 100, 0, NULL));
	assert_true(pairs_claim(t, IP_A, 200, 100, 3, NULL));
	/* other pairs: another peer, one port changed */
	assert_true(pairs_claim(t, IP_B, 100, 200, 0, NULL));
	assert_true(pairs_claim(t, IP_A, 100, 201, 0, NULL));
	assert_true(pairs_claim(t, IP_A, 201, 100, 0, NULL));
	assert_false(pairs_free_for(t, IP_B, 100, 200, 3));
	assert_false(pairs_free_for(t, IP_B, 200, 100, 3));
	assert_int_equal(atomic_load(&t->full), 0);
	free(t);
}

/*
 * A claim says whether it made the pair its engine's; a pair released by its owner (nothing was
 * put on it) is free for any engine, and pairs in the same run of slots are still found.
 */
static void test_release(void **state)
{
	struct pairs *t = pairs_new();
	bool fresh = false;
	int i;

	(void)state;
	assert_true(pairs_claim(t, IP_A, 100, 200, 3, &fresh));
	assert_true(fresh);
	fresh = false;
	assert_true(pairs_claim(t, IP_A, 100, 200, 3, &fresh)); /* its own already */
	assert_false(fresh);
	for (i = 0; i < 8; i++) { /* others, some in the same run */
		assert_true(pairs_claim(t, IP_A, (uint16_t)(300 + i), 200, 3, NULL));
	}
	pairs_release(t, IP_A, 100, 200, 0); /* not engine 0's: nothing changes */
	assert_false(pairs_free_for(t, IP_A, 100, 200, 0));
	pairs_release(t, IP_A, 100, 200, 3);
	assert_true(pairs_free_for(t, IP_A, 100, 200, 0));
	assert_true(pairs_free_for(t, IP_A, 200, 100, 5));
	for (i = 0; i < 8; i++) {
		assert_false(pairs_free_for(t, IP_A, (uint16_t)(300 + i), 200, 0));
	}
	assert_true(pairs_claim(t, IP_A, 200, 100, 5, &fresh));
	assert_true(fresh);
	assert_false(pairs_claim(t, IP_A, 100, 200, 3, NULL));
	free(t);
}

/* Every pair of a 64-port range (ports sorted: 2,080 pairs) with 32 peers: 66,560 claims into
 * 65,536 slots. Runs of slots fill up: such claims own nothing and are refused to no one, and
 * each counts. */
static void test_full_refuses_no_one(void **state)
{
	struct pairs *t = pairs_new();
	uint32_t ip, lp, pp, owned = 0, unowned = 0;

	(void)state;
	for (ip = 0; ip < 32; ip++) {
		for (lp = 0; lp < 64; lp++) {
			for (pp = lp; pp < 64; pp++) {
				assert_true(pairs_claim(t, IP_A + ip, (uint16_t)(47000 + lp),
							(uint16_t)(47000 + pp), (int)(lp % 4),
							NULL));
			}
		}
	}
	for (ip = 0; ip < 32; ip++) {
		for (lp = 0; lp < 64; lp++) {
			for (pp = lp; pp < 64; pp++) {
				int other = (int)(lp + 1) % 4;
				bool free_other = pairs_free_for(t, IP_A + ip, (uint16_t)(47000 + lp),
								 (uint16_t)(47000 + pp), other);

				/* an owned pair is its claimer's; an unowned one anyone's */
				assert_true(pairs_free_for(t, IP_A + ip, (uint16_t)(47000 + lp),
							   (uint16_t)(47000 + pp), (int)(lp % 4)));
				if (free_other) {
					unowned++;
				} else {
					owned++;
				}
			}
		}
	}
	assert_int_equal(owned + unowned, 32 * 2080);
	assert_int_equal(unowned, atomic_load(&t->full));
	assert_true(unowned > 0);	      /* more pairs than slots: some found no room */
	assert_true(owned > PAIRS_SLOTS / 2); /* the table still held most of them */
	free(t);
}

#define RACERS	   4
#define RACE_PAIRS 20000

struct racer {
	struct pairs *t;
	int engine;
	uint32_t won[RACE_PAIRS / 32 + 1];
};

static void *race(void *arg)
{
	struct racer *r = arg;
	uint32_t i;

	for (i = 0; i < RACE_PAIRS; i++) {
		if (pairs_claim(r->t, IP_A + i % 7, (uint16_t)(i / 7), (uint16_t)(i % 300),
				r->engine, NULL)) {
			r->won[i / 32] |= 1u << (i % 32);
		}
	}
	return NULL;
}

static void test_racing_claims_one_owner(void **state)
{
	struct racer *r = calloc(RACERS, sizeof(*r));
	pthread_t th[RACERS];
	uint32_t i;
	int k;

	(void)state;
	assert_non_null(r);
	r[0].t = pairs_new();
	for (k = 0; k < RACERS; k++) {
		r[k].t = r[0].t;
		r[k].engine = k;
		assert_int_equal(pthread_create(&th[k], NULL, race, &r[k]), 0);
	}
	for (k = 0; k < RACERS; k++) {
		pthread_join(th[k], NULL);
	}
	assert_int_equal(atomic_load(&r[0].t->full), 0);
	for (i = 0; i < RACE_PAIRS; i++) {
		int winners = 0, owner = -1;

		for (k = 0; k < RACERS; k++) {
			if (r[k].won[i / 32] & (1u << (i % 32))) {
				winners++;
				owner = k;
			}
		}
		assert_int_equal(winners, 1);
		for (k = 0; k < RACERS; k++) {
			assert_int_equal(pairs_free_for(r[0].t, IP_A + i % 7, (uint16_t)(i / 7),
							(uint16_t)(i % 300), k),
					 k == owner);
		}
	}
	free(r[0].t);
	free(r);
}

static void test_lease(void **state)
{
	struct pairs *t = pairs_new();
	const uint64_t t0 = 1000000;

	(void)state;
	assert_false(pairs_leased_by_other(t, IP_A, 100, 200, 0, t0));
	pairs_lease(t, IP_A, 100, 200, 2, t0);
	assert_false(pairs_leased_by_other(t, IP_A, 100, 200, 2, t0 + 10)); /* its own */
	assert_true(pairs_leased_by_other(t, IP_A, 100, 200, 0, t0 + 10));
	assert_true(pairs_leased_by_other(t, IP_A, 200, 100, 0, t0 + 10)); /* the mirror */
	assert_true(pairs_leased_by_other(t, IP_A, 100, 200, 0, t0 + PAIRS_LEASE_MS - 1));
	assert_false(pairs_leased_by_other(t, IP_A, 100, 200, 0, t0 + PAIRS_LEASE_MS));
	/* renewed by another engine: now it holds the others off */
	pairs_lease(t, IP_A, 200, 100, 1, t0 + 5000);
	assert_true(pairs_leased_by_other(t, IP_A, 100, 200, 2, t0 + 5001));
	assert_false(pairs_leased_by_other(t, IP_A, 100, 200, 1, t0 + 5001));
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_first_claim_owns),
	    cmocka_unit_test(test_release),
	    cmocka_unit_test(test_full_refuses_no_one),
	    cmocka_unit_test(test_racing_claims_one_owner),
	    cmocka_unit_test(test_lease),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
