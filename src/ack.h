/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Acknowledgements as the sender takes them (ack.c), for conn.c: an ACK's cumulative ack and
 * selective-ack map (sack_bits bits at sack), or the cumulative ack a reliable packet or the
 * peer's close carries (sack NULL; ts_echo 0 when there is nothing to echo).
 */
#ifndef HARP_ACK_H
#define HARP_ACK_H

#include <stdint.h>

struct harp_conn;

void ack_on_ack(struct harp_conn *c, uint32_t ack_psn, const uint8_t *sack, uint32_t sack_bits,
		uint32_t ts_echo, uint64_t now);
/* The peer saw a packet twice (HARP_ACK_F_DUP): RACK's reordering window may be too tight. */
void ack_on_dup(struct harp_conn *c, uint64_t now);

#endif
