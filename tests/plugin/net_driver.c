// SPDX-License-Identifier: Apache-2.0
/*
 * harp-net-driver: loads an NCCL net plugin (libnccl-net-harp.so) and drives one of its tables,
 * ncclNetPlugin_v8 ... v12, the way NCCL's proxy does. Two processes take part, --role server
 * and --role client, normally in two network namespaces; they swap listen handles through files
 * in a directory both can see.
 *
 * Scenarios are written once against struct net_api, which has the newest API's shape. One set
 * of small wrappers per version calls that version's table with its own argument lists: int
 * sizes in v8, a profiler from v10, a context in listen/connect and a finalize from v11, and each
 * version's properties struct (filled over poison, twice, to catch a member left unwritten).
 *
 * As in NCCL, a listen handle serves one connection and each rank both connects to its peer's
 * handle and accepts on its own, so connection "pair" i gives each process a send comm (to the
 * peer's listen i) and a recv comm (accepted on its own listen i). Both roles run the same code:
 * every message's size and bytes follow from (direction, pair, message index), so a receiver
 * checks every byte it gets, and a few bytes past it, against what the sender must have sent.
 *
 * Prints key=value lines on stdout (result=ok|FAIL last) and the plugin's log, NCCL-style, on
 * stderr. Exits 0 when the scenario held, 1 when it did not, 2 on bad usage.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef HARP_CUDA_HEADERS
#include <cuda_runtime_api.h> /* the driver's calls into libcudart typed as CUDA declares them */
#endif

#include "fake_cudart.h"
#include "net_shim.h"
#include "rendezvous.h"
#include "size_arg.h"
#include "stripe.h"

#define HANDLE_BYTES HNCCL_NET_HANDLE_MAXSIZE
#define MAX_PAIRS    64
#define MAX_WINDOW   16
#define MAX_GROUP    NET_SHIM_MAX_GROUP
#define DIR_C2S	     0  /* bytes the client sends to the server */
#define DIR_S2C	     1
#define KIB	     1024ul
#define MIB	     (1024ul * 1024ul)
#define GUARD_BYTES  8  /* past a received message: must keep their poison */
#define GUARD_BYTE   0xee

/* ---- options --------------------------------------------------------------------------------- */

struct opts {
	const char *plugin;
	int version;
	bool server;
	const char *role;
	const char *scenario;
	const char *dir;
	double timeout_s;
	long messages;		 /* 0: the scenario's default */
	int comms;		 /* 0: the scenario's default */
	size_t max_size;	 /* largest message basic and close-order use */
	const char *expect_warn; /* init-fail: text the one WARN line must hold */
	bool verbose;
	bool cuda;	/* flows in GPU memory (libcudart.so.13: the stand-in) */
	int cuda_device; /* --cuda: the GPU the flows' memory is on */
	bool host_only; /* getProperties must not offer NCCL_PTR_CUDA */
};

static void usage(void)
{
	fprintf(stderr,
		"usage: harp-net-driver --plugin SO --version 8..12 --scenario NAME [options]\n"
		"  --role server|client    side of the pair (not for init-fail)\n"
		"  --dir DIR               directory both sides share for handle files\n"
		"  --timeout SEC           give up after SEC seconds (default 120)\n"
		"  --cuda                  messages in GPU memory, from libcudart.so.13's cudaMalloc\n"
		"                          (basic, pipeline, many; HARP_CUDA=on); its counts checked\n"
		"  --cuda-device N         --cuda memory on GPU N (the stand-in's\n"
		"                          FAKE_CUDART_DEVICES must exceed N); the thread calling the\n"
		"                          plugin keeps GPU 0 current, as harp's keeper thread has none\n"
		"  --host-only             getProperties must offer host memory only\n"
		"  --messages N            messages per direction and comm (scenario default)\n"
		"  --comms N               connection pairs (scenario default)\n"
		"  --max-size BYTES        largest message of basic and close-order (default 64M)\n"
		"  --expect-warn TEXT      init-fail: the one WARN line must contain TEXT\n"
		"  --verbose               print the plugin's TRACE lines too\n"
		"scenarios: basic pipeline many stripes stripe-kill accept-stall accept-die\n"
		"           grouped close-order peer-kill peer-freeze idle-peer init-fail\n"
		"           copy-fail\n");
}

static int parse_opts(struct opts *o, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "plugin", required_argument, NULL, 'p' },
		{ "version", required_argument, NULL, 'V' },
		{ "role", required_argument, NULL, 'r' },
		{ "scenario", required_argument, NULL, 's' },
		{ "dir", required_argument, NULL, 'd' },
		{ "timeout", required_argument, NULL, 't' },
		{ "messages", required_argument, NULL, 'm' },
		{ "comms", required_argument, NULL, 'c' },
		{ "max-size", required_argument, NULL, 'M' },
		{ "expect-warn", required_argument, NULL, 'w' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "cuda", no_argument, NULL, 'C' },
		{ "cuda-device", required_argument, NULL, 'G' },
		{ "host-only", no_argument, NULL, 'H' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct opts){ .timeout_s = 120, .max_size = 64 * MIB };
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			o->plugin = optarg;
			break;
		case 'V':
			o->version = atoi(optarg);
			break;
		case 'r':
			o->role = optarg;
			break;
		case 's':
			o->scenario = optarg;
			break;
		case 'd':
			o->dir = optarg;
			break;
		case 't':
			o->timeout_s = atof(optarg);
			break;
		case 'm':
			o->messages = atol(optarg);
			break;
		case 'c':
			o->comms = atoi(optarg);
			break;
		case 'M': {
			uint64_t v;

			if (parse_size(optarg, &v)) {
				fprintf(stderr, "harp-net-driver: bad --max-size '%s'\n", optarg);
				return -1;
			}
			o->max_size = (size_t)v;
			break;
		}
		case 'w':
			o->expect_warn = optarg;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'C':
			o->cuda = true;
			break;
		case 'G':
			o->cuda_device = atoi(optarg);
			break;
		case 'H':
			o->host_only = true;
			break;
		default:
			usage();
			return -1;
		}
	}
	if (!o->plugin || !o->scenario || o->version < 8 || o->version > 12 ||
	    o->timeout_s <= 0 || o->messages < 0 || o->comms < 0 || o->comms > MAX_PAIRS) {
		usage();
		return -1;
	}
	if (strcmp(o->scenario, "init-fail") != 0) {
		if (!o->role || !o->dir ||
		    (strcmp(o->role, "server") != 0 && strcmp(o->role, "client") != 0)) {
			usage();
			return -1;
		}
		o->server = strcmp(o->role, "server") == 0;
	} else if (!o->expect_warn) {
		fprintf(stderr, "harp-net-driver: init-fail needs --expect-warn\n");
		return -1;
	}
	if (!o->role) {
		o->role = "driver";
	}
	if (o->cuda_device < 0 || o->cuda_device >= FAKE_CUDART_MAX_DEVICES ||
	    (o->cuda_device && !o->cuda)) {
		fprintf(stderr, "harp-net-driver: --cuda-device takes 0 to %d, with --cuda\n",
			FAKE_CUDART_MAX_DEVICES - 1);
		return -1;
	}
	if (!o->cuda && strcmp(o->scenario, "copy-fail") == 0) {
		fprintf(stderr, "harp-net-driver: copy-fail needs --cuda\n");
		return -1;
	}
	if (o->cuda && (o->host_only || (strcmp(o->scenario, "basic") != 0 &&
					 strcmp(o->scenario, "pipeline") != 0 &&
					 strcmp(o->scenario, "many") != 0 &&
					 strcmp(o->scenario, "stripes") != 0 &&
					 strcmp(o->scenario, "copy-fail") != 0))) {
		fprintf(stderr, "harp-net-driver: --cuda takes basic, pipeline, many, stripes or copy-fail, "
				"and not --host-only\n");
		return -1;
	}
	return 0;
}

/* ---- log ------------------------------------------------------------------------------------- */

