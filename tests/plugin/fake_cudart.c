// SPDX-License-Identifier: Apache-2.0
/*
 * A stand-in libcudart.so.13 for the plugin's GPU-buffer path (HARP_CUDA=on) on a machine with no
 * GPU: the few runtime calls the plugin makes, with device memory the CPU cannot touch.
 *
 * - Device memory (cudaMalloc) is a memfd mapped twice: the pointers handed out lie in a view
 *   mapped PROT_NONE, so anything that reads or writes them directly (instead of through a copy)
 *   dies with SIGSEGV; the copies reach the bytes through a second, writable view.
 * - cudaMemcpyAsync and cudaMemcpy2DAsync only queue on their stream; the bytes move when the
 *   stream is synchronized. A receive the plugin completed before waiting would hold stale bytes,
 *   and the driver, which reads every byte back with cudaMemcpy, would see it.
 * - The host side of every asynchronous copy must lie in memory given to cudaHostRegister (the
 *   frames): a copy from or to anywhere else is counted, as a second, staged copy would be.
 * - FAKE_CUDART_NO_DEVICE=1 makes cudaGetDevice fail as on a node without a GPU.
 * - FAKE_CUDART_FAIL_AFTER=N makes every copy after the first N fail, and every wait after that,
 *   as a GPU fault does (CUDA's errors stick); what was queued is lost.
 *
 * fake_cudart_report() returns the counts, for the driver to print and check.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_cudart.h"

#define EXPORT __attribute__((visibility("default")))
#define ERR_INVALID_VALUE 1
#define ERR_MEMORY_ALLOCATION 2
#define ERR_NO_DEVICE 100
#define ERR_ILLEGAL_ADDRESS 700
#define ERR_HOST_REGISTERED 712
#define ERR_HOST_NOT_REGISTERED 713
#define DEVICE_BYTES (4ull << 30) /* sparse: pages exist once written */
#define MAX_REGIONS 256

struct op {
	uint8_t *dst;
	const uint8_t *src;
	size_t len;
};

struct stream {
	pthread_mutex_t lock;
	struct op *ops;
	size_t n, cap;
};

static struct {
	pthread_mutex_t lock;
	bool ready;
	uint8_t *dev;	 /* the view handed out: PROT_NONE */
	uint8_t *shadow; /* the same pages, writable */
	size_t used;
	struct {
		uint8_t *addr;
		size_t len;
	} region[MAX_REGIONS];
	int nregions;
	struct fake_cudart_report r;
	uint64_t queued;	 /* copies queued so far */
	_Atomic bool failed; /* FAKE_CUDART_FAIL_AFTER reached */
} F = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Whether this copy fails on purpose (FAKE_CUDART_FAIL_AFTER): then every later call fails. */
static bool fail_now(void)
{
	static long after = -2;
	const char *v;

	if (after == -2) {
		v = getenv("FAKE_CUDART_FAIL_AFTER");
		after = v && *v ? atol(v) : -1;
	}
	if (after >= 0 && __atomic_add_fetch(&F.queued, 1, __ATOMIC_RELAXED) > (uint64_t)after) {
		F.failed = true;
	}
	if (F.failed) {
		__atomic_add_fetch(&F.r.failed_calls, 1, __ATOMIC_RELAXED);
	}
	return F.failed;
}

static bool arena_ready(void)
{
	int fd;

	pthread_mutex_lock(&F.lock);
	if (!F.ready) {
		fd = memfd_create("fake-cuda-device", MFD_CLOEXEC);
		if (fd >= 0 && ftruncate(fd, (off_t)DEVICE_BYTES) == 0) {
			F.dev = mmap(NULL, DEVICE_BYTES, PROT_NONE, MAP_SHARED, fd, 0);
			F.shadow = mmap(NULL, DEVICE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
					0);
			F.ready = F.dev != MAP_FAILED && F.shadow != MAP_FAILED;
		}
		if (fd >= 0) {
			close(fd);
		}
	}
	pthread_mutex_unlock(&F.lock);
	return F.ready;
}

static bool on_device(const void *p, size_t len)
{
	const uint8_t *a = p;

	return F.ready && a >= F.dev && len <= DEVICE_BYTES &&
	       (size_t)(a - F.dev) <= DEVICE_BYTES - len;
}

