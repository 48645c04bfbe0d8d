// SPDX-License-Identifier: GPL-2.0
/*
 * tc ingress program for the forwarding namespace M of the hop topology (lib.sh): makes M pick
 * each forwarded packet's outgoing queue the way a NIC's RSS picks a receive queue, from a hash
 * of the 5-tuple alone. veth leaves the sender's tx queue number in queue_mapping, and the kernel
 * reads a non-zero queue_mapping as "received on queue queue_mapping - 1" and forwards out of
 * that queue: left alone, whatever A sent on its tx queue 1 would reach B on queue 0, and on
 * queue 2 B's queue 1, whatever the ports. Clearing it leaves the choice to the flow hash
 * (skb_tx_hash), which depends on addresses and ports only.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

SEC("tc")
int rss_queue(struct __sk_buff *skb)
{
	skb->queue_mapping = 0; /* no receive queue recorded: M's kernel hashes the flow */
	/* Pass: this program only unlabels the packet. */
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
