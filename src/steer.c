// SPDX-License-Identifier: Apache-2.0
/*
 * harp's XDP program on one interface, found or loaded.
 *
 * A node prepared by harp-attach has the program attached and its maps pinned under
 * HARP_PIN_ROOT/<ifname>/: harp then only opens those maps, checks that they belong to the program
 * now attached to this interface and that its port range covers ours, and needs no privilege
 * beyond its AF_XDP sockets (CAP_NET_RAW, and CAP_IPC_LOCK for the UMEM). Elsewhere it loads the
 * program itself (CAP_BPF and CAP_NET_ADMIN): the object is compiled into the library as a
 * skeleton, so nothing is read from disk, and it goes through libxdp, so on kernels where libxdp's
 * dispatcher works harp shares the hook with other XDP programs; where the dispatcher is refused
 * (as on kernels in lockdown) libxdp attaches the program alone. Either way the program's port
 * range is entry 0 of its harp_config map.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/if_link.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/libxdp.h>

#include "agent.h"
#include "harp_shared.h"
#include "harp_xdp.skel.h"
#include "steer.h"

_Static_assert(sizeof(((struct steer *)0)->agent_entered) / sizeof(int) == HARP_XDP_MAX_QUEUES,
	       "a socket per queue the XDP program steers to");

/* libbpf's and libxdp's messages, minus their own debug chatter, as harp debug lines. */
static int forward_print(const char *who, bool their_debug, const char *fmt, va_list args)
{
	char line[512];

	if (their_debug || harp_log_threshold < HARP_LOG_DEBUG) {
		return 0;
	}
	vsnprintf(line, sizeof(line), fmt, args);
	line[strcspn(line, "\n")] = '\0';
	pr_debug("%s: %s", who, line);
	return 0;
}

static int libxdp_print(enum libxdp_print_level level, const char *fmt, va_list args)
{
	return forward_print("libxdp", level == LIBXDP_DEBUG, fmt, args);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	return forward_print("libbpf", level == LIBBPF_DEBUG, fmt, args);
}

static const char *attach_hint(int err)
{
	switch (err) {
	case EPERM:
	case EACCES:
		return "; loading XDP needs CAP_BPF and CAP_NET_ADMIN: give the process those, or "
		       "prepare the node once with `harp-attach up IFNAME` as root";
	case ERANGE:
		return "; the MTU is too large for XDP on this device even for harp's multi-buffer "
		       "program (the driver, or a program sharing the hook, takes single buffers only): "
		       "lower the MTU (most drivers then take up to 3498), or HARP_XDP_MODE=skb";
	case EEXIST:
	case EBUSY:
		return "; another XDP program is attached and libxdp cannot share the hook";
	case EOPNOTSUPP:
		return "; the driver has no native XDP: try HARP_XDP_MODE=skb";
	default:
		return "";
	}
}

#define LOCK_DIR "/run/harp"

/*
 * One harp process per interface: an flock on a file named after the network namespace and the
 * interface. The kernel drops it when its holder exits, however it exits, so holding it proves
 * that a harp program still attached to the interface belongs to nobody alive.
 */
static int lock_interface(struct steer *s, const char *ifname, int ifindex)
{
	char *path = s->lock_path;
	struct stat ns, held, named;
	int fd, tries, busy;

	if (stat("/proc/self/ns/net", &ns)) {
		return -errno;
	}
	mkdir(LOCK_DIR, 0755);
	snprintf(path, sizeof(s->lock_path), LOCK_DIR "/netns-%lu-if-%d.lock",
		 (unsigned long)ns.st_ino, ifindex);
	/* The holder removes the file as it lets go (steer_detach), so the file we locked may
	 * be one it removed meanwhile: then the lock proves nothing, and we take the new one. */
	for (tries = 0;; tries++) {
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0) {
			pr_err("steer: cannot open the interface lock %s: %s", path, strerror(errno));
			return -errno;
		}
		busy = flock(fd, LOCK_EX | LOCK_NB) ? errno : 0;
		if (busy || tries == 8 || fstat(fd, &held) ||
		    (!stat(path, &named) && named.st_ino == held.st_ino)) {
			break;
		}
		close(fd);
	}
	if (busy) {
		int err = busy == EWOULDBLOCK ? -EBUSY : -busy;

		pr_err("steer: another harp process runs on %s (it holds %s); a harp process that "
		       "loads its own XDP program needs the interface to itself: for several "
		       "processes on one interface, each on its own queues (HARP_QUEUES), prepare "
		       "it once with `harp-attach up %s`",
		       ifname, path, ifname);
		close(fd);
		return err;
	}
	return fd;
}

/*
 * Lets the interface go: the file first, while we still hold it, so that no lock file per
 * interface and network namespace piles up.
 */
static void unlock_interface(struct steer *s)
{
	unlink(s->lock_path);
	close(s->lock_fd);
	s->lock_fd = -1;
}

