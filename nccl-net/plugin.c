// SPDX-License-Identifier: Apache-2.0
/*
 * harp as an NCCL net plugin: one NCCL device per harp interface, one harp connection per NCCL
 * comm. NCCL's service thread calls listen/connect/accept while its proxy threads call
 * isend/irecv/test on other comms; harp allows exactly that (set-up and data from two threads,
 * one comm's data from one thread), so the locks here guard only process-wide state: g.lock the
 * device list, the connects in progress, the comm count, the pool of closed comms and the memory
 * registrations; live.lock the set of handles handed to NCCL.
 *
 * Every harp error is a negative errno; hp_result() is the one place it becomes an
 * ncclResult_t. Requests are harp's own, wrapped only to remember how many sizes test() reports.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "harp/harp.h"
#include "cuda.h"
#include "log.h"
#include "plugin.h"
#include "stripe.h"

#define HP_REQS 512		     /* per comm: >= HNCCL_NET_MAX_REQUESTS * HP_MAX_RECVS */
#define HP_STAGE_MAGIC 0x48504353u   /* "HPCS": a connect in progress, in the handle's tail */
#define HP_OFFER_MAGIC 0x4850534fu   /* "HPSO": the stripes a listener takes, in the handle's tail */
#define HP_HELLO_MAGIC 0x48505348u   /* "HPSH": the first message on each stripe's connection */
#define HP_HELLO_TAG 0x48504c4fu
#define HP_MAX_MSG (1ull << 30)	     /* test() reports int sizes: keep messages well inside */

_Static_assert(HNCCL_HANDLE_FITS(struct harp_handle), "harp's handle fits NCCL's");
_Static_assert(HP_MAX_RECVS == HARP_RECV_MAX_BUFS, "grouped receives match harp's");
_Static_assert(HP_REQS >= HNCCL_NET_MAX_REQUESTS * HP_MAX_RECVS, "request pool per comm");

struct hp_dev {
	struct harp_ctx *ctx;
	struct harp_ctx_info info;
	char name[16];
	char *pci_path;
	uint64_t guid;
	int speed;
	struct hp_cuda_dev *cuda; /* GPU buffers taken (HARP_CUDA=on, libcudart there) */
};

/*
 * A device NCCL sees: an interface (dev), or one of several shares of it. NCCL's topology search
 * gives each net device one ring channel and doubles the count, so one device per interface
 * meant two channels (and two connections each way a peer) whatever the engines harp runs there:
 * an interface shown as k devices gets 2k. Each has its own name and guid (NCCL keeps one budget
 * per guid) and an equal share of the link speed, rounded down to a bandwidth NCCL's search
 * tries (so that each share holds exactly one channel); all share the interface's engines,
 * and a comm lands on one of them as any does (HARP_NCCL_DEVICES).
 */
struct hp_vdev {
	int dev;       /* the interface's index in g.dev */
	char name[24]; /* the interface's, then "#share" */
	uint64_t guid;
	int speed; /* Mbit/s */
};

