#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Every port pair in use goes dark at once in the middle of a transfer, while fresh pairs still
# cross: M records each harp UDP flow it forwards (source address, source port, destination
# port) and, once data flows, drops every flow it has seen so far, as a network that moves all of
# a connection's flows at once does (a stalled queue of a hypervisor's tap, a flow table that
# lost its entries). No path delivers, so none can be judged against another, and every wanted
# path is live: harp used to probe for nothing and each connection died at the peer timeout
# ("no acknowledgement from peer"). Timeouts in a row must now start a rescue: probes over fresh
# pairs, each answer replacing a silent path, the peer told to replace its own.
#
#   path_rescue.sh
#
# A - M - B, 2 queues that M's flow hash picks, 2 connections, HARP_PEER_TIMEOUT_MS at its
# default. Two runs:
#   both    data both ways, every flow of both sides darkened;
#   return  data from A to B only, and only B's flows darkened: the acks' way back is what is
#           dark, which only B can repair, and only A's timeouts can see (CHAN_UNHEARD).
# Checks, each run: both sides verify every byte; M dropped packets of darkened flows; some side
# replaced paths in a rescue (paths_rescued > 0), the side whose flows were darkened among them;
# every connection ends with HARP_PATHS live paths; no connection was declared dead.
#
# The binary is $HARP_XFER (default ${BUILD_DIR:-build}/harp-xfer). Exits 0 when every check
# holds, 1 if one does not.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/lib.sh"

use_xfer path_rescue

harness_init path-rescue
topo_hop 1500 2 || exit
fail=0
report() {
	echo "path_rescue: FAIL $*"
	fail=1
}

# dark_table SADDR: M's table that records harp's UDP flows from SADDR (all of them when SADDR
# is "any") and drops those in the dark set.
dark_table() {
	local match=""
	[[ $1 != any ]] && match="ip saddr $1"
	ns_exec "$ns_m" nft -f - <<-NFT
		table ip harp_rescue {
			set seen {
				type ipv4_addr . inet_service . inet_service
				size 65536
				flags dynamic
			}
			set dark {
				type ipv4_addr . inet_service . inet_service
				size 65536
			}
			counter darkened {}
			chain forward {
				type filter hook forward priority filter; policy accept;
				ip saddr . udp sport . udp dport @dark counter name darkened drop
				$match udp dport 47000-47063 add @seen { ip saddr . udp sport . udp dport }
			}
		}
	NFT
}

# darken: every flow M has seen so far goes into the dark set.
darken() {
	local elems
	elems=$(ns_exec "$ns_m" nft list set ip harp_rescue seen | tr -d '\n\t' |
		sed -n 's/.*elements = {\([^}]*\)}.*/\1/p')
	[[ -n $elems ]] || {
		report "M saw no harp flow to darken"
		return
	}
	ns_exec "$ns_m" nft add element ip harp_rescue dark "{ $elems }"
	echo "path_rescue: darkened $(tr ',' '\n' <<<"$elems" | grep -c .) flows"
}

# transfer NAME FROM BIDIR: one transfer; FROM (any, or an address) picks the flows darkened
# 0.7 s after the handle appears.
transfer() {
	local name=$1 from=$2 bidir=$3 handle="$tmp/$1.handle" i server client rc_s=0 rc_c=0
	local args=(--queues 2 --conns 2 --sizes 16M --count 32 --timeout 90) d r m v side
	((bidir)) && args+=(--bidir)
	dark_table "$from"
	xfer_pair "$name" "${args[@]}"
	server=$xfer_server_pid client=$xfer_client_pid
	for ((i = 0; i < 100; i++)); do
		[[ -e $handle ]] && break
		sleep 0.1
	done
	sleep 0.7 # connections up, data flowing on every path
	darken
	wait "$client" || rc_c=$?
	wait "$server" || rc_s=$?
	d=$(ns_exec "$ns_m" nft list counter ip harp_rescue darkened | sed -n 's/.*packets \([0-9]*\).*/\1/p')
	ns_exec "$ns_m" nft delete table ip harp_rescue
	echo "--- $name: server rc $rc_s, client rc $rc_c; M dropped ${d:-?} packets of darkened flows"
	grep -hE '^(verified_bytes|seconds|retransmits|timeouts|paths_min|paths_retired|paths_rescued|probes_sent)=' \
		"$tmp/$name.server" "$tmp/$name.client" | tr '\n' ' '
	echo
	grep -h 'harp: \(ERROR\|WARN\)' "$tmp/$name.server.err" "$tmp/$name.client.err" || true
	((rc_s == 0 && rc_c == 0)) || report "$name: harp-xfer exited $rc_s (server) $rc_c (client)"
	((${d:-0} > 0)) || report "$name: M dropped nothing of the darkened flows (no data flowed?)"
	if grep -qh 'declaring it dead' "$tmp/$name.server.err" "$tmp/$name.client.err"; then
		report "$name: a connection was declared dead"
	fi
	for side in server client; do
		m=$(xfer_key "$tmp/$name.$side" paths_min)
		((${m:-0} == 8)) || report "$name $side: paths_min=${m:-missing}, expected 8"
		[[ $side == client ]] && ((!bidir)) && continue # it only sent
		v=$(xfer_key "$tmp/$name.$side" verified_bytes)
		((${v:-0} == 2 * 32 * 16 * 1048576)) ||
			report "$name $side: verified_bytes=${v:-missing}, expected 2 x 32 x 16 MiB"
	done
	# B is the server: its flows are darkened in both runs, and it must have rescued its own
	r=$(xfer_key "$tmp/$name.server" paths_rescued)
	((${r:-0} > 0)) || report "$name: B (server) replaced no darkened path in a rescue"
}

transfer both any 1
transfer return "$ip_b" 0
echo "path_rescue: result=$( ((fail)) && echo FAIL || echo PASS)"
exit "$fail"
