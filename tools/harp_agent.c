// SPDX-License-Identifier: Apache-2.0
/*
 * harp-agent: the node agent (src/agent.h says the protocol). On a node harp-attach prepared, it
 * serves a Unix socket through which harp processes that may not call bpf() (pods under their
 * runtime's default seccomp profile) have their AF_XDP sockets entered in the pinned XSKMAP, and
 * read the program's counters and probe records. harp-attach run starts it.
 *
 *   harp-agent [--socket PATH] [--pin-root DIR] [--allow-uid UID]... [--max-clients N]
 *              [--max-per-uid N]
 *
 * Only processes of uid 0 and of each --allow-uid are served (SO_PEERCRED); the socket is made
 * mode 0660, or 0666 with --allow-uid so that those uids can connect at all. A process of
 * another uid gets one answer saying so, and is closed at once. A client must say HELLO within
 * 2 s; one uid holds at most --max-per-uid (64) connections from one pid namespace (a pod) and
 * all together --max-clients (256), a newcomer over either limit making room by dropping the
 * oldest client still silent. A process's queues are its own while its connection lasts:
 * another asking for one is refused with the holder named, and the holder's records go when its
 * connection closes. A client that reads its answers slowly holds up itself alone; one is only
 * dropped when its connection is gone, or for a bad message while it holds no queue. Nothing a
 * neighbour sends can hold the single serving thread for long: one message of each client a
 * round, a few of a client turned away, and descriptors clients pass released by a thread of
 * their own. SIGTERM or SIGINT end it, removing the socket. Prints one line per event on stderr
 * (those clients cause, 20 a second of each kind at most).
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <linux/if_xdp.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/xdp_diag.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agent.h"
#include "ctrlmsg.h"
#include "harp_shared.h"

#ifndef AF_XDP
#define AF_XDP 44
#endif
/* Linux 6.5 and 6.11 (uapi asm-generic/socket.h, linux/pidfd.h); Debian 12's headers are older */
#define AGENT_SO_PEERPIDFD 77
#define AGENT_PIDFD_GET_PID_NAMESPACE _IO(0xFF, 5)

#define MAX_IFACES 16

/*
 * A prepared interface as the agent opened it. The XSKMAP's id names the pins: an interface
 * prepared again (harp-attach down and up, or re-created) has new maps under the same name and
 * is a new iface. Held by reference, the table's while listed and each client's: one prepared
 * again leaves the table but lives on for the clients that said HELLO to it, whose LEAVEs (and
 * closes) still touch its maps alone, never another interface's.
 */
struct iface {
	char name[IF_NAMESIZE];
	int xsks, counters, config, probes, owners; /* pinned maps; probes/owners may be -1 */
	struct harp_xdp_config cfg;
	uint32_t xsks_id;
	int refs;
	bool stale; /* prepared again since: its maps steer nothing now */
};

struct client {
	int fd;
	pid_t pid; /* SO_PEERCRED, in the agent's pid namespace (0: not visible from it) */
	uid_t uid;
	uint64_t pidns;	   /* its pid namespace (inode; 0: unknown), what sets pods apart */
	uint64_t since_ms; /* accepted then (CLOCK_MONOTONIC) */
	struct iface *ifc; /* after HELLO; a reference */
	uint64_t queues;   /* bit q: it entered queue q */
	struct harp_queue_owner owner; /* the agent's record of it (owner_record) */
	/* an answer its socket had no room for (the client reads slowly): sent first, and its
	 * requests wait meanwhile, so a slow reader holds up itself alone and is never dropped */
	struct harp_agent_msg answer;
	size_t answer_len; /* its bytes: a message's, or an older version's fewer (answer_size) */
	bool answer_waits;
	unsigned bad_msgs; /* bad messages it sent while holding queues */
};

/* At most LOG_BURST lines a second of one kind that clients cause, the rest counted and said
 * later: a client (or a stranger, with --allow-uid) cannot flood the log. */
#define LOG_BURST 20
struct log_limit {
	uint64_t second;
	unsigned lines, held;
};

/* A client must say HELLO this soon after connecting, or it goes: idle ones must not fill the
 * agent's slots and keep harp processes out. */
#define AGENT_HELLO_MS 2000

