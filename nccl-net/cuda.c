// SPDX-License-Identifier: Apache-2.0
/*
 * GPU buffers for the plugin (HARP_CUDA=on): libcudart is loaded at run time, so the plugin
 * links nothing of CUDA and loads on nodes without it. Each harp device gets a harp_device_ops
 * whose copies run on CUDA streams the plugin owns, one per engine (lane): harp hands over the
 * copies of a pass between GPU memory and its UMEM frames, then waits on the lane's stream once.
 * The frames are registered with cudaHostRegister, so the copies go straight between GPU and
 * frame memory: one copy each way, as the NIC's DMA would take it.
 *
 * Copies that form a grid (one length; sources, and destinations, each a fixed stride apart: a
 * message's frames, taken in order from the pool) go as one cudaMemcpy2DAsync; the rest in
 * cudaMemcpyBatchAsync calls of up to HP_CUDA_BATCH_MAX pieces where that is taken (HP_CUDA_BATCH
 * below; a grid then needs HP_CUDA_GRID_MIN copies), else one cudaMemcpyAsync each.
 *
 * One GPU per process, as NCCL runs one rank per GPU: the streams belong to the device of the
 * first GPU buffer registered, and every thread makes that device current before it creates a
 * stream, copies or waits. harp's keeper thread runs copies too and has no device of its own: a
 * stream it made before setting one would land on GPU 0, and every rank of a node would open a
 * context on GPU 0 and copy through it.
 *
 * CUDA's types, constants and function types come from CUDA's own cuda_runtime_api.h where the
 * build found it (HARP_CUDA_HEADERS: the compiler checks every call against CUDA's declaration);
 * elsewhere from the few declarations below, which say the same.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harp/harp.h"
#include "cuda.h"
#include "log.h"

#ifdef HARP_CUDA_HEADERS
#include <cuda_runtime_api.h>

typedef cudaError_t cuda_err;
typedef cudaStream_t cuda_stream;
typedef struct cudaPointerAttributes cuda_ptr_attrs;
#define CUDA_SUCCESS		 cudaSuccess
#define CUDA_ERR_HOST_REGISTERED cudaErrorHostMemoryAlreadyRegistered
#define CUDA_MEMCPY_DEFAULT	 cudaMemcpyDefault
#define CUDA_STREAM_NON_BLOCKING cudaStreamNonBlocking
#define CUDA_MEMORY_TYPE_DEVICE	 cudaMemoryTypeDevice
/* a pointer to runtime function sym, of the type CUDA declares for it */
#define CUDA_FN(field, sym, ret, params) __typeof__(sym) *field
#else
#include "cuda_fallback.h"

typedef hp_cuda_err cuda_err;
typedef hp_cuda_stream cuda_stream;
typedef struct hp_cuda_ptr_attrs cuda_ptr_attrs;
#define CUDA_SUCCESS		 HP_CUDA_SUCCESS
#define CUDA_ERR_HOST_REGISTERED HP_CUDA_ERR_HOST_REGISTERED
#define CUDA_MEMCPY_DEFAULT	 HP_CUDA_MEMCPY_DEFAULT
#define CUDA_STREAM_NON_BLOCKING HP_CUDA_STREAM_NON_BLOCKING
#define CUDA_MEMORY_TYPE_DEVICE	 HP_CUDA_MEMORY_TYPE_DEVICE
#define CUDA_FN(field, sym, ret, params) ret(*field) params
#endif

#define HP_CUDA_LANES 64 /* engines per device (HARP_QUEUES takes at most 64) */
/*
 * cudaMemcpyBatchAsync: scattered pieces (a receive's frames land anywhere in UMEM) in one call
 * instead of one each. Taken only with CUDA's own declaration of it, from CUDA 13's headers and
 * from a runtime of the same major version: CUDA 12.8 declared it with one more argument.
 */
#if defined(HARP_CUDA_HEADERS) && CUDART_VERSION >= 13000
#define HP_CUDA_BATCH	  1
#define HP_CUDA_BATCH_MAX 128 /* pieces a call */
#define HP_CUDA_GRID_MIN  8   /* a shorter grid goes in the batch, piece by piece: one call */
#endif