/* Where a pointer's bytes are for the CPU: the writable view for device memory. */
static uint8_t *cpu_view(const void *p)
{
	return on_device(p, 1) ? F.shadow + ((const uint8_t *)p - F.dev) : (uint8_t *)p;
}

static bool host_registered(const void *p, size_t len)
{
	const uint8_t *a = p;
	bool ok = false;
	int i;

	pthread_mutex_lock(&F.lock);
	for (i = 0; i < F.nregions && !ok; i++) {
		ok = a >= F.region[i].addr && len <= F.region[i].len &&
		     (size_t)(a - F.region[i].addr) <= F.region[i].len - len;
	}
	pthread_mutex_unlock(&F.lock);
	return ok;
}

EXPORT int cudaGetDevice(int *dev)
{
	const char *none = getenv("FAKE_CUDART_NO_DEVICE");

	if (none && strcmp(none, "1") == 0) {
		return ERR_NO_DEVICE;
	}
	*dev = 0;
	return 0;
}

EXPORT int cudaSetDevice(int dev)
{
	return dev == 0 ? 0 : ERR_INVALID_VALUE;
}

EXPORT int cudaMalloc(void **p, size_t len)
{
	size_t at;

	if (!arena_ready()) {
		return ERR_MEMORY_ALLOCATION;
	}
	pthread_mutex_lock(&F.lock);
	at = (F.used + 255) & ~(size_t)255;
	if (len > DEVICE_BYTES - at) {
		pthread_mutex_unlock(&F.lock);
		return ERR_MEMORY_ALLOCATION;
	}
	F.used = at + len;
	pthread_mutex_unlock(&F.lock);
	*p = F.dev + at;
	return 0;
}

EXPORT int cudaFree(void *p)
{
	(void)p; /* the arena only grows: a test allocates little */
	return 0;
}

EXPORT int cudaPointerGetAttributes(struct fake_ptr_attrs *a, const void *p)
{
	memset(a, 0, sizeof(*a));
	a->type = on_device(p, 1) ? 2 : 0; /* cudaMemoryTypeDevice, or unregistered host */
	a->device_pointer = a->type == 2 ? (void *)p : NULL;
	return 0;
}

EXPORT int cudaHostRegister(void *p, size_t len, unsigned int flags)
{
	int i, rc = 0;

	(void)flags;
	pthread_mutex_lock(&F.lock);
	for (i = 0; i < F.nregions; i++) {
		if (F.region[i].addr == p) {
			rc = ERR_HOST_REGISTERED;
		}
	}
	if (!rc && F.nregions == MAX_REGIONS) {
		rc = ERR_INVALID_VALUE;
	}
	if (!rc) {
		F.region[F.nregions].addr = p;
		F.region[F.nregions].len = len;
		F.nregions++;
		F.r.host_registered++;
	}
	pthread_mutex_unlock(&F.lock);
	return rc;
}

EXPORT int cudaHostUnregister(void *p)
{
	int i, rc = ERR_HOST_NOT_REGISTERED;

	pthread_mutex_lock(&F.lock);
	for (i = 0; i < F.nregions; i++) {
		if (F.region[i].addr == p) {
			F.region[i] = F.region[--F.nregions];
			F.r.host_unregistered++;
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&F.lock);
	return rc;
}

EXPORT int cudaStreamCreateWithFlags(void **out, unsigned int flags)
{
	struct stream *s = calloc(1, sizeof(*s));

	(void)flags;
	if (!s) {
		return ERR_MEMORY_ALLOCATION;
	}
	pthread_mutex_init(&s->lock, NULL);
	__atomic_add_fetch(&F.r.streams, 1, __ATOMIC_RELAXED);
	*out = s;
	return 0;
}

/* One queued copy: exactly one side in device memory, the host side registered. */
static int queue(struct stream *s, void *dst, const void *src, size_t len)
{
	bool to_dev = on_device(dst, len), from_dev = on_device(src, len);
	const void *host = to_dev ? src : dst;

	if (fail_now()) {
		return ERR_ILLEGAL_ADDRESS;
	}
	if (to_dev == from_dev) {
		__atomic_add_fetch(&F.r.bad_direction, 1, __ATOMIC_RELAXED);
		return ERR_INVALID_VALUE;
	}
	if (!host_registered(host, len)) {
		uint64_t max = __atomic_load_n(&F.r.host_unregistered_max, __ATOMIC_RELAXED);

		__atomic_add_fetch(&F.r.host_unregistered_copies, 1, __ATOMIC_RELAXED);
		while (len > max && !__atomic_compare_exchange_n(&F.r.host_unregistered_max, &max,
								 len, false, __ATOMIC_RELAXED,
								 __ATOMIC_RELAXED)) {
		}
	}
	__atomic_add_fetch(to_dev ? &F.r.copies_to_device : &F.r.copies_to_host, 1,
			   __ATOMIC_RELAXED);
	__atomic_add_fetch(to_dev ? &F.r.bytes_to_device : &F.r.bytes_to_host, len,
			   __ATOMIC_RELAXED);
	pthread_mutex_lock(&s->lock);
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		struct op *ops = realloc(s->ops, cap * sizeof(*ops));

		if (!ops) {
			pthread_mutex_unlock(&s->lock);
			return ERR_MEMORY_ALLOCATION;
		}
		s->ops = ops;
		s->cap = cap;
	}
	s->ops[s->n++] = (struct op){ .dst = dst, .src = src, .len = len };
	pthread_mutex_unlock(&s->lock);
	return 0;
}