/* Process-wide: the devices, shared by every communicator's init. */
static struct {
	pthread_mutex_t lock;
	int refs;		/* inits not yet finalized */
	int comms;		/* listen, send and recv comms open */
	bool destroy_pending;	/* the last finalize came while comms were open */
	int ndev;
	struct hp_dev dev[HP_MAX_DEVS];
	int nvdev; /* what NCCL sees: g.vdev */
	struct hp_vdev vdev[HP_MAX_DEVS];
	struct hp_comm *connecting; /* connects whose set-up is in progress */
	/* closed comms, oldest first, for comm_new to use again: a comm's memory is never given
	 * back while the plugin is loaded (comm_enter) */
	struct hp_comm *pool_head, *pool_tail;
	struct hp_mr *mrs; /* every memory handle NCCL holds, released by harp or not */
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * A memory handle handed to NCCL. harp's region (mr) goes when NCCL deregisters it, or with
 * harp's contexts at the last finalize if NCCL has not by then: NCCL may still deregister it
 * after that (its order is not harp's to choose), so the handle itself stays, empty, until NCCL
 * does or the plugin is unloaded, and a late deregMr finds it and only says so.
 */
struct hp_mr {
	struct harp_mr *mr; /* NULL once harp's context closed under it */
	void *addr;	    /* what was registered, for the messages */
	size_t len;
	struct hp_mr *prev, *next; /* g.mrs, under g.lock */
};

/* One init's context (v11 and later); the older tables share one. Names its communicator. */
struct hp_ctx {
	uint64_t comm_id;
};

struct hp_comm;

struct hp_req {
	struct harp_req *req; /* a striped comm's: its first stripe's (hp_sreq has them all) */
	struct hp_comm *comm;
	int n; /* sizes test() reports */
	struct hp_req *next_free;
};

/*
 * A request of a striped comm (stripe.h): a harp request on each stripe it uses, and what each
 * brought, so that test() reports the sizes, and finds a piece out of place, once all are in.
 */
struct hp_sreq {
	struct harp_req *sub[HP_STRIPES_MAX];
	size_t cap[HP_MAX_RECVS]; /* a receive's buffers */
	size_t len;		  /* a send's bytes */
	uint32_t got[HP_STRIPES_MAX][HP_MAX_RECVS]; /* bytes stripe s brought buffer i */
	uint8_t nsub;	 /* stripes posted on: 0..nsub-1 */
	uint8_t pending; /* of those, not done yet (bits) */
	bool recv;
};

/* What a listener offers in the handle's tail (after hp_stage): the stripes its comm takes. */
struct hp_offer {
	uint32_t magic;
	uint32_t stripes;
	uint64_t nonce; /* this listener's: each stripe's hello names it */
};

/* The first message on each connection of a striped comm: which stripe it is. */
struct hp_hello {
	uint32_t magic;
	uint16_t stripe, stripes;
	uint64_t nonce;
};

enum hp_comm_kind { HP_LISTEN = 1, HP_SEND, HP_RECV };

/*
 * Listen, send and recv comms all have kind and dev, so regMr can take any of them. users and
 * closing make a close wait for the calls inside the comm (comm_enter); they, and the pool's
 * link, outlive the comm's use: comm_new leaves them as they are.
 */
struct hp_comm {
	_Atomic uint32_t users; /* calls between comm_enter and comm_leave */
	_Atomic bool closing;	/* a close has begun: comm_enter refuses */
	struct hp_comm *next_pooled;
	enum hp_comm_kind kind;
	struct hp_dev *dev;
	/* send and recv: stripe s's connection (one unless striped); listen: those whose hello
	 * came, by stripe */
	struct harp_conn *conns[HP_STRIPES_MAX];
	int nconns;
	uint64_t nonce; /* striped: the listener's, from its offer */
	struct hp_sreq *sreqs; /* striped: one per request, by index */
	int err;		/* striped: a stripe failed, so the comm has (the first error) */
	uint32_t peer_rsn;	/* striped send: the peer's receive the next send falls in */
	uint32_t peer_taken;	/* its buffers already sent to (bits) */
	uint32_t up;		/* connections established (bits, by stripe or arrival) */
	struct hp_hello hello[HP_STRIPES_MAX];	 /* sent (send) or received (listen) */
	struct harp_req *hello_req[HP_STRIPES_MAX];
	uint32_t hellos_done; /* send: stripes whose hello completed (bits) */
	struct harp_listener *listener; /* HP_LISTEN */
	int stripes;			/* HP_LISTEN: connections its comm takes (its offer) */
	struct harp_conn *arrived[HP_STRIPES_MAX]; /* HP_LISTEN: accepted, hello not yet read */
	int narrived, nplaced;
	uint64_t first_arrival_ns; /* HP_LISTEN: when this comm's first stripe came; 0: none yet */
	struct hp_comm *next_connecting;
	uint64_t stage_id;
	struct hp_req *free_reqs;
	struct hp_req reqs[];
};

/* Bytes of every comm, a power of two, and its alignment (req_live finds a comm from a request) */
#define HP_COMM_BYTES 32768
_Static_assert(sizeof(struct hp_comm) + HP_REQS * sizeof(struct hp_req) <= HP_COMM_BYTES,
	       "a comm and its requests fit HP_COMM_BYTES");

/* What a send comm keeps in the handle's tail (bytes harp does not own) while it connects. */
struct hp_stage {
	uint32_t magic;
	uint32_t pad;
	uint64_t id;
};
_Static_assert(HARP_HANDLE_USED + sizeof(struct hp_stage) + sizeof(struct hp_offer) <=
		       HNCCL_NET_HANDLE_MAXSIZE,
	       "connect state and the listener's offer fit beside harp's handle");

/* ---- logging -------------------------------------------------------------------------------- */

/* harp's own log lines go to NCCL's logger: errors and warnings as WARN, the rest as INFO. */
static void hp_print(enum harp_log_level level, const char *msg)
{
	hp_log(level <= HARP_LOG_WARN ? HNCCL_LOG_WARN : HNCCL_LOG_INFO, HNCCL_NET, "libharp", 0,
	       "%s", msg);
}

/* The one translation from harp's negative errno to NCCL's result. */
static hnccl_result_t hp_result(int err)
{
	switch (-err) {
	case 0:
		return HNCCL_SUCCESS;
	case ECONNRESET:
	case ECONNREFUSED:
	case ETIMEDOUT:
	case EPIPE:
	case EPROTO:
	case EHOSTUNREACH:
	case ENETUNREACH:
		return HNCCL_REMOTE_ERROR; /* the peer, or the path to it */
	case EINVAL:
		return HNCCL_INVALID_ARGUMENT;
	case EMSGSIZE:
		return HNCCL_INVALID_USAGE;
	default:
		return HNCCL_SYSTEM_ERROR;
	}
}

/* ---- devices ---------------------------------------------------------------------------------- */

static char *sysfs_device_path(const char *ifname)
{
	char link[PATH_MAX];

	snprintf(link, sizeof(link), "/sys/class/net/%s/device", ifname);
	return realpath(link, NULL); /* NULL for veth, bridges and other virtual interfaces */
}

static uint64_t mac_guid(const char *ifname)
{
	char path[PATH_MAX], buf[64];
	unsigned int m[6];
	uint64_t guid = 0;
	FILE *f;
	int i;

	snprintf(path, sizeof(path), "/sys/class/net/%s/address", ifname);
	f = fopen(path, "r");
	if (!f) {
		return 0;
	}
	if (fgets(buf, sizeof(buf), f) &&
	    sscanf(buf, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) == 6) {
		for (i = 0; i < 6; i++) {
			guid = guid << 8 | (m[i] & 0xff);
		}
	}
	fclose(f);
	return guid;
}

/* Under g.lock, before harp's contexts go: what NCCL still has registered is released. */
static void mrs_release(void)
{
	struct hp_mr *m;
	int n = 0;

	for (m = g.mrs; m; m = m->next) {
		if (m->mr) {
			harp_mr__dereg(m->mr);
			m->mr = NULL;
			n++;
		}
	}
	if (n) {
		HP_INFO("%d memory registration%s NCCL still held released as harp closes; a later "
			"deregMr of %s only says so",
			n, n == 1 ? "" : "s", n == 1 ? "it" : "one");
	}
}

static void devices_destroy(void)
{
	int i;

	if (g.ndev) {
		HP_INFO("harp closed on %d device%s", g.ndev, g.ndev == 1 ? "" : "s");
	}
	mrs_release();
	for (i = 0; i < g.ndev; i++) {
		harp_ctx__destroy(g.dev[i].ctx);
		hp_cuda_detach(g.dev[i].cuda);
		free(g.dev[i].pci_path);
	}
	memset(g.dev, 0, sizeof(g.dev));
	g.ndev = 0;
	memset(g.vdev, 0, sizeof(g.vdev));
	g.nvdev = 0;
	g.destroy_pending = false;
	harp_set_print(NULL);
}

/*
 * A share of speed Mbit/s among shares devices, rounded down to a bandwidth NCCL's topology
 * search tries (its tables of GB/s for every GPU generation hold these): a share of exactly such a
 * value holds one ring channel; a share in between can hold two at a lower one, or none.
 */
static int share_speed(int speed, int shares)
{
	static const int tried[] = { 384000, 240000, 192000, 160000, 120000, 96000, 48000,
				     24000,  19200,  9600,   1920,   960 }; /* x 8000: GB/s */
	int each = speed / shares;
	size_t i;

	for (i = 0; i < sizeof(tried) / sizeof(tried[0]); i++) {
		if (tried[i] <= each) {
			return tried[i];
		}
	}
	return tried[sizeof(tried) / sizeof(tried[0]) - 1];
}

/* NCCL's devices: each interface once, or in shares (struct hp_vdev). */
static void vdevs_create(void)
{
	int i, s, shares;

	g.nvdev = 0;
	for (i = 0; i < g.ndev; i++) {
		struct hp_dev *d = &g.dev[i];

		shares = d->info.nccl_devices ? d->info.nccl_devices : d->info.queues / 2;
		shares = shares < 1 ? 1 : shares;
		if (shares > HP_MAX_DEVS - g.nvdev - (g.ndev - 1 - i)) {
			shares = HP_MAX_DEVS - g.nvdev - (g.ndev - 1 - i); /* room for the rest */
		}
		for (s = 0; s < shares; s++) {
			struct hp_vdev *v = &g.vdev[g.nvdev++];

			v->dev = i;
			snprintf(v->name, sizeof(v->name), s ? "%s#%d" : "%s", d->name, s);
			v->guid = d->guid ^ ((uint64_t)s << 56);
			v->speed = shares == 1 ? d->speed : share_speed(d->speed, shares);
		}
		if (shares > 1) {
			HP_INFO("%s: shown to NCCL as %d devices (%s to %s#%d), %d Mbit/s each, on its %d "
				"engine%s: NCCL opens two channels on each (HARP_NCCL_DEVICES=%d%s)",
				d->name, shares, d->name, d->name, shares - 1,
				g.vdev[g.nvdev - 1].speed, d->info.queues,
				d->info.queues == 1 ? "" : "s", d->info.nccl_devices,
				d->info.nccl_devices ? "" : ": one for every two engines");
		}
	}
}

/* The interfaces HARP_IFNAME selects, at most HP_MAX_DEVS of them; 0, said, where none is. */
static int devices_pick(char (*names)[16])
{
	const char *spec = getenv("HARP_IFNAME");
	int n;

	n = harp_ifname_match(spec, names, HARP_IFMATCH_MAX);
	if (n <= 0) {
		HP_WARN("no interface that is up with an IP address matches HARP_IFNAME=%s; set "
			"HARP_IFNAME to the interface that reaches the other nodes",
			spec ? spec : "(unset: ^docker,lo,virbr)");
		return 0;
	}
	if (!spec || !*spec) {
		n = 1; /* unset: the first interface only, as NCCL's socket transport would pick */
	}
	if (n > HP_MAX_DEVS) {
		HP_INFO("HARP_IFNAME=%s matches %d interfaces; using the first %d", spec, n,
			HP_MAX_DEVS);
		n = HP_MAX_DEVS;
	}
	return n;
}

/* harp on one interface: its context, and what NCCL is told of it (name, guid, speed, GPUs). */
static int dev_open(struct hp_dev *d, const char *name)
{
	struct harp_ctx_opts opts = { .sz = sizeof(opts), .ifname = name };
	int rc;

	d->ctx = harp_ctx__create(&opts);
	if (!d->ctx) {
		return -errno;
	}
	harp_ctx__info(d->ctx, &d->info);
	memcpy(d->name, name, sizeof(d->name));
	d->pci_path = sysfs_device_path(name);
	d->guid = mac_guid(name);
	d->speed = d->info.speed_mbps;
	if (d->info.speed_assumed) {
		HP_INFO("%s does not report its speed (as on ENA); assuming %d Mbit/s, set "
			"HARP_SPEED_MBPS to the link's real speed",
			name, d->speed);
	}
	if (d->info.cuda && hp_cuda_start()) {
		rc = hp_cuda_attach(d->ctx, &d->cuda);
		if (rc) {
			HP_INFO("%s: GPU buffers go through host memory: %s", name, strerror(-rc));
		}
	}
	return 0;
}

/* "IPv4 a.b.c.d" or "IPv6 addr": the family and address the device's listeners take. */
static const char *hp_address_text(const struct harp_ctx_info *info, char *buf)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (info->family == AF_INET6) {
		inet_ntop(AF_INET6, info->ip6, ip, sizeof(ip));
	} else {
		inet_ntop(AF_INET, &info->ipv4, ip, sizeof(ip));
	}
	snprintf(buf, INET6_ADDRSTRLEN + 8, "IPv%d %s", info->family == AF_INET6 ? 6 : 4, ip);
	return buf;
}

/* The line that says what device i runs on. */
static void dev_report(const struct hp_dev *d, int i)
{
	char addr[INET6_ADDRSTRLEN + 8];

	HP_INFO("device %d: %s %s, %d queue%s (an engine each, %s), a comm over %d "
		"connection%s (HARP_STRIPES%s), XDP %s mode, AF_XDP %s mode, MTU %d (%d payload "
		"bytes per packet, %s), UDP ports from %u, %s, %d Mbit/s",
		i, d->name, hp_address_text(&d->info, addr), d->info.queues,
		d->info.queues == 1 ? "" : "s",
		d->info.engine_threads ? "each on a thread of its own" :
					 "run by the threads that call test()",
		d->info.stripes, d->info.stripes == 1 ? "" : "s: its large messages cut over them",
		d->info.stripes > 1 ? ": one per engine in turn" : "",
		d->info.xdp_native ? "native" : "skb",
		harp_mode_name(d->info.mode), d->info.mtu,
		d->info.payload_max,
		d->info.multi_buffer ? "multi-buffer: descriptor chains" : "one descriptor each",
		d->info.port_base,
		d->info.hugepages ? "UMEM on hugepages" : "UMEM on normal pages", d->speed);
}

/* Checks every HARP_* variable, then opens harp on each interface HARP_IFNAME selects. */
static hnccl_result_t devices_create(void)
{
	char names[HARP_IFMATCH_MAX][16], err[256];
	int n, i, rc;

	rc = harp_settings_check(err, sizeof(err));
	if (rc) {
		HP_WARN("%s; harp is off, NCCL falls back to its other transports", err);
		return HNCCL_INVALID_ARGUMENT;
	}
	n = devices_pick(names);
	if (!n) {
		return HNCCL_SYSTEM_ERROR;
	}
	harp_set_print(hp_print);
	for (i = 0; i < n; i++) {
		rc = dev_open(&g.dev[i], names[i]);
		if (rc) {
			HP_WARN("cannot run on %s (%s; the line above says why); harp is off, NCCL "
				"falls back to its other transports",
				names[i], strerror(-rc));
			g.ndev = i;
			devices_destroy();
			return rc == -EINVAL ? HNCCL_INVALID_ARGUMENT : HNCCL_SYSTEM_ERROR;
		}
		g.ndev = i + 1;
		dev_report(&g.dev[i], i);
	}
	vdevs_create();
	return HNCCL_SUCCESS;
}

hnccl_result_t hp_init(void **ctx, uint64_t comm_id, const struct hnccl_comm_config *config,
		       hnccl_logger_fn logger, hnccl_profiler_fn profiler)
{
	hnccl_result_t res = HNCCL_SUCCESS;
	struct hp_ctx *c;

	(void)profiler; /* harp raises no profiler events yet */
	c = calloc(1, sizeof(*c));
	if (!c) {
		return HNCCL_SYSTEM_ERROR;
	}
	(void)config; /* a traffic class has no meaning on AF_XDP yet */
	c->comm_id = comm_id;
	pthread_mutex_lock(&g.lock);
	if (logger) {
		hp_log_set(logger);
	}
	if (!g.refs && !g.ndev) {
		res = devices_create();
	}
	if (res == HNCCL_SUCCESS) {
		g.refs++;
		g.destroy_pending = false;
	}
	pthread_mutex_unlock(&g.lock);
	if (res != HNCCL_SUCCESS) {
		free(c);
		return res;
	}
	*ctx = c;
	return HNCCL_SUCCESS;
}

static void comm_free(struct hp_comm *c);
static void conns_close(struct harp_conn **conns, int n);

hnccl_result_t hp_finalize(void *ctx)
{
	struct hp_comm *abandoned = NULL, *c;

	pthread_mutex_lock(&g.lock);
	if (g.refs > 0 && --g.refs == 0) {
		/* connects NCCL gave up on half-way: it never got their comms, so nobody else will
		 * close them, and they would keep the teardown below waiting forever */
		abandoned = g.connecting;
		g.connecting = NULL;
		if (g.comms) {
			/* NCCL closes its comms first; if it did not, the last close tears down */
			g.destroy_pending = true;
		} else {
			devices_destroy();
		}
	}
	pthread_mutex_unlock(&g.lock);
	while ((c = abandoned)) {
		abandoned = c->next_connecting;
		conns_close(c->conns, c->nconns);
		comm_free(c);
	}
	free(ctx);
	return HNCCL_SUCCESS;
}

/*
 * dlclose() or exit without finalize (the v8-v10 tables have none): detach from the NICs. The
 * memory handles NCCL never deregistered go too.
 */
__attribute__((destructor)) static void hp_unload(void)
{
	struct hp_mr *m;

	pthread_mutex_lock(&g.lock);
	if (g.ndev) {
		devices_destroy();
	}
	while ((m = g.mrs)) {
		g.mrs = m->next;
		harp_mr__dereg(m->mr); /* NULL: released with its context already */
		free(m);
	}
	pthread_mutex_unlock(&g.lock);
}

hnccl_result_t hp_devices(int *ndev)
{
	*ndev = g.nvdev;
	return HNCCL_SUCCESS;
}

static struct hp_vdev *vdev_get(int dev)
{
	if (dev < 0 || dev >= g.nvdev) {
		HP_WARN("device %d does not exist (harp has %d)", dev, g.nvdev);
		return NULL;
	}
	return &g.vdev[dev];
}

/* The interface NCCL's device dev runs on. */
static struct hp_dev *dev_get(int dev)
{
	struct hp_vdev *v = vdev_get(dev);

