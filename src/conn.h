/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A connection and its requests. The set-up thread builds a connection (control.c); once
 * established it is handed to its engine, which alone runs its reliability state from then on.
 * The data thread posts requests through the connection's SPSC ring and polls each request's
 * atomic state; it never touches engine-owned fields.
 */
#ifndef HARP_CONN_H
#define HARP_CONN_H

#include <stdatomic.h>

#include "internal.h"
#include "paths.h"
#include "pmtu.h"
#include "spsc.h"
#include "wire.h"

#define CONN_TXQ 4096	  /* reliable packets in flight per connection (power of two) */
#define CONN_RECV_SLOTS 256 /* receives outstanding per connection (power of two) */
#define CONN_REQS 512	  /* request objects per connection */
#define CONN_ACK_EVERY 32 /* reliable packets per ack in order */
#define CONN_ACK_DELAY_NS 20000 /* longest an ack waits for company */
#define CONN_RTO_INIT_US 20000 /* retransmission timeouts, the connection's and each path's */
#define CONN_RTO_MIN_US 10000
#define CONN_RTO_MAX_US 2000000
#define CONN_REO_MULT_MAX 2	/* RACK's window grows to at most half an RTT (docs/PROTOCOL.md) */
#define CONN_REO_QUIET 16	/* losses found without a duplicate before the window shrinks */
/* Sends of at most CONN_EAGER_BYTES complete when their one packet first goes out: the payload
 * is copied into one of CONN_EAGER_SLOTS slots kept until the packet is acked. */
#define CONN_EAGER_SLOTS 64
#define CONN_EAGER_BYTES HARP_UNSOL_MAX_BYTES
/* A send that small may also go before the peer's CTS for it has arrived (unsolicited): the
 * receiver holds it until the receive it falls to is posted. At most CONN_UNSOL_CREDITS such
 * sends wait to learn their buffer, so the receiver holds at most that many (power of two). */
#define CONN_UNSOL_CREDITS 32

enum req_state {
	REQ_FREE = 0,
	REQ_PENDING,
	REQ_DONE,
	REQ_FAILED,
};

enum req_kind {
	REQ_SEND = 1,
	REQ_RECV = 2,
};

struct harp_req {
	_Atomic int state; /* enum req_state; engine stores DONE/FAILED with release */
	int err;	   /* negative errno when FAILED */
	uint8_t kind;
	struct harp_conn *conn;
	struct harp_req *next; /* engine's queues; free list when REQ_FREE */
	union {
		struct {
			const uint8_t *buf;
			uint64_t len;
			uint32_t tag;
			bool matched;	   /* bound to a receive buffer of the peer */
			uint64_t cap;	   /* that buffer's capacity */
			bool all_queued;   /* every packet has been given a psn */
			uint8_t buf_idx;
			uint32_t rsn;
			uint32_t ssn;	   /* its sequence number, and so its slot in send_slots */
			uint64_t next_off; /* next byte to packetise */
			uint32_t pkts, pkts_acked;
			uint32_t unsol_psn; /* sent unsolicited: its one packet */
			bool device;	    /* buf is device memory: read through copies only */
		} send;
		struct {
			int nbufs;
			uint32_t rsn;
			uint8_t *bufs[HARP_RECV_MAX_BUFS];
			uint64_t cap[HARP_RECV_MAX_BUFS];
			uint32_t tag[HARP_RECV_MAX_BUFS];
			uint64_t got[HARP_RECV_MAX_BUFS];     /* payload bytes placed */
			/* the end of the furthest bytes a packet whose checksum held placed: past
			 * it, no byte counts yet (deliver_place_at) */
			uint64_t placed_end[HARP_RECV_MAX_BUFS];
			uint64_t msg_len[HARP_RECV_MAX_BUFS]; /* UINT64_MAX until known */
			uint32_t done_mask;
			int cts_queued; /* CTS packets given a psn */
			int err;	/* a buffer was refused (MSGERR) */
			uint32_t device_mask; /* buffers in device memory: written through copies */
		} recv;
	};
};

