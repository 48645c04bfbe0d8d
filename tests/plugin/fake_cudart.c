// SPDX-License-Identifier: Apache-2.0
/*
 * A stand-in libcudart.so.13 for the plugin's GPU-buffer path (HARP_CUDA=on) on a machine with no
 * GPU: the few runtime calls the plugin makes, with device memory the CPU cannot touch.
 *
 * - Device memory (cudaMalloc) is a memfd mapped twice: the pointers handed out lie in a view
 *   mapped PROT_NONE, so anything that reads or writes them directly (instead of through a copy)
 *   dies with SIGSEGV; the copies reach the bytes through a second, writable view. Each
 *   allocation is recorded with its device and has unallocated bytes before it, so a range that
 *   runs past an allocation's end reaches memory that cudaPointerGetAttributes calls no device's,
 *   and a copy into or out of it fails (counted).
 * - cudaMemcpyAsync, cudaMemcpy2DAsync and (built with CUDA 13's headers) cudaMemcpyBatchAsync
 *   only queue on their stream; the bytes move when the stream is synchronized. A receive the
 *   plugin completed before waiting would hold stale bytes, and the driver, which reads every
 *   byte back with cudaMemcpy, would see it. A batch is refused, as the runtime refuses it,
 *   without attributes whose first index is 0, with indexes out of order or past its count, or
 *   with an attribute's source access order invalid.
 * - The host side of every asynchronous copy must lie in memory given to cudaHostRegister (the
 *   frames): a copy from or to anywhere else is counted, as a second, staged copy would be.
 * - FAKE_CUDART_DEVICES=N (1 to FAKE_CUDART_MAX_DEVICES, default 1) devices. Each thread has a
 *   current device, 0 until it calls cudaSetDevice, as the runtime keeps one per thread;
 *   cudaMalloc allocates on it and a stream belongs to it. Every copy records the device current
 *   when it was queued and its stream's, and counts those that are not its device memory's (a
 *   stream made on GPU 0 for GPU 1's buffers: a context on GPU 0 copying them); so is a wait
 *   while another device than its stream's is current.
 * - FAKE_CUDART_NO_DEVICE=1 makes cudaGetDevice fail as on a node without a GPU.
 * - FAKE_CUDART_FAIL_AFTER=N makes every copy after the first N fail, and every wait after that,
 *   as a GPU fault does (CUDA's errors stick); what was queued is lost.
 *
 * Where the build found CUDA's cuda_runtime_api.h (HARP_CUDA_HEADERS), every function here is
 * defined against CUDA's own declaration of it, with CUDA's types and error codes, so the
 * compiler holds the stand-in to the real runtime's interface. fake_cudart_report() returns the
 * counts, for the driver to print and check.
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

#ifdef HARP_CUDA_HEADERS
#include <cuda_runtime_api.h>

typedef cudaError_t fake_err;
typedef cudaStream_t fake_stream_t;
typedef enum cudaMemcpyKind fake_kind;
#define ERR_INVALID_VALUE     cudaErrorInvalidValue
#define ERR_MEMORY_ALLOCATION cudaErrorMemoryAllocation
#define ERR_NO_DEVICE	      cudaErrorNoDevice
#define ERR_INVALID_DEVICE    cudaErrorInvalidDevice
#define ERR_ILLEGAL_ADDRESS   cudaErrorIllegalAddress
#define ERR_HOST_REGISTERED   cudaErrorHostMemoryAlreadyRegistered
#define ERR_HOST_NOT_REGISTERED cudaErrorHostMemoryNotRegistered
#define MEMORY_HOST	      cudaMemoryTypeHost
#define MEMORY_DEVICE	      cudaMemoryTypeDevice
#else
typedef int fake_err;
typedef void *fake_stream_t;
typedef int fake_kind;
/* the runtime's pointer attributes (CUDA 11 and later): memory type, device, two pointers */
struct cudaPointerAttributes {
	int type;
	int device;
	void *devicePointer;
	void *hostPointer;
};
#define ERR_INVALID_VALUE	1
#define ERR_MEMORY_ALLOCATION	2
#define ERR_NO_DEVICE		100
#define ERR_INVALID_DEVICE	101
#define ERR_ILLEGAL_ADDRESS	700
#define ERR_HOST_REGISTERED	712
#define ERR_HOST_NOT_REGISTERED 713
#define MEMORY_HOST		1
#define MEMORY_DEVICE		2
#endif

