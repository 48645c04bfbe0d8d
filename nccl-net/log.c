// SPDX-License-Identifier: Apache-2.0
/*
 * The plugin's logging: one logger for the process, that of the latest init which brought one.
 * Nothing here depends on the rest of the plugin, so plugin.c, adapters.c and cuda.c all log
 * through it without reaching into each other.
 */
#include <stdarg.h>
#include <stdio.h>

#include "log.h"

static hnccl_logger_fn nccl_logger;

void hp_log_set(hnccl_logger_fn logger)
{
	nccl_logger = logger;
}

/* file and line: where the message comes from, as NCCL prints them */
void hp_log(enum hnccl_log_level level, unsigned long flags, const char *file, int line,
	    const char *fmt, ...)
{
	char msg[1024]; /* libharp lines reach 1024 bytes; NCCL truncates its own at about that */
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (nccl_logger) {
		nccl_logger(level, flags, file, line, "NET/HARP : %s", msg);
	} else if (level == HNCCL_LOG_WARN) {
		fprintf(stderr, "NET/HARP : %s\n", msg);
	}
}
