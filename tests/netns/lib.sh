# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# Topologies for harp's network-namespace and fault tests; sourced, never run.
#
#   topo_pair MTU QUEUES   A <-veth-> B, one /24
#   topo_hop MTU QUEUES [pinned]  A <-veth-> M <-veth-> B, two /24s, M forwards; M's flow
#                          hash picks each packet's queue towards A or B, as a NIC's RSS does
#                          (pinned: M keeps the queue a packet came in on instead)
#   hop_impair PROFILE     impair UDP forwarded by M, both directions (see hop_impair)
#   topo_bridge N MTU QUEUES  N ranks R0..R(N-1), each on its own veth to a bridge in M, one /24
#                          (and, or instead, one /64)
#   hop_fabric FLOW AGG BUCKETS PPM  a cloud-like fabric on M (see hop_fabric)
#   topo_cleanup           removes whatever topo_* made (safe to call twice, or with nothing made)
#   run_bounded SEC CMD... runs CMD, killing it after SEC seconds (exit 124 then)
#   wait_until TRIES CMD... CMD every 0.1 s until it succeeds, at most TRIES times
#   spawn_bounded SEC CMD... the same in the background; spawned_pid is timeout's PID, so killing
#                          it stops CMD too (never background a function with &: $! would be a
#                          subshell, and killing that leaves CMD running)
#
# topo_family (set before topo_pair, topo_hop or topo_bridge): 4 (default) gives each end an IPv4
# address; 6 an IPv6 one only (2001:2::/48, RFC 5180's benchmarking range, with M routing between
# two /64s, or bridging one), and dual both (ip_a and ip_b then name the IPv4 ones, ip6_a and
# ip6_b the IPv6 ones; after topo_bridge, ip_r and ip6_r); link (topo_pair only) a link-local
# IPv6 address only, fe80::1 and fe80::2, and nothing else.
#
# topo_napi (set before topo_*): threaded gives every veth end GRO and threaded NAPI
# (/sys/class/net/IF/threaded): the receiving end's kernel work (XDP, the copy into a socket's
# UMEM, the stack) runs in a kernel thread of its own, as a NIC's receive runs on the receiver's
# CPUs, instead of inside the sender's transmit (veth's default: softirq on the sending CPU).
# Transmit then sees the kernel push back (EAGAIN) when the receiving thread falls behind.
#
# After topo_*: ns_a ns_b (ns_m) name the namespaces, if_a if_b the veth ends inside A and B,
# ip_a ip_b their addresses; after topo_bridge, the arrays ns_r if_r ip_r (ip6_r) name rank
# i's. Names carry this shell's PID so runs can go on side by side.
#
# Why impairments live on M: AF_XDP transmit bypasses the sender's qdisc and XDP runs before tc on
# the receiver, so only a forwarding hop sees every packet harp sends. M's veth ends get the same
# queue count as A's and B's because attaching XDP to a veth needs its rx queues >= the peer's tx
# queues. With more than one queue, M's kernel picks the queue a forwarded packet leaves on by
# its flow hash of the 5-tuple (seeded at random per boot): as unknowable to harp as a real NIC's
# RSS, which is what multi-queue tests must face. For that, M clears the queue number veth
# leaves on each packet (rss_queue.bpf.c): left there, it would decide the queue instead of the
# hash (A's tx queue q reaching B's queue q - 1), which no NIC does. Only `topo_hop MTU QUEUES pinned` records each
# packet's queue on the way in (keep_queue.bpf.c), so what A sends on queue q reaches B's queue
# q, as between two NICs with symmetric flow steering; no CI test needs that any more (harp
# probes for port pairs that reach its queue), it stays for experiments that compare the two.
# Every veth end is created straight inside its namespace,
# so the root namespace never sees the names.

# Defaults of the impairments; the environment may override them for experiments.
: "${HARP_IMPAIR_RATECAP:=2gbit}"      # ratecap: the link rate M forwards at
: "${HARP_IMPAIR_RATECAP_LIMIT:=1000}" # ratecap: packets queued behind the cap
: "${HARP_IMPAIR_SLOW_RATE:=100mbit}"  # reorder: rate of the slow lane a quarter of UDP takes
: "${HARP_IMPAIR_SLOW_LIMIT:=300}"     # reorder: packets the slow lane queues
: "${HARP_IMPAIR_CORRUPT_OFFSET:=24}"  # corrupt: byte (from the UDP header) that gets inverted
# fabric: the rate each flow class is guaranteed (4096 buckets of it stay well under any AGG)
: "${FABRIC_FLOW_RATE:=100kbit}"
# harp refuses unknown HARP_* variables in its environment; these are ours, not harp's.
export -n HARP_IMPAIR_RATECAP HARP_IMPAIR_RATECAP_LIMIT HARP_IMPAIR_SLOW_RATE \
	HARP_IMPAIR_SLOW_LIMIT HARP_IMPAIR_CORRUPT_OFFSET FABRIC_FLOW_RATE

