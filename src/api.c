// SPDX-License-Identifier: Apache-2.0
/*
 * The public API: turns harp.h's calls into work for the set-up code (control.c) and the engines,
 * and validates what callers hand in. Requests come from a fixed pool per connection that only
 * the data thread touches; they reach the engine through the connection's SPSC ring.
 */
#include <errno.h>
#include <sched.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <sys/random.h>
#include <xdp/libxdp.h>
#include <unistd.h>

#include "auth.h"
#include "control.h"

struct harp_mr {
	struct harp_ctx *ctx;
	uint8_t *addr;
	size_t len;
	bool device; /* harp_mr__reg_device */
};

const char *harp_mode_name(enum harp_xdp_mode mode)
{
	return mode == HARP_MODE_ZEROCOPY ? "zerocopy" : mode == HARP_MODE_COPY ? "copy" : "none";
}

/* ---- context ---------------------------------------------------------------------------------- */

#define DEFAULT_SPEED_MBPS 10000 /* reported when neither the driver nor HARP_SPEED_MBPS says */

int harp_settings_check(char *err, size_t errlen)
{
	struct harp_params p;

	if (!err || !errlen) {
		return -EINVAL;
	}
	err[0] = '\0';
	return params_load_env(&p, err, errlen);
}

#ifndef HARP_FAULT_INJECTION
/* The fault injector's settings, set for a build that has none. */
static void warn_no_fault_injector(const struct harp_params *p)
{
	if (p->fault_drop_ppm) {
		pr_warn("HARP_FAULT_DROP_PPM=%d is ignored: this build has no fault injector (a test "
			"build configured with -DHARP_FAULT_INJECTION=ON has one)",
			p->fault_drop_ppm);
	}
	if (p->fault_zc_stall_ms) {
		pr_warn("HARP_FAULT_ZC_STALL_MS=%d is ignored: this build has no fault injector",
			p->fault_zc_stall_ms);
	}
	if (p->fault_deaf_conn) {
		pr_warn("HARP_FAULT_DEAF_CONN=%d is ignored: this build has no fault injector",
			p->fault_deaf_conn);
	}
	if (p->fault_zc_tx_corrupt_ms) {
		pr_warn("HARP_FAULT_ZC_TX_CORRUPT_MS=%d is ignored: this build has no fault injector",
			p->fault_zc_tx_corrupt_ms);
	}
	if (p->fault_connect_hang) {
		pr_warn("HARP_FAULT_CONNECT_HANG=%d is ignored: this build has no fault injector",
			p->fault_connect_hang);
	}
}
#else
static void warn_no_fault_injector(const struct harp_params *p)
{
	(void)p;
}
#endif

/* harp_ctx_opts set as the variables they stand for would be; err says why one is refused. */
static int ctx_opts_apply(struct harp_params *p, const struct harp_ctx_opts *opts, char *err,
			  size_t errlen)
{
	char num[16];
	int rc;

	if (opts->ifname) {
		rc = params_set(p, "HARP_IFNAME", opts->ifname, err, errlen);
		if (rc) {
			return rc;
		}
	}
#define OPT_INT(field, env)                                                           \
	if (opts->field) {                                                            \
		snprintf(num, sizeof(num), "%d", opts->field);                         \
		rc = params_set(p, env, num, err, errlen);                             \
		if (rc) {                                                              \
			return rc;                                                     \
		}                                                                      \
	}
	OPT_INT(queues, "HARP_QUEUES") /* a count */
	OPT_INT(port_base, "HARP_PORT_BASE")
	OPT_INT(mtu, "HARP_MTU")
#undef OPT_INT
	return 0;
}

/* Prefixes or a list, as NCCL_SOCKET_IFNAME takes them: the first interface they select. */
static int ctx_ifname_pick(struct harp_params *p)
{
	char first[1][16];
	int n;

	if (ifmatch_is_plain(p->ifname)) {
		return 0;
	}
	n = harp_ifname_match(p->ifname, first, 1);
	if (n <= 0 && !strpbrk(p->ifname, ",^=")) {
		pr_err("interface %s: %s (nor does any interface that is up with an IP address "
		       "start with it)",
		       p->ifname, strerror(ENODEV));
		return -ENODEV;
	}
	if (n <= 0) {
		pr_err("HARP_IFNAME=%s selects no interface that is up with an IP address",
		       p->ifname);
		return -ENODEV;
	}
	pr_info("HARP_IFNAME=%s selects %s", p->ifname, first[0]);
	snprintf(p->ifname, sizeof(p->ifname), "%s", first[0]);
	return 0;
}

/* Options override the environment, which overrides defaults. */
static int ctx_params(struct harp_params *p, const struct harp_ctx_opts *opts)
{
	char err[256];
	int rc;

	rc = params_load_env(p, err, sizeof(err));
	if (rc) {
		pr_err("%s", err);
		return rc;
	}
	warn_no_fault_injector(p);
	if (opts && opts->sz < HARP_CTX_OPTS_SZ_V1) {
		pr_err("harp_ctx_opts.sz is %zu; expected at least %zu", opts->sz,
		       (size_t)HARP_CTX_OPTS_SZ_V1);
		return -EINVAL;
	}
	rc = opts ? ctx_opts_apply(p, opts, err, sizeof(err)) : 0;
	if (!rc) {
		rc = params_validate(p, err, sizeof(err));
	}
	if (rc) {
		pr_err("%s", err);
		return rc;
	}
	if (p->auth && auth_load(err, sizeof(err))) {
		pr_err("%s", err); /* now, not at the first connection */
		return -ENOENT;
	}
	if (!p->ifname[0]) {
		pr_err("no interface: set HARP_IFNAME (or harp_ctx_opts.ifname) to the interface "
		       "that reaches the peers");
		return -EINVAL;
	}
	return ctx_ifname_pick(p);
}