/* One reliable packet in flight, enough to send it again without holding a frame. */
struct tx_rec {
	uint8_t type;
	uint8_t buf_idx;
	uint8_t nbufs;
	bool acked;
	bool in_pipe;	 /* counted in inflight */
	bool rtx_queued; /* on the retransmission queue */
	uint8_t path;	 /* the path it last went out on */
	bool resent;	 /* sent more than once: no RTT sample from it (Karn) */
	uint8_t eager;	 /* DATA of a send already completed: 1 + the slot of its payload */
	bool dead;	 /* its request failed while lingering: never sent again */
	bool unsol;	 /* DATA sent before its buffer was known: rsn is the send's ssn */
	uint8_t seg_parts; /* went in this many parts once (the path MTU fell): always so again */
	uint16_t len;
	uint16_t pipe_bytes; /* counted in its path's inflight_bytes, while in_pipe */
	uint32_t rsn;
	uint32_t tag;
	uint64_t offset;
	uint64_t msg_len;
	uint64_t sent_ns;
	struct harp_req *sreq; /* DATA, MSGERR: its send (NULL once completed: eager) */
};

/* An unsolicited message that arrived before its receive was posted. */
struct unsol_held {
	bool valid;
	uint32_t ssn;
	uint32_t tag;
	uint16_t len;
};

/* A receive of the peer's, as its CTS packets describe it. */
struct cts_group {
	uint32_t rsn;
	uint8_t nbufs;
	uint8_t arrived;      /* CTS packets seen */
	uint8_t matched_mask; /* buffers already bound to a send */
	bool valid;
	uint64_t cap[HARP_RECV_MAX_BUFS];
	uint32_t tag[HARP_RECV_MAX_BUFS];
	uint32_t seen_mask;
	/* (1 << 32) | rsn once every CTS of the receive arrived (release): what another thread reads
	 * with harp_conn__peer_recv (acquire); the fields above stay as they are until the slot is
	 * taken by a receive CONN_RECV_SLOTS later, which the peer posts only after this one */
	_Atomic uint64_t ready;
};






/* A packet the path MTU shrank under, going out in parts: which, and how far. */
struct conn_seg_out {
	bool active;
	uint32_t psn;
	uint16_t next, parts;
	uint32_t part_len;
	uint16_t src_port, dst_port;
};

enum conn_state {
	CONN_SETUP = 0, /* handshake in progress (control.c) */
	CONN_READY,	/* handed to the engine */
	CONN_FAILED,
};

struct harp_engine;

/* The engine's copies into device memory (engine.c: engine_copy_in, engine_copies_wait), for
 * receives whose buffers are there. */
struct conn_device {
	int (*copy_in)(struct harp_engine *e, uint8_t *dst, const uint8_t *src, uint32_t n);
	int (*wait)(struct harp_engine *e);
};

/*
 * The engine's lists a connection is on, linked through it (engine.c alone reads or writes
 * these; conn.c never does). Each list's membership flag keeps a connection on it at most once.
 */
struct conn_links {
	struct harp_conn *next_new;	 /* hand-over: set-up thread -> engine (lock-free) */
	_Atomic bool wants_take;	 /* on the list of those with new requests (lock-free) */
	struct harp_conn *next_take;	 /* that list */
	struct harp_conn *next_active;	 /* every adopted connection */
	struct harp_conn *next_retry;	 /* those whose next request must wait for a slot */
	struct harp_conn *next_tx;	 /* those that may have packets to send */
	struct harp_conn *next_ack_wait; /* those owing a delayed ack, not yet due */
	struct harp_conn *next_ack;	 /* those whose ack goes out this pass */
	struct harp_conn *next_report;	 /* those owing probe reports, sent once the pass's packets
					  * are read */
	bool on_retry, on_tx, on_ack_wait, on_ack_list;
};

struct harp_conn {
	/* ---- set at set-up, read-only afterwards ---- */
	struct harp_ctx *ctx;
	struct harp_engine *engine;
	const struct conn_device *device; /* its engine's, set when the engine adopts it */
	uint32_t id;	  /* ours: carried in the peer's packets */
	uint32_t peer_id; /* theirs: carried in ours */
	uint64_t token;
	struct wire_path path;
	uint32_t payload_max;
	struct harp_auth *auth; /* HARP_AUTH: its keys; NULL: frames carry no MAC */
	int ctrl_fd; /* the TCP control connection */
	bool is_listener_side;
	bool fault_hang; /* HARP_FAULT_CONNECT_HANG: its set-up never goes on */

	/* ---- shared between threads ---- */
	_Atomic int state;	   /* enum conn_state */
	_Atomic int fail_err;	   /* why it failed */
	struct spsc *submit;	   /* data thread -> engine: struct harp_req * */
	struct conn_links links;   /* the engine's */

	/* ---- set-up thread only (control.c) ---- */
	struct ctrl_setup *setup;

