#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# A quarter of harp's paths turn into black holes in the middle of a transfer: M starts dropping
# every UDP packet whose source port is one of the lowest 16 of harp's 64 (in both directions),
# as a fabric that loses one 5-tuple does. harp must retire those paths, send what they held
# again on others, probe for replacements, and deliver every byte.
#
#   path_blackhole.sh
#
# A - M - B with 2 queues that M's flow hash picks; 2 connections each way, 1 GiB each way. The
# same transfer runs first without the black hole, as the reference. Checks: both runs verify
# every byte; the cut run retired at least one path (paths_retired > 0) and still ends with
# HARP_PATHS live paths on every connection; if M dropped data of a holed path (it counts
# data-sized packets apart from acks and probes), at least one path was retired; and it takes at
# most 3 x the reference + 2 s (a retirement costs 3 of the path's RTOs, at least 20 ms, per path:
# far below that bound, which only catches a stall). Prints both runs' seconds.
#
# This needs the receiver's selective-ack map to reach across the whole window: a dark path
# leaves a hole every few psns, and with a map shorter than what is in flight the sender could
# not learn what arrived beyond it and stalled on its retransmission timer.
#
# The binary is $HARP_XFER (default ${BUILD_DIR:-build}/harp-xfer). Exits 0 when every check
# holds, 1 if one does not, 77 if it cannot run here.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/lib.sh"

xfer=${HARP_XFER:-${BUILD_DIR:-build}/harp-xfer}
if [[ ! -x $xfer ]]; then
	echo "path_blackhole: harp-xfer not found at '$xfer' (set HARP_XFER or BUILD_DIR)" >&2
	exit 1
fi
xfer=$(realpath "$xfer")
unset HARP_XFER # ours, not harp's: harp refuses HARP_* names it does not know

harness_init path-blackhole
topo_hop 1500 2 || exit
fail=0
report() {
	echo "path_blackhole: FAIL $*"
	fail=1
}

# transfer NAME CUT: one transfer; CUT=1 drops the low source ports on M once data flows.
transfer() {
	local name=$1 cut=$2 handle="$tmp/$1.handle" i server client rc_s=0 rc_c=0
	local args=(--queues 2 --conns 2 --bidir --sizes 64M --count 16 --timeout 90)
	xfer_pair "$name" "${args[@]}"
	server=$xfer_server_pid client=$xfer_client_pid
	if ((cut)); then
		for ((i = 0; i < 100; i++)); do
			[[ -e $handle ]] && break
			sleep 0.1
		done
		sleep 0.7 # connections up, data flowing on every path
		ns_exec "$ns_m" nft -f - <<-NFT
			table ip harp_blackhole {
				counter holed {}
				counter holed_data {}
				chain forward {
					type filter hook forward priority filter; policy accept;
					udp sport 47000-47015 meta length > 1000 counter name holed_data drop
					udp sport 47000-47015 counter name holed drop
				}
			}
		NFT
	fi
	wait "$client" || rc_c=$?
	wait "$server" || rc_s=$?
	echo "--- $name: server rc $rc_s, client rc $rc_c"
	grep -hE '^(verified_bytes|seconds|goodput_gbps|retransmits|timeouts|paths_min|paths_retired|probes_sent)=' \
		"$tmp/$name.server" "$tmp/$name.client" | tr '\n' ' '
	echo
	tail -n 5 "$tmp/$name.server.err" "$tmp/$name.client.err" 2>/dev/null | grep -v '^$' || true
	((rc_s == 0 && rc_c == 0)) || report "$name: harp-xfer exited $rc_s (server) $rc_c (client)"
}

transfer reference 0
transfer cut 1
# counter NAME: packets M's counter NAME dropped.
counter() {
	ns_exec "$ns_m" nft list counter ip harp_blackhole "$1" |
		sed -n 's/.*packets \([0-9]*\).*/\1/p'
}
holed_data=$(counter holed_data)
holed=$(counter holed)
echo "path_blackhole: M dropped ${holed_data:-?} data packets and ${holed:-?} others (acks," \
	"probes) of the holed paths"
((${holed_data:-0} + ${holed:-0} > 0)) ||
	report "the black hole dropped nothing: no path used the holed ports"

retired=0
for side in server client; do
	r=$(xfer_key "$tmp/cut.$side" paths_retired)
	retired=$((retired + ${r:-0}))
	m=$(xfer_key "$tmp/cut.$side" paths_min)
	((${m:-0} == 8)) || report "cut $side: paths_min=${m:-missing}, expected 8 (replacements found)"
	v=$(xfer_key "$tmp/cut.$side" verified_bytes)
	((${v:-0} == 16 * 64 * 1048576 * 2)) ||
		report "cut $side: verified_bytes=${v:-missing}, expected every byte of 2 x 16 x 64 MiB"
done
# A dark path that new data never chose (others had room and a lower RTT) costs nothing but
# some acks; one that lost data must be retired.
if ((${holed_data:-0} > 0 && retired == 0)); then
	report "data was lost on dark paths, and no path was retired"
fi
ref=$(xfer_key "$tmp/reference.client" seconds)
cut=$(xfer_key "$tmp/cut.client" seconds)
echo "path_blackhole: reference ${ref:-?} s, with the black hole ${cut:-?} s, $retired paths retired"
if [[ -n $ref && -n $cut ]] && awk -v r="$ref" -v c="$cut" 'BEGIN { exit !(c > 3 * r + 2) }'; then
	report "the cut run took $cut s against the reference's $ref s"
fi
echo "path_blackhole: result=$( ((fail)) && echo FAIL || echo PASS)"
exit "$fail"
