/* SPDX-License-Identifier: Apache-2.0 */
/*
 * params.c: every default, the strict parser (valid and invalid values of each type), the
 * environment loader with its refusal of unknown HARP_* names, the node profile (HARP_CONF), the
 * cross-field checks, and that each error line names the variable, the value and what is
 * accepted.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"

extern char **environ;

#define ERR_LEN 256

/* Removes every HARP_* variable, so the tests see only what they set. */
static void env_clear_harp(void)
{
	char name[128];
	const char *eq;
	size_t len;
	int again = 1;
	char **e;

	while (again) {
		again = 0;
		for (e = environ; e && *e; e++) {
			if (strncmp(*e, "HARP_", 5) != 0) {
				continue;
			}
			eq = strchr(*e, '=');
			len = eq ? (size_t)(eq - *e) : strlen(*e);
			assert_true(len < sizeof(name));
			memcpy(name, *e, len);
			name[len] = '\0';
			unsetenv(name);
			again = 1; /* environ may have moved: start over */
			break;
		}
	}
}

static const char *const launcher_vars[] = {
	"LOCAL_RANK",	   "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
	"MPI_LOCALRANKID", "MPI_LOCALNRANKS",  "SLURM_LOCALID",		     "SLURM_NTASKS_PER_NODE",
};

static int setup(void **state)
{
	size_t i;

	(void)state;
	env_clear_harp();
	for (i = 0; i < sizeof(launcher_vars) / sizeof(launcher_vars[0]); i++) {
		unsetenv(launcher_vars[i]);
	}
	setenv("HARP_CONF", "", 1); /* this machine's node profile, if it has one, stays out */
	return 0;
}

static void test_defaults(void **state)
{
	struct harp_params p;
	char err[ERR_LEN] = "";

	(void)state;
	memset(&p, 0xa5, sizeof(p));
	params_defaults(&p);
	assert_string_equal(p.ifname, "");
	assert_string_equal(p.queues, "auto");
	assert_int_equal(p.port_base, 47000);
	assert_int_equal(p.port_count, 64);
	assert_int_equal(p.frame_size, 4096);
	assert_int_equal(p.frame_count, 8192);
	assert_int_equal(p.mtu, 0);
	assert_int_equal(p.log_level, HARP_LOG_WARN);
	assert_int_equal(p.hugepages, HARP_HUGEPAGES_AUTO);
	assert_int_equal(p.bind_mode, HARP_BIND_AUTO);
	assert_int_equal(p.xdp_mode, HARP_XDP_NATIVE);
	assert_int_equal(p.peer_timeout_ms, 10000);
	assert_int_equal(p.connect_timeout_ms, 10000);
	assert_int_equal(p.cwnd_max, 1024);
	assert_int_equal(p.fault_drop_ppm, 0);
	assert_int_equal(p.fault_seed, 1);
	assert_int_equal(params_validate(&p, err, sizeof(err)), 0);
}

static void test_int_valid(void **state)
{
	struct harp_params p;
	char err[ERR_LEN];

	(void)state;
	params_defaults(&p);
	assert_int_equal(params_set(&p, "HARP_MTU", "0", err, sizeof(err)), 0);
	assert_int_equal(p.mtu, 0);
	assert_int_equal(params_set(&p, "HARP_FAULT_SEED", "2147483647", err, sizeof(err)), 0);
	assert_int_equal(p.fault_seed, 2147483647);
	assert_int_equal(params_set(&p, "HARP_PEER_TIMEOUT_MS", "3600000", err, sizeof(err)), 0);
	assert_int_equal(p.peer_timeout_ms, 3600000);
}

/* HARP_QUEUES as a count and as a list, and the queues each names. */
static void check_queues(const char *value, int n, const int *want)
{
	struct harp_params p;
	char err[ERR_LEN] = "";
	int ids[HARP_MAX_QUEUES], i;

	params_defaults(&p);
	assert_int_equal(params_set(&p, "HARP_QUEUES", value, err, sizeof(err)), 0);
	assert_int_equal(params_queue_ids(&p, ids, err, sizeof(err)), n);
	for (i = 0; i < n; i++) {
		assert_int_equal(ids[i], want ? want[i] : i);
	}
	assert_int_equal(params_validate(&p, err, sizeof(err)), 0);
}