/* The XDP program ids attached to ifindex, by mode; 0 where none. */
static int attached_ids(int ifindex, __u32 *drv_id, __u32 *skb_id)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);

	*drv_id = *skb_id = 0;
	if (bpf_xdp_query(ifindex, 0, &q)) {
		return -errno;
	}
	*drv_id = q.drv_prog_id;
	*skb_id = q.skb_prog_id;
	return 0;
}

/* Name of the XDP program attached to ifindex in either mode, or "" when there is none. */
static void attached_name(int ifindex, char *name, size_t len, __u32 *mode_flags)
{
	static const __u32 modes[] = { XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE };
	struct bpf_prog_info info;
	__u32 ids[2], info_len;
	size_t i;
	int fd;

	name[0] = '\0';
	if (attached_ids(ifindex, &ids[0], &ids[1])) {
		return;
	}
	for (i = 0; i < ARRAY_SIZE(modes); i++) {
		if (!ids[i]) {
			continue;
		}
		fd = bpf_prog_get_fd_by_id(ids[i]);
		if (fd < 0) {
			continue;
		}
		memset(&info, 0, sizeof(info));
		info_len = sizeof(info);
		if (!bpf_obj_get_info_by_fd(fd, &info, &info_len)) {
			snprintf(name, len, "%s", info.name);
			*mode_flags = modes[i];
		}
		close(fd);
		return;
	}
}

/* A harp program left behind by a process that died (we hold the interface's lock): remove it. */
static void remove_stale(const char *ifname, int ifindex)
{
	char name[BPF_OBJ_NAME_LEN];
	__u32 mode = 0;

	attached_name(ifindex, name, sizeof(name), &mode);
	if (strcmp(name, "harp_xdp_steer")) {
		return;
	}
	if (bpf_xdp_detach(ifindex, mode, NULL)) {
		pr_warn("steer: a harp XDP program left on %s by an exited process could not be "
			"removed: %s",
			ifname, strerror(errno));
		return;
	}
	pr_info("steer: removed the harp XDP program an exited process left on %s", ifname);
}

static void steer_reset(struct steer *s)
{
	memset(s, 0, sizeof(*s));
	s->xsks_map_fd = -1;
	s->counters_fd = -1;
	s->config_fd = -1;
	s->probe_map_fd = -1;
	s->owners_fd = -1;
	s->lock_fd = -1;
	s->agent_fd = -1;
	for (size_t q = 0; q < ARRAY_SIZE(s->agent_entered); q++) {
		s->agent_entered[q] = -1;
	}
	pthread_mutex_init(&s->agent_lock, NULL);
	pthread_mutex_init(&s->agent_forget_lock, NULL);
}

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

/* Whether a seccomp filter confines this process ("Seccomp: 2" in /proc/self/status). */
static bool seccomp_filtered(void)
{
	char line[128];
	bool filtered = false;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f) {
		return false;
	}
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Seccomp:", 8)) {
			filtered = strtol(line + 8, NULL, 10) == 2;
			break;
		}
	}
	fclose(f);
	return filtered;
}

/* Why opening a pinned map was refused (EPERM or EACCES), and what to change. */
static const char *pin_denied_hint(int err)
{
	if (err == -EPERM && seccomp_filtered()) {
		return "this process runs under a seccomp filter (Seccomp: 2 in /proc/self/status), "
		       "and the container runtimes' default profiles (Kubernetes' RuntimeDefault, "
		       "podman's, docker's) refuse bpf() to a process without CAP_SYS_ADMIN: run "
		       "the pod with seccompProfile Unconfined, or a profile that allows bpf() "
		       "(docs/OPERATIONS.md)";
	}
	if (err == -EPERM) {
		return "bpf() needs CAP_BPF where kernel.unprivileged_bpf_disabled is set, as most "
		       "distributions set it: give the process CAP_BPF";
	}
	return "the pins are not readable and writable by this user: run as the user that "
	       "pinned them (harp-attach runs as root), or give the process CAP_DAC_OVERRIDE";
}

/* One map of harp-attach's pin directory, opened read-write. */
static int open_pinned(const char *dir, const char *name, const char *ifname)
{
	char path[PATH_MAX];
	int fd, err;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = bpf_obj_get(path);
	if (fd >= 0) {
		return fd;
	}
	err = -errno;
	if (err == -ENOENT) {
		pr_err("steer: %s is missing, so harp-attach's pin directory for %s is incomplete: "
		       "run `harp-attach down %s` and `harp-attach up %s` as root",
		       path, ifname, ifname, ifname);
	} else if (err == -EACCES || err == -EPERM) {
		pr_err("steer: cannot open %s: %s; %s", path, strerror(-err),
		       pin_denied_hint(err));
	} else {
		pr_err("steer: cannot open %s: %s", path, strerror(-err));
	}
	return err;
}

/* The three maps every harp-attach pins; on failure the caller closes those that did open. */
static int open_pinned_maps(struct steer *s, const char *dir, const char *ifname)
{
	s->xsks_map_fd = open_pinned(dir, "xsks_map", ifname);
	if (s->xsks_map_fd < 0) {
		return s->xsks_map_fd;
	}
	s->counters_fd = open_pinned(dir, "counters", ifname);
	if (s->counters_fd < 0) {
		return s->counters_fd;
	}
	s->config_fd = open_pinned(dir, "harp_config", ifname);
	return s->config_fd < 0 ? s->config_fd : 0;
}

