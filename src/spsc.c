/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Construction of the SPSC ring declared in spsc.h; push and pop are inline there. The ring is
 * one cache-line-aligned allocation: the header, whose two indexes sit on separate cache lines so
 * producer and consumer do not false-share, followed by the slots. Indexes run freely modulo
 * 2^32 and are masked on use, which is why the size must be a power of two.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spsc.h"

#define SPSC_ALIGN 64

struct spsc *spsc_create(uint32_t size)
{
	struct spsc *r;
	size_t bytes;

	if (size == 0 || (size & (size - 1)) || size > (1u << 31)) {
		errno = EINVAL;
		return NULL;
	}
	bytes = sizeof(*r) + (size_t)size * sizeof(r->slots[0]);
	/* aligned_alloc wants a multiple of the alignment */
	bytes = (bytes + SPSC_ALIGN - 1) & ~(size_t)(SPSC_ALIGN - 1);
	r = aligned_alloc(SPSC_ALIGN, bytes);
	if (!r) {
		errno = ENOMEM;
		return NULL;
	}
	memset(r, 0, bytes);
	atomic_init(&r->head, 0);
	atomic_init(&r->tail, 0);
	r->mask = size - 1;
	return r;
}
