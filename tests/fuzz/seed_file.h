/* SPDX-License-Identifier: Apache-2.0 */
/* Writing seed files, for the corpus generators (gen_corpus.c, gen_ctrl_corpus.c). */
#ifndef HARP_SEED_FILE_H
#define HARP_SEED_FILE_H

#include <stddef.h>

/* out = a, sep, b; -1 (and a message) when that does not fit in size bytes. */
int seed_join(char *out, size_t size, const char *a, const char *sep, const char *b);
/* Writes the len bytes at bytes to dir/name. 0, or -1 with a message. */
int seed_write(const char *dir, const char *name, const void *bytes, size_t len);

#endif
