#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Drives libnccl-net-harp.so the way NCCL does, through each ncclNetPlugin_vN table: a server in
# namespace B and a client in namespace A, each a harp-net-driver, joined by one veth pair.
#
#   conformance.sh --plugin SO --driver BIN [options]
#     --versions LIST     tables to drive, comma-separated (default 8,9,10,11,12)
#     --scenarios LIST    comma-separated, or all (default basic,pipeline,grouped):
#                         basic pipeline many stripes stripe-kill accept-stall accept-die grouped
#                         close-order peer-kill
#                         idle-peer limits init-fail copy-fail (--cuda)
#     --only WHAT         symbols: only check the exported symbols (no root needed);
#                         init-fail: only the init failure cases
#     --queues N          veth queues, and HARP_QUEUES=N for both sides (default 1)
#     --devices N         veth pairs between A and B (1 or 2); HARP_IFNAME matches all of them,
#                         so the plugin reports N devices (times the shares of each: one for
#                         every two queues, or HARP_NCCL_DEVICES in --env) and many spreads its
#                         pairs over them; the shares' names and guids must differ
#     --client-env WORDS  NAME=VALUE words (space-separated) for the client's environment only,
#                         e.g. "HARP_FAULT_DROP_PPM=300000" to lose packets the client receives
#     --valgrind          run one side under valgrind's memcheck (the server; for peer-kill the
#                         client, which outlives its peer)
#     --load-as NAME      the drivers dlopen() NAME instead of SO's path: a bare name is looked up
#                         on the library path as NCCL looks up libnccl-net.so (SO is still the
#                         file the symbol check reads)
#     --peer-timeout-ms T HARP_PEER_TIMEOUT_MS for peer-kill (default 2000)
#     --mtu N             MTU of the veth pairs (default 1500); above one UMEM frame, both
#                         plugins must say in their start-up line that they run at N with
#                         descriptor chains (multi-buffer)
#     --env WORDS         NAME=VALUE words (space-separated) for both sides' environment
#     --driver-args WORDS more arguments for both drivers (e.g. --cuda)
#     --client-args WORDS more arguments for the client's driver only
#     --expect-log TEXT   each side's log must hold a line with TEXT
#     --family F          the links' addresses (lib.sh topo_family): 4 (default), 6 (IPv6
#                         only) or dual (both)
#     --hop PROFILE       A and B joined through a forwarding namespace M instead (topo_hop:
#                         M hashes each flow to a queue of the next hop, as an RSS NIC does),
#                         which impairs every UDP packet by PROFILE (lib.sh hop_impair: none,
#                         drop1, drop5, reorder, dup2, corrupt, ratecap, all); one device only
#
# The scenarios are described in net_driver.c. init-fail runs three cases per version: an
# interface that does not exist, HARP_QUEUES=abc and an unknown HARP_FOO=1; each must make init
# fail with exactly one WARN line that names the cause. peer-kill runs three times: the server gets
# SIGKILL, then (a fresh pair) SIGSTOP, in the middle of a pipeline; the client must see a request
# fail within T + 0.5 s of the kill, and 0.75 T to T + 0.5 s after the stop, where T is
# HARP_PEER_TIMEOUT_MS (--peer-timeout-ms, default 2000). The third (peer-freeze) stops a server
# that has nothing in flight while the client's requests wait on it, after checking that the
# client waited 2 T without an error while the server lived; its error must come 0.7 T to
# T + 0.5 s after the stop (the silence counts from the last ping answer).
# Under --valgrind the bounds leave out the client's longest pause before the error when it
# spent under a tenth of that pause on CPU (memcheck's client could not run; the pause is printed).
# idle-peer: the server stops calling the plugin once its receives are done; the client's sends
# must still complete (harp's keeper thread acks for an idle rank).
#
# Valgrind and BPF: memcheck does not know what the kernel writes back through bpf() (BTF and
# program info, per-CPU map values), so once harp loads its XDP program memcheck reports
# uninitialised values inside libbpf and libxdp. Scenarios that load it run with
# --undef-value-errors=no (still catching invalid reads and writes, invalid frees and definite
# leaks); init-fail, which ends before any bpf() call, gets the full check.
#
# Prints one line per case and the driver's output for failures; exits 0 if every case held, 1 if
# one did not, 2 on bad usage, 77 if it cannot run here (not root, a tool missing).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
netns_dir=$(cd "$here/../netns" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$netns_dir/lib.sh"

# usage [WHAT]: what was wrong, if known, then the synopsis; exits 2.
usage() {
	if (($#)); then
		echo "conformance: $*" >&2
	fi
	sed -n '4,39s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
}

plugin="" driver="" versions="8,9,10,11,12" scenarios="basic,pipeline,grouped" only=""
use_valgrind=0 queues=1 devices=1 client_env="" load_as="" peer_timeout_ms=2000 mtu=1500
both_env="" driver_args="" client_args="" expect_log="" hop=""
while (($#)); do
	case $1 in
	--plugin) plugin=${2:?} && shift ;;
	--driver) driver=${2:?} && shift ;;
	--versions) versions=${2:?} && shift ;;
	--scenarios) scenarios=${2:?} && shift ;;
	--only) only=${2:?} && shift ;;
	--queues) queues=${2:?} && shift ;;
	--devices) devices=${2:?} && shift ;;
	--client-env) client_env=${2:?} && shift ;;
	--valgrind) use_valgrind=1 ;;
	--load-as) load_as=${2:?} && shift ;;
	--peer-timeout-ms) peer_timeout_ms=${2:?} && shift ;;
	--mtu) mtu=${2:?} && shift ;;
	--env) both_env=${2:?} && shift ;;
	--driver-args) driver_args=${2:?} && shift ;;
	--client-args) client_args=${2:?} && shift ;;
	--expect-log) expect_log=${2:?} && shift ;;
	--hop) hop=${2:?} && shift ;;
	--family) topo_family=${2:?} && shift ;;
	*) usage "unknown option '$1'" ;;
	esac
	shift