static struct {
	const char *socket_path, *pin_root;
	uid_t allowed[16];
	int nallowed, max_clients, max_per_uid;
	struct iface *ifaces[MAX_IFACES];
	int nifaces;
	struct client *clients;
	int nclients;
	bool diag_said; /* said once that this kernel cannot tell where a socket is bound */
	struct log_limit log_refused, log_dropped, log_bad;
	int release_pipe; /* descriptors clients passed go here, closed by the releasing thread */
	pthread_t releaser; /* that thread, joined before the agent exits */
	volatile sig_atomic_t stop;
} A = { .socket_path = "/run/harp/agent.sock", .pin_root = "/sys/fs/bpf/harp",
	.max_clients = 256, .max_per_uid = 64, .release_pipe = -1 };

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	fputs("harp-agent: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* A line of a kind that clients cause: said if fewer than LOG_BURST of its kind were this
 * second, else counted, and the count said with the next one that is. */
static void say_limited(struct log_limit *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void say_limited(struct log_limit *l, const char *fmt, ...)
{
	uint64_t second = now_ms() / 1000;
	char line[512];
	va_list ap;

	if (second != l->second) {
		l->second = second;
		l->lines = 0;
	}
	if (l->lines++ >= LOG_BURST) {
		l->held++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (l->held) {
		say("%s (and %u lines like it held back, over %d a second)", line, l->held,
		    LOG_BURST);
		l->held = 0;
	} else {
		say("%s", line);
	}
}

static void on_signal(int sig)
{
	(void)sig;
	A.stop = 1;
}

static int usage(const char *what)
{
	if (what) {
		fprintf(stderr, "harp-agent: %s\n", what);
	}
	fprintf(stderr, "usage: harp-agent [--socket PATH] [--pin-root DIR] [--allow-uid UID]... "
			"[--max-clients N] [--max-per-uid N]\n");
	return 2;
}

/* A refusal: status and a line saying why, into the answer. */
static int refuse(struct harp_agent_msg *resp, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int refuse(struct harp_agent_msg *resp, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(resp->text, sizeof(resp->text), fmt, ap);
	va_end(ap);
	resp->status = err;
	return err;
}

static int open_pin(const char *dir, const char *name, bool optional)
{
	char path[PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd;

	if (n < 0 || (size_t)n >= sizeof(path)) {
		say("pin path %s/%s is longer than PATH_MAX", dir, name);
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = bpf_obj_get(path);
	if (fd < 0 && !optional) {
		say("cannot open %s: %s", path, strerror(errno));
	}
	return fd;
}

static void iface_put(struct iface *f)
{
	int *fds[] = { &f->xsks, &f->counters, &f->config, &f->probes, &f->owners };
	size_t i;

	if (--f->refs > 0) {
		return;
	}
	for (i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0) {
			close(*fds[i]);
		}
	}
	free(f);
}

/* The id of the map pinned at dir/name; 0 when there is none (or it cannot be read). */
static uint32_t pin_id(const char *dir, const char *name)
{
	struct bpf_map_info info = { 0 };
	__u32 len = sizeof(info);
	int fd = open_pin(dir, name, true);

	if (fd < 0) {
		return 0;
	}
	if (bpf_obj_get_info_by_fd(fd, &info, &len)) {
		info.id = 0;
	}
	close(fd);
	return info.id;
}

/* Opens the pinned maps of ifname, checked against the interface as it is now; NULL with the
 * refusal in resp. */
static struct iface *iface_open(const char *ifname, int ifindex, struct harp_agent_msg *resp)
{
	char dir[PATH_MAX];
	struct iface *f;
	__u32 key = 0;

	snprintf(dir, sizeof(dir), "%s/%s", A.pin_root, ifname);
	f = calloc(1, sizeof(*f));
	if (!f) {
		refuse(resp, -ENOMEM, "the agent is out of memory");
		return NULL;
	}
	f->refs = 1;
	snprintf(f->name, sizeof(f->name), "%s", ifname);
	f->xsks = open_pin(dir, "xsks_map", false);
	f->counters = open_pin(dir, "counters", false);
	f->config = open_pin(dir, "harp_config", false);
	f->probes = open_pin(dir, "probe_queues", true);
	f->owners = open_pin(dir, "queue_owners", true);
	f->xsks_id = pin_id(dir, "xsks_map");
	if (f->xsks < 0 || f->counters < 0 || f->config < 0 || !f->xsks_id ||
	    bpf_map_lookup_elem(f->config, &key, &f->cfg)) {
		iface_put(f);
		refuse(resp, -ENODEV,
		       "%s is not prepared (no complete pin directory %s): run `harp-attach up %s` "
		       "on the node",
		       ifname, dir, ifname);
		return NULL;
	}
	if ((int)f->cfg.ifindex != ifindex) {
		refuse(resp, -ESTALE,
		       "the pins at %s were made for interface index %u, but %s is index %d now: run "
		       "`harp-attach up %s` again",
		       dir, f->cfg.ifindex, ifname, ifindex, ifname);
		iface_put(f);
		return NULL;
	}
	return f;
}

/*
 * The pinned maps of ifname, for a client's HELLO: a new reference to the iface the table has
 * for it while its pins are the same maps and its index the same interface; otherwise that one
 * leaves the table (its clients keep it) and the pins are opened anew.
 */
static struct iface *iface_get(const char *ifname, struct harp_agent_msg *resp)
{
	char dir[PATH_MAX];
	struct iface *f;
	__u32 key = 0;
	int i, ifindex;

	ifindex = (int)if_nametoindex(ifname);
	if (!ifindex) {
		refuse(resp, -ENODEV, "no interface %s in the agent's network namespace", ifname);
		return NULL;
	}
	snprintf(dir, sizeof(dir), "%s/%s", A.pin_root, ifname);
	for (i = 0; i < A.nifaces; i++) {
		f = A.ifaces[i];
		if (strcmp(f->name, ifname)) {
			continue;
		}
		if (!bpf_map_lookup_elem(f->config, &key, &f->cfg) &&
		    (int)f->cfg.ifindex == ifindex && pin_id(dir, "xsks_map") == f->xsks_id) {
			f->refs++;
			return f;
		}
		say("%s was prepared again (its pins are other maps now): new clients get the new "
		    "ones, and its %d client(s) keep theirs", f->name, f->refs - 1);
		f->stale = true;
		A.ifaces[i] = A.ifaces[--A.nifaces];
		iface_put(f);
		break;
	}
	if (A.nifaces == MAX_IFACES) {
		refuse(resp, -ENOSPC, "the agent serves %d interfaces at most", MAX_IFACES);
		return NULL;
	}
	f = iface_open(ifname, ifindex, resp);
	if (!f) {
		return NULL;
	}
	A.ifaces[A.nifaces++] = f;
	f->refs++;
	return f;
}

static void xdp_mode_of(struct iface *f, struct harp_agent_msg *resp)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);

	resp->xdp_mode = HARP_AGENT_XDP_NATIVE;
	if (!bpf_xdp_query((int)f->cfg.ifindex, 0, &q) && q.skb_prog_id == f->cfg.attach_id) {
		resp->xdp_mode = HARP_AGENT_XDP_SKB;
	}
}

static struct client *holder_of(const struct iface *f, int queue, const struct client *but)
{
	int i;

	for (i = 0; i < A.nclients; i++) {
		struct client *c = &A.clients[i];

		if (c != but && c->ifc == f && (c->queues >> queue & 1)) {
			return c;
		}
	}
	return NULL;
}

/*
 * Forgets queue of c: its holder record, and its socket if still in the map. Where the holders'
 * map says someone else holds the queue now (c's socket closed, and another process bound the
 * queue and entered its own), nothing of theirs is touched.
 */
static void leave(struct client *c, int queue)
{
	struct harp_queue_owner o, none = { 0 };
	__u32 key = (__u32)queue;

	c->queues &= ~(1ull << queue);
	if (c->ifc->owners >= 0 && !bpf_map_lookup_elem(c->ifc->owners, &key, &o)) {
		if (o.pid != c->owner.pid || o.pidns != c->owner.pidns ||
		    o.since_ns != c->owner.since_ns) {
			return; /* not the entry this client wrote */
		}
		(void)bpf_map_update_elem(c->ifc->owners, &key, &none, 0);
	}
	(void)bpf_map_delete_elem(c->ifc->xsks, &key); /* gone already if its socket closed */
}

/*
 * Where the AF_XDP socket fd is bound, as the kernel says (sock_diag's XDP_SHOW_INFO, looked up
 * by the socket's inode among this network namespace's AF_XDP sockets): 0 with *ifindex and
 * *queue; -ENOENT when it is not bound (or not found); -EOPNOTSUPP when the kernel has no
 * sock_diag for AF_XDP (CONFIG_XDP_SOCKETS_DIAG unset, or xsk_diag not loaded).
 */
static int xsk_binding(int fd, uint32_t *ifindex, uint32_t *queue)
{
	struct {
		struct nlmsghdr nlh;
		struct xdp_diag_req req;
	} ask = {
		.nlh = { .nlmsg_len = sizeof(ask), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
			 .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP },
		.req = { .sdiag_family = AF_XDP, .xdiag_show = XDP_SHOW_INFO },
	};
	union {
		struct nlmsghdr h;
		char bytes[16384];
	} buf;
	struct stat st;
	int nl, err = -ENOENT;
	bool done = false;

	if (fstat(fd, &st)) {
		return -errno;
	}
	nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (nl < 0) {
		return -errno;
	}
	if (send(nl, &ask, sizeof(ask), 0) != (ssize_t)sizeof(ask)) {
		err = -errno;
		done = true;
	}
	while (!done) {
		ssize_t n = recv(nl, &buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		if (n <= 0) {
			err = n ? -errno : -EIO;
			break;
		}
		for (h = &buf.h; (size_t)n >= sizeof(*h) && h->nlmsg_len >= sizeof(*h) &&
				 h->nlmsg_len <= (size_t)n;
		     n -= (ssize_t)NLMSG_ALIGN(h->nlmsg_len) < n ? (ssize_t)NLMSG_ALIGN(h->nlmsg_len) : n,
		     h = (struct nlmsghdr *)((char *)h + NLMSG_ALIGN(h->nlmsg_len))) {
			const struct xdp_diag_msg *m = NLMSG_DATA(h);
			const struct nlattr *a;
			size_t left;

			if (h->nlmsg_type == NLMSG_DONE) {
				done = true;
				break;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);

				/* ENOENT: no sock_diag handler for AF_XDP (CONFIG_XDP_SOCKETS_DIAG,
				 * the xsk_diag module) */
				err = e->error == -ENOENT ? -EOPNOTSUPP : e->error ? e->error : -EIO;
				done = true;
				break;
			}
			if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*m)) || m->xdiag_ino != st.st_ino) {
				continue;
			}
			a = (const struct nlattr *)((const char *)m + NLMSG_ALIGN(sizeof(*m)));
			left = h->nlmsg_len - NLMSG_LENGTH(NLMSG_ALIGN(sizeof(*m)));
			while (left >= sizeof(*a) && a->nla_len >= sizeof(*a) && a->nla_len <= left) {
				const struct xdp_diag_info *info = (const void *)(a + 1);
				size_t step = ((size_t)a->nla_len + NLA_ALIGNTO - 1) & ~(size_t)(NLA_ALIGNTO - 1);

				if (a->nla_type == XDP_DIAG_INFO &&
				    a->nla_len >= NLA_HDRLEN + sizeof(*info) && info->ifindex) {
					*ifindex = info->ifindex;
					*queue = info->queue_id;
					err = 0;
				}
				left -= step < left ? step : left;
				a = (const struct nlattr *)((const char *)a + step);
			}
		}
	}
	close(nl);
	return err;
}

