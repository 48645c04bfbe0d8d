#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# One harp transfer between two fresh namespaces: the server in B, the client in A.
#
#   xfer.sh [options] -- HARP_XFER_COMMON_ARGS...
#     --mtu N               MTU of every link (default 1500)
#     --queues N            veth queues; also passed to harp-xfer unless the args set --queues
#     --family F            4 (default): the links carry IPv4; 6: IPv6 only; dual: both, harp
#                           choosing by itself (IPv4; --env HARP_FAMILY=ipv6 makes it IPv6);
#                           link: link-local IPv6 addresses only (no --hop)
#     --hop PROFILE         none: A and B on one veth pair (default); plain: A - M - B without
#                           impairment; drop1 drop5 reorder dup2 corrupt ratecap all: A - M - B
#                           with that impairment on M (tests/netns/lib.sh, hop_impair)
#     --side-traffic        while harp runs, ping (10 replies required, each the MTU's size) and a
#                           TCP transfer (iperf3, 20 MiB) between the namespaces must succeed
#     --expect-retransmits  fail unless the retransmits= counts add up to more than 0
#     --expect-rx-bad       fail unless the rx_bad= counts add up to more than 0
#     --auth                both sides run with HARP_AUTH=1, and their auth= lines must say so
#     --expect-rx-bad-auth  fail unless the rx_bad_auth= counts add up to more than 0
#     --expect-queues N     fail unless both sides received and sent packets on each queue < N
#     --expect-fill-deeper  fail unless the server (the receiver) deepened its fill ring past
#                           its starting 256 frames (a burst of probes may deepen the client's)
#     --expect-frames-short fail unless the server's socket dropped packets for want of frames
#                           (xdp_fill_ring_empty or xdp_rx_ring_full above 0)
#     --expect-jumbo        fail unless both sides ran at the links' whole MTU, with packets
#                           past one UMEM frame sent and received as descriptor chains
#     --expect-mtu N        fail unless both sides ran at IP MTU N
#     --expect-family F     fail unless every connection of both sides ran over F (ipv4, ipv6)
#     --env NAME=VALUE      set NAME for both harp-xfer sides (a HARP_* setting)
#     --server-env NAME=VALUE  set NAME for the server (the listener) alone
#     --expect-key KEY      fail unless both sides report KEY=N with N > 0
#     --hop-mtu N           M's two interfaces carry N bytes (A and B keep --mtu): a middle hop
#                           with a smaller MTU, which drops larger frames without a word
#     --hop-mtu-at SEC:N    the same, SEC seconds after the client starts (a path that shrinks)
#     --hop-mtu-on-rise N   the same, once both sides said their path MTU search rose above N
#                           (HARP_LOG_LEVEL=info; within 60 s): a path that shrinks under a size
#                           in use, whatever the host's speed
#     --expect-pmtu N       fail unless both sides ended with every connection at path MTU N
#     --expect-line TEXT    fail unless both sides' stderr has a line containing TEXT
#     --expect-no-line TEXT fail if either side's stderr has one
#     --limit SEC           kill harp-xfer after SEC seconds (default: its --timeout + 30, or 300)
#     --threaded-napi       every veth end receives in a NAPI kernel thread (lib.sh, topo_napi),
#                           as a NIC receives on the receiver's CPUs: transmit meets push-back
#     --expect-kick-batch N fail unless the client (the sender) made at most one TX wake-up
#                           (sendto) per N frames it sent, and both ends still had threaded NAPI
#                           at the end when --threaded-napi is given
#
# The binary is $HARP_XFER (default ${BUILD_DIR:-build}/harp-xfer). Prints both sides' output;
# exits 0 only if both harp-xfer processes exit 0 and every check above holds, 77 if it cannot
# run here (not root, a tool missing).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/lib.sh"

usage() {
	sed -n '4,44s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
}

