// SPDX-License-Identifier: Apache-2.0
/*
 * What a context's set-up shares between the API (api.c) and set-up (control.c): its connection
 * ids (ids.c), taken and given back under the context's setup_lock. Here rather than in api.c so
 * that control.c, below the API, takes an id without calling up into it.
 */
#include <errno.h>
#include <pthread.h>

#include "ctx.h"
#include "internal.h"

int ctx_alloc_id(struct harp_ctx *ctx, uint32_t *id)
{
	int err, n;

	pthread_mutex_lock(&ctx->setup_lock);
	err = ids_take(&ctx->ids, ctx->params.conns_max, id);
	n = ctx->ids.n;
	pthread_mutex_unlock(&ctx->setup_lock);
	if (err == -EMFILE) {
		pr_err("this process has %d harp connections open, the most it may "
		       "(HARP_CONNS_MAX=%d, at most %d): close some, or raise HARP_CONNS_MAX",
		       n, ctx->params.conns_max, HARP_MAX_CONNS - 1);
	} else if (err) {
		pr_err("internal error: %d connections counted but no connection id free (a bug: "
		       "please report it)", n);
	}
	return err;
}

void ctx_free_id(struct harp_ctx *ctx, uint32_t id)
{
	int err;

	pthread_mutex_lock(&ctx->setup_lock);
	err = ids_give(&ctx->ids, id);
	pthread_mutex_unlock(&ctx->setup_lock);
	if (err) {
		pr_err("internal error: connection id %#x given back twice (a bug: please report it)",
		       id);
	}
}