/* HARP_FAMILY, else NCCL_SOCKET_FAMILY as NCCL reads it: 4, 6, or 0 for either. */
static int family_wanted(const struct harp_params *p)
{
	const char *nccl = getenv("NCCL_SOCKET_FAMILY");

	if (p->family != HARP_FAMILY_AUTO) {
		return p->family == HARP_FAMILY_IPV4 ? 4 : 6;
	}
	if (!nccl || !*nccl) {
		return 0;
	}
	if (!strcmp(nccl, "AF_INET") || !strcmp(nccl, "AF_INET6")) {
		return strcmp(nccl, "AF_INET") ? 6 : 4;
	}
	pr_warn("NCCL_SOCKET_FAMILY=%s is neither AF_INET nor AF_INET6; harp takes either family, "
		"as NCCL does", nccl);
	return 0;
}

/*
 * The address listeners take (ctx->ip): of the family asked for, else the interface's IPv4
 * address, else its IPv6 one, as NCCL picks an interface's address (IPv4 first, then a global
 * IPv6, then a link-local one).
 */
static int ctx_family(struct harp_ctx *ctx)
{
	static const uint8_t zero[16];
	const struct if_info *ifi = &ctx->ifi;
	bool have6 = memcmp(ifi->ipv6, zero, 16) != 0;
	int want = family_wanted(&ctx->params);

	if (want == 0) {
		want = ifi->ipv4 ? 4 : 6;
	}
	if (want == 4 ? !ifi->ipv4 : !have6) {
		bool other = ifi->ipv4 || have6; /* the interface has the other family */

		pr_err("interface %s has no %s address; harp needs one to address its UDP%s",
		       ifi->name, other ? (want == 4 ? "IPv4" : "IPv6") : "IP",
		       other ? " (HARP_FAMILY or NCCL_SOCKET_FAMILY asks for it)" : "");
		return -EADDRNOTAVAIL;
	}
	if (want == 4) {
		ctx->ip = wire_ip4(ifi->ipv4);
	} else {
		memcpy(ctx->ip.b, ifi->ipv6, 16);
	}
	return 0;
}

static int ctx_interface(struct harp_ctx *ctx)
{
	struct harp_params *p = &ctx->params;
	char msg[512];
	int err;

	err = netinfo_interface(p->ifname, &ctx->ifi);
	if (err) {
		pr_err("interface %s: %s%s", p->ifname, strerror(-err),
		       err == -ENODEV ? " (no such interface in this network namespace)" : "");
		return err;
	}
	err = ctx_family(ctx);
	if (err) {
		return err;
	}
	ctx->nqueues = params_pick_queues(p, ctx->ifi.rx_queues, ctx->queue_ids,
					  &ctx->queues_take_free, msg, sizeof(msg));
	if (ctx->nqueues < 0) {
		pr_err("%s", msg);
		return ctx->nqueues;
	}
	ctx->ip_mtu = ctx->ifi.mtu;
	if (p->mtu && p->mtu < ctx->ip_mtu) {
		ctx->ip_mtu = p->mtu;
	}
	if (ctx->ip_mtu < HARP_MTU_MIN) {
		pr_err("interface %s: its MTU %d is below %d, the least harp runs at", p->ifname,
		       ctx->ip_mtu, HARP_MTU_MIN);
		return -EINVAL;
	}
	return 0;
}

/*
 * The largest packet every engine's socket both sends and takes: a transmit slot's worth where
 * packets may span descriptor chains, else one frame less the kernel's receive headroom.
 */
static void ctx_frames(struct harp_ctx *ctx)
{
	const struct harp_params *p = &ctx->params;
	int frame_mtu = (int)XSK_SLOT_BYTES - HARP_ETH_HLEN, q;

	for (q = 0; q < ctx->nengines; q++) {
		if (!ctx->engines[q].port.sg) {
			frame_mtu = p->frame_size - (int)XSK_RX_HEADROOM - HARP_ETH_HLEN;
		}
	}
	if (ctx->ip_mtu > frame_mtu) {
		pr_info("interface %s: MTU %d does not fit %s; harp uses %d", p->ifname,
			ctx->ip_mtu,
			frame_mtu < (int)XSK_SLOT_BYTES - HARP_ETH_HLEN ?
				(p->multi_buffer == HARP_MULTI_BUFFER_OFF ?
					 "one UMEM frame (HARP_MULTI_BUFFER=off)" :
					 "one UMEM frame, and this socket takes no descriptor chains "
					 "(XDP_USE_SG needs kernel 6.6, and in zero copy a driver "
					 "with multi-buffer support)") :
				"a multi-buffer transmit slot",
			frame_mtu);
		ctx->ip_mtu = frame_mtu;
	}
	ctx->payload_max = (uint32_t)ctx->ip_mtu - wire_pkt_overhead(!wire_ip_is4(&ctx->ip));
}

static void report_queue_taken(struct harp_ctx *ctx, int queue)
{
	char owner[160];

	steer_owner_text(&ctx->steer, queue, owner, sizeof(owner));
	pr_err("queue %d of %s is taken by %s; harp processes sharing an interface each need their "
	       "own queues (HARP_QUEUES=%s here%s)",
	       queue, ctx->ifi.name,
	       owner[0] ? owner : "an AF_XDP socket of a process harp has no record of",
	       ctx->params.queues,
	       ctx->queues_take_free ? "" : ": give this one others, e.g. a list such as 4-7, or auto");
}

static void conn_destroy(struct harp_conn *c);

