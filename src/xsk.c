// SPDX-License-Identifier: Apache-2.0
/*
 * AF_XDP sockets through libxdp's ring helpers. The fill and completion rings have room for half
 * of the UMEM's frames; the fill ring holds XSK_FILL_START of them at first (stocked before the
 * bind) and more as bursts need, or all it has room for in zero-copy mode, the pool the rest for
 * transmit. The XDP program is ours (steer.c), so
 * libxdp is told not to load its own, and the socket is entered into our XSKMAP by hand.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/ethtool.h>
#include <linux/if_xdp.h>
#include <linux/sockios.h>

#include "xsk.h"

#ifndef SO_PREFER_BUSY_POLL
#define SO_PREFER_BUSY_POLL 69 /* kernel 5.11+; asm-generic values, as on x86 and arm64 */
#endif
#ifndef SO_BUSY_POLL_BUDGET
#define SO_BUSY_POLL_BUDGET 70
#endif
#ifndef XDP_MAX_TX_SKB_BUDGET
#define XDP_MAX_TX_SKB_BUDGET 9 /* kernel 6.15+; Debian 12's headers predate it */
#endif

static int fill_start(struct xsk_port *p)
{
	uint32_t want = p->fill_target, idx, i;
	uint64_t addr;

	if (xsk_ring_prod__reserve(&p->fill, want, &idx) != want) {
		return -ENOSPC;
	}
	for (i = 0; i < want; i++) {
		if (frame_pool_get(&p->pool, &addr, 1) != 1) {
			return -ENOMEM;
		}
		*xsk_ring_prod__fill_addr(&p->fill, idx + i) = addr;
	}
	xsk_ring_prod__submit(&p->fill, want);
	return 0;
}

static int bind_once(struct xsk_port *p, const char *ifname, int queue, uint16_t flags)
{
	struct xsk_socket_config cfg = {
		.rx_size = p->ring_size,
		.tx_size = p->ring_size,
		.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
		.bind_flags = XDP_USE_NEED_WAKEUP | flags,
	};

	return xsk_socket__create(&p->xsk, ifname, (uint32_t)queue, p->umem, &p->rx, &p->tx, &cfg);
}

/*
 * Binds in mode_flag's mode, multi-buffer first where the port has slots for it. A kernel before
 * 6.6 refuses the flag (EINVAL), and so does a zero-copy driver without multi-buffer support
 * (EOPNOTSUPP): the mode is then tried with one descriptor per packet.
 */
static int bind_socket(struct xsk_port *p, const char *ifname, int queue, uint16_t mode_flag)
{
	int err;

	p->sg = false;
	if (p->slot_base) {
		err = bind_once(p, ifname, queue, mode_flag | XDP_USE_SG);
		if (!err) {
			p->sg = true;
			return 0;
		}
		if (err == -EBUSY || err == -EPERM || err == -EACCES) {
			return err;
		}
		pr_debug("xsk: %s queue %d: multi-buffer %s bind refused: %s", ifname, queue,
			 mode_flag == XDP_ZEROCOPY ? "zero-copy" : "copy-mode", strerror(-err));
	}
	return bind_once(p, ifname, queue, mode_flag);
}

static const char *bind_hint(int err)
{
	switch (err) {
	case EBUSY:
		return " (another AF_XDP socket holds this queue, and kept it for over a second)";
	case EINVAL:
		return " (the queue does not exist: check `ethtool -l`)";
	case EPERM:
	case EACCES:
		return " (needs CAP_NET_RAW)";
	default:
		return "";
	}
}

void xsk_driver_name(const char *ifname, char *out, size_t len)
{
	struct ethtool_drvinfo info = { .cmd = ETHTOOL_GDRVINFO };
	struct ifreq ifr = { .ifr_data = (void *)&info };
	int fd;

	out[0] = '\0';
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return;
	}
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%.*s", (int)sizeof(ifr.ifr_name) - 1, ifname);
	if (!ioctl(fd, SIOCETHTOOL, &ifr)) {
		info.driver[sizeof(info.driver) - 1] = '\0';
		snprintf(out, len, "%.31s", info.driver);
	}
	close(fd);
}