static void check_queues_invalid(const char *value, const char *want)
{
	struct harp_params p, before;
	char err[ERR_LEN] = "";

	params_defaults(&p);
	before = p;
	assert_int_equal(params_set(&p, "HARP_QUEUES", value, err, sizeof(err)), -EINVAL);
	assert_memory_equal(&p, &before, sizeof(p)); /* refused: left as it was */
	if (!strstr(err, want)) {
		fail_msg("HARP_QUEUES=%s: '%s' does not say '%s'", value, err, want);
	}
	assert_null(strchr(err, '\n'));
}

static void test_queues(void **state)
{
	static const int two_three[] = { 2, 3 }, mixed[] = { 0, 4, 5, 6, 9 }, five[] = { 5 };
	static const int top[] = { 62, 63 };

	(void)state;
	check_queues("1", 1, NULL);
	check_queues("007", 7, NULL);
	check_queues("64", 64, NULL);
	check_queues("2,3", 2, two_three);
	check_queues("3,2", 2, two_three); /* ascending, whatever the order written */
	check_queues("2-3", 2, two_three);
	check_queues("9,4-6,0", 5, mixed);
	check_queues("5-5", 1, five);
	check_queues("62-63", 2, top);
	check_queues_invalid("", "a count in 1..64");
	check_queues_invalid("abc", "a count in 1..64");
	check_queues_invalid("0", "a count in 1..64");
	check_queues_invalid("65", "a count in 1..64");
	check_queues_invalid("4k", "a count in 1..64");
	check_queues_invalid(" 4", "a count in 1..64");
	check_queues_invalid("+4", "a count in 1..64");
	check_queues_invalid("99999999999999999999999", "a count in 1..64");
	check_queues_invalid("-", "invalid at '-'");
	check_queues_invalid("-1", "invalid at '-1'");
	check_queues_invalid("2,", "invalid at ''");
	check_queues_invalid(",2", "invalid at ',2'");
	check_queues_invalid("3-2", "invalid at ''");
	check_queues_invalid("2,64", "invalid at '64'");
	check_queues_invalid("2-x", "invalid at 'x'");
	check_queues_invalid("1,1", "queue 1 is named twice");
	check_queues_invalid("0-3,2", "queue 2 is named twice");
}

/* params_pick_queues: HARP_QUEUES on an interface of nic queues, with the environment as set. */
static int pick(const char *value, int nic, int *ids, int *take_free, char *err)
{
	struct harp_params p;

	params_defaults(&p);
	strcpy(p.ifname, "eth0");
	if (getenv("HARP_PORT_COUNT")) {
		assert_int_equal(params_set(&p, "HARP_PORT_COUNT", getenv("HARP_PORT_COUNT"), err,
					    ERR_LEN),
				 0);
	}
	assert_int_equal(params_set(&p, "HARP_QUEUES", value, err, ERR_LEN), 0);
	return params_pick_queues(&p, nic, ids, take_free, err, ERR_LEN);
}

static void want_ids(const int *ids, int first, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		assert_int_equal(ids[i], first + i);
	}
}