mtu=1500 queues=1 hop=none side=0 expect_retx=0 expect_rx_bad=0 expect_queues=0 expect_fill=0
auth=0 expect_rx_bad_auth=0 expect_short=0 expect_jumbo=0 expect_mtu="" expect_family=""
limit="" kick_batch=""
envs=() server_envs=() expect_keys=() hop_mtu="" hop_mtu_at="" hop_mtu_rise="" expect_pmtu="" expect_lines=() expect_no_lines=()
while (($#)); do
	case $1 in
	--mtu) mtu=${2:?} && shift ;;
	--queues) queues=${2:?} && shift ;;
	--family) topo_family=${2:?} && shift ;;
	--hop) hop=${2:?} && shift ;;
	--side-traffic) side=1 ;;
	--expect-retransmits) expect_retx=1 ;;
	--expect-rx-bad) expect_rx_bad=1 ;;
	--auth) auth=1 ;;
	--expect-rx-bad-auth) expect_rx_bad_auth=1 ;;
	--expect-fill-deeper) expect_fill=1 ;;
	--expect-frames-short) expect_short=1 ;;
	--expect-jumbo) expect_jumbo=1 ;;
	--expect-mtu) expect_mtu=${2:?} && shift ;;
	--expect-family) expect_family=${2:?} && shift ;;
	--env) envs+=("${2:?}") && shift ;;
	--server-env) server_envs+=("${2:?}") && shift ;;
	--expect-key) expect_keys+=("${2:?}") && shift ;;
	--hop-mtu) hop_mtu=${2:?} && shift ;;
	--hop-mtu-at) hop_mtu_at=${2:?} && shift ;;
	--hop-mtu-on-rise) hop_mtu_rise=${2:?} && shift ;;
	--expect-pmtu) expect_pmtu=${2:?} && shift ;;
	--expect-line) expect_lines+=("${2:?}") && shift ;;
	--expect-no-line) expect_no_lines+=("${2:?}") && shift ;;
	--expect-queues) expect_queues=${2:?} && shift ;;
	--limit) limit=${2:?} && shift ;;
	--threaded-napi) topo_napi=threaded ;;
	--expect-kick-batch) kick_batch=${2:?} && shift ;;
	--)
		shift
		break
		;;
	*) usage ;;
	esac
	shift
done
harp_args=("$@")
[[ $expect_queues =~ ^[0-9]+$ ]] || usage
[[ -z $kick_batch || $kick_batch =~ ^[1-9][0-9]*$ ]] || usage

xfer=${HARP_XFER:-${BUILD_DIR:-build}/harp-xfer}
if [[ ! -x $xfer ]]; then
	echo "xfer: harp-xfer not found at '$xfer' (set HARP_XFER or BUILD_DIR)" >&2
	exit 1
fi
xfer=$(realpath "$xfer")
# harp refuses HARP_* variables it does not know, and this one is ours.
unset HARP_XFER

has_arg() {
	local want=$1 a
	for a in "${harp_args[@]}"; do
		[[ $a == "$want" || $a == "$want="* ]] && return 0
	done
	return 1
}

if ! has_arg --queues; then
	harp_args+=(--queues "$queues")
