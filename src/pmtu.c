// SPDX-License-Identifier: Apache-2.0
/*
 * Path MTU discovery on harp's own packets (pmtu.h has the design): PMTU probes padded to a
 * size, answered by the peer with PMTU_ACKs; a search between the largest size answered and the
 * smallest not; a black hole found when the size in use stops being answered after a timeout,
 * which drops packets to the base and sends those in flight again in parts.
 */
#include <string.h>

#include "conn.h"
#include "paths.h"
#include "pmtu.h"
#include "sendq.h"

static const uint8_t pmtu_padding[HARP_IP_MAX]; /* a PMTU probe's body */

void conn_pmtu_init(struct harp_conn *c, uint32_t ceiling)
{
	c->pmtu.ceiling = ceiling;
}

/* Packets of mtu bytes of IP from now on: their payload, less a MAC trailer where there is one. */
static void pmtu_use(struct harp_conn *c, uint32_t mtu)
{
	c->pmtu.mtu = mtu;
	c->payload_max = mtu - wire_pkt_overhead(c->path.ip6) -
			 (c->auth ? HARP_AUTH_TRAILER : 0);
	paths_set_mss(c, mtu);
}

static uint32_t pmtu_base(const struct conn_pmtu *pm)
{
	return pm->ceiling < CONN_PMTU_BASE ? pm->ceiling : CONN_PMTU_BASE;
}

static bool pmtu_searching(const struct conn_pmtu *pm)
{
	return pm->hi > pm->lo + CONN_PMTU_STEP;
}

static uint64_t pmtu_wait_ns(const struct harp_conn *c)
{
	uint64_t w = 4ull * c->rtt.srtt_us * 1000;

	return w > CONN_PMTU_WAIT_MIN_NS ? w : CONN_PMTU_WAIT_MIN_NS;
}

bool conn_pmtu_due(const struct harp_conn *c, uint64_t now)
{
	const struct conn_pmtu *pm = &c->pmtu;

	if (!pm->ceiling || !c->paths_live) {
		return false;
	}
	if (pm->nanswers || (pm->probe && (!pm->tries || now - pm->sent_ns >= pmtu_wait_ns(c)))) {
		return true;
	}
	return !pm->probe && now >= pm->next_ns && (pmtu_searching(pm) || pm->mtu < pm->ceiling);
}

/* Every unacked packet larger than the path now carries goes again, in parts. */
static void pmtu_resend_large(struct harp_conn *c)
{
	uint32_t psn;

	for (psn = c->snd_una; psn_before(psn, c->snd_nxt); psn++) {
		struct tx_rec *rec = rec_of(c, psn);

		if (!rec->acked && !rec->dead && rec->len > c->payload_max) {
			queue_rtx(c, rec, psn);
		}
	}
}

/*
 * Size was refused: the search's new upper bound. The old one is kept, for a late answer that
 * belies this one to bring back (pmtu_on_ack); the oldest makes room when they are too many, and
 * ceiling + 1, nothing known, stands in for it.
 */
static void pmtu_bound(struct conn_pmtu *pm, uint32_t size)
{
	if (pm->nabove == ARRAY_SIZE(pm->above)) {
		memmove(pm->above, pm->above + 1, sizeof(pm->above) - sizeof(pm->above[0]));
		pm->nabove--;
	}
	pm->above[pm->nabove++] = pm->hi;
	pm->hi = size;
}

/* The probe in flight went unanswered CONN_PMTU_TRIES times. */
static void pmtu_refused(struct harp_conn *c, uint64_t now)
{
	struct conn_pmtu *pm = &c->pmtu;

	if (pm->confirming) {
		/* the size in use no longer gets through: a black hole (a late answer may have
		 * raised mtu above the size asked about since; that is refused all the more) */
		uint32_t was = pm->probe;

		c->stats.pmtu_drops++;
		pmtu_bound(pm, was);
		pmtu_use(c, pmtu_base(pm));
		pm->lo = pm->mtu;
		pm->confirming = false;
		pm->fall_id = pm->id; /* answers to older probes tell of the path before it */
		pr_info("conn %u: the path no longer carries %u-byte packets; %u from now on, the "
			"packets in flight sent again in parts, and the search starts over below %u",
			c->id, was, pm->mtu, was);
		pmtu_resend_large(c);
	} else {
		pmtu_bound(pm, pm->probe);
	}
	pm->probe = 0;
	pm->next_ns = pmtu_searching(pm) ? now : now + CONN_PMTU_RAISE_NS;
}

