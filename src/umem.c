// SPDX-License-Identifier: Apache-2.0
/*
 * UMEM memory and the frame pool over it. Each engine owns one UMEM and one pool, so a frame
 * never changes hands between threads and the pool needs no atomics. The area comes from
 * hugepages when they can be had (fewer TLB misses for the copies into and out of frames) and
 * from normal pages otherwise; either way it is populated and locked up front, so the data path
 * never faults.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

int frame_pool_init_range(struct frame_pool *fp, uint32_t capacity, uint64_t base,
			  uint32_t nframes, uint32_t frame_size)
{
	uint32_t i;

	if (!nframes || nframes > capacity || !frame_size || (frame_size & (frame_size - 1)) ||
	    (base & (frame_size - 1))) {
		return -EINVAL;
	}
	fp->addrs = calloc(capacity, sizeof(*fp->addrs));
	if (!fp->addrs) {
		return -ENOMEM;
	}
	/* Lowest addresses on top of the stack, so they are handed out first. */
	for (i = 0; i < nframes; i++) {
		fp->addrs[i] = base + (uint64_t)(nframes - 1 - i) * frame_size;
	}
	fp->free = nframes;
	fp->total = capacity;
	fp->frame_size = frame_size;
	return 0;
}

int frame_pool_init(struct frame_pool *fp, uint32_t nframes, uint32_t frame_size)
{
	return frame_pool_init_range(fp, nframes, 0, nframes, frame_size);
}

void frame_pool_fini(struct frame_pool *fp)
{
	if (!fp) {
		return;
	}
	free(fp->addrs);
	memset(fp, 0, sizeof(*fp));
}

#define HUGE_2M (2u << 20)

static void *map_pages(size_t size, bool huge)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE | (huge ? MAP_HUGETLB : 0);
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, flags, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

int umem_area_alloc(struct umem_area *a, size_t size, int hugepages_mode)
{
	static bool said_once;
	size_t huge_size = (size + HUGE_2M - 1) & ~((size_t)HUGE_2M - 1);

	memset(a, 0, sizeof(*a));
	if (hugepages_mode != HARP_HUGEPAGES_OFF) {
		a->base = map_pages(huge_size, true);
		if (a->base) {
			a->size = huge_size;
			a->huge = true;
		} else if (hugepages_mode == HARP_HUGEPAGES_ON) {
			int err = errno;

			pr_err("umem: cannot map %zu bytes of 2 MiB hugepages (HARP_HUGEPAGES=on): %s; "
			       "reserve them with vm.nr_hugepages",
			       huge_size, strerror(err));
			return -err;
		} else if (!said_once) {
			said_once = true;
			pr_info("umem: no hugepages available (%s); using normal pages",
				strerror(errno));
		}
	}
	if (!a->base) {
		a->base = map_pages(size, false);
		if (!a->base) {
			int err = errno;

			pr_err("umem: cannot map %zu bytes: %s", size, strerror(err));
			return -err;
		}
		a->size = size;
	}
	if (mlock(a->base, a->size)) {
		/* The kernel pins UMEM pages itself at registration; this only keeps them resident
		 * earlier, so a failure (RLIMIT_MEMLOCK) is worth a line, not an error. */
		pr_debug("umem: mlock of %zu bytes failed: %s", a->size, strerror(errno));
	}
	return 0;
}

void umem_area_free(struct umem_area *a)
{
	if (!a || !a->base) {
		return;
	}
	munmap(a->base, a->size);
	memset(a, 0, sizeof(*a));
}