/*
 * What a driver needs before it binds zero-copy, for the line that says why it did not. Drivers
 * this was measured on; others get the errno alone.
 */
static const char *zerocopy_need(const char *driver, int err)
{
	if (!strcmp(driver, "virtio_net")) {
		return err == EINVAL ? "virtio-net binds zero-copy only when the device offers "
				       "VIRTIO_F_ACCESS_PLATFORM (QEMU: iommu_platform=on), and kernel "
				       "6.18 answers EINVAL without it" :
				       "virtio-net binds zero-copy on kernel 6.18 with "
				       "VIRTIO_F_ACCESS_PLATFORM (QEMU: iommu_platform=on); 6.12 has none";
	}
	if (!strcmp(driver, "veth")) {
		return "veth has no zero copy";
	}
	return "the driver, or the way it is set up, has no AF_XDP zero copy";
}

/*
 * Why a driver that binds zero-copy is known to send wrongly in that mode, or NULL.
 *
 * virtio_net (kernels 6.11 on) sends every zero-copy frame behind one shared virtio-net header,
 * a static variable of the driver that it maps for DMA once per bind. Built into the kernel,
 * the variable lies in the kernel image, which the DMA mapping translates right. Built as a
 * module, as Debian's cloud kernel and most distributions' have it, it lies in module memory,
 * outside the linear map: the device is handed an address that is not the header's. It reads
 * the header from whatever guest memory lies there, or from none. In tests/vm's 1 GiB guests
 * the address fell inside guest memory in 3 boots of 12, the header read there had flags
 * 0xc8, and the host's tap dropped every frame harp sent (QEMU consumed them all).
 * With vhost-net an address outside guest memory stops the queue instead.
 */
static const char *zerocopy_quirk(const char *driver)
{
	if (!strcmp(driver, "virtio_net") && !access("/sys/module/virtio_net/initstate", F_OK)) {
		return "virtio_net is a loadable module here, and its zero-copy transmit gives the "
		       "device the address of a header in module memory, which is no DMA address: "
		       "frames go out behind whatever lies there, or not at all (kernels 6.11 on)";
	}
	return NULL;
}

/* Says once per process that zero copy was demanded on a driver known to send wrongly in it. */
static void report_quirk_demanded(const char *ifname, const char *quirk)
{
	static int reported; /* atomic: engines may open their queues from several threads */

	if (!__atomic_exchange_n(&reported, 1, __ATOMIC_RELAXED)) {
		pr_warn("xsk: %s binds zero-copy as HARP_BIND_MODE=zerocopy demands, though %s",
			ifname, quirk);
	}
}

static int open_socket(struct xsk_port *p, const char *ifname, int queue,
		       const struct harp_params *params, bool quiet_busy)
{
	int err, zc_err = 0, bind_mode = params->bind_mode;
	const char *quirk = NULL;
	char driver[64];

	if (bind_mode != HARP_BIND_COPY) {
		xsk_driver_name(ifname, driver, sizeof(driver));
		quirk = zerocopy_quirk(driver);
	}
	if (quirk && bind_mode == HARP_BIND_AUTO && params->zerocopy_quirks) {
		p->zc_quirk = quirk; /* auto takes copy mode at once (report_copy_mode says why) */
	} else if (bind_mode != HARP_BIND_COPY) {
		if (quirk && bind_mode == HARP_BIND_ZEROCOPY) {
			report_quirk_demanded(ifname, quirk);
		}
		err = bind_socket(p, ifname, queue, XDP_ZEROCOPY);
		if (!err) {
			p->zerocopy = true;
			return 0;
		}
		if (err == -EBUSY && quiet_busy) {
			return err; /* copy mode would find the queue held too */
		}
		if (bind_mode == HARP_BIND_ZEROCOPY) {
			pr_err("xsk: zero-copy bind of %s queue %d failed: %s (HARP_BIND_MODE=zerocopy; "
			       "driver %s: %s)%s",
			       ifname, queue, strerror(-err), driver[0] ? driver : "unknown",
			       zerocopy_need(driver, -err), err == -EBUSY ? bind_hint(-err) : "");
			return err;
		}
		/* auto: whatever the driver refused, copy mode may still work, so it is tried */
		zc_err = -err;
	}
	err = bind_socket(p, ifname, queue, XDP_COPY);
	if (err && !(err == -EBUSY && quiet_busy)) {
		pr_err("xsk: bind of %s queue %d failed: %s%s%s%s", ifname, queue, strerror(-err),
		       bind_hint(-err), zc_err ? "; zero copy was refused before it: " : "",
		       zc_err ? strerror(zc_err) : "");
	}
	if (!err && zc_err) {
		p->zc_refused = zc_err;
	}
	return err;
}

