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
 * message's frames, taken in order from the pool) go as one cudaMemcpy2DAsync; the rest one
 * cudaMemcpyAsync each.
 *
 * One GPU per process, as NCCL runs one rank per GPU: the streams belong to the device that was
 * current when the first GPU buffer was registered, and a thread that copies makes it current.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harp/harp.h"
#include "plugin.h"
#include "cuda.h"

typedef int cuda_err;
typedef void *cuda_stream;
#define CUDA_SUCCESS 0
#define CUDA_ERR_HOST_REGISTERED 712 /* cudaErrorHostMemoryAlreadyRegistered */
#define CUDA_MEMCPY_DEFAULT 4	     /* cudaMemcpyDefault: the direction from the pointers */
#define CUDA_STREAM_NON_BLOCKING 1
#define CUDA_MEMORY_TYPE_DEVICE 2 /* cudaMemoryTypeDevice */
#define HP_CUDA_LANES 64	  /* engines per device (HARP_QUEUES takes at most 64) */

/* cudaPointerAttributes, as CUDA 11 and later lay it out */
struct cuda_ptr_attrs {
	int type;
	int device;
	void *device_pointer;
	void *host_pointer;
};

static struct {
	pthread_mutex_t lock;
	bool tried, ok;
	char why[256]; /* why not, when !ok */
	char name[64]; /* the library loaded */
	void *lib;
	int device; /* -1 until the first GPU buffer is registered */
	cuda_err (*get_device)(int *);
	cuda_err (*set_device)(int);
	cuda_err (*stream_create)(cuda_stream *, unsigned int);
	cuda_err (*stream_destroy)(cuda_stream);
	cuda_err (*stream_sync)(cuda_stream);
	cuda_err (*memcpy_async)(void *, const void *, size_t, int, cuda_stream);
	cuda_err (*memcpy_2d_async)(void *, size_t, const void *, size_t, size_t, size_t, int,
				    cuda_stream);
	cuda_err (*host_register)(void *, size_t, unsigned int);
	cuda_err (*host_unregister)(void *);
	cuda_err (*pointer_attrs)(struct cuda_ptr_attrs *, const void *);
	const char *(*error_string)(cuda_err);
} cu = { .lock = PTHREAD_MUTEX_INITIALIZER, .device = -1 };

/* One harp device's lanes. */
struct hp_cuda_dev {
	cuda_stream lane[HP_CUDA_LANES];
	bool told_unregistered; /* a frame region CUDA would not register: said once */
};

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
				"memory and harp's frames through %s, one copy each way",
				cu.name);
		} else {
			HP_INFO("HARP_CUDA=on, but %s: GPU buffers go through host memory (NCCL "
				"stages them)",
				cu.why);
		}
	}
	pthread_mutex_unlock(&cu.lock);
	return cu.ok;
}

/* The calling thread copies on the streams' device. */
static int cuda_on_device(void)
{
	static __thread int current = -1;
	cuda_err e;

	if (current == cu.device) {
		return 0;
	}
	e = cu.set_device(cu.device);
	if (e != CUDA_SUCCESS) {
		HP_WARN("cudaSetDevice(%d): %s", cu.device, cuda_str(e));
		return -EIO;
	}
	current = cu.device;
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
	/* one thread at a time per lane (harp's rule), so only the lane's first copy gets here */
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

static int cuda_copy(void *arg, int lane, enum harp_copy_dir dir, const struct harp_copy *v,
		     int n)
{
	cuda_stream s = lane_stream(arg, lane);
	size_t dpitch, spitch;
	cuda_err e;
	int i, k;

	/* the direction is for the log: cudaMemcpyDefault reads it from the pointers */
	if (!s || cuda_on_device()) {
		return -EIO;
	}
	for (i = 0; i < n; i += k) {
		k = grid_run(v + i, n - i, &dpitch, &spitch);
		if (k > 1) {
			e = cu.memcpy_2d_async(v[i].dst, dpitch, v[i].src, spitch, v[i].len,
					       (size_t)k, CUDA_MEMCPY_DEFAULT, s);
		} else {
			e = cu.memcpy_async(v[i].dst, v[i].src, v[i].len, CUDA_MEMCPY_DEFAULT, s);
		}
		if (e != CUDA_SUCCESS) {
			HP_WARN("copy of %zu bytes %s GPU memory (%p to %p): %s", v[i].len,
				dir == HARP_COPY_TO_HOST ? "from" : "into", v[i].src, v[i].dst,
				cuda_str(e));
			return -EIO;
		}
	}
	return 0;
}

static int cuda_wait(void *arg, int lane)
{
	cuda_stream s = lane_stream(arg, lane);
	cuda_err e;

	if (!s || cuda_on_device()) {
		return -EIO;
	}
	e = cu.stream_sync(s);
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

/* After the harp context that used d is destroyed. */
void hp_cuda_detach(struct hp_cuda_dev *d)
{
	int i;

	if (!d) {
		return;
	}
	for (i = 0; i < HP_CUDA_LANES; i++) {
		if (d->lane[i]) {
			(void)cu.stream_destroy(d->lane[i]);
		}
	}
	free(d);
}

int hp_cuda_check(const void *addr, size_t len, char *why, size_t whylen)
{
	struct cuda_ptr_attrs a = { 0 };
	cuda_err e = cu.pointer_attrs(&a, addr);
	int dev;

	if (e != CUDA_SUCCESS || a.type != CUDA_MEMORY_TYPE_DEVICE) {
		snprintf(why, whylen, "%p+%zu is not GPU memory (%s)", addr, len,
			 e != CUDA_SUCCESS ? cuda_str(e) : "cudaPointerGetAttributes says so");
		return -EINVAL;
	}
	pthread_mutex_lock(&cu.lock);
	if (cu.device < 0) {
		cu.device = a.device; /* the first GPU buffer's: the streams go there */
	}
	dev = cu.device;
	pthread_mutex_unlock(&cu.lock);
	if (a.device != dev) {
		snprintf(why, whylen, "%p+%zu is on GPU %d, but this process copies on GPU %d "
			 "(one GPU per process)",
			 addr, len, a.device, dev);
		return -EINVAL;
	}
	return 0;
}
