// SPDX-License-Identifier: Apache-2.0
/*
 * Choosing interfaces the way NCCL_SOCKET_IFNAME does, so one setting reads the same to a user of
 * either: a comma-separated list of name prefixes; a leading '^' turns the list into exclusions,
 * a leading '=' (after any '^') makes the entries exact names. Only interfaces that are up and
 * hold an IPv4 or IPv6 address (not IPv6's loopback) count, in the order the kernel lists them.
 */
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define IFMATCH_DEFAULT "^docker,lo,virbr"

/* Does name match one entry of the comma list? */
static bool list_has(const char *list, const char *name, bool exact)
{
	const char *p = list;

	while (*p) {
		size_t n = strcspn(p, ",");

		if (n && (exact ? strlen(name) == n && !strncmp(name, p, n) : !strncmp(name, p, n))) {
			return true;
		}
		p += n;
		if (*p == ',') {
			p++;
		}
	}
	return false;
}

bool ifmatch_one(const char *spec, const char *name)
{
	bool exclude = false, exact = false;

	if (!spec || !*spec) {
		spec = IFMATCH_DEFAULT;
	}
	if (*spec == '^') {
		exclude = true;
		spec++;
	}
	if (*spec == '=') {
		exact = true;
		spec++;
	}
	return list_has(spec, name, exact) != exclude;
}

/* Is this spec a plain interface name rather than a list or pattern? */
bool ifmatch_is_plain(const char *spec)
{
	return spec && *spec && !strpbrk(spec, ",^=") && if_nametoindex(spec) != 0;
}

/* An address harp could use: IPv4, or IPv6 other than the loopback (as NCCL skips it). */
static bool has_address(const struct ifaddrs *a)
{
	if (!a->ifa_addr) {
		return false;
	}
	if (a->ifa_addr->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)a->ifa_addr;

		return !IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
	}
	return a->ifa_addr->sa_family == AF_INET;
}

int harp_ifname_match(const char *spec, char (*names)[16], int max)
{
	char found[HARP_IFMATCH_MAX][16];
	struct ifaddrs *all, *a;
	int n = 0, i;

	if (max < 0 || (max && !names)) {
		return -EINVAL;
	}
	if (getifaddrs(&all)) {
		return -errno;
	}
	for (a = all; a && n < HARP_IFMATCH_MAX; a = a->ifa_next) {
		bool seen = false;

		if (!has_address(a) || !(a->ifa_flags & IFF_UP) || strlen(a->ifa_name) >= 16 ||
		    !ifmatch_one(spec, a->ifa_name)) {
			continue;
		}
		/* an interface with several addresses is listed once per address */
		for (i = 0; i < n; i++) {
			seen = seen || !strcmp(found[i], a->ifa_name);
		}
		if (!seen) {
			snprintf(found[n++], 16, "%s", a->ifa_name);
		}
	}
	freeifaddrs(all);
	for (i = 0; i < n && i < max; i++) {
		memcpy(names[i], found[i], 16);
	}
	return n;
}