/*
 * Says once per process why its first copy-mode queue is not zero-copy: a
 * warning where the driver might bind zero-copy if set up for it, an info line where it never
 * can (EOPNOTSUPP: veth, older drivers).
 */
static void report_copy_mode(const char *ifname, int queue, int zc_err, const char *quirk)
{
	static int reported; /* atomic: engines may open their queues from several threads */
	char driver[64];
	bool never = zc_err == EOPNOTSUPP || zc_err == EPROTONOSUPPORT;

	if (__atomic_exchange_n(&reported, 1, __ATOMIC_RELAXED)) {
		return;
	}
	xsk_driver_name(ifname, driver, sizeof(driver));
	if (quirk) {
		pr_warn("xsk: %s (driver %s) runs in copy mode, zero copy untried: %s "
			"(HARP_ZEROCOPY_QUIRKS=0 or HARP_BIND_MODE=zerocopy would bind it anyway)",
			ifname, driver[0] ? driver : "unknown", quirk);
		return;
	}
	harp_log(never ? HARP_LOG_INFO : HARP_LOG_WARN,
		 "xsk: %s (driver %s) runs in copy mode: its zero-copy bind of queue %d failed with "
		 "%s (%s; HARP_BIND_MODE=zerocopy would refuse to start)",
		 ifname, driver[0] ? driver : "unknown", queue, strerror(zc_err),
		 zerocopy_need(driver, zc_err));
}

static int pools_init(struct xsk_port *p, uint32_t nframes, uint32_t frame_size)
{
	uint32_t half = nframes / 2, nslots = (uint32_t)(p->slot_base / XSK_SLOT_BYTES);
	int err;

	if (!p->slot_base) {
		return frame_pool_init(&p->pool, nframes, frame_size);
	}
	/* the pool has room for every frame: slots_dissolve may give it the upper half */
	err = frame_pool_init_range(&p->pool, nframes, 0, half, frame_size);
	if (!err) {
		err = frame_pool_init_range(&p->slots, nslots, p->slot_base, nslots,
					    XSK_SLOT_BYTES);
		if (err) {
			frame_pool_fini(&p->pool);
		}
	}
	return err;
}

static void pools_fini(struct xsk_port *p)
{
	frame_pool_fini(&p->pool);
	frame_pool_fini(&p->slots);
}

int xsk_port_layout(struct xsk_port *p, uint32_t nframes, uint32_t frame_size, bool slots,
		    int hugepages_mode)
{
	uint64_t half = (uint64_t)nframes / 2 * frame_size;
	int err;

	/* the upper half must hold whole slots, at a slot-aligned offset */
	p->slot_base = slots && half >= XSK_SLOT_BYTES && !(half % XSK_SLOT_BYTES) ? half : 0;
	err = umem_area_alloc(&p->area, (size_t)nframes * frame_size, hugepages_mode);
	if (err) {
		return err;
	}
	err = pools_init(p, nframes, frame_size);
	if (err) {
		umem_area_free(&p->area);
	}
	return err;
}

void xsk_port_unlayout(struct xsk_port *p)
{
	pools_fini(p);
	umem_area_free(&p->area);
}

/* Bound without multi-buffer: the slots' frames join the pool as frames of their own. */
static void slots_dissolve(struct xsk_port *p)
{
	uint32_t fsize = p->pool.frame_size, per = XSK_SLOT_BYTES / fsize, i, j;
	uint64_t addr;

	for (i = p->slots.free; i > 0; i--) {
		for (j = 0; j < per; j++) {
			addr = p->slots.addrs[i - 1] + (uint64_t)j * fsize;
			frame_pool_put(&p->pool, &addr, 1);
		}
	}
	frame_pool_fini(&p->slots);
	p->slot_base = 0;
}