# This machine's node profile (harp-attach up writes /etc/harp/harp.conf) must not change what
# the tests run: they say everything they mean in the environment.
export HARP_CONF=

topo_prefix="h$$"
topo_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
topo_made=""
topo_files=""
ns_a="" ns_b="" ns_m=""
if_a="" if_b="" if_ma="" if_mb=""
ns_r=() if_r=() ip_r=() ip6_r=()
ip_a="" ip_b="" ip_ma="" ip_mb="" ip6_a="" ip6_b=""
topo_net=$(($$ % 250 + 1))
topo_family=${topo_family:-4}

# run_bounded SEC CMD...: CMD gets TERM after SEC seconds and KILL 5 seconds later.
run_bounded() {
	local sec=$1
	shift
	timeout --kill-after=5 "$sec" "$@"
}

# wait_until TRIES CMD...: runs CMD every 0.1 s until it succeeds, TRIES times at most; CMD's
# last status.
wait_until() {
	local tries=$1 i
	shift
	for ((i = 1; ; i++)); do
		"$@" && return 0
		((i < tries)) || return 1
		sleep 0.1
	done
}

# shellcheck disable=SC2034 # read by the scripts that source this file
spawned_pid=""
spawn_bounded() {
	local sec=$1
	shift
	timeout --kill-after=5 "$sec" "$@" &
	# shellcheck disable=SC2034 # read by the scripts that source this file
	spawned_pid=$!
}

topo_log() {
	printf 'topo: %s\n' "$*" >&2
}

# ns_exec NS CMD...: runs CMD in NS's network namespace.
ns_exec() {
	local ns=$1
	shift
	ip netns exec "$ns" "$@"
}

topo_need_root() {
	if [[ $(id -u) -ne 0 ]]; then
		topo_log "needs root (network namespaces, veth, XDP)"
		return 77
	fi
	local tool
	for tool in ip ethtool ping timeout nft tc; do
		if ! command -v "$tool" >/dev/null; then
			topo_log "missing tool: $tool"
			return 77
		fi
	done
}

# topo_ns_add NAME: a namespace with lo up; IPv6 off unless topo_family asks for it, and where
# on, no router solicitations or advertisements taken (the tests give every address and route).
topo_ns_add() {
	local ns=$1
	ip netns add "$ns"
	topo_made="$topo_made $ns"
	ns_exec "$ns" ip link set lo up
	if [[ $topo_family == 4 ]]; then
		ns_exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
		ns_exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
	else
		ns_exec "$ns" sysctl -qw net.ipv6.conf.default.accept_ra=0
		ns_exec "$ns" sysctl -qw net.ipv6.conf.default.router_solicitations=0
		if [[ $topo_family == link ]]; then
			# no link-local address made up from the MAC: topo_addr gives each end its own
			ns_exec "$ns" sysctl -qw net.ipv6.conf.default.addr_gen_mode=1
		fi
	fi
}

# topo_addr NS IF V4 V6 PREFIX: IF's addresses of topo_family (V4/24, V6/64 without duplicate
# address detection, so it is usable at once).
topo_addr() {
	local ns=$1 dev=$2 v4=$3 v6=$4
	if [[ $topo_family == 4 || $topo_family == dual ]]; then
		ns_exec "$ns" ip addr add "$v4/24" dev "$dev"
	fi
	if [[ $topo_family != 4 ]]; then
		ns_exec "$ns" ip -6 addr add "$v6/64" dev "$dev" nodad
	fi
}

# topo_family_check: topo_family is one this library builds.
topo_family_check() {
	case $topo_family in
	4 | 6 | dual | link) return 0 ;;
	*)
		topo_log "topo_family '$topo_family' is none of 4, 6, dual, link"
		return 2
		;;
	esac
}

# topo_veth NS1 IF1 NS2 IF2 MTU QUEUES: a veth pair, each end made inside its namespace.
topo_veth() {
	local ns1=$1 if1=$2 ns2=$3 if2=$4 mtu=$5 queues=$6
	ip link add "$if1" netns "$ns1" mtu "$mtu" numtxqueues "$queues" numrxqueues "$queues" \
		type veth peer name "$if2" netns "$ns2" mtu "$mtu" \
		numtxqueues "$queues" numrxqueues "$queues"
	ns_exec "$ns1" ip link set "$if1" up
	ns_exec "$ns2" ip link set "$if2" up
	if [[ ${topo_napi:-} == threaded ]]; then
		topo_napi_threaded "$ns1" "$if1" && topo_napi_threaded "$ns2" "$if2"
	fi
}

# topo_napi_threaded NS IF: IF's receive in a NAPI kernel thread (GRO on gives veth its NAPI).
topo_napi_threaded() {
	if ! ns_exec "$1" ethtool -K "$2" gro on >/dev/null ||
		! ns_exec "$1" sh -c "echo 1 > /sys/class/net/$2/threaded"; then
		topo_log "threaded NAPI refused on $1/$2"
		return 1
	fi
}

