// SPDX-License-Identifier: GPL-2.0
/*
 * tc ingress program for the forwarding namespace M of the hop topology (lib.sh). A NIC driver
 * records the receive queue of each packet (queue_mapping = rx queue + 1) and the kernel then
 * forwards the packet out of the same-numbered tx queue; veth does not record it and leaves the
 * sender's tx queue number in queue_mapping. Recording it here keeps the queue across M: what A
 * sends on queue q reaches B on queue q, where harp's XDP program expects it.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

SEC("tc")
int keep_queue(struct __sk_buff *skb)
{
	/* queue_mapping is 16 bits and the largest veth queue count is far below its top. */
	skb->queue_mapping = skb->queue_mapping + 1;
	/* Pass: this program only labels the packet. */
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