/*
 * The holder record of c, as the agent knows it rather than as c says: where c is visible from
 * here (SO_PEERCRED gave its pid), its pid in its own pid namespace (the last NSpid), that
 * namespace and its name, read from /proc; the time is the agent's. Only a client the agent
 * cannot see (another pod's pid namespace) is taken at its word for pid, namespace and name.
 */
static void owner_record(const struct client *c, const struct harp_agent_msg *req,
			 struct harp_queue_owner *o)
{
	char path[64], line[256];
	struct timespec now;
	struct stat st;
	FILE *f;

	*o = req->owner;
	o->comm[sizeof(o->comm) - 1] = '\0';
	clock_gettime(CLOCK_REALTIME, &now);
	o->since_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	if (c->pid <= 0) {
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)c->pid);
	o->pidns = stat(path, &st) ? 0 : (uint32_t)st.st_ino;
	o->pid = (uint32_t)c->pid;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)c->pid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "NSpid:", 6)) {
			char *last = strrchr(line, '\t');

			o->pid = (uint32_t)strtoul(last ? last + 1 : line + 6, NULL, 10);
			break;
		}
	}
	if (f) {
		fclose(f);
	}
	memset(o->comm, 0, sizeof(o->comm));
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)c->pid);
	f = fopen(path, "re");
	if (f && fgets(o->comm, sizeof(o->comm), f)) {
		o->comm[strcspn(o->comm, "\n")] = '\0';
	}
	if (f) {
		fclose(f);
	}
}

/*
 * ENTER of key found another live socket in the XSKMAP entry: refused, naming the holder the
 * holders' map records (a process that bound the queue through the pins, or one whose record
 * outlived it while something else holds the queue now).
 */