/* The pinned program's config, once it proves made for this interface as it is now. */
static int read_pinned_config(struct steer *s, const char *dir, const char *ifname, int ifindex,
			      struct harp_xdp_config *cfg)
{
	__u32 key = 0;
	int err;

	if (bpf_map_lookup_elem(s->config_fd, &key, cfg)) {
		err = -errno;
		pr_err("steer: reading %s/harp_config failed: %s", dir, strerror(errno));
		return err;
	}
	if ((int)cfg->ifindex != ifindex) {
		pr_err("steer: the maps pinned at %s were made for interface index %u, but %s is "
		       "index %d now (was it re-created?): run `harp-attach up %s` again as root",
		       dir, cfg->ifindex, ifname, ifindex, ifname);
		return -ESTALE;
	}
	return 0;
}

/*
 * The mode the pinned program runs in, once it proves to be the program attached to the
 * interface now: another may have replaced it, or it was detached, since harp-attach pinned it.
 */
static int pinned_mode(const char *dir, const char *ifname, int ifindex,
		       const struct harp_xdp_config *cfg, enum xdp_attach_mode *mode)
{
	__u32 drv_id, skb_id;
	char now[32] = "none";
	int err;

	err = attached_ids(ifindex, &drv_id, &skb_id);
	if (err) {
		pr_err("steer: asking the kernel which XDP program runs on %s failed: %s", ifname,
		       strerror(-err));
		return err;
	}
	if (cfg->attach_id && (cfg->attach_id == drv_id || cfg->attach_id == skb_id)) {
		*mode = cfg->attach_id == drv_id ? XDP_MODE_NATIVE : XDP_MODE_SKB;
		return 0;
	}
	if (drv_id || skb_id) {
		snprintf(now, sizeof(now), "program id %u", drv_id ? drv_id : skb_id);
	}
	pr_err("steer: the maps pinned at %s belong to XDP program id %u, but %s runs %s "
	       "(another program replaced harp's, or it was detached): run `harp-attach up "
	       "%s` again as root",
	       dir, cfg->attach_id, ifname, now, ifname);
	return -ESTALE;
}

/*
 * The maps an older harp-attach did not pin. Without probe_queues paths still work (probes are
 * steered like any harp packet), only the diagnosis of a failed probe is poorer; without
 * queue_owners a refused queue's holder goes unnamed.
 */
static void open_pinned_extras(struct steer *s, const char *dir, const char *ifname)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/probe_queues", dir) >= (int)sizeof(path)) {
		path[0] = '\0';
	}
	s->probe_map_fd = bpf_obj_get(path);
	if (s->probe_map_fd < 0) {
		pr_info("steer: %s is missing (harp-attach older than probing): probes that miss "
			"a queue will not be diagnosed; run `harp-attach up %s` again to fix",
			path, ifname);
	}
	if (snprintf(path, sizeof(path), "%s/queue_owners", dir) >= (int)sizeof(path)) {
		path[0] = '\0';
	}
	s->owners_fd = bpf_obj_get(path);
}

/*
 * The program harp-attach attached and pinned: its maps, once they prove to belong to the program
 * attached to this interface now and to steer a range that covers ours.
 */
static int use_pinned(struct steer *s, const char *dir, const char *ifname, int ifindex,
		      uint16_t port_lo, uint16_t port_hi)
{
	enum xdp_attach_mode mode;
	struct harp_xdp_config cfg;
	int err;

	err = open_pinned_maps(s, dir, ifname);
	if (err) {
		goto err_maps;
	}
	err = read_pinned_config(s, dir, ifname, ifindex, &cfg);
	if (err) {
		goto err_maps;
	}
	s->attached_id = cfg.attach_id;
	err = pinned_mode(dir, ifname, ifindex, &cfg, &mode);
	if (err) {
		goto err_maps;
	}
	if (!cfg.port_lo || port_lo < cfg.port_lo || port_hi > cfg.port_hi) {
		err = -ERANGE;
		pr_err("steer: the XDP program on %s steers UDP ports %u-%u, but harp here uses "
		       "%u-%u (HARP_PORT_BASE, HARP_PORT_COUNT): take them from the node profile "
		       "(HARP_CONF), or run harp-attach up with --port-base/--port-count",
		       ifname, cfg.port_lo, cfg.port_hi, port_lo, port_hi);
		goto err_maps;
	}
	open_pinned_extras(s, dir, ifname);
	s->pinned = true;
	s->ifindex = ifindex;
	s->xdp_mode = mode;
	pr_info("steer: using the XDP program harp-attach attached to %s (%s mode, id %u, maps at "
		"%s), UDP ports %u-%u of its %u-%u",
		ifname, s->xdp_mode == XDP_MODE_SKB ? "skb" : "native", cfg.attach_id, dir, port_lo,
		port_hi, cfg.port_lo, cfg.port_hi);
	return 0;

err_maps:
	close_fd(&s->xsks_map_fd);
	close_fd(&s->counters_fd);
	close_fd(&s->config_fd);
	return err;
}

