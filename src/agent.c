// SPDX-License-Identifier: Apache-2.0
/* The node agent's messages, and the client a harp process uses (agent.h says the protocol). */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent.h"
#include "ctrlmsg.h"
#include "internal.h"

#define AGENT_ANSWER_MS 5000 /* an agent slower than this to answer is taken as stuck */

void agent_msg_init(struct harp_agent_msg *m, enum harp_agent_op op)
{
	memset(m, 0, sizeof(*m));
	m->magic = HARP_AGENT_MAGIC;
	m->version = HARP_AGENT_VERSION;
	m->op = (uint16_t)op;
}

int agent_send(int fd, const struct harp_agent_msg *m, int pass_fd)
{
	return agent_send_bytes(fd, m, sizeof(*m), pass_fd);
}

int agent_send_bytes(int fd, const struct harp_agent_msg *m, size_t len, int pass_fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = (void *)m, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	if (len > sizeof(*m)) {
		return -EINVAL;
	}
	if (pass_fd >= 0) {
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
	}
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) != (ssize_t)len) {
		return errno ? -errno : -EIO;
	}
	return 0;
}

int agent_recv(int fd, struct harp_agent_msg *m, int *got_fd, size_t *len)
{
	char cbuf[CMSG_SPACE(4 * sizeof(int))];
	struct iovec iov = { .iov_base = m, .iov_len = sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	int nfds = 0, fds[4], i;
	ssize_t n;

	*len = 0;
	if (got_fd) {
		*got_fd = -1;
	}
	n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	if (n < 0) {
		return -errno;
	}
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
			int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));

			for (i = 0; i < k && nfds < (int)ARRAY_SIZE(fds); i++) {
				memcpy(&fds[nfds++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			}
		}
	}
	if (nfds > 1 || (nfds && !got_fd) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		for (i = 0; i < nfds; i++) {
			close(fds[i]);
		}
		return -EBADMSG;
	}
	if (nfds) {
		*got_fd = fds[0];
	}
	*len = (size_t)n;
	return 0;
}

int agent_call(int fd, struct harp_agent_msg *req, int pass_fd, struct harp_agent_msg *resp)
{
	return agent_call_ms(fd, req, pass_fd, resp, AGENT_ANSWER_MS);
}

static _Atomic uint32_t agent_seq;

/*
 * Reads and passes over what waits on fd before a new request goes: answers to requests that
 * timed out. Left unread, each stays charged to the agent's send buffer, and a full one stalls
 * the agent's answers to us. A bounded number, so a flooding peer cannot hold us here.
 */
static void agent_drain(int fd)
{
	struct harp_agent_msg late;
	int i;

	for (i = 0; i < 64; i++) {
		ssize_t n = recv(fd, &late, sizeof(late), MSG_DONTWAIT);

		if (n <= 0) {
			return; /* nothing waits, or the end, which the request finds */
		}
		pr_debug("node agent: passed over a late answer (request %u, op %u)", late.seq,
			 late.op);
	}
}

int agent_post(int fd, struct harp_agent_msg *req)
{
	agent_drain(fd);
	req->seq = atomic_fetch_add_explicit(&agent_seq, 1, memory_order_relaxed) + 1;
	if (send(fd, req, sizeof(*req), MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(*req)) {
		return -errno;
	}
	return 0;
}

int agent_call_ms(int fd, struct harp_agent_msg *req, int pass_fd, struct harp_agent_msg *resp,
		  int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
	char why[96];
	size_t got;
	int err, wait_ms, n;

	/* HELLO comes first, and what waits then is an agent turning us away, saying why */
	if (req->op != HARP_AGENT_HELLO) {
		agent_drain(fd);
	}
	req->seq = atomic_fetch_add_explicit(&agent_seq, 1, memory_order_relaxed) + 1;
	err = agent_send(fd, req, pass_fd);
	if (err && err != -EPIPE && err != -ECONNRESET) {
		return err;
	}
	for (;;) {
		/* closed on us: an agent that turns a client away answers before it closes, and
		 * that answer, which says why, is still there to read */
		wait_ms = err ? 0 : (int)((deadline - now_ns() + 999999) / 1000000);
		n = poll(&pfd, 1, wait_ms < 0 ? 0 : wait_ms);
		if (err && n <= 0) {
			return err;
		}
		if (n <= 0) {
			return n ? -errno : -ETIMEDOUT;
		}
		n = agent_recv(fd, resp, NULL, &got);
		if (n == -ECONNRESET && poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN)) {
			/* the agent closed with our request unread: the kernel reports that once,
			 * ahead of the answer it had queued for us, which is still there */
			n = agent_recv(fd, resp, NULL, &got);
		}
		if (n) {
			return n;
		}
		if (!got) {
			return -ECONNRESET;
		}
		if (ctrlmsg_agent_check(resp, got, why, sizeof(why))) {
			pr_err("node agent: a malformed answer to op %u: %s", req->op, why);
			return -EPROTO;
		}
		/* a turning-away answer (seq 0) comes before any request was read */
		if (resp->seq == req->seq || (!resp->seq && resp->status)) {
			break;
		}
		pr_debug("node agent: passed over a late answer (request %u, op %u)", resp->seq,
			 resp->op);
		if (now_ns() >= deadline) {
			return -ETIMEDOUT;
		}
	}
	if (resp->op != req->op) {
		pr_err("node agent: a malformed answer to op %u: another op's", req->op);
		return -EPROTO;
	}
	return 0;
}

int agent_connect(const char *path, const char *ifname, struct harp_agent_msg *hello)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct harp_agent_msg req;
	int fd, err;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		pr_err("node agent: the socket path %s is longer than %zu bytes (HARP_AGENT_SOCKET)",
		       path, sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -errno;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		err = -errno;
		close(fd);
		/* refused or gone: no agent, which the caller reports; anything else is said here */
		if (err == -EACCES || err == -EPERM) {
			pr_err("node agent at %s: connecting was refused (%s): the agent's socket admits "
			       "root alone unless it serves other uids (harp-agent --allow-uid, the "
			       "chart's agent.allowUids); this process runs as uid %u",
			       path, strerror(-err), (unsigned)geteuid());
		} else if (err != -ECONNREFUSED && err != -ENOENT) {
			pr_err("node agent at %s: connecting failed: %s", path, strerror(-err));
		}
		return err;
	}
	agent_msg_init(&req, HARP_AGENT_HELLO);
	snprintf(req.ifname, sizeof(req.ifname), "%s", ifname);
	err = agent_call(fd, &req, -1, hello);
	if (!err && hello->status) {
		err = hello->status;
		pr_err("node agent at %s: %s", path, hello->text[0] ? hello->text : strerror(-err));
	} else if (err) {
		pr_err("node agent at %s: saying hello for %s failed: %s", path, ifname,
		       strerror(-err));
	}
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}
