// SPDX-License-Identifier: Apache-2.0
/*
 * harp-perf: measures an NCCL net plugin the way NCCL drives it. The plugin is dlopen()ed and
 * called through its ncclNetPlugin_vN table (common/net_shim.c), each connection is a pair of
 * one-way comms (a send comm to the peer, a recv comm from it), messages are posted into a
 * window of slots and only the oldest request is tested, as NCCL's proxy does. Every received
 * byte is checked: message k of a flow is the pattern of its slot (k % window) with k stamped in
 * its first 8 bytes, so a receiver compares against a reference copy with memcmp, which costs
 * far less than the transfer. Results are JSON lines (perf/README.md lists the keys).
 *
 *   harp-perf pingpong|stream|bidir|msgrate|allreduce|raw --role ROLE --dir DIR [options]
 *
 * raw lives in raw.c: it skips the plugin and the protocol, and measures the AF_XDP path alone.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl_socket.h"
#include "net_shim.h"
#include "raw.h"
#include "rendezvous.h"
#include "report.h"
#include "size_arg.h"

#ifndef HARP_PERF_PLUGIN
#define HARP_PERF_PLUGIN "libnccl-net-harp.so"
#endif
#ifndef HARP_PERF_PLUGIN_INSTALLED
#define HARP_PERF_PLUGIN_INSTALLED "../lib/libnccl-net-harp.so"
#endif

#define HANDLE_BYTES HNCCL_NET_HANDLE_MAXSIZE
#define MAX_SIZES    32
#define MAX_CONNS    256
#define MAX_WINDOW   32 /* NCCL keeps at most NCCL_NET_MAX_REQUESTS (32) per comm */
#define PIECE_BYTES  (512u * 1024u) /* allreduce moves each chunk in NCCL-sized slices */
#define STAMP_BYTES  8

enum test { T_PINGPONG, T_STREAM, T_BIDIR, T_MSGRATE, T_ALLREDUCE };
static const char *const test_names[] = { "pingpong", "stream", "bidir", "msgrate", "allreduce" };

struct opts {
	enum test test;
	const char *role, *dir, *plugin, *json, *ifname, *label;
	bool server, verbose;
	int version, timeout_s;
	uint64_t sizes[MAX_SIZES];
	int nsizes;
	int iters, warmup;
	uint64_t size, bytes, count;
	int window, conns;
	int rank, nranks;
	int idle_s;
	int away_us;
	const char *timeline; /* pingpong, client: every round trip's start and time, to a file */
};

/* One connection: a send comm to the peer and a recv comm from it, both through one listen. */
struct link {
	void *listen, *send, *recv;
	unsigned char mine[HANDLE_BYTES], peer[HANDLE_BYTES];
};

static struct perf {
	struct opts o;
	struct net_api api;
	void *lib, *ctx;
	int dev;
	double deadline;
	char bind_mode[32], xdp_mode[32];
} P;

/* Whether the deadline has passed; reads the clock once per 256 calls, as a spinning loop calls
 * it far more often than the clock needs reading. */
static bool past_deadline(void)
{
	static unsigned int calls;

	return (++calls & 255) == 0 && rdv_now() > P.deadline;
}

/* ---- messages -------------------------------------------------------------------------------- */

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "harp-perf: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

#define NET_CALL(call)                                                                             \
	do {                                                                                       \
		hnccl_result_t res_ = (call);                                                      \
		if (res_ != HNCCL_SUCCESS) {                                                       \
			fail("%s returned %s", #call, net_res_name(res_));                         \
			return -1;                                                                 \
		}                                                                                  \
	} while (0)

/* The harp plugin's device line ("..., XDP skb mode, AF_XDP copy mode, ..."): the modes. */
static void note_modes(const char *msg)
{
	const char *p;

	if (!strstr(msg, "device ") || !strstr(msg, "AF_XDP ")) {
		return;
	}
	p = strstr(msg, ", XDP ");
	if (p && !P.xdp_mode[0]) {
		sscanf(p, ", XDP %31s mode", P.xdp_mode);
	}
	p = strstr(msg, "AF_XDP ");
	if (p && !P.bind_mode[0]) {
		sscanf(p, "AF_XDP %31s mode", P.bind_mode);
	}
}

static void perf_logger(enum hnccl_log_level level, unsigned long flags, const char *file, int line,
			const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void perf_logger(enum hnccl_log_level level, unsigned long flags, const char *file, int line,
			const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	(void)flags;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	note_modes(msg);
	if (level == HNCCL_LOG_WARN) {
		fprintf(stderr, "NCCL WARN %s:%d %s\n", file ? file : "?", line, msg);
	} else if (P.o.verbose && level == HNCCL_LOG_INFO) {
		fprintf(stderr, "NCCL INFO %s\n", msg);
	}
}

/* ---- options --------------------------------------------------------------------------------- */

/*
 * The plugin installed with this harp-perf (HARP_PERF_PLUGIN_INSTALLED, relative to its own
 * directory) if there is one, else the build's: installed, harp-perf must not depend on a build
 * tree that may be gone; in the build tree nothing is installed beside it.
 */
static const char *default_plugin(void)
{
	static char installed[PATH_MAX];
	char self[PATH_MAX], *slash;
	size_t room;
	ssize_t n;
	int len;

	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		return HARP_PERF_PLUGIN;
	}
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash) {
		return HARP_PERF_PLUGIN;
	}
	room = sizeof(self) - (size_t)(slash + 1 - self);
	len = snprintf(slash + 1, room, "%s", HARP_PERF_PLUGIN_INSTALLED);
	/* realpath() fails where there is no such file; it also drops the bin/.. from records. */
	if (len < 0 || (size_t)len >= room || !realpath(self, installed)) {
		return HARP_PERF_PLUGIN;
	}
	return installed;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: harp-perf TEST --role server|client|rank --dir DIR [options]\n"
		"       harp-perf " NCCL_SOCKET_NAME "   (whether NCCL's socket transport can run here)\n"
		"  TEST: pingpong stream bidir msgrate allreduce raw (perf/README.md)\n"
		"  --plugin SO      the NCCL net plugin (default %s)\n"
		"                   " NCCL_SOCKET_NAME ": NCCL's own socket transport from libnccl.so.2\n"
		"                   (NCCL_LIB names it)\n"
		"  --version N      its ncclNetPlugin_vN table, 8..12 (default 12; with\n"
		"                   " NCCL_SOCKET_NAME ", the release's own)\n"
		"  --json FILE      append result records to FILE (default stdout)\n"
		"  --ifname IF      the interface the records describe\n"
		"  --label TEXT     copied into each record\n"
		"  --timeout SEC    give up after SEC seconds (default 120)\n"
		"  --sizes LIST     pingpong, allreduce: message sizes (K, M, G suffixes)\n"
		"  --iters N        pingpong: round trips per size; allreduce: timed iterations\n"
		"  --warmup N       pingpong: untimed round trips per size (default 100)\n"
		"  --size S         stream, bidir, msgrate: message size\n"
		"  --window W       messages in flight per connection and direction (1..%d)\n"
		"  --conns C        connections (1..%d); pingpong: on the first, the rest idle;\n"
		"                   allreduce: channels (1..16), a connection each way to each\n"
		"                   neighbour, the pieces of each step dealt round them\n"
		"  --idle S         pingpong: then S seconds with every connection open and no call\n"
		"                   into the plugin; prints the CPU this process used meanwhile\n"
		"  --timeline FILE  pingpong, client: append one line per round trip, warm-up\n"
		"                   included: size, index, its start (ms after the first) and us\n"
		"  --bytes B        stream, bidir: bytes per connection and direction\n"
		"  --count N        msgrate: messages per connection\n"
		"  --away-us U      stream, msgrate: the receiving side is away U us after each round\n"
		"                   of calls (a rank computing); its transport moves data meanwhile\n"
		"  --rank R --nranks N   allreduce: this rank and the ring's size (2..64)\n"
		"  --verbose        the plugin's INFO lines on stderr\n",
		default_plugin(), MAX_WINDOW, MAX_CONNS);
}

