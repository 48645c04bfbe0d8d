#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# A send larger than the receive posted for it fails on both sides with EMSGSIZE, never a
# truncation, and the connection goes on: the messages after it arrive byte-exact.
#
#   msgsize.sh
#
# Every case runs harp-xfer --recv-short N over one veth pair: message k of each connection and
# direction (k % N == N - 1, zero-byte messages excepted) is posted a receive one byte smaller
# than itself. harp-xfer fails on a refusal it did not expect, on a missing one, and on a refused
# buffer that was written to; this script works out on its own how many messages must be refused
# and how many bytes verified, and requires both sides' counters to be exactly that:
#   receiver  msgsize_recv_errors = refused   verified_bytes = the bytes of the other messages
#   sender    msgsize_send_errors = refused   sent_bytes     = the same bytes
# (per connection, times --conns; with --bidir each side is both). Two cases then give client and
# server different N on purpose: the client must fail, naming the message it was wrong about.
#
# The binary is $HARP_XFER (default ${BUILD_DIR:-build}/harp-xfer). Prints each case's figures;
# exits 0 if every case holds, 1 if one does not, 77 if it cannot run here.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/lib.sh"

xfer=${HARP_XFER:-${BUILD_DIR:-build}/harp-xfer}
if [[ ! -x $xfer ]]; then
	echo "msgsize: harp-xfer not found at '$xfer' (set HARP_XFER or BUILD_DIR)" >&2
	exit 1
fi
xfer=$(realpath "$xfer")
# harp refuses HARP_* variables it does not know, and this one is ours.
unset HARP_XFER

harness_init msgsize

topo_pair 1500 1 || exit

fail=0
report() {
	echo "msgsize: FAIL $*"
	fail=1
}

# bytes_of SIZE: SIZE (digits, then an optional K, M or G) in bytes, as harp-xfer reads it.
bytes_of() {
	local s=$1 n
	n=${s%[KkMmGg]}
	case $s in
	*[Kk]) echo $((n << 10)) ;;
	*[Mm]) echo $((n << 20)) ;;
	*[Gg]) echo $((n << 30)) ;;
	*) echo "$n" ;;
	esac
}

# val FILE KEY: the value of KEY=... in FILE, or "missing".
val() {
	local v
	v=$(sed -n "s/^$2=//p" "$1" | head -n 1)
	echo "${v:-missing}"
}

# expect_val NAME SIDE KEY WANT: SIDE's KEY must be WANT.
expect_val() {
	local name=$1 side=$2 key=$3 want=$4 got
	got=$(val "$tmp/$name.$side.out" "$key")
	if [[ $got != "$want" ]]; then
		report "$name: $side $key=$got, expected $want"
	fi
}