static int refuse_held(const struct client *c, __u32 key, struct harp_agent_msg *resp)
{
	struct harp_queue_owner o = { 0 };
	struct stat st;
	bool here;

	if (c->ifc->owners < 0 || bpf_map_lookup_elem(c->ifc->owners, &key, &o) || !o.pid) {
		return refuse(resp, -EBUSY, "queue %u of %s holds a live AF_XDP socket of a "
			      "process harp has no record of", key, c->ifc->name);
	}
	o.comm[sizeof(o.comm) - 1] = '\0';
	here = !stat("/proc/self/ns/pid", &st) && (uint32_t)st.st_ino == o.pidns;
	return refuse(resp, -EBUSY, "queue %u of %s is held by pid %u (%s)%s, bound through the "
		      "pinned maps: its socket is live in the XSKMAP", key, c->ifc->name, o.pid,
		      o.comm, here ? "" : " of another pid namespace");
}

static int op_enter(struct client *c, const struct harp_agent_msg *req, int fd,
		    struct harp_agent_msg *resp)
{
	__u32 key = req->queue;
	uint32_t bound_if = 0, bound_q = 0;
	struct client *other;
	int domain = 0, err;
	socklen_t len = sizeof(domain);

	if (fd < 0) {
		return refuse(resp, -EBADF, "ENTER carries no socket");
	}
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) || domain != AF_XDP) {
		return refuse(resp, -ENOTSOCK, "ENTER's descriptor is not an AF_XDP socket");
	}
	if (req->queue >= HARP_XDP_MAX_QUEUES) {
		return refuse(resp, -ERANGE, "queue %u is beyond the XSKMAP's %d entries", req->queue,
			      HARP_XDP_MAX_QUEUES);
	}
	if (c->ifc->stale) {
		return refuse(resp, -ESTALE, "%s was prepared again after this process said HELLO: "
			      "the maps it said HELLO to steer nothing now; connect to the agent "
			      "again",
			      c->ifc->name);
	}
	/* The socket must be bound where its key sends packets: one bound elsewhere (or not at
	 * all) would take the traffic of a queue another process holds through the pins. */
	err = xsk_binding(fd, &bound_if, &bound_q);
	if (err == -ENOENT) {
		return refuse(resp, -EINVAL, "ENTER's AF_XDP socket is not bound to a queue");
	}
	if (err == -EOPNOTSUPP) {
		/* the kernel cannot say; the XSKMAP itself still says whether the entry holds
		 * another live socket (below) */
		if (!A.diag_said) {
			say("this kernel has no sock_diag for AF_XDP (xsk_diag): where an ENTERed socket "
			    "is bound goes unchecked; a queue whose entry holds another live "
			    "socket is refused");
			A.diag_said = true;
		}
	} else if (err) {
		return refuse(resp, err, "the kernel does not say where ENTER's socket is bound "
			      "(sock_diag for AF_XDP: %s)", strerror(-err));
	} else if (bound_if != c->ifc->cfg.ifindex || bound_q != req->queue) {
		return refuse(resp, -EINVAL, "ENTER's socket is bound to queue %u of interface "
			      "index %u, not to queue %u of %s (index %u)",
			      bound_q, bound_if, req->queue, c->ifc->name, c->ifc->cfg.ifindex);
	}
	other = holder_of(c->ifc, (int)req->queue, c);
	if (other) {
		return refuse(resp, -EBUSY, "queue %u of %s is held by pid %u (%.16s) of this node",
			      req->queue, c->ifc->name, other->owner.pid, other->owner.comm);
	}
	/*
	 * BPF_NOEXIST: the kernel will not replace another socket in the entry, and takes the same
	 * socket again as a success (a holder entering again after the agent restarted). Closed
	 * sockets leave the map by themselves, so an entry is taken exactly while its holder's
	 * socket lives, whatever pid namespace the holder runs in: nothing a client says, and
	 * nothing a pid can fake, decides it.
	 */
	if (bpf_map_update_elem(c->ifc->xsks, &key, &fd, BPF_NOEXIST)) {
		if (errno == EEXIST) {
			return refuse_held(c, key, resp);
		}
		return refuse(resp, -errno, "entering the socket of %s queue %u failed: %s",
			      c->ifc->name, req->queue, strerror(errno));
	}
	owner_record(c, req, &c->owner);
	if (c->ifc->owners >= 0) {
		(void)bpf_map_update_elem(c->ifc->owners, &key, &c->owner, 0);
	}
	c->queues |= 1ull << req->queue;
	say("pid %d (uid %u, %s): %s queue %u entered", c->pid, c->uid, c->owner.comm,
	    c->ifc->name, req->queue);
	return 0;
}

static int op_counters(struct client *c, struct harp_agent_msg *resp)
{
	int ncpus = libbpf_num_possible_cpus(), cpu;
	uint64_t vals[512];
	__u32 key;

	if (ncpus <= 0 || ncpus > (int)(sizeof(vals) / sizeof(vals[0]))) {
		return refuse(resp, -EINVAL, "cannot size the per-CPU counters (%d CPUs)", ncpus);
	}
	for (key = 0; key < HARP_XDP_COUNTER_MAX; key++) {
		if (bpf_map_lookup_elem(c->ifc->counters, &key, vals)) {
			continue; /* a program older than the counter */
		}
		for (cpu = 0; cpu < ncpus; cpu++) {
			resp->value[key] += vals[cpu];
		}
	}
	return 0;
}

/* ---- descriptors clients pass ---------------------------------------------------------------- */

/*
 * Closing a descriptor a client passed can block: a TCP socket with SO_LINGER and unsent data
 * waits out its linger time in close(), if ours is the last reference. So whatever a client
 * passes is given up off the serving thread: the releasing thread turns lingering off (a
 * socket's close then returns at once) and closes it. Should that thread fall a pipe's worth
 * behind, the serving thread does the same itself.
 */
static void linger_off_close(int fd)
{
	struct linger off = { 0 };

	(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &off, sizeof(off)); /* ENOTSOCK: not one */
	close(fd);
}

static void *releaser(void *arg)
{
	int from = (int)(intptr_t)arg, fd;

	while (read(from, &fd, sizeof(fd)) == (ssize_t)sizeof(fd)) {
		linger_off_close(fd);
	}
	close(from);
	return NULL;
}