	return v ? &g.dev[v->dev] : NULL;
}

hnccl_result_t hp_properties(int dev, struct hp_props *p)
{
	struct hp_vdev *v = vdev_get(dev);
	struct hp_dev *d = v ? &g.dev[v->dev] : NULL;

	if (!d) {
		return HNCCL_INVALID_ARGUMENT;
	}
	memset(p, 0, sizeof(*p));
	p->name = v->name;
	p->pci_path = d->pci_path;
	p->guid = v->guid;
	p->ptr_support = HNCCL_PTR_HOST | (d->cuda ? HNCCL_PTR_CUDA : 0);
	p->speed = v->speed;
	p->latency = 0;
	/* HARP_CONNS_MAX connections, the next one fails; a comm takes one per stripe */
	p->max_comms = d->info.conns_max / (d->info.stripes > 1 ? d->info.stripes : 1);
	p->max_recvs = HP_MAX_RECVS;
	p->max_p2p_bytes = HP_MAX_MSG;
	p->max_coll_bytes = HP_MAX_MSG;
	return HNCCL_SUCCESS;
}

/* ---- handles NCCL holds -------------------------------------------------------------------------- */

/*
 * Every comm and memory registration this plugin handed to NCCL, so that a handle NCCL passes
 * back is looked up before it is used: a stale one (closed twice, deregistered twice) or a junk
 * one gets an error naming it, not a crash or a use of freed memory. (A request is checked
 * through its comm: req_live.) An open-addressing set of pointers: lookups (every isend, irecv,
 * test()) take no lock; adding and removing, which only opening and closing do, take live.lock.
 * A table replaced (grown, or rebuilt without its deleted slots) stays allocated until the plugin
 * is unloaded, so that a lookup still reading it never reads freed memory; one is replaced per
 * cap / 2 opens and closes at most.
 */
struct live_table {
	struct live_table *retired; /* the one this replaced */
	size_t cap;
	_Atomic uintptr_t slot[]; /* 0: empty, 1: deleted, else a pointer | its kind */
};

/*
 * What an entry is, in its pointer's low bits (comms and registrations are 16-byte aligned at
 * least): a comm passed where a memory handle belongs, or the other way round, is not found.
 */
enum live_kind { LIVE_COMM = 2, LIVE_MR = 4 };

static struct {
	pthread_mutex_t lock;
	struct live_table *_Atomic table;
	size_t used;  /* slots not empty, deleted ones included */
	size_t count; /* pointers in the set */
} live = { .lock = PTHREAD_MUTEX_INITIALIZER };

static size_t live_hash(uintptr_t p, size_t cap)
{
	return (size_t)((p >> 4) * 0x9e3779b97f4a7c15ull) & (cap - 1); /* the kind bits aside */
}

/* The entry for p of kind: 0 for a pointer the kind bits would not fit (never added). */
static uintptr_t live_key(const void *p, enum live_kind kind)
{
	return (uintptr_t)p & 15 ? 0 : (uintptr_t)p | kind;
}

/* The slot holding p, or (writers) the deleted or empty slot where it would go. */
static size_t live_find(struct live_table *t, uintptr_t p)
{
	size_t i = live_hash(p, t->cap), tomb = SIZE_MAX;
	uintptr_t v;

	while ((v = atomic_load_explicit(&t->slot[i], memory_order_acquire)) && v != p) {
		if (v == 1 && tomb == SIZE_MAX) {
			tomb = i;
		}
		i = (i + 1) & (t->cap - 1);
	}
	return v == p || tomb == SIZE_MAX ? i : tomb;
}

/*
 * Under live.lock: a new table without deleted slots, twice the size when the set fills a
 * quarter of the old one (or the first); the old one retired.
 */
static bool live_rebuild(void)
{
	struct live_table *old = atomic_load_explicit(&live.table, memory_order_relaxed), *t;
	size_t cap = !old ? 1024 : live.count * 4 > old->cap ? old->cap * 2 : old->cap, i;

	t = calloc(1, sizeof(*t) + cap * sizeof(t->slot[0]));
	if (!t) {
		return false;
	}
	t->cap = cap;
	live.used = 0;
	for (i = 0; old && i < old->cap; i++) {
		uintptr_t v = atomic_load_explicit(&old->slot[i], memory_order_relaxed);

		if (v > 1) {
			atomic_store_explicit(&t->slot[live_find(t, v)], v, memory_order_relaxed);
			live.used++;
		}
	}
	t->retired = old;
	atomic_store_explicit(&live.table, t, memory_order_release);
	return true;
}

static bool live_add(const void *ptr, enum live_kind kind)
{
	uintptr_t p = live_key(ptr, kind);
	struct live_table *t;
	bool ok = true;

	if (!p) {
		return false;
	}
	pthread_mutex_lock(&live.lock);
	t = atomic_load_explicit(&live.table, memory_order_relaxed);
	if (!t || (live.used + 1) * 2 > t->cap) {
		ok = live_rebuild();
		t = atomic_load_explicit(&live.table, memory_order_relaxed);
	}
	if (ok) {
		size_t i = live_find(t, p);
		uintptr_t was = atomic_load_explicit(&t->slot[i], memory_order_relaxed);

		if (was != p) {
			live.used += was == 0;
			live.count++;
			atomic_store_explicit(&t->slot[i], p, memory_order_release);
		}
	}
	pthread_mutex_unlock(&live.lock);
	return ok;
}

/* true when p, of that kind, was there (and is gone now) */
static bool live_del(const void *ptr, enum live_kind kind)
{
	uintptr_t p = live_key(ptr, kind);
	struct live_table *t;
	bool found = false;

	pthread_mutex_lock(&live.lock);
	t = atomic_load_explicit(&live.table, memory_order_relaxed);
	if (ptr && p && t) {
		size_t i = live_find(t, p);

		found = atomic_load_explicit(&t->slot[i], memory_order_relaxed) == p;
		if (found) {
			atomic_store_explicit(&t->slot[i], 1, memory_order_release);
			live.count--;
		}
	}
	pthread_mutex_unlock(&live.lock);
	return found;
}

static bool live_has(const void *ptr, enum live_kind kind)
{
	struct live_table *t = atomic_load_explicit(&live.table, memory_order_acquire);
	uintptr_t p = live_key(ptr, kind);

	if (!ptr || !p || !t) {
		return false;
	}
	return atomic_load_explicit(&t->slot[live_find(t, p)], memory_order_acquire) == p;
}

/* NCCL unloads the plugin at the end: the tables go with it (whatever NCCL left registered) */
__attribute__((destructor)) static void live_free(void)
{
	struct live_table *t = atomic_load_explicit(&live.table, memory_order_relaxed), *next;

	atomic_store_explicit(&live.table, NULL, memory_order_relaxed);
	for (; t; t = next) {
		next = t->retired;
		free(t);
	}
	live.used = live.count = 0;
}

static const char *kind_name(enum hp_comm_kind kind)
{
	return kind == HP_LISTEN ? "listen" : kind == HP_SEND ? "send" : "recv";
}

/*
 * c is an open comm of this kind (any kind: 0); else one WARN naming what was wrong. The memory
 * of anything the live set held stays a comm's (g's pool), so reading c->kind after the lookup
 * is safe even if a close races with it; what the caller does next needs comm_enter.
 */
static bool comm_ok(const struct hp_comm *c, enum hp_comm_kind kind, const char *call)
{
	if (!live_has(c, LIVE_COMM)) {
		HP_WARN("%s: %p is not an open harp comm (closed already, or never one)", call,
			(const void *)c);
		return false;
	}
	if (kind && c->kind != kind) {
		HP_WARN("%s: %p is a %s comm, not a %s comm", call, (const void *)c,
			kind_name(c->kind), kind_name(kind));
		return false;
	}
	return true;
}

/*
 * A call begins inside comm c: c is open and of this kind, and no close has begun; a close
 * waits until comm_leave. Else one WARN, and false. A close that raced with the lookup is seen
 * here: users is raised before closing is read, and a close sets closing before it reads users
 * (both sequentially consistent), so one of the two sees the other.
 */
static bool comm_enter(struct hp_comm *c, enum hp_comm_kind kind, const char *call)
{
	if (!comm_ok(c, kind, call)) {
		return false;
	}
	atomic_fetch_add(&c->users, 1);
	if (atomic_load(&c->closing)) {
		atomic_fetch_sub(&c->users, 1);
		HP_WARN("%s: %p is being closed by another thread", call, (void *)c);
		return false;
	}
	return true;
}

static void comm_leave(struct hp_comm *c)
{
	atomic_fetch_sub_explicit(&c->users, 1, memory_order_release);
}

/*
 * A close of comm c begins: later calls into it are refused, and those under way have
 * finished when this returns. false (one WARN) when c is not an open comm of this kind, or
 * another thread closes it already.
 */
static bool comm_close_begin(struct hp_comm *c, enum hp_comm_kind kind, const char *call)
{
	if (!comm_ok(c, kind, call)) {
		return false;
	}
	if (atomic_exchange(&c->closing, true)) {
		HP_WARN("%s: %p is being closed by another thread already", call, (void *)c);
		return false;
	}
	while (atomic_load(&c->users)) {
		sched_yield();
	}
	return true;
}

/*
 * request, if it is a pending request of an open comm; NULL for anything else. A comm lies on a
 * boundary of HP_COMM_BYTES, so the comm a request would belong to is found from its address,
 * and looked up, before anything is read through either.
 */
static struct hp_req *req_live(void *request)
{
	uintptr_t p = (uintptr_t)request;
	struct hp_comm *c = (struct hp_comm *)(p & ~(uintptr_t)(HP_COMM_BYTES - 1));
	uintptr_t first = (uintptr_t)c->reqs; /* an address, not a read */

