// SPDX-License-Identifier: Apache-2.0
/*
 * harp-xfer: moves verified messages between two processes over harp. The server listens (one
 * listener per connection, as NCCL does) and writes the handles to a file; the client reads the
 * file and connects. Each message's bytes are a window into a pseudo-random pattern both sides
 * derive from the same seed, so the receiver checks every byte with memcmp and the sender never
 * regenerates data. Up to --window messages per connection and direction are in flight, the
 * way NCCL pipelines its slots.
 *
 * --recv-short N makes every N-th message of each flow (index k with k % N == N - 1, counted per
 * connection and direction from 0, zero-byte messages excepted) one byte too big for the receive
 * posted for it: both sides know which ones from their arguments alone, both expect exactly those
 * to fail with EMSGSIZE (and the refused receive buffer to stay untouched: no truncation), and
 * every other message is verified as usual, so the connection must keep working past each one.
 *
 * --duration SEC (a soak) cycles through the sizes until SEC seconds have passed, then posts
 * nothing more and drains: it lets what is out complete, for DRAIN_S seconds at most, and stays
 * at least DRAIN_MIN_S so that the peer (which started within moments of us) has stopped posting
 * too before we close. What the peer no longer answers (it stopped posting first, or closed at the
 * end of its own drain) is left and counted as abandoned. Every message that completed was
 * verified as always.
 *
 * --idle SEC leaves the connections idle (set up, nothing posted, harp progressed) that long
 * before the transfer: what happens to a connection whose path goes dark while nothing is out.
 *
 * --churn N opens and closes N more connections, one after another, beside the transfer: each
 * carries one verified 64-byte message each way and is closed, on the same engines as the rest.
 * The transfer goes round its sizes (as with --duration) until the N have come and gone, then
 * drains as --duration does, CHURN_DRAIN_S seconds at least (a test reads the process's standing
 * meanwhile).
 * What churn does to the process's standing (its node agent, its queues) shows in the
 * transfer going on untouched.
 *
 * --slow-us US makes this side a slow consumer: after each round over its connections it does
 * something else for US microseconds, calling nothing of harp. With HARP_IDLE_PROGRESS_US=0 (no
 * keeper thread) the peer's packets pile up meanwhile: the receive ring overflows and the fill
 * ring runs dry, and harp must slow down (losses, sent again), never lose or corrupt a message.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "harp/harp.h"
#include "size_arg.h"

#define MAX_SIZES 32
#define MAX_CONNS 256
#define PATTERN_SLACK 4096
#define WINDOW_MAX 16
#define CANARY 0xa5 /* fills a receive buffer whose message must be refused */
#define DRAIN_S 10    /* --duration: how long what is out may take to complete */
#define DRAIN_MIN_S 3 /* ... and how long we wait for the peer to stop posting as we did */
#define CHURN_DRAIN_S 5 /* --churn: the drain's least time (a test reads our standing then) */

struct opts {
	bool server;
	const char *ifname, *handle_file;
	int queues, conns, count, window, timeout_s, duration_s, idle_s, slow_us, churn;
	int recv_short; /* every recv_short-th message is too big for its receive; 0: none */
	bool bidir, quiet;
	uint64_t sizes[MAX_SIZES];
	int nsizes;
	uint64_t total;
};

/* One direction of one connection. */
struct flow {
	int nmsgs;
	int posted, completed;
	struct harp_req *reqs[WINDOW_MAX];
	int req_msg[WINDOW_MAX];
	uint8_t *bufs[WINDOW_MAX]; /* receive side */
};

struct xconn {
	struct harp_listener *listener;
	struct harp_conn *conn;
	int id;
	bool up;
	struct flow tx, rx;
};

/* --churn: the one short-lived connection under way. */
#define CHURN_MSG 64
struct churn {
	struct harp_listener *listener; /* server */
	struct harp_handle handle;	/* client: what it connects to, each time */
	struct harp_conn *conn;
	struct harp_req *req;
	bool up;
	int step; /* 0: the client's message; 1: the server's answer; 2: done, close */
	int done; /* connections that came and went */
	uint8_t buf[CHURN_MSG];
};

struct run {
	struct opts o;
	struct churn churn;
	struct harp_ctx *ctx;
	struct xconn *xc;
	uint8_t *pattern[2]; /* by direction: 0 client->server, 1 server->client */
	uint64_t max_size;
	uint64_t verified_bytes, sent_bytes, verified_msgs;
	uint64_t msgsize_send_errors, msgsize_recv_errors; /* expected EMSGSIZE failures seen */
	bool stopping;	      /* --duration: its time is up; nothing more is posted */
	long long abandoned; /* requests still out when the drain ended */
	int failed;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int parse_sizes(struct opts *o, char *list)
{
	char *tok, *save = NULL;

	o->nsizes = 0;
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (o->nsizes == MAX_SIZES || parse_size(tok, &o->sizes[o->nsizes])) {
			fprintf(stderr, "harp-xfer: bad --sizes entry '%s'\n", tok);
			return -1;
		}
		o->nsizes++;
	}
	return o->nsizes ? 0 : -1;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: harp-xfer server|client --ifname IF --handle-file PATH [--queues N]\n"
		"       (without --queues: HARP_QUEUES, auto by default, a count or a list such as 2-3)\n"
		"       [--conns C] [--sizes LIST] [--count N] [--window W] [--bidir]\n"
		"       [--total BYTES] [--timeout SEC] [--recv-short N] [--duration SEC] [--idle SEC]\n"
		"       [--slow-us US] [--churn N] [--quiet]\n");
}