/*
 * Preferred busy polling: the queue's NAPI instance runs when the engine calls recvfrom() (each
 * pass), on the engine's core, and the kernel defers its own softirq polling to it. Refused
 * settings (SO_BUSY_POLL above net.core.busy_read needs CAP_NET_ADMIN; kernels before 5.11
 * know no SO_PREFER_BUSY_POLL) leave the socket as it was, said once.
 */
static void set_busy_poll(struct xsk_port *p, const char *ifname, int queue, int us)
{
	static int said; /* atomic: engines open their queues from several threads */
	int one = 1, budget = 64;
	const char *opt = "SO_PREFER_BUSY_POLL";

	if (setsockopt(p->fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &one, sizeof(one)) == 0) {
		opt = "SO_BUSY_POLL";
		if (setsockopt(p->fd, SOL_SOCKET, SO_BUSY_POLL, &us, sizeof(us)) == 0) {
			opt = "SO_BUSY_POLL_BUDGET";
			if (setsockopt(p->fd, SOL_SOCKET, SO_BUSY_POLL_BUDGET, &budget,
				       sizeof(budget)) == 0) {
				p->busy_poll = true;
				return;
			}
		}
	}
	if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED)) {
		pr_warn("xsk: %s queue %d: busy polling not set (%s: %s%s); HARP_BUSY_POLL_US=%d "
			"is ignored",
			ifname, queue, opt, strerror(errno),
			errno == EPERM ? ", which needs CAP_NET_ADMIN" : "", us);
	}
	us = 0;
	setsockopt(p->fd, SOL_SOCKET, SO_BUSY_POLL, &us, sizeof(us));
	setsockopt(p->fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &us, sizeof(us));
}

/*
 * One try at the queue: a new UMEM, its fill ring stocked, the socket bound. A failed try
 * deletes its UMEM again; the frames its fill ring took are then missing from the pools.
 */
static int umem_bind(struct xsk_port *p, const char *ifname, int queue,
		     const struct harp_params *params, bool quiet_busy)
{
	uint32_t nframes = (uint32_t)params->frame_count, fsize = (uint32_t)params->frame_size;
	struct xsk_umem_config ucfg = {
		.fill_size = nframes / 2,
		.comp_size = nframes / 2,
		.frame_size = fsize,
		.frame_headroom = 0,
	};
	int err;

	/* libxdp sets up a new UMEM's rings but leaves their cached producer index as it finds
	 * it: the last try's, which fill_start advanced */
	memset(&p->fill, 0, sizeof(p->fill));
	memset(&p->comp, 0, sizeof(p->comp));
	err = xsk_umem__create(&p->umem, p->area.base, (uint64_t)nframes * fsize, &p->fill,
			       &p->comp, &ucfg);
	if (err) {
		pr_err("xsk: registering %u frames of UMEM for %s queue %d failed: %s%s", nframes,
		       ifname, queue, strerror(-err),
		       err == -EPERM ? " (AF_XDP sockets need CAP_NET_RAW)" :
		       err == -ENOMEM || err == -ENOBUFS ?
		       " (raise RLIMIT_MEMLOCK or grant CAP_IPC_LOCK)" : "");
		return err;
	}
	/*
	 * The fill ring is stocked before the bind: a zero-copy driver posts its frames to the
	 * receive queue as it binds, and virtio-net, finding none, leaves the queue empty until
	 * its refill work tries again half a second later.
	 */
	err = fill_start(p);
	if (err) {
		pr_err("xsk: cannot fill the fill ring of %s queue %d: %s", ifname, queue,
		       strerror(-err));
		goto err_umem;
	}
	err = open_socket(p, ifname, queue, params, quiet_busy);
	if (err) {
		goto err_umem;
	}
	return 0;

err_umem:
	xsk_umem__delete(p->umem);
	p->umem = NULL;
	return err;
}

/*
 * The kernel frees an AF_XDP socket after its process has gone, not at exit, so a queue released
 * a moment ago can still read EBUSY; a live harp process holding it is named by the caller
 * (steer's queue owners) after the wait. So wait a bounded time for the queue. A failed bind
 * leaves libxdp's UMEM without its fill and completion rings, so each try starts from a new one.
 * On failure the pools may be torn down already; pools_fini is safe on them either way.
 */