done
if [[ $scenarios == all ]]; then
	scenarios="basic,pipeline,many,grouped,close-order,peer-kill,idle-peer,limits,init-fail"
fi
IFS=, read -r -a version_list <<<"$versions"
IFS=, read -r -a scenario_list <<<"$scenarios"
for v in "${version_list[@]}"; do
	[[ $v =~ ^(8|9|10|11|12)$ ]] || usage "no table version '$v' (8 to 12)"
done
for s in "${scenario_list[@]}"; do
	[[ $s =~ ^(basic|pipeline|many|stripes|stripe-kill|accept-stall|accept-die|grouped|close-order|peer-kill|idle-peer|limits|init-fail|copy-fail)$ ]] ||
		usage "no scenario '$s'"
done
case $only in
"" | symbols | init-fail) ;;
*) usage "--only takes symbols or init-fail, not '$only'" ;;
esac
[[ $peer_timeout_ms =~ ^[0-9]+$ ]] && ((peer_timeout_ms >= 100 && peer_timeout_ms <= 60000)) ||
	usage "--peer-timeout-ms must be 100 to 60000 (got '$peer_timeout_ms')"
[[ $mtu =~ ^[0-9]+$ ]] && ((mtu >= 1280 && mtu <= 16384)) ||
	usage "--mtu must be 1280 to 16384 (got '$mtu')"
[[ $queues =~ ^[1-9]$ && $devices =~ ^[12]$ ]] ||
	usage "--queues must be 1 to 9 and --devices 1 or 2 (got '$queues' and '$devices')"
[[ -z $hop || $devices == 1 ]] || usage "--hop takes one device (got --devices $devices)"
if [[ -z $plugin || ! -f $plugin ]]; then
	echo "conformance: no plugin at '$plugin' (--plugin)" >&2
	exit 1
fi
plugin=$(realpath "$plugin")
load=${load_as:-$plugin}
# harp refuses HARP_* variables it does not know; this one belongs to the netns scripts.
unset HARP_XFER