/* Picks the next size to ask about; false when the search is done (or waits). */
static bool pmtu_next_size(struct conn_pmtu *pm, uint64_t now)
{
	uint32_t size;

	if (now < pm->next_ns) {
		return false;
	}
	if (!pmtu_searching(pm)) {
		if (pm->mtu >= pm->ceiling) {
			return false;
		}
		pm->lo = pm->mtu; /* a finished search looks up again, now and then */
		pm->hi = pm->ceiling + 1;
		pm->nabove = 0;
	}
	size = pm->hi == pm->ceiling + 1 ? pm->ceiling : ((pm->lo + pm->hi) / 2) & ~3u;
	if (size <= pm->lo) {
		pm->hi = pm->lo + 1;
		pm->next_ns = now + CONN_PMTU_RAISE_NS;
		return false;
	}
	pm->probe = size;
	pm->tries = 0;
	pm->id++;
	return true;
}

/*
 * Receiver: the peer's probe of size bytes came. Each probe that came since answers last went
 * is answered, not only the latest: one that came while this side could not answer (no live
 * path yet, or a loaded host) proves its size to the peer all the same, late (pmtu_on_ack). Too
 * many, and the smallest gives way: the largest proves the most.
 */
void pmtu_on_probe(struct harp_conn *c, uint32_t id, uint32_t size)
{
	struct conn_pmtu *pm = &c->pmtu;
	uint32_t i, min = 0;

	for (i = 0; i < pm->nanswers; i++) {
		if (pm->answers[i].id == id) {
			return; /* another try of one to answer already */
		}
		if (pm->answers[i].size < pm->answers[min].size) {
			min = i;
		}
	}
	if (pm->nanswers < ARRAY_SIZE(pm->answers)) {
		i = pm->nanswers++;
	} else if (size > pm->answers[min].size) {
		i = min;
	} else {
		return;
	}
	pm->answers[i].id = id;
	pm->answers[i].size = size;
}

/* The next PMTU probe, or the answers to the peer's, if any are due. */
bool pmtu_next(struct harp_conn *c, struct conn_tx *tx, uint64_t now)
{
	struct conn_pmtu *pm = &c->pmtu;
	struct harp_hdr *h = &tx->h;
	int path;

	if (!pm->ceiling || !c->paths_live) {
		return false;
	}
	if (pm->nanswers) {
		pm->nanswers--;
		path = paths_any(c);
		unreliable_hdr(c, h, HARP_PKT_PMTU_ACK, now);
		h->tag = pm->answers[pm->nanswers].id;
		h->msg_len = pm->answers[pm->nanswers].size;
		tx->payload = NULL;
		tx->device = false;
		goto out;
	}
	if (pm->probe && pm->tries && now - pm->sent_ns < pmtu_wait_ns(c)) {
		return false;
	}
	if (pm->probe && pm->tries >= CONN_PMTU_TRIES) {
		pmtu_refused(c, now);
	}
	if (!pm->probe && !pmtu_next_size(pm, now)) {
		return false;
	}
	path = paths_any(c);
	unreliable_hdr(c, h, HARP_PKT_PMTU, now);
	h->tag = pm->id;
	h->msg_len = pm->probe;
	h->len = (uint16_t)(pm->probe - wire_pkt_overhead(c->path.ip6) -
			    (c->auth ? HARP_AUTH_TRAILER : 0));
	tx->payload = pmtu_padding;
	tx->device = false;
	pm->tries++;
	pm->sent_ns = now;
	c->stats.pmtu_probes++;
out:
	c->paths[path].sent_ns = now;
	tx->src_port = c->paths[path].src_port;
	tx->dst_port = c->paths[path].dst_port;
	tx->twin_src_port = 0;
	tx->twin_dst_port = 0;
	return true;
}

/* The path carried size bytes: the search's floor, and the size in use if larger. */
static void pmtu_carried(struct harp_conn *c, uint32_t size)
{
	c->pmtu.lo = size;
	if (size > c->pmtu.mtu) {
		pr_info("conn %u: the path carries %u-byte packets: larger ones from now on", c->id,
			size);
		pmtu_use(c, size);
	}
}

/*
 * Does the answer to a probe no longer in flight count? A loaded peer or path can answer after
 * pmtu_wait_ns, when the probe was given up on, and the answer proves the size all the same.
 * Were it ignored, a refusal that was only slowness would hold the search below the path's MTU,
 * and a false black hole would hold packets at the base for CONN_PMTU_RAISE_NS. It counts even
 * while the size in use is in doubt (the same load makes timeouts that doubt it): the probe
 * asking goes on, and if refused still drops packets to the base. Not for a probe older than
 * the one whose refusal last did: those tell of the path as it was. That probe's own answer
 * counts: it was asked after the doubt began, so the path still carries its size and the fall
 * was false.
 */
