#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The server of a long transfer dies or freezes; the client must notice and fail its requests.
#
#   peer_death.sh
#
#   kill  the server gets SIGKILL: its kernel closes the TCP control connection, and the client
#         must fail within 3 s of the server's death with "Connection reset by peer"
#   stop  the server gets SIGSTOP, so its kernel keeps the TCP connection up but no data packet
#         is acknowledged: with HARP_PEER_TIMEOUT_MS=1000 the client must fail after about 1 s
#         (0.8 to 4 s) with "Connection timed out"
#
# The binary is $HARP_XFER (default ${BUILD_DIR:-build}/harp-xfer). Prints the detection times;
# exits 0 if both cases hold, 1 if one does not, 77 if it cannot run here. A case is timed from
# the server's death (SIGKILL) or its freeze (SIGSTOP) to the client's first line that names the
# failure: what harp detects, not how long the client then takes to exit (an ASan build's leak
# check at exit took seconds on a loaded machine); the client must then exit within 15 s.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/lib.sh"

xfer=${HARP_XFER:-${BUILD_DIR:-build}/harp-xfer}
if [[ ! -x $xfer ]]; then
	echo "peer_death: harp-xfer not found at '$xfer' (set HARP_XFER or BUILD_DIR)" >&2
	exit 1
fi
xfer=$(realpath "$xfer")
# harp refuses HARP_* variables it does not know, and this one is ours.
unset HARP_XFER

stops=() # harp-xfer servers we may have stopped

# shellcheck disable=SC2317 # called from the EXIT trap
harness_cleanup_extra() {
	local pid
	for pid in "${stops[@]}"; do
		kill -CONT "$pid" 2>/dev/null || true
	done
}
harness_init peer-death

fail=0
report() {
	echo "peer_death: FAIL $*"
	fail=1
}

# child_of PID: the PID of PID's only child, once it runs harp-xfer (ip netns exec execs it);
# empty after ~5 s without one.
child_of() {
	local parent=$1 child i
	for ((i = 0; i < 100; i++)); do
		child=$(ps -o pid= --ppid "$parent" | tr -d ' ' || true)
		if [[ -n $child && $(ps -o comm= -p "$child" || true) == harp-xfer ]]; then
			echo "$child"
			return 0
		fi
		sleep 0.05
	done
}

# is_alive PID: PID runs (or is stopped), neither gone nor a zombie
is_alive() {
	local state
	state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n $state && $state != Z && $state != X ]]
}

