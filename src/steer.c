// SPDX-License-Identifier: Apache-2.0
/*
 * Loading harp's XDP program. The object is compiled into the library as a skeleton, so nothing
 * is read from disk; its port range is rodata written before load. Attachment goes through
 * libxdp, so on kernels where its dispatcher works harp shares the hook with other XDP programs;
 * where the dispatcher is refused (as on kernels in lockdown) libxdp attaches the program alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/if_link.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/libxdp.h>

#include "harp_shared.h"
#include "harp_xdp.skel.h"
#include "steer.h"

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
		return "; loading XDP needs CAP_BPF and CAP_NET_ADMIN (or use scripts/harp-attach)";
	case ERANGE:
		return "; the MTU is too large for XDP on this device (veth peers: at most 3506)";
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
static int lock_interface(const char *ifname, int ifindex)
{
	char path[128];
	struct stat ns;
	int fd;

	if (stat("/proc/self/ns/net", &ns)) {
		return -errno;
	}
	mkdir(LOCK_DIR, 0755);
	snprintf(path, sizeof(path), LOCK_DIR "/netns-%lu-if-%d.lock", (unsigned long)ns.st_ino,
		 ifindex);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		pr_err("steer: cannot open the interface lock %s: %s", path, strerror(errno));
		return -errno;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		int err = errno == EWOULDBLOCK ? -EBUSY : -errno;

		pr_err("steer: another harp process runs on %s (it holds %s); one process per "
		       "interface",
		       ifname, path);
		close(fd);
		return err;
	}
	return fd;
}

/* Name of the XDP program attached to ifindex in either mode, or "" when there is none. */
static void attached_name(int ifindex, char *name, size_t len, __u32 *mode_flags)
{
	static const __u32 modes[] = { XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE };
	struct bpf_prog_info info;
	__u32 id, info_len;
	size_t i;
	int fd;

	name[0] = '\0';
	for (i = 0; i < ARRAY_SIZE(modes); i++) {
		if (bpf_xdp_query_id(ifindex, (int)modes[i], &id) || !id) {
			continue;
		}
		fd = bpf_prog_get_fd_by_id(id);
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

int steer_attach(struct steer *s, const char *ifname, int ifindex, uint16_t port_lo,
		 uint16_t port_hi, int xdp_mode_param)
{
	enum xdp_attach_mode mode = xdp_mode_param == HARP_XDP_SKB ? XDP_MODE_SKB : XDP_MODE_NATIVE;
	int err;

	memset(s, 0, sizeof(*s));
	s->xsks_map_fd = -1;
	s->counters_fd = -1;
	libbpf_set_print(libbpf_print);
	libxdp_set_print(libxdp_print);
	s->lock_fd = lock_interface(ifname, ifindex);
	if (s->lock_fd < 0) {
		return s->lock_fd;
	}
	remove_stale(ifname, ifindex);

	s->skel = harp_xdp__open();
	if (!s->skel) {
		err = -errno;
		pr_err("steer: opening the built-in XDP object failed: %s", strerror(errno));
		return err;
	}
	s->skel->rodata->port_lo = port_lo;
	s->skel->rodata->port_hi = port_hi;
	s->prog = xdp_program__from_bpf_obj(s->skel->obj, "xdp");
	err = libxdp_get_error(s->prog);
	if (err) {
		s->prog = NULL;
		pr_err("steer: libxdp refused the XDP object: %s", strerror(-err));
		goto err_skel;
	}
	err = xdp_program__attach(s->prog, ifindex, mode, 0);
	if (err) {
		pr_err("steer: attaching XDP (%s mode) to %s failed: %s%s",
		       mode == XDP_MODE_SKB ? "skb" : "native", ifname, strerror(-err),
		       attach_hint(-err));
		goto err_prog;
	}
	s->ifindex = ifindex;
	s->xdp_mode = mode;
	s->xsks_map_fd = bpf_map__fd(s->skel->maps.xsks_map);
	s->counters_fd = bpf_map__fd(s->skel->maps.counters);
	pr_info("steer: XDP program attached to %s (%s mode), UDP ports %u-%u", ifname,
		mode == XDP_MODE_SKB ? "skb" : "native", port_lo, port_hi);
	return 0;

err_prog:
	xdp_program__close(s->prog); /* made from our object, so it leaves the object open */
	s->prog = NULL;
err_skel:
	harp_xdp__destroy(s->skel);
	s->skel = NULL;
	close(s->lock_fd);
	s->lock_fd = -1;
	return err;
}

void steer_detach(struct steer *s)
{
	if (!s || !s->prog) {
		return;
	}
	xdp_program__detach(s->prog, s->ifindex, s->xdp_mode, 0);
	xdp_program__close(s->prog);
	harp_xdp__destroy(s->skel);
	close(s->lock_fd); /* after the detach: the next harp finds the hook free */
	memset(s, 0, sizeof(*s));
	s->xsks_map_fd = -1;
	s->counters_fd = -1;
}

int steer_counters(const struct steer *s, struct harp_queue_stats *st)
{
	int ncpus = libbpf_num_possible_cpus();
	uint64_t vals[512];
	uint64_t *sums[HARP_XDP_COUNTER_MAX] = {
		&st->xdp_steered, &st->xdp_passed, &st->xdp_no_socket,
	};
	uint32_t key;
	int cpu;

	if (ncpus <= 0 || ncpus > (int)ARRAY_SIZE(vals) || s->counters_fd < 0) {
		return -EINVAL;
	}
	for (key = 0; key < HARP_XDP_COUNTER_MAX; key++) {
		if (bpf_map_lookup_elem(s->counters_fd, &key, vals)) {
			return -errno;
		}
		*sums[key] = 0;
		for (cpu = 0; cpu < ncpus; cpu++) {
			*sums[key] += vals[cpu];
		}
	}
	return 0;
}
