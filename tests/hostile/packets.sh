#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# An observer on harp's segment while a verified transfer runs: three ranks on a bridge that
# floods every frame to every port (a hub, as a tap or a shared segment is), R0 the server, R1
# the client, R2 the attacker (packet_attack.py), which captures harp's frames and sends back
# replays, copies with a wrong token, copies with a psn far ahead, truncated frames, garbage to
# harp's ports, then all of them as a flood for FLOOD_S seconds.
#
#   packets.sh [--family 4|6] [FLOOD_S [auth]]     (family 4 and FLOOD_S 3 by default)
#
# With --family 6 the ranks have IPv6 addresses only (lib.sh topo_family 6), harp runs over IPv6,
# and the attacker adds what only IPv6 has: extension headers before harp's UDP header,
# jumbograms, UDP checksums of 0, and sources spoofed within the link (packet_attack.py), first
# as live DATA forgeries that would corrupt the messages if any one were taken, then from
# captured frames and in the flood. Those that reach harp are counted as the others are; those
# with extension headers are refused by the XDP program (xdp_refused, where harp-xfer reports
# it) or, where the program hands them to the kernel, dropped by the kernel, which has no
# socket on harp's ports (its IPv6 and UDP counters in the receiving namespaces).
#
# With auth, both ends run HARP_AUTH=1 and the attacker first forges from live frames as one who
# read the token would (DATA a few psns ahead with its payload changed, ACKs of what did not
# arrive, some with the MAC trailer stripped): every one must be dropped by the MAC check
# (rx_bad_auth), and every byte still verified. Its replays (unchanged frames, MAC and all) must
# be dropped by the replay window (rx_replayed) before any of their records is applied.
#
# Holds when both ends verify every byte in both directions, run every connection over the ranks'
# family, and the frames the attacker sent show up in their drop counters (rx_bad,
# rx_unknown_conn, rx_duplicates; over IPv6 as check_ipv6 says). Prints the goodput
# left under the attack. $HARP_XFER is harp-xfer. Exits 0 if it held, 1 if not.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/../netns/lib.sh"

usage() {
	echo "usage: packets.sh [--family 4|6] [FLOOD_S [auth]]" >&2
	exit 2
}
if [[ ${1:-} == --family ]]; then
	topo_family=${2:-}
	shift 2 || usage
fi
[[ $topo_family == 4 || $topo_family == 6 ]] || usage
flood_s=${1:-3}
auth=${2:-}
[[ -z $auth || $auth == auth ]] || usage
want_family=$([[ $topo_family == 6 ]] && echo ipv6 || echo ipv4)
use_xfer packets

harness_init packets
if [[ $auth ]]; then
	export HARP_AUTH=1
fi
fail=0
report() {
	echo "packets: FAIL $*"
	fail=1
}

topo_bridge 3 1500 1 || exit 1
# ageing 0: the bridge learns nothing and floods every frame, so R2 sees R0's and R1's
ns_exec "$ns_m" ip link set br0 type bridge ageing_time 0

spawn_bounded 120 ip netns exec "${ns_r[0]}" env HARP_IFNAME="${if_r[0]}" "$xfer" server \
	--ifname "${if_r[0]}" --handle-file "$tmp/handle" --conns 2 --bidir --total 3G \
	--timeout 100 >"$tmp/server.out" 2>"$tmp/server.err"
srv=$spawned_pid
pids+=("$srv")
wait_until 100 test -s "$tmp/handle" || true
spawn_bounded 120 ip netns exec "${ns_r[1]}" env HARP_IFNAME="${if_r[1]}" "$xfer" client \
	--ifname "${if_r[1]}" --handle-file "$tmp/handle" --conns 2 --bidir --total 3G \
	--timeout 100 >"$tmp/client.out" 2>"$tmp/client.err"
cli=$spawned_pid
pids+=("$cli")
sleep 0.5
rc_a=0
run_bounded 90 ip netns exec "${ns_r[2]}" python3 "$here/packet_attack.py" "${if_r[2]}" 47000 47063 \
	"$flood_s" "$tmp/attack" ${auth:+forge} >"$tmp/attack.log" 2>&1 || rc_a=$?
rc_s=0 rc_c=0
wait "$cli" || rc_c=$?
wait "$srv" || rc_s=$?

echo "packets: attacker rc=$rc_a sent: $(tr '\n' ' ' <"$tmp/attack" 2>/dev/null || echo none)"
key() { sed -n "s/^$1=//p" "$2" | head -n 1; }
# sent KIND: how many frames of KIND the attacker sent (0 if it wrote none)
sent() {
	local n
	n=$(sed -n "s/^$1 //p" "$tmp/attack" 2>/dev/null | head -n 1)
	echo "${n:-0}"
}
dropped=0 bad_auth_sum=0 replayed_sum=0
for end in server client; do
	bad=$(key rx_bad "$tmp/$end.out") unknown=$(key rx_unknown_conn "$tmp/$end.out")
	dups=$(key rx_duplicates "$tmp/$end.out") bad_auth=$(key rx_bad_auth "$tmp/$end.out")
	replayed=$(key rx_replayed "$tmp/$end.out") refused=$(key xdp_refused "$tmp/$end.out")
	echo "packets: $end rc=$([[ $end == server ]] && echo "$rc_s" || echo "$rc_c")" \
		"result=$(key result "$tmp/$end.out") verified_bytes=$(key verified_bytes "$tmp/$end.out")" \
		"goodput_gbps=$(key goodput_gbps "$tmp/$end.out") rx_bad=$bad rx_unknown_conn=$unknown" \
		"rx_duplicates=$dups rx_bad_auth=$bad_auth rx_replayed=$replayed" \
		"xdp_refused=${refused:-n/a} auth=$(key auth "$tmp/$end.out")" \
		"family=$(key family "$tmp/$end.out") conns_ipv6=$(key conns_ipv6 "$tmp/$end.out")"
	dropped=$((dropped + ${bad:-0} + ${unknown:-0} + ${dups:-0} + ${bad_auth:-0} +
		${replayed:-0} + ${refused:-0}))
	bad_auth_sum=$((bad_auth_sum + ${bad_auth:-0}))
	replayed_sum=$((replayed_sum + ${replayed:-0}))
	if [[ $auth ]] && ! grep -q '^auth=AES-256-GCM$\|^auth=ChaCha20-Poly1305$' "$tmp/$end.out"; then
		report "HARP_AUTH=1, but the $end's connections did not authenticate"
	fi
	# every connection ran over the ranks' family
	conns=$(key conns "$tmp/$end.out") ip6=$(key conns_ipv6 "$tmp/$end.out")
	if [[ $(key family "$tmp/$end.out") != "$want_family" ]] ||
		((${ip6:-0} != (topo_family == 6 ? ${conns:-0} : 0))); then
		report "the $end did not run every connection over $want_family"
	fi
