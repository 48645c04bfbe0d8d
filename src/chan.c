// SPDX-License-Identifier: Apache-2.0
/*
 * The control channel after set-up (chan.h). Under HARP_AUTH each message carries a counter and a
 * MAC made with the connection's control keys (auth.h), and one that fails is refused and
 * counted, never applied. Sends never block: a message that finds the socket
 * full is dropped with a debug line (a path report is asked for again by the peer's next probe
 * round; a close still reaches the peer as the socket's end of file, without its final ack), and
 * the rest of one it took in part goes before the next. Reads take whole messages, as many as
 * have come, in one call; a partial one waits for its rest.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>

#include "auth.h"
#include "chan.h"

_Static_assert(sizeof(((struct harp_conn *)0)->chan_rest) ==
		   sizeof(struct chan_msg) + HARP_AUTH_TRAILER,
	       "chan_rest holds the rest of one message");

/* A message's bytes on the wire: the 16, and under HARP_AUTH the trailer after them. */
static size_t chan_len(const struct harp_conn *c)
{
	return sizeof(struct chan_msg) + (c->auth ? HARP_AUTH_TRAILER : 0);
}

/*
 * Under HARP_AUTH, whether the peer made the message at bytes: one whose MAC fails, or whose
 * counter is not past the last one taken, is refused, counted and logged (the first of each
 * connection at error level; nothing it says is applied).
 */
static bool chan_authentic(struct harp_conn *c, const uint8_t *bytes)
{
	enum auth_verdict v;

	if (!c->auth) {
		return true;
	}
	v = auth_open_ctl(c->auth, bytes, sizeof(struct chan_msg), bytes + sizeof(struct chan_msg));
	if (v == AUTH_OK) {
		return true;
	}
	if (!c->stats.ctrl_refused++) {
		pr_err("conn %u: a control message from %s's side %s; refused (ctrl_refused counts "
		       "them: someone on the path writes into the control connection)",
		       c->id, WIRE_IP_STR(&c->path.dst_ip),
		       v == AUTH_FORGED ? "fails its MAC" : "repeats an old counter");
	}
	return false;
}

/* What one message says: 1 for CHAN_SILENT (chan_poll passes it on), else 0; -EPROTO (the
 * connection failed) when it is not one of ours. */
static int chan_take(struct harp_conn *c, const uint8_t *bytes, uint64_t now)
{
	struct ctrlmsg_chan msg;
	char why[96];

	if (ctrlmsg_chan_check(bytes, sizeof(struct chan_msg), &msg, why, sizeof(why))) {
		if (c->auth) {
			/* not the peer's: the stream is someone else's from here, and the peer's
			 * messages no longer line up; the data path goes on without them */
			chan_authentic(c, bytes);
			return 0;
		}
		pr_err("conn %u: %s", c->id, why);
		conn_fail(c, -EPROTO);
		return -EPROTO;
	}
	if (!chan_authentic(c, bytes)) {
		return 0;
	}
	if (msg.type == CHAN_PATH) {
		conn_on_probe_result(c, msg.round, msg.value, now);
	} else if (msg.type == CHAN_SILENT) {
		c->peer_hears_nothing_ms = msg.value ? msg.value : 1;
		c->peer_silent_ns = now;
		return 1; /* the engine's zc_watch acts on it */
	} else if (msg.type == CHAN_UNHEARD) {
		conn_on_peer_unheard(c, msg.value, now);
	} else if (!c->peer_closed) {
		c->peer_closed = true;
		if (conn_on_peer_close(c, msg.value)) {
			chan_send_close(c); /* our side is done too: the peer's lingering ends */
		}
	}
	return 0;
}