# NCCL's devices: each interface in shares, one for every two queues (HARP_NCCL_DEVICES sets it)
shares=$((queues / 2 > 1 ? queues / 2 : 1))
if [[ " $both_env " =~ \ HARP_NCCL_DEVICES=([0-9]+)\  ]] && ((BASH_REMATCH[1] > 0)); then
	shares=${BASH_REMATCH[1]}
fi
ndev_want=$((devices * shares))

fail=0 # failures so far: a case failed when the count grew during it
report() {
	echo "conformance: FAIL $*"
	fail=$((fail + 1))
}

# check_symbols: the .so's dynamic symbol table defines exactly NCCL's five tables.
check_symbols() {
	local want got line
	if ! command -v nm >/dev/null; then
		echo "conformance: missing tool: nm" >&2
		exit 77
	fi
	want=$(printf 'ncclNetPlugin_v%s\n' 8 9 10 11 12 | sort)
	got=$(nm -D --defined-only "$plugin" | awk '{ print $NF }' | sort)
	if [[ $got != "$want" ]]; then
		report "symbols: nm -D --defined-only lists:"
		while read -r line; do
			echo "    | $line"
		done <<<"$got"
		echo "    expected exactly: $(tr '\n' ' ' <<<"$want")"
	else
		echo "conformance: case=symbols exported=$(tr '\n' ' ' <<<"$got")result=PASS"
	fi
}

if [[ $only == symbols ]]; then
	check_symbols
	exit $((fail ? 1 : 0))
fi

if [[ -z $driver || ! -x $driver ]]; then
	echo "conformance: no harp-net-driver at '$driver' (--driver)" >&2
	exit 1
fi
driver=$(realpath "$driver")
if ((use_valgrind)) && ! command -v valgrind >/dev/null; then
	echo "conformance: missing tool: valgrind (apt-get install valgrind)" >&2
	exit 77
fi
# --keep-debuginfo: leaks are reported after dlclose, and their stacks run through the plugin
valgrind_full=(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
	--keep-debuginfo=yes)
valgrind_bpf=("${valgrind_full[@]}" --undef-value-errors=no)

stopped="" # a server driver that peer-kill may have stopped
# shellcheck disable=SC2317 # called from the EXIT trap
harness_cleanup_extra() {
	if [[ -n $stopped ]]; then
		kill -KILL "$stopped" 2>/dev/null || true
		kill -CONT "$stopped" 2>/dev/null || true
	fi
}

# make_topology: namespaces A and B joined by one veth pair, or two. The second pair has its own
# /24 in 198.19/16 (and /64 in 2001:2:x:9::) and names that extend the first's, so
# HARP_IFNAME=$if_a (a prefix, as in NCCL_SOCKET_IFNAME) matches both, first pair first.
make_topology() {
	if [[ -n $hop ]]; then
		topo_hop "$mtu" "$queues" || return
		hop_impair "$hop" || return
		return
	fi
	topo_pair "$mtu" "$queues" || return
	if ((devices == 2)); then
		local peer="198.19.$topo_net.2"
		topo_veth "$ns_a" "${if_a}2" "$ns_b" "${if_b}2" "$mtu" "$queues"
		topo_addr "$ns_a" "${if_a}2" "198.19.$topo_net.1" "2001:2:$topo_net:9::1"
		topo_addr "$ns_b" "${if_b}2" "$peer" "2001:2:$topo_net:9::2"
		[[ $topo_family != 6 ]] || peer="2001:2:$topo_net:9::2"
		topo_wait_ping "$ns_a" "$peer" || return
		topo_log "second pair ${if_a}2 <-> ${if_b}2, $peer's network"
	fi
}

harness_init plugin
make_topology || exit

# fresh_topology: new interfaces for each case. The kernel frees an AF_XDP socket's hold on its
# queue in deferred work after the process has gone, and on a loaded machine the next driver's
# bind to that queue can still fail with EBUSY.
topo_used=0
fresh_topology() {
	if ((topo_used)); then
		topo_cleanup
		make_topology || exit
	fi
	topo_used=1
}