	if (!request || p < first || (p - first) % sizeof(struct hp_req) ||
	    (p - first) / sizeof(struct hp_req) >= HP_REQS || !live_has(c, LIVE_COMM) ||
	    c->kind == HP_LISTEN) {
		return NULL;
	}
	return ((struct hp_req *)request)->req ? request : NULL;
}

/* ---- comms ------------------------------------------------------------------------------------ */

/* A closed comm (or one never opened) goes to the back of the pool. */
static void comm_pool(struct hp_comm *c)
{
	pthread_mutex_lock(&g.lock);
	c->next_pooled = NULL;
	if (g.pool_tail) {
		g.pool_tail->next_pooled = c;
	} else {
		g.pool_head = c;
	}
	g.pool_tail = c;
	pthread_mutex_unlock(&g.lock);
}

/* NCCL unloads the plugin at the end: the pool goes with it */
__attribute__((destructor)) static void comm_pool_free(void)
{
	struct hp_comm *c;

	while ((c = g.pool_head)) {
		g.pool_head = c->next_pooled;
		free(c);
	}
	g.pool_tail = NULL;
}

static struct hp_comm *comm_new(enum hp_comm_kind kind, struct hp_dev *d, int nconns)
{
	int nreqs = kind == HP_LISTEN ? 0 : HP_REQS, i;
	const size_t kept = offsetof(struct hp_comm, kind);
	struct hp_comm *c;

	/* the oldest closed one first: a caller still holding a closed comm's pointer is least
	 * likely to meet it open again */
	pthread_mutex_lock(&g.lock);
	c = g.pool_head;
	if (c) {
		g.pool_head = c->next_pooled;
		g.pool_tail = g.pool_head ? g.pool_tail : NULL;
	}
	pthread_mutex_unlock(&g.lock);
	if (!c) {
		/* on a boundary of its own size: see req_live */
		c = aligned_alloc(HP_COMM_BYTES, HP_COMM_BYTES);
		if (!c) {
			return NULL;
		}
		memset(c, 0, kept);
	}
	/* users is left alone: a late comm_enter on the closed comm may hold it for a moment */
	memset((char *)c + kept, 0, HP_COMM_BYTES - kept);
	c->next_pooled = NULL;
	c->kind = kind;
	c->dev = d;
	c->nconns = nconns;
	if (kind != HP_LISTEN && nconns > 1) {
		c->sreqs = calloc(HP_REQS, sizeof(*c->sreqs));
		if (!c->sreqs) {
			comm_pool(c);
			return NULL;
		}
	}
	for (i = nreqs - 1; i >= 0; i--) {
		c->reqs[i].comm = c;
		c->reqs[i].next_free = c->free_reqs;
		c->free_reqs = &c->reqs[i];
	}
	atomic_store(&c->closing, false);
	if (!live_add(c, LIVE_COMM)) {
		free(c->sreqs);
		comm_pool(c);
		return NULL;
	}
	pthread_mutex_lock(&g.lock);
	g.comms++;
	pthread_mutex_unlock(&g.lock);
	return c;
}

static void comm_free(struct hp_comm *c)
{
	(void)live_del(c, LIVE_COMM);
	free(c->sreqs); /* nothing reads it once the comm is off the live set */
	c->sreqs = NULL;
	pthread_mutex_lock(&g.lock);
	if (--g.comms == 0 && g.destroy_pending) {
		devices_destroy();
	}
	pthread_mutex_unlock(&g.lock);
	comm_pool(c);
}

static struct hp_offer *offer_of(void *handle)
{
	return (struct hp_offer *)((unsigned char *)handle + HARP_HANDLE_USED +
				   sizeof(struct hp_stage));
}

/* Names a listener's comm to its stripes' hellos: unique enough to catch a connection strayed in
 * from another comm (a check, not a secret: harp's handle and HARP_AUTH guard the rest). */
static uint64_t comm_nonce(const struct hp_comm *c)
{
	static _Atomic uint64_t count;
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
	       (uint64_t)(uintptr_t)c ^ (atomic_fetch_add(&count, 1) + 1) << 48;
}

hnccl_result_t hp_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
	struct hp_dev *d = dev_get(dev);
	struct hp_comm *c;
	int err;