static int parse_opts(struct opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "ifname", required_argument, 0, 'i' }, { "handle-file", required_argument, 0, 'f' },
		{ "queues", required_argument, 0, 'q' }, { "conns", required_argument, 0, 'c' },
		{ "sizes", required_argument, 0, 's' },	 { "count", required_argument, 0, 'n' },
		{ "window", required_argument, 0, 'w' }, { "bidir", no_argument, 0, 'b' },
		{ "total", required_argument, 0, 't' },	 { "timeout", required_argument, 0, 'T' },
		{ "quiet", no_argument, 0, 'Q' },	 { "recv-short", required_argument, 0, 'R' },
		{ "duration", required_argument, 0, 'D' }, { "idle", required_argument, 0, 'I' },
		{ "slow-us", required_argument, 0, 'S' },  { "churn", required_argument, 0, 'C' },
		{ 0, 0, 0, 0 },
	};
	char sizes_default[] = "1M";
	int c;

	memset(o, 0, sizeof(*o));
	o->conns = 1;
	o->count = 1;
	o->window = 8;
	o->timeout_s = 120;
	if (argc < 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		usage();
		return -1;
	}
	o->server = !strcmp(argv[1], "server");
	parse_sizes(o, sizes_default);
	optind = 2;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'i': o->ifname = optarg; break;
		case 'f': o->handle_file = optarg; break;
		case 'q': o->queues = atoi(optarg); break;
		case 'c': o->conns = atoi(optarg); break;
		case 's':
			if (parse_sizes(o, optarg)) {
				return -1;
			}
			break;
		case 'n': o->count = atoi(optarg); break;
		case 'w': o->window = atoi(optarg); break;
		case 'b': o->bidir = true; break;
		case 't':
			if (parse_size(optarg, &o->total)) {
				fprintf(stderr, "harp-xfer: bad --total '%s'\n", optarg);
				return -1;
			}
			break;
		case 'T': o->timeout_s = atoi(optarg); break;
		case 'Q': o->quiet = true; break;
		case 'R': o->recv_short = atoi(optarg); break;
		case 'D': o->duration_s = atoi(optarg); break;
		case 'I': o->idle_s = atoi(optarg); break;
		case 'S': o->slow_us = atoi(optarg); break;
		case 'C': o->churn = atoi(optarg); break;
		default: usage(); return -1;
		}
	}
	if (!o->ifname || !o->handle_file) {
		fprintf(stderr, "harp-xfer: --ifname and --handle-file are required\n");
		usage();
		return -1;
	}
	if (o->conns < 1 || o->conns > MAX_CONNS || o->count < 1 || o->window < 1 ||
	    o->window > WINDOW_MAX || o->queues < 0 || o->timeout_s < 1 || o->recv_short < 0 ||
	    o->duration_s < 0 || (o->duration_s && o->timeout_s <= o->duration_s + DRAIN_S) ||
	    o->idle_s < 0 || o->slow_us < 0 || o->slow_us > 1000000 || o->churn < 0 ||
	    (o->churn && o->duration_s)) {
		fprintf(stderr,
			"harp-xfer: out of range: --conns %d (1-%d), --count %d (1 or more), "
			"--window %d (1-%d), --queues %d, --timeout %d (1 s or more; with --duration, "
			"more than it and %d s), --recv-short %d, --duration %d, --idle %d, "
			"--slow-us %d (0-1000000), --churn %d (0 or more; not with --duration)\n",
			o->conns, MAX_CONNS, o->count, o->window, WINDOW_MAX, o->queues, o->timeout_s,
			DRAIN_S, o->recv_short, o->duration_s, o->idle_s, o->slow_us, o->churn);
		return -1;
	}
	if (o->total) {
		/* Stream: 1 MiB messages adding up to --total per connection and direction. */
		o->sizes[0] = 1 << 20;
		o->nsizes = 1;
		o->count = (int)((o->total + (1 << 20) - 1) >> 20);
	}
	return 0;
}

/* Message k of a flow: its size and where its bytes start in the pattern. */
static uint64_t msg_size(const struct opts *o, int k)
{
	return o->sizes[(k / o->count) % o->nsizes]; /* --duration goes round the sizes */
}