static const char *log_role = "driver";
static bool log_verbose;
static atomic_int warn_lines;
static atomic_int closed_lines; /* INFO "harp closed on ...": finalize tore harp down */
static pthread_mutex_t warn_lock = PTHREAD_MUTEX_INITIALIZER;
static char first_warn[1024], last_warn[1024];

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A check did not hold: one line on stderr that says what and where. */
static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "harp-net-driver: FAIL: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void note(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "harp-net-driver: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void drv_logger(enum hnccl_log_level level, unsigned long flags, const char *file, int line,
		       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* NCCL's logger, in NCCL's line format: "host:pid:tid [dev] NCCL LEVEL message". */
static void drv_logger(enum hnccl_log_level level, unsigned long flags, const char *file, int line,
		       const char *fmt, ...)
{
	static const char *const names[] = { "NONE", "VERSION", "WARN", "INFO", "ABORT", "TRACE" };
	char msg[1024];
	va_list ap;

	(void)flags;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (level == HNCCL_LOG_WARN) {
		atomic_fetch_add(&warn_lines, 1);
		pthread_mutex_lock(&warn_lock);
		if (!first_warn[0]) {
			snprintf(first_warn, sizeof(first_warn), "%s", msg);
		}
		snprintf(last_warn, sizeof(last_warn), "%s", msg);
		pthread_mutex_unlock(&warn_lock);
		fprintf(stderr, "%s:%d:%d [0] %s:%d NCCL WARN %s\n", log_role, getpid(), gettid(),
			file ? file : "?", line, msg);
		return;
	}
	if (level == HNCCL_LOG_TRACE && !log_verbose) {
		return;
	}
	if (level == HNCCL_LOG_INFO && strstr(msg, "harp closed on ")) {
		atomic_fetch_add(&closed_lines, 1);
	}
	fprintf(stderr, "%s:%d:%d [0] NCCL %s %s\n", log_role, getpid(), gettid(),
		level < sizeof(names) / sizeof(names[0]) ? names[level] : "?", msg);
}

/* The profiler NCCL hands to v10 and later; harp raises no events yet, but any are counted. */
static atomic_int profiler_calls;

static hnccl_result_t drv_profiler(void **event_handle, int type, void *phandle, int64_t plugin_id,
				   void *ext_data)
{
	(void)phandle;
	(void)plugin_id;
	(void)ext_data;
	atomic_fetch_add(&profiler_calls, 1);
	if (event_handle && type == HNCCL_PROFILER_NET_EVENT_START) {
		*event_handle = NULL;
	}
	return HNCCL_SUCCESS;
}

/* ---- the driver's state ---------------------------------------------------------------------- */

struct loop_mark {
	double wall, cpu; /* seconds: CLOCK_MONOTONIC and this thread's CPU time */
	long voluntary, involuntary;
};

struct drv {
	struct opts o;
	void *lib;
	struct net_api api;
	void *ctx[2]; /* [1]: a second communicator's context (many) */
	bool expect_closed; /* close-order: finalize must say "harp closed" */
	int nctx;
	int ndev;
	int my_dir, peer_dir; /* DIR_* of the bytes this side sends and receives */
	uint64_t verified_bytes, sent_bytes, messages;
	uint64_t connect_retries, accept_retries, isend_retries, irecv_retries;
	int provoked_warns; /* WARN lines this driver asked for (a refused regMr) */
	/* basic: a registration deregistered only after finalize, as a late NCCL would */
	void *late_comm, *late_mh;
	/* peer-kill: errors are expected, and recorded rather than reported */
	bool expect_error;
	bool mark_flowing; /* write DIR/<role>.flowing when the first message completes */
	hnccl_result_t err_res;
	double err_time, last_done_time;
	struct timespec err_realtime;
	/* peer-kill: the longest pause of this side's own progress loop (off CPU or inside one
	 * plugin call) since the last message completed, so a late error can be told from a
	 * side that could not run */
	struct loop_stall {
		double wall, cpu; /* seconds */
		long voluntary, involuntary;	/* context switches during it */
	} stall;
	struct loop_mark mark; /* where the current round began */
	void *phandle_dummy[MAX_GROUP]; /* what v10+ isend/irecv get as profiler handles */
};

/* Calls the plugin; a failure is reported with the call's text and ends the caller with -1. */
#define NET_CALL(call)                                                                             \
	do {                                                                                       \
		hnccl_result_t res_ = (call);                                                      \
		if (res_ != HNCCL_SUCCESS) {                                                       \
			fail("%s: %s returned %d (%s)", __func__, #call, res_, net_res_name(res_));    \
			return -1;                                                                 \
		}                                                                                  \
	} while (0)

/* ---- GPU memory (--cuda): the stand-in libcudart's own calls -------------------------------- */

#define GPU_HELD_MAX 256 /* harp's unsolicited sends: HARP_UNSOL_MAX_BYTES */

#ifdef HARP_CUDA_HEADERS
#define GPU_FN(field, sym, ret, params) __typeof__(sym) *field
#define GPU_MEMCPY_DEFAULT		cudaMemcpyDefault
#else
#define GPU_FN(field, sym, ret, params) ret(*field) params
#define GPU_MEMCPY_DEFAULT		4 /* the direction read from the pointers */
#endif

static struct {
	void *lib;
	int device; /* --cuda-device */
	GPU_FN(malloc, cudaMalloc, int, (void **, size_t));
	GPU_FN(memcpy, cudaMemcpy, int, (void *, const void *, size_t, int));
	GPU_FN(set_device, cudaSetDevice, int, (int));
	GPU_FN(device_count, cudaGetDeviceCount, int, (int *));
	void (*report)(struct fake_cudart_report *);
} gpu;

static int gpu_load(int device)
{
	int n = 0;

	gpu.device = device;
	gpu.lib = dlopen("libcudart.so.13", RTLD_NOW | RTLD_GLOBAL);
	if (!gpu.lib) {
		fprintf(stderr, "harp-net-driver: --cuda: %s\n", dlerror());
		return -1;
	}
	*(void **)&gpu.malloc = dlsym(gpu.lib, "cudaMalloc");
	*(void **)&gpu.memcpy = dlsym(gpu.lib, "cudaMemcpy");
	*(void **)&gpu.set_device = dlsym(gpu.lib, "cudaSetDevice");
	*(void **)&gpu.device_count = dlsym(gpu.lib, "cudaGetDeviceCount");
	*(void **)&gpu.report = dlsym(gpu.lib, "fake_cudart_report");
	if (!gpu.malloc || !gpu.memcpy || !gpu.set_device || !gpu.device_count || !gpu.report) {
		fprintf(stderr, "harp-net-driver: --cuda: libcudart.so.13 is not the stand-in "
				"(tests/plugin/fake_cudart.c)\n");
		return -1;
	}
	if (gpu.device_count(&n) != 0 || n <= device) {
		fprintf(stderr, "harp-net-driver: --cuda-device %d: the stand-in has %d devices "
				"(FAKE_CUDART_DEVICES)\n",
			device, n);
		return -1;
	}
	return 0;
}

/*
 * --cuda-device N: the thread that calls the plugin has GPU 0 current whenever it does, not GPU N
 * where the flows' memory is: the driver makes N current only to allocate, and its own copies
 * (filling and reading back messages, between its calls into the plugin) put GPU 0 back, as
 * application code working on another GPU would. harp's keeper thread, which copies too, has no
 * device of its own. So harp must make GPU N current itself each time it makes a lane's stream,
 * queues copies or waits, not once per thread: the stand-in counts each that it does not.
 */
static int gpu_thread_device(int dev)
{
	if (gpu.device && gpu.set_device(dev) != 0) {
		fail("cudaSetDevice(%d) failed", dev);
		return -1;
	}
	return 0;
}

/* len bytes of GPU memory on --cuda-device */
static int gpu_alloc(void **p, size_t len)
{
	int rc;

	if (gpu_thread_device(gpu.device)) {
		return -1;
	}
	rc = gpu.malloc(p, len) != 0 ? -1 : 0;
	return gpu_thread_device(0) ? -1 : rc;
}

/* n bytes between GPU and host memory, at once (cudaMemcpyDefault) */
static int gpu_copy(void *dst, const void *src, size_t n)
{
	if (gpu_thread_device(0)) {
		return -1;
	}
	if (n && gpu.memcpy(dst, src, n, GPU_MEMCPY_DEFAULT) != 0) {
		fail("cudaMemcpy of %zu bytes (%p to %p) failed", n, src, dst);
		return -1;
	}
	return 0;
}

/*
 * The stand-in's counts: every byte sent went through an asynchronous copy out of GPU memory,
 * every byte received through one into it, each straight to or from registered frames (no
 * second copy), every copy waited for, and nothing left queued.
 */
static int gpu_check(uint64_t sent, uint64_t verified)
{
	struct fake_cudart_report r;
	int rc = 0;

	gpu.report(&r);
	printf("cuda_copies_to_host=%" PRIu64 "\ncuda_copies_to_device=%" PRIu64 "\n",
	       r.copies_to_host, r.copies_to_device);
	printf("cuda_bytes_to_host=%" PRIu64 "\ncuda_bytes_to_device=%" PRIu64 "\n",
	       r.bytes_to_host, r.bytes_to_device);
	printf("cuda_async_calls=%" PRIu64 "\ncuda_grid_calls=%" PRIu64 "\ncuda_batch_calls=%" PRIu64
	       "\ncuda_syncs=%" PRIu64 "\ncuda_streams=%" PRIu64 "\n",
	       r.async_calls, r.grid_calls, r.batch_calls, r.syncs, r.streams);
	if (r.batch_refused) {
		fail("GPU copies: %" PRIu64 " of %" PRIu64 " cudaMemcpyBatchAsync calls had "
		     "arguments the runtime refuses",
		     r.batch_refused, r.batch_calls);
		rc = -1;
	}
	printf("cuda_host_registered=%" PRIu64 "\ncuda_host_unregistered=%" PRIu64
	       "\ncuda_regions_left=%" PRIu64 "\n",
	       r.host_registered, r.host_unregistered, r.regions_now);
	printf("cuda_unregistered_copies=%" PRIu64 "\ncuda_unregistered_max=%" PRIu64
	       "\ncuda_bad_direction=%" PRIu64 "\ncuda_dropped=%" PRIu64 "\n",
	       r.host_unregistered_copies, r.host_unregistered_max, r.bad_direction, r.dropped);
	if (r.bytes_to_host < sent || r.bytes_to_device < verified) {
		fail("GPU copies moved %" PRIu64 " bytes out and %" PRIu64 " in, for %" PRIu64
		     " sent and %" PRIu64 " received",
		     r.bytes_to_host, r.bytes_to_device, sent, verified);
		rc = -1;
	}
	if (!r.syncs || !r.host_registered || r.regions_now) {
		fail("GPU copies: %" PRIu64 " waits, %" PRIu64 " frame regions registered, %" PRIu64
		     " still registered after unloading",
		     r.syncs, r.host_registered, r.regions_now);
		rc = -1;
	}
	printf("cuda_devices=%" PRIu64 "\ncuda_stream_devices=0x%" PRIx64
	       "\ncuda_copy_devices=0x%" PRIx64 "\n",
	       r.devices, r.stream_devices, r.copy_devices);
	printf("cuda_copies_off_device=%" PRIu64 "\ncuda_copies_off_stream=%" PRIu64
	       "\ncuda_waits_off_device=%" PRIu64 "\ncuda_outside_allocation=%" PRIu64 "\n",
	       r.copies_off_device, r.copies_off_stream, r.waits_off_device, r.outside_allocation);
	/* every stream made, copy queued and wait on the GPU of the memory it copies */
	if (r.stream_devices & ~(1ull << gpu.device) || r.copy_devices & ~(1ull << gpu.device) ||
	    r.copies_off_device || r.copies_off_stream || r.waits_off_device) {
		fail("GPU copies of GPU %d's memory: streams made on GPUs 0x%" PRIx64 " and copies "
		     "queued on GPUs 0x%" PRIx64 " (bit masks); %" PRIu64 " copies queued with "
		     "another GPU current, %" PRIu64 " on another GPU's stream, %" PRIu64 " waits "
		     "with another GPU current",
		     gpu.device, r.stream_devices, r.copy_devices, r.copies_off_device,
		     r.copies_off_stream, r.waits_off_device);
		rc = -1;
	}
	if (r.outside_allocation) {
		fail("GPU copies: %" PRIu64 " reached past their allocation's end",
		     r.outside_allocation);
		rc = -1;
	}
	/* Only a small send from host memory that came before its receive may be held (one copy
	 * into harp's memory) and then copied into GPU memory: at most GPU_HELD_MAX bytes. */
	printf("cuda_failed_calls=%" PRIu64 "\n", r.failed_calls);
	/* after a failure made on purpose (FAKE_CUDART_FAIL_AFTER), copies may be left queued */
	if (r.host_unregistered_max > GPU_HELD_MAX || r.bad_direction ||
	    (r.dropped && !r.failed_calls)) {
		fail("GPU copies: %" PRIu64 " to or from unregistered host memory (a second copy; "
		     "the longest %" PRIu64 " bytes, above %d), %" PRIu64 " not between GPU and "
		     "host, %" PRIu64 " never waited for",
		     r.host_unregistered_copies, r.host_unregistered_max, GPU_HELD_MAX,
		     r.bad_direction, r.dropped);
		rc = -1;
	}
	return rc;
}

/* ---- message contents ------------------------------------------------------------------------ */

static uint64_t splitmix(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Every byte of message k on pair `comm` in direction dir follows from this seed. */
static uint64_t msg_seed(int dir, int comm, uint64_t k)
{
	uint64_t s = ((uint64_t)dir << 60) ^ ((uint64_t)comm << 44) ^ k;

	return splitmix(&s);
}

static void pattern_fill(unsigned char *buf, size_t len, uint64_t seed)
{
	uint64_t s = seed, w;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		w = splitmix(&s);
		memcpy(buf + i, &w, 8);
	}
	if (i < len) {
		w = splitmix(&s);
		memcpy(buf + i, &w, len - i);
	}
}

/* The offset of the first byte that differs from the pattern, or -1 when all match. */
static long pattern_diff(const unsigned char *buf, size_t len, uint64_t seed)
{
	uint64_t s = seed, w;
	size_t i, j, n;

	for (i = 0; i < len; i += 8) {
		w = splitmix(&s);
		n = len - i < 8 ? len - i : 8;
		if (memcmp(buf + i, &w, n) != 0) {
			for (j = 0; j < n && buf[i + j] == ((unsigned char *)&w)[j]; j++) {
			}
			return (long)(i + j);
		}
	}
	return -1;
}

/* Sizes from a list, or varied within a slot the way NCCL's steps are. */
static size_t varied_size(int dir, int comm, uint64_t k, size_t cap)
{
	uint64_t s = msg_seed(dir, comm, k) ^ 0x5bd1e995ull, h = splitmix(&s);

	switch (k % 5) {
	case 0:
		return cap; /* a full slot, as most steps of a large transfer are */
	case 1:
		return h % (cap + 1);
	case 2:
		return h % 4097; /* small, as LL and LL128 steps */
	case 3:
		return k % 40 == 3 ? 0 : cap - h % 4096;
	default:
		return (size_t)(h % 64) * 4096;
	}
}

/* ---- handles through files ------------------------------------------------------------------- */

static int handles_publish(struct drv *d, const unsigned char *handles, int n)
{
	char path[PATH_MAX], err[PATH_MAX + 128];

	snprintf(path, sizeof(path), "%s/%s.handles", d->o.dir, d->o.role);
	if (rdv_publish(path, handles, (size_t)n * HANDLE_BYTES, err, sizeof(err))) {
		fail("%s", err);
		return -1;
	}
	return 0;
}

/* Waits (until deadline) for the peer's file of n handles and reads it. */
static int handles_fetch(struct drv *d, unsigned char *handles, int n, double deadline)
{
	char path[PATH_MAX], err[PATH_MAX + 128];

	snprintf(path, sizeof(path), "%s/%s.handles", d->o.dir, d->o.server ? "client" : "server");
	if (rdv_fetch(path, handles, (size_t)n * HANDLE_BYTES, deadline, err, sizeof(err))) {
		fail("%s (--scenario and --comms must match)", err);
		return -1;
	}
	return 0;
}

static void write_pid_file(struct drv *d)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.pid", d->o.dir, d->o.role);
	f = fopen(path, "w");
	if (f) {
		fprintf(f, "%d\n", getpid());
		fclose(f);
	}
}

/* Creates DIR/NAME (empty): a mark the peer waits for. */
static int mark_write(struct drv *d, const char *name)
{
	char path[PATH_MAX], err[PATH_MAX + 128];

	snprintf(path, sizeof(path), "%s/%s", d->o.dir, name);
	if (rdv_mark(path, err, sizeof(err))) {
		fail("%s", err);
		return -1;
	}
	return 0;
}

/* Waits for DIR/NAME without touching the plugin: 0 once it exists, -1 at the deadline. */
static int mark_wait(struct drv *d, const char *name, double deadline)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", d->o.dir, name);
	return rdv_wait(path, deadline);
}

/* ---- init and properties --------------------------------------------------------------------- */

/*
 * maxComms: HARP_CONNS_MAX over the stripes of a comm. HARP_STRIPES names them; else one per
 * engine (HARP_QUEUES, at most 8) where the engines have threads of their own, and one where not
 * (HARP_ENGINE_THREADS; auto: the plugin judges by the CPUs it may use, so either).
 */
static bool max_comms_ok(int max_comms)
{
	const char *stripes = getenv("HARP_STRIPES"), *threads = getenv("HARP_ENGINE_THREADS");
	const char *queues = getenv("HARP_QUEUES");
	int conns = getenv("HARP_CONNS_MAX") ? atoi(getenv("HARP_CONNS_MAX")) : 4095;
	int q = queues && !strpbrk(queues, ",-") && atoi(queues) > 0 ? atoi(queues) : 1;

	q = q < HP_STRIPES_MAX ? q : HP_STRIPES_MAX;
	if (stripes && atoi(stripes) > 0) {
		return max_comms == conns / atoi(stripes);
	}
	if (threads && !strcmp(threads, "on")) {
		return max_comms == conns / q;
	}
	if (threads && !strcmp(threads, "off")) {
		return max_comms == conns;
	}
	return max_comms == conns || max_comms == conns / q;
}

