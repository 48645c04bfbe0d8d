/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HARP_IDS_H
#define HARP_IDS_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Connection ids of one context: a slot in the low IDS_SLOT_BITS bits (slot 0 is never used, so
 * no id is 0) and the slot's generation above, so that a stale id of a closed connection does
 * not name the next one in its slot. Not locked: the caller holds its set-up lock.
 */
#define IDS_SLOT_BITS 12
#define IDS_SLOTS     (1u << IDS_SLOT_BITS)

struct conn_ids {
	uint16_t gen[IDS_SLOTS];
	bool used[IDS_SLOTS];
	int n; /* ids in use */
};

/*
 * A new id in *id. -EMFILE when max are in use; -EOVERFLOW when fewer are counted but no slot
 * is free (the count and the slots disagree: a bug, said by the caller, never an overrun).
 */
int ids_take(struct conn_ids *ids, int max, uint32_t *id);
/* Gives id back; -EINVAL (nothing changed) when its slot is not in use or its generation is not
 * the slot's: a second give of one id must not free a slot some other connection holds. */
int ids_give(struct conn_ids *ids, uint32_t id);

#endif