static void test_pick_queues(void **state)
{
	char err[ERR_LEN] = "";
	int ids[HARP_MAX_QUEUES], free_only;

	(void)state;
	/* a count or a list must fit the interface; neither looks at what is free */
	assert_int_equal(pick("2-3", 4, ids, &free_only, err), 2);
	assert_int_equal(free_only, 0);
	assert_int_equal(pick("4", 2, ids, &free_only, err), -EINVAL);
	assert_non_null(strstr(err, "HARP_QUEUES=4 names queue 3, but eth0 has 2 rx queues"));
	assert_int_equal(pick("3", 0, ids, &free_only, err), 3); /* unknown: the bind will tell */

	/* auto, no launcher: every queue is a candidate, the caller takes the free ones */
	assert_int_equal(pick("auto", 16, ids, &free_only, err), 16);
	assert_int_equal(free_only, HARP_AUTO_QUEUES_MAX);
	want_ids(ids, 0, 16);
	assert_int_equal(pick("auto", 0, ids, &free_only, err), 1);
	assert_int_equal(pick("auto", 200, ids, &free_only, err), HARP_MAX_QUEUES);

	/* torchrun: rank 3 of 4 on 16 queues runs 12..15; 8 ranks on 8 queues one each */
	setenv("LOCAL_RANK", "3", 1);
	setenv("LOCAL_WORLD_SIZE", "4", 1);
	assert_int_equal(pick("auto", 16, ids, &free_only, err), 4);
	assert_int_equal(free_only, 0);
	want_ids(ids, 12, 4);
	assert_int_equal(pick("auto", 7, ids, &free_only, err), 1); /* 7 / 4: one each */
	want_ids(ids, 3, 1);
	assert_int_equal(pick("auto", 64, ids, &free_only, err), HARP_AUTO_QUEUES_MAX);
	want_ids(ids, 48, HARP_AUTO_QUEUES_MAX);
	assert_int_equal(pick("5", 16, ids, &free_only, err), 5); /* a setting wins */
	setenv("HARP_PORT_COUNT", "2", 1); /* at most one queue per port */
	assert_int_equal(pick("auto", 16, ids, &free_only, err), 2);
	want_ids(ids, 12, 2);
	unsetenv("HARP_PORT_COUNT");
	/* more ranks than queues: every rank refuses alike, so all fall back together */
	assert_int_equal(pick("auto", 2, ids, &free_only, err), -EBUSY);
	assert_non_null(strstr(err, "torchrun runs 4 ranks on this node but eth0 has 2 rx queues"));
	setenv("LOCAL_WORLD_SIZE", "x4", 1);
	assert_int_equal(pick("auto", 16, ids, &free_only, err), -EINVAL);
	assert_non_null(strstr(err, "LOCAL_WORLD_SIZE=x4 is invalid"));
	setenv("LOCAL_WORLD_SIZE", "3", 1);
	assert_int_equal(pick("auto", 16, ids, &free_only, err), -EINVAL);
	assert_non_null(strstr(err, "LOCAL_RANK=3 is invalid with LOCAL_WORLD_SIZE=3"));
	setenv("LOCAL_WORLD_SIZE", "1", 1);
	setenv("LOCAL_RANK", "0", 1);
	assert_int_equal(pick("auto", 4, ids, &free_only, err), 4); /* one rank: alone */
	assert_int_equal(free_only, HARP_AUTO_QUEUES_MAX);
	unsetenv("LOCAL_RANK");
	unsetenv("LOCAL_WORLD_SIZE");

	/* Open MPI, and a rank without its count is no launcher */
	setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
	assert_int_equal(pick("auto", 8, ids, &free_only, err), 4);
	want_ids(ids, 4, 4);
	unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
	assert_int_equal(pick("auto", 8, ids, &free_only, err), 8);
	assert_int_equal(free_only, HARP_AUTO_QUEUES_MAX);
	unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
}

static void check_int_invalid(const char *name, const char *value, const char *range)
{
	struct harp_params p, before;
	char err[ERR_LEN] = "";
	char want[ERR_LEN];

	params_defaults(&p);
	before = p;
	assert_int_equal(params_set(&p, name, value, err, sizeof(err)), -EINVAL);
	/* a refused value leaves the parameter as it was */
	assert_memory_equal(&p, &before, sizeof(p));
	snprintf(want, sizeof(want), "%s=%s is invalid: expected an integer in %s (", name, value,
		 range);
	assert_true(strncmp(err, want, strlen(want)) == 0);
	assert_null(strchr(err, '\n'));
}

static void test_int_invalid(void **state)
{
	(void)state;
	check_int_invalid("HARP_PORT_BASE", "1023", "1024..65472");
	check_int_invalid("HARP_PORT_BASE", "65473", "1024..65472");
	check_int_invalid("HARP_FAULT_SEED", "2147483648", "0..2147483647");
	check_int_invalid("HARP_FAULT_SEED", "4294967297", "0..2147483647");
	check_int_invalid("HARP_MTU", "-1", "0..16370");
}