/* ---- the node agent ------------------------------------------------------------------------ */

static void own_record(struct harp_queue_owner *o);

/* The ENTER of queue's socket, recording this process as its holder. */
static void enter_msg(struct harp_agent_msg *req, int queue)
{
	agent_msg_init(req, HARP_AGENT_ENTER);
	req->queue = (uint32_t)queue;
	own_record(&req->owner);
}

/*
 * The agent went away (harp-attach run starts another when it ends): connects to the new one and
 * enters every queue's socket again, so that it knows us as their holder. Called with agent_lock
 * held; the XSKMAP kept the sockets meanwhile, so no packet was lost to this.
 */
static int agent_reconnect(struct steer *s)
{
	struct harp_agent_msg hello, req, resp;
	int fd, q, n = 0, err;

	fd = agent_connect(s->agent_path, s->agent_ifname, &hello);
	if (fd < 0) {
		return fd;
	}
	for (q = 0; q < (int)ARRAY_SIZE(s->agent_entered); q++) {
		if (s->agent_entered[q] < 0) {
			continue;
		}
		enter_msg(&req, q);
		err = agent_call(fd, &req, s->agent_entered[q], &resp);
		if (err || resp.status) {
			pr_err("steer: the node agent at %s, connected again, would not enter queue %d: "
			       "%s",
			       s->agent_path, q,
			       err ? strerror(-err) :
				     (resp.text[0] ? resp.text : strerror(-resp.status)));
			close(fd);
			return err ? err : resp.status;
		}
		n++;
	}
	close(s->agent_fd);
	s->agent_fd = fd;
	pr_warn("steer: the node agent at %s went away and came back (restarted); connected to it "
		"again and entered %d queue socket(s)",
		s->agent_path, n);
	return 0;
}

/* Under agent_lock: the FORGETs engines left, sent without waiting for their answers. */
static void agent_flush_forgets(struct steer *s)
{
	struct harp_agent_msg req;

	pthread_mutex_lock(&s->agent_forget_lock);
	while (s->agent_nforget) {
		s->agent_nforget--;
		agent_msg_init(&req, HARP_AGENT_FORGET);
		req.conn_id = s->agent_forget[s->agent_nforget].conn_id;
		req.token = s->agent_forget[s->agent_nforget].token;
		(void)agent_post(s->agent_fd, &req); /* a record left behind is only a stale entry */
	}
	pthread_mutex_unlock(&s->agent_forget_lock);
}

/*
 * One request to the agent and its answer; a refusal comes back as its errno, its text logged.
 * When the connection is gone (the agent restarted), it connects again once and asks again.
 */
static int agent_ask(struct steer *s, struct harp_agent_msg *req, int pass_fd,
		     struct harp_agent_msg *resp, const char *what)
{
	int err;

	pthread_mutex_lock(&s->agent_lock);
	agent_flush_forgets(s);
	err = agent_call(s->agent_fd, req, pass_fd, resp);
	if (err == -ECONNRESET || err == -EPIPE || err == -ENOTCONN) {
		if (!agent_reconnect(s)) {
			err = agent_call(s->agent_fd, req, pass_fd, resp);
		}
	}
	pthread_mutex_unlock(&s->agent_lock);
	if (err) {
		pr_err("steer: asking the node agent to %s failed: %s", what, strerror(-err));
		return err;
	}
	if (resp->status) {
		pr_err("steer: the node agent would not %s: %s", what,
		       resp->text[0] ? resp->text : strerror(-resp->status));
		return resp->status < 0 ? resp->status : -EPROTO;
	}
	return 0;
}

/*
 * The agent listening at path, if one does: 1 when there is none (no socket, or nobody answers
 * on it), 0 once it took us on, or the error it answered.
 */
static int use_agent(struct steer *s, const char *path, const char *ifname, uint16_t port_lo,
		     uint16_t port_hi)
{
	struct harp_agent_msg hello;
	struct stat st;
	int fd;

	if (stat(path, &st)) {
		pr_debug("steer: no node agent at %s (HARP_AGENT_SOCKET)", path);
		return 1;
	}
	fd = agent_connect(path, ifname, &hello);
	if (fd == -ECONNREFUSED || fd == -ENOENT) {
		pr_warn("steer: %s is there but no node agent answers on it (%s); going on without "
			"one",
			path, strerror(-fd));
		return 1;
	}
	if (fd < 0) {
		return fd;
	}
	if (!hello.port_lo || port_lo < hello.port_lo || port_hi > hello.port_hi) {
		pr_err("steer: the node agent's XDP program on %s steers UDP ports %u-%u, but harp "
		       "here uses %u-%u (HARP_PORT_BASE, HARP_PORT_COUNT): take them from the node "
		       "profile (HARP_CONF)",
		       ifname, hello.port_lo, hello.port_hi, port_lo, port_hi);
		close(fd);
		return -ERANGE;
	}
	s->agent_fd = fd;
	snprintf(s->agent_path, sizeof(s->agent_path), "%s", path);
	snprintf(s->agent_ifname, sizeof(s->agent_ifname), "%s", ifname);
	s->pinned = true;
	s->xdp_mode = hello.xdp_mode == HARP_AGENT_XDP_SKB ? XDP_MODE_SKB : XDP_MODE_NATIVE;
	pr_info("steer: using the node agent at %s for %s (XDP program id %u, %s mode), UDP ports "
		"%u-%u of its %u-%u; this process makes no bpf() call",
		path, ifname, hello.attach_id, hello.xdp_mode == HARP_AGENT_XDP_SKB ? "skb" : "native",
		port_lo, port_hi, hello.port_lo, hello.port_hi);
	return 0;
}

