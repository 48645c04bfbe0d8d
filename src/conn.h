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
#include "spsc.h"
#include "wire.h"

#define CONN_TXQ 4096	  /* reliable packets in flight per connection (power of two) */
#define CONN_RECV_SLOTS 256 /* receives outstanding per connection (power of two) */
#define CONN_REQS 512	  /* request objects per connection */
#define CONN_ACK_EVERY 32 /* reliable packets per ack in order */
#define CONN_ACK_DELAY_NS 20000 /* longest an ack waits for company */

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
			uint32_t ssn;	   /* its slot in send_slots */
			uint64_t next_off; /* next byte to packetise */
			uint32_t pkts, pkts_acked;
		} send;
		struct {
			int nbufs;
			uint32_t rsn;
			uint8_t *bufs[HARP_RECV_MAX_BUFS];
			uint64_t cap[HARP_RECV_MAX_BUFS];
			uint32_t tag[HARP_RECV_MAX_BUFS];
			uint64_t got[HARP_RECV_MAX_BUFS];     /* payload bytes placed */
			uint64_t msg_len[HARP_RECV_MAX_BUFS]; /* UINT64_MAX until known */
			uint32_t done_mask;
			int cts_queued; /* CTS packets given a psn */
			int err;	/* a buffer was refused (MSGERR) */
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
	uint16_t len;
	uint32_t rsn;
	uint32_t tag;
	uint64_t offset;
	uint64_t msg_len;
	uint64_t sent_ns;
	struct harp_req *sreq; /* DATA, MSGERR: its send */
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
};

enum conn_state {
	CONN_SETUP = 0, /* handshake in progress (control.c) */
	CONN_READY,	/* handed to the engine */
	CONN_FAILED,
};

struct harp_engine;

struct harp_conn {
	/* ---- set at set-up, read-only afterwards ---- */
	struct harp_ctx *ctx;
	struct harp_engine *engine;
	uint32_t id;	  /* ours: carried in the peer's packets */
	uint32_t peer_id; /* theirs: carried in ours */
	uint64_t token;
	struct wire_path path;
	uint32_t payload_max;
	int ctrl_fd; /* the TCP control connection */
	bool is_listener_side;

	/* ---- shared between threads ---- */
	_Atomic int state;	   /* enum conn_state */
	_Atomic int fail_err;	   /* why it failed */
	_Atomic bool close_req;	   /* the user closed it; the engine frees it */
	struct spsc *submit;	   /* data thread -> engine: struct harp_req * */
	struct harp_conn *next_new; /* engine's hand-over list link */

	/* ---- set-up thread only (control.c) ---- */
	struct ctrl_setup *setup;

	/* ---- data thread only ---- */
	struct harp_req *reqs;
	struct harp_req *free_reqs;
	uint32_t next_rsn;

	/* ---- engine only ---- */
	struct harp_conn *next_active; /* engine's list of connections */
	uint16_t ip_id;
	/* sender */
	uint32_t snd_una, snd_nxt;
	uint32_t inflight;
	struct tx_rec *txq;		 /* CONN_TXQ records, by psn */
	uint32_t *rtxq;			 /* psns to send again (ring of CONN_TXQ) */
	uint32_t rtx_head, rtx_tail;
	struct harp_req **send_slots;	/* CONN_REQS, by send sequence number */
	uint32_t ssn_tail, ssn_cur, ssn_next; /* oldest pending, first not packetised, next */
	struct harp_req *cts_out_head, *cts_out_tail; /* receives whose CTS are not all sent */
	struct cts_group *cts;			 /* CONN_RECV_SLOTS, by the peer's rsn */
	uint32_t cts_head_rsn;			 /* oldest peer receive not fully matched */
	uint64_t rack_xmit_ns;			 /* send time of the latest packet acked */
	uint32_t highest_acked;			 /* one past the highest psn acked */
	struct rtt_est rtt;
	struct cc cc;
	struct cc cc_before_rto; /* restored if the timeout proves spurious */
	uint32_t rto_at_us;	  /* when the last timeout fired (our ts clock) */
	bool rto_undo_armed;
	uint64_t rto_base_ns; /* retransmission timer runs from here */
	uint64_t last_ack_ns; /* last ack that acknowledged something new */
	/* receiver */
	uint32_t rcv_nxt;
	uint64_t *rcv_bits; /* CONN_TXQ bits: psn received, from rcv_nxt on */
	struct harp_req **recv_slots; /* CONN_RECV_SLOTS, by our rsn */
	uint32_t last_ts;	      /* ts of the latest reliable packet, echoed in acks */
	bool ack_due;	   /* something arrived that the peer has not seen acked */
	bool ack_now;	   /* a hole or a duplicate: the sender needs the sack map at once */
	uint32_t recvs_open; /* receives taken and not yet finished */
	uint32_t rx_since_ack;
	uint32_t sacked_pending; /* bits set in rcv_bits */
	uint64_t ack_due_ns; /* when ack_due was set */
	bool on_ack_list;
	bool peer_closed; /* the peer said close on the control channel */
	struct harp_conn *next_ack;

	struct harp_conn_stats stats;
};

/* ---- conn.c: per-connection reliability (engine thread) ---- */
int conn_alloc_state(struct harp_conn *c, uint32_t cwnd_max);
void conn_free(struct harp_conn *c);
void conn_start(struct harp_conn *c, uint64_t now);
/* A checked packet for this connection arrived. */
void conn_on_packet(struct harp_conn *c, const struct wire_pkt *p, uint64_t now);
/* Takes a posted request from the data thread. Returns false if it must wait (slot busy). */
bool conn_take_request(struct harp_conn *c, struct harp_req *r);
/* Timers: retransmission timeout, dead peer. */
void conn_on_timer(struct harp_conn *c, uint64_t now, uint64_t peer_timeout_ns);
/* Does a pending request read or write [addr, addr+len)? */
bool conn_uses_region(const struct harp_conn *c, const void *addr, size_t len);
/* Fails every pending request with err and stops the connection. */
void conn_fail(struct harp_conn *c, int err);
/* The peer's final cumulative ack, from its close message on the control channel. */
void conn_on_peer_close(struct harp_conn *c, uint32_t peer_rcv_nxt, uint64_t now);

/* Something to transmit: a reliable packet (new or again), or an ACK. */
struct conn_tx {
	struct harp_hdr h;
	const uint8_t *payload; /* DATA: h.len bytes from the sender's buffer */
	uint8_t sack[HARP_SACK_BYTES];
};
/*
 * Produces the next packet this connection wants to send, within its window. Returns false when
 * it has nothing to send now. The engine builds the frame from tx at once (tx->payload points
 * into the sender's buffer).
 */
bool conn_next_tx(struct harp_conn *c, struct conn_tx *tx, uint64_t now);
/* Acks wait for CONN_ACK_EVERY packets or CONN_ACK_DELAY_NS, unless the sender needs them now. */
bool conn_ack_wanted(const struct harp_conn *c, uint64_t now);
bool conn_make_ack(struct harp_conn *c, struct conn_tx *tx, uint64_t now);

static inline void req_finish(struct harp_req *r, int err)
{
	r->err = err;
	/* release: the request's results (sizes, data placed in its buffers) are visible before
	 * the data thread sees it finished */
	atomic_store_explicit(&r->state, err ? REQ_FAILED : REQ_DONE, memory_order_release);
}

#endif
