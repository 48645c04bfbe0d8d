// SPDX-License-Identifier: Apache-2.0
/* JSON-line records for harp-perf; see report.h. */
#include <errno.h>
#include <math.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>

#include "netinfo.h"
#include "report.h"

static void put(struct report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct report *r, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (r->overflow) {
		return;
	}
	va_start(ap, fmt);
	n = vsnprintf(r->buf + r->len, sizeof(r->buf) - r->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(r->buf) - r->len) {
		r->overflow = true;
		return;
	}
	r->len += (size_t)n;
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void put_str(struct report *r, const char *s)
{
	put(r, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			put(r, "\\%c", c);
		} else if (c < 0x20) {
			put(r, "\\u%04x", c);
		} else {
			put(r, "%c", c);
		}
	}
	put(r, "\"");
}

static void put_key(struct report *r, const char *key)
{
	put(r, ",");
	put_str(r, key);
	put(r, ":");
}

void report_begin(struct report *r, const char *tool, const char *test, const char *role)
{
	r->len = 0;
	r->overflow = false;
	put(r, "{\"schema\":\"%s\"", PERF_SCHEMA);
	report_str(r, "tool", tool);
	report_str(r, "test", test);
	report_str(r, "role", role);
}

void report_str(struct report *r, const char *key, const char *val)
{
	put_key(r, key);
	if (val) {
		put_str(r, val);
	} else {
		put(r, "null");
	}
}

void report_int(struct report *r, const char *key, int64_t val)
{
	put_key(r, key);
	put(r, "%lld", (long long)val);
}

static void put_num(struct report *r, double val)
{
	if (isfinite(val)) {
		put(r, "%.6g", val);
	} else {
		put(r, "null");
	}
}

void report_num(struct report *r, const char *key, double val)
{
	put_key(r, key);
	put_num(r, val);
}

void report_bool(struct report *r, const char *key, bool val)
{
	put_key(r, key);
	put(r, val ? "true" : "false");
}

void report_nums(struct report *r, const char *key, const double *vals, int n)
{
	int i;

	put_key(r, key);
	put(r, "[");
	for (i = 0; i < n; i++) {
		if (i) {
			put(r, ",");
		}
		put_num(r, vals[i]);
	}
	put(r, "]");
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The p-th percentile of n sorted values (nearest rank). */
static double pct(const double *sorted, int n, double p)
{
	int i = (int)ceil(p / 100.0 * n) - 1;

	return sorted[i < 0 ? 0 : i >= n ? n - 1 : i];
}

void report_latency(struct report *r, const char *what, double *us, int n)
{
	double cdf[101], sum = 0;
	int i;

	qsort(us, (size_t)n, sizeof(*us), cmp_double);
	for (i = 0; i < n; i++) {
		sum += us[i];
	}
	for (i = 0; i <= 100; i++) {
		cdf[i] = pct(us, n, i);
	}
	report_num(r, "p50_us", pct(us, n, 50));
	report_num(r, "p99_us", pct(us, n, 99));
	report_num(r, "p999_us", pct(us, n, 99.9));
	report_num(r, "mean_us", sum / n);
	report_num(r, "min_us", us[0]);
	report_num(r, "max_us", us[n - 1]);
	report_nums(r, "cdf_us", cdf, 101);
	printf("%s: p50 %.1f us  p99 %.1f us  p99.9 %.1f us\n", what, pct(us, n, 50),
	       pct(us, n, 99), pct(us, n, 99.9));
}

/* The driver's name as ethtool -i shows it ("veth", "ena", "virtio_net"), or NULL. */
static int iface_driver(const char *ifname, char *out, size_t len)
{
	struct ethtool_drvinfo info = { .cmd = ETHTOOL_GDRVINFO };
	struct ifreq ifr = { 0 };
	int fd, err = 0;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -errno;
	}
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ifr.ifr_data = (void *)&info;
	if (ioctl(fd, SIOCETHTOOL, &ifr)) {
		err = -errno;
	} else {
		snprintf(out, len, "%s", info.driver);
	}
	close(fd);
	return err;
}

void report_iface(struct report *r, const char *ifname)
{
	struct if_info ifi;
	struct utsname u;
	char val[256];
	bool known;

	report_str(r, "ifname", ifname);
	if (ifname && !iface_driver(ifname, val, sizeof(val))) {
		report_str(r, "driver", val);
	} else {
		report_str(r, "driver", NULL);
	}
	/* asked in this network namespace (its /sys may be another's, under nsenter) */
	known = ifname && !netinfo_interface(ifname, &ifi);
	if (known) {
		report_int(r, "mtu", ifi.mtu);
	} else {
		report_str(r, "mtu", NULL);
	}
	if (known && ifi.rx_queues > 0) {
		report_int(r, "queues", ifi.rx_queues);
	} else {
		report_str(r, "queues", NULL);
	}
	if (!uname(&u)) {
		report_str(r, "kernel", u.release);
		report_str(r, "host", u.nodename);
	}
}

int report_end(struct report *r, const char *path)
{
	FILE *f;
	int err = 0;

	put(r, "}\n");
	if (r->overflow) {
		fprintf(stderr, "harp-perf: a result record outgrew %zu bytes and was dropped\n",
			sizeof(r->buf));
		return -EOVERFLOW;
	}
	if (!path || !strcmp(path, "-")) {
		fwrite(r->buf, 1, r->len, stdout);
		fflush(stdout);
		return 0;
	}
	f = fopen(path, "a");
	if (!f) {
		err = -errno;
		fprintf(stderr, "harp-perf: cannot append to %s: %s\n", path, strerror(errno));
		return err;
	}
	/* one write per record, so ranks appending to one file never interleave a line */
	setvbuf(f, NULL, _IOFBF, sizeof(r->buf) + 16);
	if (fwrite(r->buf, 1, r->len, f) != r->len) {
		err = -EIO;
	}
	if (fclose(f) && !err) {
		err = -errno;
	}
	if (err) {
		fprintf(stderr, "harp-perf: writing %s: %s\n", path, strerror(-err));
	}
	return err;
}

double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

long rss_peak_kb(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

long rss_now_kb(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f) {
		return -1;
	}
	if (fscanf(f, "%ld %ld", &pages, &rss) != 2) {
		rss = -1;
	}
	fclose(f);
	return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

long long netns_tx_packets(void)
{
	char line[512];
	long long total = 0, v[10];
	FILE *f = fopen("/proc/net/dev", "r");

	if (!f) {
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':'), *name = line;

		if (!colon) {
			continue; /* the two header lines */
		}
		*colon = '\0';
		while (*name == ' ') {
			name++;
		}
		/* receive: bytes packets errs drop fifo frame compressed multicast; transmit: bytes
		 * packets ... */
		if (strcmp(name, "lo") &&
		    sscanf(colon + 1, "%lld %lld %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1],
			   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]) == 10) {
			total += v[9];
		}
	}
	fclose(f);
	return total;
}