static struct {
	pthread_mutex_t lock;
	bool tried, ok;
	char why[256]; /* why not, when !ok */
	char name[64]; /* the library loaded */
	void *lib;
	int device; /* -1 until the first GPU buffer is registered; atomic loads and stores */
	CUDA_FN(get_device, cudaGetDevice, cuda_err, (int *));
	CUDA_FN(set_device, cudaSetDevice, cuda_err, (int));
	CUDA_FN(stream_create, cudaStreamCreateWithFlags, cuda_err, (cuda_stream *, unsigned int));
	CUDA_FN(stream_destroy, cudaStreamDestroy, cuda_err, (cuda_stream));
	CUDA_FN(stream_sync, cudaStreamSynchronize, cuda_err, (cuda_stream));
	CUDA_FN(memcpy_async, cudaMemcpyAsync, cuda_err,
		(void *, const void *, size_t, int, cuda_stream));
	CUDA_FN(memcpy_2d_async, cudaMemcpy2DAsync, cuda_err,
		(void *, size_t, const void *, size_t, size_t, size_t, int, cuda_stream));
	CUDA_FN(host_register, cudaHostRegister, cuda_err, (void *, size_t, unsigned int));
	CUDA_FN(host_unregister, cudaHostUnregister, cuda_err, (void *));
	CUDA_FN(pointer_attrs, cudaPointerGetAttributes, cuda_err,
		(cuda_ptr_attrs *, const void *));
	CUDA_FN(error_string, cudaGetErrorString, const char *, (cuda_err));
#ifdef HP_CUDA_BATCH
	CUDA_FN(memcpy_batch, cudaMemcpyBatchAsync, , ); /* NULL: not in this runtime */
#endif
} cu = { .lock = PTHREAD_MUTEX_INITIALIZER, .device = -1 };