#define EXPORT __attribute__((visibility("default")))
#define DEVICE_BYTES (4ull << 30) /* sparse: pages exist once written */
#define ALLOC_GAP    4096	  /* unallocated bytes before each allocation */
#define MAX_REGIONS  256

struct op {
	uint8_t *dst;
	const uint8_t *src;
	size_t len;
};

struct stream {
	pthread_mutex_t lock;
	struct op *ops;
	size_t n, cap;
	int device; /* current when it was created */
};

struct alloc {
	uint8_t *addr;
	size_t len;
	int device;
};

static struct {
	pthread_mutex_t lock;
	bool ready;
	uint8_t *dev;	 /* the view handed out: PROT_NONE */
	uint8_t *shadow; /* the same pages, writable */
	size_t used;
	struct alloc *allocs; /* cudaMalloc's, not yet freed */
	int nallocs, allocs_cap;
	struct {
		uint8_t *addr;
		size_t len;
		int device;
	} region[MAX_REGIONS];
	int nregions;
	struct fake_cudart_report r;
	uint64_t queued;	 /* copies queued so far */
	_Atomic bool failed; /* FAKE_CUDART_FAIL_AFTER reached */
} F = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The calling thread's current device: 0 until it sets one, as in the runtime. */
static __thread int current_device;

/* FAKE_CUDART_DEVICES, read once; 0 with FAKE_CUDART_NO_DEVICE=1. */
static int device_count(void)
{
	static int n = -1;
	const char *none = getenv("FAKE_CUDART_NO_DEVICE");
	const char *v = getenv("FAKE_CUDART_DEVICES");
	int got = __atomic_load_n(&n, __ATOMIC_RELAXED);

	if (got >= 0) {
		return got;
	}
	got = v && *v ? atoi(v) : 1;
	if (got < 1 || got > FAKE_CUDART_MAX_DEVICES) {
		fprintf(stderr, "fake libcudart: FAKE_CUDART_DEVICES=%s is not 1 to %d; using 1\n", v,
			FAKE_CUDART_MAX_DEVICES);
		got = 1;
	}
	if (none && strcmp(none, "1") == 0) {
		got = 0;
	}
	__atomic_store_n(&n, got, __ATOMIC_RELAXED);
	return got;
}

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

/* p+len lies in the device arena (allocated or not). */
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

/* Under F.lock: the device of the allocation that holds all of p+len, or -1. */
static int alloc_device(const void *p, size_t len)
{
	const uint8_t *a = p;
	int i;

	for (i = 0; i < F.nallocs; i++) {
		if (a >= F.allocs[i].addr && len <= F.allocs[i].len &&
		    (size_t)(a - F.allocs[i].addr) <= F.allocs[i].len - len) {
			return F.allocs[i].device;
		}
	}
	return -1;
}

/* Under F.lock: the host region registered that holds all of p+len, or -1. */
static int region_of(const void *p, size_t len)
{
	const uint8_t *a = p;
	int i;

	for (i = 0; i < F.nregions; i++) {
		if (a >= F.region[i].addr && len <= F.region[i].len &&
		    (size_t)(a - F.region[i].addr) <= F.region[i].len - len) {
			return i;
		}
	}
	return -1;
}

EXPORT fake_err cudaGetDeviceCount(int *count)
{
	*count = device_count();
	return *count ? 0 : ERR_NO_DEVICE;
}

EXPORT fake_err cudaGetDevice(int *dev)
{
	if (!device_count()) {
		return ERR_NO_DEVICE;
	}
	*dev = current_device;
	return 0;
}

EXPORT fake_err cudaSetDevice(int dev)
{
	int n = device_count();

	if (!n) {
		return ERR_NO_DEVICE;
	}
	if (dev < 0 || dev >= n) {
		return ERR_INVALID_DEVICE;
	}
	current_device = dev;
	return 0;
}

/* On the calling thread's current device, after ALLOC_GAP unallocated bytes. */
EXPORT fake_err cudaMalloc(void **p, size_t len)
{
	struct alloc *more;
	size_t at;

	if (!arena_ready()) {
		return ERR_MEMORY_ALLOCATION;
	}
	pthread_mutex_lock(&F.lock);
	at = (F.used + ALLOC_GAP + 255) & ~(size_t)255;
	if (len > DEVICE_BYTES - at) {
		pthread_mutex_unlock(&F.lock);
		return ERR_MEMORY_ALLOCATION;
	}
	if (F.nallocs == F.allocs_cap) {
		int cap = F.allocs_cap ? F.allocs_cap * 2 : 64;

		more = realloc(F.allocs, (size_t)cap * sizeof(*more));
		if (!more) {
			pthread_mutex_unlock(&F.lock);
			return ERR_MEMORY_ALLOCATION;
		}
		F.allocs = more;
		F.allocs_cap = cap;
	}
	F.allocs[F.nallocs++] = (struct alloc){ .addr = F.dev + at, .len = len,
						.device = current_device };
	F.used = at + len;
	pthread_mutex_unlock(&F.lock);
	*p = F.dev + at;
	return 0;
}

