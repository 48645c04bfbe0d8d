/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How the plugin cuts one message over a comm's connections (its stripes, one per engine in
 * turn), from the capacity of the buffer it lands in. Both ends know that capacity before a
 * byte moves: the receiver posted it, and the sender reads it from the receive's announcement
 * (harp_conn__peer_recv) before it sends. The size of the message cannot decide: the receiver
 * learns it only as the message arrives.
 *
 * A buffer of capacity cap is cut into n = hp_stripe_count(cap, k) pieces of
 * hp_stripe_piece(cap, n) bytes, 4 KiB-aligned, the last one taking the rest; stripe s carries
 * piece s. A message shorter than the buffer fills the pieces in order, so the stripes past its
 * end carry empty messages: each stripe's receive takes one send. Stripe 0 announces the whole
 * buffer, which is how the sender learns cap; it carries piece 0 all the same.
 *
 * Small buffers (under two pieces of HP_STRIPE_MIN) stay on stripe 0 alone, as on a comm of one
 * connection: their latency is one connection's.
 */
#ifndef HARP_NCCL_STRIPE_H
#define HARP_NCCL_STRIPE_H

#include <stddef.h>

#define HP_STRIPES_MAX 8
#define HP_STRIPE_MIN (128 * 1024) /* the least piece: about 15 packets at MTU 9000 */
#define HP_STRIPE_ALIGN 4096

/* The stripes a buffer of capacity cap spreads over, on a comm of k. */
static inline int hp_stripe_count(size_t cap, int k)
{
	size_t n = cap / HP_STRIPE_MIN;

	if (k <= 1 || n < 2) {
		return 1;
	}
	return n < (size_t)k ? (int)n : k;
}

/* Bytes of each piece but the last (cap >= n pieces of HP_STRIPE_MIN, so the last is not empty) */
static inline size_t hp_stripe_piece(size_t cap, int n)
{
	size_t p = (cap + (size_t)n - 1) / (size_t)n;

	return (p + HP_STRIPE_ALIGN - 1) / HP_STRIPE_ALIGN * HP_STRIPE_ALIGN;
}

/* Where piece s begins in the buffer. */
static inline size_t hp_stripe_off(size_t cap, int n, int s)
{
	return n == 1 ? 0 : (size_t)s * hp_stripe_piece(cap, n);
}

/* The capacity stripe s's receive announces: the whole buffer on stripe 0, else its piece. */
static inline size_t hp_stripe_cap(size_t cap, int n, int s)
{
	if (s == 0) {
		return cap;
	}
	return s == n - 1 ? cap - hp_stripe_off(cap, n, s) : hp_stripe_piece(cap, n);
}

/*
 * Bytes of a len-byte message that stripe s carries. The last stripe takes all past its start,
 * so a message larger than the buffer fails there (-EMSGSIZE), as on one connection.
 */
static inline size_t hp_stripe_len(size_t cap, int n, int s, size_t len)
{
	size_t off = hp_stripe_off(cap, n, s), p;

	if (len <= off) {
		return 0;
	}
	if (s == n - 1) {
		return len - off;
	}
	p = hp_stripe_piece(cap, n);
	return len - off < p ? len - off : p;
}

#endif
