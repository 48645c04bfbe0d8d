// SPDX-License-Identifier: Apache-2.0
/*
 * Connection set-up over a kernel TCP connection, which stays open afterwards as the connection's
 * control channel (chan.c).
 *
 * The listener's handle names a TCP address. The connector sends a hello (session token, its
 * connection id, data address, UDP port, queue count, MTU); the listener picks the queue both
 * ends will use and answers in kind. Each side then looks up the peer's next-hop MAC in the
 * kernel's neighbour table (the TCP handshake has just resolved it), and the connection goes to
 * its engine; from then on data flows only over AF_XDP.
 *
 * Nothing here blocks: each call advances a state machine kept in the connection.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "control.h"
#include "ctrlmsg.h"

enum setup_step {
	STEP_TCP_CONNECT = 1,
	STEP_SEND_HELLO,
	STEP_RECV_HELLO,
	STEP_RESOLVE,
	STEP_SEND_REPLY,
	STEP_DONE,
};

struct ctrl_setup {
	enum setup_step step;
	uint64_t deadline_ns;
	uint64_t nonce;
	struct hello out, in;
	size_t out_done, in_done;
	int queue;
	struct auth_keypair kp; /* HARP_AUTH: this side's pair for the connection */
	uint8_t auth_flags;	/* what this side's hellos say (AUTH_F_*) */
	char peer_name[CTRL_PEER_NAME];
	char why[192]; /* why it failed, for the listener's line about dropping it */
};

/*
 * A set-up failed: the connector says why at once; the listener keeps the reason for its one
 * line about dropping the connection (rate-limited there), so a port scan does not flood the log.
 */
__attribute__((format(printf, 2, 3))) static void setup_fail(struct harp_conn *c,
							     const char *fmt, ...)
{
	struct ctrl_setup *s = c->setup;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->why, sizeof(s->why), fmt, ap);
	va_end(ap);
	if (c->is_listener_side) {
		pr_debug("setup with %s: %s", s->peer_name, s->why);
	} else {
		pr_err("setup with %s: %s", s->peer_name, s->why);
	}
}

/*
 * The control connection also watches the peer's host: with keepalive and a user timeout both
 * at HARP_PEER_TIMEOUT_MS, a host that vanishes (power, partition) fails the connection even
 * when no data is outstanding to time out on. A process that merely stops is another matter:
 * its kernel still answers, and the data path's timer catches it.
 */
static void ctrl_keepalive(int fd, int peer_timeout_ms)
{
	int on = 1, idle = peer_timeout_ms / 3000, intvl = 1, cnt, user = peer_timeout_ms;

	if (idle < 1) {
		idle = 1;
	}
	cnt = peer_timeout_ms / 1000 - idle;
	if (cnt < 1) {
		cnt = 1;
	}
	/* best effort: a kernel without one of these still works, only slower to notice */
	(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof(user));
}

/*
 * The control connection's segments fit every path of its family (576 bytes of IPv4, 1280 of
 * IPv6): a hop narrower than the interfaces that drops larger frames without a word (no ICMP)
 * would black-hole a full-sized segment of path reports, retransmitted at the same size until
 * the user timeout fails the connection, while harp's own packets found the size by probing.
 * Set before listen() (accepted sockets inherit it) and connect(), so each side's SYN asks the
 * peer for as much; the messages are a few dozen bytes, so nothing is lost by it.
 */
static void ctrl_small_segments(int fd, int family)
{
	int mss = family == AF_INET6 ? 1280 - 40 - 20 : 576 - 20 - 20;

	(void)setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, sizeof(mss));
}

/* ---- socket addresses of either family ---------------------------------------------------- */

/* ip (IPv4 mapped, or IPv6) and port (network order) as a socket address; a link-local IPv6
 * address is scoped to ifindex, harp's interface. Returns its length. */
static socklen_t sockaddr_make(struct sockaddr_storage *ss, const union wire_ip *ip,
			       uint16_t port, int ifindex)
{
	memset(ss, 0, sizeof(*ss));
	if (wire_ip_is4(ip)) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		in->sin_addr.s_addr = ip->w[3];
		in->sin_port = port;
		return sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

		in6->sin6_family = AF_INET6;
		memcpy(in6->sin6_addr.s6_addr, ip->b, 16);
		in6->sin6_port = port;
		in6->sin6_scope_id = netinfo_link_local(ip->b) ? (uint32_t)ifindex : 0;
		return sizeof(*in6);
	}
}

