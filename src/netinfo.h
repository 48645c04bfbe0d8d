/* SPDX-License-Identifier: Apache-2.0 */
/* What the kernel knows about an interface and how to reach a peer: ioctl, sysfs, rtnetlink. */
#ifndef HARP_NETINFO_H
#define HARP_NETINFO_H

#include "internal.h"
#include "wire.h"

struct if_info {
	char name[16];
	int ifindex;
	uint8_t mac[6];
	uint32_t ipv4; /* network order; 0 when the interface has none */
	/* its IPv6 address: the first one getifaddrs lists that is not link-local, else its
	 * link-local one (ipv6_link); all zero when it has none */
	uint8_t ipv6[16];
	bool ipv6_link;
	int mtu;
	int rx_queues, tx_queues;
	int speed_mbps; /* as ethtool shows it; 0 when the driver does not say (ENA) */
	/* Entries of the NIC's RSS indirection table (ethtool -x): the NIC hashes each flow to a
	 * queue. 0: it has none, and something else picks the queue (a host's tap, by the queue
	 * that last sent the flow; veth, by the sender's queue). */
	int rss_table;
};

/* Fills info for ifname in the caller's network namespace. -ENODEV when there is none. */
int netinfo_interface(const char *ifname, struct if_info *info);

/* Whether an IPv6 address is link-local (fe80::/10): it means something only on one link. */
static inline bool netinfo_link_local(const uint8_t a[16])
{
	return a[0] == 0xfe && (a[1] & 0xc0) == 0x80;
}

/*
 * Resolves the Ethernet address of the next hop towards dst (IPv4 mapped, or IPv6) through the
 * kernel's route and neighbour tables (ARP's, or NDP's). The route must leave through ifindex
 * (a link-local dst is looked up on ifindex's link). -EAGAIN while the neighbour entry is not
 * (yet) valid; -ENETUNREACH without a route; -EXDEV when the route leaves by another interface
 * (its index in *route_ifindex).
 */
int netinfo_nexthop_mac(const union wire_ip *dst, int ifindex, uint8_t mac[6],
			int *route_ifindex);

#endif
