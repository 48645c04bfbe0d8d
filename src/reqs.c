// SPDX-License-Identifier: Apache-2.0
/*
 * A connection's requests once its engine holds them: completing each (the data thread sees it
 * done through its atomic state, req_finish), failing them all, and lingering, where its user
 * has let go of its buffers while completed small sends still wait for their ack. reqs.c owns the
 * send and receive slots' release (send_slots, recv_slots, ssn_tail, recvs_open) and the
 * connection's failed state; it calls down only: sendq.h.
 */
#include <errno.h>

#include "conn.h"
#include "reqs.h"
#include "sendq.h"

bool reqs_take(struct harp_conn *c, struct harp_req *r)
{
	if (r->kind == REQ_SEND) {
		uint32_t slot = c->ssn_next & (CONN_REQS - 1);

		if (c->send_slots[slot]) {
			return false; /* an old send still holds the slot: wait for it */
		}
		r->send.ssn = c->ssn_next++;
		c->send_slots[slot] = r;
		return true;
	}
	if (c->recv_slots[r->recv.rsn & (CONN_RECV_SLOTS - 1)]) {
		return false;
	}
	c->recv_slots[r->recv.rsn & (CONN_RECV_SLOTS - 1)] = r;
	c->recvs_open++;
	c->rcv_first_ssn[r->recv.rsn & (CONN_RECV_SLOTS - 1)] = c->rcv_ssn_next;
	c->rcv_ssn_next += (uint32_t)r->recv.nbufs;
	c->rcv_rsn_next = r->recv.rsn + 1;
	if (c->rcv_taken < CONN_RECV_SLOTS) {
		c->rcv_taken++;
	}
	r->next = NULL;
	if (c->cts_out_tail) {
		c->cts_out_tail->next = r;
	} else {
		c->cts_out_head = r;
	}
	c->cts_out_tail = r;
	return true;
}

void reqs_send_release(struct harp_conn *c, struct harp_req *s, int err)
{
	c->send_slots[s->send.ssn & (CONN_REQS - 1)] = NULL;
	while (c->ssn_tail != c->ssn_cur && !c->send_slots[c->ssn_tail & (CONN_REQS - 1)]) {
		c->ssn_tail++;
	}
	if (!err) {
		c->stats.msgs_sent++;
	}
	req_finish(s, err);
}

static void recv_release(struct harp_conn *c, struct harp_req *r, bool sender_done)
{
	/* The sender's send completes only on our ack, unless it said it has completed already
	 * (HARP_DATA_F_DONE). With no other receive open our caller may not run this engine again
	 * soon: ack in this pass. With more open it keeps polling, and the ack rides on its next
	 * CTS or leaves after CONN_ACK_DELAY_NS. */
	if (!--c->recvs_open && !sender_done) {
		c->ack_now = true;
	}
	c->recv_slots[r->recv.rsn & (CONN_RECV_SLOTS - 1)] = NULL;
	if (r->recv.device_mask) {
		/* its copies into device memory are done before it is */
		int err = c->device ? c->device->wait(c->engine) : -EIO;

		if (err && !r->recv.err) {
			r->recv.err = err;
		}
	}
	req_finish(r, r->recv.err);
}

/*
 * Every buffer of r is done. It is released once its CTS have all been given a psn too: the
 * peer still needs them to bind its unsolicited sends, and they are read from r.
 */
void reqs_recv_try_finish(struct harp_conn *c, struct harp_req *r, bool sender_done)
{
	if (r->recv.done_mask == (1u << r->recv.nbufs) - 1 && r->recv.cts_queued == r->recv.nbufs) {
		recv_release(c, r, sender_done);
	}
}

static bool overlaps(const void *a, uint64_t alen, const void *b, size_t blen)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	return alen && blen && x < y + blen && y < x + alen;
}

bool conn_uses_region(const struct harp_conn *c, const void *addr, size_t len)
{
	uint32_t i;
	int k;

	for (i = 0; i < CONN_REQS; i++) {
		const struct harp_req *s = c->send_slots[i];

		if (s && overlaps(s->send.buf, s->send.len, addr, len)) {
			return true;
		}
	}
	for (i = 0; i < CONN_RECV_SLOTS; i++) {
		const struct harp_req *r = c->recv_slots[i];

		for (k = 0; r && k < r->recv.nbufs; k++) {
			if (overlaps(r->recv.bufs[k], r->recv.cap[k], addr, len)) {
				return true;
			}
		}
	}
	return false;
}

/* Fails every request the connection holds with err; nothing more is asked of it. */
static void fail_requests(struct harp_conn *c, int err)
{
	uint32_t i;

	for (i = 0; i < CONN_REQS; i++) {
		if (c->send_slots[i]) {
			req_finish(c->send_slots[i], err);
			c->send_slots[i] = NULL;
		}
	}
	for (i = 0; i < CONN_RECV_SLOTS; i++) {
		if (c->recv_slots[i]) {
			req_finish(c->recv_slots[i], err);
			c->recv_slots[i] = NULL;
		}
	}
	c->recvs_open = 0;
	c->cts_out_head = c->cts_out_tail = NULL;
	c->ssn_tail = c->ssn_cur = c->ssn_bound = c->ssn_next;
}

bool conn_linger(struct harp_conn *c, int err, bool answer)
{
	uint32_t psn;

	if (atomic_load_explicit(&c->state, memory_order_relaxed) != CONN_READY) {
		return false;
	}
	if (c->lingering) {
		c->answering |= answer;
		return true;
	}
	/* Unsolicited sends not yet bound fail below with the rest: their copies go. */
	for (psn = c->snd_una; psn != c->snd_nxt; psn++) {
		struct tx_rec *rec = rec_of(c, psn);

		if (!rec->acked && rec->unsol && rec->eager && !psn_before(rec->rsn, c->ssn_bound)) {
			c->eager_used &= ~(1ull << (rec->eager - 1));
			rec->eager = 0;
		}
	}
	if (!c->eager_used && !answer) {
		return false;
	}
	/* What else is in flight reads or answers the caller's buffers: never sent again, and its
	 * request is not touched when an ack for it comes. */
	for (psn = c->snd_una; psn != c->snd_nxt; psn++) {
		struct tx_rec *rec = rec_of(c, psn);

		if (rec->acked || rec->eager) {
			continue;
		}
		rec->dead = true;
		rec->sreq = NULL;
		pipe_leave(c, rec);
	}
	fail_requests(c, err);
	c->lingering = true;
	c->linger_err = err;
	c->answering = answer;
	return true;
}

void conn_linger_fail(struct harp_conn *c)
{
	c->lingering = false;
	conn_fail(c, c->linger_err);
}

bool conn_linger_done(const struct harp_conn *c, uint64_t now, uint64_t quiet_ns)
{
	uint64_t since;

	if (atomic_load_explicit(&c->state, memory_order_relaxed) != CONN_READY) {
		return true;
	}
	if (c->eager_used) {
		return false;
	}
	if (!c->answering) {
		return true;
	}
	since = c->rx_any_ns > c->close_told_ns ? c->rx_any_ns : c->close_told_ns;
	return c->close_told_ns && now > since && now - since > quiet_ns;
}

void conn_fail(struct harp_conn *c, int err)
{
	if (atomic_load_explicit(&c->state, memory_order_relaxed) == CONN_FAILED) {
		return;
	}
	atomic_store_explicit(&c->fail_err, err, memory_order_relaxed);
	/* release: fail_err is visible before the state says FAILED */
	atomic_store_explicit(&c->state, CONN_FAILED, memory_order_release);
	fail_requests(c, err);
	c->rtx_head = c->rtx_tail;
}
