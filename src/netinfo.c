// SPDX-License-Identifier: Apache-2.0
/*
 * harp sends real IPv4 or IPv6 UDP, so it addresses frames the way the kernel would: the route
 * decides the next hop (the peer itself, or a gateway), and the neighbour table (ARP's, or
 * NDP's) gives its MAC. The control connection's TCP traffic has already made the kernel resolve
 * that neighbour, so by the time a connection needs it the entry is normally valid.
 */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <linux/ethtool.h>
#include <linux/neighbour.h>
#include <linux/sockios.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include "netinfo.h"

/* The interface's queues in /sys, if /sys shows this network namespace's interface (nsenter
 * and some runtimes leave another namespace's /sys mounted, where the name may mean another
 * device): 0 when it cannot tell. */
static int sysfs_queues(const char *ifname, int ifindex, const char *prefix)
{
	char path[128];
	struct dirent *de;
	DIR *d;
	FILE *f;
	int n = 0, idx = -1;

	snprintf(path, sizeof(path), "/sys/class/net/%s/ifindex", ifname);
	f = fopen(path, "r");
	if (!f) {
		return 0;
	}
	if (fscanf(f, "%d", &idx) != 1) {
		idx = -1;
	}
	fclose(f);
	if (idx != ifindex) {
		return 0;
	}
	snprintf(path, sizeof(path), "/sys/class/net/%s/queues", ifname);
	d = opendir(path);
	if (!d) {
		return 0;
	}
	while ((de = readdir(d))) {
		if (!strncmp(de->d_name, prefix, strlen(prefix))) {
			n++;
		}
	}
	closedir(d);
	return n;
}

/* The queues in use, as ethtool -l shows them (combined channels plus rx-only or tx-only ones),
 * asked in this network namespace; else /sys; 0 when neither tells. */
static void count_queues(int fd, struct ifreq *ifr, struct if_info *info)
{
	struct ethtool_channels ch = { .cmd = ETHTOOL_GCHANNELS };

	ifr->ifr_data = (char *)&ch;
	if (!ioctl(fd, SIOCETHTOOL, ifr) && ch.combined_count + ch.rx_count > 0) {
		info->rx_queues = (int)(ch.combined_count + ch.rx_count);
		info->tx_queues = (int)(ch.combined_count + ch.tx_count);
		return;
	}
	info->rx_queues = sysfs_queues(info->name, info->ifindex, "rx-");
	info->tx_queues = sysfs_queues(info->name, info->ifindex, "tx-");
}

/* The link speed, as ethtool shows it, asked in this network namespace; 0 when unknown. */
static int link_speed(int fd, struct ifreq *ifr)
{
	struct ethtool_cmd cmd = { .cmd = ETHTOOL_GSET };
	uint32_t speed;

	ifr->ifr_data = (char *)&cmd;
	if (ioctl(fd, SIOCETHTOOL, ifr)) {
		return 0;
	}
	speed = ethtool_cmd_speed(&cmd);
	return speed == (uint32_t)SPEED_UNKNOWN || speed > INT32_MAX ? 0 : (int)speed;
}

/* The RSS indirection table's size (ethtool -x), asked in this network namespace; 0: none. */
static int rss_table_size(int fd, struct ifreq *ifr)
{
	struct ethtool_rxfh_indir indir = { .cmd = ETHTOOL_GRXFHINDIR, .size = 0 };

	ifr->ifr_data = (char *)&indir;
	if (ioctl(fd, SIOCETHTOOL, ifr) || indir.size > INT32_MAX) {
		return 0;
	}
	return (int)indir.size;
}