/* One engine per queue picked; with auto alone, the first free ones, up to the limit. */
static int ctx_engines(struct harp_ctx *ctx)
{
	const struct engine_env env = {
		.params = &ctx->params,
		.steer = &ctx->steer,
		.ifname = ctx->ifi.name,
		.release = conn_destroy,
		.copy_fallback = &ctx->copy_fallback,
		.device = &ctx->device,
		/* a NIC that hashes flows to queues gives each pair one queue by itself */
		.pairs = ctx->ifi.rss_table ? NULL : &ctx->pairs,
	};
	int q, err;

	for (q = 0; q < ctx->nqueues; q++) {
		if (ctx->queues_take_free && ctx->nengines == ctx->queues_take_free) {
			break;
		}
		err = engine_init(&ctx->engines[ctx->nengines], &env, ctx->queue_ids[q],
				  ctx->queues_take_free ? 0 : XSK_BUSY_WAIT_MS);
		if (err == -EBUSY && ctx->queues_take_free) {
			pr_debug("queue %d of %s is held by another process; HARP_QUEUES=auto "
				 "passes it by", ctx->queue_ids[q], ctx->ifi.name);
			continue;
		}
		if (err == -EBUSY) {
			report_queue_taken(ctx, ctx->queue_ids[q]);
		}
		if ((err == -ENOMEM || err == -ENOBUFS) && ctx->queues_take_free && ctx->nengines) {
			pr_info("HARP_QUEUES=auto: no memory for a UMEM on queue %d of %s; running "
				"the %d queue(s) already open", ctx->queue_ids[q], ctx->ifi.name,
				ctx->nengines);
			break;
		}
		if (err) {
			return err;
		}
		ctx->engines[ctx->nengines].lane = ctx->nengines;
		ctx->nengines++;
	}
	if (!ctx->nengines) {
		/* Every queue held (any other failure has returned): a process that just died may
		 * still hold one a moment, so wait for the first as a named queue would be waited
		 * for, then say who holds them. */
		err = engine_init(&ctx->engines[0], &env, ctx->queue_ids[0], XSK_BUSY_WAIT_MS);
		if (!err) {
			ctx->nengines = 1;
		} else {
			pr_err("HARP_QUEUES=auto: all %d rx queues of %s are held by other processes; "
			       "give each process its own with HARP_QUEUES, or have the launcher set "
			       "LOCAL_RANK and LOCAL_WORLD_SIZE so that auto shares them out",
			       ctx->nqueues, ctx->ifi.name);
			if (err == -EBUSY) {
				report_queue_taken(ctx, ctx->queue_ids[0]);
			}
			return err;
		}
	}
	for (q = 0; q < ctx->nengines; q++) {
		ctx->queue_ids[q] = ctx->engines[q].queue; /* the queues actually run */
	}
	ctx->nqueues = ctx->nengines;
	return 0;
}

/*
 * Who runs the engines: a thread each (HARP_ENGINE_THREADS), or the callers' test() and the
 * keeper for those nobody calls. auto gives them threads where the process may use at least
 * 2 x engines + 2 CPUs: a core per engine with room for the callers and the peer ranks beside it.
 * On fewer, spinning threads would take turns with the callers they serve.
 */
static int ctx_threads(struct harp_ctx *ctx)
{
	static const char *const threads_name[] = { "auto", "on", "off" };
	int cpus = 0, q, err;
	cpu_set_t set;

	if (!sched_getaffinity(0, sizeof(set), &set)) {
		cpus = CPU_COUNT(&set);
	}
	ctx->engine_threads = ctx->params.engine_threads == HARP_ENGINE_THREADS_ON ||
			      (ctx->params.engine_threads == HARP_ENGINE_THREADS_AUTO &&
			       cpus >= 2 * ctx->nengines + 2);
	if (!ctx->engine_threads) {
		pr_info("%s: %d engine%s run%s on the threads that call test() (HARP_ENGINE_THREADS=%s, "
			"%d CPUs: a thread each takes %d)",
			ctx->ifi.name, ctx->nengines, ctx->nengines == 1 ? "" : "s",
			ctx->nengines == 1 ? "s" : "", threads_name[ctx->params.engine_threads],
			cpus, 2 * ctx->nengines + 2);
		return engine_keeper_start(&ctx->keeper, ctx->engines, ctx->nengines,
					   ctx->params.idle_progress_us);
	}
	for (q = 0; q < ctx->nengines; q++) {
		err = engine_runner_start(&ctx->engines[q], ctx->params.idle_progress_us);
		if (err) {
			while (q > 0) {
				engine_runner_stop(&ctx->engines[--q]);
			}
			return err;
		}
	}
	pr_info("%s: a thread for each of its %d engine%s (HARP_ENGINE_THREADS=%s, %d CPUs)",
		ctx->ifi.name, ctx->nengines, ctx->nengines == 1 ? "" : "s",
		threads_name[ctx->params.engine_threads], cpus);
	return 0;
}

static void ctx_threads_stop(struct harp_ctx *ctx)
{
	int q;

	engine_keeper_stop(&ctx->keeper);
	for (q = 0; q < ctx->nengines; q++) {
		engine_runner_stop(&ctx->engines[q]);
	}
}