EXPORT int cudaMemcpyAsync(void *dst, const void *src, size_t len, int kind, void *stream)
{
	(void)kind;
	__atomic_add_fetch(&F.r.async_calls, 1, __ATOMIC_RELAXED);
	return stream ? queue(stream, dst, src, len) : ERR_INVALID_VALUE;
}

EXPORT int cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
			     size_t width, size_t height, int kind, void *stream)
{
	size_t i;
	int rc = 0;

	(void)kind;
	__atomic_add_fetch(&F.r.async_calls, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&F.r.grid_calls, 1, __ATOMIC_RELAXED);
	if (!stream || dpitch < width || spitch < width) {
		return ERR_INVALID_VALUE;
	}
	for (i = 0; i < height && !rc; i++) {
		rc = queue(stream, (uint8_t *)dst + i * dpitch, (const uint8_t *)src + i * spitch,
			   width);
	}
	return rc;
}

EXPORT int cudaStreamSynchronize(void *stream)
{
	struct stream *s = stream;
	size_t i;

	if (!s) {
		return ERR_INVALID_VALUE;
	}
	pthread_mutex_lock(&s->lock);
	for (i = 0; i < s->n && !F.failed; i++) {
		memcpy(cpu_view(s->ops[i].dst), cpu_view(s->ops[i].src), s->ops[i].len);
	}
	s->n = 0;
	pthread_mutex_unlock(&s->lock);
	__atomic_add_fetch(&F.r.syncs, 1, __ATOMIC_RELAXED);
	if (F.failed) {
		__atomic_add_fetch(&F.r.failed_calls, 1, __ATOMIC_RELAXED);
		return ERR_ILLEGAL_ADDRESS;
	}
	return 0;
}

EXPORT int cudaStreamDestroy(void *stream)
{
	struct stream *s = stream;

	if (!s) {
		return ERR_INVALID_VALUE;
	}
	/* copies never waited for: their bytes never moved */
	__atomic_add_fetch(&F.r.dropped, s->n, __ATOMIC_RELAXED);
	free(s->ops);
	pthread_mutex_destroy(&s->lock);
	free(s);
	return 0;
}

/* The test's own copies (filling and reading back device memory): at once, not counted. */
EXPORT int cudaMemcpy(void *dst, const void *src, size_t len, int kind)
{
	(void)kind;
	if (!on_device(dst, len) && !on_device(src, len)) {
		return ERR_INVALID_VALUE;
	}
	memcpy(cpu_view(dst), cpu_view(src), len);
	return 0;
}

EXPORT const char *cudaGetErrorString(int err)
{
	switch (err) {
	case 0:
		return "no error (stand-in)";
	case ERR_NO_DEVICE:
		return "no CUDA-capable device is detected (stand-in)";
	case ERR_ILLEGAL_ADDRESS:
		return "an illegal memory access was encountered (stand-in, on purpose)";
	case ERR_HOST_REGISTERED:
		return "part or all of the requested memory range is already mapped (stand-in)";
	default:
		return "error (stand-in)";
	}
}

EXPORT void fake_cudart_report(struct fake_cudart_report *out)
{
	pthread_mutex_lock(&F.lock);
	*out = F.r;
	out->regions_now = F.nregions;
	pthread_mutex_unlock(&F.lock);
}