# topo_reap_stale: namespaces this library named (h<PID>a/b/m, and h<PID>r<I> of topo_bridge) whose
# PID is gone are leftovers of a run that was killed without its traps (SIGKILL, ctest's
# timeout); remove them.
topo_reap_stale() {
	local ns pid
	for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }'); do
		[[ $ns =~ ^h([0-9]+)([abm]|r[0-9]+)$ ]] || continue
		pid=${BASH_REMATCH[1]}
		if [[ $pid != "$$" ]] && ! kill -0 "$pid" 2>/dev/null; then
			ip netns del "$ns" 2>/dev/null || true
		fi
	done
}

topo_check_args() {
	local mtu=$1 queues=$2
	if ! [[ $mtu =~ ^[0-9]+$ && $queues =~ ^[0-9]+$ ]] || ((mtu < 576 || queues < 1)); then
		topo_log "bad MTU '$mtu' or QUEUES '$queues'"
		return 2
	fi
	if [[ -n $topo_made ]]; then
		topo_log "a topology exists already; topo_cleanup first"
		return 2
	fi
	topo_family_check || return
	topo_reap_stale
}

# topo_wait_ping NS ADDR: up to ~10 s for ADDR to answer from NS (links and ARP settle).
topo_wait_ping() {
	local ns=$1 addr=$2 i
	for ((i = 0; i < 40; i++)); do
		if ns_exec "$ns" ping -q -c 1 -W 1 "$addr" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.2
	done
	topo_log "no ping reply from $addr in namespace $ns"
	return 1
}

# topo_ends V4A V4B V6A V6B: ip_a and ip_b of topo_family (IPv4 unless it is 6), ip6_a ip6_b.
topo_ends() {
	ip_a=$1 ip_b=$2 ip6_a="" ip6_b=""
	if [[ $topo_family != 4 ]]; then
		ip6_a=$3 ip6_b=$4
	fi
	if [[ $topo_family == 6 || $topo_family == link ]]; then
		ip_a=$3 ip_b=$4
	fi
}

# topo_wait_ends: each end answers the other, over every family it has (a link-local address
# through the end's own interface).
topo_wait_ends() {
	if [[ $topo_family == link ]]; then
		topo_wait_ping "$ns_a" "$ip_b%$if_a" && topo_wait_ping "$ns_b" "$ip_a%$if_b"
		return
	fi
	topo_wait_ping "$ns_a" "$ip_b" && topo_wait_ping "$ns_b" "$ip_a" || return
	if [[ $topo_family == dual ]]; then
		topo_wait_ping "$ns_a" "$ip6_b" && topo_wait_ping "$ns_b" "$ip6_a"
	fi
}

# topo_pair MTU QUEUES: A and B joined by one veth pair.
topo_pair() {
	local mtu=$1 queues=$2 v6="2001:2:$topo_net::"
	topo_need_root || return
	topo_check_args "$mtu" "$queues" || return
	ns_a="${topo_prefix}a" ns_b="${topo_prefix}b" ns_m=""
	if_a="${topo_prefix}a" if_b="${topo_prefix}b"
	topo_ns_add "$ns_a"
	topo_ns_add "$ns_b"
	topo_veth "$ns_a" "$if_a" "$ns_b" "$if_b" "$mtu" "$queues"
	[[ $topo_family != link ]] || v6="fe80::"
	topo_addr "$ns_a" "$if_a" "198.18.$topo_net.1" "${v6}1"
	topo_addr "$ns_b" "$if_b" "198.18.$topo_net.2" "${v6}2"
	topo_ends "198.18.$topo_net.1" "198.18.$topo_net.2" "${v6}1" "${v6}2"
	topo_wait_ends || return
	topo_log "pair $ns_a/$if_a $ip_a <-> $ns_b/$if_b $ip_b mtu $mtu queues $queues" \
		"(family $topo_family)"
}

