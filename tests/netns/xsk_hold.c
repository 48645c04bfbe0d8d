// SPDX-License-Identifier: Apache-2.0
/*
 * xsk-hold IFNAME QUEUE MS [AGENT_SOCKET KEY PID COMM]: binds a copy-mode AF_XDP socket to QUEUE
 * of IFNAME, prints "held" once the kernel has accepted the bind, keeps the queue MS milliseconds
 * and exits. It stands for any other AF_XDP user of the queue (or a harp process the kernel has
 * not finished freeing), so queue_busy.sh can check how harp waits for a queue and when it gives
 * up.
 *
 * With AGENT_SOCKET it is also a hostile client of the node agent (agent.sh): it hands the socket
 * over with ENTER under KEY (which may be another queue than the one it is bound to), claiming to
 * be PID named COMM and to have bound it at time 0, and prints the answer ("enter: STATUS TEXT")
 * and then the record the agent keeps for KEY ("owner: PID COMM SINCE_NS").
 *
 * xsk-hold IFNAME QUEUE MS --rounds N AGENT_SOCKET is a legitimate client timing the agent
 * (agent.sh, under attack): N times it connects, says HELLO, ENTERs its socket under QUEUE,
 * LEAVEs and closes, and prints how long the HELLO and ENTER answers took ("rounds: ...").
 * An answer that does not come within 2 s ends the run (exit 1).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <linux/if_xdp.h>
#include <xdp/xsk.h>

#include "agent.h"

#define HOLD_FRAMES 64
#define HOLD_FRAME_SIZE 4096

/* One request to the agent at fd (agent.c's messages), with pass_fd unless negative; its answer. */
static int agent_ask(int fd, struct harp_agent_msg *m, int pass_fd)
{
	size_t got = 0;

	if (agent_send(fd, m, pass_fd) || agent_recv(fd, m, NULL, &got) || got != sizeof(*m)) {
		fprintf(stderr, "xsk-hold: no answer from the agent\n");
		return -1;
	}
	return 0;
}

static uint64_t now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000 + (uint64_t)t.tv_nsec / 1000;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The times of n answers, sorted: "p50 P99 max" in microseconds, and how many took over 100 ms. */
static void say_times(const char *what, uint64_t *us, int n)
{
	int slow = 0, i;

	qsort(us, (size_t)n, sizeof(*us), cmp_u64);
	for (i = 0; i < n; i++) {
		slow += us[i] > 100000;
	}
	printf("%s_us: p50 %llu p99 %llu max %llu; over 100 ms: %d\n", what,
	       (unsigned long long)us[n / 2], (unsigned long long)us[(n * 99) / 100],
	       (unsigned long long)us[n - 1], slow);
}

/* The timed client: rounds of connect, HELLO, ENTER, LEAVE, close. */
static int agent_rounds(const char *path, const char *ifname, int xsk_fd, uint32_t queue, int n)
{
	struct timeval limit = { .tv_sec = 2 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	uint64_t *hello = calloc((size_t)n, sizeof(*hello));
	uint64_t *enter = calloc((size_t)n, sizeof(*enter));
	struct harp_agent_msg m;
	uint64_t t;
	int i, fd;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	for (i = 0; hello && enter && i < n; i++) {
		fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit)) ||
		    connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
			fprintf(stderr, "xsk-hold: round %d: connecting: %s\n", i, strerror(errno));
			return 1;
		}
		agent_msg_init(&m, HARP_AGENT_HELLO);
		snprintf(m.ifname, sizeof(m.ifname), "%s", ifname);
		t = now_us();
		if (agent_ask(fd, &m, -1) || m.status) {
			fprintf(stderr, "xsk-hold: round %d: HELLO: %d %s\n", i, m.status, m.text);
			return 1;
		}
		hello[i] = now_us() - t;
		agent_msg_init(&m, HARP_AGENT_ENTER);
		m.queue = queue;
		t = now_us();
		if (agent_ask(fd, &m, xsk_fd) || m.status) {
			fprintf(stderr, "xsk-hold: round %d: ENTER: %d %s\n", i, m.status, m.text);
			return 1;
		}
		enter[i] = now_us() - t;
		agent_msg_init(&m, HARP_AGENT_LEAVE);
		m.queue = queue;
		if (agent_ask(fd, &m, -1) || m.status) {
			fprintf(stderr, "xsk-hold: round %d: LEAVE: %d %s\n", i, m.status, m.text);
			return 1;
		}
		close(fd);
	}
	if (!hello || !enter) {
		return 1;
	}
	printf("rounds: %d answered\n", n);
	say_times("hello", hello, n);
	say_times("enter", enter, n);
	free(hello);
	free(enter);
	return 0;
}