static void release_fd(int fd)
{
	if (fd >= 0 &&
	    (A.release_pipe < 0 || write(A.release_pipe, &fd, sizeof(fd)) != sizeof(fd))) {
		linger_off_close(fd);
	}
}

/* The releasing thread and its pipe (the write end non-blocking, so a stuck thread costs the
 * serving thread nothing but doing the work itself). */
static int releaser_start(void)
{
	sigset_t all, old;
	pthread_t t;
	int p[2], err;

	if (pipe2(p, O_CLOEXEC)) {
		return -errno;
	}
	(void)fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
	(void)fcntl(p[1], F_SETFL, O_NONBLOCK);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old); /* signals are the serving thread's */
	err = pthread_create(&t, NULL, releaser, (void *)(intptr_t)p[0]);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		close(p[0]);
		close(p[1]);
		return -err;
	}
	A.releaser = t;
	A.release_pipe = p[1];
	return 0;
}

/* The releasing thread ends once it has closed what is queued (the pipe's end of file) and is
 * joined: no thread of ours is left running when the agent exits. */
static void releaser_stop(void)
{
	if (A.release_pipe < 0) {
		return;
	}
	close(A.release_pipe);
	A.release_pipe = -1;
	pthread_join(A.releaser, NULL);
}

/* SCM_MAX_FD: the most one message carries. Room for them all, so that the kernel never drops
 * the ones that did not fit, closing them in this thread. */
#define PASSED_MAX 253

/*
 * One message from a client's socket into m, *len its size (0: the other end closed). Of the
 * descriptors that came with it, one is left in *passed where passed is not NULL; every other
 * is released. More than that one, or a message longer than m: -EBADMSG. 0 or -errno.
 */
static int take_msg(int fd, struct harp_agent_msg *m, size_t *len, int *passed)
{
	union {
		struct cmsghdr align;
		char bytes[CMSG_SPACE(PASSED_MAX * sizeof(int))];
	} cbuf;
	struct iovec iov = { .iov_base = m, .iov_len = sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.bytes,
			     .msg_controllen = sizeof(cbuf.bytes) };
	struct cmsghdr *cm;
	int nfds = 0, one = -1, i, k, got;
	ssize_t n;

	*len = 0;
	if (passed) {
		*passed = -1;
	}
	n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0) {
		return -errno;
	}
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) {
			continue;
		}
		k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (i = 0; i < k; i++) {
			memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (!nfds++ && passed) {
				one = got;
			} else {
				release_fd(got);
			}
		}
	}
	if (nfds > 1 || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		release_fd(one);
		return -EBADMSG;
	}
	if (passed) {
		*passed = one;
	}
	*len = (size_t)n;
	return 0;
}

/*
 * One request of c, its answer into resp; false when the op is not answered (FORGET). The
 * descriptor that came with it is released here (the XSKMAP keeps no reference of ours: a
 * socket leaves the map when its owner closes it).
 */
static bool serve(struct client *c, const struct harp_agent_msg *req, int fd,
		  struct harp_agent_msg *resp)
{
	struct harp_xdp_probe_key pk = { .token = htobe64(req->token),
					 .conn_id = htonl(req->conn_id) };
	__u32 key = req->queue;
	bool answer = true;

	if (req->op != HARP_AGENT_HELLO && !c->ifc) {
		refuse(resp, -EPROTO, "op %u before HELLO", req->op);
		goto out;
	}
	if (req->op != HARP_AGENT_ENTER && fd >= 0) {
		refuse(resp, -EBADMSG, "op %u carries a descriptor", req->op);
		goto out;
	}
	switch (req->op) {
	case HARP_AGENT_HELLO:
		if (c->ifc) {
			refuse(resp, -EALREADY, "HELLO twice");
			break;
		}
		c->ifc = iface_get(req->ifname, resp);
		if (c->ifc) {
			resp->port_lo = c->ifc->cfg.port_lo;
			resp->port_hi = c->ifc->cfg.port_hi;
			resp->attach_id = c->ifc->cfg.attach_id;
			xdp_mode_of(c->ifc, resp);
			say("pid %d (uid %u): serving %s", c->pid, c->uid, c->ifc->name);
		}
		break;
	case HARP_AGENT_ENTER:
		op_enter(c, req, fd, resp);
		break;
	case HARP_AGENT_LEAVE:
		if (req->queue < HARP_XDP_MAX_QUEUES && (c->queues >> req->queue & 1)) {
			leave(c, (int)req->queue);
		}
		break;
	case HARP_AGENT_COUNTERS:
		op_counters(c, resp);
		break;
	case HARP_AGENT_PROBE:
		if (c->ifc->probes >= 0) {
			(void)bpf_map_lookup_elem(c->ifc->probes, &pk, &resp->value[0]);
		}
		break;
	case HARP_AGENT_FORGET:
		if (c->ifc->probes >= 0) {
			(void)bpf_map_delete_elem(c->ifc->probes, &pk);
		}
		answer = false; /* posted without waiting: an answer would only pile up unread */
		break;
	case HARP_AGENT_OWNER:
		if (req->queue < HARP_XDP_MAX_QUEUES && c->ifc->owners >= 0) {
			(void)bpf_map_lookup_elem(c->ifc->owners, &key, &resp->owner);
		}
		break;
	}
out:
	release_fd(fd);
	return answer;
}

/* The queues c holds, as a list ("0,3"), into buf. */
static const char *queue_list(const struct client *c, char *buf, size_t len)
{
	size_t n = 0;
	int q;

	buf[0] = '\0';
	for (q = 0; q < HARP_XDP_MAX_QUEUES && n < len; q++) {
		if (c->queues >> q & 1) {
			n += (size_t)snprintf(buf + n, len - n, "%s%d", n ? "," : "", q);
		}
	}
	return buf;
}

/*
 * Client i goes: its records, and the entries it wrote in the XSKMAP, with it. Only a client
 * whose connection is gone, or one that holds no queue, is ever dropped; a client that held
 * queues is said unlimited, with the reason and the queues.
 */