	/* ---- data thread only ---- */
	struct harp_req *reqs;	    /* CONN_REQS, handed out in order as first needed */
	uint32_t reqs_used;	    /* reqs[0..reqs_used) have been handed out */
	struct harp_req *free_reqs; /* those given back */
	uint32_t next_rsn;

	/* ---- engine only: each part written by the file named (conn.c has the map) ---- */
	/* -- the control channel (chan.c; engine.c tells the peer of a silence) -- */
	/* the peer's probes that reached us in this pass, reported together (chan.h) */
	uint32_t report_round[CONN_PROBE_CANDS], report_cand[CONN_PROBE_CANDS];
	uint32_t nreports;
	/* the rest of a control message the socket took only part of: written before any other */
	uint8_t chan_rest[16 + HARP_AUTH_TRAILER]; /* a message (ctrlmsg.h) and its trailer */
	uint8_t chan_rest_len;
	bool peer_closed; /* the peer said close on the control channel */
	/* after that, until every packet sent before close_psn (its rcv_nxt then) is acked:
	 * conn_on_peer_close */
	bool peer_closing;
	uint32_t close_psn;
	/* Silence reports (CHAN_SILENT): when we told the peer that it has not been heard for the
	 * stall time while we waited on it (0: not in this silence), and what the peer told us of
	 * ours (ms; 0: nothing) */
	uint64_t silence_told_ns;
	uint32_t peer_hears_nothing_ms;
	uint64_t peer_silent_ns; /* when that report came */
	/* -- the engine's (engine.c) -- */
	struct pairs *pairs; /* the engine's context's port-pair owners; NULL: none kept */
	int pair_owner;	     /* the engine's number in it */
	uint16_t ip_id;
	bool linger_reap; /* lingering, closed by its user: freed once its eager sends are acked */
	/* -- timers (conn.c): the retransmission timeout (ack.c restarts it on each new ack, transmit.c
	 * with the first packet in flight), and the peer's liveness -- */
	struct rtt_est rtt;
	uint64_t rto_base_ns; /* retransmission timer runs from here */
	uint32_t rto_streak;  /* timeouts since the last ack of anything new */
	uint64_t last_ack_ns; /* last ack that acknowledged something new */
	uint64_t heard_ns;    /* last packet from the peer, or when requests began to wait */
	uint64_t rx_any_ns;   /* last packet from the peer, whatever waits (CHAN_UNHEARD) */
	uint64_t ping_ns;     /* last liveness ping */
	bool ping_due;	      /* the next ACK asks the peer to answer at once */
	/* -- requests taken, completed, failed (reqs.c) -- */
	struct harp_req **send_slots;	/* CONN_REQS, by send sequence number */
	/* sends: oldest pending, first not packetised (transmit.c moves it), next to number */
	uint32_t ssn_tail, ssn_cur, ssn_next;
	struct harp_req *cts_out_head, *cts_out_tail; /* receives whose CTS are not all sent */
	struct harp_req **recv_slots; /* CONN_RECV_SLOTS, by our rsn */
	/* the peer's sends fall to our receives in order, nbufs each: */
	uint32_t rcv_ssn_next;	 /* the first send of the next receive taken */
	uint32_t rcv_rsn_next;	 /* one past the newest receive taken */
	uint32_t rcv_taken;	 /* receives taken, up to CONN_RECV_SLOTS */
	uint32_t *rcv_first_ssn; /* CONN_RECV_SLOTS, by rsn: the first send each receive takes */
	uint32_t recvs_open; /* receives taken and not yet finished */
	bool lingering;	       /* its requests failed; only its eager sends still go, till acked */
	int linger_err;	       /* the error it fails with once they are (not closed) */
	/* closed by its user: lingering, it also acks again what the peer sent before (its acks
	 * may have been lost), from when it told the peer it closed (close_told_ns; 0: not yet)
	 * until the peer closes too or is quiet for half its peer timeout */
	bool answering;
	uint64_t close_told_ns;
	/* -- what goes next (transmit.c) -- */
	uint32_t snd_nxt; /* next psn to give a new packet */
	uint32_t inflight; /* records in a path's pipe (sendq.h) */
	struct tx_rec *txq;		 /* CONN_TXQ records, by psn */
	uint32_t *rtxq;			 /* psns to send again (ring of CONN_TXQ) */
	uint32_t rtx_head, rtx_tail;
	uint32_t unsol_tag[CONN_UNSOL_CREDITS]; /* sends gone unsolicited: their tags, by ssn */
	/* completed small sends not yet acked: their payloads, and which slots hold one */
	uint8_t *eager_copies; /* CONN_EAGER_SLOTS x CONN_EAGER_BYTES */
	uint64_t eager_used;   /* bit per slot */
	struct conn_seg_out seg_out;
	/* the last conn_next_tx found a path with room held back by pacing (paths_pick, seg_room) */
	bool pace_held;
	/* -- the sender's acks (ack.c) -- */
	uint32_t snd_una; /* oldest psn not acked */
	uint32_t highest_acked;			 /* one past the highest psn acked */
	uint64_t rack_xmit_ns;			 /* send time of the latest packet acked */
	/* RACK's reordering window, a quarter of the RTT times reo_mult (1..CONN_REO_MULT_MAX): one
	 * more for each round trip in which the peer saw a packet twice, one less after
	 * CONN_REO_QUIET losses found with no duplicate reported */
	uint8_t reo_mult;
	uint8_t reo_quiet;
	uint64_t reo_bump_ns; /* when reo_mult last grew */
	uint64_t reo_timeouts; /* stats.timeouts then: duplicates a timeout made prove nothing */
	/* -- the receiver's side, and the peer's CTS (deliver.c); transmit.c clears the ack owed as
	 * one goes out -- */
	struct cts_group *cts;			 /* CONN_RECV_SLOTS, by the peer's rsn */
	uint32_t cts_head_rsn;			 /* oldest peer receive not fully matched */
	uint32_t ssn_bound; /* sends before it know their buffer; from it to ssn_cur went unsolicited */
	uint32_t rcv_nxt; /* every psn before it arrived */
	uint64_t *rcv_bits; /* CONN_TXQ bits: psn received, from rcv_nxt on */
	/* unsolicited messages that came before their receive, by ssn (CONN_UNSOL_CREDITS) */
	struct unsol_held *held;
	uint8_t *held_bytes; /* CONN_UNSOL_CREDITS x CONN_EAGER_BYTES */
	uint32_t last_ts;	      /* ts of the latest reliable packet, echoed in acks */
	bool ack_due;	   /* something arrived that the peer has not seen acked */
	bool ack_now;	   /* the sender needs this ack at once (a message done, a hole, ...) */
	bool ack_twin;	   /* a hole, a duplicate or a ping: a second copy on another path too */
	bool dup_seen;	   /* a reliable packet arrived twice since the last ACK */
	uint32_t rx_since_ack;
	uint32_t sacked_pending; /* bits set in rcv_bits */
	uint64_t ack_due_ns; /* when ack_due was set */
	/* -- paths (paths.c) -- */
	struct conn_path paths[CONN_MAX_PATHS];
	uint32_t npaths;      /* slots used in paths[] (live or retired) */
	uint32_t paths_live;
	uint32_t paths_want;  /* HARP_PATHS */
	uint32_t cwnd_max;    /* HARP_CWND_MAX: packets, the whole connection's, split over its
			       * paths; their windows in bytes stop at as many full-size packets */
	uint32_t path_rr;     /* rotates pure ACKs and ties over the live paths */
	bool pacing;	      /* HARP_PACING=on */
	uint16_t port_lo;     /* our UDP port range (source ports), host order */
	uint16_t port_span;
	uint16_t peer_port_lo; /* the peer's (destination ports), from its hello */
	uint16_t peer_port_span;
	struct conn_probe probe;
	struct conn_steer steer;
	struct cc cc_before_rto[CONN_MAX_PATHS]; /* restored if the timeout proves spurious */
	uint32_t rto_at_us;	  /* when the last timeout fired (our ts clock) */
	bool rto_undo_armed;
	/* -- path MTU (pmtu.c) -- */
	struct conn_pmtu pmtu;