# Seconds a driver may take (its --timeout); the wrappers kill it 30 s later. Each scenario needs
# a few seconds here; the margin is for loaded machines and valgrind.
driver_timeout() {
	local scenario=$1 t
	case $scenario in
	pipeline) t=240 ;;
	stripes) t=120 ;;
	limits) t=120 ;;
	*) t=60 ;;
	esac
	((use_valgrind)) && t=$((t * 4))
	echo "$t"
}

# show_side NAME FILE_PREFIX: a failed case's output, indented.
show_side() {
	echo "    --- $1 stdout"
	sed 's/^/    | /' "$2.out"
	echo "    --- $1 stderr (last 40 lines, without valgrind's notes on bpf() commands)"
	grep -v 'WARNING: unhandled eBPF command' "$2.err" | tail -n 40 | sed 's/^/    | /'
}

# key FILE KEY: the value of KEY=... in FILE (empty if absent).
key() {
	sed -n "s/^$2=//p" "$1" | tail -n 1
}

# valgrind_side SCENARIO: the side that runs under valgrind with --valgrind: the server, except
# where the server is killed.
valgrind_side() {
	if [[ $1 == peer-kill ]]; then
		echo client
	else
		echo server
	fi
}

# side_cmd SIDE(server|client) VERSION SCENARIO DIR [NAME=VALUE...]: the command line of one
# side, with those variables in its environment, into the array cmd. The server (B) runs under
# valgrind with --valgrind.
side_cmd() {
	local side=$1 version=$2 scenario=$3 dir=$4 ns ifname
	shift 4
	if [[ $side == server ]]; then
		ns=$ns_b ifname=$if_b
	else
		ns=$ns_a ifname=$if_a
	fi
	cmd=(ip netns exec "$ns" env HARP_IFNAME="$ifname" HARP_QUEUES="$queues" "$@")
	# shellcheck disable=SC2206 # NAME=VALUE words without spaces
	cmd+=($both_env)
	if [[ $side == client && -n $client_env ]]; then
		# shellcheck disable=SC2206 # NAME=VALUE words without spaces
		cmd+=($client_env)
	fi
	if ((use_valgrind)) && [[ $side == "$(valgrind_side "$scenario")" ]]; then
		cmd+=("${valgrind_bpf[@]}")
	fi
	cmd+=("$driver" --plugin "$load" --version "$version" --scenario "$scenario"
		--role "$side" --dir "$dir" --timeout "$(driver_timeout "$scenario")")
	# shellcheck disable=SC2206 # arguments without spaces
	cmd+=($driver_args)
	if [[ $side == client ]]; then
		# shellcheck disable=SC2206
		cmd+=($client_args)
	fi
}

# judge NAME RC FILE_PREFIX: a side's exit and result line.
judge() {
	local name=$1 rc=$2 prefix=$3 first_fail
	# the driver's first complaint, so that the summary says why without the whole output
	first_fail=$(grep -m1 -e 'FAIL:' -e 'ERROR:' "$prefix.err" 2>/dev/null | cut -c1-300 || true)
	case $rc in
	0) ;;
	99) report "$name: valgrind found errors" ;;
	124 | 137) report "$name: killed at its time limit" ;;
	*) report "$name: exited $rc${first_fail:+: $first_fail}" ;;
	esac
	if ((rc == 0)) && [[ $(key "$prefix.out" result) != ok ]]; then
		report "$name: exited 0 without result=ok"
	fi
}

