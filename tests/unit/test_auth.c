// SPDX-License-Identifier: Apache-2.0
/*
 * HARP_AUTH's cryptography (src/auth.c) with the real libsodium: both ends of a key exchange
 * agree, a sealed frame checks at the other end and nowhere else, and any change to the records
 * or the trailer, a tag from the wrong direction, other ports or other addresses fail the check.
 * Each counter is taken once, in any order within the replay window. Both algorithms.
 */
#include <arpa/inet.h>
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

/* 198.18.0.1 and 198.18.0.2, network order; two ports */
#define IP_C wire_ip4(htonl(0xc6120001))
#define IP_L wire_ip4(htonl(0xc6120002))
#define P1 htons(47001)
#define P2 htons(47002)

/* Keys for a connection between addresses c_ip (the connector's view of itself) and l_ip. */
static void make_pair_at(struct pair *p, bool aes, union wire_ip c_ip, union wire_ip l_ip,
			 union wire_ip c_peer, union wire_ip l_self)
{
	struct auth_keypair c, l;
	uint8_t c_pk[AUTH_PUBKEY_BYTES], l_pk[AUTH_PUBKEY_BYTES];
	int err = 0;

	auth_keypair(&c);
	auth_keypair(&l);
	memcpy(c_pk, c.pk, sizeof(c_pk));
	memcpy(l_pk, l.pk, sizeof(l_pk));
	assert_memory_not_equal(c_pk, l_pk, sizeof(c_pk));
	p->conn = auth_new(&c, l_pk, true, aes, &c_ip, &c_peer, &err);
	assert_non_null(p->conn);
	p->lis = auth_new(&l, c_pk, false, aes, &l_self, &l_ip, &err);
	assert_non_null(p->lis);
	/* the secrets are wiped once used */
	assert_true(c.sk[0] == 0 && !memcmp(c.sk, c.sk + 1, sizeof(c.sk) - 1));
}

static void make_pair(struct pair *p, bool aes)
{
	make_pair_at(p, aes, IP_C, IP_C, IP_L, IP_L);
}

/* Seals len bytes from the connector on ports P1 to P2; whether the listener takes it. */
static enum auth_verdict open_at(struct pair *p, uint8_t *frame, uint32_t len)
{
	return auth_open(p->lis, P1, P2, frame, len, frame + len);
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
	auth_seal(p.conn, P1, P2, frame, len);
	memcpy(copy, frame, sizeof(frame));
	/* its own direction's key is not the peer's: a reflected frame fails */
	assert_int_equal(auth_open(p.conn, P1, P2, frame, len, frame + len), AUTH_FORGED);
	/* the same frame moved to another path (other ports, or the ports swapped) fails */
	assert_int_equal(auth_open(p.lis, P2, P1, frame, len, frame + len), AUTH_FORGED);
	assert_int_equal(auth_open(p.lis, P1, htons(47003), frame, len, frame + len),
			 AUTH_FORGED);
	/* any one bit of records, counter or tag changed: refused, and the window unmoved */
	for (i = 0; i < len + HARP_AUTH_TRAILER; i += 7) {
		memcpy(copy, frame, sizeof(frame));
		copy[i] ^= (uint8_t)(1u << (i % 8));
		assert_int_equal(open_at(&p, copy, len), AUTH_FORGED);
	}
	/* a shorter or longer span than was sealed */
	assert_int_equal(auth_open(p.lis, P1, P2, frame, len - 1, frame + len - 1), AUTH_FORGED);
	/* the frame as sealed: taken once, then a replay */
	assert_int_equal(open_at(&p, frame, len), AUTH_OK);
	assert_int_equal(open_at(&p, frame, len), AUTH_REPLAYED);
	/* the counter moves: the next frame's trailer differs even for the same records */
	memcpy(copy, frame, sizeof(frame));
	auth_seal(p.conn, P1, P2, frame, len);
	assert_memory_not_equal(copy + len, frame + len, 8);
	assert_int_equal(open_at(&p, frame, len), AUTH_OK);
	assert_int_equal(open_at(&p, copy, len), AUTH_REPLAYED); /* an old frame, again */
	/* the other direction, on the ports as the listener sends them */
	fill(frame, 64, 9);
	auth_seal(p.lis, P2, P1, frame, 64);
	assert_int_equal(auth_open(p.conn, P2, P1, frame, 64, frame + 64), AUTH_OK);
	assert_int_equal(auth_open(p.lis, P2, P1, frame, 64, frame + 64), AUTH_FORGED);
	/* another connection's keys */
	{
		struct pair q;

		make_pair(&q, aes);
		fill(frame, 64, 9);
		auth_seal(p.conn, P1, P2, frame, 64);
		assert_int_equal(auth_open(q.lis, P1, P2, frame, 64, frame + 64), AUTH_FORGED);
		auth_free(q.conn);
		auth_free(q.lis);
	}
	auth_free(p.conn);
	auth_free(p.lis);
}