/* The hostile client: ENTER under key with a forged owner, then OWNER of key. */
static int agent_enter(const char *path, const char *ifname, int xsk_fd, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct harp_agent_msg m;
	uint32_t key = (uint32_t)strtoul(argv[0], NULL, 10);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		perror("xsk-hold: connecting to the agent");
		return -1;
	}
	memset(&m, 0, sizeof(m));
	m.magic = HARP_AGENT_MAGIC;
	m.version = HARP_AGENT_VERSION;
	m.op = HARP_AGENT_HELLO;
	snprintf(m.ifname, sizeof(m.ifname), "%s", ifname);
	if (agent_ask(fd, &m, -1) || m.status) {
		fprintf(stderr, "xsk-hold: HELLO: %d %s\n", m.status, m.text);
		return -1;
	}
	memset(&m, 0, sizeof(m));
	m.magic = HARP_AGENT_MAGIC;
	m.version = HARP_AGENT_VERSION;
	m.op = HARP_AGENT_ENTER;
	m.queue = key;
	m.owner.pid = (uint32_t)strtoul(argv[1], NULL, 10);
	snprintf(m.owner.comm, sizeof(m.owner.comm), "%s", argv[2]);
	if (agent_ask(fd, &m, xsk_fd)) {
		return -1;
	}
	printf("enter: %d %s\n", m.status, m.text);
	memset(&m, 0, sizeof(m));
	m.magic = HARP_AGENT_MAGIC;
	m.version = HARP_AGENT_VERSION;
	m.op = HARP_AGENT_OWNER;
	m.queue = key;
	if (agent_ask(fd, &m, -1)) {
		return -1;
	}
	printf("owner: %u %.16s %llu\n", m.owner.pid, m.owner.comm,
	       (unsigned long long)m.owner.since_ns);
	fflush(stdout);
	return fd; /* kept open: the agent's records last as long as the connection */
}

int main(int argc, char **argv)
{
	struct xsk_socket_config cfg = {
		.rx_size = HOLD_FRAMES,
		.tx_size = HOLD_FRAMES,
		.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
		.bind_flags = XDP_COPY,
	};
	struct xsk_ring_prod fill, tx;
	struct xsk_ring_cons comp, rx;
	struct xsk_socket *xsk;
	struct xsk_umem *umem;
	size_t len = (size_t)HOLD_FRAMES * HOLD_FRAME_SIZE;
	char *end;
	long queue, ms;
	void *area;
	int err;

	if ((argc != 4 && argc != 8 && argc != 7) ||
	    (argc == 7 && (strcmp(argv[4], "--rounds") || atoi(argv[5]) < 1))) {
		fprintf(stderr, "usage: xsk-hold IFNAME QUEUE MS [AGENT_SOCKET KEY PID COMM]\n"
				"       xsk-hold IFNAME QUEUE MS --rounds N AGENT_SOCKET\n");
		return 2;
	}
	queue = strtol(argv[2], &end, 10);
	if (*end || queue < 0) {
		fprintf(stderr, "xsk-hold: bad QUEUE '%s'\n", argv[2]);
		return 2;
	}
	ms = strtol(argv[3], &end, 10);
	if (*end || ms < 0 || ms > 600000) {
		fprintf(stderr, "xsk-hold: bad MS '%s' (0 to 600000)\n", argv[3]);
		return 2;
	}
	area = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED) {
		perror("xsk-hold: mmap");
		return 1;
	}
	err = xsk_umem__create(&umem, area, len, &fill, &comp, NULL);
	if (err) {
		fprintf(stderr, "xsk-hold: UMEM: %s\n", strerror(-err));
		return 1;
	}
	err = xsk_socket__create(&xsk, argv[1], (uint32_t)queue, umem, &rx, &tx, &cfg);
	if (err) {
		fprintf(stderr, "xsk-hold: bind of %s queue %ld: %s\n", argv[1], queue, strerror(-err));
		return 1;
	}
	printf("held\n");
	fflush(stdout);
	if (argc == 8 && agent_enter(argv[4], argv[1], xsk_socket__fd(xsk), argv + 5) < 0) {
		return 1;
	}
	if (argc == 7 && agent_rounds(argv[6], argv[1], xsk_socket__fd(xsk), (uint32_t)queue,
				      atoi(argv[5]))) {
		return 1;
	}
	usleep((useconds_t)ms * 1000);
	xsk_socket__delete(xsk);
	xsk_umem__delete(umem);
	printf("released\n");
	return 0;
}