static bool pmtu_late_counts(const struct conn_pmtu *pm, uint32_t id, uint64_t size)
{
	return (int32_t)(id - pm->id) <= 0 && (int32_t)(id - pm->fall_id) >= 0 && size > pm->lo &&
	       size <= pm->ceiling;
}

/* The peer's answer: the path carried a probe of size bytes. */
void pmtu_on_ack(struct harp_conn *c, uint32_t id, uint64_t size, uint64_t now)
{
	struct conn_pmtu *pm = &c->pmtu;

	if (pm->probe && id == pm->id && size == pm->probe) {
		if (!pm->confirming) {
			pmtu_carried(c, pm->probe);
		}
		pm->confirming = false;
		pm->probe = 0;
	} else if (pmtu_late_counts(pm, id, size)) {
		if (id == pm->fall_id) {
			pr_info("conn %u: %u-byte packets get through after all (a late answer)",
				c->id, (uint32_t)size);
		}
		pmtu_carried(c, (uint32_t)size);
		/* refusals it belies give way to those before them: the search goes on where it
		 * would have, had the answer come in time */
		while (pm->hi <= size) {
			pm->hi = pm->nabove ? pm->above[--pm->nabove] : pm->ceiling + 1;
		}
		if (pm->probe && !pm->confirming && pm->probe <= size) {
			pm->probe = 0; /* a search probe it answers already */
		}
	} else {
		return; /* an old probe's, one from before the fall, or none we sent */
	}
	pm->next_ns = pmtu_searching(pm) ? now : now + CONN_PMTU_RAISE_NS;
}

/*
 * A timeout with packets above the base in flight: does the path still carry the size in use?
 * (A search probe in flight asks about more, and is left to finish.)
 */
void pmtu_suspect(struct harp_conn *c)
{
	struct conn_pmtu *pm = &c->pmtu;

	if (pm->ceiling && pm->mtu > pmtu_base(pm) && !pm->probe) {
		pm->probe = pm->mtu;
		pm->confirming = true;
		pm->tries = 0;
		pm->id++;
	}
}

/* Receiver: the slot of psn's parts, a new one for parts of it, or -1. */
static int seg_slot(struct harp_conn *c, uint32_t psn, uint16_t parts)
{
	int i, free_slot = -1;

	for (i = 0; i < (int)ARRAY_SIZE(c->pmtu.segs); i++) {
		if (c->pmtu.segs[i].parts && c->pmtu.segs[i].psn == psn) {
			return i;
		}
		if (!c->pmtu.segs[i].parts && free_slot < 0) {
			free_slot = i;
		}
	}
	if (parts && free_slot >= 0) {
		c->pmtu.segs[free_slot].psn = psn;
		c->pmtu.segs[free_slot].parts = parts;
		c->pmtu.segs[free_slot].got = 0;
		c->pmtu.segs_open++;
	}
	return parts ? free_slot : -1;
}

void pmtu_start(struct harp_conn *c, uint64_t now)
{
	struct conn_pmtu *pm = &c->pmtu;

	if (!pm->ceiling) {
		return;
	}
	/* the floor, until a probe is answered: data larger than the path carries would be
	 * dropped without a word, every packet of it */
	pmtu_use(c, pmtu_base(pm));
	pm->lo = pm->mtu;
	pm->hi = pm->ceiling + 1;
	pm->next_ns = now;
}

int pmtu_part_slot(struct harp_conn *c, uint32_t psn, uint16_t parts, uint16_t part)
{
	int k = seg_slot(c, psn, parts);

	if (k < 0 || c->pmtu.segs[k].parts != parts || (c->pmtu.segs[k].got & (1u << part))) {
		return -1;
	}
	return k;
}

bool pmtu_part_placed(struct harp_conn *c, int slot, uint16_t part)
{
	c->pmtu.segs[slot].got |= (uint16_t)(1u << part);
	if (c->pmtu.segs[slot].got != (uint16_t)((1u << c->pmtu.segs[slot].parts) - 1)) {
		return false;
	}
	c->pmtu.segs[slot].parts = 0;
	c->pmtu.segs_open--;
	return true;
}

bool pmtu_has_parts(struct harp_conn *c, uint32_t psn)
{
	return c->pmtu.segs_open && seg_slot(c, psn, 0) >= 0;
}
