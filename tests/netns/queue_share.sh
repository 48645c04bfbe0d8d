#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Several harp processes on one interface, each on its own queues, as the ranks of a multi-GPU
# node share its NIC: the interfaces are prepared once by harp-attach (one pinned program and its
# maps, shared by every process), and each process names its queues in HARP_QUEUES.
#
#   queue_share.sh
#
# A - M - B with 4 queues a side that M's flow hash picks (so probing must find each
# connection's queue). Cases:
#   two    2 servers on B (queues 0-1 and 2-3) and 2 clients on A (likewise), pair k moving
#          verified data both ways at once
#   four   4 servers and 4 clients, one queue each
#   ranks  HARP_QUEUES=auto (the default) with LOCAL_RANK 0 and 1 of LOCAL_WORLD_SIZE=2, as
#          torchrun sets them: 2 servers and 2 clients that must pick queues 0-1 and 2-3
#   taken  while a server holds B's queue 1, a fifth asking for it exits 1 within 5 s, its error
#          naming the queue and the holder (its pid and name, from the pinned queue_owners map)
#   kill   that holder SIGKILLed: a new server gets queue 1 at once and moves verified data
#   alone  auto without a launcher's variables: a server takes all 4 queues and moves verified
#          data; while it runs, a second auto server is refused (exit 1), naming a holder
# Every transfer must verify every byte on both ends. The binary is $HARP_XFER (default
# ${BUILD_DIR:-build}/harp-xfer). Exits 0 when every case holds, 1 if one does not, 77 if it
# cannot run here.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/lib.sh"

xfer=${HARP_XFER:-${BUILD_DIR:-build}/harp-xfer}
attach=$(realpath "$here/../../scripts/harp-attach")
if [[ ! -x $xfer ]]; then
	echo "queue_share: harp-xfer not found at '$xfer' (set HARP_XFER or BUILD_DIR)" >&2
	exit 1
fi
xfer=$(realpath "$xfer")
unset HARP_XFER # ours, not harp's: harp refuses HARP_* names it does not know
for t in xdp-loader bpftool ethtool; do
	command -v "$t" >/dev/null || {
		echo "queue_share: missing $t (scripts/setup.sh installs it)" >&2
		exit 1
	}
done

harness_init queue-share
# harp-attach and harp-xfer enter the namespaces with nsenter, not ip netns exec: that one mounts
# a fresh /sys, hiding the bpffs at /sys/fs/bpf where the maps are pinned.
in_ns() {
	local ns=$1
	shift
	nsenter --net="/run/netns/$ns" "$@"
}
pins=/sys/fs/bpf/harp-qs-$$
conf=$tmp/harp.conf
# shellcheck disable=SC2317 # called from the EXIT trap
harness_cleanup_extra() {
	local ns_if
	for ns_if in "${ns_a:-}:${if_a:-}" "${ns_b:-}:${if_b:-}"; do
		[[ -e /run/netns/${ns_if%%:*} ]] &&
			in_ns "${ns_if%%:*}" "$attach" down "${ns_if#*:}" --conf "$conf" \
				--pin-root "$pins" >/dev/null 2>&1
	done
	rm -rf "$pins"
}
fail=0
report() {
	echo "queue_share: FAIL $*"
	fail=1
}

topo_hop 1500 4 || exit
for side in "$ns_a:$if_a" "$ns_b:$if_b"; do
	if ! in_ns "${side%%:*}" "$attach" up "${side#*:}" --conf "$conf" --pin-root "$pins" \
		--hugepages off >"$tmp/attach.log" 2>&1; then
		cat "$tmp/attach.log"
		exit 1
	fi
done

# start_side NAME ROLE QUEUES: a harp-xfer of ROLE (server in B, client in A) on HARP_QUEUES,
# output in $tmp/NAME.{out,err}; its wrapper's pid in spawned_pid. QUEUES "auto:R/N" runs with
# HARP_QUEUES unset (auto) as local rank R of N ranks (LOCAL_RANK, LOCAL_WORLD_SIZE); "auto"
# with neither.
xfer_args=(--bidir --conns 2 --sizes "0,4095,1M" --count 4 --timeout 60)
start_side() {
	local name=$1 role=$2 queues=$3 ns ifn handle
	local -a env_words=(HARP_QUEUES="$queues")
	handle="$tmp/${name%.*}.handle"
	if [[ $role == server ]]; then
		ns=$ns_b ifn=$if_b
		rm -f "$handle"
	else
		ns=$ns_a ifn=$if_a
	fi
	if [[ $queues == auto:* ]]; then
		queues=${queues#auto:}
		env_words=(LOCAL_RANK="${queues%/*}" LOCAL_WORLD_SIZE="${queues#*/}")
	elif [[ $queues == auto ]]; then
		env_words=()
	fi
	spawn_bounded 90 nsenter --net="/run/netns/$ns" env -u HARP_QUEUES -u LOCAL_RANK \
		-u LOCAL_WORLD_SIZE HARP_CONF="$conf" "${env_words[@]}" HARP_LOG_LEVEL=info \
		"$xfer" "$role" --ifname "$ifn" --handle-file "$handle" \
		"${xfer_args[@]}" >"$tmp/$name.out" 2>"$tmp/$name.err"
	pids+=("$spawned_pid")
}

# ran_on NAME QUEUES: harp's start-up line in NAME's stderr says it ran exactly QUEUES.
ran_on() {
	local line re="IPv[46] [^,]*, [0-9]* queue(s) ([^,]*," # "<if>: IPv4 <addr>, <n> queue(s) (<q>,"
	line=$(grep -m1 -o "$if_a: $re\|$if_b: $re" "$tmp/$1.err" || true)
	echo "queue_share: $1: ${line:-no start-up line}"
	[[ $line == *"($2," ]] || report "$1: expected harp to run queues $2"
}

# wait_handle NAME: until server NAME has written its handle (10 s at most).
wait_handle() {
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -s $tmp/$1.handle ]] && return 0
		sleep 0.1
	done
	return 1
}

