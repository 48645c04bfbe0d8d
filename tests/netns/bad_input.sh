#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# harp-xfer given something wrong: each case must fail fast, without crashing, with one
# "harp: ERROR:" line that names what was wrong and where. A few cases run again under valgrind,
# which must find no invalid access and no definite leak.
#
#   bad_input.sh
#
# The binary is $HARP_XFER (default ${BUILD_DIR:-build}/harp-xfer). Exits 0 if every case holds,
# 1 if one does not, 77 if it cannot run here (not root, a tool missing).
#
# Valgrind and BPF: memcheck does not know what the kernel writes back through every bpf()
# command (BTF and program info, per-CPU map values), so once harp loads its XDP program memcheck
# reports uninitialised values inside libbpf and libxdp, and in whatever reads those values. The
# cases that fail before harp touches BPF run under the full check; the ones that load the
# program run with --undef-value-errors=no, which still catches invalid reads and writes, invalid
# frees and definite leaks.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/lib.sh"

xfer=${HARP_XFER:-${BUILD_DIR:-build}/harp-xfer}
if [[ ! -x $xfer ]]; then
	echo "bad_input: harp-xfer not found at '$xfer' (set HARP_XFER or BUILD_DIR)" >&2
	exit 1
fi
xfer=$(realpath "$xfer")
# harp refuses HARP_* variables it does not know, and this one is ours.
unset HARP_XFER

for tool in capsh valgrind xxd; do
	if ! command -v "$tool" >/dev/null; then
		echo "bad_input: missing tool: $tool" >&2
		exit 77
	fi
done

valgrind_full=(valgrind -q --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99)
valgrind_nobpf=("${valgrind_full[@]}" --undef-value-errors=no)

harness_init bad-input

topo_pair 1500 2 || exit

fail=0
report() {
	echo "bad_input: FAIL $*"
	fail=1
}

# expect_error NAME MAX_SEC PATTERNS -- CMD...: CMD must exit non-zero, not by a signal, within
# MAX_SEC seconds, with exactly one "harp: ERROR:" line on stderr that holds every pattern of
# PATTERNS (a |-separated list of fixed strings). Under valgrind (CMD starts with it) exit 99 means
# valgrind found an error.
expect_error() {
	local name=$1 max_s=$2 patterns=$3
	shift 4
	local t0 t1 ms rc=0 lines line pat pats arg under_valgrind=0
	for arg in "$@"; do
		[[ $arg == valgrind ]] && under_valgrind=1
	done
	t0=${EPOCHREALTIME/./}
	run_bounded $((max_s + 5)) "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
	t1=${EPOCHREALTIME/./}
	ms=$(((t1 - t0) / 1000))
	lines=$(grep -c '^harp: ERROR:' "$tmp/$name.err" || true)
	line=$(grep -m 1 '^harp: ERROR:' "$tmp/$name.err" || true)
	echo "bad_input: case=$name rc=$rc ms=$ms error_lines=$lines"
	echo "    $line"
	if ((rc == 0)); then
		report "$name: exited 0"
	elif ((rc == 99 && under_valgrind)); then
		report "$name: valgrind found errors"
	elif ((rc == 124 || rc == 137)); then
		report "$name: still running after $((max_s + 5)) s"
	elif ((rc >= 128)); then
		report "$name: killed by signal $((rc - 128))"
	fi
	if ((ms > max_s * 1000)); then
		report "$name: took $ms ms, more than $max_s s"
	fi
	if ((lines != 1)); then
		report "$name: $lines 'harp: ERROR:' lines, expected 1"
	fi
	IFS='|' read -r -a pats <<<"$patterns"
	for pat in "${pats[@]}"; do
		if ! grep -qF -- "$pat" <<<"$line"; then
			report "$name: the error does not say '$pat'"
		fi
	done
	if ((rc != 0 && lines != 1)) || grep -q '^==[0-9]*==' "$tmp/$name.err"; then
		sed 's/^/    | /' "$tmp/$name.err" | grep -v '^    | [a-z_0-9]*=' | head -n 40
	fi
}

# no_xdp_left NS IF: a failed start must not leave its XDP program attached.
no_xdp_left() {
	if ns_exec "$1" ip -d link show dev "$2" | grep -q 'prog/xdp'; then
		report "an XDP program is still attached to $2 after the failed starts"
		ns_exec "$1" ip -d link show dev "$2" | sed 's/^/    | /'
	fi
}