/* The address (IPv4 mapped, or IPv6) and port (network order) of a socket address. */
static void sockaddr_read(const struct sockaddr_storage *ss, union wire_ip *ip, uint16_t *port)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;

		*ip = wire_ip4(in->sin_addr.s_addr);
		*port = in->sin_port;
	} else {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;

		memcpy(ip->b, in6->sin6_addr.s6_addr, 16);
		*port = in6->sin6_port;
	}
}

/* "a.b.c.d:port", or "[v6]:port" */
static void endpoint_text(char *buf, size_t len, const union wire_ip *ip, uint16_t port)
{
	bool ip4 = wire_ip_is4(ip);

	snprintf(buf, len, "%s%s%s:%u", ip4 ? "" : "[", WIRE_IP_STR(ip), ip4 ? "" : "]",
		 ntohs(port));
}

/* ---- listener ------------------------------------------------------------------------------ */

int ctrl_listen(struct harp_ctx *ctx, struct harp_handle *handle, struct harp_listener *l)
{
	struct sockaddr_storage sa;
	socklen_t salen = sockaddr_make(&sa, &ctx->ip, 0, ctx->ifi.ifindex);
	struct ctrlmsg_handle hw;
	int err;

	l->fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->fd < 0) {
		err = -errno;
		pr_err("listen: socket() failed: %s", strerror(errno));
		return err;
	}
	ctrl_small_segments(l->fd, sa.ss_family);
	if (bind(l->fd, (struct sockaddr *)&sa, salen) || listen(l->fd, SOMAXCONN) ||
	    getsockname(l->fd, (struct sockaddr *)&sa, &salen)) {
		err = -errno;
		pr_err("listen: TCP listener on %s of %s failed: %s", WIRE_IP_STR(&ctx->ip),
		       ctx->ifi.name, strerror(errno));
		close(l->fd);
		l->fd = -1;
		return err;
	}
	if (getrandom(&l->nonce, sizeof(l->nonce), 0) != sizeof(l->nonce)) {
		l->nonce = now_ns() ^ (uint64_t)(uintptr_t)l;
	}
	sockaddr_read(&sa, &hw.ip, &hw.tcp_port);
	hw.nonce = l->nonce;
	ctrlmsg_handle_build(handle->bytes, &hw);
	return 0;
}

static struct ctrl_setup *setup_new(struct harp_conn *c, enum setup_step step)
{
	struct ctrl_setup *s = calloc(1, sizeof(*s));

	if (!s) {
		return NULL;
	}
	s->step = step;
	s->deadline_ns = now_ns() + (uint64_t)c->ctx->params.connect_timeout_ms * 1000000ull;
	c->setup = s;
	return s;
}