/* Message k is posted a receive one byte smaller than itself (see --recv-short). */
static bool msg_short(const struct opts *o, int k)
{
	return o->recv_short && k % o->recv_short == o->recv_short - 1 && msg_size(o, k) > 0;
}

static const uint8_t *msg_bytes(const struct run *r, int dir, int conn, int k)
{
	return r->pattern[dir] + ((uint64_t)conn * 131 + (uint64_t)k * 17) % PATTERN_SLACK;
}

static uint8_t *make_pattern(uint64_t len, uint64_t seed)
{
	uint8_t *p = malloc(len);
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1, i;

	if (!p) {
		return NULL;
	}
	for (i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)(x >> 32);
	}
	return p;
}

/* ---- handles through a file ---------------------------------------------------------------- */

static int write_handles(const struct run *r, const struct harp_handle *h)
{
	char tmp[4096];
	FILE *f;
	int i, j, n = r->o.conns + (r->o.churn > 0);

	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", r->o.handle_file, getpid());
	f = fopen(tmp, "w");
	if (!f) {
		perror("harp-xfer: handle file");
		return -1;
	}
	for (i = 0; i < n; i++) {
		for (j = 0; j < HARP_HANDLE_SIZE; j++) {
			fprintf(f, "%02x", h[i].bytes[j]);
		}
		fputc('\n', f);
	}
	if (fclose(f) || rename(tmp, r->o.handle_file)) {
		perror("harp-xfer: handle file");
		return -1;
	}
	return 0;
}

static int read_handles(const struct run *r, struct harp_handle *h, double deadline)
{
	char line[2 * HARP_HANDLE_SIZE + 8];
	FILE *f;
	int i, j, n = r->o.conns + (r->o.churn > 0);
	unsigned v;

	while (!(f = fopen(r->o.handle_file, "r"))) {
		if (now_s() > deadline) {
			fprintf(stderr, "harp-xfer: no handle file %s\n", r->o.handle_file);
			return -1;
		}
		usleep(10000);
	}
	for (i = 0; i < n; i++) {
		if (!fgets(line, sizeof(line), f) || strlen(line) < 2 * HARP_HANDLE_SIZE) {
			fprintf(stderr, "harp-xfer: handle file has fewer than %d handles\n", n);
			fclose(f);
			return -1;
		}
		for (j = 0; j < HARP_HANDLE_SIZE; j++) {
			if (sscanf(line + 2 * j, "%2x", &v) != 1) {
				fprintf(stderr, "harp-xfer: handle %d is not hex\n", i);
				fclose(f);
				return -1;
			}
			h[i].bytes[j] = (uint8_t)v;
		}
	}
	fclose(f);
	return 0;
}

/* ---- set-up ----------------------------------------------------------------------------------- */

static int setup_conns(struct run *r, double deadline)
{
	struct harp_handle *h = calloc((size_t)r->o.conns + 1, sizeof(*h));
	int i, err, up = 0;

	if (!h) {
		return -ENOMEM;
	}
	/* --churn: one listener more, its handle last in the file, taking every churned one */
	err = r->o.server && r->o.churn ? harp_listen(r->ctx, &h[r->o.conns], &r->churn.listener) :
					  0;
	if (err) {
		fprintf(stderr, "harp-xfer: listen for --churn: %s\n", strerror(-err));
		goto out;
	}
	for (i = 0; i < r->o.conns; i++) {
		r->xc[i].id = i;
		err = r->o.server ? harp_listen(r->ctx, &h[i], &r->xc[i].listener) : 0;
		if (err) {
			fprintf(stderr, "harp-xfer: listen: %s\n", strerror(-err));
			goto out;
		}
	}
	err = r->o.server ? write_handles(r, h) : read_handles(r, h, deadline);
	if (err) {
		goto out;
	}
	r->churn.handle = h[r->o.conns];
	for (i = 0; !r->o.server && i < r->o.conns; i++) {
		err = harp_connect(r->ctx, &h[i], &r->xc[i].conn);
		if (err) {
			fprintf(stderr, "harp-xfer: connect %d: %s\n", i, strerror(-err));
			goto out;
		}
	}
	while (up < r->o.conns) {
		for (i = 0; i < r->o.conns; i++) {
			struct xconn *x = &r->xc[i];

			if (x->up) {
				continue;
			}
			if (!x->conn) {
				err = harp_listener__accept(x->listener, &x->conn);
				if (err == -EAGAIN) {
					continue;
				}
				if (err) {
					fprintf(stderr, "harp-xfer: accept %d: %s\n", i,
						strerror(-err));
					goto out;
				}
			}
			err = harp_conn__establish(x->conn);
			if (err == -EAGAIN) {
				continue;
			}
			if (err) {
				fprintf(stderr, "harp-xfer: connection %d set-up: %s\n", i,
					strerror(-err));
				goto out;
			}
			x->up = true;
			up++;
			harp_listener__close(x->listener);
			x->listener = NULL;
		}
		harp_ctx__progress(r->ctx);
		if (now_s() > deadline) {
			fprintf(stderr, "harp-xfer: set-up timed out (%d of %d up)\n", up,
				r->o.conns);
			err = -ETIMEDOUT;
			goto out;
		}
	}
	err = 0;
out:
	free(h);
	return err;
}

