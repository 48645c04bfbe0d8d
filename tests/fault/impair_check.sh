#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Checks that one of lib.sh's impairment profiles does what it claims, without harp: numbered
# UDP datagrams from A to B through M (impair_probe.py), then the counts are held against the
# profile's expected ranges; ratecap is measured with TCP (iperf3).
#
#   impair_check.sh PROFILE [COUNT]    PROFILE: none drop1 drop5 reorder dup2 corrupt ratecap all
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/../netns/lib.sh"

profile=${1:?usage: impair_check.sh PROFILE [COUNT]}
count=${2:-10000}
port=9000
pps=20000
pids=()

# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	topo_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck disable=SC2016 # awk program, not shell
csum_errors() {
	ns_exec "$ns_b" awk '$1 == "Udp:" { if (!col) { for (i = 2; i <= NF; i++) if ($i == "InCsumErrors") col = i; next } print $col; exit }' /proc/net/snmp
}

# value KEY TEXT: the number after KEY= in TEXT.
value() {
	sed -n "s/.*\\b$1=\\([0-9.]*\\).*/\\1/p" <<<"$2" | head -n 1
}

fails=0
expect() {
	local what=$1 got=$2 lo=$3 hi=$4
	if awk -v g="$got" -v l="$lo" -v h="$hi" 'BEGIN { exit !(g >= l && g <= h) }'; then
		printf 'ok   %s=%s in [%s, %s]\n' "$what" "$got" "$lo" "$hi"
	else
		printf 'FAIL %s=%s not in [%s, %s]\n' "$what" "$got" "$lo" "$hi"
		fails=$((fails + 1))
	fi
}

topo_hop 1500 1 || exit
# Let the kernel compute UDP checksums in A, so a corrupted datagram is caught by B's stack
# (with offload on, veth hands the skb on as CHECKSUM_PARTIAL and nobody ever checks it).
ns_exec "$ns_a" ethtool -K "$if_a" tx off >/dev/null
hop_impair "$profile"
# A busier slow lane queues more, so more datagrams overtake each other.
[[ $profile == reorder ]] && pps=30000

if [[ $profile == ratecap ]]; then
	command -v iperf3 >/dev/null || {
		echo "iperf3 missing"
		exit 77
	}
	spawn_bounded 30 ip netns exec "$ns_b" iperf3 -s -1 -p 5201 >/dev/null 2>&1
	pids+=("$spawned_pid")
	sleep 0.5
	out=$(run_bounded 30 ip netns exec "$ns_a" iperf3 -c "$ip_b" -p 5201 -t 3 -f g)
	gbps=$(awk '/sender$/ { print $7 }' <<<"$out")
	echo "tcp_gbps=$gbps cap=$HARP_IMPAIR_RATECAP"
	hop_impair_stats
	expect tcp_gbps "$gbps" 0.5 2.2
	exit $((fails > 0))
fi

csum_before=$(csum_errors)
spawn_bounded 60 ip netns exec "$ns_b" python3 "$here/impair_probe.py" recv --port "$port" \
	--count "$count" --idle 2 --deadline 50 >"${TMPDIR:-/tmp}/probe.$$"
pids+=("$spawned_pid")
sleep 0.5
run_bounded 50 ip netns exec "$ns_a" python3 "$here/impair_probe.py" send --dst "$ip_b" \
	--port "$port" --count "$count" --size 1400 --pps "$pps"
wait "${pids[0]}"
out=$(cat "${TMPDIR:-/tmp}/probe.$$")
rm -f "${TMPDIR:-/tmp}/probe.$$"
csum=$(($(csum_errors) - csum_before))
echo "$out csum_errors=$csum"
hop_impair_stats

lost=$(value lost "$out")
dup=$(value duplicated "$out")
reo=$(value reordered "$out")
bad=$(value bad_content "$out")
# Expected ranges: about +-4 standard deviations of the binomial around the profile's rate.
pct() { awk -v n="$count" -v p="$1" 'BEGIN { printf "%d", n * p / 100 }'; }
case $profile in
none)
	expect lost "$lost" 0 0
	expect duplicated "$dup" 0 0
	expect reordered "$reo" 0 0
	expect csum_errors "$csum" 0 0
	;;
drop1) expect lost "$lost" "$(pct 0.5)" "$(pct 1.6)" ;;
drop5) expect lost "$lost" "$(pct 4)" "$(pct 6)" ;;
dup2) expect duplicated "$dup" "$(pct 1.3)" "$(pct 2.7)" ;;
reorder)
	expect reordered "$reo" "$(pct 1)" "$count"
	expect lost "$lost" 0 "$(pct 1)"
	;;
corrupt)
	expect csum_errors "$csum" "$(pct 0.2)" "$(pct 0.8)"
	# Caught by the checksum, so they are missing, never delivered with a wrong byte.
	expect bad_content "$bad" 0 0
	;;
all)
	expect lost "$lost" "$(pct 0.5)" "$(pct 5)"
	expect duplicated "$dup" "$(pct 1)" "$(pct 3)"
	expect reordered "$reo" 1 "$count"
	expect csum_errors "$csum" 1 "$(pct 1)"
	expect bad_content "$bad" 0 0
	;;
*)
	echo "unknown profile $profile"
	exit 2
	;;
esac
exit $((fails > 0))