static void drop_client(int i, const char *why)
{
	struct client *c = &A.clients[i];
	char held[200];
	int q;

	queue_list(c, held, sizeof(held));
	for (q = 0; q < HARP_XDP_MAX_QUEUES; q++) {
		if (c->queues >> q & 1) {
			leave(c, q);
		}
	}
	if (why && held[0]) {
		say("pid %d (uid %u): %s; it held queue(s) %s of %s, whose records and entries are "
		    "gone", c->pid, c->uid, why, held, c->ifc->name);
	} else if (why) {
		say_limited(&A.log_dropped, "pid %d (uid %u): %s; its records are gone", c->pid,
			    c->uid, why);
	}
	if (c->ifc) {
		iface_put(c->ifc);
	}
	close(c->fd);
	A.clients[i] = A.clients[--A.nclients];
}

/*
 * A newcomer turned away: its answer (to the HELLO it is about to send, which reads it even
 * after the agent has closed the connection) and the close, taking no slot.
 */
static void turn_away(int fd, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void turn_away(int fd, int err, const char *fmt, ...)
{
	struct harp_agent_msg resp;
	size_t got;
	va_list ap;
	int i;

	agent_msg_init(&resp, HARP_AGENT_HELLO);
	resp.status = err;
	va_start(ap, fmt);
	vsnprintf(resp.text, sizeof(resp.text), fmt, ap);
	va_end(ap);
	(void)agent_send(fd, &resp, -1);
	/* what it sent already is read and dropped: closed with it unread, the socket would
	 * reset the client's, which then reports that before it reads the answer. A few
	 * messages at most: one that keeps writing must not keep the agent here. */
	for (i = 0; i < 4 && !take_msg(fd, &resp, &got, NULL) && got; i++) {
	}
	close(fd);
}

/* The oldest client (of uid and pid namespace pidns, unless uid is -1) that has not said HELLO
 * yet; -1 if none. */
static int oldest_silent(long long uid, uint64_t pidns)
{
	int i, best = -1;

	for (i = 0; i < A.nclients; i++) {
		const struct client *c = &A.clients[i];

		if (!c->ifc && (uid < 0 || (c->uid == (uid_t)uid && c->pidns == pidns)) &&
		    (best < 0 || c->since_ms < A.clients[best].since_ms)) {
			best = i;
		}
	}
	return best;
}

/* The initial pid namespace's inode (PROC_PID_INIT_INO, include/linux/proc_ns.h). */
#define AGENT_PID_INIT_INO 0xEFFFFFFCu

/*
 * How the agent learns a client's pid namespace, which keys --max-per-uid (pods share uids,
 * each has its own pid namespace): through the peer's pidfd (SO_PEERPIDFD, Linux 6.5, and
 * PIDFD_GET_PID_NAMESPACE, 6.11), or, on older kernels, through /proc of the peer, which shows
 * every process only to an agent in the host's pid namespace.
 */
static enum { PIDNS_PIDFD, PIDNS_PROC } pidns_via;

/* Whether this kernel opens a pidfd's pid namespace; a test build can say it does not. */
static bool pidns_ioctl_works(void)
{
	int pidfd, ns;

#ifdef HARP_FAULT_INJECTION
	if (getenv("HARP_AGENT_TEST_NO_PIDNS_IOCTL")) {
		return false; /* the branch kernels before 6.11 take */
	}
#endif
	pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (pidfd < 0) {
		return false;
	}
	ns = ioctl(pidfd, AGENT_PIDFD_GET_PID_NAMESPACE, 0);
	close(pidfd);
	if (ns < 0) {
		return false;
	}
	close(ns);
	return true;
}

/*
 * Picks pidns_via; -1 when the agent could not tell one pod from another (so --max-per-uid
 * would put every pod of a uid in one budget), having said what the kernel lacks.
 */
static int pidns_choose(void)
{
	struct stat st;

	if (pidns_ioctl_works()) {
		pidns_via = PIDNS_PIDFD;
		return 0;
	}
	if (!stat("/proc/self/ns/pid", &st) && st.st_ino == AGENT_PID_INIT_INO) {
		pidns_via = PIDNS_PROC;
		say("this kernel cannot name a client's pid namespace through its pidfd "
		    "(PIDFD_GET_PID_NAMESPACE, Linux 6.11): reading it from /proc, which shows "
		    "every process to this agent in the host's pid namespace");
		return 0;
	}
	say("cannot tell one pod's clients from another's: this kernel cannot name a client's "
	    "pid namespace through its pidfd (PIDFD_GET_PID_NAMESPACE, Linux 6.11), and this agent "
	    "runs in a pid namespace of its own, whose /proc does not show other pods' processes; "
	    "so --max-per-uid would hold every pod of a uid to one budget. Run the agent in the "
	    "host's pid namespace (the chart does: hostPID) or on Linux 6.11 or later");
	return -1;
}

/*
 * The pid namespace of the peer of fd, as the kernel names it (its inode), whether or not the
 * peer is visible from the agent's own pid namespace (pidns_via); 0 where nothing says.
 */
static uint64_t peer_pidns(int fd, pid_t pid)
{
	char path[64];
	struct stat st;
	socklen_t len = sizeof(int);
	int pidfd = -1, ns;
	uint64_t ino = 0;

	if (pidns_via == PIDNS_PIDFD &&
	    !getsockopt(fd, SOL_SOCKET, AGENT_SO_PEERPIDFD, &pidfd, &len) && pidfd >= 0) {
		ns = ioctl(pidfd, AGENT_PIDFD_GET_PID_NAMESPACE, 0);
		if (ns >= 0) {
			if (!fstat(ns, &st)) {
				ino = (uint64_t)st.st_ino;
			}
			close(ns);
		}
		close(pidfd);
	}
	if (!ino && pid > 0) {
		snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
		if (!stat(path, &st)) {
			ino = (uint64_t)st.st_ino;
		}
	}
	return ino;
}

/*
 * A new connection. A uid not served is answered at once and closed. A uid at --max-per-uid
 * within one pid namespace (pods often share uid 0; each has its own pid namespace), or an
 * agent at --max-clients, makes room by dropping the oldest client of theirs that has not said
 * HELLO (of that uid and namespace, or of any); where every one has, the newcomer is turned
 * away, told why. False when nothing waited.
 */
static bool accept_client(int lfd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	uint64_t pidns;
	int fd, i, mine = 0, old;
	bool ok = false;

	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0) {
		return false;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len)) {
		say_limited(&A.log_refused, "a connection without credentials (%s): closed",
			    strerror(errno));
		close(fd);
		return true;
	}
	for (i = 0; i < A.nallowed; i++) {
		ok |= cred.uid == A.allowed[i];
	}
	if (!ok) {
		say_limited(&A.log_refused, "pid %d (uid %u): refused (uid not allowed, "
			    "--allow-uid)", cred.pid, cred.uid);
		turn_away(fd, -EACCES, "uid %u is not served by this node's agent, which serves root "
			  "and each --allow-uid (the chart's agent.allowUids)", cred.uid);
		return true;
	}
	pidns = peer_pidns(fd, cred.pid);
	for (i = 0; i < A.nclients; i++) {
		mine += A.clients[i].uid == cred.uid && A.clients[i].pidns == pidns;
	}
	if (mine >= A.max_per_uid) {
		old = oldest_silent((long long)cred.uid, pidns);
		if (old < 0) {
			say_limited(&A.log_refused, "pid %d (uid %u): refused (uid %u has %d "
				    "clients in its pid namespace, --max-per-uid)", cred.pid,
				    cred.uid, cred.uid, mine);
			turn_away(fd, -EUSERS, "uid %u has %d connections to this node's agent "
				  "from its pid namespace, the most one uid may in one "
				  "(harp-agent --max-per-uid)", cred.uid, mine);
			return true;
		}
		drop_client(old, "made way for a newer client of its uid before saying HELLO");
	}
	if (A.nclients == A.max_clients) {
		old = oldest_silent(-1, 0);
		if (old < 0) {
			say_limited(&A.log_refused, "pid %d (uid %u): refused (%d clients, "
				    "--max-clients)", cred.pid, cred.uid, A.nclients);
			turn_away(fd, -EUSERS, "this node's agent serves %d processes already, its most "
				  "(harp-agent --max-clients)", A.nclients);
			return true;
		}
		drop_client(old, "made way for a newer client before saying HELLO");
	}
	A.clients[A.nclients++] = (struct client){ .fd = fd, .pid = cred.pid, .uid = cred.uid,
						   .pidns = pidns, .since_ms = now_ms() };
	return true;
}