# run_pair VERSION SCENARIO: both sides of one scenario, both must pass.
run_pair() {
	local version=$1 scenario=$2 name="v$1 $2" dir="$tmp/v$1-$2" limit t0 t1
	local server_pid client_pid server_rc=0 client_rc=0 before=$fail verified
	limit=$(($(driver_timeout "$scenario") + 30))
	mkdir -p "$dir"
	fresh_topology
	t0=${EPOCHREALTIME/./}
	side_cmd server "$version" "$scenario" "$dir"
	spawn_bounded "$limit" "${cmd[@]}" >"$dir/server.out" 2>"$dir/server.err"
	server_pid=$spawned_pid
	pids+=("$server_pid")
	side_cmd client "$version" "$scenario" "$dir"
	spawn_bounded "$limit" "${cmd[@]}" >"$dir/client.out" 2>"$dir/client.err"
	client_pid=$spawned_pid
	pids+=("$client_pid")
	wait "$client_pid" || client_rc=$?
	wait "$server_pid" || server_rc=$?
	t1=${EPOCHREALTIME/./}
	judge "$name server" "$server_rc" "$dir/server"
	judge "$name client" "$client_rc" "$dir/client"
	verified=$(key "$dir/server.out" verified_bytes)
	# close-order and idle-peer may end before the server receives; accept-* never has a comm
	if [[ ! $scenario =~ ^(close-order|idle-peer|accept-stall|accept-die)$ ]] &&
		((${verified:-0} == 0)); then
		report "$name: the server verified no bytes"
	fi
	if ((mtu > 3826)) && [[ $scenario != init-fail ]]; then
		for side in server client; do
			grep -q "MTU $mtu ([0-9]* payload bytes per packet, multi-buffer: descriptor chains)" \
				"$dir/$side.err" || report "$name $side: no device line saying MTU $mtu" \
				"with descriptor chains ($(grep -o 'MTU [0-9]* ([^)]*)' "$dir/$side.err" | head -n 1))"
		done
	fi
	if [[ -n $expect_log ]]; then
		for side in server client; do
			grep -qF -- "$expect_log" "$dir/$side.err" ||
				report "$name $side: no log line with '$expect_log'"
		done
	fi
	if [[ $(key "$dir/client.out" ndev) != "$ndev_want" ]]; then
		report "$name: the client's plugin reported" \
			"$(key "$dir/client.out" ndev) devices, expected $ndev_want" \
			"($devices interface(s) in $shares share(s) each)"
	fi
	for field in name guid; do
		if [[ -n $(grep -E "^dev[0-9]+_$field=" "$dir/client.out" | cut -d= -f2 | sort |
			uniq -d) ]]; then
			report "$name: two of the client's devices have the same $field"
		fi
	done
	echo "conformance: case=$name seconds=$(((t1 - t0) / 1000000))" \
		"server_verified_bytes=$(key "$dir/server.out" verified_bytes)" \
		"client_verified_bytes=$(key "$dir/client.out" verified_bytes)" \
		"messages=$(key "$dir/client.out" messages)" \
		"client_seconds=$(key "$dir/client.out" seconds)" \
		"goodput_gbps=$(key "$dir/client.out" goodput_gbps)" \
		"result=$( ((fail > before)) && echo FAIL || echo PASS)"
	if grep -q '^stripe_kill_' "$dir/client.out"; then # what failed, what went on
		echo "conformance: case=$name client:" \
			"$(sed -n 's/^stripe_kill_//p' "$dir/client.out" | tr '\n' ' ')"
	fi
	if grep -q '^cuda_' "$dir/client.out"; then # --cuda: the stand-in's counts
		echo "conformance: case=$name client GPU copies:" \
			"$(sed -n 's/^cuda_//p' "$dir/client.out" | tr '\n' ' ')"
	fi
	if ((fail > before)); then
		show_side server "$dir/server"
		show_side client "$dir/client"
	fi
}

