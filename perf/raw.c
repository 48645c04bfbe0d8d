// SPDX-License-Identifier: Apache-2.0
/*
 * harp-perf raw: the ceiling of a link for harp. Both ends use harp's own layers (the settings
 * from src/params.c, the XDP program and XSKMAP from src/steer.c, the AF_XDP sockets, UMEM and
 * frame pools from src/xsk.c and src/umem.c, frames built and parsed by src/wire.c, the next
 * hop's MAC from src/netinfo.c) with the engine's ring sizes and batching, and leave out only
 * the protocol: no connection, no acks, no window, no retransmission.
 *
 * The client cuts harp DATA frames of one size and pushes them out of every queue as fast as the
 * socket takes them, for --seconds: per pass it reclaims completions, reserves up to a TX batch,
 * copies each payload in from a pattern buffer (the one copy harp's engine makes), lets
 * wire_build() write the headers and checksums, submits, and kicks once with sendto() when the
 * ring asks for a wake-up. The server drains its RX rings in the engine's batches, hands every
 * frame straight back to the fill ring, and checks each one: wire_parse() (lengths, both
 * checksums), the run's token, a sequence number that only grows per queue, and the payload
 * against the window of the pattern that the sequence number implies (memcmp). The stream is one
 * endless message: a frame's offset is its sequence number times the payload length.
 *
 * With --pingpong N the client measures the link's latency floor instead: it sends one frame,
 * waits for the server to send it back (the server echoes every frame tagged for it, addresses
 * swapped, payload copied into a fresh frame as harp's engine copies a message), checks the echo
 * the same way, and times each round trip: N of them after --warmup untimed ones. With --burst F
 * each round trip is F frames each way, the server's F echoes leaving together once all F came:
 * the floor of a ping-pong of F-frame messages.
 *
 * They meet through files in --dir: the server writes raw.server.ready (its token, address, UDP
 * port base and queues) once its sockets are bound; the client writes raw.client.done (frames sent
 * per queue) once its last frame has left. The server stops when it has every frame the client
 * says it sent, or when none has arrived for RAW_DRAIN_IDLE_MS after the done mark (the rest were
 * lost: nothing retransmits them).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <netinet/in.h>
#include <xdp/libxdp.h>

#include "internal.h"
#include "netinfo.h"
#include "steer.h"
#include "wire.h"
#include "xsk.h"

#include "raw.h"
#include "rendezvous.h"
#include "report.h"

#define RAW_TX_BATCH 256 /* descriptors reserved per pass and queue: the engine's TX_BATCH */
#define RAW_RX_BATCH 64	 /* descriptors taken per peek: the engine's RX_BATCH */
#define RAW_RX_ROUNDS 4	 /* peeks per pass and queue, as the engine */
#define RAW_PATTERN_SPAN 4096 /* distinct 8-byte-aligned windows of the pattern */
#define RAW_CONN_ID 0	      /* harp never hands out connection id 0: marks raw frames */
#define RAW_TAG 0x52415721u   /* "RAW!" */
#define RAW_TAG_ECHO 0x52415745u /* "RAWE": send this frame back */
#define RAW_ECHO_WAIT_MS 1000	 /* client: longest wait for one echo (nothing retransmits) */
#define RAW_READY "raw.server.ready"
#define RAW_DONE "raw.client.done"
#define RAW_MARK_MAGIC "harp-perf-raw 1"
#define RAW_POLL_MS 10		/* how often marks and stop conditions are looked at */
#define RAW_DRAIN_IDLE_MS 200	/* server: quiet this long after the done mark: finished */
#define RAW_STALL_MS 5000	/* server: quiet this long with no done mark: the client died */
#define RAW_TX_DRAIN_MS 1000	/* client: longest wait for the last completions */
#define RAW_ARP_MS 3000		/* client: longest wait for the peer's neighbour entry */
#define RAW_DISCARD_PORT 9	/* a datagram here makes the kernel resolve the peer's MAC */
/* IP packet bytes in front of the payload: IPv4, UDP and harp headers */
#define RAW_HDRS (HARP_IP4_HLEN + HARP_UDP_HLEN + HARP_HDR_LEN)
#define RAW_FRAME_MIN (RAW_HDRS + 8) /* smallest --frame-size: 8 bytes of payload */
#define RAW_BURST_MAX 256		    /* --burst: at most a TX batch */

struct raw_opts {
	bool server;
	const char *dir, *peer, *json, *ifname, *label;
	double seconds, timeout_s;
	int frame_size; /* IP packet bytes; 0: the IP MTU harp uses (ping-pong: 8 bytes of payload) */
	int pingpong;	/* client: timed round trips; 0: stream */
	int warmup;	/* client: untimed round trips before them */
	int burst;	/* frames each round trip sends and gets back: a message of that many */
};

/* One queue's socket and what went through it. */
struct raw_queue {
	struct xsk_port port;
	bool open;
	int index;
	struct wire_path path; /* client */
	uint16_t ip_id;	       /* client */
	uint64_t seq;	       /* client: next to send */
	uint64_t rx_seq;       /* next expected */
	uint64_t submitted;    /* client */
	uint64_t frames;       /* client: sends completed; server: frames that passed every check */
	uint64_t bad;	       /* server: failed a check (parse, payload, size) */
	uint64_t backwards;    /* server: a sequence number at or below one seen before */
	uint64_t foreign;      /* server: well-formed harp frames of another run or connection */
	uint64_t gaps;	       /* server: sequence numbers skipped (lost on the way) */
	uint32_t body_len;     /* server: payload bytes of this queue's first good frame */
	uint64_t echoed;       /* server: frames sent back */
	uint64_t echo_dropped; /* server: frames that asked for an echo when no frame was free */
};

struct raw_run {
	struct raw_opts o;
	struct harp_params params;
	struct if_info ifi;
	struct steer steer;
	bool attached;
	int ip_mtu;
	int queue_ids[HARP_MAX_QUEUES]; /* HARP_QUEUES */
	int nids;
	int nqueues;	/* sockets open */
	int use_queues; /* client: queues it sends on */
	struct raw_queue *q;
	uint8_t *pattern;
	uint64_t token;
};

static volatile sig_atomic_t raw_stop;

static void raw_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One line on stderr, prefixed with what printed it. */
static void raw_err(const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "harp-perf raw: %s\n", line);
}

static void raw_on_signal(int sig)
{
	(void)sig;
	raw_stop = 1;
}

/* ---- arguments ------------------------------------------------------------------------------- */