/* The allocation is forgotten; its space is not used again (a test allocates little). */
EXPORT fake_err cudaFree(void *p)
{
	int i, rc = p ? ERR_INVALID_VALUE : 0;

	pthread_mutex_lock(&F.lock);
	for (i = 0; i < F.nallocs && rc; i++) {
		if (F.allocs[i].addr == p) {
			F.allocs[i] = F.allocs[--F.nallocs];
			rc = 0;
		}
	}
	pthread_mutex_unlock(&F.lock);
	return rc;
}

/* Device memory (an allocation's), registered host memory, or memory CUDA knows nothing of. */
EXPORT fake_err cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p)
{
	/* the whole struct written, as the runtime writes it, through a real call to memset: a
	 * caller built with ASan sees a struct of its own that is too small (inlined stores would
	 * pass unseen) */
	void *(*volatile clear)(void *, int, size_t) = memset;
	int dev, reg;

	clear(a, 0, sizeof(*a));
	pthread_mutex_lock(&F.lock);
	dev = alloc_device(p, 1);
	reg = dev < 0 ? region_of(p, 1) : -1;
	if (dev >= 0) {
		a->type = MEMORY_DEVICE;
		a->device = dev;
		a->devicePointer = (void *)p;
	} else if (reg >= 0) {
		a->type = MEMORY_HOST;
		a->device = F.region[reg].device;
		a->hostPointer = (void *)p;
	}
	pthread_mutex_unlock(&F.lock);
	return 0;
}

EXPORT fake_err cudaHostRegister(void *p, size_t len, unsigned int flags)
{
	fake_err rc = 0;
	int i;

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
		F.region[F.nregions].device = current_device;
		F.nregions++;
		F.r.host_registered++;
	}
	pthread_mutex_unlock(&F.lock);
	return rc;
}

