/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every fuzz target checks with: a broken expectation aborts, which libFuzzer reports as a
 * crash with the input that caused it.
 */
#ifndef HARP_FUZZ_CHECK_H
#define HARP_FUZZ_CHECK_H

#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                            \
	do {                                                                                   \
		if (!(cond)) {                                                                 \
			abort();                                                               \
		}                                                                              \
	} while (0)

/*
 * The reason a checker wrote into why (size bytes, which the caller filled with 'x' first, so
 * that a reason left unwritten or unterminated shows): a line, ending inside the buffer.
 */
static inline void check_why(const char *why, size_t size)
{
	CHECK(why[0] != '\0' && why[0] != 'x');
	CHECK(memchr(why, '\0', size) != NULL);
}

#endif