static void raw_usage(FILE *out)
{
	fprintf(out,
		"usage: harp-perf raw --role server|client --dir DIR [options]\n"
		"  --seconds S     client: how long to send (default 3)\n"
		"  --pingpong N    client: time N round trips of one frame instead, after\n"
		"                  --warmup W untimed ones (default 100); server: echo every frame\n"
		"                  that asks, and expect N + W of them\n"
		"  --burst F       both: each round trip is F frames each way (a message of F\n"
		"                  frames; the server sends its F echoes once all F came), default 1\n"
		"  --frame-size B  client: IP packet bytes per frame (default: harp's IP MTU);\n"
		"                  server: the size every frame must have (default: any one)\n"
		"  --peer IP       client: the server's IPv4 (default: its ready mark's)\n"
		"  --json FILE     append the record there (default: stdout)\n"
		"  --ifname IF     the interface (default: HARP_IFNAME)\n"
		"  --label TEXT    copied into the record\n"
		"  --timeout SEC   give up after this long (default 120)\n"
		"HARP_QUEUES, HARP_PORT_BASE, HARP_FRAME_SIZE, HARP_MTU... apply as in libharp.\n");
}

static int parse_double(const char *opt, const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= lo && v <= hi)) {
		raw_err("%s '%s': expected a number of seconds in [%g, %g]", opt, s, lo, hi);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int parse_int(const char *opt, const char *s, long lo, long hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		raw_err("%s '%s': expected a whole number in [%ld, %ld]", opt, s, lo, hi);
		return -EINVAL;
	}
	*out = (int)v;
	return 0;
}

static int raw_parse_role(const char *s, struct raw_opts *o, bool *have_role)
{
	if (!strcmp(s, "server")) {
		o->server = true;
	} else if (!strcmp(s, "client")) {
		o->server = false;
	} else {
		raw_err("--role '%s': expected server or client", s);
		return -EINVAL;
	}
	*have_role = true;
	return 0;
}

/* The checks that need every option: what is missing, what does not apply to the role. */
static int raw_check_opts(const struct raw_opts *o, bool have_role)
{
	struct in_addr a;

	if (!have_role) {
		raw_err("--role server|client is required");
		return -EINVAL;
	}
	if (!o->dir) {
		raw_err("--dir DIR is required (both ends must see it)");
		return -EINVAL;
	}
	if (o->server && o->peer) {
		raw_err("--peer is the client's option (the server only receives)");
		return -EINVAL;
	}
	if (o->peer && inet_pton(AF_INET, o->peer, &a) != 1) {
		raw_err("--peer '%s' is not an IPv4 address", o->peer);
		return -EINVAL;
	}
	return 0;
}

