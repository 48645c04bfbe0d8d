# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# Guest benchmark (tests/vm/bench.sh boots two guests with it): in the same guests and the same
# boot, ROUNDS rounds (hvm_args word rounds=N, default 3) of, one after another, guest b sending
# to guest a over: kernel TCP (iperf3, one stream, 5 s), harp zero copy and harp copy mode
# (harp-xfer, one connection, 64 messages of 1 MiB, every byte verified). With the word
# nccl-lib=PATH (tests/vm/bench.sh --nccl: the libnccl.so.2 it put into the initramfs), each
# round then streams 64 MiB in 512 KiB messages (window 8, one connection) through harp-perf
# with harp's NCCL plugin, with NCCL's socket transport (harp-perf --plugin nccl-socket, loading
# PATH) as NCCL sets it up by default, and with 16 sockets per connection as on AWS. Prints one
# line per measurement: "bench: ROUND WHAT GBIT/S cpu_s=SERVER_CPU_SECONDS". Under TCG the
# figures measure the emulator: read them as ratios.
set -e
rounds=3 nccl_lib=""
for w in ${hvm_args//,/ }; do
	case $w in
	rounds=*) rounds=${w#rounds=} ;;
	nccl-lib=*) nccl_lib=${w#nccl-lib=} ;;
	*) hvm_fail "unknown bench word '$w'" ;;
	esac
done
export HARP_LOG_LEVEL=warn
# zero copy on this kernel's modular virtio_net, whose transmit header the guests' memory size and
# nokaslr keep valid (guest/xfer.sh, tests/vm/README.md)
export HARP_ZEROCOPY_QUIRKS=0
role=$hvm_role

# perf_stream ROUND WHAT ENV... -- PLUGIN: harp-perf stream through PLUGIN (a file, or
# nccl-socket, which takes its release's own table and ignores --version), the server's line
perf_stream() {
	local r=$1 what=$2 dir=/tmp/perf-$1-$2 json=/tmp/perf-$1-$2.json rc=0 plugin
	shift 2
	local -a envs=()
	while [ "$1" != -- ]; do
		envs+=("$1")
		shift
	done
	plugin=$2
	mkdir -p "$dir"
	hvm_barrier "perf-$r-$what"
	hvm_rdv $role "p$r$what" "$dir" env "${envs[@]}" timeout 200 "$hvm_build/harp-perf" stream \
		--role $role --dir "$dir" --json "$json" --timeout 180 --version 11 --plugin "$plugin" \
		--size 512K --window 8 --conns 1 --bytes 64M >"$dir/out" 2>&1 || rc=$?
	if [ $rc != 0 ]; then
		tail -n 20 "$dir/out"
		hvm_fail "harp-perf stream through $what exited $rc"
	fi
	if [ $role = server ]; then
		echo "bench: $r $what $(sed -n 's/.*"gbps":\([0-9.]*\).*/\1/p' "$json")" \
			"cpu_s=$(sed -n 's/.*"cpu_s":\([0-9.]*\).*/\1/p' "$json")"
	fi
}

for ((r = 1; r <= rounds; r++)); do
	if [ $role = server ]; then
		timeout 60 iperf3 -s -1 -p 5201 >/tmp/iperf3.out 2>&1 &
		pid=$!
		hvm_barrier "tcp-$r"
		wait $pid || hvm_fail "iperf3 server"
	else
		hvm_barrier "tcp-$r"
		timeout 60 iperf3 -c "$hvm_peer" -p 5201 -t 5 -f g >/tmp/iperf3.out 2>&1 || hvm_fail "iperf3"
		echo "bench: $r kernel-tcp $(awk '/receiver/ {print $7}' /tmp/iperf3.out)"
	fi
	for mode in auto copy; do
		tag=b$r$mode
		HARP_BIND_MODE=$mode hvm_xfer $role $tag --conns 1 --sizes 1M --count 64 --timeout 120 \
			>/dev/null || hvm_fail "harp $mode"
		if [ $role = server ]; then
			echo "bench: $r harp-$(sed -n 's/^mode=//p' /tmp/$tag.out) $(sed -n 's/^goodput_gbps=//p' /tmp/$tag.out)" \
				"cpu_s=$(sed -n 's/^cpu_seconds=//p' /tmp/$tag.out)"
		fi
	done
	if [ -n "$nccl_lib" ]; then
		perf_stream $r nccl-plugin-harp HARP_IFNAME=eth0 -- "$hvm_build/nccl-net/libnccl-net-harp.so"
		perf_stream $r nccl-socket NCCL_LIB="$nccl_lib" NCCL_SOCKET_IFNAME=eth0 -- nccl-socket
		perf_stream $r nccl-socket-16 NCCL_LIB="$nccl_lib" NCCL_SOCKET_IFNAME=eth0 \
			NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4 -- nccl-socket
	fi
done
hvm_end