/* The line that says what the context runs on: queues, AF_XDP mode, MTU, descriptors, pages. */
static void ctx_report(const struct harp_ctx *ctx)
{
	const struct xsk_port *port = &ctx->engines[0].port;
	char queues[192];
	uint64_t bits = 0;
	int q;

	for (q = 0; q < ctx->nengines; q++) {
		bits |= 1ull << ctx->engines[q].queue;
	}
	queue_set_text(queues, sizeof(queues), bits);
	pr_info("%s: %s %s, %d queue(s) (%s, HARP_QUEUES=%s), AF_XDP %s mode%s%s%s, IP MTU %d (%u "
		"payload bytes per packet, %s), UMEM on %s",
		ctx->ifi.name, wire_ip_is4(&ctx->ip) ? "IPv4" : "IPv6", WIRE_IP_STR(&ctx->ip),
		ctx->nengines, queues, ctx->params.queues,
		port->zerocopy ? "zero-copy" : "copy",
		port->zc_refused ? " (zero copy refused: " :
		port->zc_quirk   ? " (zero copy untried: the driver's known fault" :
				   "",
		port->zc_refused ? strerror(port->zc_refused) : "",
		port->zc_refused || port->zc_quirk ? ")" : "", ctx->ip_mtu, ctx->payload_max,
		port->sg         ? "multi-buffer: descriptor chains" :
		port->sg_refused ? "one descriptor each: multi-buffer refused" :
				   "one descriptor each",
		port->area.huge ? "hugepages" : "normal pages");
}

/* How flows find their engines here, and what a single queue costs. */
static void ctx_report_flows(const struct harp_ctx *ctx)
{
	if (ctx->nengines == 1 && ctx->ifi.rx_queues == 1) {
		/* NCCL gives each peer a connection per channel, and one engine carries them all */
		pr_info("%s: one queue, so one engine on one core carries every connection: a NIC "
			"with N queues gives harp up to N engines (ethtool -L %s combined N where the "
			"driver allows it; a veth pair is made with numtxqueues N numrxqueues N)",
			ctx->ifi.name, ctx->ifi.name);
	}
	if (ctx->ifi.rss_table) {
		pr_info("%s: the NIC hashes flows to queues (an RSS table of %d entries)",
			ctx->ifi.name, ctx->ifi.rss_table);
	} else {
		pr_info("%s: no RSS table, so something outside the NIC picks each flow's queue (a "
			"host's tap: the queue that last sent the flow): each port pair stays with "
			"one engine, and STEER frames keep the peer's paths on theirs",
			ctx->ifi.name);
	}
}

struct harp_ctx *harp_ctx__create(const struct harp_ctx_opts *opts)
{
	struct harp_ctx *ctx = calloc(1, sizeof(*ctx));
	int err;

	if (!ctx) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&ctx->setup_lock, NULL);
	err = ctx_params(&ctx->params, opts);
	if (err) {
		goto err_free;
	}
	harp_log_threshold = (enum harp_log_level)ctx->params.log_level;
	err = ctx_interface(ctx);
	if (err) {
		goto err_free;
	}
	err = steer_attach(&ctx->steer, ctx->ifi.name, ctx->ifi.ifindex,
			   (uint16_t)ctx->params.port_base,
			   (uint16_t)(ctx->params.port_base + ctx->params.port_count - 1),
			   &ctx->params);
	if (err) {
		goto err_free;
	}
	ctx->engines = calloc((size_t)ctx->nqueues, sizeof(*ctx->engines));
	if (!ctx->engines) {
		err = -ENOMEM;
		goto err_steer;
	}
	err = ctx_engines(ctx);
	if (err) {
		goto err_engines;
	}
	ctx_frames(ctx);
	err = ctx_threads(ctx);
	if (err) {
		goto err_engines;
	}
	ctx_report(ctx);
	ctx_report_flows(ctx);
	return ctx;

err_engines:
	while (ctx->nengines > 0) {
		engine_fini(&ctx->engines[--ctx->nengines]);
	}
	free(ctx->engines);
err_steer:
	steer_detach(&ctx->steer);
err_free:
	pthread_mutex_destroy(&ctx->setup_lock);
	free(ctx);
	errno = -err;
	return NULL;
}

/*
 * A send said to be complete arrives even when its connection is closed and the process exits
 * right after, as a closed TCP socket's data does. Small sends complete once copied
 * (transmit.c), so the connections still carrying unacked ones run until their peers ack them or
 * their peer timeout fails them; the wait ends a second after that timeout in any case.
 */
static void ctx_drain(struct harp_ctx *ctx)
{
	uint64_t deadline = now_ns() + ((uint64_t)ctx->params.peer_timeout_ms + 1000) * 1000000ull;
	struct timespec nap = { .tv_nsec = 200000 };
	int q, left;

	for (;;) {
		left = 0;
		for (q = 0; q < ctx->nengines; q++) {
			left += engine_lingering(&ctx->engines[q]);
		}
		if (!left || now_ns() > deadline) {
			break;
		}
		harp_ctx__progress(ctx);
		nanosleep(&nap, NULL);
	}
	if (left) {
		pr_warn("%d closed connections still had small sends unacknowledged %d ms after "
			"closing; their data is lost",
			left, ctx->params.peer_timeout_ms + 1000);
	}
}

void harp_ctx__destroy(struct harp_ctx *ctx)
{
	int q;

	if (!ctx) {
		return;
	}
	ctx_drain(ctx); /* the keeper helps meanwhile */
	ctx_threads_stop(ctx); /* before the engines go: they may be running one */
	for (q = 0; q < ctx->nengines; q++) {
		engine_fini(&ctx->engines[q]);
	}
	free(ctx->engines);
	steer_detach(&ctx->steer);
	pthread_mutex_destroy(&ctx->setup_lock);
	free(ctx);
}

int harp_ctx__progress(struct harp_ctx *ctx)
{
	int q, n = 0;

	for (q = 0; q < ctx->nengines; q++) {
		n += engine_progress(&ctx->engines[q]);
	}
	return n;
}