/*
 * A frame the connector at c_ip sealed for l_ip, opened by a listener that believes the two
 * addresses are c_seen and l_ip: the listener's verdict.
 */
static enum auth_verdict open_between(bool aes, union wire_ip c_ip, union wire_ip c_seen,
				      union wire_ip l_ip)
{
	uint8_t frame[64 + HARP_AUTH_TRAILER];
	enum auth_verdict v;
	struct pair p;

	make_pair_at(&p, aes, c_ip, c_seen, l_ip, l_ip);
	fill(frame, 64, 3);
	auth_seal(p.conn, P1, P2, frame, 64);
	v = open_at(&p, frame, 64);
	auth_free(p.conn);
	auth_free(p.lis);
	return v;
}

/*
 * The keys are bound to the addresses: a listener that sees other addresses than the connector
 * sealed for (the frame taken to another peer, or the two ends disagreeing) takes nothing.
 */
static void test_addresses(void **state)
{
	(void)state;
	/* the listener believes the connector is 198.18.0.3 */
	assert_int_equal(open_between(false, IP_C, wire_ip4(htonl(0xc6120003)), IP_L),
			 AUTH_FORGED);
	/* and where they agree, the same set-up takes it */
	assert_int_equal(open_between(false, IP_C, IP_C, IP_L), AUTH_OK);
}

/* 2001:2::1 and 2001:2::2 (RFC 5180's benchmarking range) */
static union wire_ip ip6_of(uint8_t last)
{
	union wire_ip a = { .b = { 0x20, 0x01, 0x00, 0x02 } };

	a.b[15] = last;
	return a;
}

/* Over IPv6 the keys are bound to all 16 bytes of each address: the last byte differing, or the
 * IPv4 address its last four bytes make (0.0.0.1), takes nothing. */
static void test_addresses_ipv6(void **state)
{
	union wire_ip c = ip6_of(1), l = ip6_of(2);

	(void)state;
	assert_int_equal(open_between(true, c, c, l), AUTH_OK);
	assert_int_equal(open_between(true, c, ip6_of(3), l), AUTH_FORGED);
	assert_int_equal(open_between(true, c, wire_ip4(htonl(0x00000001)), l), AUTH_FORGED);
}

/*
 * Reordering within the window is taken, each counter once; a counter the window has passed is
 * a replay even if never seen; a jump past the whole window forgets all before it.
 */
static void test_replay_window(void **state)
{
	enum { N = AUTH_REPLAY_WINDOW + 100 };
	static uint8_t frames[N][16 + HARP_AUTH_TRAILER];
	struct pair p;
	uint32_t i;

	(void)state;
	make_pair(&p, false);
	for (i = 0; i < N; i++) {
		fill(frames[i], 16, (uint8_t)i);
		auth_seal(p.conn, P1, P2, frames[i], 16);
	}
	/* frames 0..99 never arrive yet; 100..N-1 arrive backwards in pairs */
	for (i = 100; i + 1 < N; i += 2) {
		assert_int_equal(open_at(&p, frames[i + 1], 16), AUTH_OK);
		assert_int_equal(open_at(&p, frames[i], 16), AUTH_OK);
	}
	/* newest is N-1: N-1-AUTH_REPLAY_WINDOW+1 .. is in the window, below that is not */
	for (i = 0; i < 100; i++) {
		enum auth_verdict want = N - 1 - i < AUTH_REPLAY_WINDOW ? AUTH_OK : AUTH_REPLAYED;

		assert_int_equal(open_at(&p, frames[i], 16), want);
	}
	/* everything again: all replays */
	for (i = 0; i < N; i++) {
		assert_int_equal(open_at(&p, frames[i], 16), AUTH_REPLAYED);
	}
	auth_free(p.conn);
	auth_free(p.lis);

	/* a jump: frame 0, then N-1 (more than the window ahead), then 1 is too old, N-2 new */
	make_pair(&p, false);
	for (i = 0; i < N; i++) {
		fill(frames[i], 16, (uint8_t)i);
		auth_seal(p.conn, P1, P2, frames[i], 16);
	}
	assert_int_equal(open_at(&p, frames[0], 16), AUTH_OK);
	assert_int_equal(open_at(&p, frames[N - 1], 16), AUTH_OK);
	assert_int_equal(open_at(&p, frames[1], 16), AUTH_REPLAYED);
	assert_int_equal(open_at(&p, frames[N - 2], 16), AUTH_OK);
	assert_int_equal(open_at(&p, frames[N - AUTH_REPLAY_WINDOW], 16), AUTH_OK);
	assert_int_equal(open_at(&p, frames[N - AUTH_REPLAY_WINDOW - 1], 16), AUTH_REPLAYED);
	assert_int_equal(open_at(&p, frames[N - 1], 16), AUTH_REPLAYED);
	auth_free(p.conn);
	auth_free(p.lis);
}