# topo_hop MTU QUEUES [pinned]: A - M - B, A in 198.18.x.0/24 and B in 198.19.x.0/24, M routes.
topo_hop() {
	local mtu=$1 queues=$2 steer=${3:-hashed}
	topo_need_root || return
	topo_check_args "$mtu" "$queues" || return
	if [[ $topo_family == link ]]; then
		topo_log "topo_hop: link-local addresses do not cross a router (topo_family link)"
		return 2
	fi
	ns_a="${topo_prefix}a" ns_b="${topo_prefix}b" ns_m="${topo_prefix}m"
	if_a="${topo_prefix}a" if_b="${topo_prefix}b"
	if_ma="${topo_prefix}ma" if_mb="${topo_prefix}mb"
	local v6a="2001:2:$topo_net:1::" v6b="2001:2:$topo_net:2::"
	ip_ma="198.18.$topo_net.254" ip_mb="198.19.$topo_net.254"
	topo_ns_add "$ns_a"
	topo_ns_add "$ns_m"
	topo_ns_add "$ns_b"
	topo_veth "$ns_a" "$if_a" "$ns_m" "$if_ma" "$mtu" "$queues"
	topo_veth "$ns_m" "$if_mb" "$ns_b" "$if_b" "$mtu" "$queues"
	topo_addr "$ns_a" "$if_a" "198.18.$topo_net.1" "${v6a}1"
	topo_addr "$ns_m" "$if_ma" "$ip_ma" "${v6a}fe"
	topo_addr "$ns_m" "$if_mb" "$ip_mb" "${v6b}fe"
	topo_addr "$ns_b" "$if_b" "198.19.$topo_net.2" "${v6b}2"
	topo_ends "198.18.$topo_net.1" "198.19.$topo_net.2" "${v6a}1" "${v6b}2"
	if [[ $topo_family != 6 ]]; then
		ns_exec "$ns_m" sysctl -qw net.ipv4.ip_forward=1
		ns_exec "$ns_a" ip route add "198.19.$topo_net.0/24" via "$ip_ma" dev "$if_a"
		ns_exec "$ns_b" ip route add "198.18.$topo_net.0/24" via "$ip_mb" dev "$if_b"
	fi
	if [[ $topo_family != 4 ]]; then
		[[ $topo_family == dual ]] || ip_ma="${v6a}fe" ip_mb="${v6b}fe"
		ns_exec "$ns_m" sysctl -qw net.ipv6.conf.all.forwarding=1
		ns_exec "$ns_a" ip -6 route add "${v6b}/64" via "${v6a}fe" dev "$if_a"
		ns_exec "$ns_b" ip -6 route add "${v6a}/64" via "${v6b}fe" dev "$if_b"
	fi
	case $steer in
	hashed)
		if ((queues > 1)); then
			topo_tc_queue "$if_ma" rss_queue
			topo_tc_queue "$if_mb" rss_queue
		fi
		;;
	pinned)
		if ((queues > 1)); then
			topo_tc_queue "$if_ma" keep_queue
			topo_tc_queue "$if_mb" keep_queue
		fi
		;;
	*)
		topo_log "topo_hop: queue steering '$steer' is neither hashed nor pinned"
		return 2
		;;
	esac
	topo_wait_ends || return
	topo_log "hop $ns_a/$if_a $ip_a <-> $ns_m <-> $ns_b/$if_b $ip_b mtu $mtu queues $queues" \
		"($steer queues, family $topo_family)"
}

# xfer_pair NAME ARGS...: harp-xfer ($xfer) serving in ns_b on if_b and the client in ns_a on
# if_a, with ARGS each, meeting through $tmp/NAME.handle; their output in $tmp/NAME.server and
# $tmp/NAME.client (and .err), their pids in xfer_server_pid and xfer_client_pid (and pids).
xfer_pair() {
	local name=$1
	shift
	spawn_bounded 120 ip netns exec "$ns_b" "$xfer" server --ifname "$if_b" \
		--handle-file "$tmp/$name.handle" "$@" >"$tmp/$name.server" 2>"$tmp/$name.server.err"
	xfer_server_pid=$spawned_pid
	pids+=("$xfer_server_pid")
	spawn_bounded 120 ip netns exec "$ns_a" "$xfer" client --ifname "$if_a" \
		--handle-file "$tmp/$name.handle" "$@" >"$tmp/$name.client" 2>"$tmp/$name.client.err"
	xfer_client_pid=$spawned_pid
	pids+=("$xfer_client_pid")
}

# xfer_key FILE NAME: the number harp-xfer reported as NAME= in FILE (its first), or nothing.
xfer_key() {
	sed -n "s/^$2=\\([0-9.]*\\)$/\\1/p" "$1" | head -n 1
}

# topo_tc_queue DEV PROG: PROG (keep_queue: forward out of the queue a packet came in on;
# rss_queue: out of the queue the flow hash picks) on M's DEV ingress; compiled once per run.
topo_tc_queue() {
	local dev=$1 prog=$2 obj="${TMPDIR:-/tmp}/harp-$2.$$.o"
	if [[ ! -e $obj ]]; then
		local arch
		arch=$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
		clang -O2 -g -Wall -target bpf -I"/usr/include/$arch" \
			-c "$topo_dir/$prog.bpf.c" -o "$obj"
		topo_files="$topo_files $obj"
	fi
	ns_exec "$ns_m" tc qdisc add dev "$dev" clsact
	ns_exec "$ns_m" tc filter add dev "$dev" ingress bpf direct-action obj "$obj" sec tc
}