/* What the program we attached steers, and the id that proves it is still there. */
static int write_config(struct steer *s, const char *ifname, uint16_t port_lo, uint16_t port_hi)
{
	struct harp_xdp_config cfg = { .port_lo = port_lo, .port_hi = port_hi };
	__u32 key = 0, drv_id, skb_id;

	if (!attached_ids(s->ifindex, &drv_id, &skb_id)) {
		cfg.attach_id = s->xdp_mode == XDP_MODE_SKB ? skb_id : drv_id;
	}
	cfg.ifindex = (__u32)s->ifindex;
	if (bpf_map_update_elem(s->config_fd, &key, &cfg, 0)) {
		int err = -errno;

		pr_err("steer: writing the port range into the XDP program on %s failed: %s",
		       ifname, strerror(errno));
		return err;
	}
	return 0;
}

void steer_check_attached(struct steer *s, char *buf, size_t len)
{
	__u32 drv_id = 0, skb_id = 0;

	buf[0] = '\0';
	if (!s->attached_id || s->agent_fd >= 0 || attached_ids(s->ifindex, &drv_id, &skb_id)) {
		return;
	}
	if (drv_id == s->attached_id || skb_id == s->attached_id) {
		return;
	}
	if (!drv_id && !skb_id) {
		snprintf(buf, len, "the XDP program that steered harp's packets (id %u) is no longer "
			 "attached to the interface: its packets now go to the kernel",
			 s->attached_id);
	} else {
		snprintf(buf, len, "the XDP program on the interface is now id %u, not id %u that "
			 "steered harp's packets: something attached another program",
			 drv_id ? drv_id : skb_id, s->attached_id);
	}
}

/* Opens our own copy of the built-in program, multi-buffer aware or not (frags). */
static int open_program(struct steer *s, bool frags)
{
	int err;

	s->skel = harp_xdp__open();
	if (!s->skel) {
		err = -errno;
		pr_err("steer: opening the built-in XDP object failed: %s", strerror(errno));
		return err;
	}
	/* Our own copy: its maps are this process's, never pinned (the object pins by name for
	 * xdp-loader, and libbpf would otherwise reuse maps pinned under /sys/fs/bpf). */
	bpf_map__set_pin_path(s->skel->maps.xsks_map, NULL);
	bpf_map__set_pin_path(s->skel->maps.counters, NULL);
	bpf_map__set_pin_path(s->skel->maps.harp_config, NULL);
	bpf_map__set_pin_path(s->skel->maps.probe_queues, NULL);
	bpf_map__set_pin_path(s->skel->maps.queue_owners, NULL);
	s->prog = xdp_program__from_bpf_obj(s->skel->obj, "xdp.frags");
	err = libxdp_get_error(s->prog);
	/* Said outright: libbpf sets the flag from the section name only as it loads, and libxdp
	 * reads it before, to pick its dispatcher. Left to the section name, the dispatcher came
	 * single-buffer, and virtio_net refused it at MTU 9000 ("MTU too large to enable XDP
	 * without frags"). */
	if (!err) {
		err = xdp_program__set_xdp_frags_support(s->prog, frags);
		if (err) {
			xdp_program__close(s->prog);
		}
	}
	if (err) {
		s->prog = NULL;
		pr_err("steer: libxdp refused the XDP object: %s", strerror(-err));
	}
	return err;
}

/*
 * The program harp-attach prepared, through the node agent or its pins: 0 once this steer uses
 * it, a negative errno, or 1 when the node is not prepared (unprepared then says how to prepare
 * it, for the error a failed attach of our own program gives).
 */
