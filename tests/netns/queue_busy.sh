#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# A queue another AF_XDP socket holds: harp waits up to a second for it, then fails naming why.
#
#   queue_busy.sh
#
# The kernel frees an AF_XDP socket some time after its process exits, so a harp process started
# right after another one ends can find its queue still taken. xsk-hold (xsk_hold.c) plays that
# socket on B's queue 0:
#   released  held 600 ms, harp's server started while it is held: the server must bind once it
#             is free and the client's transfer must arrive verified;
#   held      held 6 s: the server must exit 1 within 5 s, its error naming the busy queue.
# The binaries are $HARP_XFER and $XSK_HOLD (defaults under ${BUILD_DIR:-build}). Exits 0 if both
# cases hold, 1 if one does not, 77 if it cannot run here.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/lib.sh"

xfer=${HARP_XFER:-${BUILD_DIR:-build}/harp-xfer}
hold=${XSK_HOLD:-${BUILD_DIR:-build}/tests/netns/xsk-hold}
for bin in "$xfer" "$hold"; do
	if [[ ! -x $bin ]]; then
		echo "queue_busy: '$bin' not found (set HARP_XFER and XSK_HOLD, or BUILD_DIR)" >&2
		exit 1
	fi
done
xfer=$(realpath "$xfer")
hold=$(realpath "$hold")
# harp refuses HARP_* variables it does not know, and this one is ours.
unset HARP_XFER

harness_init queue_busy
topo_pair 1500 1 || exit

fail=0
report() {
	echo "queue_busy: FAIL $*"
	fail=1
}

# start_hold NAME MS: xsk-hold on B's queue 0 for MS ms in the background; returns once it says
# "held" (within 5 s) and leaves its timeout wrapper's PID in hold_pid.
start_hold() {
	local name=$1 ms=$2 i
	spawn_bounded 30 ip netns exec "$ns_b" "$hold" "$if_b" 0 "$ms" \
		>"$tmp/$name.hold.out" 2>"$tmp/$name.hold.err"
	hold_pid=$spawned_pid
	pids+=("$hold_pid")
	for ((i = 0; i < 100; i++)); do
		if grep -q '^held$' "$tmp/$name.hold.out"; then
			return 0
		fi
		if ! kill -0 "$hold_pid" 2>/dev/null; then
			break
		fi
		sleep 0.05
	done
	report "$name: xsk-hold did not bind: $(cat "$tmp/$name.hold.err")"
	return 1
}

# Case released: the server starts while the queue is held and must get it when it comes free.
if start_hold released 600; then
	spawn_bounded 60 ip netns exec "$ns_b" "$xfer" server --ifname "$if_b" \
		--handle-file "$tmp/released.handle" --sizes 4K,1M --count 4 --timeout 30 \
		>"$tmp/released.server.out" 2>"$tmp/released.server.err"
	server_pid=$spawned_pid
	pids+=("$server_pid")
	spawn_bounded 60 ip netns exec "$ns_a" "$xfer" client --ifname "$if_a" \
		--handle-file "$tmp/released.handle" --sizes 4K,1M --count 4 --timeout 30 \
		>"$tmp/released.client.out" 2>"$tmp/released.client.err"
	client_pid=$spawned_pid
	pids+=("$client_pid")
	server_rc=0 client_rc=0 hold_rc=0
	wait "$client_pid" || client_rc=$?
	wait "$server_pid" || server_rc=$?
	wait "$hold_pid" || hold_rc=$?
	verified=$(sed -n 's/^verified_bytes=//p' "$tmp/released.server.out")
	echo "queue_busy: case=released hold_rc=$hold_rc server_rc=$server_rc" \
		"client_rc=$client_rc verified_bytes=${verified:-missing}"
	((hold_rc == 0)) || report "released: xsk-hold exited $hold_rc"
	((server_rc == 0)) || report "released: server exited $server_rc"
	((client_rc == 0)) || report "released: client exited $client_rc"
	# 4 x 4 KiB + 4 x 1 MiB
	[[ ${verified:-} == 4210688 ]] || report "released: verified_bytes=${verified:-missing}, expected 4210688"
	if ((server_rc || client_rc)); then
		sed 's/^/    server | /' "$tmp/released.server.err" | tail -n 10
		sed 's/^/    client | /' "$tmp/released.client.err" | tail -n 10
	fi
fi

# Case held: the queue stays taken; the server gives up after about a second with the reason.
if start_hold held 6000; then
	start=$(date +%s%N)
	server_rc=0
	run_bounded 20 ip netns exec "$ns_b" "$xfer" server --ifname "$if_b" \
		--handle-file "$tmp/held.handle" --sizes 4K --count 1 --timeout 10 \
		>"$tmp/held.server.out" 2>"$tmp/held.server.err" || server_rc=$?
	ms=$((($(date +%s%N) - start) / 1000000))
	echo "queue_busy: case=held server_rc=$server_rc after ${ms} ms:"
	grep -m 2 -E 'harp: ERROR|harp-xfer:' "$tmp/held.server.err" | sed 's/^/    | /' || true
	((server_rc == 1)) || report "held: server exited $server_rc, expected 1"
	((ms < 5000)) || report "held: server took $ms ms to give up"
	grep -q 'holds this queue' "$tmp/held.server.err" ||
		report "held: the server's error does not say the queue is held"
	kill "$hold_pid" 2>/dev/null || true
	wait "$hold_pid" 2>/dev/null || true
fi

if ((fail)); then
	exit 1
fi
echo "queue_busy: ok"