# impair_tc DEV TOP SLOW: htb on M's egress DEV. Class 1:10 (default) runs at TOP; with SLOW,
# class 1:20 runs at SLOW with a one-packet burst, so packets steered there queue and arrive
# behind packets sent after them.
impair_tc() {
	local dev=$1 top=$2 slow=$3 top_limit=$4
	ns_exec "$ns_m" tc qdisc replace dev "$dev" root handle 1: htb default 10
	ns_exec "$ns_m" tc class add dev "$dev" parent 1: classid 1:1 htb \
		rate "$top" ceil "$top" burst 256k cburst 256k quantum 60000
	ns_exec "$ns_m" tc class add dev "$dev" parent 1:1 classid 1:10 htb \
		rate "$top" ceil "$top" burst 256k cburst 256k quantum 60000
	ns_exec "$ns_m" tc qdisc add dev "$dev" parent 1:10 handle 10: pfifo limit "$top_limit"
	if [[ -n $slow ]]; then
		ns_exec "$ns_m" tc class add dev "$dev" parent 1:1 classid 1:20 htb \
			rate "$slow" ceil "$slow" burst 4k cburst 4k quantum 60000
		ns_exec "$ns_m" tc qdisc add dev "$dev" parent 1:20 handle 20: \
			pfifo limit "$HARP_IMPAIR_SLOW_LIMIT"
	fi
}

# impair_family: the nft family of ip_a and ip_b's (ip, or ip6), the one hop_impair impairs: nft's
# dup statement takes no inet table.
impair_family() {
	if [[ $ip_a == *:* ]]; then
		echo ip6
	else
		echo ip
	fi
}

# hop_impair PROFILE: impairs UDP that M forwards, in both directions (acks travel back). ICMP
# and TCP pass untouched (except by ratecap, which is a property of the link), so ping and the
# side traffic keep working. Profiles:
#   none     nothing (the hop alone)
#   drop1    1% of UDP dropped          drop5   5% dropped
#   reorder  a quarter of UDP goes through a slow htb lane and arrives behind later packets
#   dup2     2% of UDP duplicated (nft dup: the copy is routed out of M a second time)
#   corrupt  0.5% of UDP get byte HARP_IMPAIR_CORRUPT_OFFSET inverted; nft's raw payload write
#            leaves the UDP checksum alone, so the receiver sees a bad checksum
#   ratecap  htb caps each direction at HARP_IMPAIR_RATECAP with a queue (delay, then tail drop)
#   all      all of the above together, drop at 1%
# Random choices use nft's numgen, so each run differs.
hop_impair() {
	local profile=$1 drop=0 dup=0 corrupt=0 reorder=0 top="" slow="" rules="" top_limit=1000
	if [[ -z $ns_m ]]; then
		topo_log "hop_impair needs topo_hop first"
		return 2
	fi
	case $profile in
	none) return 0 ;;
	drop1) drop=10 ;;
	drop5) drop=50 ;;
	reorder) reorder=1 ;;
	dup2) dup=20 ;;
	corrupt) corrupt=5 ;;
	ratecap) top=$HARP_IMPAIR_RATECAP ;;
	all) drop=10 dup=20 corrupt=5 reorder=1 top=$HARP_IMPAIR_RATECAP ;;
	*)
		topo_log "unknown impairment profile '$profile'"
		return 2
		;;
	esac
	if [[ -n $top ]]; then
		top_limit=$HARP_IMPAIR_RATECAP_LIMIT
	fi
	# Drop first, so a dropped packet is neither copied nor corrupted; a duplicate leaves
	# through M's output path and so skips the later rules of this forward chain.
	if ((drop)); then
		rules+="meta l4proto udp numgen random mod 1000 < $drop counter name dropped drop
"
	fi
	if ((dup)); then
		rules+="meta l4proto udp $(impair_family) daddr $ip_b numgen random mod 1000 < $dup counter name duplicated dup to $ip_b device \"$if_mb\"
meta l4proto udp $(impair_family) daddr $ip_a numgen random mod 1000 < $dup counter name duplicated dup to $ip_a device \"$if_ma\"
"
	fi
	if ((corrupt)); then
		local bit=$((HARP_IMPAIR_CORRUPT_OFFSET * 8))
		rules+="meta l4proto udp numgen random mod 1000 < $corrupt counter name corrupted @th,$bit,8 set @th,$bit,8 ^ 0xff
"
	fi
	if ((reorder)); then
		slow=$HARP_IMPAIR_SLOW_RATE
		top=${top:-40gbit}
		rules+="meta l4proto udp meta priority set numgen random mod 4 map { 0 : 1:20, 1 : 1:10, 2 : 1:10, 3 : 1:10 }
meta priority 1:20 counter name slowed
"
	fi
	ns_exec "$ns_m" nft -f - <<EOF
table $(impair_family) harp_impair {
	counter dropped {}
	counter duplicated {}
	counter corrupted {}
	counter slowed {}
	chain forward {
		type filter hook forward priority filter; policy accept;
		$rules
	}
}
EOF
	if [[ -n $top ]]; then
		impair_tc "$if_ma" "$top" "$slow" "$top_limit"
		impair_tc "$if_mb" "$top" "$slow" "$top_limit"
	fi
	topo_log "impairment '$profile' on $ns_m"
}