# run_peer_kill VERSION SIGNAL MIN_MS MAX_MS [SCENARIO]: both sides run SCENARIO (peer-kill, a
# pipeline without end, by default) with HARP_PEER_TIMEOUT_MS=T; once both have moved data the
# server gets SIGNAL. The client must see a request fail (ncclRemoteError or ncclSystemError)
# between MIN_MS and MAX_MS after the signal, then close its comms and exit 0. With --valgrind
# the client is the side under valgrind. peer-freeze leaves nothing in flight: the client waits on
# a receive and a send the server never serves, and must keep waiting without an error for 2 T
# while the server lives, before the signal.
run_peer_kill() {
	local version=$1 sig=$2 min_ms=$3 max_ms=$4 scenario=${5:-peer-kill} limit i t0 t1 ms
	local name="v$1 $scenario SIG$2" dir="$tmp/v$1-$scenario-$2" err_ms
	local server_pid client_pid server_drv="" client_rc=0 before=$fail
	local stall_ms stall_cpu excused
	limit=$(($(driver_timeout "$scenario") + 30))
	mkdir -p "$dir"
	fresh_topology
	side_cmd server "$version" "$scenario" "$dir" "HARP_PEER_TIMEOUT_MS=$peer_timeout_ms"
	spawn_bounded "$limit" "${cmd[@]}" >"$dir/server.out" 2>"$dir/server.err"
	server_pid=$spawned_pid
	pids+=("$server_pid")
	side_cmd client "$version" "$scenario" "$dir" "HARP_PEER_TIMEOUT_MS=$peer_timeout_ms"
	spawn_bounded "$limit" "${cmd[@]}" >"$dir/client.out" 2>"$dir/client.err"
	client_pid=$spawned_pid
	pids+=("$client_pid")
	# Up to 60 s until both sides have completed a message (each writes <role>.flowing then),
	# then 1 s more of traffic (peer-kill: the signal comes in the middle of the transfer) or
	# 2 T of waiting (peer-freeze).
	for ((i = 0; i < 600; i++)); do
		[[ -e $dir/server.flowing && -e $dir/client.flowing ]] && break
		sleep 0.1
	done
	if [[ $scenario == peer-freeze ]]; then
		sleep "$((2 * peer_timeout_ms / 1000)).$(printf '%03d' $((2 * peer_timeout_ms % 1000)))"
	else
		sleep 1
	fi
	server_drv=$(cat "$dir/server.pid" 2>/dev/null || true)
	if [[ -z $server_drv || ! -e $dir/server.flowing || ! -e $dir/client.flowing ]] ||
		! kill -0 "$client_pid" 2>/dev/null || ! kill -0 "$server_drv" 2>/dev/null; then
		report "$name: no traffic both ways, or a side ended (with its peer alive), before" \
			"the server could be signalled"
		kill "$server_pid" "$client_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
		wait "$client_pid" 2>/dev/null || true
		show_side server "$dir/server"
		show_side client "$dir/client"
		return
	fi
	stopped=$server_drv
	echo "conformance: $name: SIG$sig to the server's driver, pid $server_drv"
	t0=${EPOCHREALTIME/./}
	echo "$t0" >"$dir/signalled_at"
	kill "-$sig" "$server_drv"
	# Up to 15 s for the client to notice and end.
	for ((i = 0; i < 1500; i++)); do
		kill -0 "$client_pid" 2>/dev/null || break
		sleep 0.01
	done
	t1=${EPOCHREALTIME/./}
	ms=$(((t1 - t0) / 1000))
	kill "$client_pid" 2>/dev/null || true
	wait "$client_pid" || client_rc=$?
	kill -KILL "$server_drv" 2>/dev/null || true
	kill -CONT "$server_drv" 2>/dev/null || true
	stopped=""
	wait "$server_pid" 2>/dev/null || true
	judge "$name client" "$client_rc" "$dir/client"
	err_ms=$(key "$dir/client.out" time_to_error_ms)
	# The client's longest pause between its last message and the error, and its CPU
	# time in it: under memcheck
	# (one thread at a time, every system call slowed) a pause with under a tenth of its
	# time on CPU is time the client could not run at all, not time harp took to notice.
	stall_ms=$(key "$dir/client.out" stall_ms)
	stall_cpu=$(key "$dir/client.out" stall_cpu_ms)
	excused=0
	if ((use_valgrind)) && [[ -n $stall_ms && -n $stall_cpu ]] &&
		((stall_cpu * 10 < stall_ms)); then
		excused=$stall_ms
	fi
	# The pause only makes an error later, so it is taken off the upper bound alone: it began
	# at the client's last message, before the signal, and may be longer than err_ms itself.
	if [[ -z $err_ms ]]; then
		report "$name: the client printed no time_to_error_ms"
	elif ((err_ms < min_ms || err_ms - excused > max_ms)); then
		report "$name: a request failed $err_ms ms after SIG$sig," \
			"expected $min_ms..$max_ms ms" \
			"(the upper bound less $excused ms the client was off CPU)"
	fi
	echo "conformance: case=$name time_to_error_ms=$err_ms client_exit_ms=$ms" \
		"client_stall_ms=${stall_ms:-0} (cpu ${stall_cpu:-0} ms;" \
		"$(key "$dir/client.out" stall_switches))" \
		"error_result=$(key "$dir/client.out" error_result)" \
		"messages_before=$(key "$dir/client.out" messages)" \
		"result=$( ((fail > before)) && echo FAIL || echo PASS)"
	if ((fail > before)); then
		show_side client "$dir/client"
	fi
}