static void test_error_text(void **state)
{
	struct harp_params p;
	char err[ERR_LEN];
	char tiny[8];

	(void)state;
	params_defaults(&p);
	assert_int_equal(params_set(&p, "HARP_PATHS", "abc", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "HARP_PATHS=abc is invalid: expected an integer in 1..32 "
				 "(UDP port pairs (5-tuples) each connection spreads over, found "
				 "by probing)");
	/* a short buffer truncates, never overflows */
	memset(tiny, 'x', sizeof(tiny));
	assert_int_equal(params_set(&p, "HARP_PATHS", "abc", tiny, sizeof(tiny)), -EINVAL);
	assert_string_equal(tiny, "HARP_PA");
	/* no buffer at all is allowed */
	assert_int_equal(params_set(&p, "HARP_PATHS", "abc", NULL, 0), -EINVAL);
	assert_int_equal(params_set(&p, "HARP_QUEUES", "abc", NULL, 0), -EINVAL);
}

static void test_str(void **state)
{
	struct harp_params p;
	char err[ERR_LEN] = "";

	(void)state;
	params_defaults(&p);
	assert_int_equal(params_set(&p, "HARP_IFNAME", "eth0", err, sizeof(err)), 0);
	assert_string_equal(p.ifname, "eth0");
	assert_int_equal(params_set(&p, "HARP_IFNAME", "^docker,lo", err, sizeof(err)), 0);
	assert_string_equal(p.ifname, "^docker,lo");
	assert_int_equal(params_set(&p, "HARP_IFNAME", "", err, sizeof(err)), 0);
	assert_string_equal(p.ifname, "");

	{
		char longest[256], too_long[257];

		memset(longest, 'e', 255);
		longest[255] = 0;
		memset(too_long, 'e', 256);
		too_long[256] = 0;
		assert_int_equal(params_set(&p, "HARP_IFNAME", longest, err, sizeof(err)), 0);
		assert_int_equal(strlen(p.ifname), 255);
		assert_int_equal(params_set(&p, "HARP_IFNAME", "eth1", err, sizeof(err)), 0);
		assert_int_equal(params_set(&p, "HARP_IFNAME", too_long, err, sizeof(err)),
				 -EINVAL);
		assert_string_equal(p.ifname, "eth1");
		assert_non_null(strstr(err, "HARP_IFNAME=eeee"));
		assert_non_null(strstr(err, "is invalid"));
		assert_non_null(strstr(err, "255"));
	}
}

static void test_enum(void **state)
{
	struct harp_params p, before;
	char err[ERR_LEN] = "";
	static const char *const bad[] = { "", "ON", "On", "on ", " on", "o", "onn", "auto|on",
					   "1", "|" };
	size_t i;

	(void)state;
	params_defaults(&p);
	assert_int_equal(params_set(&p, "HARP_HUGEPAGES", "on", err, sizeof(err)), 0);
	assert_int_equal(p.hugepages, HARP_HUGEPAGES_ON);
	assert_int_equal(params_set(&p, "HARP_HUGEPAGES", "off", err, sizeof(err)), 0);
	assert_int_equal(p.hugepages, HARP_HUGEPAGES_OFF);
	assert_int_equal(params_set(&p, "HARP_HUGEPAGES", "auto", err, sizeof(err)), 0);
	assert_int_equal(p.hugepages, HARP_HUGEPAGES_AUTO);
	assert_int_equal(params_set(&p, "HARP_BIND_MODE", "zerocopy", err, sizeof(err)), 0);
	assert_int_equal(p.bind_mode, HARP_BIND_ZEROCOPY);
	assert_int_equal(params_set(&p, "HARP_BIND_MODE", "copy", err, sizeof(err)), 0);
	assert_int_equal(p.bind_mode, HARP_BIND_COPY);
	assert_int_equal(p.zerocopy_quirks, 1);
	assert_int_equal(params_set(&p, "HARP_ZEROCOPY_QUIRKS", "0", err, sizeof(err)), 0);
	assert_int_equal(p.zerocopy_quirks, 0);
	assert_int_equal(params_set(&p, "HARP_ZEROCOPY_QUIRKS", "2", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "HARP_ZEROCOPY_QUIRKS"));
	assert_int_equal(p.zc_retry_ms, 60000);
	assert_int_equal(params_set(&p, "HARP_ZC_RETRY_MS", "0", err, sizeof(err)), 0);
	assert_int_equal(p.zc_retry_ms, 0);
	assert_int_equal(params_set(&p, "HARP_ZC_RETRY_MS", "3600001", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "HARP_ZC_RETRY_MS"));
	assert_int_equal(params_set(&p, "HARP_XDP_MODE", "skb", err, sizeof(err)), 0);
	assert_int_equal(p.xdp_mode, HARP_XDP_SKB);
	assert_int_equal(params_set(&p, "HARP_XDP_MODE", "native", err, sizeof(err)), 0);
	assert_int_equal(p.xdp_mode, HARP_XDP_NATIVE);
	assert_int_equal(p.pacing, HARP_PACING_OFF);
	assert_int_equal(params_set(&p, "HARP_PACING", "on", err, sizeof(err)), 0);
	assert_int_equal(p.pacing, HARP_PACING_ON);
	assert_int_equal(params_set(&p, "HARP_PACING", "0", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "HARP_PACING=0"));
	assert_non_null(strstr(err, "expected one of on|off"));
	assert_int_equal(params_set(&p, "HARP_LOG_LEVEL", "error", err, sizeof(err)), 0);
	assert_int_equal(p.log_level, HARP_LOG_ERROR);
	assert_int_equal(params_set(&p, "HARP_LOG_LEVEL", "debug", err, sizeof(err)), 0);
	assert_int_equal(p.log_level, HARP_LOG_DEBUG);

	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		before = p;
		assert_int_equal(params_set(&p, "HARP_HUGEPAGES", bad[i], err, sizeof(err)),
				 -EINVAL);
		assert_memory_equal(&p, &before, sizeof(p));
		assert_true(strncmp(err, "HARP_HUGEPAGES=", 15) == 0);
		assert_non_null(strstr(err, "expected one of auto|on|off"));
	}
}