/* One harp device's lanes, and what each did (written by the lane's one thread at a time). */
struct hp_cuda_dev {
	cuda_stream lane[HP_CUDA_LANES];
	struct hp_cuda_stats stats[HP_CUDA_LANES];
	bool told_unregistered; /* a frame region CUDA would not register: said once */
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *cuda_str(cuda_err e)
{
	const char *s = cu.error_string ? cu.error_string(e) : NULL;

	return s ? s : "unknown CUDA error";
}

/* Under cu.lock: libcudart loaded, every symbol found, and a device there. */
static bool cuda_load(void)
{
	static const char *const names[] = { "libcudart.so.13", "libcudart.so.12",
					     "libcudart.so" };
	const struct {
		void **fn;
		const char *sym;
	} syms[] = {
		{ (void **)&cu.get_device, "cudaGetDevice" },
		{ (void **)&cu.set_device, "cudaSetDevice" },
		{ (void **)&cu.stream_create, "cudaStreamCreateWithFlags" },
		{ (void **)&cu.stream_destroy, "cudaStreamDestroy" },
		{ (void **)&cu.stream_sync, "cudaStreamSynchronize" },
		{ (void **)&cu.memcpy_async, "cudaMemcpyAsync" },
		{ (void **)&cu.memcpy_2d_async, "cudaMemcpy2DAsync" },
		{ (void **)&cu.host_register, "cudaHostRegister" },
		{ (void **)&cu.host_unregister, "cudaHostUnregister" },
		{ (void **)&cu.pointer_attrs, "cudaPointerGetAttributes" },
		{ (void **)&cu.error_string, "cudaGetErrorString" },
	};
	size_t i;
	cuda_err e;
	int dev;

	for (i = 0; i < sizeof(names) / sizeof(names[0]) && !cu.lib; i++) {
		cu.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		snprintf(cu.name, sizeof(cu.name), "%s", names[i]);
	}
	if (!cu.lib) {
		snprintf(cu.why, sizeof(cu.why), "no libcudart (looked for %s, %s and %s: %s)",
			 names[0], names[1], names[2], dlerror());
		return false;
	}
	for (i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		*syms[i].fn = dlsym(cu.lib, syms[i].sym);
		if (!*syms[i].fn) {
			snprintf(cu.why, sizeof(cu.why), "%s has no %s", cu.name, syms[i].sym);
			return false;
		}
	}
#ifdef HP_CUDA_BATCH
	if (atoi(strrchr(cu.name, '.') + 1) == CUDART_VERSION / 1000) {
		*(void **)&cu.memcpy_batch = dlsym(cu.lib, "cudaMemcpyBatchAsync");
	}
#endif
	e = cu.get_device(&dev);
	if (e != CUDA_SUCCESS) {
		snprintf(cu.why, sizeof(cu.why), "%s finds no GPU: cudaGetDevice: %s", cu.name,
			 cuda_str(e));
		return false;
	}
	return true;
}

bool hp_cuda_start(void)
{
	pthread_mutex_lock(&cu.lock);
	if (!cu.tried) {
		cu.tried = true;
		cu.ok = cuda_load();
		if (!cu.ok && cu.lib) {
			dlclose(cu.lib);
			cu.lib = NULL;
		}
		if (cu.ok) {
			HP_INFO("HARP_CUDA=on: GPU buffers (NCCL_PTR_CUDA) move between GPU "
				"memory and harp's frames through %s, one copy each way (%s)",
				cu.name,
				hp_cuda_batching() ? "scattered frames batched: cudaMemcpyBatchAsync"
						   : "a call per frame, or per grid of frames");
		} else {
			HP_INFO("HARP_CUDA=on, but %s: GPU buffers go through host memory (NCCL "
				"stages them)",
				cu.why);
		}
	}
	pthread_mutex_unlock(&cu.lock);
	return cu.ok;
}

/*
 * The GPU buffers' device made current on the calling thread, before it creates a stream, copies
 * or waits. Asked each time rather than remembered per thread: the caller's own code (NCCL's
 * proxy thread) may set another device in between. The device is left current afterwards: on
 * NCCL's threads it is the rank's own already, and putting back what cudaGetDevice reports on a
 * thread that never chose one (harp's keeper) would make GPU 0 current, the context this avoids.
 */
static int cuda_on_device(void)
{
	int want = __atomic_load_n(&cu.device, __ATOMIC_ACQUIRE), now = -1;
	cuda_err e;

	if (want < 0) {
		return 0; /* no GPU buffer yet, so nothing to copy */
	}
	if (cu.get_device(&now) == CUDA_SUCCESS && now == want) {
		return 0;
	}
	e = cu.set_device(want);
	if (e != CUDA_SUCCESS) {
		HP_WARN("cudaSetDevice(%d), the device of the GPU buffers, on a thread where GPU %d "
			"was current: %s",
			want, now, cuda_str(e));
		return -EIO;
	}
	return 0;
}

static cuda_stream lane_stream(struct hp_cuda_dev *d, int lane)
{
	cuda_stream s;
	cuda_err e;

	if (lane < 0 || lane >= HP_CUDA_LANES) {
		HP_WARN("copy lane %d: the plugin keeps %d", lane, HP_CUDA_LANES);
		return NULL;
	}
	s = __atomic_load_n(&d->lane[lane], __ATOMIC_ACQUIRE);
	if (s) {
		return s;
	}
	/* one thread at a time per lane (harp's rule), so only the lane's first copy gets here,
	 * with the buffers' device current (cuda_on_device): the stream is that device's */
	e = cu.stream_create(&s, CUDA_STREAM_NON_BLOCKING);
	if (e != CUDA_SUCCESS) {
		HP_WARN("cudaStreamCreateWithFlags for copy lane %d: %s", lane, cuda_str(e));
		return NULL;
	}
	__atomic_store_n(&d->lane[lane], s, __ATOMIC_RELEASE);
	return s;
}

/* How many copies from v[0] form one grid: one length, each side at its own fixed stride. */
static int grid_run(const struct harp_copy *v, int n, size_t *dpitch, size_t *spitch)
{
	intptr_t dp, sp;
	int k;

	if (n < 2 || v[1].len != v[0].len) {
		return 1;
	}
	dp = (intptr_t)v[1].dst - (intptr_t)v[0].dst;
	sp = (intptr_t)v[1].src - (intptr_t)v[0].src;
	if (dp < (intptr_t)v[0].len || sp < (intptr_t)v[0].len) {
		return 1; /* overlapping, or going backwards: not a grid */
	}
	for (k = 2; k < n && v[k].len == v[0].len &&
		    (intptr_t)v[k].dst - (intptr_t)v[k - 1].dst == dp &&
		    (intptr_t)v[k].src - (intptr_t)v[k - 1].src == sp;
	     k++) {
	}
	*dpitch = (size_t)dp;
	*spitch = (size_t)sp;
	return k;
}

bool hp_cuda_batching(void)
{
#ifdef HP_CUDA_BATCH
	return cu.memcpy_batch != NULL;
#else
	return false;
#endif
}

/* A failed copy call, said with its first piece. */
static int copy_failed(enum harp_copy_dir dir, const struct harp_copy *c, int pieces, cuda_err e)
{
	HP_WARN("copy of %d piece%s %s GPU memory (the first %zu bytes, %p to %p): %s", pieces,
		pieces == 1 ? "" : "s", dir == HARP_COPY_TO_HOST ? "from" : "into", c->len, c->src,
		c->dst, cuda_str(e));
	return -EIO;
}

/* The single pieces of a copy gathered for one call: cudaMemcpyBatchAsync where the runtime has
 * it, else one cudaMemcpyAsync each. */
struct copy_batch {
	int n;
#ifdef HP_CUDA_BATCH
	void *dst[HP_CUDA_BATCH_MAX];
	const void *src[HP_CUDA_BATCH_MAX];
	size_t len[HP_CUDA_BATCH_MAX];
	const struct harp_copy *first;
#endif
};

static int batch_flush(struct copy_batch *b, struct hp_cuda_stats *st, cuda_stream s,
		       enum harp_copy_dir dir)
{
#ifdef HP_CUDA_BATCH
	/* the frames are read in stream order: an earlier copy on the lane may fill them */
	struct cudaMemcpyAttributes attr = { .srcAccessOrder = cudaMemcpySrcAccessOrderStream };
	size_t first = 0;
	cuda_err e;