# run_init_fail VERSION CASE ENV EXPECT: init with ENV (NAME=VALUE words) must fail with one
# WARN line containing EXPECT.
run_init_fail() {
	local version=$1 case_name=$2 env_words=$3 expect=$4 name prefix rc=0 before=$fail
	local vg=()
	name="v$version init-fail $case_name"
	prefix="$tmp/v$version-init-fail-$case_name"
	if ((use_valgrind)); then
		vg=("${valgrind_full[@]}")
	fi
	# shellcheck disable=SC2086 # env_words: NAME=VALUE words without spaces
	run_bounded 60 ip netns exec "$ns_a" env $env_words "${vg[@]}" "$driver" \
		--plugin "$load" --version "$version" --scenario init-fail \
		--expect-warn "$expect" >"$prefix.out" 2>"$prefix.err" || rc=$?
	judge "$name" "$rc" "$prefix"
	echo "conformance: case=$name init_result=$(key "$prefix.out" init_result)" \
		"warn_lines=$(key "$prefix.out" warn_lines)" \
		"result=$( ((fail > before)) && echo FAIL || echo PASS)"
	grep 'NCCL WARN' "$prefix.err" | head -n 2 | sed 's/^/    /'
	if ((fail > before)); then
		show_side "$name" "$prefix"
	fi
}

init_fail_cases() {
	local version=$1
	run_init_fail "$version" no-interface "HARP_IFNAME=nosuch0" "HARP_IFNAME=nosuch0"
	run_init_fail "$version" bad-queues "HARP_IFNAME=$if_a HARP_QUEUES=abc" HARP_QUEUES
	run_init_fail "$version" unknown-var "HARP_IFNAME=$if_a HARP_FOO=1" HARP_FOO
}

t_start=${EPOCHREALTIME/./}
for version in "${version_list[@]}"; do
	if [[ $only == init-fail ]]; then
		init_fail_cases "$version"
		continue
	fi
	for scenario in "${scenario_list[@]}"; do
		case $scenario in
		init-fail) init_fail_cases "$version" ;;
		peer-kill)
			# a killed peer's kernel resets the control connection at once; should
			# that lag, HARP_PEER_TIMEOUT_MS (T) still ends it. The margin, 0.5 s, is
			# the engine's timer and a loaded machine; under memcheck the time the
			# client could not run at all is left out (see above).
			run_peer_kill "$version" KILL 0 $((peer_timeout_ms + 500))
			# a frozen peer's is kept up: T of silence
			run_peer_kill "$version" STOP $((peer_timeout_ms * 3 / 4)) \
				$((peer_timeout_ms + 500))
			# and with nothing in flight, requests waiting: the client pings it. Its
			# last answer came up to a ping cycle (2 x T/8) plus the answer's own round
			# trip before the stop (tens of ms when a side runs under memcheck), and T
			# of silence count from there: 0.7 T is the earliest that is not too early.
			run_peer_kill "$version" STOP $((peer_timeout_ms * 7 / 10)) \
				$((peer_timeout_ms + 500)) peer-freeze
			;;
		*) run_pair "$version" "$scenario" ;;
		esac
	done
done
t_end=${EPOCHREALTIME/./}
if [[ $only == init-fail ]]; then
	scenarios=init-fail
fi
echo "conformance: versions=$versions scenarios=$scenarios queues=$queues devices=$devices" \
	"client_env='$client_env'" \
	"valgrind=$use_valgrind peer_timeout_ms=$peer_timeout_ms seconds=$(((t_end - t_start) / 1000000))" \
	"result=$( ((fail)) && echo FAIL || echo PASS)"
exit $((fail ? 1 : 0))