# hop_impair_clear: takes the impairment off M (its nft table and its qdiscs), so that another
# profile can go on while traffic flows.
hop_impair_clear() {
	[[ -n $ns_m ]] || return 0
	ns_exec "$ns_m" nft delete table "$(impair_family)" harp_impair 2>/dev/null || true
	ns_exec "$ns_m" tc qdisc del dev "$if_ma" root 2>/dev/null || true
	ns_exec "$ns_m" tc qdisc del dev "$if_mb" root 2>/dev/null || true
}

# hop_impair_stats: key=value counts of what M did (packets), for logs.
hop_impair_stats() {
	local name n
	[[ -n $ns_m ]] || return 0
	for name in dropped duplicated corrupted slowed; do
		n=$(ns_exec "$ns_m" nft list counter "$(impair_family)" harp_impair "$name" 2>/dev/null |
			sed -n 's/.*packets \([0-9]*\).*/\1/p' || true)
		if [[ -n $n ]]; then
			printf 'impair_%s=%s\n' "$name" "$n"
		fi
	done
	local dev
	for dev in "$if_ma" "$if_mb"; do
		n=$(ns_exec "$ns_m" tc -s qdisc show dev "$dev" root 2>/dev/null |
			sed -n 's/.*(dropped \([0-9]*\),.*/\1/p' | head -n 1 || true)
		if [[ -n $n ]]; then
			printf 'impair_qdisc_dropped_%s=%s\n' "$dev" "$n"
		fi
	done
	return 0
}

# topo_bridge N MTU QUEUES: ranks R0..R(N-1) (ns_r[i], if_r[i], ip_r[i]), each joined by its own
# veth pair to one bridge in M, as N hosts on one switch. Rank i's addresses follow topo_family:
# 198.18.x.(i+1)/24, 2001:2:x::(i+1)/64 (without duplicate address detection), or both; ip_r[i]
# names the IPv4 one unless topo_family is 6, and ip6_r[i] the IPv6 one where there is one. M's
# ends get the ranks' queue count (XDP on a rank's end needs its rx queues >= M's tx queues). With
# more than one queue, each packet M forwards leaves by the queue its flow hash picks (rss_queue
# on M's ingress, as topo_hop's hashed queues): left to itself, the bridge sent every flow to one
# queue, and a rank's connections on its other engines never found a path.
topo_bridge() {
	local n=$1 mtu=$2 queues=$3 i v4 v6
	topo_need_root || return
	if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 2 || n > 200)); then
		topo_log "bad rank count '$n' (2..200)"
		return 2
	fi
	topo_check_args "$mtu" "$queues" || return
	if [[ $topo_family == link ]]; then
		topo_log "topo_bridge: topo_family link is for topo_pair alone"
		return 2
	fi
	ns_a="" ns_b="" ns_m="${topo_prefix}m"
	ns_r=() if_r=() ip_r=() ip6_r=()
	topo_ns_add "$ns_m"
	topo_bridge_plain
	ns_exec "$ns_m" ip link add br0 mtu "$mtu" type bridge stp_state 0 forward_delay 0
	ns_exec "$ns_m" ip link set br0 up
	for ((i = 0; i < n; i++)); do
		ns_r[i]="${topo_prefix}r$i"
		if_r[i]="${topo_prefix}r$i"
		v4="198.18.$topo_net.$((i + 1))" v6="2001:2:$topo_net::$((i + 1))"
		ip_r[i]=$v4
		[[ $topo_family == 4 ]] || ip6_r[i]=$v6
		[[ $topo_family != 6 ]] || ip_r[i]=$v6
		topo_ns_add "${ns_r[i]}"
		topo_veth "${ns_r[i]}" "${if_r[i]}" "$ns_m" "${topo_prefix}m$i" "$mtu" "$queues"
		ns_exec "$ns_m" ip link set "${topo_prefix}m$i" master br0
		topo_addr "${ns_r[i]}" "${if_r[i]}" "$v4" "$v6"
		if ((queues > 1)); then
			topo_tc_queue "${topo_prefix}m$i" rss_queue
		fi
	done
	topo_bridge_wait "$n" || return
	topo_log "bridge of $n ranks in $ns_m, ${ip_r[0]}..${ip_r[n - 1]} mtu $mtu queues $queues" \
		"(family $topo_family)"
}

# topo_bridge_plain: M's bridge forwards frames as a switch does, whatever their IP headers say.
# Where the host has br_netfilter loaded, it checks the IP header of every frame a bridge
# forwards, and drops or trims those it finds wrong (an IPv4 total length longer than the frame,
# an IPv6 payload length of 0), so a malformed frame would never reach the rank it was sent to.
topo_bridge_plain() {
	local key
	for key in arptables iptables ip6tables; do
		if ns_exec "$ns_m" test -e "/proc/sys/net/bridge/bridge-nf-call-$key"; then
			ns_exec "$ns_m" sysctl -qw "net.bridge.bridge-nf-call-$key=0"
		fi
	done
}

