/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging. Every message becomes one line, "harp: <LEVEL>: <text>", formatted on the caller's
 * stack and handed to one print function: stderr by default, or whatever harp_set_print()
 * installed (the NCCL plugin forwards to NCCL's logger). Messages below harp_log_threshold are
 * dropped before formatting. The function pointer is atomic so a logger may be swapped while
 * engines run; nothing here allocates or locks. Nothing is logged per packet.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Longest line handed to the print function; longer messages are truncated. */
#define LOG_LINE_MAX 1024

enum harp_log_level harp_log_threshold = HARP_LOG_WARN;

static void log_print_stderr(enum harp_log_level level, const char *msg)
{
	(void)level;
	fprintf(stderr, "%s\n", msg);
}

static _Atomic harp_print_fn log_print_fn = log_print_stderr;

HARP_API harp_print_fn harp_set_print(harp_print_fn fn)
{
	harp_print_fn prev;

	prev = atomic_exchange_explicit(&log_print_fn, fn ? fn : log_print_stderr,
					memory_order_acq_rel);
	return prev == log_print_stderr ? NULL : prev;
}

static const char *log_level_name(enum harp_log_level level)
{
	switch (level) {
	case HARP_LOG_ERROR:
		return "ERROR";
	case HARP_LOG_WARN:
		return "WARN";
	case HARP_LOG_INFO:
		return "INFO";
	case HARP_LOG_DEBUG:
		return "DEBUG";
	}
	return "?";
}

void harp_log(enum harp_log_level level, const char *fmt, ...)
{
	char line[LOG_LINE_MAX];
	harp_print_fn fn;
	va_list ap;
	size_t len;
	int n;

	if (level > harp_log_threshold) {
		return;
	}
	n = snprintf(line, sizeof(line), "harp: %s: ", log_level_name(level));
	if (n < 0 || (size_t)n >= sizeof(line)) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* the print function adds its own line end */
	len = strlen(line);
	if (len > 0 && line[len - 1] == '\n') {
		line[len - 1] = '\0';
	}

	fn = atomic_load_explicit(&log_print_fn, memory_order_acquire);
	fn(level, line);
}
