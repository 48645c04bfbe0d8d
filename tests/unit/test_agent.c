/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent.c's client against a stand-in agent on a socketpair: a request that timed out has its
 * late answer passed over by the next request, which gets its own (the agent's answers echo the
 * request's number), and answers waiting when a request or a post goes are read first; an answer
 * that turns the client away is read even after the agent closed. A message of another version
 * is refused by its version, whatever its size.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent.h"
#include "ctrlmsg.h"

/* The stand-in agent: the answer to req, value[0] = value, status as given. */
static void answer(int fd, const struct harp_agent_msg *req, uint64_t value, int status)
{
	struct harp_agent_msg resp;

	agent_msg_init(&resp, (enum harp_agent_op)req->op);
	resp.seq = req->seq;
	resp.value[0] = value;
	resp.status = status;
	assert_int_equal(agent_send(fd, &resp, -1), 0);
}

/* A stand-in agent that reads one request and answers it twice: first as the earlier request
 * whose number is late_seq (an answer that comes late), then as itself. */
struct late_agent {
	int fd;
	uint32_t late_seq;
};

static void *answer_late_then_own(void *arg)
{
	struct late_agent *a = arg;
	struct harp_agent_msg seen;
	size_t len;

	if (agent_recv(a->fd, &seen, NULL, &len) || len != sizeof(seen)) {
		return NULL;
	}
	seen.seq = a->late_seq;
	answer(a->fd, &seen, 111, 0);
	seen.seq = a->late_seq + 1;
	answer(a->fd, &seen, 222, 0);
	return NULL;
}

static void test_late_answer_passed_over(void **state)
{
	struct harp_agent_msg req1, req2, req3, got, seen;
	struct late_agent agent;
	pthread_t t;
	size_t len;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	agent_msg_init(&req1, HARP_AGENT_PROBE);
	req1.conn_id = 1;
	/* the agent is slow: the first request times out */
	assert_int_equal(agent_call_ms(sv[0], &req1, -1, &got, 50), -ETIMEDOUT);
	assert_int_equal(agent_recv(sv[1], &seen, NULL, &len), 0);
	assert_int_equal(len, sizeof(seen));
	assert_int_equal(seen.conn_id, 1);
	/* its answer comes after the next request went, right ahead of that one's own */
	agent = (struct late_agent){ .fd = sv[1], .late_seq = req1.seq };
	assert_int_equal(pthread_create(&t, NULL, answer_late_then_own, &agent), 0);
	req2 = req1;
	req2.conn_id = 2;
	assert_int_equal(agent_call_ms(sv[0], &req2, -1, &got, 1000), 0);
	pthread_join(t, NULL);
	assert_int_equal(req2.seq, req1.seq + 1);
	assert_int_equal(got.seq, req2.seq);
	assert_int_equal(got.value[0], 222); /* not the first request's 111 */
	/* late answers already waiting when a request goes are read first, whatever they say */
	seen.seq = req1.seq;
	answer(sv[1], &seen, 111, 0);
	answer(sv[1], &seen, 111, 0);
	agent.late_seq = req2.seq; /* the next request is req2.seq + 1 */
	assert_int_equal(pthread_create(&t, NULL, answer_late_then_own, &agent), 0);
	req3 = req1;
	assert_int_equal(agent_call_ms(sv[0], &req3, -1, &got, 1000), 0);
	pthread_join(t, NULL);
	assert_int_equal(got.seq, req3.seq);
	assert_int_equal(got.value[0], 222);
	close(sv[0]);
	close(sv[1]);
}

/*
 * A post (FORGET, which the agent does not answer) reads what waits first: answers nobody read
 * would each stay charged to the agent's send buffer, which, full, stalls the agent's answers.
 */
static void test_post_drains_late_answers(void **state)
{
	struct harp_agent_msg req, seen;
	size_t len;
	int sv[2], i, queued = 0;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	agent_msg_init(&req, HARP_AGENT_PROBE);
	for (i = 0; i < 5; i++) {
		answer(sv[1], &req, 0, 0);
	}
	assert_int_equal(ioctl(sv[0], FIONREAD, &queued), 0);
	assert_true(queued > 0);
	agent_msg_init(&req, HARP_AGENT_FORGET);
	assert_int_equal(agent_post(sv[0], &req), 0);
	assert_int_equal(recv(sv[0], &seen, sizeof(seen), MSG_DONTWAIT), -1);
	assert_int_equal(errno, EAGAIN); /* nothing left to read */
	assert_int_equal(agent_recv(sv[1], &seen, NULL, &len), 0);
	assert_int_equal(seen.op, HARP_AGENT_FORGET);
	close(sv[0]);
	close(sv[1]);
}

/* An agent that turns its client away a moment after it connected, its request unread. */
static void *turn_away_later(void *arg)
{
	int fd = *(int *)arg;
	struct harp_agent_msg m;

	usleep(100000); /* the client's request is in our queue by now, and it waits */
	agent_msg_init(&m, HARP_AGENT_HELLO);
	m.status = -EACCES;
	(void)agent_send(fd, &m, -1);
	close(fd);
	return NULL;
}

static void test_turned_away_answer_read(void **state)
{
	struct harp_agent_msg hello, got;
	pthread_t agent;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	/* the agent answers before any request (seq 0) and closes */
	agent_msg_init(&hello, HARP_AGENT_HELLO);
	answer(sv[1], &hello, 0, -EUSERS);
	close(sv[1]);
	assert_int_equal(agent_call_ms(sv[0], &hello, -1, &got, 1000), 0);
	assert_int_equal(got.status, -EUSERS);
	close(sv[0]);

	/* ... and when it closed with our request unread, while we waited for the answer (the
	 * kernel then reports a reset, once, ahead of the answer it queued) */
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(pthread_create(&agent, NULL, turn_away_later, &sv[1]), 0);
	memset(&got, 0, sizeof(got));
	agent_msg_init(&hello, HARP_AGENT_HELLO);
	assert_int_equal(agent_call_ms(sv[0], &hello, -1, &got, 2000), 0);
	assert_int_equal(got.status, -EACCES);
	pthread_join(agent, NULL);
	close(sv[0]);
}

/* Whether ctrlmsg_agent_check refuses the len bytes of m, and why contains want. */
static void check_refused(const void *m, size_t len, const char *want)
{
	char why[128] = "";

	assert_int_equal(ctrlmsg_agent_check(m, len, why, sizeof(why)), -EBADMSG);
	if (!strstr(why, want)) {
		fail_msg("refused for \"%s\", not \"%s\"", why, want);
	}
}

/*
 * Version 3's messages were 8 bytes shorter (five counters), a later one's may be longer: each
 * side names the other's version rather than its size, so the operator knows what to upgrade.
 */
static void test_other_version_named(void **state)
{
	struct harp_agent_msg m, got;
	int sv[2];

	(void)state;
	agent_msg_init(&m, HARP_AGENT_HELLO);
	assert_int_equal(ctrlmsg_agent_check(&m, sizeof(m), NULL, 0), 0);
	m.version = 3;
	check_refused(&m, 328, "protocol version 3, and this side speaks 4");
	check_refused(&m, sizeof(m), "protocol version 3");
	m.version = 5;
	check_refused(&m, 8, "protocol version 5");
	/* too short for the header, or not ours at all: the size is what can be said */
	check_refused(&m, 7, "a message of 7 bytes");
	m.magic = 0;
	check_refused(&m, 328, "a message of 328 bytes");

	/* the client: an agent of version 3 answers in its own 328 bytes */
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	agent_msg_init(&m, HARP_AGENT_HELLO);
	m.version = 3;
	m.status = -EBADMSG;
	assert_int_equal(send(sv[1], &m, 328, 0), 328);
	agent_msg_init(&m, HARP_AGENT_HELLO);
	assert_int_equal(agent_call_ms(sv[0], &m, -1, &got, 1000), -EPROTO);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_late_answer_passed_over),
		cmocka_unit_test(test_post_drains_late_answers),
		cmocka_unit_test(test_turned_away_answer_read),
		cmocka_unit_test(test_other_version_named),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