static int bind_wait(struct xsk_port *p, const char *ifname, int queue,
		     const struct harp_params *params, int busy_wait_ms)
{
	int err, waited_ms;

	for (waited_ms = 0;; waited_ms += 10) {
		err = umem_bind(p, ifname, queue, params,
				!busy_wait_ms || waited_ms < busy_wait_ms);
		if (err != -EBUSY || waited_ms >= busy_wait_ms) {
			break;
		}
		/* the frames on the deleted fill ring come back: the pools start over */
		pools_fini(p);
		err = pools_init(p, (uint32_t)params->frame_count, (uint32_t)params->frame_size);
		if (err) {
			return err;
		}
		usleep(10 * 1000);
	}
	if (!err && waited_ms > 0) {
		pr_debug("xsk: %s queue %d came free after %d ms", ifname, queue, waited_ms);
	}
	return err;
}

/*
 * Copy mode builds an skb for each TX descriptor and charges it to the socket's send buffer until
 * the driver frees it; a full buffer is an EAGAIN. The default (net.core.wmem_default, 212,992
 * bytes here) covers about 80 skbs of a 1,500-byte frame, fewer than one batch: where the driver
 * frees skbs later than at once (threaded NAPI, a NIC's TX completions) it caps what copy mode
 * has in flight. So the buffer is sized to the TX ring: a frame's bytes and an skb's overhead for
 * each descriptor. SO_SNDBUFFORCE passes net.core.wmem_max with CAP_NET_ADMIN; without it,
 * SO_SNDBUF gets what wmem_max allows. The kernel doubles the value it is given.
 */
static void size_sndbuf(struct xsk_port *p)
{
	int want = (int)(p->ring_size * (p->pool.frame_size + 1024u) / 2);
	socklen_t len = sizeof(p->sndbuf);

	if (setsockopt(p->fd, SOL_SOCKET, SO_SNDBUFFORCE, &want, sizeof(want)) &&
	    setsockopt(p->fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want))) {
		pr_debug("xsk: send buffer of %d bytes not accepted: %s", 2 * want,
			 strerror(errno));
	}
	if (getsockopt(p->fd, SOL_SOCKET, SO_SNDBUF, &p->sndbuf, &len)) {
		p->sndbuf = 0;
	}
	if (p->sndbuf < 2 * want) {
		pr_debug("xsk: send buffer %d bytes, not the %d wanted (net.core.wmem_max; "
			 "CAP_NET_ADMIN passes it)",
			 p->sndbuf, 2 * want);
	}
}

/* Socket options for the bound socket, each best effort. */
static void port_tune(struct xsk_port *p, const char *ifname, int queue,
		      const struct harp_params *params)
{
	int budget;

	if (params->busy_poll_us) {
		set_busy_poll(p, ifname, queue, params->busy_poll_us);
	}
	/* One sendto() moves at most 32 frames unless the budget is raised (kernel 6.15+). */
	budget = (int)p->ring_size;
	if (setsockopt(p->fd, SOL_XDP, XDP_MAX_TX_SKB_BUDGET, &budget, sizeof(budget))) {
		pr_debug("xsk: XDP_MAX_TX_SKB_BUDGET not accepted: %s", strerror(errno));
	}
	size_sndbuf(p);
}