done
if ((rc_s || rc_c)) || ! grep -q '^result=ok' "$tmp/server.out" ||
	! grep -q '^result=ok' "$tmp/client.out"; then
	report "the transfer under attack failed (server rc $rc_s, client rc $rc_c)"
	grep -hv INFO "$tmp/server.err" "$tmp/client.err" | tail -n 8 | sed 's/^/    | /'
fi
if ((rc_a)) || ! grep -q '^flood [1-9]' "$tmp/attack" 2>/dev/null; then
	report "the attacker did not run its course (rc $rc_a)"
	tail -n 5 "$tmp/attack.log" | sed 's/^/    | /'
fi
# the kernel may drop some of the flood before harp sees it; most must be counted
((dropped > 10000)) || report "only $dropped attack frames were counted as dropped"
if [[ $auth ]]; then
	forged=$(sent forged)
	echo "packets: forged $forged, dropped by the MAC check $bad_auth_sum"
	# the kernel drops some; most forgeries must have met the MAC check
	((forged > 1000)) || report "the attacker forged only $forged frames"
	((bad_auth_sum * 2 > forged)) ||
		report "only $bad_auth_sum of $forged forged frames failed the MAC check"
	# every replay carries the peer's MAC: only the window tells it from the first copy
	replays=$(sent replay)
	echo "packets: replayed $replays (and more in the flood), dropped by the window $replayed_sum"
	((replayed_sum * 2 > replays)) ||
		report "only $replayed_sum of $replays replayed frames were dropped as replays"
fi

# kernel_refused NS: IPv6 packets that NS's kernel took as its own and dropped: UDP to a port
# without a socket (harp's have none there), or headers it refuses (an unknown next header, a
# Jumbo Payload option in a packet that is no jumbogram, a UDP datagram cut short).
kernel_refused() {
	ns_exec "$1" nstat -asz 2>/dev/null | awk '
		$1 ~ /^Udp6(NoPorts|InErrors)$/ { s += $2 }
		$1 ~ /^Ip6In(UnknownProtos|HdrErrors|TruncatedPkts)$/ { s += $2 }
		END { print s + 0 }'
}

# check_ipv6: what only IPv6 has was dropped and counted. Each live forgery (a DATA frame ahead
# with its payload changed, and one fault) would have written into a message had it been taken:
# the verified bytes show none was. Extension headers never reach harp: the XDP program refuses
# them (xdp_refused) where it counts them, else hands them to the kernel, which drops them. Zero
# checksums and payload lengths of 0 reach harp and are refused there (rx_bad), spoofed sources
# too (rx_unknown_conn), at both ends, since the bridge floods every frame to both.
check_ipv6() {
	local fault n ext refused=0 kernel end need_bad need_unknown
	for fault in spoof nocsum jumbo ext; do
		n=$(sent "live6-$fault")
		((n > 100)) || report "the attacker forged only $n live DATA frames ($fault)"
	done
	for end in server client; do
		refused=$((refused + $(key xdp_refused "$tmp/$end.out" | grep . || echo 0)))
	done
	kernel=$(($(kernel_refused "${ns_r[0]}") + $(kernel_refused "${ns_r[1]}")))
	ext=$(($(sent ext) + $(sent live6-ext)))
	echo "packets: IPv6: $(sent live6) live DATA forgeries, one fault each;" \
		"$ext frames with extension headers (and more in the flood): refused by XDP" \
		"$refused, dropped by the kernel $kernel"
	(((refused + kernel) * 2 > ext)) ||
		report "$((refused + kernel)) of $ext frames with extension headers counted"
	need_bad=$(($(sent nocsum) + $(sent live6-nocsum) + $(sent live6-jumbo)))
	need_unknown=$(($(sent spoof) + $(sent live6-spoof)))
	for end in server client; do
		n=$(key rx_bad "$tmp/$end.out")
		((${n:-0} * 2 > need_bad)) ||
			report "the $end counted $n rx_bad for $need_bad zero checksums, lengths"
		n=$(key rx_unknown_conn "$tmp/$end.out")
		((${n:-0} * 2 > need_unknown)) ||
			report "the $end counted $n rx_unknown_conn for $need_unknown spoofs"
	done
}
if [[ $topo_family == 6 ]]; then
	check_ipv6
fi

if ((fail)); then
	exit 1
fi
echo "packets: held: every byte verified both ways, $dropped attack frames dropped and counted"