static int parse_sizes(struct opts *o, const char *arg)
{
	char *copy = strdup(arg), *tok, *save = NULL;
	int rc = 0;

	o->nsizes = 0;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (o->nsizes == MAX_SIZES || parse_size(tok, &o->sizes[o->nsizes])) {
			fprintf(stderr, "harp-perf: bad --sizes '%s' (up to %d sizes like 8,4K,1M)\n",
				arg, MAX_SIZES);
			rc = -1;
			break;
		}
		o->nsizes++;
	}
	free(copy);
	return rc || o->nsizes == 0 ? -1 : 0;
}

static int int_arg(const char *name, const char *arg, long lo, long hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < lo || v > hi) {
		fprintf(stderr, "harp-perf: bad %s '%s' (%ld to %ld)\n", name, arg, lo, hi);
		return -1;
	}
	*out = (int)v;
	return 0;
}

/* A count with an optional K, M or G suffix; unit names what it counts in the message. */
static int size_opt(const char *name, const char *arg, uint64_t lo, uint64_t hi, uint64_t *out,
		    const char *unit)
{
	if (parse_size(arg, out) || *out < lo || *out > hi) {
		fprintf(stderr, "harp-perf: bad %s '%s' (%" PRIu64 " to %" PRIu64 " %s)\n", name,
			arg, lo, hi, unit);
		return -1;
	}
	return 0;
}

static void defaults(struct opts *o)
{
	static const uint64_t pp[] = { 8, 64, 512, 4096, 65536, 524288, 4194304 };
	static const uint64_t ar[] = { 1 << 20, 16 << 20, 64 << 20 };
	const uint64_t *s = o->test == T_ALLREDUCE ? ar : pp;
	int n = o->test == T_ALLREDUCE ? 3 : 7, i;

	o->version = 12;
	o->timeout_s = 120;
	o->plugin = default_plugin();
	for (i = 0; i < n; i++) {
		o->sizes[i] = s[i];
	}
	o->nsizes = n;
	o->iters = o->test == T_ALLREDUCE ? 5 : 2000;
	o->warmup = 100;
	o->size = o->test == T_MSGRATE ? 64 : 512 * 1024;
	o->window = o->test == T_MSGRATE ? 32 : 8;
	o->conns = 1;
	o->bytes = 1ull << 30;
	o->count = 200000;
	o->rank = -1;
}