static void test_unknown_name(void **state)
{
	struct harp_params p, before;
	char err[ERR_LEN] = "";

	(void)state;
	params_defaults(&p);
	before = p;
	assert_int_equal(params_set(&p, "HARP_QUEUS", "4", err, sizeof(err)), -ENOENT);
	assert_memory_equal(&p, &before, sizeof(p));
	assert_non_null(strstr(err, "HARP_QUEUS"));
	/* names are exact: no case folding */
	assert_int_equal(params_set(&p, "harp_queues", "4", err, sizeof(err)), -ENOENT);
}

static void test_load_env(void **state)
{
	struct harp_params p;
	char err[ERR_LEN] = "";

	(void)state;
	assert_int_equal(params_load_env(&p, err, sizeof(err)), 0);
	assert_string_equal(p.queues, "auto");

	setenv("HARP_QUEUES", "4", 1);
	setenv("HARP_XDP_MODE", "skb", 1);
	setenv("HARP_IFNAME", "veth0", 1);
	setenv("NOT_HARP_X", "1", 1);
	assert_int_equal(params_load_env(&p, err, sizeof(err)), 0);
	assert_string_equal(p.queues, "4");
	assert_int_equal(p.xdp_mode, HARP_XDP_SKB);
	assert_string_equal(p.ifname, "veth0");
	assert_int_equal(p.port_base, 47000);
	unsetenv("NOT_HARP_X");

	setenv("HARP_PORT_COUNT", "9x", 1);
	assert_int_equal(params_load_env(&p, err, sizeof(err)), -EINVAL);
	assert_true(strncmp(err, "HARP_PORT_COUNT=9x is invalid", 29) == 0);
	unsetenv("HARP_PORT_COUNT");

	/* set but empty is a value too, and an invalid one for an integer */
	setenv("HARP_MTU", "", 1);
	assert_int_equal(params_load_env(&p, err, sizeof(err)), -EINVAL);
	assert_true(strncmp(err, "HARP_MTU= is invalid", 20) == 0);
	unsetenv("HARP_MTU");
	env_clear_harp();
}

