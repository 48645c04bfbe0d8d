#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# A harp listener under stray and hostile connections to its control port, while a legitimate
# peer connects (harp-xfer on a veth pair; the attacker is a python3 process on the client's
# side). Each round opens the attack's connections first and holds them while the legitimate
# client connects; the client must move verified data within HARP_CONNECT_TIMEOUT_MS and the
# server must drop every stray set-up and go on:
#   garbage      96 random bytes (a hello's length)
#   nonce        a well-formed hello with a wrong nonce (a handle of another listener)
#   partial      10 bytes of a hello, then nothing
#   slowloris    300 connections that never send
#   oversized    a hello's 96 bytes of junk followed by 1 MiB more
#   reset        connections reset (RST) as soon as they are made
#   many         1,000 connections at once, each sending garbage
#   refuse       20 refusals (HELLO_REFUSE, errno EAGAIN) sent to the listener: dropped at once,
#                with no error-level line (each accept call logged one for 10 s before)
#   connsmax     20 silent connections against HARP_CONNS_MAX=4: set-ups that have not said
#                hello count for nothing (accept failed: "this process has 4 harp connections")
#
#   listener.sh [--family 4|6]     (4 by default)
#
# With --family 6 the link has IPv6 addresses only (lib.sh topo_family 6): the listener's handle
# names an IPv6 address, every attack connects over IPv6 (its hellos name family 6 and their own
# IPv6 address), and each round's transfer must run over IPv6.
#
# $HARP_XFER is harp-xfer. Exits 0 if every round held, 1 if one did not.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/../netns/lib.sh"

if [[ ${1:-} == --family ]]; then
	topo_family=${2:-}
fi
if [[ $topo_family != 4 && $topo_family != 6 ]]; then
	echo "usage: listener.sh [--family 4|6]" >&2
	exit 2
fi
want_family=$([[ $topo_family == 6 ]] && echo ipv6 || echo ipv4)
use_xfer listener
command -v python3 >/dev/null || { echo "listener: missing python3" >&2; exit 1; }

harness_init listener
fail=0
report() {
	echo "listener: FAIL $*"
	fail=1
}

topo_pair 1500 1 || exit 1
in_a=(ip netns exec "$ns_a" env HARP_IFNAME="$if_a" HARP_QUEUES=1)
in_b=(ip netns exec "$ns_b" env HARP_IFNAME="$if_b" HARP_QUEUES=1)

for kind in garbage nonce partial slowloris oversized reset many refuse connsmax; do
	d=$tmp/$kind
	mkdir -p "$d"
	extra=()
	[[ $kind == connsmax ]] && extra=(HARP_CONNS_MAX=4)
	spawn_bounded 120 "${in_b[@]}" "${extra[@]}" HARP_LOG_LEVEL=info "$xfer" server \
		--ifname "$if_b" \
		--handle-file "$d/handle" --sizes 0,4095,1M --timeout 60 >"$d/server.out" 2>"$d/server.err"
	srv=$spawned_pid
	pids+=("$srv")
	wait_until 100 test -s "$d/handle" || true
	[[ -s $d/handle ]] || { report "$kind: the server wrote no handle"; continue; }
	spawn_bounded 90 ip netns exec "$ns_a" python3 "$here/control_attack.py" "$kind" "$d/handle" \
		"$d/ready" "$d/stop"
	att=$spawned_pid
	pids+=("$att")
	wait_until 200 test -e "$d/ready" || true
	[[ -e $d/ready ]] || report "$kind: the attack did not get going"
	t0=$(date +%s%N)
	rc_c=0
	run_bounded 60 "${in_a[@]}" "$xfer" client --ifname "$if_a" --handle-file "$d/handle" \
		--sizes 0,4095,1M --timeout 40 >"$d/client.out" 2>"$d/client.err" || rc_c=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	touch "$d/stop"
	rc_s=0
	wait "$srv" || rc_s=$?
	wait "$att" 2>/dev/null || true
	dropped=$(grep -c 'listen: dropped a connection set-up' "$d/server.err" || true)
	echo "listener: case=$kind held=$(cat "$d/ready" 2>/dev/null || echo 0) server_rc=$rc_s" \
		"client_rc=$rc_c client_ms=$ms drop_lines=$dropped" \
		"$(grep -h '^verified_bytes=\|^family=' "$d/server.out" | tr '\n' ' ' || true)"
	grep -m1 'listen: dropped' "$d/server.err" | sed 's/^/    /' || true
	if ((rc_s || rc_c)) || ! grep -q '^result=ok' "$d/server.out" ||
		! grep -q '^result=ok' "$d/client.out"; then
		report "$kind: the legitimate transfer failed (server rc $rc_s, client rc $rc_c)"
		grep -v INFO "$d/server.err" | tail -n 5 | sed 's/^/    server | /'
		grep -v INFO "$d/client.err" | tail -n 5 | sed 's/^/    client | /'
	elif ! grep -qx "family=$want_family" "$d/server.out" ||
		! grep -qx "family=$want_family" "$d/client.out"; then
		report "$kind: the transfer did not run over $want_family"
	fi
	# a set-up that failed was dropped and said so (partial and slowloris ones are still
	# waiting for their hello when the transfer ends; reset ones may be gone before the
	# listener takes them)
	case $kind in
	garbage | nonce | oversized | many | refuse)
		((dropped > 0)) || report "$kind: the server never said it dropped a set-up"
		;;
	esac
	# what strangers do never reaches the error level (the line is in every case's log)
	errors=$(grep -c 'harp: ERROR' "$d/server.err" || true)
	((errors == 0)) || {
		report "$kind: $errors error-level lines on the server"
		grep -m3 'harp: ERROR' "$d/server.err" | sed 's/^/    /'
	}
done

if ((fail)); then
	exit 1
fi
echo "listener: every round held"
