// SPDX-License-Identifier: Apache-2.0
/*
 * The control channel after set-up (chan.h). Sends never block: a message that finds the socket
 * full is dropped with a debug line (a path report is asked for again by the peer's next probe
 * round; a close still reaches the peer as the socket's end of file, without its final ack).
 * Reads take whole messages only; a partial one waits for its rest.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>

#include "chan.h"
#include "engine.h"

int chan_poll(struct harp_conn *c, uint64_t now)
{
	struct chan_msg m;
	struct ctrlmsg_chan msg;
	char why[96];
	ssize_t n;

	for (;;) {
		n = recv(c->ctrl_fd, &m, sizeof(m), MSG_DONTWAIT | MSG_PEEK);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			return 0;
		}
		if (n <= 0) {
			/* the socket's own reason: ETIMEDOUT when keepalive or the user timeout
			 * gave up on a peer host that went silent (PROTOCOL.md), else a reset */
			int err = n < 0 && errno == ETIMEDOUT ? -ETIMEDOUT : -ECONNRESET;

			if (c->peer_closed) {
				pr_info("conn %u: peer %s closed the connection", c->id,
					inet_ntoa((struct in_addr){ c->path.dst_ip }));
			} else {
				pr_err("conn %u: peer %s went away without closing (control "
				       "connection: %s); failing its requests",
				       c->id, inet_ntoa((struct in_addr){ c->path.dst_ip }),
				       n == 0 ? "end of file" : strerror(errno));
			}
			conn_fail(c, err);
			return err;
		}
		if (n < (ssize_t)sizeof(m)) {
			return 0; /* the rest is on its way */
		}
		if (recv(c->ctrl_fd, &m, sizeof(m), MSG_DONTWAIT) != sizeof(m)) {
			return 0;
		}
		if (ctrlmsg_chan_check(&m, sizeof(m), &msg, why, sizeof(why))) {
			pr_err("conn %u: %s", c->id, why);
			conn_fail(c, -EPROTO);
			return -EPROTO;
		}
		if (msg.type == CHAN_PATH) {
			conn_on_probe_result(c, msg.round, msg.value, now);
			continue;
		}
		if (msg.type == CHAN_SILENT) {
			c->peer_hears_nothing_ms = msg.value ? msg.value : 1;
			c->engine->silence_reports = true; /* zc_watch acts on it */
			continue;
		}
		c->peer_closed = true;
		conn_on_peer_close(c, msg.value, now);
	}
}

void chan_send_path(struct harp_conn *c, uint32_t round, uint32_t cand)
{
	struct chan_msg m = {
		.magic = htonl(CHAN_MAGIC),
		.type = htonl(CHAN_PATH),
		.value = htonl(cand),
		.reserved = htonl(round),
	};

	/* 16 bytes on a socket that carries a few dozen per connection: it has room; if not, the
	 * peer's next probe round asks again */
	if (send(c->ctrl_fd, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT) != sizeof(m)) {
		pr_debug("conn %u: a probe report could not be sent: %s", c->id, strerror(errno));
	}
}

void chan_send_close(struct harp_conn *c)
{
	struct chan_msg m = {
		.magic = htonl(CHAN_MAGIC),
		.type = htonl(CHAN_CLOSE),
		.value = htonl(c->rcv_nxt),
	};

	if (send(c->ctrl_fd, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT) != sizeof(m)) {
		pr_debug("conn %u: the close message could not be sent: %s", c->id,
			 strerror(errno));
	}
}

void chan_send_silent(struct harp_conn *c, uint32_t ms)
{
	struct chan_msg m = {
		.magic = htonl(CHAN_MAGIC),
		.type = htonl(CHAN_SILENT),
		.value = htonl(ms),
	};

	if (send(c->ctrl_fd, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT) != sizeof(m)) {
		pr_debug("conn %u: the silence report could not be sent: %s", c->id,
			 strerror(errno));
	}
}

uint64_t chan_rtt_ns(const struct harp_conn *c)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(c->ctrl_fd, IPPROTO_TCP, TCP_INFO, &ti, &len) || len < sizeof(ti.tcpi_rtt)) {
		return 0;
	}
	return (uint64_t)ti.tcpi_rtt * 1000;
}