# topo_bridge_wait N: R0 and every other rank answer each other, over every family they have.
topo_bridge_wait() {
	local n=$1 i
	for ((i = 1; i < n; i++)); do
		topo_wait_ping "${ns_r[0]}" "${ip_r[i]}" || return
		topo_wait_ping "${ns_r[i]}" "${ip_r[0]}" || return
		if [[ $topo_family == dual ]]; then
			topo_wait_ping "${ns_r[0]}" "${ip6_r[i]}" || return
			topo_wait_ping "${ns_r[i]}" "${ip6_r[0]}" || return
		fi
	done
}

# fabric_tc DEV FLOW AGG BUCKETS: htb on M's egress DEV: BUCKETS classes 1:100.. (hex) capped at
# FLOW each, all of them sharing AGG. Each flow class guarantees itself only a token rate
# (FABRIC_FLOW_RATE) and reaches FLOW by borrowing from the AGG parent: an htb class within its
# own rate never borrows, so with rate = FLOW the total would bind only while AGG / FLOW flows or
# fewer are busy, and many flows together would pass far more than AGG. hop_fabric's nft rule puts each TCP or UDP packet in the
# class its 5-tuple hashes to (this kernel has no flow classifier, and htb takes a class from
# skb->priority); what it does not place (ARP, ICMP) takes class 1:2.
fabric_tc() {
	local dev=$1 flow=$2 agg=$3 buckets=$4 i
	local shape="burst 128k cburst 128k quantum 60000"
	ns_exec "$ns_m" tc qdisc del dev "$dev" root 2>/dev/null || true
	{
		echo "qdisc add dev $dev root handle 1: htb default 2"
		echo "class add dev $dev parent 1: classid 1:1 htb rate $agg ceil $agg $shape"
		echo "class add dev $dev parent 1:1 classid 1:2 htb rate $FABRIC_FLOW_RATE ceil $flow $shape"
		for ((i = 0; i < buckets; i++)); do
			printf 'class add dev %s parent 1:1 classid 1:%x htb rate %s ceil %s %s\n' \
				"$dev" $((0x100 + i)) "$FABRIC_FLOW_RATE" "$flow" "$shape"
		done
	} | ns_exec "$ns_m" tc -batch -
}

# hop_fabric FLOW AGG BUCKETS PPM: M behaves like a cloud fabric, in both directions: each
# 5-tuple (hashed into BUCKETS classes) is capped at FLOW (a tc rate, e.g. 1gbit), all flows
# together at AGG, and PPM per million forwarded TCP and UDP packets are dropped at random. The
# hosts' ends lose TSO (GSO then cuts the data into packets before it leaves, as a NIC's TSO does
# before the wire) and M's ends lose GRO, so M caps and drops single packets, never 64 KiB
# aggregates. Calling it again starts the counters afresh.
hop_fabric() {
	local flow=$1 agg=$2 buckets=$3 ppm=$4 i map="" hash fam l4="ip protocol"
	if [[ -z $ns_m || -z $ns_a ]]; then
		topo_log "hop_fabric needs topo_hop first"
		return 2
	fi
	if ! [[ $buckets =~ ^[0-9]+$ && $ppm =~ ^[0-9]+$ ]] ||
		((buckets < 1 || buckets > 4096 || ppm > 1000000)); then
		topo_log "hop_fabric: bad BUCKETS '$buckets' (1..4096) or PPM '$ppm' (0..1000000)"
		return 2
	fi
	for ((i = 0; i < buckets; i++)); do
		map+="${map:+, }$i : 1:$(printf '%x' $((0x100 + i)))"
	done
	fam=$(impair_family) # the addresses' family (ip or ip6): nft hashes that header's fields
	[[ $fam == ip ]] || l4="meta l4proto"
	hash="jhash $fam saddr . $fam daddr . $l4 . th sport . th dport mod $buckets"
	ns_exec "$ns_a" ethtool -K "$if_a" tso off
	ns_exec "$ns_b" ethtool -K "$if_b" tso off
	ns_exec "$ns_m" ethtool -K "$if_ma" gro off
	ns_exec "$ns_m" ethtool -K "$if_mb" gro off
	ns_exec "$ns_m" nft delete table "$fam" harp_fabric 2>/dev/null || true
	ns_exec "$ns_m" nft -f - <<EOF
table $fam harp_fabric {
	counter lost {}
	counter forwarded {}
	chain forward {
		type filter hook forward priority filter; policy accept;
		meta l4proto { tcp, udp } counter name forwarded
		meta l4proto { tcp, udp } numgen random mod 1000000 < $ppm counter name lost drop
		meta l4proto { tcp, udp } meta priority set $hash map { $map }
	}
}
EOF
	fabric_tc "$if_ma" "$flow" "$agg" "$buckets" || return
	fabric_tc "$if_mb" "$flow" "$agg" "$buckets" || return
	topo_log "fabric on $ns_m: $flow per flow ($buckets buckets), $agg in all, $ppm ppm lost"
}

