// SPDX-License-Identifier: Apache-2.0
/* Interface lists read the way NCCL_SOCKET_IFNAME is read. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"

static void test_prefixes(void **state)
{
	(void)state;
	assert_true(ifmatch_one("eth", "eth0"));
	assert_true(ifmatch_one("eth", "eth"));
	assert_false(ifmatch_one("eth", "veth0"));
	assert_true(ifmatch_one("ens,eth", "eth1"));
	assert_true(ifmatch_one("ens,eth", "ens5"));
	assert_false(ifmatch_one("ens,eth", "enp1s0"));
	assert_false(ifmatch_one(",,", "eth0")); /* empty entries match nothing */
}

static void test_exclude_exact(void **state)
{
	(void)state;
	assert_false(ifmatch_one("^docker,lo", "docker0"));
	assert_false(ifmatch_one("^docker,lo", "lo"));
	assert_true(ifmatch_one("^docker,lo", "eth0"));
	assert_true(ifmatch_one("=eth0", "eth0"));
	assert_false(ifmatch_one("=eth0", "eth01"));
	assert_false(ifmatch_one("=eth0", "eth"));
	assert_false(ifmatch_one("^=eth0", "eth0"));
	assert_true(ifmatch_one("^=eth0", "eth01"));
	/* the default skips loopback, docker and libvirt bridges */
	assert_false(ifmatch_one(NULL, "lo"));
	assert_false(ifmatch_one("", "docker0"));
	assert_false(ifmatch_one("", "virbr0"));
	assert_true(ifmatch_one("", "ens5"));
}

/* Against this machine's own interfaces: loopback is always up with 127.0.0.1. */
static void test_live(void **state)
{
	char names[HARP_IFMATCH_MAX][16];
	int n, i;

	(void)state;
	n = harp_ifname_match("=lo", names, HARP_IFMATCH_MAX);
	assert_int_equal(n, 1);
	assert_string_equal(names[0], "lo");
	n = harp_ifname_match("^lo", names, HARP_IFMATCH_MAX);
	assert_true(n >= 0);
	for (i = 0; i < n && i < HARP_IFMATCH_MAX; i++) {
		assert_string_not_equal(names[i], "lo");
	}
	assert_int_equal(harp_ifname_match("=no-such-if", names, HARP_IFMATCH_MAX), 0);
	assert_int_equal(harp_ifname_match("lo", NULL, 0), 1); /* counts without copying */
	assert_int_equal(harp_ifname_match("lo", NULL, 1), -EINVAL);
	assert_true(ifmatch_is_plain("lo"));
	assert_false(ifmatch_is_plain("l"));
	assert_false(ifmatch_is_plain("=lo"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prefixes),
		cmocka_unit_test(test_exclude_exact),
		cmocka_unit_test(test_live),
	};

	return cmocka_run_group_tests_name("ifmatch", tests, NULL, NULL);
}