in_a=(ip netns exec "$ns_a")
handle="$tmp/handle"

expect_error missing_interface 5 "nosuch0|No such device" -- \
	"${in_a[@]}" "$xfer" server --ifname nosuch0 --handle-file "$handle"
expect_error invalid_setting 5 "HARP_QUEUES|abc|1..64" -- \
	"${in_a[@]}" env HARP_QUEUES=abc "$xfer" server --ifname "$if_a" --handle-file "$handle"
expect_error unknown_setting 5 "HARP_QEUES" -- \
	"${in_a[@]}" env HARP_QEUES=2 "$xfer" server --ifname "$if_a" --handle-file "$handle"
expect_error too_many_queues 5 "$if_a|HARP_QUEUES=4|2 rx queues" -- \
	"${in_a[@]}" "$xfer" server --ifname "$if_a" --handle-file "$handle" --queues 4
expect_error no_native_xdp 5 "lo|native|HARP_XDP_MODE=skb|harp-attach up lo|no socket at|mount the host's /run/harp" -- \
	"${in_a[@]}" "$xfer" server --ifname lo --handle-file "$handle"
# bash -c 'exec "$@"' runs harp-xfer itself in the shell capsh starts without CAP_NET_RAW.
# shellcheck disable=SC2016 # expanded by that shell
expect_error no_cap_net_raw 5 "$if_a|CAP_NET_RAW" -- \
	"${in_a[@]}" capsh --drop=cap_net_raw -- -c 'exec "$@"' harp "$xfer" server \
	--ifname "$if_a" --handle-file "$handle" --timeout 5
# RLIMIT_MEMLOCK too small for the UMEM and no CAP_IPC_LOCK (which lifts it): the registration
# fails, naming the limit and the capability that would lift it.
# shellcheck disable=SC2016 # expanded by that shell
expect_error small_memlock 5 "$if_a|RLIMIT_MEMLOCK|CAP_IPC_LOCK" -- \
	"${in_a[@]}" capsh --drop=cap_ipc_lock -- -c 'ulimit -l 64 && exec "$@"' harp "$xfer" server \
	--ifname "$if_a" --handle-file "$handle" --timeout 5
head -c 128 /dev/urandom | xxd -p -c 128 >"$tmp/garbage"
expect_error wrong_handle 5 "not a harp handle" -- \
	"${in_a[@]}" "$xfer" client --ifname "$if_a" --handle-file "$tmp/garbage" --timeout 5
no_xdp_left "$ns_a" "$if_a"

# A real server in B: its interface is taken, and its handle is the model of a forged one.
spawn_bounded 90 ip netns exec "$ns_b" "$xfer" server --ifname "$if_b" --handle-file "$handle" \
	--timeout 60 >"$tmp/server.out" 2>"$tmp/server.err"
server_pid=$spawned_pid
pids+=("$server_pid")
for ((i = 0; i < 100; i++)); do
	[[ -s $handle ]] && break
	kill -0 "$server_pid" 2>/dev/null || break
	sleep 0.1
done
if [[ ! -s $handle ]]; then
	report "the server wrote no handle"
	cat "$tmp/server.err"
	exit 1
fi
expect_error queue_taken 5 "$if_b|another harp process runs on" -- \
	ip netns exec "$ns_b" "$xfer" server --ifname "$if_b" --handle-file "$tmp/handle2"

# HARP_AUTH on one side only: the listener refuses, and the connector says which setting differs.
# The server stays up for the cases below (a refused set-up is not its failure).
expect_error auth_mismatch 5 "HARP_AUTH differs|1 on this side|set one value on every rank" -- \
	"${in_a[@]}" env HARP_AUTH=1 "$xfer" client --ifname "$if_a" --handle-file "$handle" \
	--timeout 10
# HARP_AUTH where libsodium cannot be loaded (hidden here by /dev/null mounted over it in a
# private mount namespace): the start fails, naming the package.
sodium=$(ldconfig -p | awk '/libsodium\.so\.23 / && !found { print $NF; found = 1 }')
if [[ -z $sodium ]]; then
	report "libsodium.so.23 is not installed (scripts/setup.sh installs libsodium-dev)"