int xsk_port_open(struct xsk_port *p, const char *ifname, int queue,
		  const struct harp_params *params, int busy_wait_ms)
{
	uint32_t nframes = (uint32_t)params->frame_count;
	int err;

	memset(p, 0, sizeof(*p));
	p->queue = queue;
	p->ring_size = nframes / 2;
	p->fill_target = p->ring_size < XSK_FILL_START ? p->ring_size : XSK_FILL_START;
	err = xsk_port_layout(p, nframes, (uint32_t)params->frame_size,
			      params->multi_buffer != HARP_MULTI_BUFFER_OFF, params->hugepages);
	if (err) {
		return err;
	}
	err = bind_wait(p, ifname, queue, params, busy_wait_ms);
	if (err) {
		xsk_port_unlayout(p);
		return err;
	}
	if (p->slot_base && !p->sg) {
		p->sg_refused = true;
		slots_dissolve(p);
	}
	if (p->zc_refused || p->zc_quirk) {
		report_copy_mode(ifname, queue, p->zc_refused, p->zc_quirk);
	}
	p->fd = xsk_socket__fd(p->xsk);
	port_tune(p, ifname, queue, params);
	if (p->zerocopy) {
		/*
		 * A zero-copy driver keeps its own receive queue (virtio-net: 256 descriptors)
		 * stocked from the fill ring, and virtio-net, finding the fill ring empty, asks for
		 * no wake-up but waits half a second for its refill work: the fill ring starts full,
		 * so that the driver never finds it empty while frames are on their way back.
		 */
		xsk_port_expect(p, p->ring_size);
	}
	return 0;
}

void xsk_port_close(struct xsk_port *p)
{
	if (!p || !p->xsk) {
		return;
	}
	xsk_socket__delete(p->xsk);
	xsk_umem__delete(p->umem);
	xsk_port_unlayout(p);
	memset(p, 0, sizeof(*p));
}

uint32_t xsk_port_reclaim(struct xsk_port *p)
{
	uint32_t idx, n, i, total = 0;
	uint64_t addrs[64];

	/* the whole completion ring: a pass may send more than one batch of frames */
	do {
		n = xsk_ring_cons__peek(&p->comp, ARRAY_SIZE(addrs), &idx);
		for (i = 0; i < n; i++) {
			addrs[i] = *xsk_ring_cons__comp_addr(&p->comp, idx + i);
		}
		if (n) {
			xsk_ring_cons__release(&p->comp, n);
		}
		if (n && p->sg) {
			/* a slot comes back once, with its first piece; a frame as it is */
			for (i = 0; i < n; i++) {
				if (addrs[i] < p->slot_base) {
					frame_pool_put(&p->pool, &addrs[i], 1);
					total++;
				} else if (((addrs[i] - p->slot_base) & (XSK_SLOT_BYTES - 1)) <
					   p->pool.frame_size) {
					frame_pool_put(&p->slots, &addrs[i], 1);
					total++;
				}
			}
		} else if (n) {
			frame_pool_put(&p->pool, addrs, n);
			total += n;
		}
	} while (n == ARRAY_SIZE(addrs));
	return total;
}

/*
 * Raises fill_target towards target (at most ring_size, as far as the pool allows) and reserves
 * fill ring slots for n frames being given back plus the new ones; returns how many new ones, or
 * -1 when the ring has no room (it always has: with the rx ring it holds at most fill_target).
 */
static int fill_reserve(struct xsk_port *p, uint64_t target, uint32_t n, uint32_t *idx)
{
	uint32_t more = 0;

	if (target > p->ring_size) {
		target = p->ring_size;
	}
	if (target > p->fill_target) {
		more = (uint32_t)target - p->fill_target;
		more = more < p->pool.free ? more : p->pool.free;
	}
	if (xsk_ring_prod__reserve(&p->fill, n + more, idx) != n + more) {
		return -1;
	}
	p->fill_target += more;
	p->fill_grows += more > 0;
	return (int)more;
}

/* Writes more frames from the pool into the fill ring after the n from slot idx; submits all. */
static void fill_submit(struct xsk_port *p, uint32_t idx, uint32_t n, uint32_t more)
{
	uint64_t addr = 0;
	uint32_t i;

	for (i = n; i < n + more; i++) {
		frame_pool_get(&p->pool, &addr, 1); /* fill_reserve counted them */
		*xsk_ring_prod__fill_addr(&p->fill, idx + i) = addr;
	}
	xsk_ring_prod__submit(&p->fill, n + more);
}

void xsk_port_expect(struct xsk_port *p, uint64_t n)
{
	uint32_t idx;
	int more;

	if (2 * n <= p->fill_target || p->fill_target == p->ring_size || p->no_refill) {
		return;
	}
	more = fill_reserve(p, 2 * n, 0, &idx);
	if (more > 0) {
		fill_submit(p, idx, 0, (uint32_t)more);
	}
}