static int use_prepared(struct steer *s, const char *ifname, int ifindex, uint16_t port_lo,
			uint16_t port_hi, const struct harp_params *params, char *unprepared,
			size_t len)
{
	char dir[PATH_MAX], agent_said[192] = "";
	struct stat st;
	int err;

	if (params->agent_socket[0]) {
		err = use_agent(s, params->agent_socket, ifname, port_lo, port_hi);
		if (err <= 0) {
			s->ifindex = err ? 0 : ifindex;
			return err;
		}
	}
	if (!params->pin_root[0]) {
		return 1;
	}
	snprintf(dir, sizeof(dir), "%s/%s", params->pin_root, ifname);
	if (!stat(dir, &st)) {
		return use_pinned(s, dir, ifname, ifindex, port_lo, port_hi);
	}
	pr_debug("steer: no pin directory %s (harp-attach has not prepared %s): loading the XDP "
		 "program here",
		 dir, ifname);
	if (params->agent_socket[0]) {
		snprintf(agent_said, sizeof(agent_said), "no node agent (no socket at %s) and ",
			 params->agent_socket);
	}
	snprintf(unprepared, len,
		 "; %sno pins for %.15s (no %s), so harp loaded its own program: prepare the node "
		 "with `harp-attach up %.15s`, or in a pod of a prepared node mount the host's "
		 "/run/harp (docs/OPERATIONS.md)",
		 agent_said, ifname, dir, ifname);
	return 1;
}

/* Our copy of the program and its object closed (a program made from our object leaves it open). */
static void program_close(struct steer *s)
{
	xdp_program__close(s->prog);
	s->prog = NULL;
	harp_xdp__destroy(s->skel);
	s->skel = NULL;
}

/*
 * Our own program attached to the interface: the multi-buffer one, or the single-buffer one where
 * the kernel knows no multi-buffer programs. On failure nothing of it is left open.
 */
static int attach_program(struct steer *s, const char *ifname, int ifindex,
			  enum xdp_attach_mode mode, const char *unprepared)
{
	int err;

	err = open_program(s, true);
	if (err) {
		goto err_prog;
	}
	err = xdp_program__attach(s->prog, ifindex, mode, 0);
	if (err == -EINVAL) {
		/* a kernel before 5.18 knows no multi-buffer programs: the single-buffer one,
		 * which attaches up to the driver's single-buffer MTU */
		pr_info("steer: the kernel refused the multi-buffer XDP program (%s); trying it "
			"as a single-buffer one",
			strerror(-err));
		program_close(s);
		err = open_program(s, false);
		if (err) {
			goto err_prog;
		}
		err = xdp_program__attach(s->prog, ifindex, mode, 0);
	}
	if (err) {
		pr_err("steer: attaching XDP (%s mode) to %s failed: %s%s%s",
		       mode == XDP_MODE_SKB ? "skb" : "native", ifname, strerror(-err),
		       attach_hint(-err), unprepared);
		goto err_prog;
	}
	return 0;

err_prog:
	program_close(s);
	return err;
}

/* The program we attached: the id that proves, later, it is still there, and its maps. */
static void note_attached(struct steer *s, int ifindex, enum xdp_attach_mode mode)
{
	__u32 drv_id = 0, skb_id = 0;

	s->ifindex = ifindex;
	s->xdp_mode = mode;
	if (!attached_ids(ifindex, &drv_id, &skb_id)) {
		s->attached_id = mode == XDP_MODE_SKB ? skb_id : drv_id;
	}
	s->xsks_map_fd = bpf_map__fd(s->skel->maps.xsks_map);
	s->counters_fd = bpf_map__fd(s->skel->maps.counters);
	s->config_fd = bpf_map__fd(s->skel->maps.harp_config);
	s->probe_map_fd = bpf_map__fd(s->skel->maps.probe_queues);
	s->owners_fd = bpf_map__fd(s->skel->maps.queue_owners);
}

int steer_attach(struct steer *s, const char *ifname, int ifindex, uint16_t port_lo,
		 uint16_t port_hi, const struct harp_params *params)
{
	enum xdp_attach_mode mode =
		params->xdp_mode == HARP_XDP_SKB ? XDP_MODE_SKB : XDP_MODE_NATIVE;
	char unprepared[PATH_MAX + 512] = "";
	int err;

	steer_reset(s);
	libbpf_set_print(libbpf_print);
	libxdp_set_print(libxdp_print);
	err = use_prepared(s, ifname, ifindex, port_lo, port_hi, params, unprepared,
			   sizeof(unprepared));
	if (err <= 0) {
		return err;
	}
	s->lock_fd = lock_interface(s, ifname, ifindex);
	if (s->lock_fd < 0) {
		return s->lock_fd;
	}
	remove_stale(ifname, ifindex);
	err = attach_program(s, ifname, ifindex, mode, unprepared);
	if (err) {
		goto err_lock;
	}
	note_attached(s, ifindex, mode);
	err = write_config(s, ifname, port_lo, port_hi);
	if (err) {
		xdp_program__detach(s->prog, ifindex, mode, 0);
		goto err_prog;
	}
	pr_info("steer: XDP program attached to %s (%s mode), UDP ports %u-%u", ifname,
		mode == XDP_MODE_SKB ? "skb" : "native", port_lo, port_hi);
	return 0;

err_prog:
	program_close(s);
err_lock:
	unlock_interface(s);
	return err;
}