	(void)ctx;
	*listen_comm = NULL;
	if (!d) {
		return HNCCL_INVALID_ARGUMENT;
	}
	c = comm_new(HP_LISTEN, d, 0);
	if (!c) {
		return HNCCL_SYSTEM_ERROR;
	}
	err = harp_listen(d->ctx, (struct harp_handle *)handle, &c->listener);
	if (err) {
		comm_free(c);
		return hp_result(err);
	}
	c->stripes = d->info.stripes; /* 1 to 8 (HARP_STRIPES's range) */
	_Static_assert(HP_STRIPES_MAX == 8, "the plugin takes every stripe count harp gives");
	c->nonce = comm_nonce(c);
	*offer_of(handle) = (struct hp_offer){ HP_OFFER_MAGIC, (uint32_t)c->stripes, c->nonce };
	*listen_comm = c;
	return HNCCL_SUCCESS;
}

static struct hp_stage *stage_of(void *handle)
{
	return (struct hp_stage *)((unsigned char *)handle + HARP_HANDLE_USED);
}

/* The connect in progress that this handle's tail names, if it is really ours. */
static struct hp_comm *connecting_take(uint64_t id, bool remove)
{
	struct hp_comm **pp, *c = NULL;

	pthread_mutex_lock(&g.lock);
	for (pp = &g.connecting; *pp; pp = &(*pp)->next_connecting) {
		if ((*pp)->stage_id == id) {
			c = *pp;
			if (remove) {
				*pp = c->next_connecting;
			}
			break;
		}
	}
	pthread_mutex_unlock(&g.lock);
	return c;
}

static void conns_close(struct harp_conn **conns, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		harp_conn__close(conns[i]);
		conns[i] = NULL;
	}
}

/* The queues a striped comm's connections run on, for its line: "0,1,2,3". */
static void comm_queues(const struct hp_comm *c, char *out, size_t len)
{
	size_t used = 0;
	int s;

	out[0] = 0;
	for (s = 0; s < c->nconns && used < len; s++) {
		used += (size_t)snprintf(out + used, len - used, "%s%d", s ? "," : "",
					 harp_conn__queue(c->conns[s]));
	}
}

/*
 * A send comm's connections: each established, then on a striped comm each one's hello sent
 * (and taken by the peer's receive): 0 once all are, -EAGAIN before, or the first error.
 */
static int connect_progress(struct hp_comm *c)
{
	bool waiting = false;
	int s, err, done;

	for (s = 0; s < c->nconns; s++) {
		if (c->up & 1u << s) {
			continue;
		}
		err = harp_conn__establish(c->conns[s]);
		if (err == -EAGAIN) {
			waiting = true;
		} else if (err) {
			return err;
		} else {
			c->up |= 1u << s;
		}
	}
	if (waiting || c->nconns == 1) {
		return waiting ? -EAGAIN : 0;
	}
	for (s = 0; s < c->nconns; s++) {
		if (c->hellos_done & 1u << s) {
			continue;
		}
		if (!c->hello_req[s]) {
			c->hello[s] = (struct hp_hello){ HP_HELLO_MAGIC, (uint16_t)s,
							 (uint16_t)c->nconns, c->nonce };
			err = harp_conn__isend(c->conns[s], &c->hello[s], sizeof(c->hello[s]),
					       HP_HELLO_TAG, NULL, &c->hello_req[s]);
			if (err == -EAGAIN) {
				waiting = true;
				continue;
			}
			if (err) {
				return err;
			}
		}
		err = harp_req__test(c->hello_req[s], &done, NULL);
		if (err || done) {
			c->hello_req[s] = NULL;
		}
		if (err) {
			return err;
		}
		if (done) {
			c->hellos_done |= 1u << s;
		} else {
			waiting = true;
		}
	}
	return waiting ? -EAGAIN : 0;
}

hnccl_result_t hp_connect(void *ctx, int dev, void *handle, void **send_comm,
			  struct hnccl_net_device_handle **dev_handle)
{
	static uint64_t next_id;
	struct hp_stage *st = stage_of(handle);
	const struct hp_offer *offer = offer_of(handle);
	struct hp_dev *d;
	struct hp_comm *c = NULL;
	char queues[64];
	int err, s, k;

	(void)ctx;
	(void)dev_handle; /* host device: stays NULL */
	*send_comm = NULL;
	if (st->magic == HP_STAGE_MAGIC) {
		c = connecting_take(st->id, false);
	}
	if (!c) {
		d = dev_get(dev);
		if (!d) {
			return HNCCL_INVALID_ARGUMENT;
		}
		/* as many connections as the listener's comm takes (a handle without an offer: one) */
		k = offer->magic == HP_OFFER_MAGIC && offer->stripes >= 1 &&
				    offer->stripes <= HP_STRIPES_MAX ?
			    (int)offer->stripes :
			    1;
		c = comm_new(HP_SEND, d, k);
		if (!c) {
			return HNCCL_SYSTEM_ERROR;
		}
		c->nonce = offer->magic == HP_OFFER_MAGIC ? offer->nonce : 0;
		for (s = 0; s < k; s++) {
			err = harp_connect(d->ctx, (const struct harp_handle *)handle, &c->conns[s]);
			if (err) {
				conns_close(c->conns, s);
				comm_free(c);
				return hp_result(err);
			}
		}
		pthread_mutex_lock(&g.lock);
		c->stage_id = ++next_id;
		c->next_connecting = g.connecting;
		g.connecting = c;
		pthread_mutex_unlock(&g.lock);
		st->magic = HP_STAGE_MAGIC;
		st->id = c->stage_id;
	}
	err = connect_progress(c);
	if (err == -EAGAIN) {
		return HNCCL_SUCCESS; /* NCCL calls again with this handle */
	}
	connecting_take(c->stage_id, true);
	memset(st, 0, sizeof(*st));
	if (err) {
		conns_close(c->conns, c->nconns);
		comm_free(c);
		return hp_result(err);
	}
	if (c->nconns > 1) {
		c->peer_rsn = 1; /* the peer's receive 0 took the hello */
		comm_queues(c, queues, sizeof(queues));
		HP_INFO("send comm %p: %d stripes, on queues %s", (void *)c, c->nconns, queues);
	}
	*send_comm = c;
	return HNCCL_SUCCESS;
}

/* A listen comm lets go of what it accepted for the comm it has not handed out yet. */
static void accept_reset(struct hp_comm *l)
{
	int i;

	for (i = 0; i < l->narrived; i++) {
		harp_conn__close(l->arrived[i]); /* its hello receive goes with it */
		l->arrived[i] = NULL;
		l->hello_req[i] = NULL;
	}
	conns_close(l->conns, HP_STRIPES_MAX);
	l->narrived = l->nplaced = 0;
	l->first_arrival_ns = 0;
	l->up = 0;
}

/*
 * Arrival a of a striped comm: established, its hello received, and placed by the stripe it
 * names. 0 once placed, -EAGAIN before, else why it cannot be.
 */