	struct harp_conn_stats stats;
};

/* ---- per-connection reliability as the engine calls it (engine thread): conn.c; reqs.c from
 * conn_uses_region to conn_linger_fail; transmit.c from conn_next_tx on ---- */
int conn_alloc_state(struct harp_conn *c, uint32_t cwnd_max);
void conn_free(struct harp_conn *c);
void conn_start(struct harp_conn *c, uint64_t now);
/* A checked packet for this connection arrived. */
void conn_on_packet(struct harp_conn *c, const struct wire_pkt *p, uint64_t now);
/*
 * Where a bulk DATA frame's body may be copied while its checksum is still being checked
 * (deliver_place_at says when), or NULL. Reads only: the frame is not known good yet.
 */
uint8_t *conn_place_at(struct harp_conn *c, const struct wire_pkt *p);
/* Takes a posted request from the data thread. Returns false if it must wait (slot busy). */
bool conn_take_request(struct harp_conn *c, struct harp_req *r);
/* How long c has waited on its peer: since the last new ack while packets are in flight, since
 * the last packet while requests wait; 0 when nothing waits. */
uint64_t conn_waited_ns(const struct harp_conn *c, uint64_t now);
/* Timers: retransmission timeout, dead peer (pinged while requests wait and nothing is in
 * flight). */