int ctrl_accept(struct harp_listener *l, int *fd, char *peer_name, size_t len)
{
	struct sockaddr_storage peer;
	socklen_t plen = sizeof(peer);
	union wire_ip ip;
	uint16_t port;

	*fd = accept4(l->fd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (*fd < 0) {
		/* a connection reset before we took it is gone: the next one may be fine */
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
				       errno == ECONNABORTED ?
			       -EAGAIN :
			       -errno;
	}
	sockaddr_read(&peer, &ip, &port);
	endpoint_text(peer_name, len, &ip, port);
	return 0;
}

int ctrl_adopt(struct harp_listener *l, struct harp_conn *c, int fd, const char *peer_name)
{
	c->ctrl_fd = fd;
	if (!setup_new(c, STEP_RECV_HELLO)) {
		return -ENOMEM;
	}
	ctrl_keepalive(fd, l->ctx->params.peer_timeout_ms);
	c->is_listener_side = true;
	c->setup->nonce = l->nonce;
	snprintf(c->setup->peer_name, sizeof(c->setup->peer_name), "%s", peer_name);
	return 0;
}

/* ---- connector ----------------------------------------------------------------------------- */

/* This side's address of the family the handle names, or 0 and an error line: none. */
static int local_of_family(struct harp_conn *c, const union wire_ip *peer, union wire_ip *me)
{
	const struct if_info *ifi = &c->ctx->ifi;
	static const uint8_t zero[16];

	if (wire_ip_is4(peer) ? !ifi->ipv4 : !memcmp(ifi->ipv6, zero, 16)) {
		pr_err("connect: the listener's handle names %s address %s, and interface %s has "
		       "no %s address; give it one, or make the listener's rank use the other "
		       "family (HARP_FAMILY, NCCL_SOCKET_FAMILY)",
		       wire_ip_is4(peer) ? "an IPv4" : "an IPv6", WIRE_IP_STR(peer), ifi->name,
		       wire_ip_is4(peer) ? "IPv4" : "IPv6");
		return -EAFNOSUPPORT;
	}
	if (wire_ip_is4(peer)) {
		*me = wire_ip4(ifi->ipv4);
	} else {
		memcpy(me->b, ifi->ipv6, 16);
	}
	return 0;
}

int ctrl_connect(struct harp_conn *c, const struct harp_handle *handle)
{
	struct ctrlmsg_handle hw;
	struct sockaddr_storage sa, me;
	socklen_t salen, melen;
	union wire_ip my_ip;
	struct ctrl_setup *s;
	char why[128];
	int err;

	/* harp_connect reads only the bytes harp_listen filled: the rest are the caller's */
	err = ctrlmsg_handle_parse(handle->bytes, HARP_HANDLE_USED, &hw, why, sizeof(why));
	if (err) {
		pr_err("connect: %s", why);
		return err;
	}
	err = local_of_family(c, &hw.ip, &my_ip);
	if (err) {
		return err;
	}
	s = setup_new(c, STEP_TCP_CONNECT);
	if (!s) {
		return -ENOMEM;
	}
	s->nonce = hw.nonce;
	salen = sockaddr_make(&sa, &hw.ip, hw.tcp_port, c->ctx->ifi.ifindex);
	melen = sockaddr_make(&me, &my_ip, 0, c->ctx->ifi.ifindex);
	endpoint_text(s->peer_name, sizeof(s->peer_name), &hw.ip, hw.tcp_port);
	c->ctrl_fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->ctrl_fd < 0) {
		return -errno;
	}
	ctrl_keepalive(c->ctrl_fd, c->ctx->params.peer_timeout_ms);
	ctrl_small_segments(c->ctrl_fd, sa.ss_family);
	/* Leave from harp's interface address, so the data path and this one agree. */
	if (bind(c->ctrl_fd, (struct sockaddr *)&me, melen)) {
		err = -errno;
		pr_err("connect: binding to %s of %s failed: %s", WIRE_IP_STR(&my_ip),
		       c->ctx->ifi.name, strerror(errno));
		return err;
	}
	if (connect(c->ctrl_fd, (struct sockaddr *)&sa, salen) && errno != EINPROGRESS) {
		err = -errno;
		pr_err("connect: TCP connection to %s failed: %s", s->peer_name, strerror(errno));
		return err;
	}
	return 0;
}

/* ---- the handshake ------------------------------------------------------------------------- */

static void hello_fill(struct harp_conn *c, struct hello *h, enum hello_type type, int queue)
{
	struct harp_ctx *ctx = c->ctx;

	memset(h, 0, sizeof(*h));
	h->magic = htonl(CHAN_MAGIC);
	h->version = htons(HELLO_VERSION);
	h->type = htons(type);
	h->nonce = c->setup->nonce;
	h->token = c->token;
	h->conn_id = htonl(c->id);
	h->family = c->path.ip6 ? 6 : 4;
	if (c->path.ip6) {
		memcpy(h->ipv6, c->path.src_ip.b, 16);
	} else {
		h->ipv4 = c->path.src_ip.w[3];
	}
	h->udp_port = htons((uint16_t)ctx->params.port_base);
	h->port_count = htons((uint16_t)ctx->params.port_count);
	h->queue = htons((uint16_t)queue);
	h->mtu = htons((uint16_t)ctx->ip_mtu);
	h->auth = c->setup->auth_flags;
	if (h->auth & AUTH_F_KEY) {
		memcpy(h->auth_pk, c->setup->kp.pk, sizeof(h->auth_pk));
	}
}

/* ---- HARP_AUTH: both ends must ask for it; the keys come with the hellos ---- */

/* Both: this side's key pair, and the flags its hellos carry. */
static int auth_prepare(struct harp_conn *c)
{
	struct ctrl_setup *s = c->setup;

	if (!c->ctx->params.auth) {
		return 0;
	}
	if (auth_load(s->why, sizeof(s->why))) {
		pr_err("setup with %s: %s", s->peer_name, s->why);
		return -ENOENT;
	}
	auth_keypair(&s->kp);
	s->auth_flags = AUTH_F_WANT | AUTH_F_KEY | (auth_has_aes() ? AUTH_F_AES : 0);
	return 0;
}