static int accept_place(struct hp_comm *l, int a)
{
	struct harp_conn *conn = l->arrived[a];
	const struct hp_hello *h = &l->hello[a];
	void *buf = &l->hello[a];
	size_t cap = sizeof(l->hello[a]), got;
	uint32_t tag = HP_HELLO_TAG;
	int err, done;

	if (!(l->up & 1u << a)) {
		err = harp_conn__establish(conn);
		if (err) {
			return err;
		}
		l->up |= 1u << a;
	}
	if (!l->hello_req[a]) {
		err = harp_conn__irecv(conn, 1, &buf, &cap, &tag, NULL, &l->hello_req[a]);
		if (err) {
			return err;
		}
	}
	err = harp_req__test(l->hello_req[a], &done, &got);
	if (err || !done) {
		if (err) {
			l->hello_req[a] = NULL;
		}
		return err ? err : -EAGAIN;
	}
	l->hello_req[a] = NULL;
	if (got != sizeof(*h) || h->magic != HP_HELLO_MAGIC || h->nonce != l->nonce ||
	    h->stripes != l->stripes || h->stripe >= l->stripes || l->conns[h->stripe]) {
		HP_WARN("accept: a connection to this listener did not say which of its %d stripes "
			"it is (%zu bytes: magic %#x, stripe %u of %u, %s comm%s); the comm fails",
			l->stripes, got, h->magic, h->stripe, h->stripes,
			h->nonce == l->nonce ? "this" : "another",
			h->stripe < l->stripes && l->conns[h->stripe] ? ", a stripe taken already" :
									 "");
		return -EPROTO;
	}
	l->conns[h->stripe] = conn;
	l->arrived[a] = NULL;
	l->nplaced++;
	return 0;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * The stripes placed so far are still up, and the rest came within HARP_PEER_TIMEOUT_MS of the
 * first: 0, else the error the accept fails with (its one WARN says which stripe).
 */
static int accept_watch(struct hp_comm *l)
{
	uint64_t limit = (uint64_t)l->dev->info.peer_timeout_ms * 1000000ull;
	char missing[64] = "";
	size_t off = 0;
	int s, err;

	for (s = 0; s < l->stripes; s++) {
		if (!l->conns[s]) {
			continue;
		}
		err = harp_conn__establish(l->conns[s]);
		if (err && err != -EAGAIN) {
			HP_WARN("accept: stripe %d of %d failed before the others came (%s); "
				"the comm fails",
				s, l->stripes, strerror(-err));
			return err;
		}
	}
	if (!l->first_arrival_ns || mono_ns() - l->first_arrival_ns <= limit) {
		return 0;
	}
	for (s = 0; s < l->stripes && off < sizeof(missing); s++) {
		if (!l->conns[s]) {
			off += (size_t)snprintf(missing + off, sizeof(missing) - off, "%s%d",
						off ? "," : "", s);
		}
	}
	HP_WARN("accept: stripe(s) %s of %d not placed within HARP_PEER_TIMEOUT_MS=%d ms of the "
		"first connection (%d of its connections came, %d of them not yet saying which "
		"stripe they are); the comm fails",
		missing, l->stripes, l->dev->info.peer_timeout_ms, l->narrived,
		l->narrived - l->nplaced);
	return -ETIMEDOUT;
}

/* A striped comm: every stripe's connection accepted and placed, then handed out whole. */
static hnccl_result_t accept_striped(struct hp_comm *l, void **recv_comm)
{
	struct hp_comm *c;
	char queues[64];
	int a, err;

	while (l->narrived < l->stripes) {
		err = harp_listener__accept(l->listener, &l->arrived[l->narrived]);
		if (err == -EAGAIN) {
			break;
		}
		if (err) {
			return hp_result(err);
		}
		if (!l->narrived) {
			l->first_arrival_ns = mono_ns();
		}
		l->narrived++;
	}
	for (a = 0; a < l->narrived; a++) {
		if (!l->arrived[a]) {
			continue; /* placed */
		}
		err = accept_place(l, a);
		if (err && err != -EAGAIN) {
			if (err != -EPROTO) { /* accept_place said what was wrong with the hello */
				HP_WARN("accept: connection %d of the %d stripes failed before "
					"it said which stripe it is (%s); the comm fails",
					a, l->stripes, strerror(-err));
			}
			accept_reset(l);
			return hp_result(err);
		}
	}
	if (l->nplaced < l->stripes) {
		err = accept_watch(l);
		if (err) {
			accept_reset(l);
			return hp_result(err);
		}
		return HNCCL_SUCCESS;
	}
	c = comm_new(HP_RECV, l->dev, l->stripes);
	if (!c) {
		return HNCCL_SYSTEM_ERROR; /* the connections stay with the listener */
	}
	memcpy(c->conns, l->conns, sizeof(c->conns));
	memset(l->conns, 0, sizeof(l->conns));
	l->narrived = l->nplaced = 0;
	l->first_arrival_ns = 0;
	l->up = 0;
	comm_queues(c, queues, sizeof(queues));
	HP_INFO("recv comm %p: %d stripes, on queues %s", (void *)c, c->nconns, queues);
	*recv_comm = c;
	return HNCCL_SUCCESS;
}

static hnccl_result_t accept_in(struct hp_comm *l, void **recv_comm)
{
	struct harp_conn **conn = &l->conns[0];
	struct hp_comm *c;
	int err;

	if (l->stripes > 1) {
		return accept_striped(l, recv_comm);
	}
	if (!*conn) {
		err = harp_listener__accept(l->listener, conn);
		if (err == -EAGAIN) {
			return HNCCL_SUCCESS;
		}
		if (err) {
			return hp_result(err);
		}
	}
	err = harp_conn__establish(*conn);
	if (err == -EAGAIN) {
		return HNCCL_SUCCESS;
	}
	if (err) {
		harp_conn__close(*conn);
		*conn = NULL;
		return hp_result(err);
	}
	c = comm_new(HP_RECV, l->dev, 1);
	if (!c) {
		return HNCCL_SYSTEM_ERROR; /* the set-up connection stays with the listener */
	}
	c->conns[0] = *conn;
	*conn = NULL;
	*recv_comm = c;
	return HNCCL_SUCCESS;
}

hnccl_result_t hp_accept(void *listen_comm, void **recv_comm,
			 struct hnccl_net_device_handle **dev_handle)
{
	struct hp_comm *l = listen_comm;
	hnccl_result_t res;

	(void)dev_handle;
	*recv_comm = NULL;
	if (!comm_enter(l, HP_LISTEN, "accept")) {
		return HNCCL_INVALID_ARGUMENT;
	}
	res = accept_in(l, recv_comm);
	comm_leave(l);
	return res;
}

hnccl_result_t hp_close_listen(void *listen_comm)
{
	struct hp_comm *l = listen_comm;

	if (!l) {
		return HNCCL_SUCCESS;
	}
	if (!comm_close_begin(l, HP_LISTEN, "closeListen")) {
		return HNCCL_INVALID_ARGUMENT;
	}
	accept_reset(l); /* peers accepted but never handed to NCCL */
	harp_listener__close(l->listener);
	comm_free(l);
	return HNCCL_SUCCESS;
}

static hnccl_result_t close_conn_comm(struct hp_comm *c, enum hp_comm_kind kind,
				      const char *call)
{
	if (!c) {
		return HNCCL_SUCCESS;
	}
	if (!comm_close_begin(c, kind, call)) {
		return HNCCL_INVALID_ARGUMENT;
	}
	conns_close(c->conns, c->nconns);
	comm_free(c);
	return HNCCL_SUCCESS;
}

hnccl_result_t hp_close_send(void *send_comm)
{
	return close_conn_comm(send_comm, HP_SEND, "closeSend");
}

hnccl_result_t hp_close_recv(void *recv_comm)
{
	return close_conn_comm(recv_comm, HP_RECV, "closeRecv");
}

/* ---- memory ------------------------------------------------------------------------------------ */

/* harp's region for data+size of this type; GPU memory checked at both ends (cuda.c). */
static hnccl_result_t mr_reg_harp(struct hp_comm *c, void *data, size_t size, int type,
				  struct harp_mr **mr)
{
	char why[256];

	if (type == HNCCL_PTR_CUDA && c->dev->cuda) {
		if (hp_cuda_check(data, size, why, sizeof(why))) {
			HP_WARN("regMr: %s", why);
			return HNCCL_INVALID_ARGUMENT;
		}
		return hp_result(harp_mr__reg_device(c->dev->ctx, data, size, mr));
	}
	if (type != HNCCL_PTR_HOST) {
		HP_WARN("regMr: memory type %d is not host memory; harp takes %s (ptrSupport says "
			"so)",
			type, c->dev->cuda ? "host and GPU memory" : "host memory only");
		return HNCCL_INVALID_ARGUMENT;
	}
	if (c->dev->cuda && hp_cuda_check_host(data, size, why, sizeof(why))) {
		HP_WARN("regMr: %s", why);
		return HNCCL_INVALID_ARGUMENT;
	}
	return hp_result(harp_mr__reg(c->dev->ctx, data, size, mr));
}

static hnccl_result_t reg_mr_in(struct hp_comm *c, void *data, size_t size, int type,
				void **mhandle)
{
	struct hp_mr *m = calloc(1, sizeof(*m));
	hnccl_result_t res;

	if (!m) {
		return HNCCL_SYSTEM_ERROR;
	}
	res = mr_reg_harp(c, data, size, type, &m->mr);
	if (res != HNCCL_SUCCESS) {
		free(m);
		return res;
	}
	m->addr = data;
	m->len = size;
	if (!live_add(m, LIVE_MR)) {
		harp_mr__dereg(m->mr);
		free(m);
		return HNCCL_SYSTEM_ERROR;
	}
	/* inside an open comm, so harp's contexts stay until this is listed (g.comms > 0) */
	pthread_mutex_lock(&g.lock);
	m->next = g.mrs;
	if (g.mrs) {
		g.mrs->prev = m;
	}
	g.mrs = m;
	pthread_mutex_unlock(&g.lock);
	*mhandle = m;
	return HNCCL_SUCCESS;
}

hnccl_result_t hp_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	struct hp_comm *c = comm;
	hnccl_result_t res;

	*mhandle = NULL;
	if (!comm_enter(c, 0, "regMr")) {
		return HNCCL_INVALID_ARGUMENT;
	}
	res = reg_mr_in(c, data, size, type, mhandle);
	comm_leave(c);
	return res;
}

