/* SPDX-License-Identifier: Apache-2.0 */
/*
 * harp-params: shows and checks harp's settings the way the library will read them.
 *   --dump      every setting as loaded from the environment (fails if the environment is bad)
 *   --markdown  the README's table of settings
 *   --check     load and validate the environment; exit 0 if harp would accept it
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static void usage(FILE *out)
{
	fprintf(out, "usage: harp-params --dump | --markdown | --check\n"
		     "  --dump      print every HARP_* setting as loaded from the environment\n"
		     "  --markdown  print the table of settings in Markdown\n"
		     "  --check     load and validate the environment; exit 1 on an error\n");
}

/* Returns 0 with p filled from the environment, or prints the error line and returns 1. */
static int load_checked(struct harp_params *p)
{
	char err[256];

	if (params_load_env(p, err, sizeof(err)) < 0 || params_validate(p, err, sizeof(err)) < 0) {
		fprintf(stderr, "harp-params: %s\n", err);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct harp_params p;

	if (argc != 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--dump") == 0) {
		if (load_checked(&p)) {
			return 1;
		}
		params_dump(&p, stdout);
		return 0;
	}
	if (strcmp(argv[1], "--markdown") == 0) {
		params_dump_markdown(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--check") == 0) {
		if (load_checked(&p)) {
			return 1;
		}
		printf("harp-params: environment OK\n");
		return 0;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return 0;
	}
	usage(stderr);
	return 2;
}