EXPORT fake_err cudaHostUnregister(void *p)
{
	fake_err rc = ERR_HOST_NOT_REGISTERED;
	int i;

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

/* On the calling thread's current device. */
EXPORT fake_err cudaStreamCreateWithFlags(fake_stream_t *out, unsigned int flags)
{
	struct stream *s = calloc(1, sizeof(*s));

	(void)flags;
	if (!s) {
		return ERR_MEMORY_ALLOCATION;
	}
	pthread_mutex_init(&s->lock, NULL);
	s->device = current_device;
	__atomic_add_fetch(&F.r.streams, 1, __ATOMIC_RELAXED);
	__atomic_or_fetch(&F.r.stream_devices, 1ull << s->device, __ATOMIC_RELAXED);
	*out = (fake_stream_t)s;
	return 0;
}

/*
 * Where a copy's device memory is (the caller checked it lies in the arena): the device of the
 * allocation holding it, checked against the current device and the stream's; -1 (counted)
 * when no allocation holds all of it.
 */
static int copy_device(struct stream *s, const void *dev_side, size_t len, const void *host,
		       bool *host_ok)
{
	int dev;

	pthread_mutex_lock(&F.lock);
	dev = alloc_device(dev_side, len);
	*host_ok = region_of(host, len) >= 0;
	pthread_mutex_unlock(&F.lock);
	if (dev < 0) {
		__atomic_add_fetch(&F.r.outside_allocation, 1, __ATOMIC_RELAXED);
		return -1;
	}
	__atomic_or_fetch(&F.r.copy_devices, 1ull << current_device, __ATOMIC_RELAXED);
	if (current_device != dev) {
		__atomic_add_fetch(&F.r.copies_off_device, 1, __ATOMIC_RELAXED);
	}
	if (s->device != dev) {
		__atomic_add_fetch(&F.r.copies_off_stream, 1, __ATOMIC_RELAXED);
	}
	return dev;
}

/* One queued copy: exactly one side in device memory, the host side registered. */
static fake_err queue(struct stream *s, void *dst, const void *src, size_t len)
{
	bool to_dev = on_device(dst, len), from_dev = on_device(src, len), host_ok;
	const void *host = to_dev ? src : dst;

	if (fail_now()) {
		return ERR_ILLEGAL_ADDRESS;
	}
	if (to_dev == from_dev) {
		__atomic_add_fetch(&F.r.bad_direction, 1, __ATOMIC_RELAXED);
		return ERR_INVALID_VALUE;
	}
	if (copy_device(s, to_dev ? dst : src, len, host, &host_ok) < 0) {
		return ERR_INVALID_VALUE;
	}
	if (!host_ok) {
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

EXPORT fake_err cudaMemcpyAsync(void *dst, const void *src, size_t len, fake_kind kind,
				fake_stream_t stream)
{
	(void)kind;
	__atomic_add_fetch(&F.r.async_calls, 1, __ATOMIC_RELAXED);
	return stream ? queue((struct stream *)stream, dst, src, len) : ERR_INVALID_VALUE;
}

EXPORT fake_err cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
				  size_t width, size_t height, fake_kind kind, fake_stream_t stream)
{
	fake_err rc = 0;
	size_t i;

	(void)kind;
	__atomic_add_fetch(&F.r.async_calls, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&F.r.grid_calls, 1, __ATOMIC_RELAXED);
	if (!stream || dpitch < width || spitch < width) {
		return ERR_INVALID_VALUE;
	}
	for (i = 0; i < height && !rc; i++) {
		rc = queue((struct stream *)stream, (uint8_t *)dst + i * dpitch,
			   (const uint8_t *)src + i * spitch, width);
	}
	return rc;
}

#if defined(HARP_CUDA_HEADERS) && CUDART_VERSION >= 13000
/* The batch's attributes as the runtime checks them (its header's rules). */
static bool batch_attrs_ok(size_t count, const struct cudaMemcpyAttributes *attrs,
			   const size_t *idxs, size_t nattrs)
{
	size_t i;

	if (!count || !attrs || !idxs || !nattrs || nattrs > count || idxs[0] != 0) {
		return false;
	}
	for (i = 0; i < nattrs; i++) {
		if ((i && idxs[i] <= idxs[i - 1]) || idxs[i] >= count ||
		    attrs[i].srcAccessOrder == cudaMemcpySrcAccessOrderInvalid ||
		    attrs[i].srcAccessOrder > cudaMemcpySrcAccessOrderAny) {
			return false;
		}
	}
	return true;
}

EXPORT cudaError_t cudaMemcpyBatchAsync(void *const *dsts, const void *const *srcs,
					const size_t *sizes, size_t count,
					struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs,
					size_t numAttrs, cudaStream_t stream)
{
	fake_err rc = 0;
	size_t i;

	__atomic_add_fetch(&F.r.async_calls, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&F.r.batch_calls, 1, __ATOMIC_RELAXED);
	if (!stream || !dsts || !srcs || !sizes ||
	    !batch_attrs_ok(count, attrs, attrsIdxs, numAttrs)) {
		__atomic_add_fetch(&F.r.batch_refused, 1, __ATOMIC_RELAXED);
		return ERR_INVALID_VALUE;
	}
	for (i = 0; i < count && !rc; i++) {
		rc = queue((struct stream *)stream, dsts[i], srcs[i], sizes[i]);
	}
	return rc;
}
#endif

EXPORT fake_err cudaStreamSynchronize(fake_stream_t stream)
{
	struct stream *s = (struct stream *)stream;
	size_t i;

	if (!s) {
		return ERR_INVALID_VALUE;
	}
	if (current_device != s->device) {
		__atomic_add_fetch(&F.r.waits_off_device, 1, __ATOMIC_RELAXED);
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

EXPORT fake_err cudaStreamDestroy(fake_stream_t stream)
{
	struct stream *s = (struct stream *)stream;

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
EXPORT fake_err cudaMemcpy(void *dst, const void *src, size_t len, fake_kind kind)
{
	(void)kind;
	if (!on_device(dst, len) && !on_device(src, len)) {
		return ERR_INVALID_VALUE;
	}
	memcpy(cpu_view(dst), cpu_view(src), len);
	return 0;
}

EXPORT const char *cudaGetErrorString(fake_err err)
{
	switch (err) {
	case 0:
		return "no error (stand-in)";
	case ERR_NO_DEVICE:
		return "no CUDA-capable device is detected (stand-in)";
	case ERR_INVALID_DEVICE:
		return "no device of that number (stand-in: FAKE_CUDART_DEVICES)";
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
	out->devices = device_count();
	pthread_mutex_unlock(&F.lock);
}