hnccl_result_t hp_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
				int fd, void **mhandle)
{
	(void)comm;
	(void)offset;
	*mhandle = NULL;
	HP_WARN("regMrDmaBuf (fd %d, %p+%zu, type %d): harp does not take DMA-BUF memory; its "
		"ptrSupport has no NCCL_PTR_DMABUF",
		fd, data, size, type);
	return HNCCL_INVALID_USAGE;
}

/*
 * The comm may be closed already, and harp's contexts too (after the last finalize): the region
 * belongs to the device's context, not to the comm, and went with the context if it went. Only
 * the handle is read, and only once the live set says it is one.
 */
hnccl_result_t hp_dereg_mr(void *comm, void *mhandle)
{
	struct hp_mr *m = mhandle;
	bool released = false, found;

	(void)comm;
	if (!m) {
		return HNCCL_SUCCESS;
	}
	/* under g.lock: harp's contexts cannot close (devices_destroy) between the lookup and
	 * harp_mr__dereg, and a second deregMr of m finds it gone */
	pthread_mutex_lock(&g.lock);
	found = live_del(m, LIVE_MR);
	if (found) {
		if (m->prev) {
			m->prev->next = m->next;
		} else {
			g.mrs = m->next;
		}
		if (m->next) {
			m->next->prev = m->prev;
		}
		released = !m->mr;
		harp_mr__dereg(m->mr);
	}
	pthread_mutex_unlock(&g.lock);
	if (!found) {
		HP_WARN("deregMr: %p is not a registered harp memory handle (deregistered already, "
			"or never one)",
			mhandle);
		return HNCCL_INVALID_ARGUMENT;
	}
	if (released) {
		HP_WARN("deregMr of %p (%p+%zu) after harp closed (the last finalize, or the last "
			"comm closed after it): harp released that memory then; nothing left to do",
			mhandle, m->addr, m->len);
	}
	free(m);
	return HNCCL_SUCCESS;
}

hnccl_result_t hp_get_device_mr(void *comm, void *mhandle, void **dptr_mhandle)
{
	(void)comm;
	(void)mhandle;
	*dptr_mhandle = NULL;
	return HNCCL_SUCCESS; /* host device: no device-side handle */
}

hnccl_result_t hp_irecv_consumed(void *recv_comm, int n, void *request)
{
	(void)recv_comm;
	(void)n;
	(void)request;
	return HNCCL_SUCCESS; /* only device-offloaded comms need it */
}

/* ---- data --------------------------------------------------------------------------------------- */

/* harp's region behind a memory handle NCCL passes, or NULL when it is none (or released). */
static struct harp_mr *mr_of(void *mhandle)
{
	return live_has(mhandle, LIVE_MR) ? ((struct hp_mr *)mhandle)->mr : NULL;
}

static struct hp_req *req_get(struct hp_comm *c)
{
	struct hp_req *r = c->free_reqs;

	if (r) {
		c->free_reqs = r->next_free;
	}
	return r;
}

static void req_put(struct hp_comm *c, struct hp_req *r)
{
	r->req = NULL;
	r->next_free = c->free_reqs;
	c->free_reqs = r;
}

/* A stripe of a striped comm failed: the comm fails as a whole, every request on it after. */
static hnccl_result_t comm_fail(struct hp_comm *c, int s, int err)
{
	if (!c->err) {
		c->err = err;
		HP_WARN("%s comm %p: stripe %d of %d failed (%s; harp's lines say why): the comm "
			"fails, its requests with it",
			kind_name(c->kind), (void *)c, s, c->nconns, strerror(-err));
	}
	return hp_result(err);
}

static struct hp_sreq *sreq_of(struct hp_req *r)
{
	struct hp_sreq *q = &r->comm->sreqs[r - r->comm->reqs];

	memset(q, 0, sizeof(*q));
	return q;
}

/*
 * A send on a striped comm: cut by the capacity of the peer's buffer of its tag (stripe.h), which
 * stripe 0's announcements say; a NULL request ("again") until they have.
 */
static hnccl_result_t isend_striped(struct hp_comm *c, void *data, size_t size, int tag,
				    struct harp_mr *mr, void **request)
{
	size_t caps[HP_MAX_RECVS];
	uint32_t tags[HP_MAX_RECVS];
	struct hp_sreq *q;
	struct hp_req *r;
	int nbufs, i, n, s, err;

	if (c->err) {
		return hp_result(c->err);
	}
	err = harp_conn__peer_recv(c->conns[0], c->peer_rsn, &nbufs, caps, tags);
	if (err == -EAGAIN) {
		return HNCCL_SUCCESS;
	}
	if (err) {
		return comm_fail(c, 0, err);
	}
	for (i = 0; i < nbufs; i++) {
		if (!(c->peer_taken & 1u << i) && tags[i] == (uint32_t)tag) {
			break;
		}
	}
	if (i == nbufs) {
		HP_WARN("isend with tag %d: the peer's receive %u has no buffer of that tag left (%d "
			"buffers); sends must match the peer's receives",
			tag, c->peer_rsn, nbufs);
		return HNCCL_INVALID_USAGE;
	}
	r = req_get(c);
	if (!r) {
		return HNCCL_SUCCESS;
	}
	q = sreq_of(r);
	n = hp_stripe_count(caps[i], c->nconns);
	for (s = 0; s < n; s++) {
		size_t len = hp_stripe_len(caps[i], n, s, size);
		char *at = len ? (char *)data + hp_stripe_off(caps[i], n, s) : data;

		err = harp_conn__isend(c->conns[s], at, len, (uint32_t)tag, mr, &q->sub[s]);
		if (err && s == 0) { /* nothing posted: as on a comm of one connection */
			req_put(c, r);
			return err == -EAGAIN ? HNCCL_SUCCESS : hp_result(err);
		}
		if (err) {
			req_put(c, r); /* what went out on earlier stripes goes with the comm */
			return comm_fail(c, s, err);
		}
	}
	q->nsub = (uint8_t)n;
	q->pending = (uint8_t)((1u << n) - 1);
	q->len = size;
	c->peer_taken |= 1u << i;
	if (c->peer_taken == (1u << nbufs) - 1) {
		c->peer_rsn++;
		c->peer_taken = 0;
	}
	r->req = q->sub[0];
	r->n = 1;
	*request = r;
	return HNCCL_SUCCESS;
}

static hnccl_result_t isend_in(struct hp_comm *c, void *data, size_t size, int tag,
			       void *mhandle, void **request)
{
	struct harp_mr *mr = NULL;
	struct hp_req *r;
	int err;

	if (mhandle) {
		mr = mr_of(mhandle);
		if (!mr) {
			HP_WARN("isend: %p is not a registered harp memory handle", mhandle);
			return HNCCL_INVALID_ARGUMENT;
		}
	}
	if (size > HP_MAX_MSG) {
		HP_WARN("isend of %zu bytes: larger than maxP2pBytes (%llu)", size, HP_MAX_MSG);
		return HNCCL_INVALID_ARGUMENT;
	}
	if (c->nconns > 1) {
		return isend_striped(c, data, size, tag, mr, request);
	}
	r = req_get(c);
	if (!r) {
		return HNCCL_SUCCESS; /* NCCL retries */
	}
	err = harp_conn__isend(c->conns[0], data, size, (uint32_t)tag, mr, &r->req);
	if (err) {
		req_put(c, r);
		return err == -EAGAIN ? HNCCL_SUCCESS : hp_result(err);
	}
	r->n = 1;
	*request = r;
	return HNCCL_SUCCESS;
}