# check_pair NAME SERVER_RC CLIENT_RC: both ends exited 0 and verified what the other sent.
check_pair() {
	local name=$1 v_s v_c
	v_s=$(xfer_key "$tmp/$name.server.out" verified_bytes)
	v_c=$(xfer_key "$tmp/$name.client.out" verified_bytes)
	echo "queue_share: $name: server rc $2 verified ${v_s:-?} bytes, client rc $3 verified" \
		"${v_c:-?} bytes"
	if (($2 != 0 || $3 != 0)) || ((${v_s:-0} != want_bytes || ${v_c:-0} != want_bytes)); then
		report "$name: expected both ends to exit 0 having verified $want_bytes bytes"
		tail -n 5 "$tmp/$name.server.err" "$tmp/$name.client.err" | sed 's/^/    | /'
	fi
}
# per end: 2 connections x 4 messages of each size
want_bytes=$((2 * 4 * (4095 + 1048576)))

# run_group CASE QUEUES...: one server and one client per HARP_QUEUES value, all at once.
run_group() {
	local case_name=$1 k=0 q
	local -a servers=() clients=() names=()
	shift
	for q in "$@"; do
		names+=("$case_name$k")
		start_side "$case_name$k.server" server "$q"
		servers+=("$spawned_pid")
		k=$((k + 1))
	done
	for ((k = 0; k < ${#names[@]}; k++)); do
		wait_handle "${names[k]}" || report "${names[k]}: the server wrote no handle"
		start_side "${names[k]}.client" client "${@:k+1:1}"
		clients+=("$spawned_pid")
	done
	for ((k = 0; k < ${#names[@]}; k++)); do
		local rc_s=0 rc_c=0
		wait "${clients[k]}" || rc_c=$?
		wait "${servers[k]}" || rc_s=$?
		check_pair "${names[k]}" "$rc_s" "$rc_c"
	done
}

run_group two 0-1 2-3
run_group four 0-0 1-1 2-2 3-3
run_group ranks auto:0/2 auto:1/2
for side in server client; do
	ran_on "ranks0.$side" 0-1
	ran_on "ranks1.$side" 2-3
done

# taken: a server holds queue 1 (it waits for its client), a fifth asks for queue 1 too.
start_side held.server server 1-1
held_wrapper=$spawned_pid
wait_handle held || report "held: the server wrote no handle"
# timeout's child: nsenter and env exec harp-xfer in the same process
holder=$(pgrep -P "$held_wrapper" | head -n 1 || true)
if [[ -z $holder || $(cat "/proc/$holder/comm" 2>/dev/null) != harp-xfer ]]; then
	holder=""
fi
t0=${EPOCHREALTIME/./}
start_side fifth.server server 1-1
rc=0
wait "$spawned_pid" || rc=$?
ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
echo "queue_share: taken: the fifth server exited $rc after $ms ms:" \
	"$(grep -m1 'is taken by' "$tmp/fifth.server.err" || echo '(no such line)')"
if ((rc != 1 || ms > 5000)); then
	report "taken: expected exit 1 within 5 s, got $rc after $ms ms"
fi
if ! grep -qE "queue 1 of $if_b is taken by harp process ${holder:-[0-9]+} \(harp-xfer\)" \
	"$tmp/fifth.server.err"; then
	report "taken: the error does not name queue 1 and its holder (pid ${holder:-?}, harp-xfer)"
	tail -n 5 "$tmp/fifth.server.err" | sed 's/^/    | /'
fi

# kill: the holder dies by SIGKILL; queue 1 is free for the next at once.
if [[ -n $holder ]]; then
	kill -KILL "$holder"
else
	report "kill: the holder's pid was not found"
	kill "$held_wrapper" 2>/dev/null || true
fi
wait "$held_wrapper" 2>/dev/null || true
run_group kill 1-1

# alone: auto with no launcher takes every free queue; a second such server finds none.
start_side alone0.server server auto
alone_wrapper=$spawned_pid
wait_handle alone0 || report "alone: the server wrote no handle"
start_side second.server server auto
rc=0
wait "$spawned_pid" || rc=$?
echo "queue_share: alone: a second auto server exited $rc:" \
	"$(grep -m1 'HARP_QUEUES=auto' "$tmp/second.server.err" || echo '(no such line)')"
if ((rc != 1)) || ! grep -q "all 4 rx queues of $if_b are held by other processes" \
	"$tmp/second.server.err" || ! grep -q "is taken by harp process" "$tmp/second.server.err"; then
	report "alone: expected the second auto server to exit 1 saying every queue is held, by whom"
	tail -n 5 "$tmp/second.server.err" | sed 's/^/    | /'
fi
start_side alone0.client client auto
rc_c=0 rc_s=0
wait "$spawned_pid" || rc_c=$?
wait "$alone_wrapper" || rc_s=$?
check_pair alone0 "$rc_s" "$rc_c"
ran_on alone0.server 0-3
ran_on alone0.client 0-3
echo "queue_share: result=$( ((fail)) && echo FAIL || echo PASS)"
exit "$fail"
