// SPDX-License-Identifier: Apache-2.0
/*
 * harp-cuda-lanes: the plugin's GPU copies (nccl-net/cuda.c, linked in) driven through the
 * harp_device_ops it hands to harp, against the stand-in libcudart with two devices
 * (FAKE_CUDART_DEVICES=2) and the GPU buffer on device 1.
 *
 * harp calls copy() and wait() from whichever thread runs an engine pass, harp's keeper among
 * them, which never sets a device; host_register() comes once per region of frames, before the
 * first copy, not necessarily on the same thread. So each lane's first copy here comes on a new
 * thread with device 0 current, after the frames were registered on another thread: the lane's
 * stream must still be device 1's, and so must the current device at every copy and wait (the
 * stand-in records both). A stream made before the device was set would be GPU 0's: on a node
 * of 8 GPUs, every rank would open a context on GPU 0 and copy through it.
 *
 * Prints key=value lines, result=ok or result=FAIL last; exits 0, 1 on a failed check, 77 when
 * the stand-in cannot be loaded.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harp/harp.h"
#include "cuda.h"
#include "fake_cudart.h"
#include "plugin.h"

#define BUF_BYTES 4096
#define GPU	  1 /* the buffer's device */

/* What cuda.c hands to harp_ctx__set_device, kept here in harp's place. */
static struct harp_device_ops ops;
static unsigned char frames[2][BUF_BYTES];
static int failed;

static void check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void check(bool ok, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		return;
	}
	failed = 1;
	fprintf(stderr, "harp-cuda-lanes: FAIL: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* cuda.c's log lines, on stderr */
void hp_log(enum hnccl_log_level level, unsigned long flags, const char *file, int line,
	    const char *fmt, ...)
{
	va_list ap;

	(void)flags;
	fprintf(stderr, "cuda.c %s:%d %s: ", file, line, level == HNCCL_LOG_WARN ? "WARN" : "INFO");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* harp's side of the handover: the ops are kept, the context is never touched */
int harp_ctx__set_device(struct harp_ctx *ctx, const struct harp_device_ops *o)
{
	(void)ctx;
	ops = *o;
	return 0;
}

struct lane_run {
	int lane;
	void *gpu_buf;
	int copy_rc, wait_rc;
};

/* One lane's first copy (frames into the GPU buffer) and its wait, on a thread of its own. */
static void *lane_main(void *arg)
{
	struct lane_run *l = arg;
	struct harp_copy c = { .dst = l->gpu_buf, .src = frames[l->lane], .len = BUF_BYTES };

	l->copy_rc = ops.copy(ops.arg, l->lane, HARP_COPY_TO_DEVICE, &c, 1);
	l->wait_rc = ops.wait(ops.arg, l->lane);
	return NULL;
}

static void run_lane(int lane, void *gpu_buf)
{
	struct lane_run l = { .lane = lane, .gpu_buf = gpu_buf };
	pthread_t th;
	int err = pthread_create(&th, NULL, lane_main, &l);

	check(!err, "pthread_create: %s", strerror(err));
	if (!err) {
		pthread_join(th, NULL);
	}
	check(l.copy_rc == 0 && l.wait_rc == 0, "lane %d: copy returned %d, wait %d", lane,
	      l.copy_rc, l.wait_rc);
}

int main(void)
{
	__typeof__(fake_cudart_report) *report;
	int (*set_device)(int);
	int (*gpu_malloc)(void **, size_t);
	struct fake_cudart_report r;
	struct hp_cuda_dev *dev = NULL;
	void *lib, *gpu_buf = NULL;
	char why[256];
	int rc;

	lib = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
	*(void **)&report = lib ? dlsym(lib, "fake_cudart_report") : NULL;
	*(void **)&set_device = lib ? dlsym(lib, "cudaSetDevice") : NULL;
	*(void **)&gpu_malloc = lib ? dlsym(lib, "cudaMalloc") : NULL;
	if (!report || !set_device || !gpu_malloc) {
		printf("harp-cuda-lanes: the stand-in libcudart.so.13 is not on LD_LIBRARY_PATH "
		       "(%s)\n",
		       lib ? "no fake_cudart_report" : dlerror());
		return 77;
	}
	check(hp_cuda_start(), "hp_cuda_start found no GPU");
	/* the buffer on GPU 1; this thread goes back to GPU 0 */
	check(set_device(GPU) == 0 && gpu_malloc(&gpu_buf, BUF_BYTES) == 0 && set_device(0) == 0,
	      "cudaMalloc on device %d failed (FAKE_CUDART_DEVICES=2?)", GPU);
	rc = hp_cuda_check(gpu_buf, BUF_BYTES, why, sizeof(why));
	check(rc == 0, "hp_cuda_check of GPU %d's buffer: %s", GPU, why);
	check(hp_cuda_attach(NULL, &dev) == 0 && ops.copy && ops.wait, "hp_cuda_attach failed");
	if (failed) {
		printf("result=FAIL\n");
		return 1;
	}
	/* lane 0's frames registered here first (harp's order), its first copy on a new thread */
	check(ops.host_register(ops.arg, frames[0], BUF_BYTES) == 0, "host_register failed");
	check(set_device(0) == 0, "cudaSetDevice(0) failed");
	run_lane(0, gpu_buf);
	/* lane 1: no registration at all (host_register is optional), a new thread again */
	run_lane(1, gpu_buf);
	ops.host_unregister(ops.arg, frames[0]);
	hp_cuda_detach(dev);

	report(&r);
	printf("streams=%" PRIu64 "\nstream_devices=0x%" PRIx64 "\ncopy_devices=0x%" PRIx64 "\n",
	       r.streams, r.stream_devices, r.copy_devices);
	printf("copies_off_device=%" PRIu64 "\ncopies_off_stream=%" PRIu64
	       "\nwaits_off_device=%" PRIu64 "\nsyncs=%" PRIu64 "\n",
	       r.copies_off_device, r.copies_off_stream, r.waits_off_device, r.syncs);
	check(r.streams == 2 && r.stream_devices == 1u << GPU,
	      "%" PRIu64 " streams made on devices 0x%" PRIx64 " (bit mask), expected 2 on device "
	      "%d alone: a lane's stream was made before the buffer's device was current",
	      r.streams, r.stream_devices, GPU);
	check(r.copy_devices == 1u << GPU && !r.copies_off_device && !r.copies_off_stream &&
		      !r.waits_off_device && r.syncs == 2,
	      "copies queued with devices 0x%" PRIx64 " current (bit mask); %" PRIu64 " with "
	      "another device than the buffer's current, %" PRIu64 " on another device's stream, "
	      "%" PRIu64 " waits with another device current (of %" PRIu64 ")",
	      r.copy_devices, r.copies_off_device, r.copies_off_stream, r.waits_off_device,
	      r.syncs);
	printf("result=%s\n", failed ? "FAIL" : "ok");
	return failed;
}
