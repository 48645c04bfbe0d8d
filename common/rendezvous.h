/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Two processes in different network namespaces meeting through a directory both can see: a
 * file of connection handles appears whole or not at all (written aside, then renamed), and an
 * empty file marks a point one side waits for. Deadlines are CLOCK_MONOTONIC seconds.
 */
#ifndef HARP_RENDEZVOUS_H
#define HARP_RENDEZVOUS_H

#include <stddef.h>

/* Writes len bytes to path atomically. 0, or -1 with the reason in err. */
int rdv_publish(const char *path, const void *data, size_t len, char *err, size_t errlen);
/* Waits until deadline for path, which must hold exactly len bytes, and reads it. */
int rdv_fetch(const char *path, void *data, size_t len, double deadline, char *err,
	      size_t errlen);
/* Creates the empty file path. */
int rdv_mark(const char *path, char *err, size_t errlen);
/* Waits until deadline for path to exist: 0, or -1 at the deadline. */
int rdv_wait(const char *path, double deadline);
/* CLOCK_MONOTONIC in seconds: what the deadlines count in. */
double rdv_now(void);

#endif