void xsk_port_refill(struct xsk_port *p, uint32_t idx, uint32_t n)
{
	uint64_t mask = ~((uint64_t)p->pool.frame_size - 1), addr;
	uint32_t left = p->ring_size - xsk_prod_nb_free(&p->fill, p->ring_size);
	uint32_t idx_fill, i;
	int more;

	more = p->no_refill ? -1 :
			      fill_reserve(p, left < p->fill_target / 2 ? p->ring_size : 0, n, &idx_fill);
	if (more < 0) { /* no room (or the stall fault): the frames go back to the pool */
		for (i = 0; i < n; i++) {
			addr = xsk_umem__extract_addr(xsk_ring_cons__rx_desc(&p->rx, idx + i)->addr);
			frame_pool_put(&p->pool, &addr, 1);
		}
		return;
	}
	for (i = 0; i < n; i++) {
		addr = xsk_umem__extract_addr(xsk_ring_cons__rx_desc(&p->rx, idx + i)->addr);
		*xsk_ring_prod__fill_addr(&p->fill, idx_fill + i) = addr & mask;
	}
	fill_submit(p, idx_fill, n, (uint32_t)more);
}

uint32_t xsk_port_chain(struct xsk_port *p, uint32_t idx, uint64_t addr, uint32_t len)
{
	uint32_t fsize = p->pool.frame_size, pieces = xsk_port_tx_pieces(p, len), i;

	for (i = 0; i < pieces; i++) {
		struct xdp_desc *d = xsk_ring_prod__tx_desc(&p->tx, idx + i);

		d->addr = addr + (uint64_t)i * fsize;
		d->len = len - i * fsize < fsize ? len - i * fsize : fsize;
		d->options = i + 1 < pieces ? XDP_PKT_CONTD : 0;
	}
	return pieces;
}

/* Descriptors from idx, of n, up to and including the first without XDP_PKT_CONTD; n if none. */
static uint32_t chain_span(struct xsk_port *p, uint32_t idx, uint32_t n, bool *ended)
{
	uint32_t pieces = 1;

	while (pieces < n &&
	       (xsk_ring_cons__rx_desc(&p->rx, idx + pieces - 1)->options & XDP_PKT_CONTD)) {
		pieces++;
	}
	*ended = !(xsk_ring_cons__rx_desc(&p->rx, idx + pieces - 1)->options & XDP_PKT_CONTD);
	return pieces;
}

/*
 * A chain from idx whose end is not among the n peeked: can no later peek hold more of it? Only
 * when the peek began with it (idx is the ring's consumer position) and stopped short of
 * descriptors the ring was seen to hold (the caller's batch was full), or the ring holds nothing
 * else. Otherwise it waits for a peek from its head that holds its end, as any chain does: one
 * too long is then given back whole, and counted once.
 */
static bool chain_outgrows_peek(const struct xsk_port *p, uint32_t idx, uint32_t n)
{
	return idx == *p->rx.consumer && (p->rx.cached_prod != idx + n || n >= p->ring_size);
}

int xsk_port_gather(struct xsk_port *p, uint32_t idx, uint32_t n, uint32_t cap,
		    struct wire_pieces *pk)
{
	uint32_t fsize = p->pool.frame_size, pieces, i;
	const struct xdp_desc *d = xsk_ring_cons__rx_desc(&p->rx, idx);
	bool bad = false, ended;