static atomic_bool auth_said; /* the process's one INFO line about it */

/*
 * Checks the peer's half against this side's and, when the connection runs HARP_AUTH, derives
 * its keys. Every frame then carries a trailer, so a payload holds that much less.
 */
static int auth_agree(struct harp_conn *c, const struct hello *h)
{
	struct ctrl_setup *s = c->setup;
	bool want = c->ctx->params.auth, peer = h->auth & AUTH_F_WANT;
	int err = 0;

	if (want != peer) {
		setup_fail(c, "HARP_AUTH is %d on this side and %d on the peer: set one value on "
			   "every rank", want, peer);
		return -EKEYREJECTED;
	}
	if (!want) {
		return 0;
	}
	if (!(h->auth & AUTH_F_KEY)) {
		setup_fail(c, "the peer asked for HARP_AUTH but sent no key");
		return -EPROTO;
	}
	c->auth = auth_new(&s->kp, h->auth_pk, !c->is_listener_side,
			   (s->auth_flags & AUTH_F_AES) && (h->auth & AUTH_F_AES), &c->path.src_ip,
			   &c->path.dst_ip, &err);
	if (!c->auth) {
		setup_fail(c, "HARP_AUTH: no keys from the peer's public key: %s", strerror(-err));
		return err;
	}
	c->payload_max -= HARP_AUTH_TRAILER;
	if (!atomic_exchange(&auth_said, true)) {
		pr_info("HARP_AUTH=1: every frame carries a MAC (%s; the first connection, with "
			"%s)", auth_algorithm(c->auth), s->peer_name);
	}
	pr_debug("setup with %s: packets authenticated with %s", s->peer_name,
		 auth_algorithm(c->auth));
	return 0;
}

/* Moves bytes of a partial write or read; 1 when complete, 0 when more is needed, or -errno. */
static int io_step(int fd, void *buf, size_t len, size_t *done, bool write_dir)
{
	while (*done < len) {
		ssize_t n = write_dir ? send(fd, (char *)buf + *done, len - *done, MSG_NOSIGNAL)
				      : recv(fd, (char *)buf + *done, len - *done, 0);

		if (n > 0) {
			*done += (size_t)n;
			continue;
		}
		if (n == 0) {
			return -ECONNRESET;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
			return 0;
		}
		return -errno;
	}
	return 1;
}

static int check_hello(struct harp_conn *c, const struct hello *h, enum hello_type want)
{
	struct ctrl_setup *s = c->setup;
	struct ctrlmsg_hello_view view;
	char why[sizeof(s->why)];
	int err;

	err = ctrlmsg_hello_check(h, sizeof(*h), want, s->nonce, &view, why, sizeof(why));
	if (!err) {
		return 0;
	}
	if (view.type != HELLO_REFUSE) {
		setup_fail(c, "%s", why);
		return err;
	}
	/* the peer refused: said at once, on whichever side this is */
	if (view.refuse_errno == EKEYREJECTED) {
		pr_err("setup with %s: the listener refused the connection: HARP_AUTH differs "
		       "(%d on this side): set one value on every rank",
		       s->peer_name, c->ctx->params.auth);
		return err;
	}
	if (view.refuse_errno == EMFILE) {
		pr_err("setup with %s: the listener refused the connection: it has as many harp "
		       "connections open as its HARP_CONNS_MAX allows",
		       s->peer_name);
		return err;
	}
	pr_err("setup with %s: %s", s->peer_name, why);
	return err;
}

/* Takes the peer's half of the hello into the connection: its data address must be of the
 * control connection's family (local_address gave it). */
static int apply_hello(struct harp_conn *c, const struct hello *h)
{
	int mtu = ntohs(h->mtu) < c->ctx->ip_mtu ? ntohs(h->mtu) : c->ctx->ip_mtu;

	if (h->family != (c->path.ip6 ? 6 : 4)) {
		setup_fail(c, "the peer's hello names an IPv%u data address on an IPv%u control "
			   "connection", h->family, c->path.ip6 ? 6 : 4);
		return -EPROTO;
	}
	c->peer_id = ntohl(h->conn_id);
	/* ports: the paths probing finds within the peer's range */
	if (c->path.ip6) {
		memcpy(c->path.dst_ip.b, h->ipv6, 16);
	} else {
		c->path.dst_ip = wire_ip4(h->ipv4);
	}
	c->peer_port_lo = ntohs(h->udp_port);
	c->peer_port_span = ntohs(h->port_count);
	c->payload_max = (uint32_t)mtu - wire_pkt_overhead(c->path.ip6);
	conn_pmtu_init(c, (uint32_t)mtu);
	return 0;
}