/* The interface's IPv6 address: the first not link-local, else the first link-local one. */
static void first_ipv6(struct if_info *info)
{
	struct ifaddrs *all, *a;
	bool have = false;

	if (getifaddrs(&all)) {
		return; /* no IPv6 known: IPv4 only, as before */
	}
	for (a = all; a; a = a->ifa_next) {
		const uint8_t *ip;

		if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET6 ||
		    strcmp(a->ifa_name, info->name)) {
			continue;
		}
		ip = ((const struct sockaddr_in6 *)a->ifa_addr)->sin6_addr.s6_addr;
		if (!have || (info->ipv6_link && !netinfo_link_local(ip))) {
			memcpy(info->ipv6, ip, 16);
			info->ipv6_link = netinfo_link_local(ip);
			have = true;
		}
	}
	freeifaddrs(all);
}

int netinfo_interface(const char *ifname, struct if_info *info)
{
	struct ifreq ifr;
	int fd, err = 0;

	memset(info, 0, sizeof(*info));
	if (!ifname || !*ifname || strlen(ifname) >= IFNAMSIZ) {
		return -EINVAL;
	}
	snprintf(info->name, sizeof(info->name), "%s", ifname);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -errno;
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(fd, SIOCGIFINDEX, &ifr)) {
		err = -errno;
		goto out;
	}
	info->ifindex = ifr.ifr_ifindex;
	if (ioctl(fd, SIOCGIFHWADDR, &ifr)) {
		err = -errno;
		goto out;
	}
	memcpy(info->mac, ifr.ifr_hwaddr.sa_data, 6);
	if (ioctl(fd, SIOCGIFMTU, &ifr)) {
		err = -errno;
		goto out;
	}
	info->mtu = ifr.ifr_mtu;
	if (!ioctl(fd, SIOCGIFADDR, &ifr)) {
		info->ipv4 = ((struct sockaddr_in *)&ifr.ifr_addr)->sin_addr.s_addr;
	}
	first_ipv6(info);
	count_queues(fd, &ifr, info);
	info->speed_mbps = link_speed(fd, &ifr);
	info->rss_table = rss_table_size(fd, &ifr);
out:
	close(fd);
	return err;
}