# run_case NAME SIGNAL CLIENT_ENV MIN_MS MAX_MS EXPECT [ERROR]: a transfer of 8 GiB; about 1 s
# in, the server gets SIGNAL; the client must exit non-zero between MIN_MS and MAX_MS later with a
# request failed with EXPECT, and with ERROR (a regex) in a "harp: ERROR:" line if given.
run_case() {
	local name=$1 sig=$2 client_env=$3 min_ms=$4 max_ms=$5 expect=$6 error=${7:-}
	local handle="$tmp/$name.handle" server_pid client_pid server_xfer i t0 t1 ms rc=0
	local t_dead="" dead_ms=0 t_seen="" exit_ms
	local args=(--total 8G --timeout 60)

	# A fresh pair per case, so the cases do not depend on each other.
	topo_pair 1500 1 || exit
	spawn_bounded 90 ip netns exec "$ns_b" "$xfer" server --ifname "$if_b" \
		--handle-file "$handle" "${args[@]}" >"$tmp/$name.server.out" 2>"$tmp/$name.server.err"
	server_pid=$spawned_pid
	pids+=("$server_pid")
	# shellcheck disable=SC2086 # client_env is empty or one NAME=VALUE
	spawn_bounded 90 ip netns exec "$ns_a" env $client_env "$xfer" client --ifname "$if_a" \
		--handle-file "$handle" "${args[@]}" >"$tmp/$name.client.out" 2>"$tmp/$name.client.err"
	client_pid=$spawned_pid
	pids+=("$client_pid")
	server_xfer=$(child_of "$server_pid")
	if [[ -z $server_xfer ]]; then
		report "$name: cannot find the server's harp-xfer process"
		sed 's/^/    | /' "$tmp/$name.server.err"
		exit 1
	fi
	stops+=("$server_xfer")
	for ((i = 0; i < 100; i++)); do
		[[ -s $handle ]] && break
		sleep 0.05
	done
	sleep 1
	if ! kill -0 "$client_pid" 2>/dev/null; then
		report "$name: the client ended before the server was signalled"
		sed 's/^/    | /' "$tmp/$name.client.err"
		exit 1
	fi
	t0=${EPOCHREALTIME/./}
	kill "-$sig" "$server_xfer"
	# Up to 15 s for the client to end. A killed server counts from its death: its sockets
	# close as it exits, after its memory is gone (a zombie, or reaped).
	[[ $sig == KILL ]] || t_dead=$t0
	for ((i = 0; i < 1500; i++)); do
		if [[ -z $t_dead ]] && ! is_alive "$server_xfer"; then
			t_dead=${EPOCHREALTIME/./}
		fi
		if [[ -z $t_seen ]] && grep -q -- "$expect" "$tmp/$name.client.err"; then
			t_seen=${EPOCHREALTIME/./}
		fi
		kill -0 "$client_pid" 2>/dev/null || break
		sleep 0.01
	done
	t1=${EPOCHREALTIME/./}
	if [[ -z $t_seen ]] && grep -q -- "$expect" "$tmp/$name.client.err"; then
		t_seen=$t1 # said as it ended, between two looks
	fi
	[[ -n $t_dead ]] || t_dead=$t1 # still not dead: the bound below cannot hold either
	[[ -n $t_seen ]] || t_seen=$t1 # never said: reported below
	dead_ms=$(((t_dead - t0) / 1000))
	ms=$(((t_seen - t_dead) / 1000))
	exit_ms=$(((t1 - t_dead) / 1000))
	kill "$client_pid" 2>/dev/null || true # still running: a failure, reported below
	wait "$client_pid" || rc=$?
	kill -CONT "$server_xfer" 2>/dev/null || true
	kill -KILL "$server_xfer" 2>/dev/null || true
	wait "$server_pid" 2>/dev/null || true
	stops=()

	echo "peer_death: case=$name signal=$sig dead_ms=$dead_ms client_rc=$rc detect_ms=$ms" \
		"exit_ms=$exit_ms" \
		"client_$(grep '^sent_bytes=' "$tmp/$name.client.out" || echo sent_bytes=?)"
	sed 's/^/    | /' "$tmp/$name.client.err"
	if ((rc == 0)); then
		report "$name: the client exited 0"
	elif ((rc == 124 || rc == 137 || rc == 143)); then
		report "$name: the client was still running $ms ms after SIG$sig"
	elif ((rc >= 128)); then
		report "$name: the client died of signal $((rc - 128))"
	fi
	if ((ms < min_ms || ms > max_ms)); then
		report "$name: the client said so $ms ms after SIG$sig$([[ $sig != KILL ]] ||
			echo " took effect ($dead_ms ms after it was sent)"), expected $min_ms..$max_ms ms"
	fi
	# a request out fails with it, or, when the failure lands between harp-xfer's passes, the
	# next one posted is refused with it (seen under ASan: 'isend conn 0 msg 428: ...')
	if ! grep -qE "(msg [0-9]+ failed|i(send|recv) conn [0-9]+ msg [0-9]+): $expect" \
		"$tmp/$name.client.err"; then
		report "$name: no request failed with '$expect'"
	fi
	if [[ -n $error ]] && ! grep -qE "^harp: ERROR: .*$error" "$tmp/$name.client.err"; then
		report "$name: no 'harp: ERROR:' line matching '$error'"
	fi
	if ! grep -qE '^sent_bytes=[1-9]' "$tmp/$name.client.out"; then
		report "$name: the client had sent nothing before SIG$sig"
	fi
	# A killed harp cannot detach its XDP program; the next harp on that interface must take
	# the interface over and move verified data.
	local again_pid again_rc=0
	spawn_bounded 60 ip netns exec "$ns_b" "$xfer" server --ifname "$if_b" \
		--handle-file "$tmp/$name.again" --sizes 1M --timeout 20 \
		>"$tmp/$name.again.server.out" 2>"$tmp/$name.again.server.err"
	again_pid=$spawned_pid
	pids+=("$again_pid")
	run_bounded 60 ip netns exec "$ns_a" "$xfer" client --ifname "$if_a" \
		--handle-file "$tmp/$name.again" --sizes 1M --timeout 20 \
		>"$tmp/$name.again.client.out" 2>"$tmp/$name.again.client.err" || again_rc=$?
	wait "$again_pid" || again_rc=$?
	if ((again_rc)) || ! grep -q '^verified_bytes=1048576$' "$tmp/$name.again.server.out"; then
		report "$name: harp could not run again on the interfaces after the server's death"
		sed 's/^/    | /' "$tmp/$name.again.server.err" "$tmp/$name.again.client.err"
	else
		echo "peer_death: case=$name: a new harp took over $if_b and moved 1 MiB verified"
	fi
	topo_cleanup
}

run_case kill KILL "" 0 3000 "Connection reset by peer"
# topo_pair's addresses: the server (B) is 198.18.N.2 (2001:2:N::2 over IPv6) in every case.
server_ip="198\.18\.[0-9]+\.2"
[[ $topo_family != 6 ]] || server_ip="2001:2:[0-9]+::2"
run_case stop STOP HARP_PEER_TIMEOUT_MS=1000 800 4000 "Connection timed out" \
	"peer $server_ip .*declaring it dead"

echo "peer_death: result=$( ((fail)) && echo FAIL || echo PASS)"
exit "$fail"
