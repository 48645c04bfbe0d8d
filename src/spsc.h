/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Single-producer, single-consumer ring of pointers, one of the ways work crosses between
 * threads (engine.c's hand-over lists are the others).
 * The producer owns `head`, the consumer owns `tail`; each reads the other's index with acquire
 * and publishes its own with release, so a slot's contents are visible before its index moves.
 */
#ifndef HARP_SPSC_H
#define HARP_SPSC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

struct spsc {
	_Alignas(64) _Atomic uint32_t head; /* next slot the producer writes */
	_Alignas(64) _Atomic uint32_t tail; /* next slot the consumer reads */
	_Alignas(64) uint32_t mask;
	void *slots[];
};

/* size must be a power of two; returns NULL (errno set) otherwise or when out of memory. */
struct spsc *spsc_create(uint32_t size);

static inline void spsc_destroy(struct spsc *r)
{
	free(r);
}

/* Producer side. Returns false when the ring is full (not an error: try later). */
static inline bool spsc_push(struct spsc *r, void *item)
{
	uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	/* acquire: the consumer's read of the slot we are about to reuse has finished */
	uint32_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);

	if (head - tail > r->mask) {
		return false;
	}
	r->slots[head & r->mask] = item;
	/* release: the slot's contents are visible before the consumer sees the new head */
	atomic_store_explicit(&r->head, head + 1, memory_order_release);
	return true;
}

/* Consumer side. Returns NULL when the ring is empty. */
static inline void *spsc_pop(struct spsc *r)
{
	uint32_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	/* acquire: pairs with the producer's release, so the slot's contents are visible */
	uint32_t head = atomic_load_explicit(&r->head, memory_order_acquire);
	void *item;

	if (tail == head) {
		return NULL;
	}
	item = r->slots[tail & r->mask];
	/* release: our read of the slot is done before the producer may overwrite it */
	atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
	return item;
}

/* Consumer side: the next item without taking it (NULL when empty); spsc_pop() takes it. */
static inline void *spsc_peek(struct spsc *r)
{
	uint32_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	/* acquire: pairs with the producer's release, so the slot's contents are visible */
	uint32_t head = atomic_load_explicit(&r->head, memory_order_acquire);

	return tail == head ? NULL : r->slots[tail & r->mask];
}

static inline uint32_t spsc_count(struct spsc *r)
{
	return atomic_load_explicit(&r->head, memory_order_acquire) -
	       atomic_load_explicit(&r->tail, memory_order_acquire);
}

#endif
