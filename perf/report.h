/* SPDX-License-Identifier: Apache-2.0 */
/*
 * harp-perf's results: one JSON object per line (perf/README.md lists the keys), built a key at a
 * time, plus the facts every record carries (kernel, interface, driver, MTU, queues) and the CPU
 * time of this process.
 */
#ifndef HARP_PERF_REPORT_H
#define HARP_PERF_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PERF_SCHEMA "harp-perf/1"

struct report {
	char buf[16384];
	size_t len;
	bool overflow;
};

/* Starts a record: {"schema":..., "tool":TOOL, "test":TEST, "role":ROLE */
void report_begin(struct report *r, const char *tool, const char *test, const char *role);
void report_str(struct report *r, const char *key, const char *val); /* NULL: null */
void report_int(struct report *r, const char *key, int64_t val);
void report_num(struct report *r, const char *key, double val); /* NaN/inf: null */
void report_bool(struct report *r, const char *key, bool val);
void report_nums(struct report *r, const char *key, const double *vals, int n);
/*
 * Round-trip times (microseconds, n > 0; sorted in place): "p50_us", "p99_us", "p999_us",
 * "mean_us", "min_us", "max_us" and "cdf_us" (101 percentiles). Prints one line, prefixed with
 * what, on stdout.
 */
void report_latency(struct report *r, const char *what, double *us, int n);
/*
 * The interface's facts: "ifname", "driver" (ethtool's, or sysfs), "mtu", "queues" (the rx
 * queues the kernel shows), "kernel", "host".
 */
void report_iface(struct report *r, const char *ifname);
/* Ends the record and appends it as one line to path ("-" or NULL: stdout). 0 or -errno. */
int report_end(struct report *r, const char *path);

/* CPU seconds (user + system, all threads) this process has used so far. */
double cpu_seconds(void);
/* Peak resident set size of this process, KiB. */
long rss_peak_kb(void);
/* Resident set size now, KiB (from /proc/self/statm). */
long rss_now_kb(void);
/*
 * Packets sent so far by every interface of this network namespace but loopback
 * (/proc/net/dev), or -1: with one test alone in its namespace, what the test sent, counted as
 * the driver counts them (a TCP super-packet is one).
 */
long long netns_tx_packets(void);

#endif