void steer_detach(struct steer *s)
{
	if (!s) {
		return;
	}
	if (s->pinned) {
		/* harp-attach's program stays: only our descriptors of its maps go (and our
		 * connection to the agent, which forgets what it recorded for us) */
		close_fd(&s->agent_fd);
		close_fd(&s->xsks_map_fd);
		close_fd(&s->counters_fd);
		close_fd(&s->config_fd);
		close_fd(&s->probe_map_fd);
		close_fd(&s->owners_fd);
		steer_reset(s);
		return;
	}
	if (!s->prog) {
		return;
	}
	xdp_program__detach(s->prog, s->ifindex, s->xdp_mode, 0);
	program_close(s);
	unlock_interface(s); /* after the detach: the next harp finds the hook free */
	steer_reset(s);
}

int steer_counters(struct steer *s, struct harp_queue_stats *st)
{
	int ncpus = libbpf_num_possible_cpus();
	uint64_t vals[512];
	uint64_t *sums[HARP_XDP_COUNTER_MAX] = {
		&st->xdp_steered, &st->xdp_passed,	    &st->xdp_no_socket,
		&st->xdp_probes,  &st->xdp_probe_no_socket, &st->xdp_refused,
	};
	struct harp_agent_msg req, resp;
	uint32_t key;
	int cpu, err;

	if (s->agent_fd >= 0) {
		agent_msg_init(&req, HARP_AGENT_COUNTERS);
		err = agent_ask(s, &req, -1, &resp, "read the XDP program's counters");
		if (err) {
			return err;
		}
		for (key = 0; key < HARP_XDP_COUNTER_MAX; key++) {
			*sums[key] = resp.value[key];
		}
		return 0;
	}
	if (ncpus <= 0 || ncpus > (int)ARRAY_SIZE(vals) || s->counters_fd < 0) {
		return -EINVAL;
	}
	for (key = 0; key < HARP_XDP_COUNTER_MAX; key++) {
		if (bpf_map_lookup_elem(s->counters_fd, &key, vals)) {
			if (errno == ENOENT && key >= HARP_XDP_PROBES) {
				continue; /* a program pinned before the counter existed */
			}
			return -errno;
		}
		*sums[key] = 0;
		for (cpu = 0; cpu < ncpus; cpu++) {
			*sums[key] += vals[cpu];
		}
	}
	return 0;
}

int steer_probe_queues(struct steer *s, uint32_t conn_id, uint64_t token, uint64_t *queues)
{
	struct harp_xdp_probe_key key = { .token = htobe64(token), .conn_id = htonl(conn_id) };
	struct harp_agent_msg req, resp;
	int err;

	*queues = 0;
	if (s->agent_fd < 0) {
		if (s->probe_map_fd < 0) {
			return -ENOENT;
		}
		if (bpf_map_lookup_elem(s->probe_map_fd, &key, queues)) {
			*queues = 0;
			return errno == ENOENT ? 0 : -errno; /* no probe of it arrived */
		}
		return 0;
	}
	/* an engine's pass: no waiting for another request, 20 ms at most for the answer */
	if (pthread_mutex_trylock(&s->agent_lock)) {
		return -EBUSY;
	}
	agent_flush_forgets(s);
	agent_msg_init(&req, HARP_AGENT_PROBE);
	req.conn_id = conn_id;
	req.token = token;
	err = agent_call_ms(s->agent_fd, &req, -1, &resp, 20);
	pthread_mutex_unlock(&s->agent_lock);
	if (err) {
		return err;
	}
	if (resp.status) {
		return resp.status < 0 ? resp.status : -EPROTO;
	}
	*queues = resp.value[0];
	return 0;
}

int steer_probe_forget(struct steer *s, uint32_t conn_id, uint64_t token)
{
	struct harp_xdp_probe_key key = { .token = htobe64(token), .conn_id = htonl(conn_id) };

	if (s->agent_fd >= 0) {
		/* an engine's pass: queued, then sent if the connection to the agent is free, else
		 * by whoever takes it next (a full list drops the oldest: a stale record harms
		 * nothing but the map's room) */
		pthread_mutex_lock(&s->agent_forget_lock);
		if (s->agent_nforget == (int)ARRAY_SIZE(s->agent_forget)) {
			memmove(&s->agent_forget[0], &s->agent_forget[1],
				sizeof(s->agent_forget) - sizeof(s->agent_forget[0]));
			s->agent_nforget--;
		}
		s->agent_forget[s->agent_nforget].conn_id = conn_id;
		s->agent_forget[s->agent_nforget].token = token;
		s->agent_nforget++;
		pthread_mutex_unlock(&s->agent_forget_lock);
		if (!pthread_mutex_trylock(&s->agent_lock)) {
			agent_flush_forgets(s);
			pthread_mutex_unlock(&s->agent_lock);
		}
	} else if (s->probe_map_fd >= 0 && bpf_map_delete_elem(s->probe_map_fd, &key) &&
		   errno != ENOENT) {
		return -errno;
	}
	return 0;
}

/* ---- queue owners -------------------------------------------------------------------------- */

static __u32 pid_namespace(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) ? 0 : (__u32)st.st_ino;
}