else
	# shellcheck disable=SC2016 # expanded by that shell
	expect_error auth_no_sodium 5 "HARP_AUTH needs libsodium|libsodium23" -- \
		"${in_a[@]}" unshare -m --propagation private sh -c \
		'mount --bind /dev/null "$1" && shift && exec "$@"' sh "$sodium" \
		env HARP_AUTH=1 "$xfer" server --ifname "$if_a" --handle-file "$tmp/handle3"
fi

# struct handle_wire (src/ctrlmsg.h): magic 4, version 2, family 2, IPv4 4 (network order), so
# the address is hex digits 16..23; an IPv6 handle's is at bytes 24..39, hex digits 48..79.
# Nobody in A's /24 (or /64) has .99 (::99): ARP (NDP) gets no answer.
real=$(head -n 1 "$handle")
if [[ $topo_family == 6 ]]; then
	unreachable=2001:2:$topo_net::99
	hex=$(printf '20010002%04d0000000000000000%04d' "$topo_net" 99) # groups as lib.sh writes them
	printf '%s%s%s\n' "${real:0:48}" "$hex" "${real:80}" >"$tmp/forged"
else
	unreachable=198.18.$topo_net.99
	hex=$(printf '%02x' 198 18 "$topo_net" 99)
	printf '%s%s%s\n' "${real:0:16}" "$hex" "${real:24}" >"$tmp/forged"
fi
expect_error unreachable_peer 4 "$unreachable|HARP_CONNECT_TIMEOUT_MS=2000" -- \
	"${in_a[@]}" env HARP_CONNECT_TIMEOUT_MS=2000 "$xfer" client --ifname "$if_a" \
	--handle-file "$tmp/forged" --timeout 30
# Four connections where HARP_CONNS_MAX allows three: the fourth is refused at once, naming the
# limit (the 4,096th connection once failed with a bare ENOMEM).
for _ in 1 2 3 4; do cat "$tmp/forged"; done >"$tmp/forged4"
expect_error conns_max 5 "HARP_CONNS_MAX=3|3 harp connections open" -- \
	"${in_a[@]}" env HARP_CONNS_MAX=3 "$xfer" client --ifname "$if_a" \
	--handle-file "$tmp/forged4" --conns 4 --timeout 10

# A sanitizer build (tests/build/sanitize.sh) cannot run under valgrind: its own checks stand in.
if [[ $(ldd "$xfer") =~ lib(a|t)san ]]; then # not a pipe into grep -q: its early exit fails ldd (pipefail)
	no_xdp_left "$ns_a" "$if_a"
	echo "bad_input: the valgrind cases are left out: $xfer is built with a sanitizer"
	echo "bad_input: result=$( ((fail)) && echo FAIL || echo PASS)"
	exit "$fail"
fi

# Under valgrind: three cases that end before any bpf() call get memcheck's full check; two that
# run harp's whole start and tear-down (XDP, AF_XDP sockets, engines) skip definedness checks.
expect_error vg_missing_interface 30 "nosuch0|No such device" -- \
	"${in_a[@]}" "${valgrind_full[@]}" "$xfer" server --ifname nosuch0 --handle-file "$handle"
expect_error vg_invalid_setting 30 "HARP_QUEUES|1..64" -- \
	"${in_a[@]}" env HARP_QUEUES=abc "${valgrind_full[@]}" "$xfer" server --ifname "$if_a" \
	--handle-file "$handle"
expect_error vg_too_many_queues 30 "$if_a|2 rx queues" -- \
	"${in_a[@]}" "${valgrind_full[@]}" "$xfer" server --ifname "$if_a" --handle-file "$handle" \
	--queues 4
expect_error vg_wrong_handle 30 "not a harp handle" -- \
	"${in_a[@]}" "${valgrind_nobpf[@]}" "$xfer" client --ifname "$if_a" --queues 2 \
	--handle-file "$tmp/garbage" --timeout 10
expect_error vg_unreachable_peer 30 "$unreachable|HARP_CONNECT_TIMEOUT_MS=2000" -- \
	"${in_a[@]}" env HARP_CONNECT_TIMEOUT_MS=2000 "${valgrind_nobpf[@]}" "$xfer" client \
	--ifname "$if_a" --handle-file "$tmp/forged" --timeout 30
no_xdp_left "$ns_a" "$if_a"

echo "bad_input: result=$( ((fail)) && echo FAIL || echo PASS)"
exit "$fail"