# hop_fabric_stats: key=value counts since hop_fabric: TCP and UDP packets M forwarded and lost,
# packets the caps dropped, and per direction the flow classes that carried more than 1 MB
# (the distinct 5-tuples, less those the hash put together) and the bytes (Ethernet frames, as
# the caps count them) the aggregate class sent.
hop_fabric_stats() {
	local name n dev
	[[ -n $ns_m ]] || return 0
	for name in forwarded lost; do
		n=$(ns_exec "$ns_m" nft list counter "$(impair_family)" harp_fabric "$name" 2>/dev/null |
			sed -n 's/.*packets \([0-9]*\).*/\1/p' || true)
		printf 'fabric_%s=%s\n' "$name" "${n:-0}"
	done
	for dev in "$if_ma" "$if_mb"; do
		n=$(ns_exec "$ns_m" tc -s qdisc show dev "$dev" 2>/dev/null |
			sed -n 's/.*(dropped \([0-9]*\),.*/\1/p' | awk '{ s += $1 } END { print s + 0 }' ||
			true)
		printf 'fabric_capdrops_%s=%s\n' "$dev" "${n:-0}"
		n=$(ns_exec "$ns_m" tc -s class show dev "$dev" 2>/dev/null | awk '
			$1 == "class" { leaf = ($3 != "1:1" && $3 != "1:2") }
			$1 == "Sent" { if (leaf && $2 > 1000000) c++; leaf = 0 }
			END { print c + 0 }' || true)
		printf 'fabric_flows_%s=%s\n' "$dev" "${n:-0}"
		n=$(ns_exec "$ns_m" tc -s class show dev "$dev" 2>/dev/null | awk '
			$1 == "class" { agg = ($3 == "1:1") }
			$1 == "Sent" { if (agg) print $2; agg = 0 }' || true)
		printf 'fabric_sent_bytes_%s=%s\n' "$dev" "${n:-0}"
	done
	return 0
}

# topo_cleanup: removes the namespaces (and with them every veth and rule). Processes still
# inside are not ours to kill here; callers stop what they started first.
topo_cleanup() {
	local ns
	for ns in $topo_made; do
		ip netns del "$ns" 2>/dev/null || true
	done
	# shellcheck disable=SC2086 # a list of paths without spaces
	rm -f $topo_files
	topo_made="" topo_files=""
}

# use_xfer NAME: sets xfer to harp-xfer's full path ($HARP_XFER, else
# ${BUILD_DIR:-build}/harp-xfer), or ends the script with a line from NAME saying where it looked.
# Unsets HARP_XFER: it is ours, not harp's, and harp refuses HARP_* names it does not know.
use_xfer() {
	xfer=${HARP_XFER:-${BUILD_DIR:-build}/harp-xfer}
	[[ -x $xfer ]] || { echo "$1: harp-xfer not found at '$xfer' (set HARP_XFER or BUILD_DIR)" >&2; exit 1; }
	xfer=$(realpath "$xfer")
	unset HARP_XFER
}

# spawn_xfer ROLE LIMIT [NAME=VALUE...] -- ARGS...: harp-xfer ROLE (the server in B, the client
# in A) under spawn_bounded LIMIT, with those variables set and ARGS after its interface and
# $tmp/handle; its output in $tmp/ROLE.out and $tmp/ROLE.err, its wrapper's pid in spawned_pid and
# in pids. A server is given up to 10 s to write the handle before this returns.
spawn_xfer() {
	local role=$1 limit=$2 ns=$ns_a ifname=$if_a vars=()
	shift 2
	while [[ $1 != -- ]]; do
		vars+=("$1")
		shift
	done
	shift
	if [[ $role == server ]]; then
		ns=$ns_b ifname=$if_b
	fi
	spawn_bounded "$limit" ip netns exec "$ns" env "${vars[@]}" "$xfer" "$role" \
		--ifname "$ifname" --handle-file "$tmp/handle" "$@" >"$tmp/$role.out" 2>"$tmp/$role.err"
	pids+=("$spawned_pid")
	if [[ $role == server ]]; then
		wait_until 100 test -s "$tmp/handle" || true
	fi
}

# harness_init NAME: a scratch directory in $tmp, an empty pids array for the timeout wrappers a
# script spawns, and traps that end those (by PID), remove the topology and the directory however
# the script exits. A script may define harness_cleanup_extra to run first.
harness_init() {
	# shellcheck disable=SC2034 # read by the scripts that source this file
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/harp-$1.XXXXXX")
	pids=()
	trap harness_cleanup EXIT
	trap 'exit 130' INT TERM
}

# shellcheck disable=SC2317 # called from the EXIT trap
harness_cleanup() {
	local pid
	if declare -F harness_cleanup_extra >/dev/null; then
		harness_cleanup_extra
	fi
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	topo_cleanup
	rm -rf "$tmp"
}
