// SPDX-License-Identifier: Apache-2.0
/* Handles and marks through files; see rendezvous.h. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rendezvous.h"

double rdv_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int rdv_publish(const char *path, const void *data, size_t len, char *err, size_t errlen)
{
	char tmp[PATH_MAX + 32];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, getpid());
	f = fopen(tmp, "wb");
	if (!f) {
		snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
		return -1;
	}
	if (fwrite(data, 1, len, f) != len || fclose(f) != 0) {
		snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
		return -1;
	}
	/* rename: the reader sees all of it or nothing */
	if (rename(tmp, path) != 0) {
		snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
		return -1;
	}
	return 0;
}

int rdv_fetch(const char *path, void *data, size_t len, double deadline, char *err,
	      size_t errlen)
{
	struct stat st;
	size_t got;
	FILE *f;

	while (stat(path, &st) != 0) {
		if (rdv_now() > deadline) {
			snprintf(err, errlen, "no file %s from the peer in time", path);
			return -1;
		}
		usleep(10000);
	}
	if ((size_t)st.st_size != len) {
		snprintf(err, errlen, "%s holds %lld bytes, expected %zu: do both sides run with "
			 "the same arguments?", path, (long long)st.st_size, len);
		return -1;
	}
	f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	got = fread(data, 1, len, f);
	fclose(f);
	if (got != len) {
		snprintf(err, errlen, "short read of %s", path);
		return -1;
	}
	return 0;
}

int rdv_mark(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "w");

	if (!f || fclose(f) != 0) {
		snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int rdv_wait(const char *path, double deadline)
{
	while (access(path, F_OK) != 0) {
		if (rdv_now() > deadline) {
			return -1;
		}
		usleep(10000);
	}
	return 0;
}