/* This side's data address, and so the connection's family: the control connection's. */
static int local_address(struct harp_conn *c)
{
	struct sockaddr_storage me;
	socklen_t len = sizeof(me);
	uint16_t port;

	if (getsockname(c->ctrl_fd, (struct sockaddr *)&me, &len)) {
		return -errno;
	}
	c->path.ip6 = me.ss_family == AF_INET6;
	sockaddr_read(&me, &c->path.src_ip, &port);
	memcpy(c->path.src_mac, c->ctx->ifi.mac, 6);
	return 0;
}

static int resolve(struct harp_conn *c)
{
	int route_if = 0;
	int err = netinfo_nexthop_mac(&c->path.dst_ip, c->ctx->ifi.ifindex, c->path.dst_mac,
				      &route_if);

	if (err == -EXDEV) {
		pr_err("setup with %s: the route to the peer leaves by interface index %d, not by "
		       "harp's %s; set HARP_IFNAME to the interface that reaches the peer",
		       c->setup->peer_name, route_if, c->ctx->ifi.name);
	} else if (err && err != -EAGAIN) {
		pr_err("setup with %s: no route to the peer: %s", c->setup->peer_name,
		       strerror(-err));
	}
	return err;
}

static void refuse(struct harp_conn *c, int err)
{
	struct hello h;

	hello_fill(c, &h, HELLO_REFUSE, 0);
	h.refuse_errno = htons((uint16_t)-err);
	if (send(c->ctrl_fd, &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		pr_debug("setup: the refusal could not be sent: %s", strerror(errno));
	}
}

static int step_connector(struct harp_conn *c)
{
	struct ctrl_setup *s = c->setup;
	int err, so_err = 0;
	socklen_t len = sizeof(so_err);

	switch (s->step) {
	case STEP_TCP_CONNECT:
		if (getsockopt(c->ctrl_fd, SOL_SOCKET, SO_ERROR, &so_err, &len)) {
			return -errno;
		}
		if (so_err) {
			pr_err("setup: TCP connection to %s failed: %s", s->peer_name,
			       strerror(so_err));
			return -so_err;
		}
		{
			struct sockaddr_storage peer;
			socklen_t plen = sizeof(peer);

			if (getpeername(c->ctrl_fd, (struct sockaddr *)&peer, &plen)) {
				return -EAGAIN; /* not connected yet */
			}
		}
		err = local_address(c);
		if (err) {
			return err;
		}
		err = auth_prepare(c);
		if (err) {
			return err;
		}
		hello_fill(c, &s->out, HELLO_REQ, c->ctx->nengines);
		s->step = STEP_SEND_HELLO;
		/* fall through */
	case STEP_SEND_HELLO:
		err = io_step(c->ctrl_fd, &s->out, sizeof(s->out), &s->out_done, true);
		if (err <= 0) {
			return err ? err : -EAGAIN;
		}
		s->step = STEP_RECV_HELLO;
		/* fall through */
	case STEP_RECV_HELLO:
		err = io_step(c->ctrl_fd, &s->in, sizeof(s->in), &s->in_done, false);
		if (err <= 0) {
			return err ? err : -EAGAIN;
		}
		err = check_hello(c, &s->in, HELLO_OK);
		if (err) {
			return err;
		}
		s->queue = ntohs(s->in.queue);
		if (s->queue >= c->ctx->nengines) {
			pr_err("setup with %s: the listener chose queue %d, but this side runs %d",
			       s->peer_name, s->queue, c->ctx->nengines);
			return -EPROTO;
		}
		err = apply_hello(c, &s->in);
		if (!err) {
			err = auth_agree(c, &s->in);
		}
		if (err) {
			return err;
		}
		s->step = STEP_RESOLVE;
		/* fall through */
	case STEP_RESOLVE:
		err = resolve(c);
		if (err) {
			return err;
		}
		s->step = STEP_DONE;
		return 0;
	default:
		return 0;
	}
}

static int step_acceptor(struct harp_conn *c)
{
	struct ctrl_setup *s = c->setup;
	int err;

	switch (s->step) {
	case STEP_RECV_HELLO:
		err = io_step(c->ctrl_fd, &s->in, sizeof(s->in), &s->in_done, false);
		if (err <= 0) {
			return err ? err : -EAGAIN;
		}
		err = check_hello(c, &s->in, HELLO_REQ);
		if (err) {
			refuse(c, err);
			return err;
		}
		/* a peer with the handle: only now does the set-up take an id, and a place under
		 * HARP_CONNS_MAX (ctx_alloc_id says so when there is none) */
		err = ctx_alloc_id(c->ctx, &c->id);
		if (err) {
			setup_fail(c, "this process has HARP_CONNS_MAX=%d connections open",
				   c->ctx->params.conns_max);
			refuse(c, err);
			return err;
		}
		err = local_address(c);
		if (err) {
			return err;
		}
		c->token = s->in.token;
		/* Both ends run this connection on the same engine index (s->queue counts engines,
		 * not NIC queues: with HARP_QUEUES=4-7, index 0 runs queue 4); probing then finds
		 * the port pairs that reach each end's engine. */
		s->queue = (int)(atomic_fetch_add(&c->ctx->next_engine, 1) %
				 (uint32_t)c->ctx->nengines);
		if (s->queue >= ntohs(s->in.queue)) {
			s->queue %= ntohs(s->in.queue) ? ntohs(s->in.queue) : 1;
		}
		err = apply_hello(c, &s->in);
		if (!err) {
			err = auth_prepare(c);
		}
		if (!err) {
			err = auth_agree(c, &s->in);
		}
		if (err) {
			refuse(c, err);
			return err;
		}
		s->step = STEP_RESOLVE;
		/* fall through */
	case STEP_RESOLVE:
		err = resolve(c);
		if (err) {
			if (err != -EAGAIN) {
				refuse(c, err);
			}
			return err;
		}
		hello_fill(c, &s->out, HELLO_OK, s->queue);
		s->step = STEP_SEND_REPLY;
		return 0; /* the caller hands over, then sends the reply */
	default:
		return 0;
	}
}

int ctrl_establish(struct harp_conn *c)
{
	struct ctrl_setup *s = c->setup;
	int err;

	if (!s) {
		return -EINVAL;
	}
	if (s->step == STEP_SEND_REPLY) {
		/* a 96-byte hello into a fresh socket's empty buffer: one send() or none */
		err = io_step(c->ctrl_fd, &s->out, sizeof(s->out), &s->out_done, true);
		if (err == 0 && now_ns() < s->deadline_ns) {
			return -EAGAIN;
		}
		if (err <= 0) {
			return err ? err : -ETIMEDOUT;
		}
		s->step = STEP_DONE;
		return 0;
	}
	err = c->is_listener_side ? step_acceptor(c) : step_connector(c);
	if (err == -EAGAIN && now_ns() > s->deadline_ns) {
		setup_fail(c, "no answer within HARP_CONNECT_TIMEOUT_MS=%d",
			   c->ctx->params.connect_timeout_ms);
		return -ETIMEDOUT;
	}
	return err;
}

const char *ctrl_setup_peer(const struct harp_conn *c)
{
	return c->setup ? c->setup->peer_name : "?";
}

const char *ctrl_setup_why(const struct harp_conn *c)
{
	return c->setup ? c->setup->why : "";
}

int ctrl_setup_queue(const struct harp_conn *c)
{
	return c->setup->queue;
}

bool ctrl_setup_reply_pending(const struct harp_conn *c)
{
	return c->setup && c->setup->step == STEP_SEND_REPLY;
}

void ctrl_conn_destroy(struct harp_conn *c)
{
	char unread[256];

	if (c->setup) {
		explicit_bzero(&c->setup->kp, sizeof(c->setup->kp)); /* a failed set-up's secret */
	}
	free(c->setup);
	c->setup = NULL;
	if (c->ctrl_fd >= 0) {
		/* Closing a TCP socket with bytes unread (a path report, the peer's close) sends a
		 * reset, not an end of file, and the peer could take that for a crash before it reads
		 * our close message: read them first. */
		for (int i = 0; i < 64 && recv(c->ctrl_fd, unread, sizeof(unread), MSG_DONTWAIT) > 0;
		     i++) {
			/* bounded: a peer that keeps sending must not keep us here */
		}
		close(c->ctrl_fd);
		c->ctrl_fd = -1;
	}
}