fi
if [[ -z $limit ]]; then
	limit=300
	for ((i = 0; i < ${#harp_args[@]}; i++)); do
		if [[ ${harp_args[i]} == --timeout ]] && ((i + 1 < ${#harp_args[@]})); then
			limit=$((${harp_args[i + 1]%.*} + 30))
		elif [[ ${harp_args[i]} == --timeout=* ]]; then
			limit=$((${harp_args[i]#--timeout=} + 30))
		fi
	done
fi

harness_init xfer

case $hop in
none)
	topo_pair "$mtu" "$queues" || exit
	;;
*)
	topo_hop "$mtu" "$queues" || exit
	if [[ $hop != plain ]]; then
		hop_impair "$hop" || exit
	fi
	;;
esac
# hop_mtu N: M's interfaces carry N bytes from now on
hop_mtu() {
	ns_exec "$ns_m" ip link set "$if_ma" mtu "$1" &&
		ns_exec "$ns_m" ip link set "$if_mb" mtu "$1" &&
		echo "xfer: the middle hop carries $1 bytes from now on"
}
if [[ -n $hop_mtu$hop_mtu_at$hop_mtu_rise && $hop == none ]]; then
	echo "xfer: --hop-mtu, --hop-mtu-at and --hop-mtu-on-rise need --hop" >&2
	exit 2
fi
if [[ -n $hop_mtu_rise ]]; then
	[[ $hop_mtu_rise =~ ^[0-9]+$ ]] || usage
	export HARP_LOG_LEVEL=info # the search's rises are info lines
fi
# rose_above FILE N: FILE holds a path MTU search's rise to a size above N
rose_above() {
	local size
	for size in $(sed -n 's/.*the path carries \([0-9]*\)-byte packets: larger ones.*/\1/p' "$1"); do
		((size > $2)) && return 0
	done
	return 1
}
if [[ -n $hop_mtu ]]; then
	hop_mtu "$hop_mtu" || exit
fi
echo "xfer: topology=$([[ $hop == none ]] && echo pair || echo hop) hop=$hop mtu=$mtu" \
	"queues=$queues napi=${topo_napi:-softirq} limit=${limit}s args=${harp_args[*]}"

handle="$tmp/handle"
# lock_file NS IF: the interface lock a harp process that loads its own program holds
# (/run/harp/netns-INODE-if-INDEX.lock). Namespace inodes come back: one a killed process left
# under the same name goes first.
lock_file() {
	local ino idx
	ino=$(ip netns exec "$1" stat -L -c %i /proc/self/ns/net)
	idx=$(ip netns exec "$1" cat "/sys/class/net/$2/ifindex")
	echo "/run/harp/netns-$ino-if-$idx.lock"
}
if ((auth)); then
	export HARP_AUTH=1
fi
for kv in "${envs[@]}"; do
	[[ $kv == HARP_*=* ]] || usage
	export "${kv?}"
done
lock_files=("$(lock_file "$ns_a" "$if_a")" "$(lock_file "$ns_b" "$if_b")")
rm -f "${lock_files[@]}"
for kv in "${server_envs[@]}"; do
	[[ $kv == HARP_*=* ]] || usage
done
spawn_bounded "$limit" ip netns exec "$ns_b" env "${server_envs[@]}" "$xfer" server \
	--ifname "$if_b" --handle-file "$handle" "${harp_args[@]}" >"$tmp/server.out" \
	2>"$tmp/server.err"
server_pid=$spawned_pid
pids+=("$server_pid")
if [[ -n $hop_mtu_at ]]; then
	(sleep "${hop_mtu_at%%:*}" && hop_mtu "${hop_mtu_at#*:}") &
	pids+=("$!")
fi
spawn_bounded "$limit" ip netns exec "$ns_a" "$xfer" client --ifname "$if_a" \
	--handle-file "$handle" "${harp_args[@]}" >"$tmp/client.out" 2>"$tmp/client.err"
client_pid=$spawned_pid
pids+=("$client_pid")
if [[ -n $hop_mtu_rise ]]; then
	(
		for ((i = 0; i < 600; i++)); do
			if rose_above "$tmp/client.err" "$hop_mtu_rise" &&
				rose_above "$tmp/server.err" "$hop_mtu_rise"; then
				hop_mtu "$hop_mtu_rise"
				exit
			fi
			sleep 0.1
		done
		echo "xfer: no rise above $hop_mtu_rise on both sides within 60 s: the hop stays"
	) &
	pids+=("$!")
fi

# side_traffic: ping and TCP across the same links while harp has its XDP program attached.
side_ok=1
side_traffic() {
	local i
	for ((i = 0; i < 300; i++)); do
		[[ -e $handle ]] && break
		kill -0 "$server_pid" 2>/dev/null || break
		sleep 0.1
	done
	spawn_bounded 60 ip netns exec "$ns_b" iperf3 -s -1 -p 5201 >"$tmp/iperf3-server.out" 2>&1
	pids+=("$spawned_pid")
	# full-size pings, never fragmented: at a jumbo MTU each one spans several XDP buffers,
	# which the program must pass to the kernel whole
	local ip_hdrs=28 peer=$ip_b # IPv4 and ICMP headers; IPv6's and ICMPv6's are 48
	[[ $ip_b != *:* ]] || ip_hdrs=48
	[[ $ip_b != fe80:* ]] || peer="$ip_b%$if_a" # a link-local address, on A's link
	spawn_bounded 30 ip netns exec "$ns_a" ping -c 10 -i 0.2 -W 2 -s $((mtu - ip_hdrs)) -M do "$peer" \
		>"$tmp/ping.out" 2>&1
	local ping_pid=$spawned_pid
	pids+=("$ping_pid")
	local tcp_rc=1
	for ((i = 0; i < 20; i++)); do
		sleep 0.25
		if run_bounded 40 ip netns exec "$ns_a" iperf3 -c "$peer" -p 5201 -n 20M -f g \
			>"$tmp/iperf3.out" 2>&1; then
			tcp_rc=0
			break
		fi
		# Only retry while the server is not up yet.
		grep -q 'Connection refused' "$tmp/iperf3.out" || break
	done
	local ping_rc=0
	wait "$ping_pid" || ping_rc=$?
	echo "--- side traffic: ping (rc $ping_rc)"
	tail -n 2 "$tmp/ping.out"
	echo "--- side traffic: iperf3 -n 20M (rc $tcp_rc)"
	grep -E 'sender|receiver|error' "$tmp/iperf3.out" || tail -n 3 "$tmp/iperf3.out"
	if ((ping_rc != 0)) || ! grep -q ' 10 received' "$tmp/ping.out"; then
		echo "xfer: FAIL side traffic: ping did not get 10 replies"
		side_ok=0
	fi
	if ((tcp_rc != 0)); then
		echo "xfer: FAIL side traffic: TCP transfer failed"
		side_ok=0
	fi
}
if ((side)); then
	side_traffic
fi

server_rc=0 client_rc=0
wait "$client_pid" || client_rc=$?
wait "$server_pid" || server_rc=$?

for side_name in server client; do
	echo "--- $side_name ($([[ $side_name == server ]] && echo "B $ns_b" || echo "A $ns_a")) stdout"
	cat "$tmp/$side_name.out"
	if [[ -s $tmp/$side_name.err ]]; then
		echo "--- $side_name stderr"
		tail -n 50 "$tmp/$side_name.err"
	fi
done
echo "--- impairment counters"
hop_impair_stats

# sum_key KEY: the sum of KEY=N over both sides' stdout.
sum_key() {
	grep -ohE "(^|[[:space:]])$1=[0-9]+" "$tmp/server.out" "$tmp/client.out" |
		awk -F= '{ s += $2 } END { print s + 0 }'
}

fail=0
report() {
	echo "xfer: FAIL $*"
	fail=1
}
# exited NAME RC: says how a harp-xfer side ended, if not with 0.
exited() {
	case $2 in
	0) ;;
	124 | 137) report "$1 killed after ${limit}s (exit $2)" ;;
	2) report "$1 gave up at its --timeout (exit 2)" ;;
	*) report "$1 exited $2" ;;
	esac
}
exited server "$server_rc"
exited client "$client_rc"
grep -qE '(^|[[:space:]])verified_bytes=' "$tmp/server.out" "$tmp/client.out" ||
	report "no verified_bytes= in the output"
((side_ok)) || fail=1
retx=$(sum_key retransmits)
rx_bad=$(sum_key rx_bad)
if ((expect_retx && retx == 0)); then
	report "expected retransmits > 0 on hop '$hop', got 0"
fi
rx_bad_auth=$(sum_key rx_bad_auth)
if ((expect_rx_bad_auth && rx_bad_auth == 0)); then
	report "expected rx_bad_auth > 0 on hop '$hop', got 0"
fi
if ((auth)); then
	for side in server client; do
		grep -q '^auth=AES-256-GCM$\|^auth=ChaCha20-Poly1305$' "$tmp/$side.out" &&
			! grep -q '^auth_conns=0$' "$tmp/$side.out" ||
			report "HARP_AUTH=1, but the $side's connections did not authenticate" \
				"($(grep '^auth' "$tmp/$side.out" | tr '\n' ' '))"
	done
fi
if ((expect_rx_bad && rx_bad == 0)); then
	report "expected rx_bad > 0 on hop '$hop', got 0"
fi
if ((expect_fill)); then
	fill_server=$(sed -n 's/^fill_depth=\([0-9]*\)$/\1/p' "$tmp/server.out")
	if ((${fill_server:-0} <= 256)); then
		report "the server's fill ring stayed ${fill_server:-missing} frames deep (expected > 256)"
	fi
fi
if ((expect_short)); then
	short=$(sed -n 's/^xdp_\(fill_ring_empty\|rx_ring_full\)=\([0-9]*\)$/\2/p' "$tmp/server.out" |
		awk '{ s += $1 } END { print s + 0 }')
	((short > 0)) || report "the server never ran short of frames (xdp_fill_ring_empty and" \
		"xdp_rx_ring_full are 0): the test did not exhaust them"
fi
for key in "${expect_keys[@]}"; do
	for side in server client; do
		n=$(sed -n "s/^$key=\([0-9]*\)$/\1/p" "$tmp/$side.out")
		((${n:-0} > 0)) || report "$side: $key=${n:-missing}, expected > 0"
	done
done
for line in "${expect_lines[@]}"; do
	for side in server client; do
		grep -qF -- "$line" "$tmp/$side.err" || report "$side: no line with '$line' on stderr"
	done
done
for line in "${expect_no_lines[@]}"; do
	for side in server client; do
		! grep -qF -- "$line" "$tmp/$side.err" || report "$side: a line with '$line' on stderr"
	done
done
if [[ -n $expect_pmtu ]]; then
	for side in server client; do
		for key in pmtu_min pmtu_max; do
			grep -qx "$key=$expect_pmtu" "$tmp/$side.out" ||
				report "$side: expected $key=$expect_pmtu, got $(grep -x "$key=.*" "$tmp/$side.out")"
		done
	done
fi
if [[ -n $expect_family ]]; then
	for side in server client; do
		conns=$(xfer_key "$tmp/$side.out" conns)
		ip6=$(xfer_key "$tmp/$side.out" conns_ipv6)
		want=$conns
		[[ $expect_family == ipv6 ]] || want=0
		[[ -n $conns && $ip6 == "$want" ]] ||
			report "$side: expected every connection over $expect_family, got conns=$conns conns_ipv6=$ip6"
	done
fi
if [[ -n $expect_mtu ]]; then
	for side in server client; do
		grep -qx "mtu=$expect_mtu" "$tmp/$side.out" ||
			report "$side: expected mtu=$expect_mtu, got $(grep -x 'mtu=.*' "$tmp/$side.out")"
	done
fi
if ((expect_jumbo)); then
	for side in server client; do
		for want in "mtu=$mtu" multi_buffer=1 rx_bad_chain=0; do
			grep -qx "$want" "$tmp/$side.out" ||
				report "$side: expected $want, got $(grep -x "${want%%=*}=.*" "$tmp/$side.out")"
		done
		# a received piece holds 4096 - 256 bytes, a sent one 4096
		keys=(rx_chains)
		((mtu + 14 <= 4096)) || keys+=(tx_chains)
		for key in "${keys[@]}"; do
			n=$(sed -n "s/^$key=\([0-9]*\)$/\1/p" "$tmp/$side.out")
			((${n:-0} > 0)) || report "$side: $key=${n:-missing}, expected > 0 (no packet" \
				"spanned a descriptor chain)"
		done
	done
fi
if [[ -n $kick_batch ]]; then
	frames=$(xfer_key "$tmp/client.out" tx_frames)
	kicks=$(xfer_key "$tmp/client.out" tx_kicks)
	echo "xfer: the client sent ${frames:-?} frames in ${kicks:-?} TX wake-ups" \
		"($(xfer_key "$tmp/client.out" tx_kick_busy) pushed back," \
		"$(xfer_key "$tmp/client.out" tx_kick_held) held;" \
		"send buffer $(xfer_key "$tmp/client.out" tx_sndbuf) bytes)"
	if [[ -z $frames || -z $kicks ]] || ((kicks * kick_batch > frames)); then
		report "client: ${kicks:-missing} TX wake-ups for ${frames:-missing} frames, expected" \
			"at most one per $kick_batch"
	fi
	if [[ ${topo_napi:-} == threaded ]]; then
		for end in "$ns_a/$if_a" "$ns_b/$if_b"; do
			t=$(ns_exec "${end%/*}" cat "/sys/class/net/${end#*/}/threaded" 2>/dev/null || :)
			[[ $t == 1 ]] || report "$end: threaded NAPI is '${t:-unreadable}' at the end, not 1"
		done
	fi
fi
# Each queue's engine must have carried traffic both ways, on both sides.
for ((q = 0; q < expect_queues; q++)); do
	for side_name in server client; do
		for dir in rx tx; do
			n=$(sed -n "s/^queue${q}_${dir}_packets=\([0-9]*\)$/\1/p" "$tmp/$side_name.out")
			if ((${n:-0} == 0)); then
				report "$side_name queue $q: ${dir}_packets=${n:-missing}, expected > 0"
			fi
		done
	done
done
# Both ends ended on their own, so neither left its interface lock file behind (they once piled
# up, one per interface and namespace; see lock_file above).
if ((server_rc == 0 && client_rc == 0)); then
	for f in "${lock_files[@]}"; do
		[[ ! -e $f ]] || report "lock file left behind: $f"
	done
fi
echo "xfer: server_rc=$server_rc client_rc=$client_rc retransmits_sum=$retx rx_bad_sum=$rx_bad" \
	"result=$( ((fail)) && echo FAIL || echo PASS)"
exit "$fail"