	if (!b->n) {
		return 0;
	}
	st->calls++;
	e = b->n == 1 ? cu.memcpy_async(b->dst[0], b->src[0], b->len[0], CUDA_MEMCPY_DEFAULT, s)
		      : cu.memcpy_batch(b->dst, b->src, b->len, (size_t)b->n, &attr, &first, 1, s);
	if (e != CUDA_SUCCESS) {
		return copy_failed(dir, b->first, b->n, e);
	}
	b->n = 0;
#else
	(void)b;
	(void)st;
	(void)s;
	(void)dir;
#endif
	return 0;
}

/* A single piece: into the batch, or copied at once where there is none. */
static int batch_add(struct copy_batch *b, const struct harp_copy *c, struct hp_cuda_stats *st,
		     cuda_stream s, enum harp_copy_dir dir)
{
	cuda_err e;

#ifdef HP_CUDA_BATCH
	if (cu.memcpy_batch) {
		if (!b->n) {
			b->first = c;
		}
		b->dst[b->n] = c->dst;
		b->src[b->n] = c->src;
		b->len[b->n] = c->len;
		return ++b->n == HP_CUDA_BATCH_MAX ? batch_flush(b, st, s, dir) : 0;
	}
#else
	(void)b;
#endif
	st->calls++;
	e = cu.memcpy_async(c->dst, c->src, c->len, CUDA_MEMCPY_DEFAULT, s);
	return e == CUDA_SUCCESS ? 0 : copy_failed(dir, c, 1, e);
}

/*
 * Queues v's n pieces on the lane's stream: a run of pieces of one length at fixed strides as
 * one cudaMemcpy2DAsync, the pieces left over in one batch (or one call each). The pieces of one
 * call never overlap one another, so their order within it is free. The direction is for the
 * log: cudaMemcpyDefault reads it from the pointers.
 */
static int cuda_copy(void *arg, int lane, enum harp_copy_dir dir, const struct harp_copy *v,
		     int n)
{
	struct copy_batch b = { .n = 0 };
	struct hp_cuda_stats *st;
	size_t dpitch, spitch;
	cuda_stream s;
	cuda_err e;
	int i, k;

	if (cuda_on_device()) {
		return -EIO;
	}
	s = lane_stream(arg, lane);
	if (!s) {
		return -EIO;
	}
	st = &((struct hp_cuda_dev *)arg)->stats[lane];
	for (i = 0; i < n; i += k) {
		k = grid_run(v + i, n - i, &dpitch, &spitch);
#ifdef HP_CUDA_BATCH
		if (k < HP_CUDA_GRID_MIN && cu.memcpy_batch) {
			k = 1;
		}
#endif
		st->pieces += (uint64_t)k;
		st->bytes += (uint64_t)k * v[i].len;
		if (k == 1) {
			if (batch_add(&b, &v[i], st, s, dir)) {
				return -EIO;
			}
			continue;
		}
		st->calls++;
		e = cu.memcpy_2d_async(v[i].dst, dpitch, v[i].src, spitch, v[i].len, (size_t)k,
				       CUDA_MEMCPY_DEFAULT, s);
		if (e != CUDA_SUCCESS) {
			return copy_failed(dir, &v[i], k, e);
		}
	}
	return batch_flush(&b, st, s, dir);
}

static int cuda_wait(void *arg, int lane)
{
	struct hp_cuda_stats *st;
	uint64_t t0, took;
	cuda_stream s;
	cuda_err e;

	if (cuda_on_device()) {
		return -EIO;
	}
	s = lane_stream(arg, lane);
	if (!s) {
		return -EIO;
	}
	st = &((struct hp_cuda_dev *)arg)->stats[lane];
	t0 = mono_ns();
	e = cu.stream_sync(s);
	took = mono_ns() - t0;
	st->waits++;
	st->wait_ns += took;
	st->wait_max_ns = took > st->wait_max_ns ? took : st->wait_max_ns;
	if (e != CUDA_SUCCESS) {
		HP_WARN("waiting for the copies of lane %d: %s", lane, cuda_str(e));
		return -EIO;
	}
	return 0;
}

/* Frames CUDA will not pin still work, through its staging: said once, not an error. */
static int cuda_host_register(void *arg, void *addr, size_t len)
{
	struct hp_cuda_dev *d = arg;
	cuda_err e;

	if (cuda_on_device()) {
		return -EIO;
	}
	e = cu.host_register(addr, len, 0);
	if (e != CUDA_SUCCESS && e != CUDA_ERR_HOST_REGISTERED && !d->told_unregistered) {
		d->told_unregistered = true;
		HP_INFO("cudaHostRegister of harp's frames (%zu bytes): %s; copies go through "
			"CUDA's staging, more slowly",
			len, cuda_str(e));
	}
	return 0;
}

static void cuda_host_unregister(void *arg, void *addr)
{
	(void)arg;
	(void)cuda_on_device(); /* the frames were registered with the device current */
	(void)cu.host_unregister(addr); /* one that was never registered says so; nothing lost */
}

int hp_cuda_attach(struct harp_ctx *ctx, struct hp_cuda_dev **out)
{
	struct hp_cuda_dev *d = calloc(1, sizeof(*d));
	struct harp_device_ops ops = {
		.sz = sizeof(ops),
		.arg = d,
		.copy = cuda_copy,
		.wait = cuda_wait,
		.host_register = cuda_host_register,
		.host_unregister = cuda_host_unregister,
	};
	int err;

	if (!d) {
		return -ENOMEM;
	}
	err = harp_ctx__set_device(ctx, &ops);
	if (err) {
		free(d);
		return err;
	}
	*out = d;
	return 0;
}

void hp_cuda_stats(const struct hp_cuda_dev *d, struct hp_cuda_stats *out)
{
	int i;

	memset(out, 0, sizeof(*out));
	for (i = 0; d && i < HP_CUDA_LANES; i++) {
		const struct hp_cuda_stats *s = &d->stats[i];

		out->calls += s->calls;
		out->pieces += s->pieces;
		out->bytes += s->bytes;
		out->waits += s->waits;
		out->wait_ns += s->wait_ns;
		out->wait_max_ns = s->wait_max_ns > out->wait_max_ns ? s->wait_max_ns
								      : out->wait_max_ns;
	}
}

/* After the harp context that used d is destroyed: what its copies cost, then its streams go. */
void hp_cuda_detach(struct hp_cuda_dev *d)
{
	struct hp_cuda_stats st;
	double mib;
	int i;

	if (!d) {
		return;
	}
	hp_cuda_stats(d, &st);
	if (st.calls) {
		mib = (double)st.bytes / (1 << 20);
		HP_INFO("GPU copies: %llu calls for %llu pieces, %.1f MiB (%.1f calls per MiB); "
			"%llu waits, %.1f us each on average, %.1f ms the longest, %.1f ms in all",
			(unsigned long long)st.calls, (unsigned long long)st.pieces, mib,
			mib > 0 ? (double)st.calls / mib : 0.0, (unsigned long long)st.waits,
			st.waits ? (double)st.wait_ns / (double)st.waits / 1e3 : 0.0,
			(double)st.wait_max_ns / 1e6, (double)st.wait_ns / 1e6);
	}
	for (i = 0; i < HP_CUDA_LANES; i++) {
		if (d->lane[i]) {
			(void)cu.stream_destroy(d->lane[i]);
		}
	}
	free(d);
}

/*
 * The GPU whose memory p is (>= 0), or -1 when CUDA says p is not GPU memory, or -2 with *e set
 * when CUDA could not tell.
 */
static int cuda_gpu_of(const void *p, cuda_err *e)
{
	cuda_ptr_attrs a;

	memset(&a, 0, sizeof(a));
	*e = cu.pointer_attrs(&a, p);
	if (*e != CUDA_SUCCESS) {
		return -2;
	}
	return a.type == CUDA_MEMORY_TYPE_DEVICE ? a.device : -1;
}

/* The address of the last byte of addr+len (len 0: addr); false when the range wraps. */
static bool cuda_last_byte(const void *addr, size_t len, const void **last)
{
	uintptr_t a = (uintptr_t)addr;

	*last = addr;
	if (len && len - 1 > UINTPTR_MAX - a) {
		return false;
	}
	*last = (const void *)(a + (len ? len - 1 : 0));
	return true;
}

/*
 * Both ends of a GPU buffer are checked: a range that starts in an allocation and runs past its
 * end would have harp's copies read or write memory that is not the buffer's.
 */
int hp_cuda_check(const void *addr, size_t len, char *why, size_t whylen)
{
	const void *last;
	int first_gpu, last_gpu, dev;
	cuda_err e;

	if (!cuda_last_byte(addr, len, &last)) {
		snprintf(why, whylen, "%p+%zu runs past the end of the address space", addr, len);
		return -EINVAL;
	}
	first_gpu = cuda_gpu_of(addr, &e);
	if (first_gpu < 0) {
		snprintf(why, whylen, "%p+%zu is not GPU memory (%s)", addr, len,
			 first_gpu == -2 ? cuda_str(e) : "cudaPointerGetAttributes says so");
		return -EINVAL;
	}
	last_gpu = cuda_gpu_of(last, &e);
	if (last_gpu != first_gpu) {
		char what[96];

		if (last_gpu == -2) {
			snprintf(what, sizeof(what), "of unknown kind (%s)", cuda_str(e));
		} else if (last_gpu == -1) {
			snprintf(what, sizeof(what), "not GPU memory");
		} else {
			snprintf(what, sizeof(what), "on GPU %d", last_gpu);
		}
		snprintf(why, whylen, "%p+%zu starts in GPU %d's memory, but its last byte %p is %s: "
			 "the range runs past the end of its GPU allocation",
			 addr, len, first_gpu, last, what);
		return -EINVAL;
	}
	pthread_mutex_lock(&cu.lock);
	if (cu.device < 0) {
		/* the first GPU buffer's: the streams go there */
		__atomic_store_n(&cu.device, first_gpu, __ATOMIC_RELEASE);
	}
	dev = cu.device;
	pthread_mutex_unlock(&cu.lock);
	if (first_gpu != dev) {
		snprintf(why, whylen, "%p+%zu is on GPU %d, but this process copies on GPU %d "
			 "(one GPU per process)",
			 addr, len, first_gpu, dev);
		return -EINVAL;
	}
	return 0;
}

/*
 * Host memory must not be GPU memory at either end: harp reads and writes a host buffer itself,
 * and the CPU cannot reach GPU memory (what lies between the ends, CUDA cannot say in one call).
 */
int hp_cuda_check_host(const void *addr, size_t len, char *why, size_t whylen)
{
	const void *last;
	int gpu;
	cuda_err e;

	if (!cuda_last_byte(addr, len, &last)) {
		snprintf(why, whylen, "%p+%zu runs past the end of the address space", addr, len);
		return -EINVAL;
	}
	gpu = cuda_gpu_of(addr, &e);
	if (gpu >= 0) {
		snprintf(why, whylen, "%p+%zu is GPU %d's memory, registered as host memory "
			 "(NCCL_PTR_HOST); GPU memory is NCCL_PTR_CUDA",
			 addr, len, gpu);
		return -EINVAL;
	}
	gpu = cuda_gpu_of(last, &e);
	if (gpu >= 0) {
		snprintf(why, whylen, "%p+%zu is registered as host memory (NCCL_PTR_HOST), but its "
			 "last byte %p is GPU %d's memory: the range runs into a GPU allocation",
			 addr, len, last, gpu);
		return -EINVAL;
	}
	return 0;
}
