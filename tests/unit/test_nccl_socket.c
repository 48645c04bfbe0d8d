// SPDX-License-Identifier: Apache-2.0
/*
 * perf/nccl_socket.c against a stand-in libnccl.so.2 (fake_nccl.c, built beside this test, and a
 * stripped copy of it): NCCL_LIB finds it; its local symbols are found through the ELF symbol
 * table at the library's load address; cudaGetDevice answers device 0 once rewritten; the
 * release picks the table's version; and what cannot serve (no library, an unknown release, no
 * symbol table) says why. Each case runs in a child: a library once loaded stays loaded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "nccl_socket.h"

struct fake_net {
	const char *name;
	int (*get_device)(int *device);
};

/* Runs nccl_socket_open in a child with NCCL_LIB and FAKE_NCCL_VERSION; what it said in what. */
static int open_in_child(const char *lib, const char *version, char *what, size_t whatlen,
			 int *table_version, int *device, int *get_rc)
{
	struct {
		int rc, version, device, get_rc;
		char what[2048];
	} r;
	int fds[2], status;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		const void *table = NULL;

		memset(&r, 0, sizeof(r));
		setenv("NCCL_LIB", lib, 1);
		if (version) {
			setenv("FAKE_NCCL_VERSION", version, 1);
		}
		r.rc = nccl_socket_open(&table, &r.version, r.what, sizeof(r.what));
		if (!r.rc) {
			const struct fake_net *t = table;

			r.get_rc = strcmp(t->name, "Socket") ? -1 : t->get_device(&r.device);
		}
		(void)!write(fds[1], &r, sizeof(r));
		_exit(0);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &r, sizeof(r)), (ssize_t)sizeof(r));
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	snprintf(what, whatlen, "%s", r.what);
	*table_version = r.version;
	*device = r.device;
	*get_rc = r.get_rc;
	return r.rc;
}

static void test_found_and_rewritten(void **state)
{
	char what[2048];
	int version, device, get_rc;

	(void)state;
	assert_int_equal(open_in_child(FAKE_NCCL, NULL, what, sizeof(what), &version, &device,
				       &get_rc),
			 0);
	assert_non_null(strstr(what, "NCCL 2.28.9"));
	assert_int_equal(version, 11);
	/* the local table reached at its load address, its cudaGetDevice now "device 0, success" */
	assert_int_equal(get_rc, 0);
	assert_int_equal(device, 0);
	/* NCCL_LIB may name the directory */
	assert_int_equal(open_in_child(FAKE_NCCL_DIR, "22403", what, sizeof(what), &version,
				       &device, &get_rc),
			 0);
	assert_int_equal(version, 9);
}

static void test_release_picks_the_layout(void **state)
{
	static const struct {
		const char *code;
		int version;
	} cases[] = { { "22005", 8 },  { "22304", 8 },	{ "22403", 9 }, { "22501", 9 },
		      { "22606", 10 }, { "22707", 10 }, { "22809", 11 }, { "22907", 11 } };
	char what[2048];
	int version, device, get_rc;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(open_in_child(FAKE_NCCL, cases[i].code, what, sizeof(what),
					       &version, &device, &get_rc),
				 0);
		assert_int_equal(version, cases[i].version);
	}
	/* 2.19's tables are v7, and a release after 2.29 is not known */
	for (i = 0; i < 2; i++) {
		assert_int_equal(open_in_child(FAKE_NCCL, i ? "23001" : "21904", what, sizeof(what),
					       &version, &device, &get_rc),
				 -1);
		assert_non_null(strstr(what, i ? "NCCL 2.30.1" : "NCCL 2.19.4"));
		assert_non_null(strstr(what, "knows NCCL 2.20 to 2.29"));
	}
}

static void test_what_cannot_serve(void **state)
{
	char what[2048];
	int version, device, get_rc;

	(void)state;
	/* nothing there: NCCL_LIB is the one place searched, and the message says how to name it */
	assert_int_equal(open_in_child("/nonexistent/libnccl.so.2", NULL, what, sizeof(what),
				       &version, &device, &get_rc),
			 -1);
	assert_non_null(strstr(what, "/nonexistent/libnccl.so.2: No such file or directory"));
	assert_non_null(strstr(what, "NCCL_LIB=/path/to/libnccl.so.2"));
	/* a stripped library: the local table cannot be found */
	assert_int_equal(open_in_child(FAKE_NCCL_STRIPPED, NULL, what, sizeof(what), &version,
				       &device, &get_rc),
			 -1);
	assert_non_null(strstr(what, "no symbol table"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_found_and_rewritten),
		cmocka_unit_test(test_release_picks_the_layout),
		cmocka_unit_test(test_what_cannot_serve),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