/* ---- transfer --------------------------------------------------------------------------------- */

static int post_send(struct run *r, struct xconn *x, int dir)
{
	struct flow *f = &x->tx;
	int slot = f->posted % r->o.window, k = f->posted, err;
	uint64_t len = msg_size(&r->o, k);

	err = harp_conn__isend(x->conn, msg_bytes(r, dir, x->id, k), len, (uint32_t)k & 0xff, NULL,
			       &f->reqs[slot]);
	if (err == -EAGAIN) {
		return 0;
	}
	if (err) {
		fprintf(stderr, "harp-xfer: isend conn %d msg %d: %s\n", x->id, k, strerror(-err));
		return err;
	}
	f->req_msg[slot] = k;
	f->posted++;
	return 0;
}

static int post_recv(struct run *r, struct xconn *x)
{
	struct flow *f = &x->rx;
	int slot = f->posted % r->o.window, k = f->posted, err;
	void *buf = f->bufs[slot];
	size_t cap = msg_size(&r->o, k);
	uint32_t tag = (uint32_t)k & 0xff;

	if (msg_short(&r->o, k)) {
		/* The buffer holds cap + 1 bytes; all must still be canary when the receive fails. */
		memset(buf, CANARY, cap);
		cap--;
	}

	err = harp_conn__irecv(x->conn, 1, &buf, &cap, &tag, NULL, &f->reqs[slot]);
	if (err == -EAGAIN) {
		return 0;
	}
	if (err) {
		fprintf(stderr, "harp-xfer: irecv conn %d msg %d: %s\n", x->id, k, strerror(-err));
		return err;
	}
	f->req_msg[slot] = k;
	f->posted++;
	return 0;
}

/* Tests the oldest outstanding request of a flow; verifies received bytes. */
static int test_oldest(struct run *r, struct xconn *x, struct flow *f, bool is_rx, int dir)
{
	int slot = f->completed % r->o.window, done = 0, err, k;
	size_t size = 0;
	uint64_t want;

	err = harp_req__test(f->reqs[slot], &done, &size);
	k = f->req_msg[slot];
	want = msg_size(&r->o, k);
	if (msg_short(&r->o, k) && err == -EMSGSIZE) {
		/* Refused as it must be: nothing of it may have landed in the buffer. */
		if (is_rx && (f->bufs[slot][0] != CANARY ||
			      memcmp(f->bufs[slot], f->bufs[slot] + 1, want - 1))) {
			fprintf(stderr,
				"harp-xfer: conn %d msg %d: the receive failed with EMSGSIZE but its "
				"buffer was written to\n",
				x->id, k);
			return -EBADMSG;
		}
		if (is_rx) {
			r->msgsize_recv_errors++;
		} else {
			r->msgsize_send_errors++;
		}
		f->completed++;
		return 1;
	}
	if (err == -EMSGSIZE) {
		fprintf(stderr,
			"harp-xfer: conn %d %s msg %d failed with EMSGSIZE, but the message (%" PRIu64
			" bytes) should fit its receive (--recv-short %d)\n",
			x->id, is_rx ? "receive" : "send", k, want, r->o.recv_short);
		return err;
	}
	if (err) {
		fprintf(stderr, "harp-xfer: conn %d %s msg %d failed: %s\n", x->id,
			is_rx ? "receive" : "send", k, strerror(-err));
		return err;
	}
	if (!done) {
		return 0;
	}
	if (msg_short(&r->o, k)) {
		fprintf(stderr,
			"harp-xfer: conn %d %s msg %d completed (%zu bytes), but the message (%" PRIu64
			" bytes) should not fit its %" PRIu64 "-byte receive (--recv-short %d): "
			"expected EMSGSIZE\n",
			x->id, is_rx ? "receive" : "send", k, size, want, want - 1, r->o.recv_short);
		return -EBADMSG;
	}
	if (size != want) {
		fprintf(stderr, "harp-xfer: conn %d msg %d: %zu bytes, expected %" PRIu64 "\n", x->id,
			k, size, want);
		return -EBADMSG;
	}
	if (is_rx) {
		if (memcmp(f->bufs[slot], msg_bytes(r, dir, x->id, k), size)) {
			fprintf(stderr, "harp-xfer: conn %d msg %d: content differs\n", x->id, k);
			return -EBADMSG;
		}
		r->verified_bytes += size;
		r->verified_msgs++;
	} else {
		r->sent_bytes += size;
	}
	f->completed++;
	return 1;
}