int chan_poll(struct harp_conn *c, uint64_t now)
{
	/* a probe round's reports in one read */
	uint8_t m[CONN_PROBE_CANDS * (sizeof(struct chan_msg) + HARP_AUTH_TRAILER)];
	size_t len = chan_len(c), whole, i;
	int err, silent = 0;
	ssize_t n;

	for (;;) {
		n = recv(c->ctrl_fd, m, CONN_PROBE_CANDS * len, MSG_DONTWAIT | MSG_PEEK);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			return silent;
		}
		if (n <= 0) {
			/* the socket's own reason: ETIMEDOUT when keepalive or the user timeout
			 * gave up on a peer host that went silent (PROTOCOL.md), else a reset */
			err = n < 0 && errno == ETIMEDOUT ? -ETIMEDOUT : -ECONNRESET;

			if (c->peer_closed) {
				pr_info("conn %u: peer %s closed the connection", c->id,
					WIRE_IP_STR(&c->path.dst_ip));
			} else {
				pr_err("conn %u: peer %s went away without closing (control "
				       "connection: %s); failing its requests",
				       c->id, WIRE_IP_STR(&c->path.dst_ip),
				       n == 0 ? "end of file" : strerror(errno));
			}
			conn_fail(c, err);
			return err;
		}
		/* the whole messages peeked at are there to take; a partial one waits for its
		 * rest */
		whole = (size_t)n / len;
		if (!whole ||
		    recv(c->ctrl_fd, m, whole * len, MSG_DONTWAIT) != (ssize_t)(whole * len)) {
			return silent;
		}
		for (i = 0; i < whole; i++) {
			err = chan_take(c, m + i * len, now);
			if (err < 0) {
				return err;
			}
			silent |= err;
		}
	}
}

/*
 * Writes count messages, sealing each under HARP_AUTH, without blocking. The stream must stay in
 * step: the rest of a message the socket took only part of is kept and goes first next time;
 * until it has gone, new messages are dropped (under HARP_AUTH their counters are skipped, which
 * the peer allows). Returns the messages written whole or in part.
 */
static size_t chan_write(struct harp_conn *c, const struct chan_msg *msgs, size_t count)
{
	uint8_t m[CONN_PROBE_CANDS * (sizeof(struct chan_msg) + HARP_AUTH_TRAILER)];
	size_t one = chan_len(c), len = count * one, cut, i;
	ssize_t n;

	for (i = 0; i < count; i++) {
		memcpy(m + i * one, &msgs[i], sizeof(msgs[i]));
		if (c->auth) {
			auth_seal_ctl(c->auth, m + i * one, sizeof(msgs[i]),
				      m + i * one + sizeof(msgs[i]));
		}
	}
	if (c->chan_rest_len) {
		n = send(c->ctrl_fd, c->chan_rest, c->chan_rest_len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			c->chan_rest_len -= (uint8_t)n;
			memmove(c->chan_rest, c->chan_rest + n, c->chan_rest_len);
		}
		if (c->chan_rest_len) {
			return 0;
		}
	}
	n = send(c->ctrl_fd, m, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n <= 0) {
		return 0;
	}
	cut = (size_t)n % one;
	if (cut) {
		c->chan_rest_len = (uint8_t)(one - cut);
		memcpy(c->chan_rest, m + n, c->chan_rest_len);
	}
	return ((size_t)n + one - 1) / one;
}

void chan_send_paths(struct harp_conn *c)
{
	struct chan_msg m[CONN_PROBE_CANDS];
	uint32_t i;

	for (i = 0; i < c->nreports; i++) {
		m[i] = (struct chan_msg){
			.magic = htonl(CHAN_MAGIC),
			.type = htonl(CHAN_PATH),
			.value = htonl(c->report_cand[i]),
			.reserved = htonl(c->report_round[i]),
		};
	}
	/* a few dozen per probe round, on a socket that carries little else: it has room; if
	 * not, the peer's next round asks again */
	if (chan_write(c, m, c->nreports) < c->nreports) {
		pr_debug("conn %u: %u probe reports could not all be sent: %s", c->id, c->nreports,
			 strerror(errno));
	}
	c->nreports = 0;
}

bool chan_note_path(struct harp_conn *c, uint32_t round, uint32_t cand)
{
	bool first = c->nreports == 0;

	if (c->nreports == CONN_PROBE_CANDS) {
		chan_send_paths(c);
	}
	c->report_round[c->nreports] = round;
	c->report_cand[c->nreports] = cand;
	c->nreports++;
	return first;
}

void chan_send_close(struct harp_conn *c)
{
	struct chan_msg m = {
		.magic = htonl(CHAN_MAGIC),
		.type = htonl(CHAN_CLOSE),
		.value = htonl(c->rcv_nxt),
	};

	if (!chan_write(c, &m, 1)) {
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

	if (!chan_write(c, &m, 1)) {
		pr_debug("conn %u: the silence report could not be sent: %s", c->id,
			 strerror(errno));
	}
}

void chan_send_unheard(struct harp_conn *c, uint32_t ms)
{
	struct chan_msg m = {
		.magic = htonl(CHAN_MAGIC),
		.type = htonl(CHAN_UNHEARD),
		.value = htonl(ms),
	};

	if (!chan_write(c, &m, 1)) {
		pr_debug("conn %u: the report of unanswered timeouts could not be sent: %s", c->id,
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
