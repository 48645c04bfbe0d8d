/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A running connection's control channel: the TCP connection that set it up (control.c) stays
 * open beside the data, and carries four messages, each 16 bytes, and under HARP_AUTH a counter
 * and a MAC after each (40 bytes). Its end of file or reset tells the engine at once that the
 * peer closed or died. The engine reads and writes it; set-up hands
 * it over with the connection.
 */
#ifndef HARP_CHAN_H
#define HARP_CHAN_H

#include "conn.h"
#include "ctrlmsg.h" /* the messages: struct chan_msg, checked by ctrlmsg_chan_check */

/* Reads what the peer said: 1 when it said it hears nothing of ours (CHAN_SILENT, for the
 * engine's zero-copy watchdog), else 0; a negative errno when it is gone (c failed). */
int chan_poll(struct harp_conn *c, uint64_t now);
/*
 * Notes for the peer that its probe (round, candidate) reached this connection's engine; the
 * notes go together in one write (chan_send_paths), at once when CONN_PROBE_CANDS are waiting.
 * Returns whether the connection had none waiting (the caller lists it to send them).
 */
bool chan_note_path(struct harp_conn *c, uint32_t round, uint32_t cand);
/* Sends the noted reports, all in one write. */
void chan_send_paths(struct harp_conn *c);
/* Tells the peer we close, with our rcv_nxt: what it sent before that, it waits to see acked. */
void chan_send_close(struct harp_conn *c);
/* Tells the peer that nothing of its data path has reached us for ms while we waited on it. */
void chan_send_silent(struct harp_conn *c, uint32_t ms);
/* Tells the peer that our timeouts found every path silent (a rescue began here): its acks
 * travel on its own pairs to us, which may be what is dark, and it rescues those. */
void chan_send_unheard(struct harp_conn *c, uint32_t ms);
/* The control connection's smoothed round-trip time as the kernel's TCP measured it, in ns;
 * 0 when it cannot say. */
uint64_t chan_rtt_ns(const struct harp_conn *c);

#endif