static int raw_parse_args(int argc, char **argv, struct raw_opts *o)
{
	static const struct option longopts[] = {
		{ "role", required_argument, NULL, 'r' },
		{ "dir", required_argument, NULL, 'd' },
		{ "seconds", required_argument, NULL, 's' },
		{ "frame-size", required_argument, NULL, 'f' },
		{ "peer", required_argument, NULL, 'p' },
		{ "json", required_argument, NULL, 'j' },
		{ "ifname", required_argument, NULL, 'i' },
		{ "label", required_argument, NULL, 'l' },
		{ "timeout", required_argument, NULL, 't' },
		{ "pingpong", required_argument, NULL, 'P' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "burst", required_argument, NULL, 'B' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool have_role = false;
	int c, err = 0;

	memset(o, 0, sizeof(*o));
	o->seconds = 3;
	o->timeout_s = 120;
	o->warmup = 100;
	o->burst = 1;
	optind = 1;
	opterr = 0;
	while (!err && (c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		switch (c) {
		case 'r':
			err = raw_parse_role(optarg, o, &have_role);
			break;
		case 'd':
			o->dir = optarg;
			break;
		case 's':
			err = parse_double("--seconds", optarg, 0.01, 86400, &o->seconds);
			break;
		case 'f':
			err = parse_int("--frame-size", optarg, RAW_FRAME_MIN, 65535,
					&o->frame_size);
			break;
		case 'p':
			o->peer = optarg;
			break;
		case 'j':
			o->json = optarg;
			break;
		case 'i':
			o->ifname = optarg;
			break;
		case 'l':
			o->label = optarg;
			break;
		case 't':
			err = parse_double("--timeout", optarg, 1, 86400, &o->timeout_s);
			break;
		case 'P':
			err = parse_int("--pingpong", optarg, 1, 10000000, &o->pingpong);
			break;
		case 'w':
			err = parse_int("--warmup", optarg, 0, 10000000, &o->warmup);
			break;
		case 'B':
			err = parse_int("--burst", optarg, 1, RAW_BURST_MAX, &o->burst);
			break;
		case 'h':
			raw_usage(stdout);
			return 1;
		case ':':
			raw_err("%s needs a value", argv[optind - 1]);
			return -EINVAL;
		default:
			raw_err("unknown option '%s'", argv[optind - 1]);
			raw_usage(stderr);
			return -EINVAL;
		}
	}
	if (err) {
		return err;
	}
	if (optind < argc) {
		raw_err("unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	return raw_check_opts(o, have_role);
}

/* ---- set-up: harp's settings, its XDP program, one socket per queue -------------------------- */

static int raw_params(struct raw_run *r)
{
	struct harp_params *p = &r->params;
	char err[256];
	int rc;

	rc = params_load_env(p, err, sizeof(err));
	if (!rc && r->o.ifname) {
		rc = params_set(p, "HARP_IFNAME", r->o.ifname, err, sizeof(err));
	}
	if (!rc) {
		rc = params_validate(p, err, sizeof(err));
	}
	if (rc) {
		raw_err("%s", err);
		return rc;
	}
	harp_log_threshold = (enum harp_log_level)p->log_level;
	if (!p->ifname[0]) {
		raw_err("no interface: give --ifname or set HARP_IFNAME");
		return -EINVAL;
	}
	if (!ifmatch_is_plain(p->ifname)) {
		char first[1][16];

		if (harp_ifname_match(p->ifname, first, 1) <= 0) {
			raw_err("%s '%s' selects no interface that is up with "
				"an IPv4 address in this network namespace",
				r->o.ifname ? "--ifname" : "HARP_IFNAME", p->ifname);
			return -ENODEV;
		}
		snprintf(p->ifname, sizeof(p->ifname), "%s", first[0]);
	}
	return 0;
}

/* The interface and the IP MTU harp would use on it (api.c's rule). */
static int raw_interface(struct raw_run *r)
{
	const struct harp_params *p = &r->params;
	char msg[512];
	int err, frame_mtu, take_free;

	err = netinfo_interface(p->ifname, &r->ifi);
	if (err) {
		raw_err("interface %s: %s", p->ifname, strerror(-err));
		return err;
	}
	if (!r->ifi.ipv4) {
		raw_err("interface %s has no IPv4 address", p->ifname);
		return -EADDRNOTAVAIL;
	}
	/* auto: every queue (the raw runs are alone on the interface) */
	r->nids = params_pick_queues(p, r->ifi.rx_queues, r->queue_ids, &take_free, msg,
				     sizeof(msg));
	if (r->nids < 0) {
		raw_err("%s", msg);
		return r->nids;
	}
	if (take_free && r->nids > take_free) {
		r->nids = take_free;
	}
	r->ip_mtu = r->ifi.mtu;
	if (p->mtu && p->mtu < r->ip_mtu) {
		r->ip_mtu = p->mtu;
	}
	/* what a multi-buffer socket takes at most; raw_frames decides once the sockets are bound */
	frame_mtu = (int)XSK_SLOT_BYTES - HARP_ETH_HLEN;
	if (r->ip_mtu > frame_mtu) {
		r->ip_mtu = frame_mtu;
	}
	return 0;
}

/* The IP MTU the bound sockets take (api.c's ctx_frames), and --frame-size against it. */
static int raw_frames(struct raw_run *r)
{
	const struct harp_params *p = &r->params;
	int q, frame_mtu = r->ip_mtu;

	for (q = 0; q < r->nqueues; q++) {
		if (!r->q[q].port.sg) {
			/* one frame per packet: copy mode keeps 256 bytes of headroom */
			frame_mtu = p->frame_size - (int)XSK_RX_HEADROOM - HARP_ETH_HLEN;
		}
	}
	if (r->ip_mtu > frame_mtu) {
		r->ip_mtu = frame_mtu;
	}
	if (r->o.frame_size > r->ip_mtu) {
		raw_err("--frame-size %d exceeds the IP MTU %d harp uses on %s "
			"(interface MTU %d, HARP_MTU %d, HARP_FRAME_SIZE %d, %s)",
			r->o.frame_size, r->ip_mtu, p->ifname, r->ifi.mtu, p->mtu, p->frame_size,
			r->nqueues && r->q[0].port.sg ? "multi-buffer" : "one frame per packet");
		return -EINVAL;
	}
	return 0;
}

static int raw_open(struct raw_run *r)
{
	const struct harp_params *p = &r->params;
	int err, q;

	err = steer_attach(&r->steer, r->ifi.name, r->ifi.ifindex, (uint16_t)p->port_base,
			   (uint16_t)(p->port_base + p->port_count - 1), p);
	if (err) {
		raw_err("attaching harp's XDP program to %s failed: %s", r->ifi.name,
			strerror(-err));
		return err;
	}
	r->attached = true;
	r->q = calloc((size_t)r->nids, sizeof(*r->q));
	if (!r->q) {
		return -ENOMEM;
	}
	for (q = 0; q < r->nids; q++) {
		err = xsk_port_open(&r->q[q].port, r->ifi.name, r->queue_ids[q], p,
				    XSK_BUSY_WAIT_MS);
		if (!err) {
			err = steer_enter(&r->steer, r->queue_ids[q], r->q[q].port.fd);
			if (err) {
				xsk_port_close(&r->q[q].port);
			}
		}
		if (err) {
			raw_err("AF_XDP socket on %s queue %d: %s", r->ifi.name, r->queue_ids[q],
				strerror(-err));
			return err;
		}
		r->q[q].open = true;
		r->q[q].index = q;
		r->nqueues++;
	}
	return 0;
}

static void raw_close(struct raw_run *r)
{
	int q;

	for (q = 0; r->q && q < r->nids; q++) {
		if (r->q[q].open) {
			steer_leave(&r->steer, r->queue_ids[q]);
			xsk_port_close(&r->q[q].port);
		}
	}
	free(r->q);
	r->q = NULL;
	if (r->attached) {
		steer_detach(&r->steer);
		r->attached = false;
	}
	free(r->pattern);
	r->pattern = NULL;
}

/* ---- the payload pattern --------------------------------------------------------------------- */

/* Both ends make the same bytes from a fixed seed; frame seq on queue q carries the window at
 * raw_pattern_off(seq, q), so a frame with the wrong payload, or another frame's, fails memcmp. */
static int raw_pattern_make(struct raw_run *r)
{
	size_t len = (size_t)XSK_SLOT_BYTES + RAW_PATTERN_SPAN * 8; /* the largest body, shifted */
	uint64_t x = 0x9e3779b97f4a7c15ull;
	size_t i;

	r->pattern = malloc(len);
	if (!r->pattern) {
		return -ENOMEM;
	}
	for (i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		r->pattern[i] = (uint8_t)(x >> 24);
	}
	return 0;
}

static inline size_t raw_pattern_off(uint64_t seq, int queue)
{
	return (size_t)((seq + (uint64_t)queue * 977) % RAW_PATTERN_SPAN) * 8;
}

/* ---- marks: small key-value files in --dir --------------------------------------------------- */

static void raw_mark_path(const struct raw_run *r, const char *name, char *path, size_t len)
{
	snprintf(path, len, "%s/%s", r->o.dir, name);
}

/* Writes the mark whole or not at all (rdv_publish writes aside and renames). */
static int raw_mark_write(const struct raw_run *r, const char *name, const char *text)
{
	char path[4096], err[4300];

	raw_mark_path(r, name, path, sizeof(path));
	if (rdv_publish(path, text, strlen(text), err, sizeof(err))) {
		raw_err("%s", err);
		return -EIO;
	}
	return 0;
}

/* Reads a mark into buf; -ENOENT while there is none. */
static int raw_mark_read(const struct raw_run *r, const char *name, char *buf, size_t len)
{
	char path[4096];
	size_t n;
	FILE *f;

	raw_mark_path(r, name, path, sizeof(path));
	f = fopen(path, "r");
	if (!f) {
		return -errno;
	}
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (strncmp(buf, RAW_MARK_MAGIC "\n", strlen(RAW_MARK_MAGIC) + 1)) {
		raw_err("%s is not a harp-perf raw mark of this version", path);
		return -EPROTO;
	}
	return 0;
}

/* The text after "key " on a line of the mark, or NULL. */
static const char *raw_mark_get(const char *text, const char *key)
{
	size_t klen = strlen(key);
	const char *line;

	for (line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		if (!strncmp(line, key, klen) && line[klen] == ' ') {
			return line + klen + 1;
		}
	}
	return NULL;
}

static int raw_mark_u64(const char *text, const char *key, int base, uint64_t *out)
{
	const char *v = raw_mark_get(text, key);
	char *end;

	if (!v) {
		return -ENOENT;
	}
	errno = 0;
	*out = strtoull(v, &end, base);
	return errno || end == v || (*end && *end != '\n') ? -EINVAL : 0;
}

static void raw_mark_remove(const struct raw_run *r, const char *name)
{
	char path[4096];

	raw_mark_path(r, name, path, sizeof(path));
	if (unlink(path) && errno != ENOENT) {
		raw_err("cannot remove the old mark %s: %s", path, strerror(errno));
	}
}

static void raw_sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* ---- the record ------------------------------------------------------------------------------ */

static const char *raw_xdp_mode(const struct raw_run *r)
{
	return r->steer.xdp_mode == XDP_MODE_SKB ? "skb" : "native";
}

static const char *raw_bind_mode(const struct raw_run *r)
{
	return r->nqueues && r->q[0].port.zerocopy ? "zero-copy" : "copy";
}

/* Keys both roles write, from frames of frame_bytes (IP packet bytes) over seconds. */
static void raw_report_common(struct report *rep, const struct raw_run *r, const char *role,
			      uint64_t frames, int frame_bytes, double seconds, double cpu_s)
{
	uint64_t udp_bytes = frames * (uint64_t)(frame_bytes > 0 ? frame_bytes - HARP_IP4_HLEN : 0);
	uint64_t body_bytes = frames * (uint64_t)(frame_bytes > 0 ? frame_bytes - RAW_HDRS : 0);

	report_begin(rep, "harp-perf", "raw", role);
	report_str(rep, "transport", "raw-afxdp");
	report_str(rep, "label", r->o.label);
	report_iface(rep, r->ifi.name[0] ? r->ifi.name : NULL);
	report_str(rep, "xdp_mode", r->attached ? raw_xdp_mode(r) : NULL);
	report_str(rep, "bind_mode", r->nqueues ? raw_bind_mode(r) : NULL);
	report_int(rep, "harp_queues", r->o.server ? r->nqueues : r->use_queues);
	if (frame_bytes > 0) {
		report_int(rep, "frame_bytes", frame_bytes);
	} else {
		report_str(rep, "frame_bytes", NULL);
	}
	report_int(rep, "frames", (int64_t)frames);
	/* bytes and gbps count UDP payload (harp's 64-byte header included): the IP packet less its
	 * IPv4 and UDP headers. body_gbps leaves harp's header out too: the payload harp's
	 * protocol could carry as message bytes, the figure to set beside a stream's gbps. */
	report_int(rep, "bytes", (int64_t)udp_bytes);
	report_num(rep, "seconds", seconds);
	report_num(rep, "pps", seconds > 0 ? (double)frames / seconds : NAN);
	report_num(rep, "gbps", seconds > 0 ? (double)udp_bytes * 8 / seconds / 1e9 : NAN);
	report_num(rep, "body_gbps", seconds > 0 ? (double)body_bytes * 8 / seconds / 1e9 : NAN);
	report_num(rep, "cpu_s", cpu_s);
	report_int(rep, "rss_kb", rss_peak_kb());
}

/* ---- client ---------------------------------------------------------------------------------- */

/*
 * What the ready mark says. Returns 0, -ENOENT while there is none (or it belongs to no server
 * yet), another -errno when it is unreadable.
 */
static int raw_read_ready(struct raw_run *r, uint32_t *server_ip, uint16_t *port_base,
			  int *queues)
{
	char text[1024];
	const char *ip;
	uint64_t v;
	struct in_addr a;
	char ipbuf[32];
	int err;

	err = raw_mark_read(r, RAW_READY, text, sizeof(text));
	if (err) {
		return err;
	}
	if (raw_mark_u64(text, "token", 16, &r->token)) {
		goto bad;
	}
	if (raw_mark_u64(text, "port_base", 10, &v) || v < 1 || v > 65535) {
		goto bad;
	}
	*port_base = (uint16_t)v;
	if (raw_mark_u64(text, "queues", 10, &v) || v < 1 || v > 64) {
		goto bad;
	}
	*queues = (int)v;
	ip = raw_mark_get(text, "ip");
	if (!ip || sscanf(ip, "%31s", ipbuf) != 1 || inet_pton(AF_INET, ipbuf, &a) != 1) {
		goto bad;
	}
	*server_ip = a.s_addr;
	return 0;
bad:
	raw_err("%s/%s is malformed", r->o.dir, RAW_READY);
	return -EPROTO;
}

/* Waits (bounded by --timeout) for the server's ready mark. */
static int raw_wait_ready(struct raw_run *r, uint32_t *server_ip, uint16_t *port_base,
			  int *queues)
{
	double deadline = rdv_now() + r->o.timeout_s;
	int err;

	for (;;) {
		err = raw_read_ready(r, server_ip, port_base, queues);
		if (err != -ENOENT) {
			return err;
		}
		if (raw_stop || rdv_now() >= deadline) {
			raw_err("no %s/%s after %g s: is the server running?", r->o.dir, RAW_READY,
				r->o.timeout_s);
			return -ETIMEDOUT;
		}
		raw_sleep_ms(RAW_POLL_MS);
	}
}

/* A datagram to the peer's discard port makes the kernel resolve its neighbour entry. */
static void raw_poke_neighbour(uint32_t ip)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(RAW_DISCARD_PORT) };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		return;
	}
	sa.sin_addr.s_addr = ip;
	(void)sendto(fd, "", 0, MSG_DONTWAIT, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
}

/* The next hop's MAC towards ip, through the kernel's route and neighbour tables. */
static int raw_resolve(struct raw_run *r, uint32_t ip, uint8_t mac[6])
{
	double deadline = rdv_now() + RAW_ARP_MS / 1000.0;
	union wire_ip dst = wire_ip4(ip);
	char name[INET_ADDRSTRLEN];
	int err, oif = 0;

	inet_ntop(AF_INET, &ip, name, sizeof(name));
	for (;;) {
		err = netinfo_nexthop_mac(&dst, r->ifi.ifindex, mac, &oif);
		if (err != -EAGAIN) {
			break;
		}
		if (raw_stop || rdv_now() >= deadline) {
			raw_err("no neighbour entry for %s on %s after %d ms", name, r->ifi.name,
				RAW_ARP_MS);
			return -ETIMEDOUT;
		}
		raw_poke_neighbour(ip);
		raw_sleep_ms(RAW_POLL_MS);
	}
	if (err == -EXDEV) {
		raw_err("the route to %s leaves by interface %d, not %s", name, oif, r->ifi.name);
	} else if (err) {
		raw_err("no route to %s from %s: %s", name, r->ifi.name, strerror(-err));
	}
	return err;
}

/* Fills the TX ring of one queue with up to max frames (a batch at most); returns how many. */
static uint32_t raw_tx_fill(struct raw_run *r, struct raw_queue *rq, uint32_t body, uint32_t max,
			    uint32_t tag)
{
	struct xsk_port *p = &rq->port;
	struct frame_pool *pool = xsk_port_txpool(p);
	struct harp_hdr h = {
		.version = HARP_WIRE_VERSION,
		.type = HARP_PKT_DATA,
		.conn_id = RAW_CONN_ID,
		.token = r->token,
		.tag = tag,
		.msg_len = UINT64_MAX, /* one endless message */
		.len = (uint16_t)body,
	};
	const uint8_t *pattern = r->pattern;
	uint32_t pieces = xsk_port_tx_pieces(p, HARP_FRAME_OVERHEAD + body), want, idx, i, used = 0;
	int q = rq->index;

	want = xsk_prod_nb_free(&p->tx, RAW_TX_BATCH) / pieces;
	want = want < max ? want : max;
	want = want < pool->free ? want : pool->free;
	if (!want || xsk_ring_prod__reserve(&p->tx, want * pieces, &idx) != want * pieces) {
		return 0;
	}
	for (i = 0; i < want; i++) {
		uint64_t addr = 0;
		uint8_t *frame;

		frame_pool_get(pool, &addr, 1);
		frame = xsk_port_frame(p, addr);
		/* the one copy harp's engine makes too: payload into the frame */
		memcpy(frame + HARP_FRAME_OVERHEAD, pattern + raw_pattern_off(rq->seq, q), body);
		h.psn = (uint32_t)rq->seq;
		h.offset = rq->seq * body;
		used += xsk_port_chain(p, idx + used, addr,
				  wire_build(frame, &rq->path, &h, body, rq->ip_id++));
		rq->seq++;
	}
	xsk_ring_prod__submit(&p->tx, used);
	p->tx_pending += used;
	rq->submitted += want;
	return want;
}

/* Completions back to the pool: all of them. */
static void raw_tx_reclaim(struct raw_queue *rq)
{
	rq->frames += xsk_port_reclaim(&rq->port);
}

static int raw_tx_kick(struct raw_run *r, struct raw_queue *rq)
{
	int err = xsk_port_kick(&rq->port, now_ns());

	if (err) {
		raw_err("TX wake-up (sendto) on %s queue %d failed: %s", r->ifi.name, rq->index,
			strerror(-err));
	}
	return err;
}

/* Sends until the deadline, then waits (bounded) for every frame to complete. */
static int raw_client_send(struct raw_run *r, uint32_t body, double *t_end)
{
	double t0 = rdv_now(), deadline = t0 + r->o.seconds, drain_until;
	uint64_t submitted, done;
	int q, err;

	*t_end = t0;
	while (!raw_stop) {
		for (q = 0; q < r->use_queues; q++) {
			raw_tx_reclaim(&r->q[q]);
			raw_tx_fill(r, &r->q[q], body, RAW_TX_BATCH, RAW_TAG);
			err = raw_tx_kick(r, &r->q[q]);
			if (err) {
				return err;
			}
		}
		if (rdv_now() >= deadline) {
			break;
		}
	}
	drain_until = rdv_now() + RAW_TX_DRAIN_MS / 1000.0;
	for (;;) {
		submitted = done = 0;
		for (q = 0; q < r->use_queues; q++) {
			raw_tx_reclaim(&r->q[q]);
			err = raw_tx_kick(r, &r->q[q]);
			if (err) {
				return err;
			}
			submitted += r->q[q].submitted;
			done += r->q[q].frames;
		}
		*t_end = rdv_now();
		if (done == submitted) {
			return 0;
		}
		if (*t_end >= drain_until) {
			raw_err("%" PRIu64 " of %" PRIu64 " frames never completed on %s",
				submitted - done, submitted, r->ifi.name);
			return 0; /* the record counts only the completed ones */
		}
	}
}

static int raw_write_done(struct raw_run *r, int frame_bytes, double seconds)
{
	char text[4096];
	size_t n = 0;
	uint64_t total = 0;
	int q;

	for (q = 0; q < r->use_queues; q++) {
		total += r->q[q].frames;
	}
	n += (size_t)snprintf(text + n, sizeof(text) - n,
			      RAW_MARK_MAGIC "\ntoken %016" PRIx64 "\nframe_bytes %d\n"
					     "queues %d\nframes %" PRIu64 "\nseconds %.6f\n",
			      r->token, frame_bytes, r->use_queues, total, seconds);
	for (q = 0; q < r->use_queues && n < sizeof(text); q++) {
		n += (size_t)snprintf(text + n, sizeof(text) - n, "q%d %" PRIu64 "\n", q,
				      r->q[q].frames);
	}
	return raw_mark_write(r, RAW_DONE, text);
}

/* Addresses of every queue's frames: this host's port base+q to the server's port base+q. */
static int raw_client_paths(struct raw_run *r, uint32_t server_ip, uint16_t server_port_base)
{
	uint8_t mac[6];
	int q, err;

	err = raw_resolve(r, server_ip, mac);
	if (err) {
		return err;
	}
	for (q = 0; q < r->use_queues; q++) {
		struct wire_path *w = &r->q[q].path;

		memcpy(w->src_mac, r->ifi.mac, 6);
		memcpy(w->dst_mac, mac, 6);
		w->ip6 = false; /* the raw benchmark runs IPv4 */
		w->src_ip = wire_ip4(r->ifi.ipv4);
		w->dst_ip = wire_ip4(server_ip);
		w->src_port = htons((uint16_t)(r->params.port_base + q));
		w->dst_port = htons((uint16_t)(server_port_base + q));
	}
	return 0;
}

static int raw_client_pingpong(struct raw_run *r, int frame_bytes);

static int raw_client(struct raw_run *r)
{
	uint32_t server_ip = 0;
	uint16_t server_port_base = 0;
	int server_queues = 0, frame_bytes, err;
	double t0, cpu0, t_end, seconds;
	struct report rep;
	uint64_t frames = 0;
	struct in_addr a;
	int q;

	err = raw_wait_ready(r, &server_ip, &server_port_base, &server_queues);
	if (err) {
		return err;
	}
	if (r->o.peer) {
		inet_pton(AF_INET, r->o.peer, &a); /* checked with the arguments */
		server_ip = a.s_addr;
	}
	r->use_queues = r->nqueues < server_queues ? r->nqueues : server_queues;
	if (r->use_queues != r->nqueues) {
		raw_err("the server runs %d queue(s), this side %d: sending on %d",
			server_queues, r->nqueues, r->use_queues);
	}
	err = raw_client_paths(r, server_ip, server_port_base);
	if (err) {
		return err;
	}
	if (r->o.pingpong) {
		return raw_client_pingpong(r, r->o.frame_size ? r->o.frame_size : RAW_FRAME_MIN);
	}
	frame_bytes = r->o.frame_size ? r->o.frame_size : r->ip_mtu;
	t0 = rdv_now();
	cpu0 = cpu_seconds();
	err = raw_client_send(r, (uint32_t)(frame_bytes - RAW_HDRS), &t_end);
	seconds = t_end - t0;
	for (q = 0; q < r->use_queues; q++) {
		frames += r->q[q].frames;
	}
	raw_report_common(&rep, r, "client", frames, frame_bytes, seconds, cpu_seconds() - cpu0);
	if (err || raw_stop) {
		return err ? err : -EINTR;
	}
	err = raw_write_done(r, frame_bytes, seconds);
	if (err) {
		return err;
	}
	return report_end(&rep, r->o.json);
}

/* ---- server ---------------------------------------------------------------------------------- */

static int raw_write_ready(struct raw_run *r)
{
	char text[512], ip[INET_ADDRSTRLEN];

	if (getrandom(&r->token, sizeof(r->token), 0) != sizeof(r->token)) {
		r->token = now_ns() * 0x9e3779b97f4a7c15ull;
	}
	inet_ntop(AF_INET, &r->ifi.ipv4, ip, sizeof(ip));
	snprintf(text, sizeof(text),
		 RAW_MARK_MAGIC "\ntoken %016" PRIx64 "\nip %s\nport_base %d\nqueues %d\nmtu %d\n",
		 r->token, ip, r->params.port_base, r->nqueues, r->ip_mtu);
	return raw_mark_write(r, RAW_READY, text);
}

/* memcmp of p's body, wherever its pieces lie, against ref. */
static int raw_body_cmp(const struct wire_pkt *p, const uint8_t *ref)
{
	uint32_t left, n, i;

	if (!p->rest) {
		return memcmp(p->body, ref, p->h.len);
	}
	if (memcmp(p->body, ref, p->body_here)) {
		return 1;
	}
	ref += p->body_here;
	left = p->h.len - p->body_here;
	for (i = 1; left && i < p->rest->n; i++) {
		n = p->rest->len[i] < left ? p->rest->len[i] : left;
		if (memcmp(p->rest->at[i], ref, n)) {
			return 1;
		}
		ref += n;
		left -= n;
	}
	return 0;
}

/*
 * Every check one packet (its pieces in pk) must pass; false counts it bad (or foreign) and
 * keeps it out. A chain parses where it lies, as the engine's receive parses it.
 */
static bool raw_rx_check(struct raw_run *r, struct raw_queue *rq, const struct wire_pieces *pk,
			 struct wire_pkt *out)
{
	struct wire_pkt pkt;
	enum wire_err err;
	bool join = false;
	uint64_t seq;

	err = pk->n == 1 ? wire_parse(pk->at[0], pk->len[0], &pkt) :
			   wire_parse_pieces(pk, &pkt, &join, false);
	if (join) { /* raw sends only DATA: a chain that does not parse in place is bad */
		err = WIRE_ERR_LEN;
	}
	if (err != WIRE_OK || pkt.h.type != HARP_PKT_DATA || !pkt.h.len) {
		rq->bad++;
		return false;
	}
	if (pkt.h.token != r->token || pkt.h.conn_id != RAW_CONN_ID ||
	    (pkt.h.tag != RAW_TAG && pkt.h.tag != RAW_TAG_ECHO)) {
		rq->foreign++;
		return false;
	}
	if (!rq->body_len) {
		rq->body_len = pkt.h.len;
	}
	if (pkt.h.len != rq->body_len || pkt.h.offset % pkt.h.len) {
		rq->bad++;
		return false;
	}
	seq = pkt.h.offset / pkt.h.len;
	if ((uint32_t)seq != pkt.h.psn ||
	    raw_body_cmp(&pkt, r->pattern + raw_pattern_off(seq, rq->index))) {
		rq->bad++;
		return false;
	}
	if (seq < rq->rx_seq) {
		rq->backwards++;
		return false;
	}
	rq->gaps += seq - rq->rx_seq;
	rq->rx_seq = seq + 1;
	*out = pkt;
	return true;
}

/* Server: sends a checked frame that asks for it back where it came from, in a fresh frame. */
static void raw_echo(struct raw_run *r, struct raw_queue *rq, const struct wire_pkt *in)
{
	struct xsk_port *p = &rq->port;
	uint32_t body_at = wire_records_at(in->ip6) + HARP_HDR_LEN;
	uint32_t pieces = xsk_port_tx_pieces(p, body_at + in->h.len), idx, used;
	struct wire_path back = { .ip6 = in->ip6 }; /* back in the family it came in */
	uint64_t addr = 0;
	uint8_t *frame;

	xsk_port_reclaim(p);
	if (!xsk_port_txpool(p)->free || xsk_ring_prod__reserve(&p->tx, pieces, &idx) != pieces) {
		rq->echo_dropped++;
		return;
	}
	frame_pool_get(xsk_port_txpool(p), &addr, 1);
	frame = xsk_port_frame(p, addr);
	wire_body_copy(frame + body_at, in);
	memcpy(back.src_mac, r->ifi.mac, 6);
	memcpy(back.dst_mac, in->src_mac, 6);
	back.src_ip = in->dst_ip;
	back.dst_ip = in->src_ip;
	back.src_port = in->dst_port;
	back.dst_port = in->src_port;
	used = xsk_port_chain(p, idx, addr,
			      wire_build(frame, &back, &in->h, in->h.len, rq->ip_id++));
	xsk_ring_prod__submit(&p->tx, used);
	p->tx_pending += used;
	rq->echoed++;
}

/*
 * The engine's receive: up to RAW_RX_ROUNDS peeks of a batch, every frame back to the fill ring.
 * The server counts and echoes what passes; the client's ping-pong reads rx_seq.
 */
static uint32_t raw_rx_drain(struct raw_run *r, struct raw_queue *rq)
{
	struct xsk_port *p = &rq->port;
	uint32_t idx_rx, n, i, total = 0;
	struct wire_pieces pk;
	int round, k;

	xsk_port_wake_rx(p);
	for (round = 0; round < RAW_RX_ROUNDS; round++) {
		n = xsk_ring_cons__peek(&p->rx, RAW_RX_BATCH, &idx_rx);
		if (!n) {
			break;
		}
		for (i = 0; i < n; i += (uint32_t)(k < 0 ? -k : k)) {
			struct wire_pkt pkt;

			k = xsk_port_gather(p, idx_rx + i, n - i, XSK_SLOT_BYTES + 64, &pk);
			if (k == 0) {
				break; /* the chain's end in the next peek */
			}
			if (k < 0) {
				rq->bad++;
				continue;
			}
			/* the client's ping-pong receives only echoes: rx_seq says which came back */
			if (raw_rx_check(r, rq, &pk, &pkt) && r->o.server) {
				rq->frames++;
				if (pkt.h.tag == RAW_TAG_ECHO) {
					raw_echo(r, rq, &pkt); /* before its frames go back to the fill ring */
				}
			}
		}
		if (i < n) {
			xsk_ring_cons__cancel(&p->rx, n - i);
			p->rx.cached_prod = __atomic_load_n(p->rx.producer, __ATOMIC_ACQUIRE);
		}
		xsk_port_refill(p, idx_rx, i);
		xsk_ring_cons__release(&p->rx, i);
		total += i;
		if (n < RAW_RX_BATCH) {
			break;
		}
	}
	return total;
}

/* ---- ping-pong ------------------------------------------------------------------------------- */

/* Client: --burst frames out, and every echo back (bounded by RAW_ECHO_WAIT_MS). */
static int raw_round_trip(struct raw_run *r, struct raw_queue *rq, uint32_t body, int k)
{
	uint64_t t0 = now_ns();
	int err;

	raw_tx_reclaim(rq);
	if (raw_tx_fill(r, rq, body, (uint32_t)r->o.burst, RAW_TAG_ECHO) != (uint32_t)r->o.burst) {
		raw_err("round trip %d: no room in the TX ring or no free frame", k);
		return -ENOBUFS;
	}
	for (;;) {
		err = raw_tx_kick(r, rq); /* again while the kernel said EAGAIN */
		if (err) {
			return err;
		}
		raw_rx_drain(r, rq);
		if (rq->rx_seq == rq->seq) {
			return 0; /* the echo of the last frame sent passed every check, in order */
		}
		if (raw_stop) {
			return -EINTR;
		}
		if (now_ns() - t0 > RAW_ECHO_WAIT_MS * 1000000ull) {
			raw_err("round trip %d: no echo within %d ms (%" PRIu64 " bad, %" PRIu64
				" out of order so far; nothing is retransmitted)",
				k, RAW_ECHO_WAIT_MS, rq->bad, rq->backwards);
			return -ETIMEDOUT;
		}
		raw_tx_reclaim(rq);
	}
}

/* Client, --pingpong: warm-up round trips, then timed ones; the record holds their latency. */
static int raw_client_pingpong(struct raw_run *r, int frame_bytes)
{
	struct raw_queue *rq = &r->q[0];
	uint32_t body = (uint32_t)(frame_bytes - RAW_HDRS);
	int total = r->o.warmup + r->o.pingpong, k, err = 0;
	double *rtt = calloc((size_t)r->o.pingpong, sizeof(*rtt));
	double t_start = rdv_now(), cpu0 = cpu_seconds(), t_end;
	struct report rep;

	if (!rtt) {
		return -ENOMEM;
	}
	for (k = 0; k < total && !err; k++) {
		uint64_t t0;

		if (k == r->o.warmup) {
			t_start = rdv_now();
			cpu0 = cpu_seconds();
		}
		t0 = now_ns();
		err = raw_round_trip(r, rq, body, k);
		if (!err && k >= r->o.warmup) {
			rtt[k - r->o.warmup] = (double)(now_ns() - t0) / 1e3;
		}
	}
	t_end = rdv_now();
	raw_tx_reclaim(rq);
	raw_report_common(&rep, r, "client", (uint64_t)(k - (err != 0)), frame_bytes,
			  t_end - t_start, cpu_seconds() - cpu0);
	report_str(&rep, "mode", "pingpong");
	report_int(&rep, "size", (int64_t)body * r->o.burst);
	report_int(&rep, "burst", r->o.burst);
	report_int(&rep, "iters", r->o.pingpong);
	report_bool(&rep, "verified", !err && !rq->bad && !rq->backwards);
	report_int(&rep, "rx_bad", (int64_t)rq->bad);
	if (!err) {
		char what[64];

		snprintf(what, sizeof(what), "raw pingpong %6d B", (int)body * r->o.burst);
		report_latency(&rep, what, rtt, r->o.pingpong);
	}
	free(rtt);
	if (err) {
		return err;
	}
	rq->frames = rq->submitted; /* the done mark's count: every frame was echoed */
	err = raw_write_done(r, frame_bytes, t_end - t_start);
	return err ? err : report_end(&rep, r->o.json);
}

/* What the client's done mark says; -ENOENT while there is none. */
struct raw_done {
	bool seen;
	uint64_t frames;
	uint64_t per_queue[64];
	int queues;
	int frame_bytes;
};

static int raw_read_done(struct raw_run *r, struct raw_done *dm)
{
	char text[4096], key[16];
	uint64_t token, v;
	int err, q;

	err = raw_mark_read(r, RAW_DONE, text, sizeof(text));
	if (err) {
		return err;
	}
	if (raw_mark_u64(text, "token", 16, &token) ||
	    raw_mark_u64(text, "frames", 10, &dm->frames) || raw_mark_u64(text, "queues", 10, &v) ||
	    v < 1 || v > 64) {
		goto bad;
	}
	if (token != r->token) {
		raw_err("%s/%s carries another run's token: two clients, or "
			"a stale mark in a reused --dir",
			r->o.dir, RAW_DONE);
		return -ESTALE;
	}
	dm->queues = (int)v;
	if (raw_mark_u64(text, "frame_bytes", 10, &v) || v > 65535) {
		goto bad;
	}
	dm->frame_bytes = (int)v;
	for (q = 0; q < dm->queues; q++) {
		snprintf(key, sizeof(key), "q%d", q);
		if (raw_mark_u64(text, key, 10, &dm->per_queue[q])) {
			goto bad;
		}
	}
	dm->seen = true;
	return 0;
bad:
	raw_err("%s/%s is malformed", r->o.dir, RAW_DONE);
	return -EPROTO;
}

struct raw_rx_clock {
	uint64_t start_ns, first_ns, last_ns; /* run start; first and last frame that passed */
	double cpu_first, cpu_last; /* CPU time at the first frame, at the last tick with frames */
	uint64_t good_at_tick;
};

static uint64_t raw_rx_good(const struct raw_run *r)
{
	uint64_t good = 0;
	int q;

	for (q = 0; q < r->nqueues; q++) {
		good += r->q[q].frames;
	}
	return good;
}

/*
 * Looks at the stop conditions (every RAW_POLL_MS): 1 to stop, 0 to go on, -errno to give up.
 */
static int raw_server_tick(struct raw_run *r, struct raw_done *dm, struct raw_rx_clock *c,
			   uint64_t now)
{
	uint64_t good = raw_rx_good(r), quiet_ns = c->last_ns ? now - c->last_ns : 0;
	int err;

	if (good != c->good_at_tick) {
		c->good_at_tick = good;
		c->cpu_last = cpu_seconds();
	}
	if (!dm->seen) {
		err = raw_read_done(r, dm);
		if (err && err != -ENOENT) {
			return err;
		}
	}
	if (dm->seen) {
		uint64_t since = c->last_ns ? quiet_ns : now - c->start_ns;

		return good >= dm->frames || since >= RAW_DRAIN_IDLE_MS * 1000000ull ? 1 : 0;
	}
	if (c->last_ns && quiet_ns >= RAW_STALL_MS * 1000000ull) {
		raw_err("frames stopped %d ms ago and the client wrote no %s: did it die?",
			RAW_STALL_MS, RAW_DONE);
		return -ETIMEDOUT;
	}
	if (now - c->start_ns >= (uint64_t)(r->o.timeout_s * 1e9)) {
		raw_err("%s after %g s (--timeout)",
			c->last_ns ? "the client is still sending" : "no frame and no client",
			r->o.timeout_s);
		return -ETIMEDOUT;
	}
	return 0;
}

static int raw_server_loop(struct raw_run *r, struct raw_done *dm, struct raw_rx_clock *c)
{
	uint64_t now, next_tick, good, good_before = 0;
	int q, rc = 0;

	c->start_ns = now_ns();
	next_tick = c->start_ns;
	while (!raw_stop) {
		for (q = 0; q < r->nqueues; q++) {
			/* echoes leave a whole --burst at a time, as a reply that waited for the
			 * whole message would */
			if (raw_rx_drain(r, &r->q[q]) && r->q[q].port.tx_pending &&
			    r->q[q].echoed % (uint64_t)r->o.burst == 0 && raw_tx_kick(r, &r->q[q])) {
				return -EIO;
			}
		}
		now = now_ns();
		good = raw_rx_good(r);
		if (good != good_before) {
			if (!c->first_ns) {
				c->first_ns = now;
				c->cpu_first = cpu_seconds();
			}
			c->last_ns = now;
			good_before = good;
		}
		if (now >= next_tick) {
			next_tick = now + RAW_POLL_MS * 1000000ull;
			rc = raw_server_tick(r, dm, c, now);
			if (rc) {
				break;
			}
		}
	}
	return raw_stop ? -EINTR : rc < 0 ? rc : 0;
}

static uint64_t raw_echoed(const struct raw_run *r)
{
	uint64_t n = 0;
	int q;

	for (q = 0; q < r->nqueues; q++) {
		n += r->q[q].echoed;
	}
	return n;
}

/* The receive side's counters, so a loss says where it happened. */
static void raw_report_server_counters(struct report *rep, struct raw_run *r)
{
	struct harp_queue_stats st, sum;
	uint64_t bad = 0, backwards = 0, foreign = 0, gaps = 0, echo_dropped = 0;
	int q;

	memset(&sum, 0, sizeof(sum));
	for (q = 0; q < r->nqueues; q++) {
		memset(&st, 0, sizeof(st));
		if (!xsk_port_stats(&r->q[q].port, &st)) {
			sum.xdp_rx_dropped += st.xdp_rx_dropped;
			sum.xdp_rx_ring_full += st.xdp_rx_ring_full;
			sum.xdp_rx_fill_ring_empty += st.xdp_rx_fill_ring_empty;
		}
		bad += r->q[q].bad;
		backwards += r->q[q].backwards;
		foreign += r->q[q].foreign;
		gaps += r->q[q].gaps;
		echo_dropped += r->q[q].echo_dropped;
	}
	memset(&st, 0, sizeof(st));
	steer_counters(&r->steer, &st);
	report_int(rep, "rx_bad", (int64_t)bad);
	report_int(rep, "rx_backwards", (int64_t)backwards);
	report_int(rep, "rx_foreign", (int64_t)foreign);
	report_int(rep, "rx_gaps", (int64_t)gaps);
	report_int(rep, "xsk_rx_dropped", (int64_t)sum.xdp_rx_dropped);
	report_int(rep, "xsk_rx_ring_full", (int64_t)sum.xdp_rx_ring_full);
	report_int(rep, "xsk_fill_ring_empty", (int64_t)sum.xdp_rx_fill_ring_empty);
	report_int(rep, "xdp_no_socket", (int64_t)st.xdp_no_socket);
	report_int(rep, "echoed", (int64_t)raw_echoed(r));
	report_int(rep, "echo_dropped", (int64_t)echo_dropped);
}

/* Frame size every queue saw (IP packet bytes), or 0 when no frame passed; -1 when they differ. */
static int raw_rx_frame_bytes(const struct raw_run *r)
{
	uint32_t body = 0;
	int q;

	for (q = 0; q < r->nqueues; q++) {
		if (!r->q[q].body_len) {
			continue;
		}
		if (body && body != r->q[q].body_len) {
			return -1;
		}
		body = r->q[q].body_len;
	}
	return body ? (int)body + RAW_HDRS : 0;
}

/* Did every queue get only frames of the size the client (and --frame-size) named? */
static bool raw_rx_sizes_ok(const struct raw_run *r, const struct raw_done *dm, int frame_bytes)
{
	if (frame_bytes < 0) {
		raw_err("the queues received frames of different sizes");
		return false;
	}
	if (frame_bytes && dm->seen && dm->frame_bytes != frame_bytes) {
		raw_err("frames of %d bytes arrived; the client says it sent %d",
			frame_bytes, dm->frame_bytes);
		return false;
	}
	if (frame_bytes && r->o.frame_size && r->o.frame_size != frame_bytes) {
		raw_err("frames of %d bytes arrived; --frame-size says %d", frame_bytes,
			r->o.frame_size);
		return false;
	}
	return true;
}

static int raw_server(struct raw_run *r)
{
	struct raw_rx_clock c = { 0 };
	struct raw_done dm = { 0 };
	struct report rep;
	uint64_t good, bad = 0;
	int frame_bytes, q, err;
	bool verified, sizes_ok;

	raw_mark_remove(r, RAW_DONE); /* a mark left by an earlier run would end this one */
	err = raw_write_ready(r);
	if (err) {
		return err;
	}
	err = raw_server_loop(r, &dm, &c);
	raw_mark_remove(r, RAW_READY);
	good = raw_rx_good(r);
	for (q = 0; q < r->nqueues; q++) {
		bad += r->q[q].bad + r->q[q].backwards;
	}
	frame_bytes = raw_rx_frame_bytes(r);
	sizes_ok = raw_rx_sizes_ok(r, &dm, frame_bytes);
	verified = !err && good > 0 && bad == 0 && sizes_ok;
	if (r->o.pingpong && raw_echoed(r) != ((uint64_t)r->o.pingpong + (uint64_t)r->o.warmup) *
							      (uint64_t)r->o.burst) {
		raw_err("echoed %" PRIu64 " frames; --pingpong %d and --warmup %d of --burst %d make "
			"%d",
			raw_echoed(r), r->o.pingpong, r->o.warmup, r->o.burst,
			(r->o.pingpong + r->o.warmup) * r->o.burst);
		verified = false;
	}
	raw_report_common(&rep, r, "server", good, frame_bytes > 0 ? frame_bytes : 0,
			  c.last_ns > c.first_ns ? (double)(c.last_ns - c.first_ns) / 1e9 : NAN,
			  c.first_ns ? c.cpu_last - c.cpu_first : NAN);
	if (dm.seen) {
		report_int(&rep, "sent", (int64_t)dm.frames);
		report_int(&rep, "lost", (int64_t)(dm.frames - good));
	} else {
		report_str(&rep, "sent", NULL);
		report_str(&rep, "lost", NULL);
	}
	if (r->o.pingpong || raw_echoed(r)) {
		report_str(&rep, "mode", "pingpong"); /* not a stream: no ceiling */
		if (frame_bytes > 0) {
			report_int(&rep, "size", frame_bytes - RAW_HDRS);
		}
	}
	report_bool(&rep, "verified", verified);
	report_int(&rep, "verified_bytes",
		   (int64_t)(good * (uint64_t)(frame_bytes > 0 ? frame_bytes - HARP_IP4_HLEN : 0)));
	raw_report_server_counters(&rep, r);
	if (report_end(&rep, r->o.json) && !err) {
		err = -EIO;
	}
	if (!err && !good) {
		raw_err("no frame arrived on %s", r->ifi.name);
		err = -ENODATA;
	}
	if (!err && bad) {
		raw_err("%" PRIu64 " frame(s) failed their checks on %s", bad, r->ifi.name);
	}
	if (!err && !verified) {
		err = -EBADMSG; /* raw_rx_sizes_ok() has said why when the sizes were wrong */
	}
	return err;
}

/* ---- entry ----------------------------------------------------------------------------------- */

int perf_raw_main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = raw_on_signal }, old_int, old_term;
	struct raw_run *r;
	int err;

	r = calloc(1, sizeof(*r));
	if (!r) {
		raw_err("out of memory");
		return 1;
	}
	err = raw_parse_args(argc, argv, &r->o);
	if (err) {
		free(r);
		return err > 0 ? 0 : 2;
	}
	raw_stop = 0;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);

	err = raw_params(r);
	if (!err) {
		err = raw_interface(r);
	}
	if (!err) {
		err = raw_pattern_make(r);
	}
	if (!err) {
		err = raw_open(r);
	}
	if (!err) {
		err = raw_frames(r);
	}
	if (!err) {
		err = r->o.server ? raw_server(r) : raw_client(r);
	}
	if (err == -EINTR) {
		raw_err("interrupted");
	}
	raw_close(r);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	free(r);
	return err ? 1 : 0;
}
