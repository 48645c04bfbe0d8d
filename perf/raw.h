/* SPDX-License-Identifier: Apache-2.0 */
/* harp-perf raw: frames through harp's AF_XDP sockets with no protocol (raw.c). */
#ifndef HARP_PERF_RAW_H
#define HARP_PERF_RAW_H

/* argv[0] is "raw"; the options are perf/README.md's. Returns the process's exit status. */
int perf_raw_main(int argc, char **argv);

#endif