static int step_flow(struct run *r, struct xconn *x, struct flow *f, bool is_rx, int dir)
{
	int err;

	while (!r->stopping && f->posted < f->nmsgs && f->posted - f->completed < r->o.window) {
		int before = f->posted;

		err = is_rx ? post_recv(r, x) : post_send(r, x, dir);
		if (err) {
			return err;
		}
		if (f->posted == before) {
			break;
		}
	}
	while (f->completed < f->posted) {
		err = test_oldest(r, x, f, is_rx, dir);
		if (err == -ECONNRESET && r->stopping) {
			/* --duration: the peer ended its own drain and closed; what it never
			 * answered is left, as what it still had out is on its side */
			r->abandoned += f->posted - f->completed;
			f->completed = f->posted;
			return 0;
		}
		if (err <= 0) {
			return err;
		}
	}
	return 0;
}

/* --churn: the bytes of churned connection k's message in direction dir. */
static const uint8_t *churn_bytes(const struct run *r, int dir, int k)
{
	return r->pattern[dir] + ((uint64_t)k * 29 + 7) % PATTERN_SLACK;
}

/* --churn: sends (mine) or receives and checks the message of step s on the churned connection. */
static int churn_msg(struct run *r, struct churn *ch, bool mine, int dir)
{
	size_t len = CHURN_MSG;
	uint32_t tag = (uint32_t)ch->done & 0xff;
	void *buf = ch->buf;
	int err, done = 0;

	if (!ch->req) {
		err = mine ? harp_conn__isend(ch->conn, churn_bytes(r, dir, ch->done), CHURN_MSG,
					      tag, NULL, &ch->req) :
			     harp_conn__irecv(ch->conn, 1, &buf, &len, &tag, NULL, &ch->req);
		return err == -EAGAIN ? 0 : err;
	}
	err = harp_req__test(ch->req, &done, &len);
	if (err || !done) {
		return err;
	}
	ch->req = NULL;
	if (!mine && (len != CHURN_MSG || memcmp(ch->buf, churn_bytes(r, dir, ch->done), len))) {
		fprintf(stderr, "harp-xfer: churned connection %d: its message arrived wrong (%zu "
			"bytes)\n", ch->done, len);
		return -EBADMSG;
	}
	ch->step++;
	return 0;
}

/* --churn: moves the churned connection under way on; the next one starts as one closes. */
static int step_churn(struct run *r)
{
	struct churn *ch = &r->churn;
	int err;

	if (ch->done == r->o.churn) {
		return 0;
	}
	if (!ch->conn) {
		err = r->o.server ? harp_listener__accept(ch->listener, &ch->conn) :
				    harp_connect(r->ctx, &ch->handle, &ch->conn);
		if (err) {
			return err == -EAGAIN ? 0 : err;
		}
		ch->up = false;
		ch->step = 0;
	}
	if (!ch->up) {
		err = harp_conn__establish(ch->conn);
		if (err) {
			return err == -EAGAIN ? 0 : err;
		}
		ch->up = true;
	}
	/* step 0 the client's message, step 1 the server's answer */
	if (ch->step < 2) {
		err = churn_msg(r, ch, r->o.server == (ch->step == 1), ch->step);
		if (err) {
			fprintf(stderr, "harp-xfer: churned connection %d: %s\n", ch->done,
				strerror(-err));
			return err;
		}
	}
	if (ch->step == 2) {
		harp_conn__close(ch->conn);
		ch->conn = NULL;
		if (++ch->done == r->o.churn) {
			fprintf(stderr, "harp-xfer: churned %d connections\n", ch->done);
		}
	}
	return 0;
}

static int transfer(struct run *r, double deadline)
{
	double stop_at = r->o.duration_s ? now_s() + r->o.duration_s : 0, min_end = 0, now;
	int dir_tx = r->o.server ? 1 : 0, dir_rx = r->o.server ? 0 : 1;
	long long remaining;
	int i, err;

	do {
		now = now_s();
		if (((stop_at && now > stop_at) || (r->o.churn && r->churn.done == r->o.churn)) &&
		    !r->stopping) {
			r->stopping = true;
			deadline = now + DRAIN_S;
			/* --churn's drain lasts CHURN_DRAIN_S at least: the holders' map is read
			 * meanwhile */
			min_end = now + (r->o.churn ? CHURN_DRAIN_S : DRAIN_MIN_S);
		}
		err = step_churn(r);
		if (err) {
			return err;
		}
		remaining = 0;
		for (i = 0; i < r->o.conns; i++) {
			struct xconn *x = &r->xc[i];

			err = step_flow(r, x, &x->tx, false, dir_tx);
			if (!err) {
				err = step_flow(r, x, &x->rx, true, dir_rx);
			}
			if (err) {
				return err;
			}
			if (r->stopping) {
				remaining += (x->tx.posted - x->tx.completed) +
					     (x->rx.posted - x->rx.completed);
			} else {
				remaining += (long long)(x->tx.nmsgs - x->tx.completed) +
					     (x->rx.nmsgs - x->rx.completed);
			}
		}
		harp_ctx__progress(r->ctx);
		if (r->o.slow_us) {
			usleep((useconds_t)r->o.slow_us); /* busy elsewhere: harp is not called */
		}
		now = now_s();
		if (now > deadline && r->stopping) {
			r->abandoned += remaining; /* the peer stopped posting their partners */
			return 0;
		}
		if (now > deadline) {
			fprintf(stderr, "harp-xfer: timed out with %lld messages outstanding\n",
				remaining);
			return -ETIMEDOUT;
		}
		/* a drain lasts until nothing is out, and long enough that the peer stopped too:
		 * what it still has out on us ends, abandoned, when we close */
	} while (remaining || (r->stopping && now < min_end));
	return 0;
}