void conn_on_timer(struct harp_conn *c, uint64_t now, uint64_t peer_timeout_ns);
/* The engine's queue was bound again: what is unacked goes again now, the timer rearmed. */
void conn_on_rebind(struct harp_conn *c, uint64_t now);
/* Does a pending request read or write [addr, addr+len)? */
bool conn_uses_region(const struct harp_conn *c, const void *addr, size_t len);
/* Fails every pending request with err and stops the connection. */
void conn_fail(struct harp_conn *c, int err);
/*
 * Its user closed c, or deregistered memory its requests use (its buffers may now be freed),
 * while sends it was told are complete are not yet acked: fails every pending request with err,
 * gives up what else is in flight, and keeps only those sends going, from their copies, until
 * they are acked (conn_linger_done) or the connection fails. False when no such send waits.
 * answer (a close by its user): it lingers in any case, and acks again what the peer sent
 * before the close (answering), until the peer closes too or falls quiet.
 */
bool conn_linger(struct harp_conn *c, int err, bool answer);
/* Whether lingering is over: its eager sends acked and, answering, the peer closed or was quiet
 * for quiet_ns since we told it we closed. */
bool conn_linger_done(const struct harp_conn *c, uint64_t now, uint64_t quiet_ns);
/* Lingering is over for a connection its user aborted, not closed: it fails with its error. */
void conn_linger_fail(struct harp_conn *c);
/*
 * The peer said it closed, with its rcv_nxt (chan.c). Its value bounds what may still be acked,
 * and acks nothing: the connection fails with ECONNRESET once every packet sent before it is
 * acked by ACK frames (conn_peer_close_check, called again by the engine's timers), or by the
 * peer timeout when those acks never come. True when it failed now (tell the peer: it lingers
 * until then).
 */
bool conn_on_peer_close(struct harp_conn *c, uint32_t peer_rcv_nxt);
bool conn_peer_close_check(struct harp_conn *c);

/* Something to transmit: a reliable packet (new or again), an ACK or a PROBE. */
struct conn_tx {
	struct harp_hdr h;
	uint16_t src_port, dst_port; /* the path it takes, network order */
	/* ACK: an urgent one (the sender waits on it) goes out a second time on this other path,
	 * so that one dark path cannot stall the connection; 0: only once */
	uint16_t twin_src_port, twin_dst_port;
	const uint8_t *payload; /* DATA: h.len bytes from the sender's buffer */
	bool device;		/* ... which is in device memory (harp_mr__reg_device) */
	uint8_t sack[HARP_SACK_MAX_BYTES]; /* ACK: h.len bytes of it */
};
/*
 * Produces the next packet this connection wants to send, within its window. Returns false when
 * it has nothing to send now. The engine builds the frame from tx at once (tx->payload points
 * into the sender's buffer).
 */
bool conn_next_tx(struct harp_conn *c, struct conn_tx *tx, uint64_t now);
/* Has it packets to send, now or once its window or paths allow (a cheap check)? */
bool conn_tx_pending(const struct harp_conn *c);
/* The next PMTU probe or answer, STEER or PROBE, if one is due: packets outside the windows. */
bool conn_next_probe(struct harp_conn *c, struct conn_tx *tx, uint64_t now);
/* conn_next_tx said no because pacing holds a path back: ask again soon, not on the next ack. */
static inline bool conn_paced(const struct harp_conn *c)
{
	return c->pace_held;
}

/* Acks wait for CONN_ACK_EVERY packets or CONN_ACK_DELAY_NS, unless the sender needs them now. */
bool conn_ack_wanted(const struct harp_conn *c, uint64_t now);
bool conn_make_ack(struct harp_conn *c, struct conn_tx *tx, uint64_t now);
/* The ACK conn_make_ack made found no frame: it is owed again, for the next pass. */
void conn_ack_unsent(struct harp_conn *c);

static inline void req_finish(struct harp_req *r, int err)
{
	r->err = err;
	/* release: the request's results (sizes, data placed in its buffers) are visible before
	 * the data thread sees it finished */
	atomic_store_explicit(&r->state, err ? REQ_FAILED : REQ_DONE, memory_order_release);
}

#endif