# run_pair NAME LIMIT SERVER_ARGS -- CLIENT_ARGS: one server/client pair, each bounded by LIMIT
# seconds; leaves server_rc and client_rc, and NAME.{server,client}.{out,err} in $tmp.
run_pair() {
	local name=$1 limit=$2 server_pid client_pid
	shift 2
	local sargs=() cargs=()
	while (($#)) && [[ $1 != -- ]]; do
		sargs+=("$1")
		shift
	done
	shift
	cargs=("$@")
	spawn_bounded "$limit" ip netns exec "$ns_b" "$xfer" server --ifname "$if_b" \
		--handle-file "$tmp/$name.handle" "${sargs[@]}" \
		>"$tmp/$name.server.out" 2>"$tmp/$name.server.err"
	server_pid=$spawned_pid
	pids+=("$server_pid")
	spawn_bounded "$limit" ip netns exec "$ns_a" "$xfer" client --ifname "$if_a" \
		--handle-file "$tmp/$name.handle" "${cargs[@]}" \
		>"$tmp/$name.client.out" 2>"$tmp/$name.client.err"
	client_pid=$spawned_pid
	pids+=("$client_pid")
	server_rc=0 client_rc=0
	wait "$client_pid" || client_rc=$?
	wait "$server_pid" || server_rc=$?
}

# show_err NAME SIDE: SIDE's stderr, indented, if any.
show_err() {
	if [[ -s $tmp/$1.$2.err ]]; then
		echo "    $2 stderr:"
		tail -n 20 "$tmp/$1.$2.err" | sed 's/^/    | /'
	fi
}

# run_case NAME SIZES COUNT N CONNS BIDIR [HARP_XFER_ARGS...]: client and server both with
# --sizes SIZES --count COUNT --recv-short N --conns CONNS (and --bidir if BIDIR is 1); both must
# exit 0 with exactly the counters worked out here.
run_case() {
	local name=$1 sizes=$2 count=$3 n=$4 conns=$5 bidir=$6
	shift 6
	local args=(--sizes "$sizes" --count "$count" --recv-short "$n" --conns "$conns"
		--timeout 30 "$@")
	local list=() k size refused=0 fit_msgs=0 fit_bytes=0 side
	IFS=, read -r -a list <<<"$sizes"
	((bidir)) && args+=(--bidir)
	# Message k of a flow has size list[k / count]; it is refused iff k % n == n - 1 and it is
	# not empty (harp-xfer cannot post a receive smaller than zero bytes).
	for ((k = 0; k < ${#list[@]} * count; k++)); do
		size=$(bytes_of "${list[k / count]}")
		if ((k % n == n - 1 && size > 0)); then
			refused=$((refused + 1))
		else
			fit_msgs=$((fit_msgs + 1))
			fit_bytes=$((fit_bytes + size))
		fi
	done
	run_pair "$name" 60 "${args[@]}" -- "${args[@]}"

	local rx_err=$((conns * refused)) bytes=$((conns * fit_bytes)) msgs=$((conns * fit_msgs))
	echo "msgsize: case=$name args=${args[*]}"
	echo "    expected per side: refused=$rx_err verified_msgs=$msgs verified_bytes=$bytes"
	for side in server client; do
		echo "    $side: rc=$([[ $side == server ]] && echo "$server_rc" || echo "$client_rc")" \
			"result=$(val "$tmp/$name.$side.out" result)" \
			"msgsize_send_errors=$(val "$tmp/$name.$side.out" msgsize_send_errors)" \
			"msgsize_recv_errors=$(val "$tmp/$name.$side.out" msgsize_recv_errors)" \
			"verified_msgs=$(val "$tmp/$name.$side.out" verified_msgs)" \
			"verified_bytes=$(val "$tmp/$name.$side.out" verified_bytes)" \
			"sent_bytes=$(val "$tmp/$name.$side.out" sent_bytes)" \
			"retransmits=$(val "$tmp/$name.$side.out" retransmits)" \
			"seconds=$(val "$tmp/$name.$side.out" seconds)"
	done
	((server_rc == 0)) || report "$name: server exited $server_rc"
	((client_rc == 0)) || report "$name: client exited $client_rc"
	for side in server client; do
		local sends=0 recvs=0
		if ((bidir)) || [[ $side == client ]]; then
			sends=1
		fi
		if ((bidir)) || [[ $side == server ]]; then
			recvs=1
		fi
		expect_val "$name" "$side" result ok
		expect_val "$name" "$side" msgsize_send_errors $((sends * rx_err))
		expect_val "$name" "$side" msgsize_recv_errors $((recvs * rx_err))
		expect_val "$name" "$side" msgsize_errors $(((sends + recvs) * rx_err))
		expect_val "$name" "$side" sent_bytes $((sends * bytes))
		expect_val "$name" "$side" verified_bytes $((recvs * bytes))
		expect_val "$name" "$side" verified_msgs $((recvs * msgs))
		# A refusal is an answer, not a protocol error that takes the connection down.
		if grep -q '^harp: ERROR:' "$tmp/$name.$side.err"; then
			report "$name: $side logged a harp error"
			grep '^harp: ERROR:' "$tmp/$name.$side.err" | head -n 5 | sed 's/^/    | /'
		fi
	done
	if ((server_rc || client_rc)); then
		show_err "$name" server
		show_err "$name" client
	fi
}

# run_mismatch NAME SERVER_N CLIENT_N PATTERN: the server posts short receives every SERVER_N-th
# message but the client expects them every CLIENT_N-th; the client must exit 1 (not time out)
# with PATTERN (an extended regex) on stderr. The server's end depends on how far it got.
run_mismatch() {
	local name=$1 sn=$2 cn=$3 pattern=$4
	local args=(--sizes 4K --count 8 --timeout 20)
	run_pair "$name" 40 "${args[@]}" --recv-short "$sn" -- "${args[@]}" --recv-short "$cn"
	echo "msgsize: case=$name server --recv-short $sn, client --recv-short $cn:" \
		"client_rc=$client_rc server_rc=$server_rc"
	grep -m 1 'harp-xfer:' "$tmp/$name.client.err" | sed 's/^/    | /' || true
	if ((client_rc != 1)); then
		report "$name: the client exited $client_rc, expected 1"
	fi
	if ! grep -qE "$pattern" "$tmp/$name.client.err"; then
		report "$name: the client's stderr does not match '$pattern'"
		show_err "$name" client
	fi
}

# A refused 4 KiB message followed at once by a fitting one, four times; the same with one
# message in flight at a time, so each fitting receive is posted only after the refusal.
run_case every2_4k 4K 8 2 1 0
run_case every2_4k_window1 4K 8 2 1 0 --window 1
# 1 MiB messages, every third refused (700-odd DATA packets skipped each time).
run_case every3_1m 1M 9 3 1 0
# Sizes from 1 byte (into a 0-byte receive) to 1 MiB, every other message refused.
run_case mixed_sizes 1,4095,4096,1M 3 2 1 0
# Both directions on two connections at once.
run_case bidir_conns2 4K,1M 4 4 2 1
# Every message refused (N = 1): no DATA at all, only refusals, of every size.
run_case all_refused 1,4K,1M 4 1 1 0
# Half of 512 small messages refused, 16 in flight: refusals and data interleave on the wire.
run_case interleaved 4K 512 2 1 0 --window 16

# harp-xfer's own checks must bite: a refusal it did not expect, and one that did not come.
run_mismatch unexpected_refusal 2 3 'send msg 1 failed with EMSGSIZE, but the message \(4096 bytes\) should fit'
run_mismatch missing_refusal 3 2 'send msg 1 completed \(4096 bytes\), but .* should not fit .*expected EMSGSIZE'

echo "msgsize: result=$( ((fail)) && echo FAIL || echo PASS)"
exit "$fail"