static int plan(struct run *r)
{
	int i, j, nmsgs = r->o.duration_s || r->o.churn ? INT_MAX : r->o.nsizes * r->o.count;
	bool sends = !r->o.server || r->o.bidir, recvs = r->o.server || r->o.bidir;

	for (i = 0; i < r->o.nsizes; i++) {
		if (r->o.sizes[i] > r->max_size) {
			r->max_size = r->o.sizes[i];
		}
	}
	r->pattern[0] = make_pattern(r->max_size + PATTERN_SLACK, 1);
	r->pattern[1] = make_pattern(r->max_size + PATTERN_SLACK, 2);
	r->xc = calloc((size_t)r->o.conns, sizeof(*r->xc));
	if (!r->pattern[0] || !r->pattern[1] || !r->xc) {
		return -ENOMEM;
	}
	for (i = 0; i < r->o.conns; i++) {
		r->xc[i].tx.nmsgs = sends ? nmsgs : 0;
		r->xc[i].rx.nmsgs = recvs ? nmsgs : 0;
		for (j = 0; recvs && j < r->o.window; j++) {
			r->xc[i].rx.bufs[j] = malloc(r->max_size ? r->max_size : 1);
			if (!r->xc[i].rx.bufs[j]) {
				return -ENOMEM;
			}
			/* fault the pages in now, not during the timed transfer */
			memset(r->xc[i].rx.bufs[j], 0, r->max_size);
		}
	}
	return 0;
}

