# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# Guest benchmark (tests/vm/bench.sh boots two guests with it): in the same guests and the same
# boot, ROUNDS rounds (hvm_args word rounds=N, default 3) of, one after another, guest b sending
# to guest a over: kernel TCP (iperf3, one stream, 5 s), harp zero copy (HARP_BIND_MODE=auto on a
# device that allows it) and harp copy mode (HARP_BIND_MODE=copy), one connection, 64 messages of
# 1 MiB, every byte verified. Prints one line per measurement: "bench: ROUND WHAT GBIT/S".
# Under TCG the figures measure the emulator: read them as ratios.
set -e
rounds=3
for w in ${hvm_args//,/ }; do
	case $w in
	rounds=*) rounds=${w#rounds=} ;;
	*) hvm_fail "unknown bench word '$w'" ;;
	esac
done
export HARP_LOG_LEVEL=warn
role=client
[ "$hvm_name" = a ] && role=server
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
done
hvm_end