/* Clients that have said nothing for AGENT_HELLO_MS go. */
static void drop_silent(void)
{
	uint64_t now = now_ms();
	int i;

	for (i = A.nclients - 1; i >= 0; i--) {
		if (!A.clients[i].ifc && now - A.clients[i].since_ms > AGENT_HELLO_MS) {
			drop_client(i, "said no HELLO within 2 s");
		}
	}
}

/*
 * The answer resp to client i, or held until its socket has room: a client that reads its
 * answers slowly is back-pressure, not a failure. False when the client went (dropped).
 */
static bool answer(int i, const struct harp_agent_msg *resp, size_t len)
{
	struct client *c = &A.clients[i];
	int err = agent_send_bytes(c->fd, resp, len, -1);

	if (err == -EAGAIN || err == -ENOBUFS) {
		c->answer = *resp;
		c->answer_len = len;
		c->answer_waits = true;
		return true;
	}
	c->answer_waits = false;
	if (err) {
		drop_client(i, err == -EPIPE || err == -ECONNRESET ? "closed its connection" :
								  strerror(-err));
		return false;
	}
	return true;
}

/*
 * The size of the answer to the got bytes of req: a message's, but a client of an older version
 * whose message is shorter gets as many bytes as it sent. Every version begins with our header,
 * so it reads there that its version is refused; a message of our size it would take for too
 * long, and refuse unread.
 */
static size_t answer_size(const struct harp_agent_msg *req, size_t got)
{
	if (got >= offsetof(struct harp_agent_msg, status) && got < sizeof(*req) &&
	    req->magic == HARP_AGENT_MAGIC && req->version < HARP_AGENT_VERSION) {
		return got;
	}
	return sizeof(*req);
}

/*
 * A bad message from client i, answered with why. A client that holds no queue goes; one that
 * holds queues stays (dropping it would take its live sockets out of the map and stop its
 * traffic): the message is refused, and said.
 */
static void bad_msg(int i, struct harp_agent_msg *resp, size_t len, const char *why)
{
	struct client *c = &A.clients[i];
	char line[256];

	snprintf(line, sizeof(line), "sent a bad message (%s)", why);
	if (!answer(i, resp, len)) {
		return;
	}
	if (!c->queues) {
		drop_client(i, line);
		return;
	}
	c->bad_msgs++;
	say_limited(&A.log_bad, "pid %d (uid %u): %s; refused, and the client stays: it holds "
		    "queues (%u bad messages so far)", c->pid, c->uid, line, c->bad_msgs);
}

static void read_client(int i)
{
	struct client *c = &A.clients[i];
	struct harp_agent_msg req, resp;
	char why[128];
	size_t got;
	int err, fd;

	err = take_msg(c->fd, &req, &got, &fd);
	if (err == -EAGAIN || err == -EINTR) {
		return;
	}
	if (err == -EBADMSG) {
		/* longer than a message, or with more than one descriptor (released already) */
		agent_msg_init(&resp, HARP_AGENT_HELLO);
		refuse(&resp, -EBADMSG, "a message is one struct of %zu bytes with at most one "
		       "descriptor (ENTER's); this one was longer or carried more", sizeof(req));
		bad_msg(i, &resp, sizeof(resp), "too long, or with several descriptors");
		return;
	}
	if (err || !got) {
		drop_client(i, err ? strerror(-err) : "closed its connection");
		return;
	}
	agent_msg_init(&resp, (enum harp_agent_op)req.op);
	if (ctrlmsg_agent_check(&req, got, why, sizeof(why))) {
		release_fd(fd);
		/* answered in our own version, so that a client of another one can say so */
		resp.op = req.op > 0 && req.op < HARP_AGENT_OP_END && got >= 8 ? req.op : HARP_AGENT_HELLO;
		refuse(&resp, -EBADMSG, "%s", why);
		bad_msg(i, &resp, answer_size(&req, got), why);
		return;
	}
	resp.seq = req.seq;
	if (serve(c, &req, fd, &resp)) {
		(void)answer(i, &resp, sizeof(resp));
	}
}