/* One rtnetlink request and its single reply, into buf. Returns the reply's length. */
static int rtnl_ask(struct nlmsghdr *req, char *buf, size_t buflen)
{
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	struct nlmsghdr *nh;
	int fd, len, err;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0) {
		return -errno;
	}
	if (sendto(fd, req, req->nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	len = (int)recv(fd, buf, buflen, 0);
	err = len < 0 ? -errno : 0;
	close(fd);
	if (err) {
		return err;
	}
	nh = (struct nlmsghdr *)buf;
	if (!NLMSG_OK(nh, (unsigned)len)) {
		return -EBADMSG;
	}
	if (nh->nlmsg_type == NLMSG_ERROR) {
		struct nlmsgerr *e = NLMSG_DATA(nh);

		return e->error ? e->error : -ENOENT;
	}
	return len;
}

static void add_attr(struct nlmsghdr *nh, unsigned short type, const void *data, size_t len)
{
	struct rtattr *rta = (struct rtattr *)((char *)nh + NLMSG_ALIGN(nh->nlmsg_len));

	rta->rta_type = type;
	rta->rta_len = (unsigned short)RTA_LENGTH(len);
	memcpy(RTA_DATA(rta), data, len);
	nh->nlmsg_len = NLMSG_ALIGN(nh->nlmsg_len) + RTA_ALIGN(rta->rta_len);
}

/* Route to dst: sets the output interface and the next hop (gateway, or dst itself). */
static int route_get(const union wire_ip *dst, int ifindex, int *oif, union wire_ip *nexthop)
{
	struct {
		struct nlmsghdr nh;
		struct rtmsg rt;
		char attrs[64];
	} req;
	/* the whole request, attributes and all, as add_attr writes past its header */
	struct nlmsghdr *msg = (struct nlmsghdr *)&req;
	char buf[4096];
	struct rtattr *rta;
	struct rtmsg *rt;
	bool ip4 = wire_ip_is4(dst);
	int len, alen;

	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
	req.nh.nlmsg_type = RTM_GETROUTE;
	req.nh.nlmsg_flags = NLM_F_REQUEST;
	req.rt.rtm_family = ip4 ? AF_INET : AF_INET6;
	req.rt.rtm_dst_len = ip4 ? 32 : 128;
	add_attr(msg, RTA_DST, ip4 ? (const void *)&dst->w[3] : dst->b, ip4 ? 4 : 16);
	if (!ip4 && netinfo_link_local(dst->b)) {
		add_attr(msg, RTA_OIF, &ifindex, 4); /* a link-local address: on harp's link */
	}
	len = rtnl_ask(&req.nh, buf, sizeof(buf));
	if (len < 0) {
		return len == -ENETUNREACH || len == -EHOSTUNREACH ? -ENETUNREACH : len;
	}
	rt = NLMSG_DATA((struct nlmsghdr *)buf);
	alen = (int)RTM_PAYLOAD((struct nlmsghdr *)buf);
	*oif = 0;
	*nexthop = *dst;
	for (rta = RTM_RTA(rt); RTA_OK(rta, alen); rta = RTA_NEXT(rta, alen)) {
		if (rta->rta_type == RTA_OIF && RTA_PAYLOAD(rta) >= 4) {
			memcpy(oif, RTA_DATA(rta), 4);
		} else if (rta->rta_type == RTA_GATEWAY && RTA_PAYLOAD(rta) == (ip4 ? 4u : 16u)) {
			void *to = ip4 ? (void *)&nexthop->w[3] : nexthop->b;

			memcpy(to, RTA_DATA(rta), ip4 ? 4 : 16);
		}
	}
	if (rt->rtm_type != RTN_UNICAST && rt->rtm_type != RTN_LOCAL) {
		return -ENETUNREACH;
	}
	return *oif ? 0 : -ENETUNREACH;
}

static int neigh_get(const union wire_ip *ip, int ifindex, uint8_t mac[6])
{
	struct {
		struct nlmsghdr nh;
		struct ndmsg nd;
		char attrs[64];
	} req;
	struct nlmsghdr *msg = (struct nlmsghdr *)&req; /* as in route_get */
	char buf[4096];
	struct rtattr *rta;
	struct ndmsg *nd;
	bool ip4 = wire_ip_is4(ip), have_mac = false;
	int len, alen;

	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ndmsg));
	req.nh.nlmsg_type = RTM_GETNEIGH;
	req.nh.nlmsg_flags = NLM_F_REQUEST;
	req.nd.ndm_family = ip4 ? AF_INET : AF_INET6;
	req.nd.ndm_ifindex = ifindex;
	add_attr(msg, NDA_DST, ip4 ? (const void *)&ip->w[3] : ip->b, ip4 ? 4 : 16);
	len = rtnl_ask(&req.nh, buf, sizeof(buf));
	if (len < 0) {
		return len == -ENOENT ? -EAGAIN : len;
	}
	nd = NLMSG_DATA((struct nlmsghdr *)buf);
	alen = (int)(((struct nlmsghdr *)buf)->nlmsg_len - NLMSG_LENGTH(sizeof(*nd)));
	for (rta = (struct rtattr *)((char *)nd + NLMSG_ALIGN(sizeof(*nd))); RTA_OK(rta, alen);
	     rta = RTA_NEXT(rta, alen)) {
		if (rta->rta_type == NDA_LLADDR && RTA_PAYLOAD(rta) == 6) {
			memcpy(mac, RTA_DATA(rta), 6);
			have_mac = true;
		}
	}
	if (!have_mac || (nd->ndm_state & (NUD_INCOMPLETE | NUD_FAILED | NUD_NONE))) {
		return -EAGAIN;
	}
	return 0;
}

int netinfo_nexthop_mac(const union wire_ip *dst, int ifindex, uint8_t mac[6],
			int *route_ifindex)
{
	union wire_ip nexthop;
	int oif, err;

	err = route_get(dst, ifindex, &oif, &nexthop);
	if (err) {
		return err;
	}
	*route_ifindex = oif;
	if (oif != ifindex) {
		return -EXDEV;
	}
	return neigh_get(&nexthop, ifindex, mac);
}