static int parse_opts(struct opts *o, int argc, char **argv)
{
	static const struct option longs[] = {
		{ "role", required_argument, NULL, 'r' },    { "dir", required_argument, NULL, 'd' },
		{ "plugin", required_argument, NULL, 'p' },  { "version", required_argument, NULL, 'V' },
		{ "json", required_argument, NULL, 'j' },    { "ifname", required_argument, NULL, 'i' },
		{ "label", required_argument, NULL, 'l' },   { "timeout", required_argument, NULL, 't' },
		{ "sizes", required_argument, NULL, 'S' },   { "iters", required_argument, NULL, 'n' },
		{ "warmup", required_argument, NULL, 'w' },  { "size", required_argument, NULL, 's' },
		{ "window", required_argument, NULL, 'W' },  { "conns", required_argument, NULL, 'c' },
		{ "bytes", required_argument, NULL, 'b' },   { "count", required_argument, NULL, 'N' },
		{ "rank", required_argument, NULL, 'R' },    { "nranks", required_argument, NULL, 'K' },
		{ "verbose", no_argument, NULL, 'v' },	     { "help", no_argument, NULL, 'h' },
		{ "idle", required_argument, NULL, 'I' },    { "away-us", required_argument, NULL, 'A' },
		{ "timeline", required_argument, NULL, 'T' },
		{ NULL, 0, NULL, 0 },
	};
	int c, i, rc = 0;

	for (i = 0; i < (int)(sizeof(test_names) / sizeof(test_names[0])); i++) {
		if (!strcmp(argv[0], test_names[i])) {
			o->test = (enum test)i;
			break;
		}
	}
	if (i == (int)(sizeof(test_names) / sizeof(test_names[0]))) {
		fprintf(stderr, "harp-perf: no test '%s'\n", argv[0]);
		usage();
		return -1;
	}
	defaults(o);
	optind = 1;
	while (!rc && (c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
		switch (c) {
		case 'r': o->role = optarg; break;
		case 'd': o->dir = optarg; break;
		case 'p': o->plugin = optarg; break;
		case 'V': rc = int_arg("--version", optarg, 8, 12, &o->version); break;
		case 'j': o->json = optarg; break;
		case 'i': o->ifname = optarg; break;
		case 'l': o->label = optarg; break;
		case 't': rc = int_arg("--timeout", optarg, 1, 86400, &o->timeout_s); break;
		case 'S': rc = parse_sizes(o, optarg); break;
		case 'n': rc = int_arg("--iters", optarg, 1, 100000000, &o->iters); break;
		case 'w': rc = int_arg("--warmup", optarg, 0, 100000000, &o->warmup); break;
		case 'I': rc = int_arg("--idle", optarg, 0, 3600, &o->idle_s); break;
		case 'A': rc = int_arg("--away-us", optarg, 0, 1000000, &o->away_us); break;
		case 's': rc = size_opt("--size", optarg, 1, 1ull << 30, &o->size, "bytes"); break;
		case 'W': rc = int_arg("--window", optarg, 1, MAX_WINDOW, &o->window); break;
		case 'c': rc = int_arg("--conns", optarg, 1, MAX_CONNS, &o->conns); break;
		case 'b': rc = size_opt("--bytes", optarg, 1, 1ull << 46, &o->bytes, "bytes"); break;
		case 'N': rc = size_opt("--count", optarg, 1, 1ull << 40, &o->count, "messages"); break;
		case 'R': rc = int_arg("--rank", optarg, 0, 63, &o->rank); break;
		case 'K': rc = int_arg("--nranks", optarg, 2, 64, &o->nranks); break;
		case 'T': o->timeline = optarg; break;
		case 'v': o->verbose = true; break;
		case 'h': usage(); exit(0);
		default: usage(); return -1;
		}
	}
	if (rc) {
		return -1;
	}
	if (optind < argc) {
		fprintf(stderr, "harp-perf: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	if (!o->dir) {
		fprintf(stderr, "harp-perf: --dir is required (a directory both ends see)\n");
		return -1;
	}
	if (o->test == T_ALLREDUCE) {
		if (!o->role || strcmp(o->role, "rank") || o->rank < 0 || o->nranks < 2 ||
		    o->rank >= o->nranks) {
			fprintf(stderr, "harp-perf: allreduce needs --role rank, --nranks N (2..64) "
					"and --rank R below N\n");
			return -1;
		}
	} else if (!o->role || (strcmp(o->role, "server") && strcmp(o->role, "client"))) {
		fprintf(stderr, "harp-perf: --role must be server or client\n");
		return -1;
	}
	o->server = o->role && !strcmp(o->role, "server");
	for (i = 0; i < o->nsizes; i++) {
		if (o->sizes[i] > (1ull << 30)) {
			fprintf(stderr, "harp-perf: size %" PRIu64 " is over 1 GiB\n", o->sizes[i]);
			return -1;
		}
	}
	return 0;
}

/* ---- patterns -------------------------------------------------------------------------------- */

static void pattern_fill(unsigned char *buf, size_t len, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1, z;
	size_t i;

	for (i = 0; i < len; i += 8) {
		s += 0x9e3779b97f4a7c15ull;
		z = (s ^ (s >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		memcpy(buf + i, &z, len - i < 8 ? len - i : 8);
	}
}

static uint64_t stamp_of(int conn, uint64_t k)
{
	return ((uint64_t)conn << 48) ^ k;
}

/* Message k on connection conn into buf, whose bytes are already its slot's pattern. */
static void stamp(unsigned char *buf, size_t size, int conn, uint64_t k)
{
	uint64_t v = stamp_of(conn, k);

	if (size >= STAMP_BYTES) {
		memcpy(buf, &v, STAMP_BYTES);
	}
}

/* Whether buf holds message k of conn: its stamp, then the slot's pattern (ref). */
static bool check(const unsigned char *buf, const unsigned char *ref, size_t size, int conn,
		  uint64_t k)
{
	uint64_t v;

	if (size < STAMP_BYTES) {
		return memcmp(buf, ref, size) == 0;
	}
	memcpy(&v, buf, STAMP_BYTES);
	return v == stamp_of(conn, k) &&
	       memcmp(buf + STAMP_BYTES, ref + STAMP_BYTES, size - STAMP_BYTES) == 0;
}

static void *region_alloc(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, len ? len : 1)) {
		return NULL;
	}
	memset(p, 0, len ? len : 1);
	return p;
}

/* ---- set-up ---------------------------------------------------------------------------------- */

static int plugin_open(void)
{
	char err[4096];
	const void *table;
	int ndev;

	if (!strcmp(P.o.plugin, NCCL_SOCKET_NAME)) {
		/* NCCL's own socket transport, in its release's table layout */
		if (nccl_socket_open(&table, &P.o.version, err, sizeof(err))) {
			fail("%s", err);
			return -1;
		}
		if (P.o.verbose) {
			fprintf(stderr, "harp-perf: %s\n", err);
		}
		if (net_api_bind(&P.api, table, P.o.version, perf_logger, NULL, err,
				 sizeof(err))) {
			fail("%s", err);
			return -1;
		}
	} else {
		P.lib = dlopen(P.o.plugin, RTLD_NOW | RTLD_LOCAL);
		if (!P.lib) {
			fail("cannot load the plugin: %s", dlerror());
			return -1;
		}
		if (net_api_load(&P.api, P.lib, P.o.version, perf_logger, NULL, err,
				 sizeof(err))) {
			fail("%s", err);
			return -1;
		}
	}
	NET_CALL(P.api.init(&P.ctx, 0x7065726600000000ull | (uint64_t)getpid()));
	NET_CALL(P.api.devices(&ndev));
	if (ndev < 1) {
		fail("the plugin has no device: check HARP_IFNAME");
		return -1;
	}
	P.dev = 0;
	return 0;
}

static void plugin_close(void)
{
	if (P.api.finalize && P.ctx) { /* v11 on, after a successful init */
		P.api.finalize(P.ctx);
	}
	/* The plugin stays loaded: its destructor runs at exit, as under NCCL. */
}

/* Listens n times, publishes the handles as DIR/MINE, connects to those in DIR/PEER. */
static int links_open(struct link *l, int n, const char *mine, const char *peer)
{
	unsigned char *buf = calloc((size_t)n, HANDLE_BYTES);
	char path[PATH_MAX], err[PATH_MAX + 128];
	struct hnccl_net_device_handle *dh;
	int i, up = 0, rc = -1;

	if (!buf) {
		fail("out of memory");
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (P.api.listen(P.ctx, P.dev, l[i].mine, &l[i].listen) != HNCCL_SUCCESS) {
			fail("listen %d failed", i);
			goto out;
		}
		memcpy(buf + (size_t)i * HANDLE_BYTES, l[i].mine, HANDLE_BYTES);
	}
	snprintf(path, sizeof(path), "%s/%s", P.o.dir, mine);
	if (rdv_publish(path, buf, (size_t)n * HANDLE_BYTES, err, sizeof(err))) {
		fail("%s", err);
		goto out;
	}
	snprintf(path, sizeof(path), "%s/%s", P.o.dir, peer);
	if (rdv_fetch(path, buf, (size_t)n * HANDLE_BYTES, P.deadline, err, sizeof(err))) {
		fail("%s", err);
		goto out;
	}
	for (i = 0; i < n; i++) {
		memcpy(l[i].peer, buf + (size_t)i * HANDLE_BYTES, HANDLE_BYTES);
	}
	/* connect and accept never block: call both until every comm is up */
	while (up < 2 * n) {
		up = 0;
		for (i = 0; i < n; i++) {
			dh = NULL;
			if (!l[i].send &&
			    P.api.connect(P.ctx, P.dev, l[i].peer, &l[i].send, &dh) != HNCCL_SUCCESS) {
				fail("connect %d failed", i);
				goto out;
			}
			dh = NULL;
			if (!l[i].recv && P.api.accept(l[i].listen, &l[i].recv, &dh) != HNCCL_SUCCESS) {
				fail("accept %d failed", i);
				goto out;
			}
			up += (l[i].send != NULL) + (l[i].recv != NULL);
		}
		if (up < 2 * n && rdv_now() > P.deadline) {
			fail("%d of %d comms up at the deadline", up, 2 * n);
			goto out;
		}
	}
	rc = 0;
out:
	free(buf);
	return rc;
}

static void links_close(struct link *l, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		if (l[i].send) {
			P.api.close_send(l[i].send);
		}
		if (l[i].recv) {
			P.api.close_recv(l[i].recv);
		}
		if (l[i].listen) {
			P.api.close_listen(l[i].listen);
		}
		l[i].send = l[i].recv = l[i].listen = NULL;
	}
}

/* The record's opening: what ran, where, through what. */
static void record_begin(struct report *r, const char *test)
{
	report_begin(r, "harp-perf", test, P.o.role);
	report_str(r, "transport", "harp");
	report_str(r, "label", P.o.label);
	report_str(r, "plugin", P.o.plugin);
	report_str(r, "plugin_name", P.api.name);
	report_int(r, "plugin_version", P.o.version);
	report_iface(r, P.o.ifname);
	report_str(r, "xdp_mode", P.xdp_mode[0] ? P.xdp_mode : NULL);
	report_str(r, "bind_mode", P.bind_mode[0] ? P.bind_mode : NULL);
}

/* Tests req until done (or the deadline); the size the plugin reported in *size. */
static int wait_req(void *req, int *size, const char *what)
{
	int done = 0;

	while (!done) {
		NET_CALL(P.api.test(req, &done, size));
		if (!done && past_deadline()) {
			fail("%s did not complete before the deadline", what);
			return -1;
		}
	}
	return 0;
}

/* ---- pingpong -------------------------------------------------------------------------------- */

static int post_send(void *comm, void *buf, size_t size, void *mh, void **req)
{
	*req = NULL;
	while (!*req) {
		NET_CALL(P.api.isend(comm, buf, size, 0, mh, NULL, req));
		if (!*req && past_deadline()) {
			fail("isend not accepted before the deadline");
			return -1;
		}
	}
	return 0;
}

static int post_recv(void *comm, void *buf, size_t size, void *mh, void **req)
{
	int tag = 0;

	*req = NULL;
	while (!*req) {
		NET_CALL(P.api.irecv(comm, 1, &buf, &size, &tag, &mh, NULL, req));
		if (!*req && past_deadline()) {
			fail("irecv not accepted before the deadline");
			return -1;
		}
	}
	return 0;
}

/*
 * The client sends message k and waits for it to come back; the server receives it, checks it
 * and sends the same buffer back. Round trips of the timed iterations go into the record.
 */
/* --timeline: the round trips of one size, warm-up included (start in s, time in us). */
static int timeline_write(size_t size, const double *start, const double *us, int n)
{
	FILE *f = fopen(P.o.timeline, "a");
	int k;

	if (!f) {
		fail("--timeline %s: %s", P.o.timeline, strerror(errno));
		return -1;
	}
	for (k = 0; k < n; k++) {
		fprintf(f, "%zu %d %.3f %.1f\n", size, k, (start[k] - start[0]) * 1e3, us[k]);
	}
	if (fclose(f)) {
		fail("--timeline %s: %s", P.o.timeline, strerror(errno));
		return -1;
	}
	return 0;
}

static int pingpong_size(struct link *l, size_t size, unsigned char *tx, unsigned char *rx,
			 const unsigned char *ref, void *tx_mh, void *rx_mh_recv, void *rx_mh_send,
			 double *rtt, double *tl_start, double *tl_us)
{
	int total = P.o.warmup + P.o.iters, k, got;
	double t0, cpu0 = 0, t_start = 0;
	long long pkts0 = -1, pkts1;
	uint64_t bad = 0;
	void *sreq, *rreq;
	struct report r;

	for (k = 0; k < total; k++) {
		if (k == P.o.warmup) {
			cpu0 = cpu_seconds();
			t_start = rdv_now();
			pkts0 = netns_tx_packets();
		}
		if (!P.o.server) {
			stamp(tx, size, 0, (uint64_t)k);
			t0 = rdv_now();
			if (post_recv(l->recv, rx, size, rx_mh_recv, &rreq) ||
			    post_send(l->send, tx, size, tx_mh, &sreq) ||
			    wait_req(sreq, NULL, "pingpong send") ||
			    wait_req(rreq, &got, "pingpong receive")) {
				return -1;
			}
			if (k >= P.o.warmup) {
				rtt[k - P.o.warmup] = (rdv_now() - t0) * 1e6;
			}
			if (tl_start) {
				tl_start[k] = t0;
				tl_us[k] = (rdv_now() - t0) * 1e6;
			}
		} else {
			if (post_recv(l->recv, rx, size, rx_mh_recv, &rreq) ||
			    wait_req(rreq, &got, "pingpong receive")) {
				return -1;
			}
		}
		if ((size_t)got != size || !check(rx, ref, size, 0, (uint64_t)k)) {
			bad++;
			fail("pingpong %zu B: message %d arrived wrong (%d bytes)", size, k, got);
		}
		if (P.o.server && (post_send(l->send, rx, size, rx_mh_send, &sreq) ||
				   wait_req(sreq, NULL, "pingpong echo"))) {
			return -1;
		}
	}
	record_begin(&r, "pingpong");
	report_int(&r, "size", (int64_t)size);
	report_int(&r, "conns", P.o.conns);
	report_int(&r, "iters", P.o.iters);
	report_int(&r, "messages", total);
	report_int(&r, "bytes", (int64_t)(size * (size_t)total));
	report_num(&r, "seconds", rdv_now() - t_start);
	report_num(&r, "cpu_s", cpu_seconds() - cpu0);
	report_int(&r, "rss_kb", rss_peak_kb());
	pkts1 = netns_tx_packets();
	if (pkts0 >= 0 && pkts1 >= pkts0 && P.o.iters) {
		/* what this end sent per timed round trip: with harp, its protocol's packets */
		report_num(&r, "tx_packets_per_rt", (double)(pkts1 - pkts0) / P.o.iters);
	}
	report_bool(&r, "verified", bad == 0);
	report_int(&r, "verified_bytes", (int64_t)(size * (size_t)(total - (int)bad)));
	if (!P.o.server) {
		char what[64];

		snprintf(what, sizeof(what), "pingpong %8zu B", size);
		report_latency(&r, what, rtt, P.o.iters);
		if (tl_start && timeline_write(size, tl_start, tl_us, total)) {
			return -1;
		}
	}
	if (report_end(&r, P.o.json)) {
		return -1;
	}
	return bad ? -1 : 0;
}

static int run_pingpong(void)
{
	struct link ls[MAX_CONNS] = { 0 }, *l = &ls[0]; /* the one that ping-pongs */
	size_t max = 0;
	unsigned char *tx = NULL, *rx = NULL, *ref = NULL;
	void *tx_mh = NULL, *rx_mh = NULL, *echo_mh = NULL;
	double *rtt = calloc((size_t)P.o.iters, sizeof(double));
	size_t rounds = (size_t)P.o.warmup + (size_t)P.o.iters;
	bool tl = P.o.timeline && !P.o.server;
	double *tl_start = tl ? calloc(rounds, sizeof(double)) : NULL;
	double *tl_us = tl ? calloc(rounds, sizeof(double)) : NULL;
	int i, rc = -1;

	for (i = 0; i < P.o.nsizes; i++) {
		max = P.o.sizes[i] > max ? P.o.sizes[i] : max;
	}
	tx = region_alloc(max);
	rx = region_alloc(max);
	ref = region_alloc(max);
	if (!rtt || !tx || !rx || !ref || (tl && (!tl_start || !tl_us))) {
		fail("out of memory for %zu-byte buffers", max);
		goto out;
	}
	pattern_fill(ref, max, 1);
	memcpy(tx, ref, max);
	/* the other connections stay open and idle: what they cost the busy one is measured */
	if (links_open(ls, P.o.conns, P.o.server ? "server.handles" : "client.handles",
		       P.o.server ? "client.handles" : "server.handles")) {
		goto out;
	}
	if (P.api.reg_mr(l->send, tx, max, HNCCL_PTR_HOST, &tx_mh) != HNCCL_SUCCESS ||
	    P.api.reg_mr(l->recv, rx, max, HNCCL_PTR_HOST, &rx_mh) != HNCCL_SUCCESS ||
	    P.api.reg_mr(l->send, rx, max, HNCCL_PTR_HOST, &echo_mh) != HNCCL_SUCCESS) {
		fail("regMr of the pingpong buffers failed");
		goto out;
	}
	rc = 0;
	for (i = 0; i < P.o.nsizes && !rc; i++) {
		rc = pingpong_size(l, P.o.sizes[i], tx, rx, ref, tx_mh, rx_mh, echo_mh, rtt,
				   tl_start, tl_us);
	}
	if (!rc && P.o.idle_s) {
		/* what connections cost while nobody calls: the plugin's own threads */
		double cpu0 = cpu_seconds(), t0 = rdv_now(), secs;

		sleep((unsigned int)P.o.idle_s);
		secs = rdv_now() - t0;
		printf("idle: %d connection(s) each way for %.1f s: %.2f%% of a core\n", P.o.conns,
		       secs, (cpu_seconds() - cpu0) / secs * 100);
	}
out:
	if (tx_mh) {
		P.api.dereg_mr(l->send, tx_mh);
	}
	if (echo_mh) {
		P.api.dereg_mr(l->send, echo_mh);
	}
	if (rx_mh) {
		P.api.dereg_mr(l->recv, rx_mh);
	}
	links_close(ls, P.o.conns);
	free(tx);
	free(rx);
	free(ref);
	free(rtt);
	return rc;
}

/* ---- stream, bidir, msgrate: flows through a window of slots --------------------------------- */

struct flow {
	void *comm;
	bool recv;
	int conn;
	unsigned char *region; /* window slots of size bytes, registered once */
	void *mh;
	void *req[MAX_WINDOW];
	uint64_t posted, done, bad;
	double t_first; /* receive: when the first message completed */
};

/* What every flow shares: the shape and the slots' reference patterns. */
struct flows {
	struct flow *f;
	int n;
	size_t size;
	int window;
	uint64_t total; /* messages per flow */
	unsigned char *ref;
};

static int flow_post(struct flows *fs, struct flow *f)
{
	int slot = (int)(f->posted % (uint64_t)fs->window), tag = 0;
	unsigned char *buf = f->region + (size_t)slot * fs->size;
	void *req = NULL;
	size_t size = fs->size;

	if (f->recv) {
		NET_CALL(P.api.irecv(f->comm, 1, (void **)&buf, &size, &tag, &f->mh, NULL, &req));
	} else {
		stamp(buf, fs->size, f->conn, f->posted);
		NET_CALL(P.api.isend(f->comm, buf, fs->size, 0, f->mh, NULL, &req));
	}
	if (!req) {
		return 0; /* not now: NCCL calls again later */
	}
	f->req[slot] = req;
	f->posted++;
	return 1;
}

static int flow_test(struct flows *fs, struct flow *f)
{
	int slot = (int)(f->done % (uint64_t)fs->window), done = 0, got = -1;
	const unsigned char *buf = f->region + (size_t)slot * fs->size;

	NET_CALL(P.api.test(f->req[slot], &done, &got));
	if (!done) {
		return 0;
	}
	if (f->recv) {
		if (f->done == 0) {
			f->t_first = rdv_now();
		}
		if ((size_t)got != fs->size ||
		    !check(buf, fs->ref + (size_t)slot * fs->size, fs->size, f->conn, f->done)) {
			if (!f->bad) {
				fail("conn %d message %" PRIu64 " arrived wrong (%d of %zu bytes)",
				     f->conn, f->done, got, fs->size);
			}
			f->bad++;
		}
	}
	f->done++;
	return 1;
}

/* NCCL's loop: post what each window allows, test the oldest request of each flow. */
static int flows_run(struct flows *fs)
{
	bool busy = true;
	int i, rc;

	while (busy) {
		busy = false;
		for (i = 0; i < fs->n; i++) {
			struct flow *f = &fs->f[i];

			while (f->posted < fs->total && f->posted - f->done < (uint64_t)fs->window) {
				rc = flow_post(fs, f);
				if (rc <= 0) {
					if (rc < 0) {
						return -1;
					}
					break;
				}
			}
			/* back from away, it takes what completed meanwhile, not one message */
			do {
				rc = f->done < f->posted ? flow_test(fs, f) : 0;
				if (rc < 0) {
					return -1;
				}
				while (rc && f->posted < fs->total &&
				       f->posted - f->done < (uint64_t)fs->window) {
					if ((rc = flow_post(fs, f)) < 0) {
						return -1;
					}
				}
			} while (rc && P.o.away_us);
			busy |= f->done < fs->total;
		}
		if (busy && P.o.away_us && P.o.server && P.o.test != T_BIDIR) {
			struct timespec away = { .tv_sec = P.o.away_us / 1000000,
						 .tv_nsec = P.o.away_us % 1000000 * 1000L };

			nanosleep(&away, NULL);
		}
		if (busy && past_deadline()) {
			fail("deadline reached with messages outstanding");
			return -1;
		}
	}
	return 0;
}

static int run_flows(void)
{
	bool sends = P.o.test == T_BIDIR || !P.o.server, recvs = P.o.test == T_BIDIR || P.o.server;
	int nconn = P.o.conns, i, rc = -1;
	struct link *l = calloc((size_t)nconn, sizeof(*l));
	struct flows fs = { .window = P.o.window };
	uint64_t rx_msgs = 0, tx_msgs = 0, bad = 0;
	double t0, t1, cpu0, first = INFINITY;
	struct report r;

	fs.size = P.o.size;
	fs.total = P.o.test == T_MSGRATE ? P.o.count : (P.o.bytes + fs.size - 1) / fs.size;
	fs.f = calloc((size_t)nconn * 2, sizeof(*fs.f));
	fs.ref = region_alloc(fs.size * (size_t)fs.window);
	if (!l || !fs.f || !fs.ref) {
		fail("out of memory");
		goto out;
	}
	for (i = 0; i < fs.window; i++) {
		pattern_fill(fs.ref + (size_t)i * fs.size, fs.size, 100 + (uint64_t)i);
	}
	if (links_open(l, nconn, P.o.server ? "server.handles" : "client.handles",
		       P.o.server ? "client.handles" : "server.handles")) {
		goto out;
	}
	for (i = 0; i < nconn; i++) {
		if (sends) {
			struct flow *f = &fs.f[fs.n++];

			f->comm = l[i].send;
			f->conn = i;
			f->region = region_alloc(fs.size * (size_t)fs.window);
			if (!f->region) {
				fail("out of memory");
				goto out;
			}
			memcpy(f->region, fs.ref, fs.size * (size_t)fs.window);
			NET_CALL(P.api.reg_mr(f->comm, f->region, fs.size * (size_t)fs.window,
					      HNCCL_PTR_HOST, &f->mh));
		}
		if (recvs) {
			struct flow *f = &fs.f[fs.n++];

			f->comm = l[i].recv;
			f->recv = true;
			f->conn = i;
			f->region = region_alloc(fs.size * (size_t)fs.window);
			if (!f->region) {
				fail("out of memory");
				goto out;
			}
			NET_CALL(P.api.reg_mr(f->comm, f->region, fs.size * (size_t)fs.window,
					      HNCCL_PTR_HOST, &f->mh));
		}
	}
	cpu0 = cpu_seconds();
	t0 = rdv_now();
	rc = flows_run(&fs);
	t1 = rdv_now();
	for (i = 0; i < fs.n; i++) {
		if (fs.f[i].recv) {
			rx_msgs += fs.f[i].done;
			bad += fs.f[i].bad;
			first = fs.f[i].t_first < first ? fs.f[i].t_first : first;
		} else {
			tx_msgs += fs.f[i].done;
		}
	}
	record_begin(&r, test_names[P.o.test]);
	report_int(&r, "size", (int64_t)fs.size);
	report_int(&r, "window", fs.window);
	report_int(&r, "conns", nconn);
	report_int(&r, "away_us", P.o.away_us);
	{
		/* a receiver's clock starts at its first message (the sender may start later) */
		uint64_t msgs = recvs ? rx_msgs : tx_msgs;
		double secs = recvs && isfinite(first) && rx_msgs > (uint64_t)nconn ? t1 - first :
										      t1 - t0;
		uint64_t counted = recvs && secs < t1 - t0 ? msgs - (uint64_t)nconn : msgs;

		report_int(&r, "messages", (int64_t)msgs);
		report_int(&r, "bytes", (int64_t)(msgs * fs.size));
		report_num(&r, "seconds", secs);
		report_num(&r, "gbps", secs > 0 ? (double)(counted * fs.size) * 8 / secs / 1e9 : NAN);
		report_num(&r, "msgs_per_s", secs > 0 ? (double)counted / secs : NAN);
		printf("%s %s: %" PRIu64 " x %zu B over %d conn(s) in %.3f s: %.3f Gbit/s, "
		       "%.0f msg/s\n",
		       test_names[P.o.test], P.o.role, msgs, fs.size, nconn, secs,
		       secs > 0 ? (double)(counted * fs.size) * 8 / secs / 1e9 : 0.0,
		       secs > 0 ? (double)counted / secs : 0.0);
	}
	report_num(&r, "cpu_s", cpu_seconds() - cpu0);
	report_int(&r, "rss_kb", rss_peak_kb());
	report_bool(&r, "verified", rc == 0 && bad == 0 && (!recvs || rx_msgs == fs.total * (uint64_t)nconn));
	report_int(&r, "verified_bytes", recvs ? (int64_t)((rx_msgs - bad) * fs.size) : 0);
	if (report_end(&r, P.o.json) || bad) {
		rc = -1;
	}
out:
	for (i = 0; fs.f && i < fs.n; i++) {
		if (fs.f[i].mh) {
			P.api.dereg_mr(fs.f[i].comm, fs.f[i].mh);
		}
		free(fs.f[i].region);
	}
	if (l) {
		links_close(l, nconn);
	}
	free(fs.f);
	free(fs.ref);
	free(l);
	return rc;
}

/* ---- allreduce: a ring of ranks, reduce-scatter then all-gather ------------------------------ */

#define MAX_CHANNELS 16 /* allreduce --conns: channels, as NCCL's (MAXCHANNELS is 32/64) */

/* One channel of the ring, as NCCL runs one: a connection each way, and its own pieces. */
struct channel {
	struct link link; /* send: to rank + 1; recv: from rank - 1 */
	void *data_send_mh, *data_recv_mh, *tmp_mh;
	void *sreq[MAX_WINDOW], *rreq[MAX_WINDOW];
	size_t sposted, sdone, rposted, rdone; /* this channel's pieces: k * nch + its index */
};

struct ring {
	struct channel ch[MAX_CHANNELS];
	int nch;
	float *data, *tmp; /* tmp: window pieces a channel */
	size_t count, chunk; /* floats in all, per chunk (count = chunk * nranks) */
	int window;
};

/* Element i of rank r's input; the sum over all ranks is exact in float32. */
static float ar_input(int rank, size_t i)
{
	return (float)((rank + 1) + (int)(i % 7));
}

/* Floats in piece k of a chunk: PIECE_BYTES' worth, the last one what is left. */
static size_t piece_len(const struct ring *g, size_t k)
{
	size_t piece = PIECE_BYTES / sizeof(float);

	return g->chunk - k * piece < piece ? g->chunk - k * piece : piece;
}

/*
 * One channel's share of a ring step: its pieces (k = j * nch + its index) posted, up to window
 * in flight each way, and one of each tested. 1 when the channel is done, 0 when not yet, -1 on
 * a failure.
 */
static int channel_step(struct ring *g, int c, size_t npieces, int sc, int rc, bool reduce)
{
	struct channel *ch = &g->ch[c];
	size_t piece = PIECE_BYTES / sizeof(float), w = (size_t)g->window;
	size_t mine = npieces / (size_t)g->nch + ((size_t)c < npieces % (size_t)g->nch);
	int tag = 0, done, got;

	while (ch->sposted < mine && ch->sposted - ch->sdone < w) {
		size_t k = ch->sposted * (size_t)g->nch + (size_t)c;
		void *req = NULL;

		NET_CALL(P.api.isend(ch->link.send, g->data + (size_t)sc * g->chunk + k * piece,
				     piece_len(g, k) * sizeof(float), 0, ch->data_send_mh, NULL, &req));
		if (!req) {
			break;
		}
		ch->sreq[ch->sposted++ % w] = req;
	}
	while (ch->rposted < mine && ch->rposted - ch->rdone < w) {
		size_t k = ch->rposted * (size_t)g->nch + (size_t)c;
		size_t bytes = piece_len(g, k) * sizeof(float);
		void *buf = reduce ? (void *)(g->tmp + ((size_t)c * w + ch->rposted % w) * piece)
				   : (void *)(g->data + (size_t)rc * g->chunk + k * piece);
		void *mh = reduce ? ch->tmp_mh : ch->data_recv_mh;
		void *req = NULL;

		NET_CALL(P.api.irecv(ch->link.recv, 1, &buf, &bytes, &tag, &mh, NULL, &req));
		if (!req) {
			break;
		}
		ch->rreq[ch->rposted++ % w] = req;
	}
	if (ch->sdone < ch->sposted) {
		NET_CALL(P.api.test(ch->sreq[ch->sdone % w], &done, NULL));
		ch->sdone += done != 0;
	}
	if (ch->rdone < ch->rposted) {
		NET_CALL(P.api.test(ch->rreq[ch->rdone % w], &done, &got));
		if (done) {
			size_t k = ch->rdone * (size_t)g->nch + (size_t)c, n = piece_len(g, k);

			if ((size_t)got != n * sizeof(float)) {
				fail("allreduce piece of %zu bytes arrived as %d", n * sizeof(float), got);
				return -1;
			}
			if (reduce) {
				float *dst = g->data + (size_t)rc * g->chunk + k * piece;
				const float *src = g->tmp + ((size_t)c * w + ch->rdone % w) * piece;
				size_t j;

				for (j = 0; j < n; j++) {
					dst[j] += src[j];
				}
			}
			ch->rdone++;
		}
	}
	return ch->sdone == mine && ch->rdone == mine;
}

/*
 * One ring step: send chunk sc to the next rank, receive chunk rc from the previous one, in
 * pieces of up to PIECE_BYTES dealt round the channels, each with up to window pieces in flight
 * (as NCCL's channels each move their share). reduce: the received pieces land in tmp and are
 * added into chunk rc; else they land in place.
 */
static int ring_step(struct ring *g, int sc, int rc, bool reduce)
{
	size_t piece = PIECE_BYTES / sizeof(float), npieces = (g->chunk + piece - 1) / piece;
	int c, done, rc_c;

	for (c = 0; c < g->nch; c++) {
		g->ch[c].sposted = g->ch[c].sdone = g->ch[c].rposted = g->ch[c].rdone = 0;
	}
	do {
		done = 0;
		for (c = 0; c < g->nch; c++) {
			rc_c = channel_step(g, c, npieces, sc, rc, reduce);
			if (rc_c < 0) {
				return -1;
			}
			done += rc_c;
		}
		if (past_deadline()) {
			fail("allreduce step did not finish before the deadline");
			return -1;
		}
	} while (done < g->nch);
	return 0;
}

static int ring_allreduce(struct ring *g)
{
	int n = P.o.nranks, r = P.o.rank, s;

	for (s = 0; s < n - 1; s++) {
		if (ring_step(g, ((r - s) % n + n) % n, ((r - s - 1) % n + n) % n, true)) {
			return -1;
		}
	}
	for (s = 0; s < n - 1; s++) {
		if (ring_step(g, ((r + 1 - s) % n + n) % n, ((r - s) % n + n) % n, false)) {
			return -1;
		}
	}
	return 0;
}

static int allreduce_size(struct ring *g, size_t bytes)
{
	int n = P.o.nranks, it;
	size_t i, wrong = 0, count = bytes / sizeof(float);
	double t0, total = 0, cpu0, algbw;
	float want;
	struct report r;

	g->chunk = (count + (size_t)n - 1) / (size_t)n;
	g->count = g->chunk * (size_t)n;
	cpu0 = cpu_seconds();
	for (it = 0; it <= P.o.iters; it++) { /* iteration 0 warms up, untimed */
		for (i = 0; i < g->count; i++) {
			g->data[i] = ar_input(P.o.rank, i);
		}
		if (it == 1) {
			cpu0 = cpu_seconds();
		}
		t0 = rdv_now();
		if (ring_allreduce(g)) {
			return -1;
		}
		if (it > 0) {
			total += rdv_now() - t0;
		}
	}
	for (i = 0; i < g->count; i++) {
		want = (float)(n * (n + 1) / 2 + n * (int)(i % 7));
		if (g->data[i] != want) {
			if (!wrong) {
				fail("allreduce %zu B: element %zu is %g, expected %g", bytes, i,
				     (double)g->data[i], (double)want);
			}
			wrong++;
		}
	}
	algbw = (double)(count * sizeof(float)) / (total / P.o.iters) / 1e9;
	record_begin(&r, "allreduce");
	report_int(&r, "nranks", n);
	report_int(&r, "channels", g->nch);
	report_int(&r, "rank", P.o.rank);
	report_int(&r, "size", (int64_t)(count * sizeof(float)));
	report_int(&r, "count", (int64_t)count);
	report_int(&r, "iters", P.o.iters);
	report_num(&r, "time_us", total / P.o.iters * 1e6);
	report_num(&r, "algbw_GBps", algbw);
	report_num(&r, "busbw_GBps", algbw * 2.0 * (n - 1) / n);
	report_num(&r, "seconds", total);
	report_num(&r, "cpu_s", cpu_seconds() - cpu0);
	report_int(&r, "rss_kb", rss_peak_kb());
	report_bool(&r, "verified", wrong == 0);
	report_int(&r, "verified_bytes", (int64_t)((count - (wrong < count ? wrong : count)) * sizeof(float)));
	printf("allreduce rank %d/%d %zu B: %.1f us, algbw %.3f GB/s, busbw %.3f GB/s%s\n",
	       P.o.rank, n, count * sizeof(float), total / P.o.iters * 1e6, algbw,
	       algbw * 2.0 * (n - 1) / n, wrong ? " WRONG" : "");
	if (report_end(&r, P.o.json)) {
		return -1;
	}
	return wrong ? -1 : 0;
}

static int run_allreduce(void)
{
	static struct ring g; /* large: the channels' request slots */
	struct link links[MAX_CHANNELS];
	char mine[64], peer[64];
	size_t max = 0, cap, tmp_bytes;
	int i, c, rc = -1;

	memset(&g, 0, sizeof(g));
	memset(links, 0, sizeof(links));
	g.window = 8;
	g.nch = P.o.conns;
	if (g.nch > MAX_CHANNELS) {
		fail("allreduce: --conns %d: at most %d channels", g.nch, MAX_CHANNELS);
		return -1;
	}

	for (i = 0; i < P.o.nsizes; i++) {
		max = P.o.sizes[i] > max ? P.o.sizes[i] : max;
	}
	/* room for the largest size rounded up to whole chunks */
	cap = (max / sizeof(float) + (size_t)P.o.nranks) * sizeof(float);
	tmp_bytes = PIECE_BYTES * (size_t)g.window * (size_t)g.nch;
	g.data = region_alloc(cap);
	g.tmp = region_alloc(tmp_bytes);
	if (!g.data || !g.tmp) {
		fail("out of memory for %zu bytes", cap);
		goto out;
	}
	snprintf(mine, sizeof(mine), "rank%d.handle", P.o.rank);
	snprintf(peer, sizeof(peer), "rank%d.handle", (P.o.rank + 1) % P.o.nranks);
	/* each rank listens once a channel: its predecessor connects there, it connects to its
	 * successor */
	if (links_open(links, g.nch, mine, peer)) {
		goto out_links;
	}
	for (c = 0; c < g.nch; c++) {
		struct channel *ch = &g.ch[c];

		ch->link = links[c];
		if (P.api.reg_mr(ch->link.send, g.data, cap, HNCCL_PTR_HOST, &ch->data_send_mh) ||
		    P.api.reg_mr(ch->link.recv, g.data, cap, HNCCL_PTR_HOST, &ch->data_recv_mh) ||
		    P.api.reg_mr(ch->link.recv, g.tmp, tmp_bytes, HNCCL_PTR_HOST, &ch->tmp_mh)) {
			fail("regMr of the allreduce buffers failed (channel %d)", c);
			goto out;
		}
	}
	rc = 0;
	for (i = 0; i < P.o.nsizes && !rc; i++) {
		rc = allreduce_size(&g, P.o.sizes[i]);
	}
out:
	for (c = 0; c < g.nch; c++) {
		struct channel *ch = &g.ch[c];

		if (ch->data_send_mh) {
			P.api.dereg_mr(ch->link.send, ch->data_send_mh);
		}
		if (ch->data_recv_mh) {
			P.api.dereg_mr(ch->link.recv, ch->data_recv_mh);
		}
		if (ch->tmp_mh) {
			P.api.dereg_mr(ch->link.recv, ch->tmp_mh);
		}
	}
out_links:
	links_close(links, g.nch);
	free(g.data);
	free(g.tmp);
	return rc;
}

/* ---- main ------------------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
	int rc;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage();
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "raw")) {
		return perf_raw_main(argc - 1, argv + 1);
	}
	if (!strcmp(argv[1], NCCL_SOCKET_NAME)) {
		/* can NCCL's socket transport run here? which one, or where it was looked for */
		const void *table;
		char what[4096];
		int version;

		rc = nccl_socket_open(&table, &version, what, sizeof(what));
		fprintf(rc ? stderr : stdout, "harp-perf: %s\n", what);
		return rc ? 1 : 0;
	}
	if (parse_opts(&P.o, argc - 1, argv + 1)) {
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	P.deadline = rdv_now() + P.o.timeout_s;
	rc = plugin_open();
	if (!rc) {
		switch (P.o.test) {
		case T_PINGPONG:
			rc = run_pingpong();
			break;
		case T_ALLREDUCE:
			rc = run_allreduce();
			break;
		default:
			rc = run_flows();
			break;
		}
	}
	plugin_close();
	return rc ? 1 : 0;
}