/* Writes text to a fresh file and points HARP_CONF at it; returns its path (static). */
static const char *conf_file(const char *text)
{
	static char path[] = "/tmp/harp-test-conf-XXXXXX";
	int fd;

	strcpy(path + strlen(path) - 6, "XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	setenv("HARP_CONF", path, 1);
	return path;
}

/* Loads with HARP_CONF naming text; returns params_load_env's result, err as it left it. */
static int load_conf(struct harp_params *p, const char *text, char *err, size_t errlen,
		     char *path_out)
{
	const char *path = conf_file(text);
	int ret;

	strcpy(path_out, path);
	ret = params_load_env(p, err, errlen);
	unlink(path);
	return ret;
}

static void test_conf(void **state)
{
	struct harp_params p;
	char err[ERR_LEN] = "", path[64], want[ERR_LEN];

	(void)state;
	/* the profile's lines apply, comments and blanks are skipped, the environment wins */
	setenv("HARP_QUEUES", "3", 1);
	assert_int_equal(load_conf(&p, "# written by harp-attach up\n\n  HARP_IFNAME==eth0,eth1\n"
				       "HARP_QUEUES=4\nHARP_PORT_BASE = 48000 \r\n"
				       "HARP_XDP_MODE=skb",
				   err, sizeof(err), path),
			 0);
	assert_string_equal(p.ifname, "=eth0,eth1");
	assert_string_equal(p.queues, "3");
	assert_int_equal(p.port_base, 48000);
	assert_int_equal(p.xdp_mode, HARP_XDP_SKB);
	assert_string_equal(p.conf, path);
	unsetenv("HARP_QUEUES");

	/* every wrong line is an error naming the file and the line */
	assert_int_equal(load_conf(&p, "HARP_QUEUES=2\nHARP_PORT_COUNT=65\n", err, sizeof(err),
				   path),
			 -EINVAL);
	snprintf(want, sizeof(want), "%s:2: HARP_PORT_COUNT=65 is invalid", path);
	assert_true(strncmp(err, want, strlen(want)) == 0);
	assert_int_equal(load_conf(&p, "HARP_QUEUS=2\n", err, sizeof(err), path), -EINVAL);
	snprintf(want, sizeof(want), "%s:1: HARP_QUEUS is not a setting a profile can hold; see "
		 "harp-params --dump", path);
	assert_string_equal(err, want);
	assert_int_equal(load_conf(&p, "HARP_CONF=/etc/other.conf\n", err, sizeof(err), path),
			 -EINVAL);
	snprintf(want, sizeof(want), "%s:1: HARP_CONF is not a setting", path);
	assert_true(strncmp(err, want, strlen(want)) == 0);
	assert_int_equal(load_conf(&p, "\nHARP_QUEUES\n", err, sizeof(err), path), -EINVAL);
	snprintf(want, sizeof(want), "%s:2: expected NAME=VALUE, found 'HARP_QUEUES'", path);
	assert_string_equal(err, want);

	/* no file is no profile; a file that cannot be read is an error; empty: none */
	setenv("HARP_CONF", "/nonexistent/harp.conf", 1);
	assert_int_equal(params_load_env(&p, err, sizeof(err)), 0);
	assert_string_equal(p.queues, "auto");
	setenv("HARP_CONF", "/tmp", 1);
	assert_int_equal(params_load_env(&p, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "the node profile /tmp (HARP_CONF) is not a regular file; name a "
				 "file of HARP_* lines, or set HARP_CONF= for none");
	/* a FIFO would block init until something wrote to it; a device never ends: refused */
	{
		char fifo[64] = "/tmp/harp-conf-fifo.XXXXXX"; /* room for "/conf" after it */

		assert_non_null(mkdtemp(fifo));
		strcat(fifo, "/conf");
		assert_int_equal(mkfifo(fifo, 0600), 0);
		setenv("HARP_CONF", fifo, 1);
		assert_int_equal(params_load_env(&p, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "is not a regular file"));
		assert_non_null(strstr(err, fifo));
		unlink(fifo);
		*strrchr(fifo, '/') = '\0';
		rmdir(fifo);
	}
	setenv("HARP_CONF", "/dev/zero", 1);
	assert_int_equal(params_load_env(&p, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "the node profile /dev/zero (HARP_CONF) is not a regular file; "
				 "name a file of HARP_* lines, or set HARP_CONF= for none");
	setenv("HARP_CONF", "", 1);
	assert_int_equal(params_load_env(&p, err, sizeof(err)), 0);
	assert_string_equal(p.conf, "");
}

static void test_load_env_unknown(void **state)
{
	struct harp_params p;
	char err[ERR_LEN] = "";

	(void)state;
	setenv("HARP_QUEUES", "2", 1);
	setenv("HARP_QUEUS", "4", 1);
	assert_int_equal(params_load_env(&p, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "unknown setting HARP_QUEUS; see harp-params --dump");
	unsetenv("HARP_QUEUS");

	setenv("HARP_", "1", 1);
	assert_int_equal(params_load_env(&p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "unknown setting HARP_;"));
	unsetenv("HARP_");

	assert_int_equal(params_load_env(&p, err, sizeof(err)), 0);
	assert_string_equal(p.queues, "2");
	env_clear_harp();
}

static void check_validate_fails(const struct harp_params *p, const char *prefix)
{
	char err[ERR_LEN] = "";

	assert_int_equal(params_validate(p, err, sizeof(err)), -EINVAL);
	assert_true(strncmp(err, prefix, strlen(prefix)) == 0);
	assert_null(strchr(err, '\n'));
}

static void test_validate(void **state)
{
	struct harp_params p;
	char err[ERR_LEN] = "";

	(void)state;
	params_defaults(&p);
	assert_int_equal(params_set(&p, "HARP_FRAME_COUNT", "3000", err, sizeof(err)), 0);
	check_validate_fails(&p, "HARP_FRAME_COUNT=3000 is invalid: expected a power of two");
	assert_int_equal(params_set(&p, "HARP_FRAME_COUNT", "512", err, sizeof(err)), 0);
	assert_int_equal(params_validate(&p, err, sizeof(err)), 0);
	assert_int_equal(params_set(&p, "HARP_FRAME_COUNT", "262144", err, sizeof(err)), 0);
	assert_int_equal(params_validate(&p, err, sizeof(err)), 0);

	assert_int_equal(params_set(&p, "HARP_FRAME_SIZE", "3000", err, sizeof(err)), 0);
	check_validate_fails(&p, "HARP_FRAME_SIZE=3000 is invalid: expected 2048 or 4096");
	assert_int_equal(params_set(&p, "HARP_FRAME_SIZE", "2048", err, sizeof(err)), 0);
	assert_int_equal(params_validate(&p, err, sizeof(err)), 0);

	assert_int_equal(params_set(&p, "HARP_QUEUES", "8", err, sizeof(err)), 0);
	assert_int_equal(params_set(&p, "HARP_PORT_COUNT", "4", err, sizeof(err)), 0);
	check_validate_fails(&p, "HARP_QUEUES=8 is invalid with HARP_PORT_COUNT=4");
	assert_int_equal(params_set(&p, "HARP_PORT_COUNT", "8", err, sizeof(err)), 0);
	assert_int_equal(params_validate(&p, err, sizeof(err)), 0);

	/* the highest base with the most ports ends exactly at 65535 */
	assert_int_equal(params_set(&p, "HARP_PORT_BASE", "65472", err, sizeof(err)), 0);
	assert_int_equal(params_set(&p, "HARP_PORT_COUNT", "64", err, sizeof(err)), 0);
	assert_int_equal(params_validate(&p, err, sizeof(err)), 0);
}

/* Values written straight into the struct (from harp_ctx_opts) are range-checked too. */
static void test_validate_fields(void **state)
{
	struct harp_params p;

	(void)state;
	params_defaults(&p);
	strcpy(p.queues, "0");
	check_validate_fails(&p, "HARP_QUEUES=0 is invalid: expected auto, a count in 1..64");
	params_defaults(&p);
	p.port_base = 65500;
	check_validate_fails(&p, "HARP_PORT_BASE=65500 is invalid");
	params_defaults(&p);
	p.mtu = 16371;
	check_validate_fails(&p, "HARP_MTU=16371 is invalid");
	params_defaults(&p);
	p.mtu = 1;
	check_validate_fails(&p, "HARP_MTU=1 is invalid: expected 0 or an IP MTU in 576..16370");
	p.mtu = 576;
	{
		char ok[ERR_LEN] = "";

		assert_int_equal(params_validate(&p, ok, sizeof(ok)), 0);
	}
	params_defaults(&p);
	p.multi_buffer = 2;
	check_validate_fails(&p, "HARP_MULTI_BUFFER=");
	params_defaults(&p);
	p.xdp_mode = 2;
	check_validate_fails(&p, "HARP_XDP_MODE=");
	params_defaults(&p);
	p.pacing = 2;
	check_validate_fails(&p, "HARP_PACING=");
	params_defaults(&p);
	memset(p.ifname, 'a', sizeof(p.ifname));
	check_validate_fails(&p, "HARP_IFNAME is invalid");
}

static char *capture(void (*fn)(const struct harp_params *p, FILE *out),
		     const struct harp_params *p)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	fn(p, out);
	fclose(out);
	return buf;
}

static void markdown(const struct harp_params *p, FILE *out)
{
	(void)p;
	params_dump_markdown(out);
}

static size_t count_lines(const char *s)
{
	size_t n = 0;

	for (; *s; s++) {
		n += *s == '\n';
	}
	return n;
}

static void test_dump(void **state)
{
	static const char *const names[] = {
		"HARP_IFNAME", "HARP_FAMILY", "HARP_QUEUES", "HARP_PORT_BASE", "HARP_PORT_COUNT",
		"HARP_FRAME_SIZE", "HARP_FRAME_COUNT", "HARP_MTU", "HARP_MULTI_BUFFER", "HARP_LOG_LEVEL",
		"HARP_HUGEPAGES", "HARP_BUSY_POLL_US", "HARP_BIND_MODE", "HARP_ZEROCOPY_QUIRKS", "HARP_ZC_RETRY_MS",
		"HARP_XDP_MODE",
		"HARP_PIN_ROOT", "HARP_AGENT_SOCKET",
		"HARP_CONF",
		"HARP_PEER_TIMEOUT_MS",
		"HARP_CONNECT_TIMEOUT_MS", "HARP_CONNS_MAX", "HARP_IDLE_PROGRESS_US", "HARP_ENGINE_THREADS",
		"HARP_SPIN_YIELD",
		"HARP_AUTH", "HARP_PATHS",
		"HARP_CWND_MAX", "HARP_PACING", "HARP_CUDA", "HARP_SPEED_MBPS", "HARP_NCCL_DEVICES", "HARP_STRIPES", "HARP_FAULT_DROP_PPM", "HARP_FAULT_ZC_STALL_MS", "HARP_FAULT_ZC_TX_CORRUPT_MS",
		"HARP_FAULT_DEAF_CONN",
		"HARP_FAULT_CONNECT_HANG",
		"HARP_FAULT_SEED",
	};
	struct harp_params p;
	char err[ERR_LEN];
	char *text;
	size_t i;

	(void)state;
	params_defaults(&p);
	assert_int_equal(params_set(&p, "HARP_QUEUES", "3", err, sizeof(err)), 0);
	assert_int_equal(params_set(&p, "HARP_BIND_MODE", "copy", err, sizeof(err)), 0);
	text = capture(params_dump, &p);
	assert_int_equal(count_lines(text), ARRAY_SIZE(names));
	for (i = 0; i < ARRAY_SIZE(names); i++) {
		assert_non_null(strstr(text, names[i]));
	}
	assert_non_null(strstr(text, "HARP_QUEUES=3 "));
	assert_non_null(strstr(text, "HARP_BIND_MODE=copy "));
	assert_non_null(strstr(text, "auto|zerocopy|copy"));
	free(text);

	text = capture(markdown, &p);
	assert_int_equal(count_lines(text), ARRAY_SIZE(names) + 2);
	assert_true(strncmp(text, "| Variable | Default | Accepted | Meaning |\n", 43) == 0);
	for (i = 0; i < ARRAY_SIZE(names); i++) {
		assert_non_null(strstr(text, names[i]));
	}
	/* the table shows defaults, not p */
	assert_non_null(strstr(text, "| `HARP_PORT_BASE` | `47000` | 1024..65472 |"));
	/* a bare '|' inside a cell would break the table */
	assert_non_null(strstr(text, "`auto`, `zerocopy`, `copy`"));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_defaults, setup),
		cmocka_unit_test_setup(test_int_valid, setup),
		cmocka_unit_test_setup(test_int_invalid, setup),
		cmocka_unit_test_setup(test_queues, setup),
		cmocka_unit_test_setup(test_pick_queues, setup),
		cmocka_unit_test_setup(test_error_text, setup),
		cmocka_unit_test_setup(test_str, setup),
		cmocka_unit_test_setup(test_enum, setup),
		cmocka_unit_test_setup(test_unknown_name, setup),
		cmocka_unit_test_setup(test_load_env, setup),
		cmocka_unit_test_setup(test_conf, setup),
		cmocka_unit_test_setup(test_load_env_unknown, setup),
		cmocka_unit_test_setup(test_validate, setup),
		cmocka_unit_test_setup(test_validate_fields, setup),
		cmocka_unit_test_setup(test_dump, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
