/* SPDX-License-Identifier: Apache-2.0 */
/* Connection ids (ids.h). */
#include <errno.h>

#include "ids.h"

int ids_take(struct conn_ids *ids, int max, uint32_t *id)
{
	uint32_t slot;

	if (ids->n >= max) {
		return -EMFILE;
	}
	for (slot = 1; slot < IDS_SLOTS && ids->used[slot]; slot++) {
	}
	if (slot == IDS_SLOTS) {
		return -EOVERFLOW;
	}
	ids->n++;
	ids->used[slot] = true;
	ids->gen[slot]++;
	*id = (uint32_t)ids->gen[slot] << IDS_SLOT_BITS | slot;
	return 0;
}

int ids_give(struct conn_ids *ids, uint32_t id)
{
	uint32_t slot = id & (IDS_SLOTS - 1);

	if (!slot || !ids->used[slot] || (uint16_t)(id >> IDS_SLOT_BITS) != ids->gen[slot] ||
	    ids->n <= 0) {
		return -EINVAL;
	}
	ids->used[slot] = false;
	ids->n--;
	return 0;
}