	if (unlikely(p->rx_skip)) {
		/* the rest of a chain that outgrew a peek: pieces without a head, given back */
		pieces = chain_span(p, idx, n, &ended);
		p->rx_skip = !ended;
		return -(int)pieces;
	}
	if (!(d->options & XDP_PKT_CONTD)) {
		pk->at[0] = xsk_port_frame(p, xsk_umem__add_offset_to_addr(d->addr));
		pk->len[0] = d->len;
		pk->n = 1;
		pk->total = d->len;
		return 1;
	}
	pieces = chain_span(p, idx, n, &ended);
	if (!ended) {
		if (!chain_outgrows_peek(p, idx, n)) {
			return 0;
		}
		p->rx_skip = true; /* the rest follows without a head: it goes too, to its end */
		return -(int)pieces;
	}
	if (pieces > XSK_CHAIN_MAX) {
		return -(int)pieces; /* more than the kernel makes, all of it */
	}
	pk->total = 0;
	for (i = 0; i < pieces; i++) {
		uint64_t addr;

		d = xsk_ring_cons__rx_desc(&p->rx, idx + i);
		addr = xsk_umem__add_offset_to_addr(d->addr);
		if ((addr & (fsize - 1)) + d->len > fsize || d->len > cap - pk->total) {
			bad = true; /* still counted through to the chain's end */
			continue;
		}
		if (!bad) {
			pk->at[i] = xsk_port_frame(p, addr);
			pk->len[i] = d->len;
			pk->total += d->len;
		}
	}
	pk->n = pieces;
	return bad ? -(int)pieces : (int)pieces;
}

void xsk_port_busy_poll(struct xsk_port *p)
{
	p->busy_polls++;
	recvfrom(p->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
}

void xsk_port_wake_rx(struct xsk_port *p)
{
	if (xsk_ring_prod__needs_wakeup(&p->fill)) {
		p->rx_kicks++;
		recvfrom(p->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
	}
}

/* After a push-back: has enough of what the kernel held completed, or has the wait run out? */
static bool kick_due(const struct xsk_port *p, uint64_t now)
{
	uint32_t done = __atomic_load_n(p->comp.producer, __ATOMIC_ACQUIRE) - p->kick_comp;

	return done >= p->kick_wait || now - p->kick_held_ns >= XSK_KICK_HOLD_NS;
}

int xsk_port_kick(struct xsk_port *p, uint64_t now)
{
	uint32_t comp, held;

	if (!p->tx_pending || !xsk_ring_prod__needs_wakeup(&p->tx)) {
		p->tx_pending = 0;
		p->kick_held = false;
		return 0;
	}
	if (p->kick_held && !kick_due(p, now)) {
		p->tx_kick_held++;
		return 0;
	}
	p->tx_kicks++;
	if (sendto(p->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0) {
		if (errno != EAGAIN && errno != EBUSY && errno != ENOBUFS) {
			return -errno;
		}
		/* The kernel still holds descriptors it took (skbs charged to the send buffer, in
		 * the driver's queue): kick again once half of them are done. Holding none, it
		 * stopped at its per-call budget, and the next pass goes on at once. */
		comp = __atomic_load_n(p->comp.producer, __ATOMIC_ACQUIRE);
		held = __atomic_load_n(p->tx.consumer, __ATOMIC_ACQUIRE) - comp;
		p->tx_kick_busy++;
		p->kick_held = held > 0;
		p->kick_comp = comp;
		p->kick_wait = (held + 1) / 2;
		p->kick_held_ns = now;
		return 0; /* keep tx_pending */
	}
	p->kick_held = false;
	p->tx_pending = 0;
	return 0;
}

int xsk_port_stats(const struct xsk_port *p, struct harp_queue_stats *st)
{
	struct xdp_statistics xs;
	socklen_t len = sizeof(xs);

	memset(&xs, 0, sizeof(xs));
	if (getsockopt(p->fd, SOL_XDP, XDP_STATISTICS, &xs, &len)) {
		return -errno;
	}
	st->xdp_rx_dropped = xs.rx_dropped;
	st->xdp_rx_invalid_descs = xs.rx_invalid_descs;
	st->xdp_tx_invalid_descs = xs.tx_invalid_descs;
	if (len >= sizeof(xs)) {
		st->xdp_rx_ring_full = xs.rx_ring_full;
		st->xdp_rx_fill_ring_empty = xs.rx_fill_ring_empty_descs;
		st->xdp_tx_ring_empty = xs.tx_ring_empty_descs;
	}
	st->fill_depth = p->fill_target;
	st->fill_grows = p->fill_grows;
	st->rx_kicks = p->rx_kicks;
	st->tx_kicks = p->tx_kicks;
	st->tx_kick_busy = p->tx_kick_busy;
	st->tx_kick_held = p->tx_kick_held;
	st->tx_sndbuf = (uint64_t)p->sndbuf;
	st->busy_polls = p->busy_polls;
	return 0;
}