/* This process as a queue's holder: pid in its own pid namespace, that namespace, name, now. */
static void own_record(struct harp_queue_owner *o)
{
	struct timespec now;
	FILE *f;

	memset(o, 0, sizeof(*o));
	o->pid = (__u32)getpid();
	o->pidns = pid_namespace();
	clock_gettime(CLOCK_REALTIME, &now);
	o->since_ns = (__u64)now.tv_sec * 1000000000ull + (__u64)now.tv_nsec;
	f = fopen("/proc/self/comm", "r");
	if (f) {
		if (fgets(o->comm, sizeof(o->comm), f)) {
			o->comm[strcspn(o->comm, "\n")] = '\0';
		}
		fclose(f);
	}
}

int steer_enter(struct steer *s, int queue, int fd)
{
	struct harp_agent_msg req, resp;
	char what[64];
	__u32 key = (__u32)queue;
	int err;

	if (s->agent_fd >= 0) {
		/* the agent records us as the queue's holder as it enters the socket */
		enter_msg(&req, queue);
		snprintf(what, sizeof(what), "enter the socket of queue %d", queue);
		err = agent_ask(s, &req, fd, &resp, what);
		if (!err && queue >= 0 && queue < (int)ARRAY_SIZE(s->agent_entered)) {
			s->agent_entered[queue] = fd; /* for agent_reconnect */
		}
		return err;
	}
	if (bpf_map_update_elem(s->xsks_map_fd, &key, &fd, 0)) {
		int err = -errno;

		pr_err("xsk: entering the socket of queue %d in the XSKMAP failed: %s", queue,
		       strerror(errno));
		return err;
	}
	return 0;
}

int steer_leave(struct steer *s, int queue)
{
	struct harp_agent_msg req, resp;
	__u32 key = (__u32)queue;
	int err;

	if (s->agent_fd >= 0) {
		if (queue >= 0 && queue < (int)ARRAY_SIZE(s->agent_entered)) {
			s->agent_entered[queue] = -1;
		}
		agent_msg_init(&req, HARP_AGENT_LEAVE);
		req.queue = (uint32_t)queue;
		return agent_ask(s, &req, -1, &resp, "take a closed queue's socket out");
	}
	if (s->xsks_map_fd >= 0 && bpf_map_delete_elem(s->xsks_map_fd, &key) && errno != ENOENT) {
		err = -errno;
		/* the XDP program keeps redirecting the queue's harp traffic to a closed socket,
		 * which drops it, until the next harp process on the queue enters its own */
		pr_warn("xsk: taking the socket of queue %d out of the XSKMAP failed: %s", queue,
			strerror(-err));
		return err;
	}
	return 0;
}

void steer_claim(struct steer *s, int queue)
{
	struct harp_queue_owner o;
	__u32 key = (__u32)queue;

	if (s->owners_fd < 0) {
		return; /* none recorded, or the agent recorded it with the socket */
	}
	own_record(&o);
	if (bpf_map_update_elem(s->owners_fd, &key, &o, 0)) {
		pr_debug("steer: recording this process as the holder of queue %d failed: %s",
			 queue, strerror(errno));
	}
}

void steer_release(struct steer *s, int queue)
{
	struct harp_queue_owner o, none = { 0 };
	__u32 key = (__u32)queue;

	if (s->owners_fd < 0 || bpf_map_lookup_elem(s->owners_fd, &key, &o)) {
		return;
	}
	if (o.pid == (__u32)getpid() && o.pidns == pid_namespace()) {
		(void)bpf_map_update_elem(s->owners_fd, &key, &none, 0);
	}
}

void steer_owner_text(struct steer *s, int queue, char *buf, size_t len)
{
	struct harp_queue_owner o;
	__u32 key = (__u32)queue;
	time_t since;
	struct tm tm;
	char when[32] = "?";

	buf[0] = '\0';
	if (s->agent_fd >= 0) {
		struct harp_agent_msg req, resp;

		agent_msg_init(&req, HARP_AGENT_OWNER);
		req.queue = (uint32_t)queue;
		if (agent_ask(s, &req, -1, &resp, "name a queue's holder")) {
			return;
		}
		o = resp.owner;
	} else if (s->owners_fd < 0 || bpf_map_lookup_elem(s->owners_fd, &key, &o)) {
		return;
	}
	if (!o.pid) {
		return;
	}
	o.comm[sizeof(o.comm) - 1] = '\0';
	since = (time_t)(o.since_ns / 1000000000ull);
	if (localtime_r(&since, &tm)) {
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	}
	if (o.pidns != pid_namespace()) {
		snprintf(buf, len, "harp process %u (%s) of another pid namespace (container), which "
			 "bound it at %s", o.pid, o.comm, when);
	} else if (kill((pid_t)o.pid, 0) && errno == ESRCH) {
		/* the record outlived its writer (SIGKILL): whatever holds the queue now is not it */
		snprintf(buf, len, "an AF_XDP socket; the last harp process recorded on it, %u (%s, "
			 "bound at %s), has exited", o.pid, o.comm, when);
	} else {
		snprintf(buf, len, "harp process %u (%s), which bound it at %s", o.pid, o.comm, when);
	}
}
