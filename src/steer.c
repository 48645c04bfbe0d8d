// SPDX-License-Identifier: Apache-2.0
/*
 * Loading harp's XDP program. The object is compiled into the library as a skeleton, so nothing
 * is read from disk; its port range is rodata written before load. Attachment goes through
 * libxdp, so on kernels where its dispatcher works harp shares the hook with other XDP programs;
 * where the dispatcher is refused (as on kernels in lockdown) libxdp attaches the program alone.
 */
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/libxdp.h>

#include "harp_shared.h"
#include "harp_xdp.skel.h"
#include "steer.h"

static int libxdp_print(enum libxdp_print_level level, const char *fmt, va_list args)
{
	char line[512];

	if (level == LIBXDP_DEBUG || harp_log_threshold < HARP_LOG_DEBUG) {
		return 0;
	}
	vsnprintf(line, sizeof(line), fmt, args);
	line[strcspn(line, "\n")] = '\0';
	pr_debug("libxdp: %s", line);
	return 0;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	char line[512];

	if (level == LIBBPF_DEBUG || harp_log_threshold < HARP_LOG_DEBUG) {
		return 0;
	}
	vsnprintf(line, sizeof(line), fmt, args);
	line[strcspn(line, "\n")] = '\0';
	pr_debug("libbpf: %s", line);
	return 0;
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
