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
 * A third lane copies four pieces at one stride: one call (a cudaMemcpy2DAsync, or the batch a
 * grid that short joins). A fourth copies four pieces in reverse order, as a receive's frames
 * land scattered in UMEM: one cudaMemcpyBatchAsync where the plugin batches (CUDA 13's headers,
 * and the stand-in built from them), else one call each. The device's counters (hp_cuda_stats, which the plugin logs as it closes) must count each
 * call, piece, byte and wait, and the stand-in must have moved every byte to its place.
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
#include "log.h"

#define BUF_BYTES 4096
#define GPU	  1 /* the buffer's device */

/* What cuda.c hands to harp_ctx__set_device, kept here in harp's place. */
static struct harp_device_ops ops;
static unsigned char frames[4][BUF_BYTES];
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
	int pieces;   /* the frame cut in this many pieces, each to its place: a grid */
	bool reverse; /* the pieces listed last first: no grid */
	void *gpu_buf;
	int copy_rc, wait_rc;
};

/* One lane's first copy (frames into the GPU buffer) and its wait, on a thread of its own. */
static void *lane_main(void *arg)
{
	struct lane_run *l = arg;
	struct harp_copy c[4];
	size_t part = BUF_BYTES / (size_t)l->pieces;
	int i;

	for (i = 0; i < l->pieces; i++) {
		int at = l->reverse ? l->pieces - 1 - i : i;

		c[i] = (struct harp_copy){ .dst = (char *)l->gpu_buf + (size_t)at * part,
					   .src = frames[l->lane] + (size_t)at * part,
					   .len = part };
	}
	l->copy_rc = ops.copy(ops.arg, l->lane, HARP_COPY_TO_DEVICE, c, l->pieces);
	l->wait_rc = ops.wait(ops.arg, l->lane);
	return NULL;
}

static void run_lane(int lane, int pieces, bool reverse, void *gpu_buf)
{
	struct lane_run l = { .lane = lane, .pieces = pieces, .reverse = reverse, .gpu_buf = gpu_buf };
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
	int (*gpu_memcpy)(void *, const void *, size_t, int);
	struct fake_cudart_report r;
	struct hp_cuda_stats st;
	static unsigned char back[BUF_BYTES];
	bool batch;
	int i;
	struct hp_cuda_dev *dev = NULL;
	void *lib, *gpu_buf = NULL;
	char why[256];
	int rc;

	lib = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
	*(void **)&report = lib ? dlsym(lib, "fake_cudart_report") : NULL;
	*(void **)&set_device = lib ? dlsym(lib, "cudaSetDevice") : NULL;
	*(void **)&gpu_malloc = lib ? dlsym(lib, "cudaMalloc") : NULL;
	*(void **)&gpu_memcpy = lib ? dlsym(lib, "cudaMemcpy") : NULL;
	if (!report || !set_device || !gpu_malloc || !gpu_memcpy) {
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
	run_lane(0, 1, false, gpu_buf);
	/* lane 1: no registration at all (host_register is optional), a new thread again */
	run_lane(1, 1, false, gpu_buf);
	/* lane 2: four pieces at one stride, one call (a 2D copy, or the batch) */
	run_lane(2, 4, false, gpu_buf);
	/* lane 3: four pieces out of order, one batch where the plugin batches */
	memset(frames[3], 0xa5, BUF_BYTES);
	for (i = 0; i < BUF_BYTES; i += 512) {
		frames[3][i] = (unsigned char)(i / 512);
	}
	run_lane(3, 4, true, gpu_buf);
	memset(back, 0, sizeof(back));
	check(gpu_memcpy(back, gpu_buf, BUF_BYTES, 4 /* cudaMemcpyDefault */) == 0 &&
		      !memcmp(back, frames[3], BUF_BYTES),
	      "lane 3's four pieces did not all land in their places");
	ops.host_unregister(ops.arg, frames[0]);
	hp_cuda_stats(dev, &st);
	batch = hp_cuda_batching();
	printf("batching=%d\ncopy_calls=%" PRIu64 "\ncopy_pieces=%" PRIu64 "\ncopy_bytes=%" PRIu64
	       "\ncopy_waits=%" PRIu64 "\ncopy_wait_ns=%" PRIu64 "\n",
	       batch, st.calls, st.pieces, st.bytes, st.waits, st.wait_ns);
	check(st.calls == (batch ? 4u : 7u) && st.pieces == 10 && st.bytes == 4 * BUF_BYTES &&
		      st.waits == 4 && st.wait_max_ns <= st.wait_ns,
	      "the device counted %" PRIu64 " calls, %" PRIu64 " pieces, %" PRIu64 " bytes, %" PRIu64
	      " waits; expected %d (a grid of 4 in one call, 4 scattered in %s), 10, %d, 4",
	      st.calls, st.pieces, st.bytes, st.waits, batch ? 4 : 7,
	      batch ? "one batch" : "one call each", 4 * BUF_BYTES);
#if defined(HARP_CUDA_HEADERS) && CUDART_VERSION >= 13000
	check(batch, "built with CUDA %d's headers and the stand-in's cudaMemcpyBatchAsync, the "
		     "plugin does not batch",
	      CUDART_VERSION / 1000);
#endif
	hp_cuda_detach(dev);

	report(&r);
	printf("streams=%" PRIu64 "\nstream_devices=0x%" PRIx64 "\ncopy_devices=0x%" PRIx64 "\n",
	       r.streams, r.stream_devices, r.copy_devices);
	printf("copies_off_device=%" PRIu64 "\ncopies_off_stream=%" PRIu64
	       "\nwaits_off_device=%" PRIu64 "\nsyncs=%" PRIu64 "\n",
	       r.copies_off_device, r.copies_off_stream, r.waits_off_device, r.syncs);
	check(r.streams == 4 && r.stream_devices == 1u << GPU,
	      "%" PRIu64 " streams made on devices 0x%" PRIx64 " (bit mask), expected 4 on device "
	      "%d alone: a lane's stream was made before the buffer's device was current",
	      r.streams, r.stream_devices, GPU);
	check(r.copy_devices == 1u << GPU && !r.copies_off_device && !r.copies_off_stream &&
		      !r.waits_off_device && r.syncs == 4 && !r.batch_refused,
	      "copies queued with devices 0x%" PRIx64 " current (bit mask); %" PRIu64 " with "
	      "another device than the buffer's current, %" PRIu64 " on another device's stream, "
	      "%" PRIu64 " waits with another device current (of %" PRIu64 ")",
	      r.copy_devices, r.copies_off_device, r.copies_off_stream, r.waits_off_device,
	      r.syncs);
	printf("result=%s\n", failed ? "FAIL" : "ok");
	return failed;
}