/*
 * The control channel's messages: each direction's own control key, not the frames' (a frame
 * trailer made over the same 16 bytes does not pass), any bit changed fails, a counter is taken
 * only past the newest one (a message the socket dropped leaves a gap, which is allowed).
 */
static void run_control(bool aes)
{
	uint8_t msg[4][16 + HARP_AUTH_TRAILER], copy[sizeof(msg[0])];
	struct pair p;
	uint32_t i;

	make_pair(&p, aes);
	for (i = 0; i < 4; i++) {
		fill(msg[i], 16, (uint8_t)(40 + i));
		auth_seal_ctl(p.conn, msg[i], 16, msg[i] + 16);
	}
	/* its own direction's key is not the peer's */
	assert_int_equal(auth_open_ctl(p.conn, msg[0], 16, msg[0] + 16), AUTH_FORGED);
	for (i = 0; i < sizeof(copy); i++) {
		memcpy(copy, msg[0], sizeof(copy));
		copy[i] ^= (uint8_t)(1u << (i % 8));
		assert_int_equal(auth_open_ctl(p.lis, copy, 16, copy + 16), AUTH_FORGED);
	}
	/* a frame's trailer over the same bytes (the frames' key, nonce of ports) is no message */
	memcpy(copy, msg[0], 16);
	auth_seal(p.conn, 0, 0, copy, 16);
	assert_int_equal(auth_open_ctl(p.lis, copy, 16, copy + 16), AUTH_FORGED);
	/* and a message is no frame */
	assert_int_equal(auth_open(p.lis, 0, 0, msg[1], 16, msg[1] + 16), AUTH_FORGED);
	assert_int_equal(auth_open_ctl(p.lis, msg[0], 16, msg[0] + 16), AUTH_OK);
	assert_int_equal(auth_open_ctl(p.lis, msg[0], 16, msg[0] + 16), AUTH_REPLAYED);
	/* msg[1] dropped for a full socket: msg[2] is still taken, msg[1] never after it */
	assert_int_equal(auth_open_ctl(p.lis, msg[2], 16, msg[2] + 16), AUTH_OK);
	assert_int_equal(auth_open_ctl(p.lis, msg[1], 16, msg[1] + 16), AUTH_REPLAYED);
	assert_int_equal(auth_open_ctl(p.lis, msg[3], 16, msg[3] + 16), AUTH_OK);
	/* the other direction */
	fill(msg[0], 16, 77);
	auth_seal_ctl(p.lis, msg[0], 16, msg[0] + 16);
	assert_int_equal(auth_open_ctl(p.lis, msg[0], 16, msg[0] + 16), AUTH_FORGED);
	assert_int_equal(auth_open_ctl(p.conn, msg[0], 16, msg[0] + 16), AUTH_OK);
	auth_free(p.conn);
	auth_free(p.lis);
}

static void test_control(void **state)
{
	(void)state;
	run_control(false);
	if (auth_has_aes()) {
		run_control(true);
	}
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
	union wire_ip c = IP_C, l = IP_L;
	int err = 0;

	(void)state;
	auth_keypair(&kp);
	assert_null(auth_new(&kp, zero, true, false, &c, &l, &err));
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
		cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_addresses_ipv6),
		cmocka_unit_test(test_replay_window),
		cmocka_unit_test(test_control),
	};

	return cmocka_run_group_tests(tests, load, NULL);
}