hnccl_result_t hp_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			void **request)
{
	struct hp_comm *c = send_comm;
	hnccl_result_t res;

	*request = NULL;
	if (!comm_enter(c, HP_SEND, "isend")) {
		return HNCCL_INVALID_ARGUMENT;
	}
	res = isend_in(c, data, size, tag, mhandle, request);
	comm_leave(c);
	return res;
}

/* A receive on a striped comm: each stripe takes its piece of every buffer cut that far. */
static hnccl_result_t irecv_striped(struct hp_comm *c, int n, void **data, const size_t *sizes,
				    const uint32_t *tags, struct harp_mr **mrs, void **request)
{
	struct hp_req *r;
	struct hp_sreq *q;
	int s, i, err;

	if (c->err) {
		return hp_result(c->err);
	}
	r = req_get(c);
	if (!r) {
		return HNCCL_SUCCESS;
	}
	q = sreq_of(r);
	q->recv = true;
	memcpy(q->cap, sizes, (size_t)n * sizeof(*sizes));
	for (s = 0; s < c->nconns; s++) {
		void *b[HP_MAX_RECVS];
		size_t cap[HP_MAX_RECVS];
		uint32_t t[HP_MAX_RECVS];
		struct harp_mr *m[HP_MAX_RECVS];
		int nb = 0;

		for (i = 0; i < n; i++) {
			int k = hp_stripe_count(sizes[i], c->nconns);

			if (k <= s) {
				continue;
			}
			b[nb] = (char *)data[i] + hp_stripe_off(sizes[i], k, s);
			cap[nb] = hp_stripe_cap(sizes[i], k, s);
			t[nb] = tags[i];
			m[nb] = mrs[i];
			nb++;
		}
		if (!nb) {
			break; /* no buffer cut this far: nor further */
		}
		err = harp_conn__irecv(c->conns[s], nb, b, cap, t, m, &q->sub[s]);
		if (err && s == 0) { /* nothing posted: as on a comm of one connection */
			req_put(c, r);
			return err == -EAGAIN ? HNCCL_SUCCESS : hp_result(err);
		}
		if (err) {
			req_put(c, r); /* what earlier stripes took goes with the comm */
			return comm_fail(c, s, err);
		}
		q->nsub = (uint8_t)(s + 1);
	}
	q->pending = (uint8_t)((1u << q->nsub) - 1);
	r->req = q->sub[0];
	r->n = n;
	*request = r;
	return HNCCL_SUCCESS;
}

static hnccl_result_t irecv_in(struct hp_comm *c, int n, void **data, const size_t *sizes,
			       const int *tags, void **mhandles, void **request)
{
	struct harp_mr *mrs[HP_MAX_RECVS];
	uint32_t utags[HP_MAX_RECVS];
	struct hp_req *r;
	int err, i;

	if (n < 1 || n > HP_MAX_RECVS) {
		HP_WARN("irecv of %d buffers: harp takes 1 to %d (maxRecvs)", n, HP_MAX_RECVS);
		return HNCCL_INVALID_ARGUMENT;
	}
	for (i = 0; i < n; i++) {
		mrs[i] = mhandles && mhandles[i] ? mr_of(mhandles[i]) : NULL;
		if (mhandles && mhandles[i] && !mrs[i]) {
			HP_WARN("irecv: buffer %d's %p is not a registered harp memory handle", i,
				mhandles[i]);
			return HNCCL_INVALID_ARGUMENT;
		}
		utags[i] = (uint32_t)tags[i];
	}
	if (c->nconns > 1) {
		return irecv_striped(c, n, data, sizes, utags, mrs, request);
	}
	r = req_get(c);
	if (!r) {
		return HNCCL_SUCCESS;
	}
	err = harp_conn__irecv(c->conns[0], n, data, sizes, utags, mrs, &r->req);
	if (err) {
		req_put(c, r);
		return err == -EAGAIN ? HNCCL_SUCCESS : hp_result(err);
	}
	r->n = n;
	*request = r;
	return HNCCL_SUCCESS;
}

hnccl_result_t hp_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
			void **mhandles, void **request)
{
	struct hp_comm *c = recv_comm;
	hnccl_result_t res;

	*request = NULL; /* also replaces an "optional completion" preset */
	if (!comm_enter(c, HP_RECV, "irecv")) {
		return HNCCL_INVALID_ARGUMENT;
	}
	res = irecv_in(c, n, data, sizes, tags, mhandles, request);
	comm_leave(c);
	return res;
}

hnccl_result_t hp_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
			 void **request)
{
	(void)recv_comm;
	(void)n;
	(void)data;
	(void)sizes;
	(void)mhandles;
	/* nothing to flush: a receive into GPU memory completes only once its copies are done
	 * (the lane's stream synchronized), so its bytes are in GPU memory before test() says so */
	*request = NULL;
	return HNCCL_SUCCESS;
}

/*
 * A striped comm's request: done once every stripe's is. A receive's pieces must be those the
 * sender's rule cuts from the bytes that came (stripe.h): anything else is a peer cutting
 * differently, and fails the comm rather than leave a hole in the buffer.
 */
static hnccl_result_t test_striped(struct hp_req *r, int *done, int *sizes)
{
	struct hp_comm *c = r->comm;
	struct hp_sreq *q = &c->sreqs[r - c->reqs];
	size_t got[HP_MAX_RECVS], total;
	int s, i, j, k, d, err;

	if (c->err) {
		req_put(c, r);
		return hp_result(c->err);
	}
	for (s = 0; s < q->nsub; s++) {
		if (!(q->pending & 1u << s)) {
			continue;
		}
		err = harp_req__test(q->sub[s], &d, got);
		if (err) {
			req_put(c, r);
			return comm_fail(c, s, err);
		}
		if (!d) {
			continue;
		}
		q->pending &= (uint8_t)~(1u << s);
		for (i = 0, j = 0; q->recv && i < r->n; i++) {
			if (hp_stripe_count(q->cap[i], c->nconns) > s) {
				q->got[s][i] = (uint32_t)got[j++];
			}
		}
	}
	if (q->pending) {
		return HNCCL_SUCCESS;
	}
	for (i = 0; q->recv && i < r->n; i++) {
		k = hp_stripe_count(q->cap[i], c->nconns);
		for (s = 0, total = 0; s < k; s++) {
			total += q->got[s][i];
		}
		for (s = 0; s < k; s++) {
			if (q->got[s][i] != hp_stripe_len(q->cap[i], k, s, total)) {
				HP_WARN("recv comm %p: buffer %d (%zu bytes) got %u bytes on stripe %d "
					"where %zu in all put %zu there: the peer cuts messages "
					"differently",
					(void *)c, i, q->cap[i], q->got[s][i], s, total,
					hp_stripe_len(q->cap[i], k, s, total));
				req_put(c, r);
				return comm_fail(c, s, -EPROTO);
			}
		}
		if (sizes) {
			sizes[i] = (int)total;
		}
	}
	if (!q->recv && sizes) {
		sizes[0] = (int)q->len;
	}
	*done = 1;
	req_put(c, r);
	return HNCCL_SUCCESS;
}

static hnccl_result_t test_in(struct hp_req *r, int *done, int *sizes)
{
	size_t got[HP_MAX_RECVS];
	int err, i, n;

	if (r->comm->sreqs) {
		return test_striped(r, done, sizes);
	}
	err = harp_req__test(r->req, done, got);
	if (!err && !*done) {
		return HNCCL_SUCCESS;
	}
	/* done or failed: harp has released its request; ours goes back to its comm */
	n = r->n;
	req_put(r->comm, r);
	if (err) {
		return hp_result(err);
	}
	for (i = 0; sizes && i < n; i++) {
		sizes[i] = (int)got[i];
	}
	return HNCCL_SUCCESS;
}

hnccl_result_t hp_test(void *request, int *done, int *sizes)
{
	struct hp_req *r = req_live(request);
	hnccl_result_t res;

	*done = 0;
	if (!r) {
		HP_WARN("test: %p is not a pending harp request (completed already, its comm closed, "
			"or never one)",
			request);
		return HNCCL_INVALID_ARGUMENT;
	}
	if (!comm_enter(r->comm, 0, "test")) {
		return HNCCL_INVALID_ARGUMENT;
	}
	res = test_in(r, done, sizes);
	comm_leave(r->comm);
	return res;
}

hnccl_result_t hp_set_net_attr(void *ctx, const struct hnccl_net_attr *attr)
{
	/* each connection spreads over HARP_PATHS UDP port pairs whatever NCCL hints: the flow
	 * hints (maxFlowsPerPeer and the like) change nothing here; NCCL ignores the result */
	(void)ctx;
	(void)attr;
	return HNCCL_SUCCESS;
}
