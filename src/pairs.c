// SPDX-License-Identifier: Apache-2.0
/* The port-pair owners of a context's engines (pairs.h). */
#include "pairs.h"

/*
 * An entry: the pair in the high 48 bits, its owner's engine number + 1 in the low 16. The two
 * ports go in sorted, not as ours and theirs: the kernel's symmetric flow hash (tun's) sorts
 * the addresses and the ports each on their own, so our port x to their port y and our port y
 * to their port x are one flow to it.
 */
static uint64_t pair_key(uint32_t peer_ip, uint16_t local_port, uint16_t peer_port)
{
	uint16_t ip16 = (uint16_t)(peer_ip ^ (peer_ip >> 16));
	uint16_t lo = local_port < peer_port ? local_port : peer_port;
	uint16_t hi = local_port < peer_port ? peer_port : local_port;

	return ((uint64_t)lo << 48) | ((uint64_t)hi << 32) | ((uint64_t)ip16 << 16);
}

static uint32_t pair_home(uint64_t key)
{
	key *= 0x9e3779b97f4a7c15ull;
	return (uint32_t)(key >> 40) & (PAIRS_SLOTS - 1);
}

/* The pair's entry, or 0 when it has none; *slot: where it is, or the first free slot seen
 * (PAIRS_SLOTS when its run of slots is full). */
static uint64_t pair_find(const struct pairs *t, uint64_t key, uint32_t *slot)
{
	uint32_t i, s = pair_home(key);

	for (i = 0; i < PAIRS_PROBES; i++, s = (s + 1) & (PAIRS_SLOTS - 1)) {
		uint64_t v = atomic_load_explicit(&t->slot[s], memory_order_acquire);

		if (!v || (v & ~0xffffull) == key) {
			*slot = s;
			return v;
		}
	}
	*slot = PAIRS_SLOTS;
	return 0;
}

bool pairs_free_for(const struct pairs *t, uint32_t peer_ip, uint16_t local_port,
		    uint16_t peer_port, int engine)
{
	uint32_t slot;
	uint64_t v = pair_find(t, pair_key(peer_ip, local_port, peer_port), &slot);

	return !(v & 0xffff) || (int)(v & 0xffff) == engine + 1;
}

bool pairs_claim(struct pairs *t, uint32_t peer_ip, uint16_t local_port, uint16_t peer_port,
		 int engine, bool *fresh)
{
	uint64_t key = pair_key(peer_ip, local_port, peer_port);

	for (;;) {
		uint32_t slot;
		uint64_t v = pair_find(t, key, &slot), want = key | (uint64_t)(engine + 1);

		if (v & 0xffff) {
			return (int)(v & 0xffff) == engine + 1;
		}
		if (slot == PAIRS_SLOTS) {
			atomic_fetch_add_explicit(&t->full, 1, memory_order_relaxed);
			return true;
		}
		/* the pair's slot, released, or the first free slot of its run: another claimer
		 * of the same pair finds the same one (entries never leave), so one of them wins
		 * it and the other reads it */
		if (atomic_compare_exchange_strong_explicit(
			&t->slot[slot], &v, want, memory_order_acq_rel, memory_order_acquire)) {
			if (fresh) {
				*fresh = true;
			}
			return true;
		}
	}
}

void pairs_release(struct pairs *t, uint32_t peer_ip, uint16_t local_port, uint16_t peer_port,
		   int engine)
{
	uint64_t key = pair_key(peer_ip, local_port, peer_port), v;
	uint32_t slot;

	v = pair_find(t, key, &slot);
	if (v && (int)(v & 0xffff) == engine + 1) {
		/* the key stays, so the pairs after it in the run are still found */
		atomic_compare_exchange_strong_explicit(&t->slot[slot], &v, key,
							memory_order_acq_rel, memory_order_relaxed);
	}
}

static _Atomic uint64_t *lease_of(const struct pairs *t, uint32_t peer_ip, uint16_t local_port,
				   uint16_t peer_port)
{
	uint64_t key = pair_key(peer_ip, local_port, peer_port);

	key *= 0x9e3779b97f4a7c15ull;
	return (_Atomic uint64_t *)&t->lease[(key >> 50) & (PAIRS_LEASE_SLOTS - 1)];
}

bool pairs_leased_by_other(const struct pairs *t, uint32_t peer_ip, uint16_t local_port,
			   uint16_t peer_port, int engine, uint64_t now_ms)
{
	uint64_t v = atomic_load_explicit(lease_of(t, peer_ip, local_port, peer_port),
					  memory_order_relaxed);

	return v && (int)(v & 0xffff) != engine + 1 && now_ms - (v >> 16) < PAIRS_LEASE_MS;
}

void pairs_lease(struct pairs *t, uint32_t peer_ip, uint16_t local_port, uint16_t peer_port,
		 int engine, uint64_t now_ms)
{
	atomic_store_explicit(lease_of(t, peer_ip, local_port, peer_port),
			      now_ms << 16 | (uint64_t)(engine + 1), memory_order_relaxed);
}