/* Client i, whose answer waited for room: sent now if there is. */
static void write_client(int i, short revents)
{
	struct client *c = &A.clients[i];

	if (revents & (POLLHUP | POLLERR)) {
		drop_client(i, "closed its connection");
	} else if (revents & POLLOUT) {
		(void)answer(i, &c->answer, c->answer_len);
	}
}

/* Listens at the socket path; a socket left there by an agent that is gone is replaced. */
static int listen_at(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, probe;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		say("the socket path %s is too long (at most %zu bytes)", path, sizeof(sa.sun_path) - 1);
		return -1;
	}
	strcpy(sa.sun_path, path);
	probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (probe >= 0 && !connect(probe, (struct sockaddr *)&sa, sizeof(sa))) {
		say("another agent answers at %s already", path);
		close(probe);
		return -1;
	}
	if (probe >= 0) {
		close(probe);
	}
	unlink(path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	/* root alone: 0660; with --allow-uid others must reach it, and SO_PEERCRED decides */
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    chmod(path, A.nallowed > 1 ? 0666 : 0660) ||
	    listen(fd, 64)) {
		say("serving %s failed: %s", path, strerror(errno));
		if (fd >= 0) {
			close(fd);
		}
		return -1;
	}
	return fd;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "pin-root", required_argument, NULL, 'p' },
		{ "allow-uid", required_argument, NULL, 'u' },
		{ "max-clients", required_argument, NULL, 'm' },
		{ "max-per-uid", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sigaction sa = { .sa_handler = on_signal };
	struct rlimit nofile;
	struct pollfd *pfds;
	char *end;
	long long v;
	int opt, lfd, i, n, rc = 1;

	A.allowed[A.nallowed++] = 0;
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 's': A.socket_path = optarg; break;
		case 'p': A.pin_root = optarg; break;
		case 'u':
		case 'm':
		case 'n':
			errno = 0;
			v = strtoll(optarg, &end, 10);
			/* a uid is 0..2^32-2: (uid_t)-1 means "no uid" to the kernel */
			if (errno || *end || end == optarg || v < (opt != 'u') ||
			    v > (opt != 'u' ? 4096 : 4294967294LL)) {
				return usage(opt == 'm'	  ? "--max-clients takes 1..4096" :
					     opt == 'n'	  ? "--max-per-uid takes 1..4096" :
							    "--allow-uid takes a numeric uid, 0..4294967294");
			}
			if (opt == 'm') {
				A.max_clients = (int)v;
			} else if (opt == 'n') {
				A.max_per_uid = (int)v;
			} else if (A.nallowed < (int)(sizeof(A.allowed) / sizeof(A.allowed[0]))) {
				A.allowed[A.nallowed++] = (uid_t)v;
			} else {
				return usage("at most 15 --allow-uid");
			}
			break;
		case 'h': usage(NULL); return 0;
		default: return usage(NULL);
		}
	}
	if (optind != argc) {
		return usage("unexpected arguments");
	}
	A.clients = calloc((size_t)A.max_clients, sizeof(*A.clients));
	pfds = calloc((size_t)A.max_clients + 1, sizeof(*pfds));
	if (!A.clients || !pfds) {
		say("out of memory");
		goto out;
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* every descriptor a message passes must fit (take_msg); the hard limit is ours to take */
	if (!getrlimit(RLIMIT_NOFILE, &nofile) && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &nofile);
	}
	if (pidns_choose()) {
		goto out;
	}
	if (releaser_start()) {
		say("cannot start the thread that releases passed descriptors");
		goto out;
	}
	lfd = listen_at(A.socket_path);
	if (lfd < 0) {
		goto out;
	}
	say("serving %s for the pins under %s (protocol version %d)", A.socket_path, A.pin_root,
	    HARP_AGENT_VERSION);
	while (!A.stop) {
		pfds[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		for (i = 0; i < A.nclients; i++) {
			/* one whose answer waits for room is read no further until it has gone */
			short ev = A.clients[i].answer_waits ? POLLOUT : POLLIN;

			pfds[i + 1] = (struct pollfd){ .fd = A.clients[i].fd, .events = ev };
		}
		n = A.nclients;
		if (poll(pfds, (nfds_t)n + 1, 500) <= 0) {
			drop_silent();
			continue;
		}
		/* from the last: drop_client moves the last client into the dropped one's place.
		 * One message of each client a round: none is served before the others twice. */
		for (i = n - 1; i >= 0; i--) {
			if (A.clients[i].answer_waits && pfds[i + 1].revents) {
				write_client(i, pfds[i + 1].revents);
			} else if (pfds[i + 1].revents) {
				read_client(i);
			}
		}
		drop_silent();
		/* a few newcomers a round: a crowd turned away cannot hold a client in the backlog
		 * for long, nor keep the others waiting */
		for (i = 0; i < 16 && (pfds[0].revents & POLLIN) && accept_client(lfd); i++) {
		}
	}
	while (A.nclients) {
		drop_client(A.nclients - 1, NULL);
	}
	for (i = 0; i < A.nifaces; i++) {
		iface_put(A.ifaces[i]);
	}
	close(lfd);
	unlink(A.socket_path);
	say("stopped");
	rc = 0;
out:
	releaser_stop();
	free(pfds);
	free(A.clients);
	return rc;
}