static int check_properties(struct drv *d, int dev, bool print)
{
	struct net_props a, b;
	int v = d->api.version, i;

	NET_CALL(d->api.get_properties(dev, &a, 0xa5));
	NET_CALL(d->api.get_properties(dev, &b, 0x5a));
	/* filled over two different poisons: a member left unwritten shows as a difference */
#define PROP_SAME(m)                                                                               \
	do {                                                                                       \
		if (memcmp(&a.m, &b.m, sizeof(a.m)) != 0) {                                        \
			fail("getProperties(%d) v%d left %s unwritten", dev, v, #m);               \
			return -1;                                                                 \
		}                                                                                  \
	} while (0)
	PROP_SAME(name);
	PROP_SAME(pci_path);
	PROP_SAME(guid);
	PROP_SAME(ptr_support);
	PROP_SAME(reg_is_global);
	PROP_SAME(force_flush);
	PROP_SAME(speed);
	PROP_SAME(port);
	PROP_SAME(latency);
	PROP_SAME(max_comms);
	PROP_SAME(max_recvs);
	PROP_SAME(net_device_type);
	PROP_SAME(net_device_version);
	PROP_SAME(vndevs);
	PROP_SAME(vdevs);
	PROP_SAME(max_p2p_bytes);
	PROP_SAME(max_coll_bytes);
	PROP_SAME(max_multi_request_size);
	PROP_SAME(rail_id);
	PROP_SAME(plane_id);
#undef PROP_SAME
	if (!a.name || !a.name[0]) {
		fail("getProperties(%d): empty name", dev);
		return -1;
	}
	if (!(a.ptr_support & HNCCL_PTR_HOST)) {
		fail("getProperties(%d): ptrSupport 0x%x lacks NCCL_PTR_HOST", dev, a.ptr_support);
		return -1;
	}
	if (d->o.cuda != !!(a.ptr_support & HNCCL_PTR_CUDA) && (d->o.cuda || d->o.host_only)) {
		fail("getProperties(%d): ptrSupport 0x%x %s NCCL_PTR_CUDA", dev, a.ptr_support,
		     d->o.cuda ? "lacks" : "offers");
		return -1;
	}
	if (a.max_recvs < 8 || a.max_recvs > MAX_GROUP) {
		fail("getProperties(%d): maxRecvs %d, expected 8 (NCCL's most)", dev, a.max_recvs);
		return -1;
	}
	if (a.speed <= 0 || a.max_comms < MAX_PAIRS || !(a.latency >= 0) || isinf(a.latency)) {
		fail("getProperties(%d): speed %d, maxComms %d, latency %f out of range", dev,
		     a.speed, a.max_comms, (double)a.latency);
		return -1;
	}
	/* maxComms is what the plugin takes: HARP_CONNS_MAX (default 4095), not a round number,
	 * shared by each comm's stripes (HARP_STRIPES, or by default one per engine where the
	 * engines have threads) */
	if (!max_comms_ok(a.max_comms)) {
		fail("getProperties(%d): maxComms %d, expected HARP_CONNS_MAX (%s) over the stripes "
		     "of a comm (HARP_STRIPES=%s)",
		     dev, a.max_comms,
		     getenv("HARP_CONNS_MAX") ? getenv("HARP_CONNS_MAX") : "4095 by default",
		     getenv("HARP_STRIPES") ? getenv("HARP_STRIPES") : "unset");
		return -1;
	}
	if (a.net_device_type != HNCCL_NET_DEVICE_HOST ||
	    a.net_device_version != HNCCL_NET_DEVICE_INVALID_VERSION) {
		fail("getProperties(%d): netDeviceType %d version 0x%x, expected a host device",
		     dev, a.net_device_type, a.net_device_version);
		return -1;
	}
	if (v >= 9 && (a.max_p2p_bytes == 0 || a.max_p2p_bytes > HNCCL_MAX_NET_SIZE_BYTES ||
		       a.max_coll_bytes == 0 || a.max_coll_bytes > HNCCL_MAX_NET_SIZE_BYTES)) {
		fail("getProperties(%d): maxP2pBytes %zu maxCollBytes %zu outside (0, 1 TiB]: NCCL "
		     "fails every connection set-up",
		     dev, a.max_p2p_bytes, a.max_coll_bytes);
		return -1;
	}
	if (v >= 9 && (a.vndevs != 1 || a.vdevs[0] != dev)) {
		fail("getProperties(%d): vProps {ndevs %d, devs[0] %d}, expected {1, %d}", dev,
		     a.vndevs, a.vdevs[0], dev);
		return -1;
	}
	if (v >= 11 && a.max_multi_request_size < 1) {
		fail("getProperties(%d): maxMultiRequestSize %d < 1", dev,
		     a.max_multi_request_size);
		return -1;
	}
	if (print) {
		printf("dev%d_name=%s\ndev%d_pci_path=%s\n", dev, a.name, dev,
		       a.pci_path ? a.pci_path : "(null)");
		printf("dev%d_guid=0x%016" PRIx64 "\ndev%d_speed_mbps=%d\n", dev, a.guid, dev,
		       a.speed);
		printf("dev%d_max_recvs=%d\ndev%d_max_comms=%d\n", dev, a.max_recvs, dev,
		       a.max_comms);
		printf("dev%d_max_p2p_bytes=%zu\ndev%d_reg_is_global=%d\n", dev, a.max_p2p_bytes,
		       dev, a.reg_is_global);
		if (v >= 12) {
			printf("dev%d_rail_id=%d\ndev%d_plane_id=%d\n", dev, a.rail_id, dev,
			       a.plane_id);
		}
	}
	for (i = 1; i < a.vndevs && v >= 9; i++) {
		note("dev %d lists virtual member %d", dev, a.vdevs[i]);
	}
	return 0;
}

/* init for one communicator, then (first time) devices and every device's properties. */
static int drv_init(struct drv *d, uint64_t comm_id)
{
	int ndev, i;

	NET_CALL(d->api.init(&d->ctx[d->nctx], comm_id));
	d->nctx++;
	if (d->api.version >= 11 && !d->ctx[d->nctx - 1]) {
		fail("init succeeded but returned a NULL context");
		return -1;
	}
	if (d->nctx > 1) {
		return 0;
	}
	if (!d->api.name || !d->api.name[0]) {
		fail("the table's name is empty");
		return -1;
	}
	NET_CALL(d->api.devices(&ndev));
	d->ndev = ndev;
	if (ndev < 1) {
		fail("devices() reported %d devices, expected at least 1", ndev);
		return -1;
	}
	printf("plugin_name=%s\nndev=%d\n", d->api.name, ndev);
	for (i = 0; i < ndev; i++) {
		if (check_properties(d, i, i == 0)) {
			return -1;
		}
	}
	return 0;
}

static int drv_finalize(struct drv *d)
{
	int i, rc = 0;

	for (i = 0; i < d->nctx; i++) {
		if (d->api.finalize) {
			hnccl_result_t res = d->api.finalize(d->ctx[i]);

			if (res != HNCCL_SUCCESS) {
				fail("finalize(ctx %d) returned %d (%s)", i, res, net_res_name(res));
				rc = -1;
			}
		}
		d->ctx[i] = NULL;
	}
	d->nctx = 0;
	return rc;
}

/* ---- connection set-up ----------------------------------------------------------------------- */

struct pair {
	void *ctx;
	int dev; /* both sides use the same device index for pair i (one rail) */
	void *listen;
	void *send;
	void *recv;
	unsigned char peer_handle[HANDLE_BYTES]; /* the one buffer every connect retry gets */
	bool orphan;				 /* close-order: never accepted */
	hnccl_result_t orphan_res;		 /* what connecting to the peer's orphan gave */
	bool orphan_connect_done;
};

/* Listens once per pair (after getProperties, as NCCL does at every set-up). */
static int pairs_listen(struct drv *d, struct pair *p, int n, unsigned char *handles)
{
	int i;

	for (i = 0; i < n; i++) {
		if (check_properties(d, p[i].dev, false)) {
			return -1;
		}
		memset(handles + (size_t)i * HANDLE_BYTES, 0xc3, HANDLE_BYTES);
		NET_CALL(d->api.listen(p[i].ctx, p[i].dev, handles + (size_t)i * HANDLE_BYTES,
				       &p[i].listen));
		if (!p[i].listen) {
			fail("listen %d succeeded without a listen comm", i);
			return -1;
		}
	}
	return 0;
}

/* Both sides listen on n handles, publish them and read the peer's. */
static int pairs_exchange(struct drv *d, struct pair *p, int n, double deadline)
{
	unsigned char *mine = calloc((size_t)n, HANDLE_BYTES);
	unsigned char *theirs = calloc((size_t)n, HANDLE_BYTES);
	int rc = -1, i;

	if (!mine || !theirs) {
		fail("out of memory");
		goto out;
	}
	if (pairs_listen(d, p, n, mine) || handles_publish(d, mine, n) ||
	    handles_fetch(d, theirs, n, deadline)) {
		goto out;
	}
	for (i = 0; i < n; i++) {
		memcpy(p[i].peer_handle, theirs + (size_t)i * HANDLE_BYTES, HANDLE_BYTES);
	}
	rc = 0;
out:
	free(mine);
	free(theirs);
	return rc;
}

static int connect_step(struct drv *d, struct pair *p, int i)
{
	struct hnccl_net_device_handle *dev_handle = NULL;
	hnccl_result_t res;

	res = d->api.connect(p->ctx, p->dev, p->peer_handle, &p->send, &dev_handle);
	if (p->orphan && res != HNCCL_SUCCESS) {
		p->orphan_res = res; /* the peer closed that listen comm: an error is right */
		p->orphan_connect_done = true;
		return 0;
	}
	if (res != HNCCL_SUCCESS) {
		fail("connect %d returned %d (%s)", i, res, net_res_name(res));
		return -1;
	}
	if (dev_handle) {
		fail("connect %d set a device handle (%p) for a host device", i,
		     (void *)dev_handle);
		return -1;
	}
	if (!p->send) {
		d->connect_retries++;
	} else if (p->orphan) {
		p->orphan_connect_done = true;
	}
	return 0;
}

static int accept_step(struct drv *d, struct pair *p, int i)
{
	struct hnccl_net_device_handle *dev_handle = NULL;

	NET_CALL(d->api.accept(p->listen, &p->recv, &dev_handle));
	if (dev_handle) {
		fail("accept %d set a device handle (%p) for a host device", i, (void *)dev_handle);
		return -1;
	}
	if (!p->recv) {
		d->accept_retries++;
		return 0;
	}
	/* one handle, one connection: NCCL closes the listen comm as soon as accept succeeds */
	NET_CALL(d->api.close_listen(p->listen));
	p->listen = NULL;
	return 0;
}

/*
 * Connects and accepts pairs [from, to) the way NCCL's set-up does: connect and accept never
 * block, so each is called again (connect with the same handle buffer) until it hands back a
 * comm, and the two interleave. Orphans are connected to but never accepted.
 */
static int pairs_connect(struct drv *d, struct pair *p, int from, int to, double deadline)
{
	int i, up;

	for (;;) {
		up = 0;
		for (i = from; i < to; i++) {
			if (!p[i].send && !p[i].orphan_connect_done && connect_step(d, &p[i], i)) {
				return -1;
			}
			if (!p[i].orphan && !p[i].recv && accept_step(d, &p[i], i)) {
				return -1;
			}
			up += p[i].orphan || (p[i].send && p[i].recv);
		}
		if (up == to - from) {
			return 0;
		}
		if (rdv_now() > deadline) {
			fail("set-up timed out: %d of %d pairs connected and accepted", up,
			     to - from);
			return -1;
		}
	}
}

/* ---- data: flows of messages through a window of slots --------------------------------------- */

struct flow {
	struct drv *d;
	void *comm;
	bool recv;
	int pair;	/* seeds the pattern and names messages in errors */
	int dir;	/* DIR_* of the bytes this flow carries */
	int tag;
	int window;	/* outstanding requests at most, as NCCL's NCCL_STEPS */
	size_t slot_bytes;
	const size_t *sizes; /* cycled through; NULL: varied_size() within slot_bytes */
	int nsizes;
	bool capacity_slack; /* receive capacity: odd messages get 4 KiB more than they need */
	bool flush_check;    /* after each receive, iflush must say "nothing to flush" */
	bool peer_may_abort; /* the peer may close its end at any time: remote errors are fine */
	/* sends past complete have no receive on the peer: a plugin may hold them back (a NULL
	 * request, as NCCL's IB transport and a striped harp comm do), so they need not post */
	bool post_may_wait;
	bool aborted;	   /* peer_may_abort: an error ended it */
	double aborted_at; /* when (rdv_now) */
	uint64_t total;	     /* messages to post; UINT64_MAX: until an error */
	uint64_t complete;   /* of those, how many must complete (the rest may stay out) */
	unsigned char *region; /* the slots, one after another, registered once (as NCCL does) */
	void *region_mh;
	unsigned char *buf[MAX_WINDOW]; /* slot i, inside region */
	unsigned char *host;		 /* --cuda: the region's bytes as the driver writes and reads
					  * them (copied to and from GPU memory); else region */
	unsigned char *hbuf[MAX_WINDOW]; /* slot i, inside host */
	void *mh[MAX_WINDOW];		/* all region_mh: each slot is inside that registration */
	void *req[MAX_WINDOW];
	uint64_t posted, done, filled; /* filled: messages whose bytes sit in their slot */
};

static size_t flow_size(const struct flow *f, uint64_t k)
{
	if (f->sizes) {
		return f->sizes[k % (uint64_t)f->nsizes];
	}
	return varied_size(f->dir, f->pair, k, f->slot_bytes);
}

static size_t flow_capacity(const struct flow *f, uint64_t k)
{
	if (f->capacity_slack) {
		return flow_size(f, k) + (k & 1 ? 4096 : 0);
	}
	return f->slot_bytes; /* NCCL posts whole slots */
}

/*
 * Allocates the flow's slots in one buffer and registers it once (NCCL_PTR_HOST), as NCCL does
 * with a connection's buffer: every isend and irecv names a part of that registration.
 */
static int flow_setup(struct flow *f)
{
	size_t len = (size_t)f->window * f->slot_bytes;
	bool cuda = f->d->o.cuda;
	void *dev = NULL;
	int i;

	f->host = malloc(len ? len : 1);
	if (!f->host || (cuda && gpu_alloc(&dev, len ? len : 1) != 0)) {
		fail("out of %s memory for %d slots of %zu bytes", f->host ? "GPU" : "host",
		     f->window, f->slot_bytes);
		return -1;
	}
	memset(f->host, 0, len);
	f->region = cuda ? dev : f->host;
	if (cuda && gpu_copy(f->region, f->host, len)) {
		return -1;
	}
	NET_CALL(f->d->api.reg_mr(f->comm, f->region, len, cuda ? HNCCL_PTR_CUDA : HNCCL_PTR_HOST,
				  &f->region_mh));
	for (i = 0; i < f->window; i++) {
		f->buf[i] = f->region + (size_t)i * f->slot_bytes;
		f->hbuf[i] = f->host + (size_t)i * f->slot_bytes;
		f->mh[i] = f->region_mh;
	}
	return 0;
}

/* --cuda: n bytes of slot's host copy at off written to GPU memory, or read back */
static int slot_put(struct flow *f, int slot, size_t off, size_t n)
{
	return f->d->o.cuda ? gpu_copy(f->buf[slot] + off, f->hbuf[slot] + off, n) : 0;
}

static int slot_get(struct flow *f, int slot, size_t off, size_t n)
{
	return f->d->o.cuda ? gpu_copy(f->hbuf[slot] + off, f->buf[slot] + off, n) : 0;
}

/* Deregisters (NCCL does that before closing the comm) and frees the slots. */
static int flow_teardown(struct flow *f)
{
	hnccl_result_t res;
	int rc = 0;

	if (f->region_mh) {
		res = f->d->api.dereg_mr(f->comm, f->region_mh);
		if (res != HNCCL_SUCCESS) {
			fail("pair %d: deregMr returned %d (%s)", f->pair, res, net_res_name(res));
			rc = -1;
		}
		f->region_mh = NULL;
	}
	free(f->host); /* GPU memory: the stand-in's arena keeps it */
	f->region = f->host = NULL;
	memset(f->buf, 0, sizeof(f->buf));
	memset(f->hbuf, 0, sizeof(f->hbuf));
	memset(f->mh, 0, sizeof(f->mh));
	return rc;
}

static void loop_mark(struct loop_mark *m)
{
	struct rusage ru;
	struct timespec ts;

	m->wall = rdv_now();
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	m->cpu = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	getrusage(RUSAGE_THREAD, &ru);
	m->voluntary = ru.ru_nvcsw;
	m->involuntary = ru.ru_nivcsw;
}

/* Keeps the longest pause between two rounds of the progress loop since the last message
 * completed (peer-kill only). */
static void loop_round(struct drv *d)
{
	struct loop_mark *last = &d->mark;
	struct loop_mark now;

	loop_mark(&now);
	if (now.wall - last->wall > d->stall.wall) {
		d->stall = (struct loop_stall){
			.wall = now.wall - last->wall,
			.cpu = now.cpu - last->cpu,
			.voluntary = now.voluntary - last->voluntary,
			.involuntary = now.involuntary - last->involuntary,
		};
	}
	*last = now;
}

/*
 * A data call failed: reported (-1); under peer-kill only recorded (-1, which ends the run); on a
 * flow the peer may abort at any time, noted, and the flow posts nothing more (0).
 */
static int flow_error(struct flow *f, const char *call, uint64_t k, hnccl_result_t res)
{
	struct drv *d = f->d;

	if (f->peer_may_abort && (res == HNCCL_REMOTE_ERROR || res == HNCCL_SYSTEM_ERROR)) {
		note("pair %d %s msg %" PRIu64 ": %s returned %d (%s): the peer has closed it",
		     f->pair, f->recv ? "recv" : "send", k, call, res, net_res_name(res));
		f->total = f->posted;
		f->complete = f->done; /* nothing more to wait for on a comm that failed */
		f->aborted = true;
		f->aborted_at = rdv_now();
		return 0;
	}
	if (d->expect_error) {
		if (!d->err_res) {
			loop_round(d); /* the round that saw the error counts too */
			d->err_res = res;
			d->err_time = rdv_now();
			clock_gettime(CLOCK_REALTIME, &d->err_realtime);
			note("pair %d %s msg %" PRIu64 ": %s returned %d (%s), as expected",
			     f->pair, f->recv ? "recv" : "send", k, call, res, net_res_name(res));
		}
		return -1;
	}
	fail("pair %d %s msg %" PRIu64 ": %s returned %d (%s)", f->pair, f->recv ? "recv" : "send",
	     k, call, res, net_res_name(res));
	return -1;
}

/* Posts message f->posted: 1 posted, 0 the plugin said "later", -1 failed. */
static int flow_post(struct flow *f)
{
	struct drv *d = f->d;
	int slot = (int)(f->posted % (uint64_t)f->window);
	size_t size = flow_size(f, f->posted), cap;
	void *req = f->req[slot]; /* still the last finished request, as NCCL leaves it */
	hnccl_result_t res;

	if (!f->recv) {
		if (f->filled <= f->posted) {
			pattern_fill(f->hbuf[slot], size, msg_seed(f->dir, f->pair, f->posted));
			if (slot_put(f, slot, 0, size)) {
				return -1;
			}
			f->filled = f->posted + 1;
		}
		res = d->api.isend(f->comm, f->buf[slot], size, f->tag, f->mh[slot],
				   d->phandle_dummy[0], &req);
		if (res != HNCCL_SUCCESS) {
			return flow_error(f, "isend", f->posted, res);
		}
		if (!req) {
			d->isend_retries++;
			return 0;
		}
	} else {
		cap = flow_capacity(f, f->posted);
		if (cap > size) {
			size_t guard = cap - size < GUARD_BYTES ? cap - size : GUARD_BYTES;

			memset(f->hbuf[slot] + size, GUARD_BYTE, guard);
			if (slot_put(f, slot, size, guard)) {
				return -1;
			}
		}
		if (d->api.preset_optional_recv && (f->posted & 1)) {
			req = (void *)HNCCL_NET_OPTIONAL_RECV_COMPLETION;
		}
		res = d->api.irecv(f->comm, 1, (void **)&f->buf[slot], &cap, &f->tag, &f->mh[slot],
				   d->phandle_dummy, &req);
		if (res != HNCCL_SUCCESS) {
			return flow_error(f, "irecv", f->posted, res);
		}
		if (req == (void *)HNCCL_NET_OPTIONAL_RECV_COMPLETION) {
			fail("pair %d irecv %" PRIu64 " left NCCL's optional-completion marker in "
			     "*request",
			     f->pair, f->posted);
			return -1;
		}
		if (!req) {
			d->irecv_retries++;
			return 0;
		}
	}
	f->req[slot] = req;
	f->posted++;
	return 1;
}

/* iflush on host memory: success and a NULL request ("nothing to flush"). */
static int flush_check(struct flow *f, int slot, size_t size)
{
	void *req = (void *)0x5eed; /* output only: must be overwritten */
	int isize = (int)size;

	NET_CALL(f->d->api.iflush(f->comm, 1, (void **)&f->buf[slot], &isize, &f->mh[slot], &req));
	if (req) {
		fail("pair %d: iflush on host memory returned request %p, expected NULL", f->pair,
		     req);
		return -1;
	}
	return 0;
}

/* A finished receive: its size, every byte, and the guard bytes past it. */
static int recv_verify(struct flow *f, int slot, uint64_t k, size_t size)
{
	size_t cap = flow_capacity(f, k), i;
	long bad;

	if (slot_get(f, slot, 0, cap < size + GUARD_BYTES ? cap : size + GUARD_BYTES)) {
		return -1;
	}
	bad = pattern_diff(f->hbuf[slot], size, msg_seed(f->dir, f->pair, k));
	if (bad >= 0) {
		fail("pair %d recv msg %" PRIu64 " (%zu bytes): byte %ld differs from what the "
		     "peer sent",
		     f->pair, k, size, bad);
		return -1;
	}
	for (i = size; i < cap && i < size + GUARD_BYTES; i++) {
		if (f->hbuf[slot][i] != GUARD_BYTE) {
			fail("pair %d recv msg %" PRIu64 ": byte %zu past the %zu-byte message was "
			     "written",
			     f->pair, k, i, size);
			return -1;
		}
	}
	f->d->verified_bytes += size;
	return f->flush_check ? flush_check(f, slot, size) : 0;
}

/* Tests the oldest outstanding request only, as NCCL does: 1 done, 0 not yet, -1 failed. */
static int flow_test(struct flow *f)
{
	struct drv *d = f->d;
	int slot = (int)(f->done % (uint64_t)f->window), done = 0, got = -1;
	size_t size = flow_size(f, f->done);
	hnccl_result_t res;

	/* NCCL passes no sizes array where it does not need one; every 7th message goes so */
	res = d->api.test(f->req[slot], &done, f->done % 7 == 6 ? NULL : &got);
	if (res != HNCCL_SUCCESS) {
		return flow_error(f, "test", f->done, res);
	}
	if (!done) {
		return 0;
	}
	if (f->done % 7 == 6) {
		got = (int)size;
	}
	if (got < 0 || (size_t)got != size) {
		fail("pair %d %s msg %" PRIu64 ": test() reported %d bytes, expected %zu", f->pair,
		     f->recv ? "recv" : "send", f->done, got, size);
		return -1;
	}
	if (f->recv) {
		if (recv_verify(f, slot, f->done, size)) {
			return -1;
		}
	} else {
		d->sent_bytes += size;
	}
	d->messages++;
	d->last_done_time = rdv_now();
	d->stall = (struct loop_stall){ 0 };
	f->done++;
	if (d->mark_flowing && d->messages == 1) {
		char name[32];

		snprintf(name, sizeof(name), "%s.flowing", d->o.role);
		mark_write(d, name);
	}
	return 1;
}

static bool flow_busy(const struct flow *f)
{
	return (f->posted < f->total && !(f->post_may_wait && f->posted >= f->complete)) ||
	       f->done < f->complete;
}

/*
 * NCCL's progress loop: each round posts what each flow's window allows, then tests only the
 * oldest request of each flow. Ends when every flow has posted its messages and completed the
 * ones it must, at the deadline, or at the first error.
 */
static int run_flows(struct drv *d, struct flow **flows, int n, double deadline)
{
	int i, rc;
	bool busy;

	loop_mark(&d->mark);
	do {
		if (d->expect_error) {
			loop_round(d);
		}
		busy = false;
		for (i = 0; i < n; i++) {
			struct flow *f = flows[i];

			while (f->posted < f->total && f->posted - f->done < (uint64_t)f->window) {
				rc = flow_post(f);
				if (rc < 0) {
					return -1;
				}
				if (rc == 0) {
					break;
				}
			}
			if (f->done < f->posted && f->done < f->complete && flow_test(f) < 0) {
				return -1;
			}
			busy |= flow_busy(f);
		}
		if (busy && rdv_now() > deadline) {
			fail("timed out with messages outstanding:");
			for (i = 0; i < n; i++) {
				note("  pair %d %s: posted %" PRIu64 " done %" PRIu64
				     " of %" PRIu64,
				     flows[i]->pair, flows[i]->recv ? "recv" : "send",
				     flows[i]->posted, flows[i]->done, flows[i]->complete);
			}
			return -1;
		}
	} while (busy);
	(void)d;
	return 0;
}

/* The two flows of pair i: what this side sends on its send comm, what it gets on its recv. */
static void flows_of_pair(struct drv *d, struct pair *p, int i, struct flow *tx, struct flow *rx,
			  const struct flow *shape)
{
	*tx = *shape;
	tx->d = d;
	tx->comm = p->send;
	tx->recv = false;
	tx->pair = i;
	tx->dir = d->my_dir;
	*rx = *shape;
	rx->d = d;
	rx->comm = p->recv;
	rx->recv = true;
	rx->pair = i;
	rx->dir = d->peer_dir;
	/* NCCL's tag is the sender's rank: the same for every message of a connection */
	tx->tag = rx->tag = 1 + i;
}

static int close_pair(struct drv *d, struct pair *p, bool recv_first)
{
	if (recv_first && p->recv) {
		NET_CALL(d->api.close_recv(p->recv));
		p->recv = NULL;
	}
	if (p->send) {
		NET_CALL(d->api.close_send(p->send));
		p->send = NULL;
	}
	if (p->recv) {
		NET_CALL(d->api.close_recv(p->recv));
		p->recv = NULL;
	}
	if (p->listen) {
		NET_CALL(d->api.close_listen(p->listen));
		p->listen = NULL;
	}
	return 0;
}

/* Runs pairs [base, base + n) through the flows shape describes, in both directions at once. */
static int exchange(struct drv *d, struct pair *p, int base, int n, const struct flow *shape,
		    double deadline)
{
	struct flow *fl = calloc((size_t)n * 2, sizeof(*fl));
	struct flow **run = calloc((size_t)n * 2, sizeof(*run));
	int i, rc = -1;

	if (!fl || !run) {
		fail("out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		flows_of_pair(d, &p[base + i], base + i, &fl[2 * i], &fl[2 * i + 1], shape);
		run[2 * i] = &fl[2 * i];
		run[2 * i + 1] = &fl[2 * i + 1];
	}
	for (i = 0; i < 2 * n; i++) {
		if (flow_setup(&fl[i])) {
			goto out;
		}
	}
	rc = run_flows(d, run, 2 * n, deadline);
out:
	for (i = 0; fl && i < 2 * n; i++) {
		if (flow_teardown(&fl[i])) {
			rc = -1;
		}
	}
	free(fl);
	free(run);
	return rc;
}

/* ---- scenarios ------------------------------------------------------------------------------- */

static int pairs_open(struct drv *d, struct pair *p, int n, double deadline)
{
	int i;

	for (i = 0; i < n; i++) {
		p[i].ctx = d->ctx[i % d->nctx];
	}
	if (pairs_exchange(d, p, n, deadline)) {
		return -1;
	}
	return pairs_connect(d, p, 0, n, deadline);
}

static int pairs_close(struct drv *d, struct pair *p, int n)
{
	int i, rc = 0;

	for (i = 0; i < n; i++) {
		if (close_pair(d, &p[i], false)) {
			rc = -1;
		}
	}
	return rc;
}

/* Memory NCCL_PTR_HOST does not cover must be refused with an error, not registered or crash. */
static int check_reg_refusals(struct drv *d, void *comm)
{
	static unsigned char buf[4096];
	void *mh = (void *)0x1;
	hnccl_result_t res;

	res = d->api.reg_mr(comm, buf, sizeof(buf), HNCCL_PTR_CUDA, &mh);
	if (res == HNCCL_SUCCESS) {
		fail("regMr of host memory as NCCL_PTR_CUDA succeeded");
		if (mh) {
			d->api.dereg_mr(comm, mh);
		}
		return -1;
	}
	d->provoked_warns++;
	note("regMr(NCCL_PTR_CUDA) refused with %d (%s), as it should be", res, net_res_name(res));
	if (d->api.reg_mr_dmabuf) {
		mh = (void *)0x1;
		res = d->api.reg_mr_dmabuf(comm, buf, sizeof(buf), HNCCL_PTR_DMABUF, 0, -1, &mh);
		if (res == HNCCL_SUCCESS) {
			fail("regMrDmaBuf succeeded without NCCL_PTR_DMABUF in ptrSupport");
			return -1;
		}
		d->provoked_warns++;
		note("regMrDmaBuf refused with %d (%s)", res, net_res_name(res));
	}
	return 0;
}

/*
 * refused_saying WHAT RES TEXT: a registration the plugin must refuse was refused, with one WARN
 * that holds TEXT (it names what was wrong); one that was taken is given back.
 */
static int refused_saying(struct drv *d, const char *what, hnccl_result_t res, void *comm,
			  void *mh, const char *text)
{
	int rc = 0;

	if (res == HNCCL_SUCCESS) {
		fail("regMr of %s succeeded; it must be refused", what);
		if (mh) {
			d->api.dereg_mr(comm, mh);
		}
		return -1;
	}
	d->provoked_warns++;
	pthread_mutex_lock(&warn_lock);
	if (!strstr(last_warn, text)) {
		fail("regMr of %s: refused (%s), but the WARN does not say '%s': %s", what,
		     net_res_name(res), text, last_warn);
		rc = -1;
	} else {
		note("regMr of %s refused: %s", what, last_warn);
	}
	pthread_mutex_unlock(&warn_lock);
	return rc;
}

/*
 * --cuda: a registration is checked at both ends of its range. GPU memory that runs past its
 * allocation's end (into bytes no allocation holds), GPU memory passed as host memory, and host
 * memory whose tail is GPU memory are each refused by name; the exact allocation is taken.
 */
static int check_gpu_reg_refusals(struct drv *d, void *comm)
{
	const size_t len = 8192;
	unsigned char *gpu_buf;
	void *mh = NULL;
	int rc = 0;

	if (gpu_alloc((void **)&gpu_buf, len)) {
		fail("cudaMalloc of %zu bytes failed", len);
		return -1;
	}
	NET_CALL(d->api.reg_mr(comm, gpu_buf, len, HNCCL_PTR_CUDA, &mh));
	NET_CALL(d->api.dereg_mr(comm, mh));
	mh = NULL;
	rc |= refused_saying(d, "GPU memory 1 byte past its allocation's end",
			     d->api.reg_mr(comm, gpu_buf, len + 1, HNCCL_PTR_CUDA, &mh), comm, mh,
			     "past the end of its GPU allocation");
	mh = NULL;
	rc |= refused_saying(d, "GPU memory as NCCL_PTR_HOST",
			     d->api.reg_mr(comm, gpu_buf, len, HNCCL_PTR_HOST, &mh), comm, mh,
			     "registered as host memory");
	/* the stand-in leaves unallocated bytes before each allocation: host memory to CUDA */
	mh = NULL;
	rc |= refused_saying(d, "host memory whose tail is GPU memory",
			     d->api.reg_mr(comm, gpu_buf - 64, 128, HNCCL_PTR_HOST, &mh), comm, mh,
			     "its last byte");
	return rc ? -1 : 0;
}

/* misuse_refused WHAT RES: a call NCCL should never make came back with an error (and the
 * plugin's one WARN, counted), not success and not a crash. */
static int misuse_refused(struct drv *d, const char *what, hnccl_result_t res)
{
	if (res == HNCCL_SUCCESS) {
		fail("%s succeeded; it must be refused", what);
		return -1;
	}
	d->provoked_warns++;
	note("%s refused with %d (%s)", what, res, net_res_name(res));
	return 0;
}

/*
 * Calls a broken caller makes, on open comms: a handle of the wrong kind, a junk request, a
 * memory handle deregistered twice or never registered, a send with such a handle.
 */
static int check_misuse_open(struct drv *d, struct pair *p)
{
	static unsigned char buf[4096];
	static long junk[64];
	void *mh = NULL, *req = NULL;
	int done = 0, rc = 0;

	rc |= misuse_refused(d, "closeRecv of a send comm", d->api.close_recv(p->send));
	rc |= misuse_refused(d, "test of a junk request", d->api.test(junk, &done, NULL));
	rc |= misuse_refused(d, "deregMr of a junk handle", d->api.dereg_mr(p->send, junk));
	NET_CALL(d->api.reg_mr(p->send, buf, sizeof(buf), HNCCL_PTR_HOST, &mh));
	NET_CALL(d->api.dereg_mr(p->send, mh));
	rc |= misuse_refused(d, "deregMr twice", d->api.dereg_mr(p->send, mh));
	rc |= misuse_refused(d, "isend with a deregistered memory handle",
			     d->api.isend(p->send, buf, 8, 1, mh, NULL, &req));
	if (req) {
		fail("isend with a deregistered memory handle gave a request");
		rc = -1;
	}
	/* handles of the wrong kind: a comm where a memory handle goes, and the other way round */
	rc |= misuse_refused(d, "isend with a comm as its memory handle",
			     d->api.isend(p->send, buf, 8, 1, p->send, NULL, &req));
	rc |= misuse_refused(d, "deregMr of a comm", d->api.dereg_mr(p->send, p->recv));
	NET_CALL(d->api.reg_mr(p->recv, buf, sizeof(buf), HNCCL_PTR_HOST, &mh));
	{
		void *mh2 = NULL, *data = buf, *junk_mh = junk;
		size_t cap = sizeof(buf);
		int tag = 1;

		rc |= misuse_refused(d, "regMr with a memory handle as its comm",
				     d->api.reg_mr(mh, buf, sizeof(buf), HNCCL_PTR_HOST, &mh2));
		rc |= misuse_refused(d, "irecv with a junk memory handle",
				     d->api.irecv(p->recv, 1, &data, &cap, &tag, &junk_mh, NULL,
						  &req));
		rc |= misuse_refused(d, "irecv with a send comm as its memory handle",
				     d->api.irecv(p->recv, 1, &data, &cap, &tag, &p->send, NULL,
						  &req));
		if (req || mh2) {
			fail("a refused irecv or regMr gave a request or a handle");
			rc = -1;
		}
	}
	NET_CALL(d->api.dereg_mr(p->recv, mh));
	return rc ? -1 : 0;
}

/* And on comms NCCL closed already: closing again, sending on one, testing a stale request. */
static int check_misuse_closed(struct drv *d, void *send, void *recv, void *listen)
{
	static unsigned char buf[4096];
	void *req = NULL;
	int rc = 0;

	rc |= misuse_refused(d, "closeSend twice", d->api.close_send(send));
	rc |= misuse_refused(d, "closeRecv twice", d->api.close_recv(recv));
	if (listen) { /* some scenarios close it as soon as they have accepted */
		rc |= misuse_refused(d, "closeListen twice", d->api.close_listen(listen));
	}
	rc |= misuse_refused(d, "isend on a closed send comm",
			     d->api.isend(send, buf, 8, 1, NULL, NULL, &req));
	return rc ? -1 : 0;
}

static int set_net_attr_hint(struct drv *d)
{
	struct hnccl_net_attr attr = {
		.sendCommAttr = { 1, 1, 1, 1 },
		.recvCommAttr = { 1, 1, 1, 1 },
		.op = (uint32_t)HNCCL_NET_ATTR_UNDEF,
		.algo = (uint32_t)HNCCL_NET_ATTR_UNDEF,
		.proto = (uint32_t)HNCCL_NET_ATTR_UNDEF,
	};

	if (d->api.set_net_attr) {
		d->api.set_net_attr(d->ctx[0], &attr); /* NCCL ignores the result */
	}
	return 0;
}

/* host memory registered in basic and deregistered after its comm's close, or finalize */
static unsigned char late_buf[2][4096];

static int scenario_basic(struct drv *d, double deadline)
{
	static const size_t all_sizes[] = { 0, 1, 4095, 4096, 1 * MIB, 64 * MIB };
	size_t sizes[6];
	struct pair p[1] = { { 0 } };
	struct flow shape = { .window = 1, .capacity_slack = true, .flush_check = true };
	int n = 0, i, rc;

	for (i = 0; i < 6; i++) {
		if (all_sizes[i] <= d->o.max_size) {
			sizes[n++] = all_sizes[i];
		}
	}
	shape.sizes = sizes;
	shape.nsizes = n;
	shape.slot_bytes = sizes[n - 1] + 4096;
	shape.total = shape.complete = d->o.messages ? (uint64_t)d->o.messages : (uint64_t)n;
	if (drv_init(d, 0x1234) || set_net_attr_hint(d) || pairs_open(d, p, 1, deadline) ||
	    check_reg_refusals(d, p[0].send) ||
	    (d->o.cuda && check_gpu_reg_refusals(d, p[0].recv))) {
		pairs_close(d, p, 1);
		return -1;
	}
	rc = exchange(d, p, 0, 1, &shape, deadline);
	if (!rc && check_misuse_open(d, &p[0])) {
		rc = -1;
	}
	void *send = p[0].send, *recv = p[0].recv, *listen = p[0].listen, *send_mh = NULL;

	/* one registration per comm, kept past its comm's close: deregistered after the close
	 * (send's, here) and after finalize (recv's, in main: late_dereg) */
	if (!rc && (d->api.reg_mr(send, late_buf[0], sizeof(late_buf[0]), HNCCL_PTR_HOST,
				  &send_mh) != HNCCL_SUCCESS ||
		    d->api.reg_mr(recv, late_buf[1], sizeof(late_buf[1]), HNCCL_PTR_HOST,
				  &d->late_mh) != HNCCL_SUCCESS)) {
		fail("regMr of host memory to deregister late failed");
		rc = -1;
	}
	d->late_comm = recv;
	if (pairs_close(d, p, 1)) {
		rc = -1;
	}
	if (send_mh && d->api.dereg_mr(send, send_mh) != HNCCL_SUCCESS) {
		fail("deregMr after its send comm was closed (harp still open) failed");
		rc = -1;
	}
	if (!rc && check_misuse_closed(d, send, recv, listen)) {
		rc = -1;
	}
	return rc;
}

/*
 * After finalize (main): the registration basic kept is deregistered, as an NCCL that frees its
 * buffers after finalizing would. harp closed at finalize (v11 and later): the call must
 * succeed without touching what harp freed (the ASan build reads it) and say so in one WARN; v8
 * to v10 have no finalize, so harp is still open and it is an ordinary deregMr, without a WARN.
 */
static int late_dereg(struct drv *d)
{
	int warns = atomic_load(&warn_lines);
	bool closed = d->api.finalize != NULL;
	hnccl_result_t res;
	int rc = 0;

	res = d->api.dereg_mr(d->late_comm, d->late_mh);
	d->late_mh = NULL;
	if (res != HNCCL_SUCCESS) {
		fail("deregMr after %s returned %d (%s)", closed ? "finalize" : "its comm closed",
		     res, net_res_name(res));
		rc = -1;
	}
	warns = atomic_load(&warn_lines) - warns;
	if (warns != (closed ? 1 : 0)) {
		fail("deregMr after %s: %d WARN lines, expected %d", closed ? "finalize" : "close",
		     warns, closed ? 1 : 0);
		return -1;
	}
	if (closed) {
		pthread_mutex_lock(&warn_lock);
		if (!strstr(last_warn, "after harp closed")) {
			fail("deregMr after finalize: the WARN does not say it came after harp "
			     "closed: %s",
			     last_warn);
			rc = -1;
		} else {
			note("deregMr after finalize: %s", last_warn);
		}
		pthread_mutex_unlock(&warn_lock);
		d->provoked_warns++;
	}
	return rc;
}

static int scenario_pipeline(struct drv *d, double deadline)
{
	int n = d->o.comms ? d->o.comms : 2;
	struct pair p[MAX_PAIRS] = { { 0 } };
	struct flow shape = { .window = 8, .slot_bytes = 512 * KIB };
	int rc;

	shape.total = shape.complete = d->o.messages ? (uint64_t)d->o.messages : 2000;
	if (drv_init(d, 0x2345) || pairs_open(d, p, n, deadline)) {
		pairs_close(d, p, n);
		return -1;
	}
	rc = exchange(d, p, 0, n, &shape, deadline);
	if (pairs_close(d, p, n)) {
		rc = -1;
	}
	return rc;
}

/*
 * stripes: on one pair, both ways, messages one byte each side of every place where a comm of 2
 * to 8 stripes cuts buffers of three capacities (stripe.h), and the empty and full ones. Each
 * receive is a whole slot, as NCCL posts them: every byte must land where it was sent, and none
 * past the message's end be written (the guard bytes), whatever HARP_STRIPES the run has.
 */
static int scenario_stripes(struct drv *d, double deadline)
{
	static const size_t caps[] = { 2 * HP_STRIPE_MIN, 512 * KIB + 4097, 4 * MIB + 12345 };
	static size_t sizes[3 * HP_STRIPES_MAX * HP_STRIPES_MAX + 4];
	struct pair p[1] = { { 0 } };
	int i, k, s, n, m, rc = 0;

	if (drv_init(d, 0x3456) || pairs_open(d, p, 1, deadline)) {
		pairs_close(d, p, 1);
		return -1;
	}
	for (i = 0; i < 3 && !rc; i++) {
		struct flow shape = { .window = 4, .slot_bytes = caps[i] };

		m = 0;
		sizes[m++] = 0;
		sizes[m++] = 1;
		for (k = 2; k <= HP_STRIPES_MAX; k++) {
			n = hp_stripe_count(caps[i], k);
			for (s = 1; s < n; s++) {
				size_t off = hp_stripe_off(caps[i], n, s);

				sizes[m++] = off - 1;
				sizes[m++] = off;
				sizes[m++] = off + 1;
			}
		}
		sizes[m++] = caps[i] - 1;
		sizes[m++] = caps[i];
		shape.sizes = sizes;
		shape.nsizes = m;
		shape.total = shape.complete = d->o.messages ? (uint64_t)d->o.messages : (uint64_t)m;
		note("stripes: %d messages into slots of %zu bytes", m, caps[i]);
		rc = exchange(d, p, 0, 1, &shape, deadline);
	}
	if (pairs_close(d, p, 1)) {
		rc = -1;
	}
	return rc;
}

/*
 * stripe-kill (a fault-injection build; the script gives the client HARP_FAULT_DEAF_CONN=1): two
 * pairs, set up one after the other, so that the client's first connection is one of pair 0's
 * stripes. Mid-transfer it hears nothing more. Pair 0 must fail on this side (one of its comms
 * with ncclRemoteError or ncclSystemError, within the peer timeout: nothing hangs), while pair 1,
 * on the same engines, carries all of its messages, each verified.
 */
#define KILL_MESSAGES 400

static int scenario_stripe_kill(struct drv *d, double deadline)
{
	struct pair p[2] = { { 0 } };
	struct flow fl[2][2], *run[4];
	struct flow shape = { .window = 8, .slot_bytes = 512 * KIB };
	double started;
	int i, rc;

	if (drv_init(d, 0x4567) || pairs_exchange(d, p, 2, deadline) ||
	    pairs_connect(d, p, 0, 1, deadline) || pairs_connect(d, p, 1, 2, deadline)) {
		pairs_close(d, p, 2);
		return -1;
	}
	shape.total = shape.complete = d->o.messages ? (uint64_t)d->o.messages : KILL_MESSAGES;
	memset(fl, 0, sizeof(fl));
	for (i = 0; i < 2; i++) {
		flows_of_pair(d, &p[i], i, &fl[i][0], &fl[i][1], &shape);
		run[2 * i] = &fl[i][0];
		run[2 * i + 1] = &fl[i][1];
	}
	for (i = 0; i < 2; i++) {
		fl[0][i].peer_may_abort = true; /* pair 0 may fail, with the error of a dead stripe */
	}
	rc = 0;
	for (i = 0; i < 4 && !rc; i++) {
		rc = flow_setup(run[i]);
	}
	started = rdv_now();
	if (!rc) {
		rc = run_flows(d, run, 4, deadline);
	}
	if (!rc && fl[1][0].done + fl[1][1].done != 2 * shape.total) {
		fail("stripe-kill: pair 1 completed %" PRIu64 " and %" PRIu64 " of %" PRIu64
		     " messages",
		     fl[1][0].done, fl[1][1].done, shape.total);
		rc = -1;
	}
	if (!rc && !d->o.server && !fl[0][0].aborted && !fl[0][1].aborted) {
		fail("stripe-kill: pair 0 did not fail (its first stripe deaf: is this a fault "
		     "injection build, with HARP_FAULT_DEAF_CONN=1?)");
		rc = -1;
	}
	if (!rc) {
		for (i = 0; i < 2; i++) {
			printf("stripe_kill_pair0_%s=%" PRIu64 "%s", i ? "received" : "sent",
			       fl[0][i].done, fl[0][i].aborted ? "" : "\n");
			if (fl[0][i].aborted) {
				printf(" (failed %.0f ms after the start)\n",
				       (fl[0][i].aborted_at - started) * 1000);
			}
		}
		printf("stripe_kill_pair1=%" PRIu64 "+%" PRIu64 "\n", fl[1][0].done, fl[1][1].done);
	}
	for (i = 0; i < 4; i++) {
		if (flow_teardown(run[i])) {
			rc = -1;
		}
	}
	if (pairs_close(d, p, 2)) {
		rc = -1;
	}
	return rc;
}

/*
 * many: 16 pairs over two communicators (and every device). The second half of the pairs is set
 * up by another thread while the first half carries data, as NCCL's service and proxy threads
 * do; then all pairs carry data at once.
 */
struct setup_job {
	struct drv *d;
	struct pair *p;
	int from, to;
	double deadline;
	int rc;
};

static void *setup_thread(void *arg)
{
	struct setup_job *job = arg;

	job->rc = pairs_connect(job->d, job->p, job->from, job->to, job->deadline);
	return NULL;
}

static int scenario_many(struct drv *d, double deadline)
{
	int n = d->o.comms ? d->o.comms : 16, half = n / 2, i, rc;
	struct pair p[MAX_PAIRS] = { { 0 } };
	struct flow shape = { .window = 4, .slot_bytes = 256 * KIB };
	struct setup_job job = { .d = d, .p = p, .from = half, .to = n, .deadline = deadline };
	pthread_t thread;

	shape.total = shape.complete = d->o.messages ? (uint64_t)d->o.messages : 8;
	/* two communicators: v11 on gets two contexts, and pairs alternate between them */
	if (drv_init(d, 0x3456) || drv_init(d, 0x3457)) {
		return -1;
	}
	/* pairs alternate between the contexts and spread over every device */
	for (i = 0; i < n; i++) {
		p[i].ctx = d->ctx[i % d->nctx];
		p[i].dev = (i / 2) % d->ndev;
	}
	printf("many_devices=%d\n", d->ndev < n ? d->ndev : n);
	if (pairs_exchange(d, p, n, deadline) || pairs_connect(d, p, 0, half, deadline)) {
		pairs_close(d, p, n);
		return -1;
	}
	/* NCCL's service thread sets comms up while its proxy thread moves data on others */
	rc = pthread_create(&thread, NULL, setup_thread, &job);
	if (rc) {
		fail("pthread_create: %s", strerror(rc));
		pairs_close(d, p, n);
		return -1;
	}
	rc = exchange(d, p, 0, half, &shape, deadline);
	pthread_join(thread, NULL);
	if (!rc && job.rc) {
		rc = -1;
	}
	if (!rc) {
		/* then every pair at once, the tests interleaved across all of them */
		rc = exchange(d, p, 0, n, &shape, deadline);
	}
	if (pairs_close(d, p, n)) {
		rc = -1;
	}
	return rc;
}

/*
 * grouped: rounds of one irecv of n buffers (tags in a shuffled order) against n sends on one
 * send comm, posted in another shuffled order; each send must land in the buffer of its tag.
 */
#define GROUP_CAP (128 * KIB)
/*
 * Buffers of odd tags hold four times as much and 4 KiB more: a striped comm cuts them (and not
 * the others) over its stripes, so one receive's stripes carry different sets of its buffers.
 */
#define GROUP_BIG (4 * GROUP_CAP + 4096)

static size_t group_cap(int tag)
{
	return tag & 1 ? GROUP_BIG : GROUP_CAP;
}

struct group_round {
	int n;
	int recv_tag[MAX_GROUP]; /* buffer i of the receive carries tag recv_tag[i] */
	int send_tag[MAX_GROUP]; /* the sender posts tags in this order */
};

static size_t group_size(int round, int tag)
{
	static const size_t sizes[] = { 0, 1, 4095, 4096, 65536, 12345, 777, GROUP_CAP };
	size_t size = sizes[(size_t)(round * 3 + tag) % 8];

	return tag & 1 ? size * 4 + (size ? 4096 : 0) : size; /* up to GROUP_BIG */
}

static void shuffle(int *v, int n, uint64_t seed)
{
	uint64_t s = seed;
	int i, j, t;

	for (i = n - 1; i > 0; i--) {
		j = (int)(splitmix(&s) % (uint64_t)(i + 1));
		t = v[i];
		v[i] = v[j];
		v[j] = t;
	}
}

static void group_plan(int round, int dir, struct group_round *g)
{
	int i;

	g->n = round % 2 == 0 ? MAX_GROUP : 1 + (round * 3) % MAX_GROUP;
	for (i = 0; i < g->n; i++) {
		g->recv_tag[i] = i;
		g->send_tag[i] = i;
	}
	shuffle(g->recv_tag, g->n, msg_seed(dir, 1000, (uint64_t)round));
	shuffle(g->send_tag, g->n, msg_seed(dir, 2000, (uint64_t)round));
}

#define GROUP_WINDOW 4

struct group_side {
	struct drv *d;
	void *send, *recv;
	int rounds;
	/* sends: every message has its own buffer, all posted as early as the plugin allows */
	unsigned char **sbuf;
	size_t *ssize;
	void **smh;
	void **sreq;
	int nsends, sposted, sdone;
	/* receives: GROUP_WINDOW grouped requests in flight */
	unsigned char *rbuf[GROUP_WINDOW][MAX_GROUP];
	void *rmh[GROUP_WINDOW][MAX_GROUP];
	void *rreq[GROUP_WINDOW];
	int rposted, rdone;
};

static int group_send_index(const struct group_side *s, int round, int j)
{
	struct group_round g;
	int r, k = 0;

	for (r = 0; r < round; r++) {
		group_plan(r, s->d->my_dir, &g);
		k += g.n;
	}
	return k + j;
}

static int group_post_send(struct group_side *s)
{
	struct drv *d = s->d;
	struct group_round g;
	int k = s->sposted, round = 0, j = k, tag;
	void *req = NULL;

	for (;;) {
		group_plan(round, d->my_dir, &g);
		if (j < g.n) {
			break;
		}
		j -= g.n;
		round++;
	}
	tag = g.send_tag[j];
	pattern_fill(s->sbuf[k], group_size(round, tag),
		     msg_seed(d->my_dir, 0, (uint64_t)round * MAX_GROUP + (uint64_t)tag));
	NET_CALL(d->api.isend(s->send, s->sbuf[k], group_size(round, tag), tag, s->smh[k],
			      d->phandle_dummy[0], &req));
	if (!req) {
		d->isend_retries++;
		return 0;
	}
	s->sreq[k] = req;
	s->ssize[k] = group_size(round, tag);
	s->sposted++;
	return 1;
}

static int group_post_recv(struct group_side *s)
{
	struct drv *d = s->d;
	struct group_round g;
	int slot = s->rposted % GROUP_WINDOW, i;
	size_t caps[MAX_GROUP];
	void *req = NULL;

	group_plan(s->rposted, d->peer_dir, &g);
	for (i = 0; i < g.n; i++) {
		size_t want = group_size(s->rposted, g.recv_tag[i]);

		caps[i] = group_cap(g.recv_tag[i]);
		memset(s->rbuf[slot][i], 0, caps[i]);
		memset(s->rbuf[slot][i] + want, GUARD_BYTE,
		       caps[i] - want < GUARD_BYTES ? caps[i] - want : GUARD_BYTES);
	}
	NET_CALL(d->api.irecv(s->recv, g.n, (void **)s->rbuf[slot], caps, g.recv_tag,
			      s->rmh[slot], d->phandle_dummy, &req));
	if (!req) {
		d->irecv_retries++;
		return 0;
	}
	s->rreq[slot] = req;
	s->rposted++;
	return 1;
}

static int group_check_recv(struct group_side *s, int round, const int *sizes)
{
	struct drv *d = s->d;
	int slot = round % GROUP_WINDOW, i;
	struct group_round g;

	group_plan(round, d->peer_dir, &g);
	for (i = 0; i < g.n; i++) {
		int tag = g.recv_tag[i];
		size_t want = group_size(round, tag), j;
		long bad;

		if (sizes[i] < 0 || (size_t)sizes[i] != want) {
			fail("grouped round %d buffer %d (tag %d): test() reported %d bytes, "
			     "expected %zu",
			     round, i, tag, sizes[i], want);
			return -1;
		}
		bad = pattern_diff(s->rbuf[slot][i], want,
				   msg_seed(d->peer_dir, 0, (uint64_t)round * MAX_GROUP + tag));
		if (bad >= 0) {
			fail("grouped round %d buffer %d (tag %d, %zu bytes): byte %ld is not what "
			     "the send with tag %d carried",
			     round, i, tag, want, bad, tag);
			return -1;
		}
		for (j = want; j < group_cap(tag) && j < want + GUARD_BYTES; j++) {
			if (s->rbuf[slot][i][j] != GUARD_BYTE) {
				fail("grouped round %d buffer %d: byte %zu past its %zu bytes was "
				     "written",
				     round, i, j, want);
				return -1;
			}
		}
		d->verified_bytes += want;
	}
	d->messages += (uint64_t)g.n;
	return 0;
}

static int group_test(struct group_side *s)
{
	struct drv *d = s->d;
	int done = 0, sizes[MAX_GROUP], i;

	if (s->sdone < s->sposted) {
		sizes[0] = -1;
		NET_CALL(d->api.test(s->sreq[s->sdone], &done, sizes));
		if (done && (size_t)sizes[0] != s->ssize[s->sdone]) {
			fail("grouped send %d: test() reported %d bytes, expected %zu", s->sdone,
			     sizes[0], s->ssize[s->sdone]);
			return -1;
		}
		if (done) {
			d->sent_bytes += s->ssize[s->sdone];
			d->messages++;
			s->sdone++;
		}
	}
	if (s->rdone < s->rposted) {
		for (i = 0; i < MAX_GROUP; i++) {
			sizes[i] = -1;
		}
		done = 0;
		NET_CALL(d->api.test(s->rreq[s->rdone % GROUP_WINDOW], &done, sizes));
		if (done) {
			if (group_check_recv(s, s->rdone, sizes)) {
				return -1;
			}
			s->rdone++;
		}
	}
	return 0;
}

static int group_run(struct group_side *s, double deadline)
{
	int rc = 1;

	while (s->sdone < s->nsends || s->rdone < s->rounds) {
		/* every send as early as the plugin takes it (up to 32 x maxRecvs may be out) */
		while (s->sposted < s->nsends && (rc = group_post_send(s)) > 0) {
		}
		if (rc < 0) {
			return -1;
		}
		while (s->rposted < s->rounds && s->rposted - s->rdone < GROUP_WINDOW &&
		       (rc = group_post_recv(s)) > 0) {
		}
		if (rc < 0 || group_test(s)) {
			return -1;
		}
		if (rdv_now() > deadline) {
			fail("grouped: timed out with sends %d/%d/%d and receives %d/%d/%d "
			     "(posted/done/total)",
			     s->sposted, s->sdone, s->nsends, s->rposted, s->rdone, s->rounds);
			return -1;
		}
	}
	return 0;
}

static int group_alloc(struct group_side *s)
{
	struct drv *d = s->d;
	int k, w, i;

	s->nsends = group_send_index(s, s->rounds, 0);
	s->sbuf = calloc((size_t)s->nsends, sizeof(*s->sbuf));
	s->smh = calloc((size_t)s->nsends, sizeof(*s->smh));
	s->sreq = calloc((size_t)s->nsends, sizeof(*s->sreq));
	s->ssize = calloc((size_t)s->nsends, sizeof(*s->ssize));
	if (!s->sbuf || !s->smh || !s->sreq || !s->ssize) {
		fail("out of memory");
		return -1;
	}
	for (k = 0; k < s->nsends; k++) {
		s->sbuf[k] = malloc(GROUP_BIG);
		if (!s->sbuf[k]) {
			fail("out of memory");
			return -1;
		}
		NET_CALL(d->api.reg_mr(s->send, s->sbuf[k], GROUP_BIG, HNCCL_PTR_HOST, &s->smh[k]));
	}
	for (w = 0; w < GROUP_WINDOW; w++) {
		for (i = 0; i < MAX_GROUP; i++) {
			s->rbuf[w][i] = malloc(GROUP_BIG);
			if (!s->rbuf[w][i]) {
				fail("out of memory");
				return -1;
			}
			NET_CALL(d->api.reg_mr(s->recv, s->rbuf[w][i], GROUP_BIG, HNCCL_PTR_HOST,
					       &s->rmh[w][i]));
		}
	}
	return 0;
}

static void group_free(struct group_side *s)
{
	int k, w, i;

	for (k = 0; s->sbuf && k < s->nsends; k++) {
		if (s->smh[k]) {
			s->d->api.dereg_mr(s->send, s->smh[k]);
		}
		free(s->sbuf[k]);
	}
	for (w = 0; w < GROUP_WINDOW; w++) {
		for (i = 0; i < MAX_GROUP; i++) {
			if (s->rmh[w][i]) {
				s->d->api.dereg_mr(s->recv, s->rmh[w][i]);
			}
			free(s->rbuf[w][i]);
		}
	}
	free(s->sbuf);
	free(s->smh);
	free(s->sreq);
	free(s->ssize);
}

/*
 * A receive whose buffers share a tag cannot say which send lands where: irecv must refuse it
 * with an error and no request.
 */
static int group_refuses_twin_tags(struct group_side *s)
{
	struct drv *d = s->d;
	size_t caps[2] = { GROUP_CAP, GROUP_CAP };
	int tags[2] = { 3, 3 };
	void *req = NULL;
	hnccl_result_t res;

	res = d->api.irecv(s->recv, 2, (void **)s->rbuf[0], caps, tags, s->rmh[0],
			   d->phandle_dummy, &req);
	if (res == HNCCL_SUCCESS || req) {
		fail("irecv of 2 buffers both tagged 3 was accepted (result %d, request %p)", res,
		     req);
		return -1;
	}
	d->provoked_warns++;
	note("irecv of 2 buffers with one tag refused with %d (%s)", res, net_res_name(res));
	return 0;
}

static int scenario_grouped(struct drv *d, double deadline)
{
	struct pair p[1] = { { 0 } };
	struct group_side s = { .d = d };
	int rc = -1;

	s.rounds = d->o.messages ? (int)d->o.messages : 40; /* 260 sends: 32 x maxRecvs + 4 */
	if (drv_init(d, 0x4567) || pairs_open(d, p, 1, deadline)) {
		pairs_close(d, p, 1);
		return -1;
	}
	s.send = p[0].send;
	s.recv = p[0].recv;
	if (!group_alloc(&s) && !group_refuses_twin_tags(&s)) {
		rc = group_run(&s, deadline);
	}
	group_free(&s);
	if (pairs_close(d, p, 1)) {
		rc = -1;
	}
	return rc;
}

/*
 * close-order: comms closed in every order NCCL may use, some with requests still out, one
 * listen comm closed before any accept finished; then finalize, then dlclose (by main).
 *   pair 0: messages done; closeSend, then closeRecv
 *   pair 1: messages done; closeRecv, then closeSend
 *   pair 2: two of four receives left posted (the peer sends two); closeSend, closeRecv
 *   pair 3: two of four sends left waiting (the peer receives two); closeRecv, closeSend
 *   pair 4: one large message each way, closed in flight (an abort)
 *   pair 5: the orphan: never accepted, its listen comm closed after the others are up; the
 *           peer's connect to it must end (an error, normally) without a crash
 */
#define CLOSE_PAIRS 6
#define ORPHAN	    5

static int close_order_orphan(struct drv *d, struct pair *p, double deadline)
{
	double bound = rdv_now() + 15;

	/* never accepted: the peer's connect is still waiting for our answer when this closes */
	NET_CALL(d->api.close_listen(p->listen));
	p->listen = NULL;
	while (!p->orphan_connect_done && rdv_now() < bound && rdv_now() < deadline) {
		if (connect_step(d, p, ORPHAN)) {
			return -1;
		}
		usleep(1000);
	}
	if (!p->orphan_connect_done) {
		fail("connect to the peer's closed listen comm still in progress after 15 s");
		return -1;
	}
	printf("orphan_connect_result=%d\n", p->send ? 0 : (int)p->orphan_res);
	note("connect to the peer's closed listen comm ended with %d (%s)%s", p->orphan_res,
	     net_res_name(p->orphan_res), p->send ? " and a comm (closed now)" : "");
	return 0;
}

/*
 * A connect NCCL gives up on half-way (called once, never again: an abort during set-up), to a
 * listen comm of this side that never accepts: the finalize that follows must still tear harp
 * down (main checks for the plugin's "harp closed" line).
 */
static int close_order_abandon(struct drv *d)
{
	unsigned char handle[HNCCL_NET_HANDLE_MAXSIZE] = { 0 };
	struct hnccl_net_device_handle *dev_handle = NULL;
	void *listen = NULL, *send = NULL;

	NET_CALL(d->api.listen(d->ctx[0], 0, handle, &listen));
	NET_CALL(d->api.connect(d->ctx[0], 0, handle, &send, &dev_handle));
	if (send) {
		fail("a connect to a listen comm that never accepts finished at once");
		return -1;
	}
	NET_CALL(d->api.close_listen(listen));
	d->expect_closed = d->api.finalize != NULL; /* v8-v10 have none: the unload tears down */
	note("close-order: a connect abandoned half-way, then finalize");
	return 0;
}

/* close_during_test: a thread that tests one request until the plugin stops saying "pending". */
struct test_loop {
	struct drv *d;
	void *req;
	hnccl_result_t last;
	long calls;
	int done;
	atomic_bool stop, ended;
};

static void *test_loop_main(void *arg)
{
	struct test_loop *t = arg;

	while (!atomic_load(&t->stop)) {
		t->last = t->d->api.test(t->req, &t->done, NULL);
		t->calls++;
		if (t->last != HNCCL_SUCCESS || t->done) {
			break;
		}
	}
	atomic_store(&t->ended, true);
	return NULL;
}

/*
 * A broken caller closes a recv comm while another thread tests its pending request (NCCL makes
 * both calls from one proxy thread). The close must wait for the test call under way, and the
 * next test be refused by name: no crash and no read of freed memory (ASan, TSan runs).
 */
static int close_during_test(struct drv *d, struct pair *p)
{
	static unsigned char buf[4096];
	struct test_loop t = { .d = d };
	void *data = buf, *mh = NULL;
	size_t cap = sizeof(buf);
	int tag = 0x7e57, i, rc = 0, err;
	hnccl_result_t res;
	pthread_t th;

	NET_CALL(d->api.irecv(p->recv, 1, &data, &cap, &tag, &mh, NULL, &t.req));
	if (!t.req) {
		fail("close-during-test: irecv gave no request");
		return -1;
	}
	err = pthread_create(&th, NULL, test_loop_main, &t);
	if (err) {
		fail("pthread_create: %s", strerror(err));
		return -1;
	}
	usleep(20000); /* the thread is testing, over and over */
	if (atomic_load(&t.ended)) {
		fail("close-during-test: the request ended before the close (%s)",
		     net_res_name(t.last));
		atomic_store(&t.stop, true);
		pthread_join(th, NULL);
		return -1;
	}
	res = d->api.close_recv(p->recv);
	p->recv = NULL;
	for (i = 0; i < 2000 && !atomic_load(&t.ended); i++) {
		usleep(1000);
	}
	atomic_store(&t.stop, true);
	pthread_join(th, NULL);
	if (res != HNCCL_SUCCESS) {
		fail("close-during-test: closeRecv returned %s", net_res_name(res));
		rc = -1;
	}
	if (t.last == HNCCL_SUCCESS) {
		fail("close-during-test: test() of a request of a closed comm still succeeded "
		     "(%ld calls, done %d)",
		     t.calls, t.done);
		rc = -1;
	} else {
		d->provoked_warns++;
		note("close-during-test: closeRecv while a thread tested its request: the close "
		     "returned, and test() was refused with %s after %ld calls",
		     net_res_name(t.last), t.calls);
	}
	return rc;
}

static int scenario_close_order(struct drv *d, double deadline)
{
	struct pair p[CLOSE_PAIRS] = { { 0 } };
	struct flow fl[CLOSE_PAIRS][2];
	struct flow *run[2 * ORPHAN] = { NULL };
	struct flow shape = { .window = 4, .slot_bytes = 64 * KIB, .total = 4, .complete = 4 };
	size_t big = d->o.max_size < 64 * MIB ? d->o.max_size : 64 * MIB;
	static size_t big_sizes[1];
	int i, rc = -1;

	if (drv_init(d, 0x5678)) {
		return -1;
	}
	for (i = 0; i < CLOSE_PAIRS; i++) {
		p[i].ctx = d->ctx[0];
	}
	p[ORPHAN].orphan = true;
	if (pairs_exchange(d, p, CLOSE_PAIRS, deadline) ||
	    pairs_connect(d, p, 0, CLOSE_PAIRS, deadline) ||
	    close_order_orphan(d, &p[ORPHAN], deadline)) {
		goto close;
	}
	memset(fl, 0, sizeof(fl));
	for (i = 0; i < ORPHAN; i++) {
		flows_of_pair(d, &p[i], i, &fl[i][0], &fl[i][1], &shape);
	}
	fl[2][0].total = fl[2][0].complete = 2; /* pair 2: sends two ... */
	fl[2][1].complete = 2;			/* ... receives four, two of which stay out */
	fl[3][0].complete = 2;			/* pair 3: sends four, two stay out */
	fl[3][0].post_may_wait = true;
	fl[3][1].total = fl[3][1].complete = 2;
	big_sizes[0] = big;
	for (i = 0; i < 2; i++) {
		fl[4][i].sizes = big_sizes;
		fl[4][i].nsizes = 1;
		fl[4][i].slot_bytes = big;
		fl[4][i].window = 1;
		fl[4][i].total = 1;
		fl[4][i].complete = 0; /* posted, then closed with the transfer in flight */
		fl[4][i].peer_may_abort = true; /* and the peer may have closed its end first */
	}
	for (i = 0; i < 2 * ORPHAN; i++) {
		run[i] = &fl[i / 2][i % 2];
		if (flow_setup(run[i])) {
			goto teardown;
		}
	}
	rc = run_flows(d, run, 2 * ORPHAN, deadline);
	if (!rc) {
		note("close-order: closing with %" PRIu64 "+%" PRIu64 "+%" PRIu64 " requests out",
		     fl[2][1].posted - fl[2][1].done, fl[3][0].posted - fl[3][0].done,
		     fl[4][0].posted - fl[4][0].done + fl[4][1].posted - fl[4][1].done);
		/* neither side closes pair 0's send comm before the other's test is done: the
		 * request must end by this side's close, not by the peer's */
		rc = close_during_test(d, &p[0]);
		if (!rc) {
			char name[32];

			snprintf(name, sizeof(name), "%s.tested", d->o.role);
			rc = mark_write(d, name);
			snprintf(name, sizeof(name), "%s.tested",
				 strcmp(d->o.role, "server") ? "server" : "client");
			if (!rc && mark_wait(d, name, deadline)) {
				fail("close-during-test: the peer's test did not end");
				rc = -1;
			}
		}
	}
teardown:
	/* as NCCL on abort: memory deregistered, then the comms closed, requests still out */
	for (i = 0; i < 2 * ORPHAN; i++) {
		if (run[i] && flow_teardown(run[i])) {
			rc = -1;
		}
	}
close:
	if (close_pair(d, &p[0], false) || close_pair(d, &p[1], true) ||
	    close_pair(d, &p[2], false) || close_pair(d, &p[3], true) ||
	    close_pair(d, &p[4], true) || close_pair(d, &p[5], false)) {
		rc = -1;
	}
	if (!rc) {
		rc = close_order_abandon(d);
	}
	return rc;
}

/* The script writes when it signalled the peer (microseconds of CLOCK_REALTIME) to a file. */
static void print_time_to_error(struct drv *d)
{
	char path[PATH_MAX];
	long long signalled_us, err_us;
	FILE *f;

	snprintf(path, sizeof(path), "%s/signalled_at", d->o.dir);
	f = fopen(path, "r");
	if (!f) {
		return;
	}
	if (fscanf(f, "%lld", &signalled_us) == 1) {
		err_us = (long long)d->err_realtime.tv_sec * 1000000 +
			 d->err_realtime.tv_nsec / 1000;
		printf("time_to_error_ms=%lld\n", (err_us - signalled_us) / 1000);
	}
	/* The longest pause of the progress loop between the last message and the error: with
	 * little CPU time in it, this side was not running (starved or blocked). */
	printf("stall_ms=%.0f\nstall_cpu_ms=%.0f\nstall_switches=%ld voluntary, %ld involuntary\n",
	       d->stall.wall * 1000, d->stall.cpu * 1000, d->stall.voluntary, d->stall.involuntary);
	fclose(f);
}

/*
 * peer-kill: a pipeline without end; the script SIGKILLs (or SIGSTOPs) the peer, the server,
 * and this side must see a request fail with ncclRemoteError or ncclSystemError, then close
 * what it holds (requests still out) and finalize.
 */
static int scenario_peer_kill(struct drv *d, double deadline)
{
	int n = d->o.comms ? d->o.comms : 2;
	struct pair p[MAX_PAIRS] = { { 0 } };
	struct flow shape = { .window = 8, .slot_bytes = 512 * KIB };
	int rc;

	shape.total = shape.complete = d->o.messages ? (uint64_t)d->o.messages : UINT64_MAX;
	if (drv_init(d, 0x6789) || pairs_open(d, p, n, deadline)) {
		pairs_close(d, p, n);
		return -1;
	}
	d->expect_error = !d->o.server;
	d->mark_flowing = true; /* the script signals the server once both sides move data */
	d->last_done_time = rdv_now();
	rc = exchange(d, p, 0, n, &shape, deadline);
	if (pairs_close(d, p, n)) {
		return -1;
	}
	if (d->o.server) {
		return rc; /* normally killed long before */
	}
	if (!d->err_res) {
		fail("peer-kill: no request failed before the deadline (%d)", rc);
		return -1;
	}
	printf("error_result=%d\nsilence_before_error_ms=%.0f\n", d->err_res,
	       (d->err_time - d->last_done_time) * 1000);
	print_time_to_error(d);
	if (d->err_res != HNCCL_REMOTE_ERROR && d->err_res != HNCCL_SYSTEM_ERROR) {
		fail("peer-kill: the failure was %d (%s), expected ncclRemoteError or "
		     "ncclSystemError",
		     d->err_res, net_res_name(d->err_res));
		return -1;
	}
	if (!d->messages) {
		fail("peer-kill: the error came before any message completed");
		return -1;
	}
	return 0;
}

/*
 * peer-freeze: one message each way, then the client posts a receive the server never fills and a
 * send the server never matches, with nothing in flight, and waits; the server stays alive
 * without calling the plugin (its keeper thread answers for it). The script checks that the
 * client waits past HARP_PEER_TIMEOUT_MS without an error while the server lives, then SIGSTOPs
 * the server: a request must fail within the timeout's bound.
 */
static int scenario_peer_freeze(struct drv *d, double deadline)
{
	struct pair p[1] = { { 0 } };
	struct flow shape = { .window = 1, .slot_bytes = 64 * KIB };

	shape.total = shape.complete = 1;
	if (drv_init(d, 0x6790) || pairs_open(d, p, 1, deadline)) {
		pairs_close(d, p, 1);
		return -1;
	}
	d->mark_flowing = true;
	if (exchange(d, p, 0, 1, &shape, deadline)) {
		pairs_close(d, p, 1);
		return -1;
	}
	if (d->o.server) {
		while (rdv_now() < deadline) {
			usleep(100000); /* normally stopped, then killed, long before */
		}
		return pairs_close(d, p, 1);
	}
	d->expect_error = true;
	d->last_done_time = rdv_now();
	exchange(d, p, 0, 1, &shape, deadline); /* waits: the server posts nothing */
	if (pairs_close(d, p, 1)) {
		return -1;
	}
	if (!d->err_res) {
		fail("peer-freeze: no request failed before the deadline");
		return -1;
	}
	printf("error_result=%d\nsilence_before_error_ms=%.0f\n", d->err_res,
	       (d->err_time - d->last_done_time) * 1000);
	print_time_to_error(d);
	return 0;
}

/* init-fail: init must fail, with exactly one WARN line that holds --expect-warn's text. */
/*
 * copy-fail (--cuda): a pipeline in GPU memory until a copy fails. The side whose stand-in
 * libcudart fails its copies (FAKE_CUDART_FAIL_AFTER) must see a request fail with
 * ncclSystemError, and its peer one fail too, neither hanging; every message that completed
 * before was checked byte for byte.
 */
static int scenario_copy_fail(struct drv *d, double deadline)
{
	struct pair p[1] = { { 0 } };
	struct flow shape = { .window = 8, .slot_bytes = 512 * KIB };
	int rc;

	shape.total = shape.complete = UINT64_MAX;
	if (drv_init(d, 0x4321) || pairs_open(d, p, 1, deadline)) {
		pairs_close(d, p, 1);
		return -1;
	}
	d->expect_error = true;
	rc = exchange(d, p, 0, 1, &shape, deadline);
	if (pairs_close(d, p, 1)) {
		return -1;
	}
	if (!d->err_res) {
		fail("copy-fail: no request failed before the deadline (%d)", rc);
		return -1;
	}
	printf("error_result=%d\n", d->err_res);
	if (d->err_res != HNCCL_REMOTE_ERROR && d->err_res != HNCCL_SYSTEM_ERROR) {
		fail("copy-fail: the failure was %d (%s), expected ncclSystemError or "
		     "ncclRemoteError",
		     d->err_res, net_res_name(d->err_res));
		return -1;
	}
	if (!d->messages) {
		fail("copy-fail: the error came before any message completed");
		return -1;
	}
	return 0;
}

static int scenario_init_fail(struct drv *d)
{
	hnccl_result_t res = d->api.init(&d->ctx[0], 0x789a);
	int warns = atomic_load(&warn_lines);

	printf("init_result=%d\nwarn_lines=%d\n", res, warns);
	if (res == HNCCL_SUCCESS) {
		d->nctx = 1;
		fail("init succeeded; expected a failure naming '%s'", d->o.expect_warn);
		return -1;
	}
	if (warns != 1) {
		fail("init failed with %d (%s) and %d WARN lines; expected exactly one", res,
		     net_res_name(res), warns);
		return -1;
	}
	if (!strstr(first_warn, d->o.expect_warn)) {
		fail("the WARN line does not name '%s': %s", d->o.expect_warn, first_warn);
		return -1;
	}
	note("init failed with %d (%s) and one WARN line naming '%s'", res, net_res_name(res),
	     d->o.expect_warn);
	return 0;
}

/*
 * idle-peer: the client sends, the server receives; once its receives are done the server makes
 * no plugin call at all (an NCCL rank with nothing left to do) until the client's sends have
 * completed. A send must complete without the receiver calling the plugin again.
 */
static int scenario_idle_peer(struct drv *d, double deadline)
{
	struct pair p[1] = { { 0 } };
	struct flow shape = { .window = 8, .slot_bytes = 512 * KIB };
	struct flow tx, rx, *run[1];
	double t0, send_bound;
	int rc = -1;

	shape.total = shape.complete = d->o.messages ? (uint64_t)d->o.messages : 64;
	if (drv_init(d, 0x89ab) || pairs_open(d, p, 1, deadline)) {
		pairs_close(d, p, 1);
		return -1;
	}
	flows_of_pair(d, &p[0], 0, &tx, &rx, &shape);
	run[0] = d->o.server ? &rx : &tx;
	if (flow_setup(run[0])) {
		goto out;
	}
	t0 = rdv_now();
	/* the client's sends get 10 s: far more than they need while the server still calls */
	send_bound = d->o.server ? deadline : (t0 + 10 < deadline ? t0 + 10 : deadline);
	rc = run_flows(d, run, 1, send_bound);
	if (d->o.server) {
		if (!rc &&
		    (mark_write(d, "server.idle") || mark_wait(d, "client.done", deadline))) {
			fail("idle-peer: the client did not finish its sends in time");
			rc = -1;
		}
	} else {
		if (rc) {
			fail("idle-peer: %" PRIu64 " of %" PRIu64 " sends done after %.1f s; the "
			     "last ones wait for a receiver that makes no more plugin calls",
			     tx.done, tx.total, rdv_now() - t0);
		}
		mark_write(d, "client.done");
	}
out:
	if (flow_teardown(run[0])) {
		rc = -1;
	}
	if (pairs_close(d, p, 1)) {
		rc = -1;
	}
	return rc;
}

/* isend(size) on a registered region must be refused: an error, and no request. */
static int expect_isend_refused(struct drv *d, void *comm, void *data, void *mh, long long size,
				const char *what)
{
	void *req = NULL;
	hnccl_result_t res;

	/* v8 gets the int NCCL would pass, past the driver's own v8 size check */
	if (d->api.version == 8) {
		res = ((const struct hnccl_net_v8 *)d->api.table)->isend(comm, data, (int)size, 1, mh, &req);
	} else {
		res = d->api.isend(comm, data, (size_t)size, 1, mh, d->phandle_dummy[0], &req);
	}
	if (res == HNCCL_SUCCESS || req) {
		fail("isend of %s (%lld bytes) returned %d (%s) and request %p: expected a refusal",
		     what, size, res, net_res_name(res), req);
		return -1;
	}
	d->provoked_warns++;
	note("isend of %s (%lld bytes) refused with %d (%s)", what, size, res, net_res_name(res));
	return 0;
}

/*
 * limits: the largest message the device advertises (maxP2pBytes; v8 has none and NCCL keeps
 * it to 1 GiB) crosses in both directions byte-exact. Sends past it are refused with an error
 * and no request: one byte over (on a region registered that large), and on v8 a negative size
 * and INT_MAX. The connection then carries messages exactly as before.
 */
static int scenario_limits(struct drv *d, double deadline)
{
	static const size_t small[] = { 0, 4096, 1 * MIB };
	struct pair p[1] = { { 0 } };
	struct net_props props;
	size_t max, region_len;
	struct flow big = { .window = 1 }, after = { .window = 4, .sizes = small, .nsizes = 3 };
	unsigned char *region = MAP_FAILED;
	void *mh = NULL;
	int rc = -1;

	if (drv_init(d, 0x3456) || pairs_open(d, p, 1, deadline)) {
		goto out;
	}
	NET_CALL(d->api.get_properties(p[0].dev, &props, 0));
	max = props.max_p2p_bytes;
	note("largest message: %zu bytes each way", max);
	big.sizes = &max;
	big.nsizes = 1;
	big.slot_bytes = max;
	big.total = big.complete = 1;
	if (exchange(d, p, 0, 1, &big, deadline)) {
		goto out;
	}
	/* Registered but never touched: the refusals must not read it. */
	region_len = max + 4096;
	region = mmap(NULL, region_len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (region == MAP_FAILED) {
		fail("mmap of %zu bytes: %s", region_len, strerror(errno));
		goto out;
	}
	if (d->api.reg_mr(p[0].send, region, region_len, HNCCL_PTR_HOST, &mh) != HNCCL_SUCCESS) {
		fail("regMr of %zu bytes failed", region_len);
		goto out;
	}
	if (expect_isend_refused(d, p[0].send, region, mh, (long long)max + 1, "maxP2pBytes + 1")) {
		goto out;
	}
	if (d->api.version == 8 &&
	    (expect_isend_refused(d, p[0].send, region, mh, -1, "a negative size") ||
	     expect_isend_refused(d, p[0].send, region, mh, INT_MAX, "INT_MAX"))) {
		goto out;
	}
	after.slot_bytes = 1 * MIB;
	after.total = after.complete = 12;
	rc = exchange(d, p, 0, 1, &after, deadline);
out:
	if (mh && d->api.dereg_mr(p[0].send, mh) != HNCCL_SUCCESS) {
		fail("deregMr of the large region failed");
		rc = -1;
	}
	if (region != MAP_FAILED) {
		munmap(region, max + 4096);
	}
	if (pairs_close(d, p, 1)) {
		rc = -1;
	}
	return rc;
}

/*
 * accept-stall and accept-die (a fault-injection build; the script gives both sides
 * HARP_STRIPES=2 and the client HARP_FAULT_CONNECT_HANG=2): the client's second connection, its
 * comm's stripe 1, never sends its request, so the server's accept places stripe 0 and waits for
 * stripe 1. accept-stall: the client stays; the accept must fail (one WARN naming stripe 1) within
 * HARP_PEER_TIMEOUT_MS of stripe 0's coming, plus the set-up's own time. accept-die: the client
 * exits 1.5 s in, closing stripe 0; the accept must fail at once, well before the peer timeout
 * (the script makes it 20 s). Never a comm, never a hang.
 */
static int scenario_accept_gap(struct drv *d, double deadline, bool die)
{
	const char *env = getenv("HARP_PEER_TIMEOUT_MS");
	double t_ms = env ? atof(env) : 10000, t0, waited_ms;
	struct hnccl_net_device_handle *dev_handle = NULL;
	struct pair p[1] = { { 0 } };
	char done_path[PATH_MAX];
	hnccl_result_t res = HNCCL_SUCCESS;
	FILE *f;

	snprintf(done_path, sizeof(done_path), "%s/accept-done", d->o.dir);
	if (drv_init(d, 0x2345) || pairs_exchange(d, p, 1, deadline)) {
		return -1;
	}
	t0 = rdv_now();
	if (!d->o.server) {
		/* connect for ever (stripe 1 never goes on), until the server is done or, for
		 * accept-die, 1.5 s: then gone without closing anything, as a killed rank is */
		while (rdv_now() < deadline && access(done_path, F_OK) != 0) {
			if (!p[0].send) {
				d->api.connect(p[0].ctx, p[0].dev, p[0].peer_handle, &p[0].send,
					       &dev_handle);
			}
			if (die && rdv_now() - t0 > 1.5) {
				printf("result=ok\n");
				fflush(stdout);
				_exit(0);
			}
			usleep(1000);
		}
		if (p[0].send) {
			fail("%s: connect handed out a comm with a stripe that never connected",
			     d->o.scenario);
			return -1;
		}
		d->api.close_listen(p[0].listen);
		return 0;
	}
	while (rdv_now() < deadline && res == HNCCL_SUCCESS && !p[0].recv) {
		res = d->api.accept(p[0].listen, &p[0].recv, &dev_handle);
		usleep(1000);
	}
	waited_ms = (rdv_now() - t0) * 1000;
	f = fopen(done_path, "w");
	if (f) {
		fclose(f);
	}
	printf("accept_result=%d\naccept_error_ms=%.0f\n", res, waited_ms);
	if (p[0].recv || res == HNCCL_SUCCESS) {
		fail("%s: the accept %s", d->o.scenario,
		     p[0].recv ? "handed out a comm missing a stripe" : "never failed");
		return -1;
	}
	d->provoked_warns++;
	pthread_mutex_lock(&warn_lock);
	if (!strstr(last_warn, "stripe")) {
		fail("%s: the accept failed (%s), but its WARN names no stripe: %s", d->o.scenario,
		     net_res_name(res), last_warn);
		pthread_mutex_unlock(&warn_lock);
		return -1;
	}
	note("%s: accept failed after %.0f ms with %s: %s", d->o.scenario, waited_ms,
	     net_res_name(res), last_warn);
	pthread_mutex_unlock(&warn_lock);
	/* the set-up of stripe 0 and the hand-shakes before it take well under 5 s */
	if (!die && waited_ms > t_ms + 5000) {
		fail("accept-stall: the accept failed %.0f ms in, past HARP_PEER_TIMEOUT_MS=%.0f "
		     "+ 5 s",
		     waited_ms, t_ms);
		return -1;
	}
	if (die && waited_ms >= t_ms) {
		fail("accept-die: the accept failed only %.0f ms in (HARP_PEER_TIMEOUT_MS=%.0f): "
		     "the dead stripe was not noticed",
		     waited_ms, t_ms);
		return -1;
	}
	d->api.close_listen(p[0].listen);
	return 0;
}

static int run_scenario(struct drv *d, double deadline)
{
	const char *s = d->o.scenario;

	if (!strcmp(s, "basic")) {
		return scenario_basic(d, deadline);
	}
	if (!strcmp(s, "pipeline")) {
		return scenario_pipeline(d, deadline);
	}
	if (!strcmp(s, "many")) {
		return scenario_many(d, deadline);
	}
	if (!strcmp(s, "stripes")) {
		return scenario_stripes(d, deadline);
	}
	if (!strcmp(s, "stripe-kill")) {
		return scenario_stripe_kill(d, deadline);
	}
	if (!strcmp(s, "accept-stall") || !strcmp(s, "accept-die")) {
		return scenario_accept_gap(d, deadline, !strcmp(s, "accept-die"));
	}
	if (!strcmp(s, "grouped")) {
		return scenario_grouped(d, deadline);
	}
	if (!strcmp(s, "close-order")) {
		return scenario_close_order(d, deadline);
	}
	if (!strcmp(s, "peer-kill")) {
		return scenario_peer_kill(d, deadline);
	}
	if (!strcmp(s, "peer-freeze")) {
		return scenario_peer_freeze(d, deadline);
	}
	if (!strcmp(s, "idle-peer")) {
		return scenario_idle_peer(d, deadline);
	}
	if (!strcmp(s, "limits")) {
		return scenario_limits(d, deadline);
	}
	if (!strcmp(s, "init-fail")) {
		return scenario_init_fail(d);
	}
	if (!strcmp(s, "copy-fail")) {
		return scenario_copy_fail(d, deadline);
	}
	fail("unknown scenario '%s'", s);
	return -1;
}

/* Threads of this process (the plugin must leave none behind after dlclose). */
static int thread_count(void)
{
	char line[256];
	int n = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f) {
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Threads: %d", &n) == 1) {
			break;
		}
	}
	fclose(f);
	return n;
}

/* Names each thread of this process on stderr (/proc/self/task/N/comm): which one outlived the
 * plugin. */
static void thread_names(void)
{
	char path[64], comm[64];
	struct dirent *de;
	DIR *dir = opendir("/proc/self/task");

	if (!dir) {
		return;
	}
	while ((de = readdir(dir))) {
		FILE *f;

		if (de->d_name[0] == '.') {
			continue;
		}
		snprintf(path, sizeof(path), "/proc/self/task/%.20s/comm", de->d_name);
		f = fopen(path, "r");
		if (f && fgets(comm, sizeof(comm), f)) {
			comm[strcspn(comm, "\n")] = 0;
			fprintf(stderr, "net-driver: thread %s: %s\n", de->d_name, comm);
		}
		if (f) {
			fclose(f);
		}
	}
	closedir(dir);
}

/* WARN lines a clean run may print: the ones the driver provoked, and (for the scenarios that
 * end connections in odd ways) any. */
static bool warns_expected(const struct drv *d)
{
	return !strcmp(d->o.scenario, "close-order") || !strcmp(d->o.scenario, "peer-kill") ||
	       !strcmp(d->o.scenario, "stripe-kill") || !strcmp(d->o.scenario, "accept-stall") ||
	       !strcmp(d->o.scenario, "accept-die") ||
	       !strcmp(d->o.scenario, "peer-freeze") ||
	       !strcmp(d->o.scenario, "init-fail") || !strcmp(d->o.scenario, "copy-fail");
}

int main(int argc, char **argv)
{
	static int phandle_targets[MAX_GROUP];
	struct drv d = { 0 };
	char err[256];
	double t0, t1;
	int rc, threads_before, threads_after, i, unexpected;

	if (parse_opts(&d.o, argc, argv)) {
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	log_role = d.o.role;
	log_verbose = d.o.verbose;
	d.my_dir = d.o.server ? DIR_S2C : DIR_C2S;
	d.peer_dir = d.o.server ? DIR_C2S : DIR_S2C;
	for (i = 0; i < MAX_GROUP; i++) {
		d.phandle_dummy[i] = &phandle_targets[i];
	}
	if (d.o.dir) {
		write_pid_file(&d);
	}
	if (d.o.cuda && gpu_load(d.o.cuda_device)) {
		return 2;
	}
	threads_before = thread_count();
	d.lib = dlopen(d.o.plugin, RTLD_NOW | RTLD_LOCAL);
	if (!d.lib) {
		fail("dlopen %s: %s", d.o.plugin, dlerror());
		return 1;
	}
	printf("version=%d\nscenario=%s\nrole=%s\n", d.o.version, d.o.scenario, d.o.role);
	t0 = rdv_now();
	rc = net_api_load(&d.api, d.lib, d.o.version, drv_logger, drv_profiler, err, sizeof(err));
	if (rc) {
		fail("%s", err);
	} else {
		rc = run_scenario(&d, t0 + d.o.timeout_s);
	}
	if (drv_finalize(&d)) {
		rc = -1;
	}
	if (d.late_mh && late_dereg(&d)) {
		rc = -1;
	}
	if (d.expect_closed && !atomic_load(&closed_lines)) {
		fail("finalize did not tear harp down (no \"harp closed\" line): an abandoned connect "
		     "kept it open");
		rc = -1;
	}
	t1 = rdv_now();
	/* NCCL unloads the plugin at the end; nothing of it may keep running */
	if (dlclose(d.lib) != 0) {
		fail("dlclose: %s", dlerror());
		rc = -1;
	}
	threads_after = thread_count();
	/* pthread_join returns once the kernel has cleared the thread's id, before the thread has
	 * left the process's count (release_task comes after): on a slow machine the count can
	 * still hold a joined thread. A moment later it cannot. */
	for (i = 0; i < 20 && threads_after > threads_before; i++) {
		usleep(10000);
		threads_after = thread_count();
	}
#ifdef __SANITIZE_THREAD__
	/* ThreadSanitizer starts its own background thread with the first pthread_create */
	if (threads_after == threads_before + 1) {
		threads_after = threads_before;
	}
#endif
	if (threads_after != threads_before) {
		thread_names();
		fail("%d threads before loading the plugin, %d after unloading it", threads_before,
		     threads_after);
		rc = -1;
	}
	if (d.o.cuda && gpu_check(d.sent_bytes, d.verified_bytes)) {
		rc = -1;
	}
	unexpected = atomic_load(&warn_lines) - d.provoked_warns;
	if (!warns_expected(&d) && unexpected > 0) {
		fail("the plugin logged %d WARN line(s) in a clean run; the first: %s", unexpected,
		     first_warn);
		rc = -1;
	}
	printf("verified_bytes=%" PRIu64 "\nsent_bytes=%" PRIu64 "\nmessages=%" PRIu64 "\n",
	       d.verified_bytes, d.sent_bytes, d.messages);
	printf("connect_retries=%" PRIu64 "\naccept_retries=%" PRIu64 "\n", d.connect_retries,
	       d.accept_retries);
	printf("isend_retries=%" PRIu64 "\nirecv_retries=%" PRIu64 "\n", d.isend_retries,
	       d.irecv_retries);
	printf("warn_lines=%d\nprofiler_calls=%d\n", atomic_load(&warn_lines),
	       atomic_load(&profiler_calls));
	printf("seconds=%.3f\ngoodput_gbps=%.3f\n", t1 - t0,
	       t1 > t0 ? (double)(d.verified_bytes + d.sent_bytes) * 8 / (t1 - t0) / 1e9 : 0.0);
	printf("result=%s\n", rc ? "FAIL" : "ok");
	return rc ? 1 : 0;
}
