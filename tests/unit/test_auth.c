// SPDX-License-Identifier: Apache-2.0
/*
 * HARP_AUTH's cryptography (src/auth.c) with the real libsodium: both ends of a key exchange
 * agree, a sealed frame checks at the other end and nowhere else, and any change to the records
 * or the trailer, or a tag from the wrong direction, fails the check. Both algorithms.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "auth.h"

struct pair {
	struct harp_auth *conn, *lis; /* the connector's and the listener's */
};

static void make_pair(struct pair *p, bool aes)
{
	struct auth_keypair c, l;
	uint8_t c_pk[AUTH_PUBKEY_BYTES], l_pk[AUTH_PUBKEY_BYTES];
	int err = 0;

	auth_keypair(&c);
	auth_keypair(&l);
	memcpy(c_pk, c.pk, sizeof(c_pk));
	memcpy(l_pk, l.pk, sizeof(l_pk));
	assert_memory_not_equal(c_pk, l_pk, sizeof(c_pk));
	p->conn = auth_new(&c, l_pk, true, aes, &err);
	assert_non_null(p->conn);
	p->lis = auth_new(&l, c_pk, false, aes, &err);
	assert_non_null(p->lis);
	/* the secrets are wiped once used */
	assert_true(c.sk[0] == 0 && !memcmp(c.sk, c.sk + 1, sizeof(c.sk) - 1));
}

static void fill(uint8_t *b, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++) {
		b[i] = (uint8_t)(seed + i * 13);
	}
}

static void run_algorithm(bool aes)
{
	uint8_t frame[1500 + HARP_AUTH_TRAILER], copy[sizeof(frame)];
	const uint32_t len = 1500;
	struct pair p;
	uint32_t i;

	make_pair(&p, aes);
	fill(frame, len, 1);
	auth_seal(p.conn, frame, len);
	assert_true(auth_check(p.lis, frame, len, frame + len));
	/* its own direction's key is not the peer's: a reflected frame fails */
	assert_false(auth_check(p.conn, frame, len, frame + len));
	/* the counter moves: the next frame's trailer differs even for the same records */
	memcpy(copy, frame, sizeof(frame));
	auth_seal(p.conn, frame, len);
	assert_memory_not_equal(copy + len, frame + len, 8);
	assert_true(auth_check(p.lis, frame, len, frame + len));
	assert_true(auth_check(p.lis, copy, len, copy + len)); /* an old frame still checks */
	/* any one bit of records, counter or tag changed: refused */
	for (i = 0; i < len + HARP_AUTH_TRAILER; i += 7) {
		memcpy(copy, frame, sizeof(frame));
		copy[i] ^= (uint8_t)(1u << (i % 8));
		assert_false(auth_check(p.lis, copy, len, copy + len));
	}
	/* a shorter or longer span than was sealed */
	assert_false(auth_check(p.lis, frame, len - 1, frame + len));
	/* the other direction */
	fill(frame, 64, 9);
	auth_seal(p.lis, frame, 64);
	assert_true(auth_check(p.conn, frame, 64, frame + 64));
	assert_false(auth_check(p.lis, frame, 64, frame + 64));
	/* another connection's keys */
	{
		struct pair q;

		make_pair(&q, aes);
		assert_false(auth_check(q.conn, frame, 64, frame + 64));
		auth_free(q.conn);
		auth_free(q.lis);
	}
	auth_free(p.conn);
	auth_free(p.lis);
}

static void test_chacha(void **state)
{
	(void)state;
	run_algorithm(false);
}

static void test_aes(void **state)
{
	(void)state;
	if (!auth_has_aes()) {
		/* Debian's libsodium runs AES-GCM only with AES-NI and PCLMUL: ChaCha is what runs */
		print_message("no AES-NI here: AES-256-GCM is not used on this machine\n");
		return;
	}
	run_algorithm(true);
}

/* A public key that is not a curve point with a usable secret (all zeros) is refused. */
static void test_bad_peer_key(void **state)
{
	struct auth_keypair kp;
	uint8_t zero[AUTH_PUBKEY_BYTES] = { 0 };
	int err = 0;

	(void)state;
	auth_keypair(&kp);
	assert_null(auth_new(&kp, zero, true, false, &err));
	assert_int_equal(err, -EPROTO);
}

static int load(void **state)
{
	char why[200];

	(void)state;
	if (auth_load(why, sizeof(why))) {
		fail_msg("%s", why);
	}
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chacha),
		cmocka_unit_test(test_aes),
		cmocka_unit_test(test_bad_peer_key),
	};

	return cmocka_run_group_tests(tests, load, NULL);
}
