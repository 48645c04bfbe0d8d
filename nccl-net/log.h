/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plugin's log lines (log.c): every nccl-net file writes through HP_WARN and HP_INFO, which
 * go to the logger NCCL handed to init, prefixed NET/HARP, or to stderr (warnings only) before
 * NCCL has handed one.
 */
#ifndef HARP_NCCL_LOG_H
#define HARP_NCCL_LOG_H

#include "nccl_net_abi.h"

/* Logs through NCCL's logger (stderr before init), prefixed NET/HARP. */
void hp_log(enum hnccl_log_level level, unsigned long flags, const char *file, int line,
	    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
#define HP_WARN(...) hp_log(HNCCL_LOG_WARN, HNCCL_NET | HNCCL_INIT, __FILE__, __LINE__, __VA_ARGS__)
#define HP_INFO(...) hp_log(HNCCL_LOG_INFO, HNCCL_NET | HNCCL_INIT, __FILE__, __LINE__, __VA_ARGS__)

/*
 * NCCL's logger, from an init that came with one (the caller serialises inits); hp_log uses it
 * from then on. The function is NCCL's and stays valid while the plugin is loaded.
 */
void hp_log_set(hnccl_logger_fn logger);

#endif
