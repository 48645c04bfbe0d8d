// SPDX-License-Identifier: Apache-2.0
/* Seed files for the corpus generators (seed_file.h); built with _GNU_SOURCE, as harp is. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "seed_file.h"

int seed_join(char *out, size_t size, const char *a, const char *sep, const char *b)
{
	int n = snprintf(out, size, "%s%s%s", a, sep, b);

	if (n < 0 || (size_t)n >= size) {
		fprintf(stderr, "%s: '%s%s%s' is longer than %zu bytes\n",
			program_invocation_short_name, a, sep, b, size - 1);
		return -1;
	}
	return 0;
}

int seed_write(const char *dir, const char *name, const void *bytes, size_t len)
{
	char path[4096];
	FILE *f;
	int ok;

	if (seed_join(path, sizeof(path), dir, "/", name)) {
		return -1;
	}
	f = fopen(path, "wb");
	if (!f) {
		fprintf(stderr, "%s: open %s: %s\n", program_invocation_short_name, path,
			strerror(errno));
		return -1;
	}
	ok = fwrite(bytes, 1, len, f) == len;
	if (fclose(f) || !ok) {
		fprintf(stderr, "%s: write %s: %s\n", program_invocation_short_name, path,
			strerror(errno));
		return -1;
	}
	return 0;
}
