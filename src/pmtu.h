/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A connection's path MTU (pmtu.c): the search for the largest packet its paths carry, the
 * answers to the peer's probes, and the receiver's bookkeeping of packets the peer cut into
 * parts after its path MTU fell. pmtu.c owns struct conn_pmtu (c->pmtu) and writes
 * c->payload_max, the payload the size in use leaves; it calls down only: paths.h (a path to
 * send on, the windows' packet size), sendq.h.
 */
#ifndef HARP_PMTU_H
#define HARP_PMTU_H

#include "internal.h"
#include "wire.h"

struct harp_conn;
struct conn_tx;

/*
 * Path MTU, found by probing (packetization-layer PMTU discovery, RFC 8899's way, on harp's own
 * packets). The handshake gives the ceiling: the smaller of the two interfaces' MTUs. Packets
 * start at CONN_PMTU_BASE (or the ceiling, if lower), and PMTU probes padded to a size ask
 * whether the path carries it: the ceiling first, then a binary search between the largest size
 * answered and the smallest that was not (CONN_PMTU_TRIES probes each). A retransmission
 * timeout with packets above the base makes it probe the size in use again: unanswered, the
 * path has shrunk (a black hole), packets fall to the base, the ones in flight are sent again
 * in parts (HARP_DATA_F_SEG), and the search starts over below the old size. A finished search
 * looks up again after CONN_PMTU_RAISE_NS. An answer that comes after its probe was given up on
 * still proves the size: a loaded peer, slow to answer, must not hold the search low, nor a
 * false black hole packets at the base (unless the probe is older than the last fall).
 *
 * The base is RFC 8899's BASE_PLPMTU (for IPv4 and IPv6 alike; IPv6's links carry 1280 at
 * least, and no router there cuts a packet), a size every path is taken to carry, not 1500:
 * an overlay or a VPN between 9000-byte interfaces (VXLAN, GENEVE, GCP's 1460) carries less
 * than 1500, and a base it drops would leave nothing smaller to fall back to. The ceiling is
 * probed first, so on a clean path packets leave the base after one answered probe.
 */
#define CONN_PMTU_BASE 1200u
/* a packet cut to the base must fit HARP_SEG_MAX parts, a MAC trailer in each, over either IP */
_Static_assert(HARP_SEG_MAX * (CONN_PMTU_BASE - HARP_IP6_HLEN - HARP_UDP_HLEN - HARP_HDR_LEN -
			      HARP_AUTH_TRAILER) >=
		       HARP_IP_MAX - HARP_IP4_HLEN - HARP_UDP_HLEN - HARP_HDR_LEN,
	       "the largest packet fits HARP_SEG_MAX parts of the PMTU base");
#define CONN_PMTU_TRIES 3
#define CONN_PMTU_WAIT_MIN_NS 20000000ull /* a probe's answer is waited for at least this */
#define CONN_PMTU_RAISE_NS 600000000000ull
#define CONN_PMTU_STEP 32 /* the search stops when its bounds are this close */
struct conn_pmtu {
	uint32_t ceiling; /* the handshake's MTU; 0: not managed (payload_max set by hand) */
	uint32_t mtu;	  /* IP MTU the connection's packets use now */
	uint32_t lo, hi;  /* the search: lo was carried, hi was not (ceiling + 1: not known) */
	uint32_t probe;	  /* the size a probe in flight asks about; 0: none */
	uint32_t id;	  /* that probe's number (none in flight: the latest one's) */
	uint32_t fall_id; /* the probe whose refusal last dropped mtu to the base */
	uint8_t tries;
	bool confirming;  /* it asks about mtu itself: a suspected black hole */
	uint64_t sent_ns; /* when it last went */
	uint64_t next_ns; /* when the next search step may start */
	/* the search's earlier upper bounds, smallest last, nabove of them (pmtu_bound) */
	uint32_t above[16];
	uint8_t nabove;
	/* receiver: the peer's probes to answer, those that came since answers last went */
	uint8_t nanswers;
	struct {
		uint32_t id, size;
	} answers[4];
	/* parts the peer sent of packets it cut again, by psn (receiver); segs_open in use */
	uint32_t segs_open;
	struct {
		uint32_t psn;
		uint16_t parts; /* 0: slot free */
		uint16_t got;	/* bit per part */
	} segs[16];
};

/* ---- the engine's (conn.h's callers) ---- */
/* Whether a PMTU probe or answer is due (conn_next_probe sends them). */
bool conn_pmtu_due(const struct harp_conn *c, uint64_t now);
/* The handshake's MTU (the smaller interface's): path MTU discovery searches up to it. */
void conn_pmtu_init(struct harp_conn *c, uint32_t ceiling);

/* ---- the connection's other files' ---- */
/* The search starts with the connection's clocks (conn_start), packets at the base meanwhile. */
void pmtu_start(struct harp_conn *c, uint64_t now);
/* The next PMTU probe, or the answers to the peer's, if any are due (conn_next_probe). */
bool pmtu_next(struct harp_conn *c, struct conn_tx *tx, uint64_t now);
/* The peer's probe of size bytes came (receiver), or its answer to ours (sender). */
void pmtu_on_probe(struct harp_conn *c, uint32_t id, uint32_t size);
void pmtu_on_ack(struct harp_conn *c, uint32_t id, uint64_t size, uint64_t now);
/* A retransmission timeout: does the path still carry the size in use? */
void pmtu_suspect(struct harp_conn *c);
/*
 * Receiver, parts of a packet the peer cut again (HARP_DATA_F_SEG): the slot that takes part
 * `part` of psn's `parts`, or -1 when it is not taken (that part is here already, or no slot is
 * free: the peer sends it again); once the part is placed, pmtu_part_placed says whether it was
 * the packet's last. pmtu_has_parts: some parts of psn came (its whole copy would count twice).
 */
int pmtu_part_slot(struct harp_conn *c, uint32_t psn, uint16_t parts, uint16_t part);
bool pmtu_part_placed(struct harp_conn *c, int slot, uint16_t part);
bool pmtu_has_parts(struct harp_conn *c, uint32_t psn);

#endif