int harp_ctx__info(const struct harp_ctx *ctx, struct harp_ctx_info *info)
{
	if (!ctx || !info) {
		return -EINVAL;
	}
	memset(info, 0, sizeof(*info));
	snprintf(info->ifname, sizeof(info->ifname), "%s", ctx->ifi.name);
	info->ifindex = ctx->ifi.ifindex;
	info->queues = ctx->nengines;
	info->engine_threads = ctx->engine_threads ? ctx->nengines : 0;
	/* a comm over every engine (at most HARP_STRIPES's 8) when each has a thread to run it at
	 * once; else one */
	info->stripes = ctx->params.stripes	 ? ctx->params.stripes :
			info->engine_threads ? (ctx->nengines < 8 ? ctx->nengines : 8) :
					       1;
	info->mtu = ctx->ip_mtu;
	info->payload_max = (int)ctx->payload_max;
	info->multi_buffer = ctx->engines[0].port.sg;
	info->conns_max = ctx->params.conns_max;
	info->cuda = ctx->params.cuda == HARP_CUDA_ON;
	info->nccl_devices = ctx->params.nccl_devices;
	info->mode = ctx->engines[0].port.zerocopy ? HARP_MODE_ZEROCOPY : HARP_MODE_COPY;
	info->hugepages = ctx->engines[0].port.area.huge;
	info->xdp_native = ctx->steer.xdp_mode != XDP_MODE_SKB;
	info->xdp_pinned = ctx->steer.pinned;
	info->ipv4 = ctx->ifi.ipv4;
	info->family = wire_ip_is4(&ctx->ip) ? AF_INET : AF_INET6;
	memcpy(info->ip6, ctx->ifi.ipv6, 16);
	info->peer_timeout_ms = ctx->params.peer_timeout_ms;
	info->port_base = (uint16_t)ctx->params.port_base;
	info->speed_mbps = ctx->ifi.speed_mbps ? ctx->ifi.speed_mbps
			   : ctx->params.speed_mbps ? ctx->params.speed_mbps
						    : DEFAULT_SPEED_MBPS;
	info->speed_assumed = !ctx->ifi.speed_mbps && !ctx->params.speed_mbps;
	return 0;
}

int harp_ctx__queue_stats(struct harp_ctx *ctx, int queue, struct harp_queue_stats *st)
{
	struct harp_engine *e;

	if (!ctx || !st || queue < 0 || queue >= ctx->nengines) {
		return -EINVAL;
	}
	e = &ctx->engines[queue];
	/* The engine's own counters are read without synchronisation: figures, not state. */
	*st = e->stats;
	xsk_port_stats(&e->port, st);
	return steer_counters(&ctx->steer, st);
}

/* ---- connections ----------------------------------------------------------------------------------- */

/*
 * Frees a connection and everything it owns: one never handed to an engine, or one its engine is
 * done with (engine_env.release), which has unhooked it.
 */
static void conn_destroy(struct harp_conn *c)
{
	if (c->id) {
		ctx_free_id(c->ctx, c->id);
	}
	ctrl_conn_destroy(c);
	conn_free(c);
	table_free(c->reqs, CONN_REQS * sizeof(*c->reqs));
	spsc_destroy(c->submit);
	free(c);
}

/*
 * A new connection in *out, or -EMFILE at HARP_CONNS_MAX (said) or -ENOMEM. numbered: it takes
 * its id (and its place under HARP_CONNS_MAX) now; a listener's set-up takes it only once the
 * peer's hello has checked out (ctrl_establish), so strangers' connections count for nothing.
 */
