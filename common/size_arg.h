/* SPDX-License-Identifier: Apache-2.0 */
/* Sizes on command lines: a decimal count with an optional K, M or G suffix (powers of 1024). */
#ifndef HARP_SIZE_ARG_H
#define HARP_SIZE_ARG_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

static inline int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s) {
		return -1;
	}
	switch (*end) {
	case 'K':
	case 'k':
		v <<= 10;
		end++;
		break;
	case 'M':
	case 'm':
		v <<= 20;
		end++;
		break;
	case 'G':
	case 'g':
		v <<= 30;
		end++;
		break;
	default:
		break;
	}
	if (*end) {
		return -1;
	}
	*out = v;
	return 0;
}

#endif
