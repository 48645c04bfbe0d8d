/* SPDX-License-Identifier: Apache-2.0 */
#ifndef HARP_PAIRS_H
#define HARP_PAIRS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * Which engine of a context each UDP port pair with a peer belongs to.
 *
 * A NIC that hashes flows to queues (RSS) gives a port pair one queue, so probing alone keeps
 * two engines off the same pair. A tap under vhost-net or QEMU does not hash: the host's tun
 * driver sends a flow to the queue the guest last sent it from, with a hash that is the same
 * both ways. Two engines sending on one pair then move it between their queues with every
 * packet, and each one's packets land on the other, which does not know them (tests/vm
 * README, "Reordering without RSS"). So the first engine that sends or receives on a pair with
 * a peer owns it for the context's life: a probe round never offers another engine's pair, a
 * prober takes no path the table gives another engine, and a receiver confirms no probe on one.
 *
 * Lock-free and insert-only: an entry, once written, keeps its pair for good, so a reader needs
 * no more than one atomic load per slot; only its owner may change, back to none when the
 * engine that claimed it put no path on it (pairs_release), and from none to a new claimer.
 * Ports are kept as the wire has them (network order). The peer's address comes folded to 32
 * bits (wire_ip_fold, either family), then to 16: two peers whose addresses fold alike share
 * their pairs' owners, which only narrows the choice of pairs.
 * A full table owns nothing more, and every engine may use the pairs it does not hold
 * (PAIRS_SLOTS is many times what probing writes).
 */
#define PAIRS_SLOTS  (1u << 16)
#define PAIRS_PROBES 64 /* slots a lookup visits before it counts the table full */

/*
 * Who last sent on a flow without owning it, and when: a probe (or a STEER) steers the flow to
 * its engine's queue in a tap for 3 s, and a frame can reach the tap milliseconds after it left
 * the engine. While one engine's lease is fresh no other sends a probe on the flow or answers
 * the peer's probe on it, so that steering a late frame left cannot move a path just found.
 * A hashed slot per flow: flows that share a slot share their leases, which only delays a
 * probe.
 */
#define PAIRS_LEASE_SLOTS (1u << 14)
#define PAIRS_LEASE_MS	  3500 /* tun's flow entries live 3 s after their last use */

struct pairs {
	_Atomic uint64_t slot[PAIRS_SLOTS];
	_Atomic uint64_t full; /* claims refused a slot because their run of slots was full */
	_Atomic uint64_t lease[PAIRS_LEASE_SLOTS]; /* ms << 16 | engine + 1; 0: none */
};

/* Whether engine may use the pair: no other engine owns it. */
bool pairs_free_for(const struct pairs *t, uint32_t peer_ip, uint16_t local_port,
		    uint16_t peer_port, int engine);

/*
 * Makes engine the pair's owner unless another engine is. Returns true when the pair is
 * engine's (now or already, or the table is full), false when another engine owns it. fresh
 * (may be NULL): set when this call made it engine's.
 */
bool pairs_claim(struct pairs *t, uint32_t peer_ip, uint16_t local_port, uint16_t peer_port,
		 int engine, bool *fresh);
/* engine gives up a pair it claimed and put nothing on: it has no owner again. */
void pairs_release(struct pairs *t, uint32_t peer_ip, uint16_t local_port, uint16_t peer_port,
		   int engine);

/* Whether another engine's lease on the flow is fresh at now_ms (pairs_lease has not). */
bool pairs_leased_by_other(const struct pairs *t, uint32_t peer_ip, uint16_t local_port,
			   uint16_t peer_port, int engine, uint64_t now_ms);
/* engine sends on the flow at now_ms: its lease, renewed. */
void pairs_lease(struct pairs *t, uint32_t peer_ip, uint16_t local_port, uint16_t peer_port,
		 int engine, uint64_t now_ms);

#endif
