/* SPDX-License-Identifier: Apache-2.0 */
/*
 * steer.c's calls to the node agent from an engine's pass never wait on it: a FORGET goes
 * without waiting for its answer, and while another request holds the connection to the agent
 * it is queued and sent by the next holder; a PROBE for the error text waits 20 ms at most. The
 * agent is a socketpair end that reads and never answers (an agent that hangs). The XDP
 * program's counters read through the agent land each in its own field.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent.h"
#include "steer.h"

static uint64_t ms_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* FORGETs that reached the agent's end so far (read without waiting). */
static int forgets_seen(int fd)
{
	struct harp_agent_msg m;
	int n = 0;

	while (recv(fd, &m, sizeof(m), MSG_DONTWAIT) == (ssize_t)sizeof(m)) {
		n += m.op == HARP_AGENT_FORGET;
	}
	return n;
}

static void test_engine_calls_do_not_wait(void **state)
{
	struct steer *s = calloc(1, sizeof(*s));
	uint64_t t0, queues;
	int sv[2];

	(void)state;
	assert_non_null(s);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	s->agent_fd = sv[0];
	s->probe_map_fd = -1;
	pthread_mutex_init(&s->agent_lock, NULL);
	pthread_mutex_init(&s->agent_forget_lock, NULL);

	/* the agent never answers: a FORGET still returns at once, and it went */
	t0 = ms_now();
	assert_int_equal(steer_probe_forget(s, 1, 11), 0);
	assert_true(ms_now() - t0 < 100);
	assert_int_equal(forgets_seen(sv[1]), 1);

	/* another request holds the connection (a set-up's call, waiting on the agent): the
	 * FORGETs wait in the list, the engine does not */
	pthread_mutex_lock(&s->agent_lock);
	t0 = ms_now();
	assert_int_equal(steer_probe_forget(s, 2, 22), 0);
	assert_int_equal(steer_probe_forget(s, 3, 33), 0);
	queues = 1;
	/* unknown, at once: said as such, not as "no probe arrived" */
	assert_int_equal(steer_probe_queues(s, 4, 44, &queues), -EBUSY);
	assert_int_equal(queues, 0);
	assert_true(ms_now() - t0 < 100);
	assert_int_equal(forgets_seen(sv[1]), 0);
	assert_int_equal(s->agent_nforget, 2);
	pthread_mutex_unlock(&s->agent_lock);
	/* the next to take it sends them */
	steer_probe_forget(s, 5, 55);
	assert_int_equal(forgets_seen(sv[1]), 3);
	assert_int_equal(s->agent_nforget, 0);

	/* a PROBE for an error line waits 20 ms for an agent that does not answer, no more */
	t0 = ms_now();
	assert_int_equal(steer_probe_queues(s, 6, 66, &queues), -ETIMEDOUT);
	assert_true(ms_now() - t0 < 200);
	/* no agent and no map: nothing records probes here */
	s->agent_fd = -1;
	assert_int_equal(steer_probe_queues(s, 7, 77, &queues), -ENOENT);
	s->agent_fd = sv[0];

	close(sv[0]);
	close(sv[1]);
	free(s);
}

/* A stand-in agent: answers one COUNTERS request with counter i = 1000 + i. */
static void *answer_counters(void *arg)
{
	int fd = *(int *)arg, i;
	struct harp_agent_msg req, resp;
	size_t len;

	if (agent_recv(fd, &req, NULL, &len) || len != sizeof(req) ||
	    req.op != HARP_AGENT_COUNTERS) {
		return NULL;
	}
	agent_msg_init(&resp, HARP_AGENT_COUNTERS);
	resp.seq = req.seq;
	for (i = 0; i < HARP_XDP_COUNTER_MAX; i++) {
		resp.value[i] = 1000 + (uint64_t)i;
	}
	(void)agent_send(fd, &resp, -1);
	return NULL;
}

static void test_counters_through_agent(void **state)
{
	struct steer *s = calloc(1, sizeof(*s));
	struct harp_queue_stats st = { 0 };
	pthread_t agent;
	int sv[2];

	(void)state;
	assert_non_null(s);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	s->agent_fd = sv[0];
	pthread_mutex_init(&s->agent_lock, NULL);
	pthread_mutex_init(&s->agent_forget_lock, NULL);
	assert_int_equal(pthread_create(&agent, NULL, answer_counters, &sv[1]), 0);
	assert_int_equal(steer_counters(s, &st), 0);
	pthread_join(agent, NULL);
	assert_int_equal(st.xdp_steered, 1000 + HARP_XDP_STEERED);
	assert_int_equal(st.xdp_passed, 1000 + HARP_XDP_PASSED);
	assert_int_equal(st.xdp_no_socket, 1000 + HARP_XDP_NO_SOCKET);
	assert_int_equal(st.xdp_probes, 1000 + HARP_XDP_PROBES);
	assert_int_equal(st.xdp_probe_no_socket, 1000 + HARP_XDP_PROBE_NO_SOCKET);
	assert_int_equal(st.xdp_refused, 1000 + HARP_XDP_REFUSED);
	close(sv[0]);
	close(sv[1]);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_engine_calls_do_not_wait),
		cmocka_unit_test(test_counters_through_agent),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
