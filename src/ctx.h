/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A context: one interface, its engines and what set-up shares (the id allocator, the queue to
 * give the next connection). The API (api.c) owns it; set-up (control.c) reads it; ctx.c keeps
 * its connection ids for both.
 */
#ifndef HARP_CTX_H
#define HARP_CTX_H

#include <pthread.h>

#include "engine.h"
#include "ids.h"
#include "netinfo.h"
#include "pairs.h"

struct harp_ctx {
	struct harp_params params;
	struct if_info ifi;
	/* the address the listeners take, of the family HARP_FAMILY picks (IPv4 mapped, or IPv6):
	 * a connector takes the family of the listener's handle */
	union wire_ip ip;
	struct steer steer;
	int queue_ids[HARP_MAX_QUEUES]; /* HARP_QUEUES, ascending: engine i runs queue_ids[i] */
	int nqueues;
	int queues_take_free; /* auto, alone: take this many of queue_ids, the ones not held */
	int nengines;
	struct harp_engine *engines;
	int ip_mtu;
	uint32_t payload_max;
	pthread_mutex_t setup_lock; /* set-up path only: the id allocator */
	struct conn_ids ids;
	_Atomic uint32_t next_engine;
	struct engine_keeper keeper; /* runs engines no caller has run lately */
	bool engine_threads;	     /* each engine runs on a thread of its own instead */
	struct zc_fallback copy_fallback; /* a zero-copy socket stalled: copy mode, for a while */
	struct pairs pairs;	     /* which engine owns each port pair with a peer */
	struct harp_device_ops device; /* harp_ctx__set_device: copy NULL until then */
};

/* Connection ids (ids.h), under setup_lock; at HARP_CONNS_MAX, -EMFILE and an error line. */
int ctx_alloc_id(struct harp_ctx *ctx, uint32_t *id);
void ctx_free_id(struct harp_ctx *ctx, uint32_t id);

#endif