static int conn_new(struct harp_ctx *ctx, struct harp_conn **out, bool numbered)
{
	struct harp_conn *c = calloc(1, sizeof(*c));
	int err;

	*out = NULL;
	if (!c) {
		return -ENOMEM;
	}
	c->ctx = ctx;
	c->ctrl_fd = -1;
	c->pacing = ctx->params.pacing == HARP_PACING_ON;
	err = numbered ? ctx_alloc_id(ctx, &c->id) : 0;
	if (err) {
		conn_destroy(c);
		return err;
	}
	c->reqs = table_alloc(CONN_REQS * sizeof(*c->reqs));
	c->submit = spsc_create(CONN_REQS);
	if (!c->reqs || !c->submit || conn_alloc_state(c, (uint32_t)ctx->params.cwnd_max)) {
		pr_err("out of memory for a connection (about 400 KiB each)");
		conn_destroy(c);
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

int harp_listen(struct harp_ctx *ctx, struct harp_handle *handle, struct harp_listener **out)
{
	struct harp_listener *l;
	int err;

	if (!ctx || !handle || !out) {
		return -EINVAL;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		return -ENOMEM;
	}
	l->ctx = ctx;
	err = ctrl_listen(ctx, handle, l);
	if (err) {
		free(l);
		return err;
	}
	*out = l;
	return 0;
}

/* Takes pending set-up i off the list, keeping the order. */
static struct harp_conn *pending_take(struct harp_listener *l, int i)
{
	struct harp_conn *c = l->pending[i];

	memmove(&l->pending[i], &l->pending[i + 1],
		(size_t)(l->npending - i - 1) * sizeof(l->pending[0]));
	l->npending--;
	return c;
}

/* A failure strangers can cause, said as listener_drop says its lines: the first few, then
 * every 1000th. */
static void listener_note(struct harp_listener *l, const char *what, const char *why)
{
	l->dropped++;
	if (l->dropped <= 8 || l->dropped % 1000 == 0) {
		pr_warn("listen: %s (%s); %llu set-ups dropped so far, accepting goes on", what, why,
			(unsigned long long)l->dropped);
	}
}

/* Drops pending set-up i (failed, timed out, or pushed out by a newer one). */
static void listener_drop(struct harp_listener *l, int i, int err)
{
	struct harp_conn *c = pending_take(l, i);

	l->dropped++;
	/* the first few, then every 1000th: a port scan must not flood the log */
	if (l->dropped <= 8 || l->dropped % 1000 == 0) {
		const char *why = ctrl_setup_why(c);

		pr_warn("listen: dropped a connection set-up from %s (%s); %llu dropped so far, "
			"accepting goes on",
			ctrl_setup_peer(c),
			!err ? "more set-ups at once than the listener runs: the oldest goes" :
			why[0] ? why : strerror(-err),
			(unsigned long long)l->dropped);
	}
	harp_conn__close(c);
}

int harp_listener__accept(struct harp_listener *l, struct harp_conn **out)
{
	char peer[CTRL_PEER_NAME];
	struct harp_conn *c;
	int err, fd, i;

	if (!l || !out) {
		return -EINVAL;
	}
	*out = NULL;
	/* what the kernel accepted since, each to a set-up of its own */
	for (i = 0; i < LISTEN_ACCEPT_BATCH; i++) {
		err = ctrl_accept(l, &fd, peer, sizeof(peer));
		if (err == -EAGAIN) {
			break;
		}
		if (err == -EBADF || err == -EINVAL || err == -ENOTSOCK) {
			pr_err("listen: accepting a connection failed: %s", strerror(-err));
			return err; /* the listening socket itself is gone */
		}
		if (err) {
			/* out of descriptors or memory, for now: what waits is taken on a later call,
			 * and no stranger's connection fails the caller */
			listener_note(l, "accepting a connection failed", strerror(-err));
			break;
		}
		err = conn_new(l->ctx, &c, false);
		if (!err) {
			err = ctrl_adopt(l, c, fd, peer);
			fd = -1; /* the connection's now, closed with it */
			if (err) {
				conn_destroy(c);
			}
		}
		if (err) {
			if (fd >= 0) {
				close(fd); /* the peer sees the connection end */
			}
			listener_note(l, "a connection could not be set up", strerror(-err));
			continue;
		}
		if (l->npending == LISTEN_PENDING) {
			listener_drop(l, 0, 0);
		}
		l->pending[l->npending++] = c;
	}
	/* every set-up moves on; the first whose hello checked out and whose reply went is
	 * handed out, and a failed one is dropped, never reported to the caller */
	for (i = 0; i < l->npending;) {
		c = l->pending[i];
		err = harp_conn__establish(c);
		if (err == -EAGAIN) {
			i++;
			continue;
		}
		if (err) {
			listener_drop(l, i, err);
			continue;
		}
		*out = pending_take(l, i);
		return 0;
	}
	return -EAGAIN;
}

void harp_listener__close(struct harp_listener *l)
{
	if (!l) {
		return;
	}
	while (l->npending) {
		harp_conn__close(l->pending[--l->npending]);
	}
	close(l->fd);
	free(l);
}

#ifdef HARP_FAULT_INJECTION
/* HARP_FAULT_CONNECT_HANG: the Nth connection this process connects never sends its request. */
static void fault_connect_hang(struct harp_conn *c)
{
	static _Atomic int connects;
	int n = c->ctx->params.fault_connect_hang;

	if (n && atomic_fetch_add(&connects, 1) + 1 == n) {
		c->fault_hang = true;
		pr_info("conn %u: HARP_FAULT_CONNECT_HANG: its set-up never goes on", c->id);
	}
}
#else
static void fault_connect_hang(struct harp_conn *c)
{
	(void)c;
}
#endif

int harp_connect(struct harp_ctx *ctx, const struct harp_handle *handle, struct harp_conn **out)
{
	struct harp_conn *c;
	int err;

	if (!ctx || !handle || !out) {
		return -EINVAL;
	}
	*out = NULL;
	err = conn_new(ctx, &c, true);
	if (err) {
		return err;
	}
	if (getrandom(&c->token, sizeof(c->token), 0) != sizeof(c->token)) {
		c->token = now_ns() * 0x9e3779b97f4a7c15ull;
	}
	err = ctrl_connect(c, handle);
	if (err) {
		conn_destroy(c);
		return err;
	}
	fault_connect_hang(c);
	*out = c;
	return 0;
}

static void conn_go(struct harp_conn *c)
{
	const struct harp_params *p = &c->ctx->params;

	c->engine = &c->ctx->engines[ctrl_setup_queue(c)];
	c->stats.queue = ctrl_setup_queue(c);
	conn_paths_init(c, (uint32_t)p->paths, (uint16_t)p->port_base, (uint16_t)p->port_count,
			c->peer_port_lo, c->peer_port_span,
			(uint32_t)(c->token ^ (c->token >> 32)) ^ c->id);
	atomic_store_explicit(&c->state, CONN_READY, memory_order_release);
	engine_handover(c->engine, c);
}

int harp_conn__establish(struct harp_conn *c)
{
	int state, err;

	if (!c) {
		return -EINVAL;
	}
	state = atomic_load_explicit(&c->state, memory_order_acquire);
	if (state == CONN_FAILED) {
		return atomic_load(&c->fail_err);
	}
	if (c->fault_hang) {
		return -EAGAIN; /* HARP_FAULT_CONNECT_HANG */
	}
	if (!c->setup || (state == CONN_READY && !ctrl_setup_reply_pending(c))) {
		return 0;
	}
	if (state == CONN_READY) {
		return ctrl_establish(c); /* the listener's reply still going out */
	}
	err = ctrl_establish(c);
	if (err == 0) {
		conn_go(c);
		if (ctrl_setup_reply_pending(c)) {
			err = ctrl_establish(c);
		}
	}
	if (err && err != -EAGAIN) {
		atomic_store(&c->fail_err, err);
		if (atomic_load(&c->state) != CONN_READY) {
			atomic_store(&c->state, CONN_FAILED);
		}
	}
	return err;
}

int harp_conn__queue(const struct harp_conn *c)
{
	if (!c) {
		return -EINVAL;
	}
	/* conn_go writes it once, before the connection is READY (release) */
	if (atomic_load_explicit(&c->state, memory_order_acquire) != CONN_READY) {
		return -ENOTCONN;
	}
	return c->engine->queue;
}

void harp_conn__close(struct harp_conn *c)
{
	if (!c) {
		return;
	}
	if (!c->engine) {
		conn_destroy(c); /* never handed to an engine */
		return;
	}
	engine_close_conn(c->engine, c);
}

int harp_conn__stats(const struct harp_conn *c, struct harp_conn_stats *st)
{
	if (!c || !st) {
		return -EINVAL;
	}
	*st = c->stats; /* engine-owned figures, read racily: a snapshot, not state */
	st->cwnd_bytes = conn_cwnd(c);
	st->paths = c->paths_live;
	st->srtt_us = c->rtt.srtt_us;
	st->rto_us = c->rtt.rto_us;
	st->auth = c->auth ? auth_algorithm(c->auth) : NULL;
	st->pmtu = c->pmtu.ceiling ? c->pmtu.mtu : c->payload_max + wire_pkt_overhead(c->path.ip6);
	st->pmtu_ceiling = c->pmtu.ceiling;
	st->family = c->path.ip6 ? AF_INET6 : AF_INET;
	return 0;
}

/* ---- memory ---------------------------------------------------------------------------------------- */

static int mr_reg(struct harp_ctx *ctx, void *addr, size_t len, bool device,
		  struct harp_mr **out)
{
	struct harp_mr *mr;

	if (!ctx || !out || (!addr && len)) {
		return -EINVAL;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		return -ENOMEM;
	}
	mr->ctx = ctx;
	mr->addr = addr;
	mr->len = len;
	mr->device = device;
	*out = mr;
	return 0;
}

int harp_mr__reg(struct harp_ctx *ctx, void *addr, size_t len, struct harp_mr **out)
{
	return mr_reg(ctx, addr, len, false, out);
}

int harp_mr__reg_device(struct harp_ctx *ctx, void *addr, size_t len, struct harp_mr **out)
{
	if (ctx && !ctx->device.copy) {
		pr_err("a device memory region (%p+%zu) needs the caller's copies first "
		       "(harp_ctx__set_device)",
		       addr, len);
		return -EOPNOTSUPP;
	}
	return mr_reg(ctx, addr, len, true, out);
}

int harp_ctx__set_device(struct harp_ctx *ctx, const struct harp_device_ops *ops)
{
	const size_t need = offsetof(struct harp_device_ops, host_register);

	if (!ctx || !ops || ops->sz < need || !ops->copy || !ops->wait) {
		return -EINVAL;
	}
	if (ctx->device.copy) {
		return -EBUSY;
	}
	memcpy(&ctx->device, ops, ops->sz < sizeof(*ops) ? ops->sz : sizeof(*ops));
	ctx->device.sz = sizeof(*ops);
	return 0;
}

void harp_mr__dereg(struct harp_mr *mr)
{
	int q;

	if (!mr) {
		return;
	}
	/* memory that may be freed next must not be read or written by any engine after this */
	for (q = 0; q < mr->ctx->nengines; q++) {
		engine_forget_region(&mr->ctx->engines[q], mr->addr, mr->len);
	}
	free(mr);
}

static bool mr_covers(const struct harp_mr *mr, const void *buf, size_t len)
{
	uintptr_t b = (uintptr_t)buf, m = (uintptr_t)mr->addr;

	return !mr || (b >= m && len <= mr->len && b - m <= mr->len - len);
}

/* ---- requests ------------------------------------------------------------------------------------------ */

static int conn_usable(struct harp_conn *c)
{
	int state = atomic_load_explicit(&c->state, memory_order_acquire);

	if (state == CONN_FAILED) {
		return atomic_load(&c->fail_err);
	}
	return state == CONN_READY ? 0 : -ENOTCONN;
}

static struct harp_req *req_get(struct harp_conn *c)
{
	struct harp_req *r = c->free_reqs;

	if (r) {
		c->free_reqs = r->next;
	} else if (c->reqs_used < CONN_REQS) {
		r = &c->reqs[c->reqs_used++]; /* its page is touched only now */
		r->conn = c;
	} else {
		return NULL;
	}
	memset(&r->send, 0, sizeof(r->send) > sizeof(r->recv) ? sizeof(r->send) : sizeof(r->recv));
	r->next = NULL;
	r->err = 0;
	atomic_store_explicit(&r->state, REQ_PENDING, memory_order_relaxed);
	return r;
}

static void req_put(struct harp_req *r)
{
	struct harp_conn *c = r->conn;

	atomic_store_explicit(&r->state, REQ_FREE, memory_order_relaxed);
	r->next = c->free_reqs;
	c->free_reqs = r;
}

/*
 * Queues r for its engine without running it: the caller's next test() does, and sends all it
 * posted since in one batch (one TX wake-up, and the CTSs and DATA of a window together). NCCL
 * tests right after posting, so nothing waits; a pass here had cost a sendto() per message (64 B
 * messages/s: 200k with it, 517k without, perf/RESULTS.md).
 */
static int submit(struct harp_conn *c, struct harp_req *r, struct harp_req **out)
{
	/* The ring has a slot for every request object, so it cannot be full. */
	spsc_push(c->submit, r);
	engine_notify(c->engine, c);
	*out = r;
	return 0;
}

int harp_conn__isend(struct harp_conn *c, const void *buf, size_t len, uint32_t tag,
		     struct harp_mr *mr, struct harp_req **out)
{
	struct harp_req *r;
	int err;

	if (!c || !out || (!buf && len)) {
		return -EINVAL;
	}
	*out = NULL;
	err = conn_usable(c);
	if (err) {
		return err;
	}
	if (mr && !mr_covers(mr, buf, len)) {
		pr_err("isend: buffer %p+%zu lies outside its memory region", buf, len);
		return -EINVAL;
	}
	r = req_get(c);
	if (!r) {
		engine_progress(c->engine);
		return -EAGAIN;
	}
	r->kind = REQ_SEND;
	r->send.buf = buf;
	r->send.len = len;
	r->send.tag = tag;
	r->send.device = mr && mr->device;
	return submit(c, r, out);
}

int harp_conn__irecv(struct harp_conn *c, int n, void **bufs, const size_t *sizes,
		     const uint32_t *tags, struct harp_mr **mrs, struct harp_req **out)
{
	struct harp_req *r;
	int i, err;

	if (!c || !out || n < 1 || n > HARP_RECV_MAX_BUFS || !bufs || !sizes || !tags) {
		return -EINVAL;
	}
	*out = NULL;
	err = conn_usable(c);
	if (err) {
		return err;
	}
	for (i = 0; i < n; i++) {
		int j;

		if ((!bufs[i] && sizes[i]) || (mrs && mrs[i] && !mr_covers(mrs[i], bufs[i], sizes[i]))) {
			pr_err("irecv: buffer %d (%p+%zu) is NULL or outside its memory region", i,
			       bufs[i], sizes[i]);
			return -EINVAL;
		}
		for (j = 0; j < i; j++) {
			if (tags[j] == tags[i]) {
				pr_err("irecv: buffers %d and %d both carry tag %u; the buffers of one "
				       "receive need different tags (each takes the send of its tag)",
				       j, i, tags[i]);
				return -EINVAL;
			}
		}
	}
	r = req_get(c);
	if (!r) {
		engine_progress(c->engine);
		return -EAGAIN;
	}
	r->kind = REQ_RECV;
	r->recv.nbufs = n;
	r->recv.rsn = c->next_rsn++;
	for (i = 0; i < n; i++) {
		r->recv.bufs[i] = bufs[i];
		r->recv.cap[i] = sizes[i];
		r->recv.tag[i] = tags[i];
		r->recv.msg_len[i] = UINT64_MAX;
		if (mrs && mrs[i] && mrs[i]->device) {
			r->recv.device_mask |= 1u << i;
		}
	}
	return submit(c, r, out);
}

int harp_conn__peer_recv(struct harp_conn *c, uint32_t rsn, int *n, size_t *caps,
			 uint32_t *tags)
{
	const struct cts_group *g;
	int i, pass, err;

	if (!c || !n || !caps || !tags) {
		return -EINVAL;
	}
	err = conn_usable(c);
	if (err) {
		return err;
	}
	g = &c->cts[rsn & (CONN_RECV_SLOTS - 1)];
	for (pass = 0; pass < 2; pass++) {
		/* acquire: pairs with deliver_cts's release, so the group's fields are whole */
		if (atomic_load_explicit(&g->ready, memory_order_acquire) == (1ull << 32 | rsn)) {
			*n = g->nbufs;
			for (i = 0; i < g->nbufs; i++) {
				caps[i] = (size_t)g->cap[i];
				tags[i] = g->tag[i];
			}
			return 0;
		}
		if (!pass) {
			engine_progress(c->engine); /* the CTS may wait on the socket */
		}
	}
	return -EAGAIN;
}

/*
 * NCCL's proxy thread (and any caller) spins on test(). Where ranks outnumber the cores, a rank
 * spinning with nothing to do holds a core that another rank, with packets waiting, needs. So
 * every HARP_SPIN_YIELD idle calls in a row, a thread looks whether the scheduler took its core
 * away since it last looked (involuntary context switches): if so, the core is contended, and
 * it yields. A core nobody else wants is never yielded: an uncontended yield still cost the 8 B
 * ping-pong's tail (p99 about 100 against 65 us). 4 ranks on 2 vCPUs: see perf/RESULTS.md. The
 * look is a getrusage() call: every 16 idle calls it was 5% of a spinning ping-pong's CPU; every
 * 128 it does as well for 4 ranks.
 */
static __thread uint32_t idle_tests;
static __thread long preempted;

static void idle_yield(int after)
{
	struct rusage ru;

	if (!after || ++idle_tests < (uint32_t)after) {
		return;
	}
	idle_tests = 0;
	if (getrusage(RUSAGE_THREAD, &ru)) {
		return;
	}
	if (ru.ru_nivcsw != preempted) {
		preempted = ru.ru_nivcsw;
		sched_yield();
	}
}

int harp_req__test(struct harp_req *r, int *done, size_t *sizes)
{
	int state, err, i;

	if (!r || !done || atomic_load_explicit(&r->state, memory_order_relaxed) == REQ_FREE) {
		return -EINVAL;
	}
	*done = 0;
	/* acquire: pairs with req_finish's release, so results are visible */
	state = atomic_load_explicit(&r->state, memory_order_acquire);
	if (state == REQ_PENDING) {
		if (engine_progress(r->conn->engine)) {
			idle_tests = 0;
		} else {
			idle_yield(r->conn->ctx->params.spin_yield);
		}
		state = atomic_load_explicit(&r->state, memory_order_acquire);
	}
	if (state == REQ_PENDING) {
		return 0;
	}
	err = state == REQ_FAILED ? r->err : 0;
	if (!err && sizes) {
		if (r->kind == REQ_SEND) {
			sizes[0] = r->send.len;
		} else {
			for (i = 0; i < r->recv.nbufs; i++) {
				sizes[i] = r->recv.msg_len[i];
			}
		}
	}
	*done = !err;
	req_put(r);
	return err;
}