static void report(struct run *r, double secs, int rc)
{
	struct harp_conn_stats cs, sum = { 0 };
	struct harp_queue_stats qs, qsum = { 0 };
	struct harp_ctx_info info;
	struct rusage ru;
	uint32_t paths_min = UINT32_MAX, paths_max = 0, pmtu_min = UINT32_MAX, pmtu_max = 0;
	const char *auth_name = "none";
	int auth_conns = 0, ip6_conns = 0;
	double cpu;
	int i;

	for (i = 0; r->xc && i < r->o.conns; i++) {
		if (r->xc[i].conn && !harp_conn__stats(r->xc[i].conn, &cs)) {
			sum.retransmits += cs.retransmits;
			sum.fast_retransmits += cs.fast_retransmits;
			sum.timeouts += cs.timeouts;
			sum.spurious_timeouts += cs.spurious_timeouts;
			sum.rx_duplicates += cs.rx_duplicates;
			sum.rx_out_of_order += cs.rx_out_of_order;
			sum.cwnd_bytes = cs.cwnd_bytes;
			sum.srtt_us = cs.srtt_us;
			sum.rto_us = cs.rto_us;
			sum.paths_retired += cs.paths_retired;
			sum.paths_rescued += cs.paths_rescued;
			sum.probes_sent += cs.probes_sent;
			sum.probes_pair_taken += cs.probes_pair_taken;
			sum.steers_sent += cs.steers_sent;
			sum.random_losses += cs.random_losses;
			sum.pings += cs.pings;
			sum.msgs_unsolicited += cs.msgs_unsolicited;
			sum.msgs_held += cs.msgs_held;
			sum.ctrl_refused += cs.ctrl_refused;
			if (cs.auth) {
				auth_conns++;
				auth_name = cs.auth;
			}
			ip6_conns += cs.family == AF_INET6;
			paths_min = cs.paths < paths_min ? cs.paths : paths_min;
			pmtu_min = cs.pmtu < pmtu_min ? cs.pmtu : pmtu_min;
			pmtu_max = cs.pmtu > pmtu_max ? cs.pmtu : pmtu_max;
			sum.pmtu_probes += cs.pmtu_probes;
			sum.pmtu_drops += cs.pmtu_drops;
			sum.seg_parts += cs.seg_parts;
			paths_max = cs.paths > paths_max ? cs.paths : paths_max;
		}
	}
	harp_ctx__info(r->ctx, &info);
	for (i = 0; i < info.queues; i++) { /* engine i, whichever queue it runs */
		if (!harp_ctx__queue_stats(r->ctx, i, &qs)) {
			printf("queue%d_rx_packets=%" PRIu64 "\nqueue%d_tx_packets=%" PRIu64 "\n", i,
			       qs.rx_packets, i, qs.tx_packets);
			qsum.rx_bad += qs.rx_bad;
			qsum.rx_unknown_conn += qs.rx_unknown_conn;
			qsum.rx_bad_auth += qs.rx_bad_auth;
			qsum.rx_replayed += qs.rx_replayed;
			qsum.xdp_rx_dropped += qs.xdp_rx_dropped;
			qsum.xdp_rx_ring_full += qs.xdp_rx_ring_full;
			qsum.xdp_rx_fill_ring_empty += qs.xdp_rx_fill_ring_empty;
			qsum.tx_ring_full += qs.tx_ring_full;
			qsum.xdp_steered = qs.xdp_steered;
			qsum.xdp_no_socket = qs.xdp_no_socket;
			qsum.xdp_probes = qs.xdp_probes;
			qsum.xdp_probe_no_socket = qs.xdp_probe_no_socket;
			qsum.xdp_refused = qs.xdp_refused;
			qsum.rx_probes += qs.rx_probes;
			qsum.rx_probes_pair_taken += qs.rx_probes_pair_taken;
			qsum.rx_steer += qs.rx_steer;
			qsum.fill_depth += qs.fill_depth;
			qsum.fill_grows += qs.fill_grows;
			qsum.rx_kicks += qs.rx_kicks;
			qsum.tx_kicks += qs.tx_kicks;
			qsum.tx_kick_busy += qs.tx_kick_busy;
			qsum.tx_kick_held += qs.tx_kick_held;
			qsum.tx_sndbuf = qs.tx_sndbuf;
			qsum.tx_packets += qs.tx_packets;
			qsum.tx_bundled += qs.tx_bundled;
			qsum.rx_chains += qs.rx_chains;
			qsum.tx_chains += qs.tx_chains;
			qsum.rx_bad_chain += qs.rx_bad_chain;
			qsum.busy_polls += qs.busy_polls;
		}
	}
	getrusage(RUSAGE_SELF, &ru);
	cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	      (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	printf("role=%s\nresult=%s\nmode=%s\nmtu=%d\nqueues=%d\nconns=%d\n",
	       r->o.server ? "server" : "client", rc ? "FAIL" : "ok", harp_mode_name(info.mode),
	       info.mtu, info.queues, r->o.conns);
	printf("verified_msgs=%" PRIu64 "\nverified_bytes=%" PRIu64 "\nsent_bytes=%" PRIu64 "\n",
	       r->verified_msgs, r->verified_bytes, r->sent_bytes);
	if (r->o.duration_s || r->o.churn) {
		printf("duration_abandoned=%lld\n", r->abandoned);
	}
	if (r->o.churn) {
		printf("churned=%d\n", r->churn.done);
	}
	printf("msgsize_errors=%" PRIu64 "\nmsgsize_send_errors=%" PRIu64
	       "\nmsgsize_recv_errors=%" PRIu64 "\n",
	       r->msgsize_send_errors + r->msgsize_recv_errors, r->msgsize_send_errors,
	       r->msgsize_recv_errors);
	printf("seconds=%.3f\ngoodput_gbps=%.3f\ncpu_seconds=%.3f\n", secs,
	       secs > 0 ? (double)(r->verified_bytes + r->sent_bytes) * 8 / secs / 1e9 : 0.0, cpu);
	printf("retransmits=%" PRIu64 "\nfast_retransmits=%" PRIu64 "\ntimeouts=%" PRIu64 "\n",
	       sum.retransmits, sum.fast_retransmits, sum.timeouts);
	printf("spurious_timeouts=%" PRIu64 "\n", sum.spurious_timeouts);
	printf("last_cwnd_bytes=%u\nlast_srtt_us=%u\nlast_rto_us=%u\n", sum.cwnd_bytes, sum.srtt_us,
	       sum.rto_us);
	printf("rx_duplicates=%" PRIu64 "\nrx_out_of_order=%" PRIu64 "\n", sum.rx_duplicates,
	       sum.rx_out_of_order);
	printf("tx_frames=%" PRIu64 "\ntx_bundled=%" PRIu64 "\n", qsum.tx_packets, qsum.tx_bundled);
	printf("multi_buffer=%d\nrx_chains=%" PRIu64 "\ntx_chains=%" PRIu64 "\nrx_bad_chain=%" PRIu64
	       "\n",
	       info.multi_buffer, qsum.rx_chains, qsum.tx_chains, qsum.rx_bad_chain);
	printf("busy_polls=%" PRIu64 "\ntx_kicks=%" PRIu64 "\n", qsum.busy_polls, qsum.tx_kicks);
	printf("tx_kick_busy=%" PRIu64 "\ntx_kick_held=%" PRIu64 "\ntx_sndbuf=%" PRIu64 "\n",
	       qsum.tx_kick_busy, qsum.tx_kick_held, qsum.tx_sndbuf);
	printf("msgs_unsolicited=%" PRIu64 "\nmsgs_held=%" PRIu64 "\n", sum.msgs_unsolicited,
	       sum.msgs_held);
	printf("auth=%s\nauth_conns=%d\nctrl_refused=%" PRIu64 "\n", auth_name, auth_conns,
	       sum.ctrl_refused);
	printf("rx_bad=%" PRIu64 "\nrx_unknown_conn=%" PRIu64 "\nrx_bad_auth=%" PRIu64
	       "\nrx_replayed=%" PRIu64 "\nxdp_rx_dropped=%" PRIu64 "\n",
	       qsum.rx_bad, qsum.rx_unknown_conn, qsum.rx_bad_auth, qsum.rx_replayed,
	       qsum.xdp_rx_dropped);
	printf("xdp_rx_ring_full=%" PRIu64 "\nxdp_fill_ring_empty=%" PRIu64
	       "\ntx_ring_full=%" PRIu64 "\n",
	       qsum.xdp_rx_ring_full, qsum.xdp_rx_fill_ring_empty, qsum.tx_ring_full);
	printf("xdp_steered=%" PRIu64 "\nxdp_no_socket=%" PRIu64 "\nxdp_refused=%" PRIu64 "\n",
	       qsum.xdp_steered, qsum.xdp_no_socket, qsum.xdp_refused);
	printf("fill_depth=%" PRIu64 "\nfill_grows=%" PRIu64 "\nrx_kicks=%" PRIu64 "\n",
	       qsum.fill_depth, qsum.fill_grows, qsum.rx_kicks);
	printf("family=%s\nconns_ipv6=%d\n", info.family == AF_INET6 ? "ipv6" : "ipv4", ip6_conns);
	printf("pmtu_min=%u\npmtu_max=%u\npmtu_probes=%" PRIu64 "\npmtu_drops=%" PRIu64
	       "\nseg_parts=%" PRIu64 "\n",
	       pmtu_min == UINT32_MAX ? 0 : pmtu_min, pmtu_max, sum.pmtu_probes, sum.pmtu_drops,
	       sum.seg_parts);
	printf("paths_min=%u\npaths_max=%u\npaths_retired=%" PRIu64 "\npaths_rescued=%" PRIu64
	       "\nprobes_sent=%" PRIu64
	       "\nrx_probes=%" PRIu64 "\nxdp_probes=%" PRIu64 "\nxdp_probe_no_socket=%" PRIu64
	       "\nrandom_losses=%" PRIu64 "\npings=%" PRIu64 "\nprobes_pair_taken=%" PRIu64
	       "\nrx_probes_pair_taken=%" PRIu64 "\nsteers_sent=%" PRIu64 "\nrx_steer=%" PRIu64
	       "\n",
	       paths_min == UINT32_MAX ? 0 : paths_min, paths_max, (uint64_t)sum.paths_retired,
	       (uint64_t)sum.paths_rescued,
	       sum.probes_sent, qsum.rx_probes, qsum.xdp_probes, qsum.xdp_probe_no_socket,
	       sum.random_losses, sum.pings, sum.probes_pair_taken, qsum.rx_probes_pair_taken,
	       sum.steers_sent, qsum.rx_steer);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct harp_ctx_opts copts = { .sz = sizeof(copts) };
	struct run r = { 0 };
	double t0, t1, deadline;
	int rc = 1, err, i, j;

	if (parse_opts(&r.o, argc, argv)) {
		return 1;
	}
	deadline = now_s() + r.o.timeout_s;
	copts.ifname = r.o.ifname;
	copts.queues = r.o.queues;
	r.ctx = harp_ctx__create(&copts);
	if (!r.ctx) {
		fprintf(stderr, "harp-xfer: cannot start harp on %s: %s\n", r.o.ifname,
			strerror(errno));
		return 1;
	}
	err = plan(&r);
	if (!err) {
		err = setup_conns(&r, deadline);
	}
	for (double idle_end = now_s() + r.o.idle_s; !err && now_s() < idle_end;) {
		harp_ctx__progress(r.ctx);
		usleep(1000);
	}
	t0 = now_s();
	if (!err) {
		err = transfer(&r, deadline);
	}
	t1 = now_s();
	rc = err ? (err == -ETIMEDOUT ? 2 : 1) : 0;
	report(&r, t1 - t0, rc);
	for (i = 0; r.xc && i < r.o.conns; i++) {
		harp_conn__close(r.xc[i].conn);
		harp_listener__close(r.xc[i].listener);
		for (j = 0; j < WINDOW_MAX; j++) {
			free(r.xc[i].rx.bufs[j]);
		}
	}
	harp_conn__close(r.churn.conn);
	harp_listener__close(r.churn.listener);
	harp_ctx__destroy(r.ctx);
	free(r.xc);
	free(r.pattern[0]);
	free(r.pattern[1]);
	return rc;
}
