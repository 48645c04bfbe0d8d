// SPDX-License-Identifier: Apache-2.0
/*
 * A program outside harp's tree, built against an installed harp (tests/deploy/install.sh): it
 * includes <harp/harp.h>, links libharp and calls functions that need no privilege and no
 * interface of harp's own. Prints one line the script compares; exits 1 if a call misbehaved.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <harp/harp.h>

#ifndef HARP_CONSUMER_VERSION
#error "build with -DHARP_CONSUMER_VERSION=\"...\", the version the build system found"
#endif

int main(void)
{
	char names[HARP_IFMATCH_MAX][16];
	int n;

	if (strcmp(harp_mode_name(HARP_MODE_COPY), "copy")) {
		fprintf(stderr, "consumer: harp_mode_name(HARP_MODE_COPY) is '%s'\n",
			harp_mode_name(HARP_MODE_COPY));
		return 1;
	}
	n = harp_ifname_match("lo", names, -1);
	if (n != -EINVAL) {
		fprintf(stderr, "consumer: harp_ifname_match(max -1) returned %d, not -EINVAL\n", n);
		return 1;
	}
	/* lo is the one interface every network namespace has; it may be down in a bare one. */
	n = harp_ifname_match("=lo", names, HARP_IFMATCH_MAX);
	if (n < 0 || n > 1 || (n == 1 && strcmp(names[0], "lo"))) {
		fprintf(stderr, "consumer: harp_ifname_match(\"=lo\") returned %d\n", n);
		return 1;
	}
	printf("harp consumer: version %s, handle %d bytes\n", HARP_CONSUMER_VERSION,
	       HARP_HANDLE_SIZE);
	return 0;
}
