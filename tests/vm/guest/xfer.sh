# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# Guest scenario (tests/vm/xfer.sh boots two guests with it): verified harp-xfer transfers
# between guest a (the server) and guest b (the client), one after another, every byte
# checked by harp-xfer; what each must show is checked here. Words of hvm_args:
#   conns=N[+N...]      one transfer per count, in order (default 1)
#   size=BYTES          message size (default 1M); count=N messages per connection and
#                       direction (default 16); bidir: both directions at once
#   bind=MODE           HARP_BIND_MODE for both sides (default: unset, so auto)
#   mode=MODE           both sides must report AF_XDP mode MODE (zerocopy or copy) at the end
#   copy-line=ERRNO     both sides must print harp's copy-mode line naming zero copy's ERRNO
#                       (e.g. EINVAL) and VIRTIO_F_ACCESS_PLATFORM
#   zerocopy-refused    before the transfers, HARP_BIND_MODE=zerocopy must refuse to start, with
#                       a line naming VIRTIO_F_ACCESS_PLATFORM
#   every-queue         each side received and sent on every one of the NIC's queues, in
#                       each transfer with at least as many connections as queues
#   side-traffic        the kernel's own ping (5 a second) and TCP (iperf3, 8 MiB) on the same
#                       NIC during every transfer: every ping answered but a tenth and the one
#                       in flight, the TCP transfer complete
#   stall=MS            the server runs with HARP_FAULT_ZC_STALL_MS=MS (a driver that stops
#                       delivering) and must fall back to copy mode, saying so, and finish
#   zc-retry=MS         HARP_ZC_RETRY_MS for both sides; with stall=, the server must also bind
#                       zero copy again once that long has passed, saying so, and end in it
#   tx-stall=MS         the client runs with HARP_FAULT_ZC_TX_CORRUPT_MS=MS (a zero-copy transmit
#                       whose frames never reach the peer): the server must tell it so
#                       (CHAN_SILENT), the client must fall back to copy mode, saying so, and finish
#   peer-timeout=MS     HARP_PEER_TIMEOUT_MS for both sides
#   quirks=0            HARP_ZEROCOPY_QUIRKS=0 for both sides: auto tries zero copy on this
#                       kernel's modular virtio_net, whose zero-copy transmit header is read
#                       from a bogus address (src/xsk.c; xfer.sh --mem 512 keeps that address
#                       outside guest memory, where QEMU reads zeros)
#   quirk-line          both sides must print harp's line that it took copy mode untried
#                       because of virtio_net's zero-copy transmit fault
#   in-order            at most 1% of the packets each side received came out of order or to
#                       an engine without their connection (each flow kept to one engine)
#   jumbo               both sides ran at eth0's whole MTU, packets past one UMEM frame
#                       received as descriptor chains (multi-buffer, XDP_USE_SG)
set -e

conns_list=1 size=1M count=16 bidir="" bind="" copy_line="" zc_refused=0
every_queue=0 side=0 stall="" zc_retry="" tx_stall="" peer_timeout="" quirk_line=0 in_order=0 jumbo=0
for w in ${hvm_args//,/ }; do
	case $w in
	conns=*) conns_list=${w#conns=} ;;
	size=*) size=${w#size=} ;;
	count=*) count=${w#count=} ;;
	bidir) bidir=--bidir ;;
	bind=*) bind=${w#bind=} ;;
	copy-line=*) copy_line=${w#copy-line=} ;;
	zerocopy-refused) zc_refused=1 ;;
	every-queue) every_queue=1 ;;
	side-traffic) side=1 ;;
	stall=*) stall=${w#stall=} ;;
	zc-retry=*) zc_retry=${w#zc-retry=} ;;
	tx-stall=*) tx_stall=${w#tx-stall=} ;;
	peer-timeout=*) peer_timeout=${w#peer-timeout=} ;;
	quirk-line) quirk_line=1 ;;
	in-order) in_order=1 ;;
	jumbo) jumbo=1 ;;
	*) hvm_common_word "$w" || hvm_fail "unknown scenario word '$w'" ;;
	esac
done
[ -n "$bind" ] && export HARP_BIND_MODE=$bind
[ -n "$peer_timeout" ] && export HARP_PEER_TIMEOUT_MS=$peer_timeout
[ -n "$zc_retry" ] && export HARP_ZC_RETRY_MS=$zc_retry
export HARP_LOG_LEVEL=info
role=$hvm_role
nq=$(ls -d /sys/class/net/eth0/queues/rx-* | wc -l)

# out_value TAG NAME: NAME's value in harp-xfer's output of TAG
out_value() {
	sed -n "s/^$2=//p" "/tmp/$1.out" | tail -n 1
}

if ((zc_refused)); then
	# each guest alone: harp must refuse before it waits for a peer
	if HARP_BIND_MODE=zerocopy timeout 30 "$hvm_build/harp-xfer" server --ifname eth0 \
		--handle-file /tmp/refused.handle --conns 1 --count 1 --timeout 20 >/tmp/refused.out 2>&1; then
		hvm_fail "HARP_BIND_MODE=zerocopy started where the driver refuses zero copy"
	fi
	sed 's/^/[zerocopy demanded] /' /tmp/refused.out | grep -v '=[0-9.a-z]*$' || true
	grep -q 'HARP_BIND_MODE=zerocopy; driver virtio_net: .*VIRTIO_F_ACCESS_PLATFORM' \
		/tmp/refused.out || hvm_fail "HARP_BIND_MODE=zerocopy failed without naming the driver's need"
fi

run=0
for conns in ${conns_list//+/ }; do
	run=$((run + 1))
	tag=x$run
	if ((side)) && [ $role = server ]; then
		# listening before the barrier, which the client passes only after we reach it
		timeout 120 iperf3 -s -1 -p 5201 >/tmp/iperf3.out 2>&1 &
		iperf_pid=$!
	fi
	hvm_barrier "start-$run"
	if ((side)); then
		if [ $role = client ]; then
			hvm_ping_start 150
			timeout 120 iperf3 -c "$hvm_peer" -p 5201 -n 8M >/tmp/iperf3.out 2>&1 &
			iperf_pid=$!
		fi
	fi
	rc=0
	if [ $role = server ] && [ -n "$stall" ]; then
		HARP_FAULT_ZC_STALL_MS=$stall hvm_xfer server $tag --conns "$conns" --sizes "$size" \
			--count "$count" $bidir --timeout 120 || rc=$?
	elif [ $role = client ] && [ -n "$tx_stall" ]; then
		HARP_FAULT_ZC_TX_CORRUPT_MS=$tx_stall hvm_xfer client $tag --conns "$conns" \
			--sizes "$size" --count "$count" $bidir --timeout 120 || rc=$?
	else
		hvm_xfer $role $tag --conns "$conns" --sizes "$size" --count "$count" $bidir \
			--timeout 120 || rc=$?
	fi
	[ $rc = 0 ] || hvm_fail "run $run ($conns connections): harp-xfer exited $rc"
	verified=$(out_value $tag verified_bytes)
	# the client only sends, unless both directions run
	if [ $role = server ] || [ -n "$bidir" ]; then
		[ "${verified:-0}" -gt 0 ] || hvm_fail "run $run: no verified bytes"
	fi
	echo "run $run: $conns connections, $role verified $verified bytes," \
		"mode $(out_value $tag mode), $(out_value $tag goodput_gbps) Gbit/s"
	if [ -n "$hvm_want_mode" ] && [ "$(out_value $tag mode)" != "$hvm_want_mode" ]; then
		hvm_fail "run $run: mode $(out_value $tag mode), expected $hvm_want_mode"
	fi
	if [ -n "$hvm_ip6" ] && [ "$(out_value $tag conns_ipv6)" != "$conns" ]; then
		hvm_fail "run $run: $(out_value $tag conns_ipv6) of $conns connections over IPv6"
	fi
	if ((jumbo)); then
		want_mtu=$(cat /sys/class/net/eth0/mtu)
		echo "run $run: IP MTU $(out_value $tag mtu), multi_buffer=$(out_value $tag multi_buffer)," \
			"$(out_value $tag rx_chains) chains received, $(out_value $tag tx_chains) sent"
		[ "$(out_value $tag mtu)" = "$want_mtu" ] && [ "$(out_value $tag multi_buffer)" = 1 ] &&
			[ "$(out_value $tag rx_chains)" -gt 0 ] ||
			hvm_fail "run $run: expected IP MTU $want_mtu with received descriptor chains"
	fi
	if [ -n "$copy_line" ]; then
		errno_text=$(case $copy_line in EINVAL) echo "Invalid argument" ;;
			EOPNOTSUPP) echo "Operation not supported" ;; *) echo "$copy_line" ;; esac)
		grep -q "runs in copy mode: its zero-copy bind of queue [0-9]* failed with $errno_text (virtio-net .*VIRTIO_F_ACCESS_PLATFORM" \
			"/tmp/$tag.out" || hvm_fail "run $run: no copy-mode line naming $copy_line"
	fi
	if ((quirk_line)); then
		grep -q "runs in copy mode, zero copy untried: virtio_net is a loadable module here" \
			"/tmp/$tag.out" || hvm_fail "run $run: no line saying zero copy went untried"
		grep -q "AF_XDP copy mode (zero copy untried: the driver's known fault)" "/tmp/$tag.out" ||
			hvm_fail "run $run: the start-up line does not say zero copy went untried"
	fi
	if ((every_queue && conns >= nq)); then
		for ((q = 0; q < nq; q++)); do
			for dir in rx tx; do
				[ "$(out_value $tag "queue${q}_${dir}_packets")" -gt 0 ] ||
					hvm_fail "run $run: nothing went $dir on queue $q of $nq"
			done
		done
	fi
	if ((in_order)); then
		rx=0
		for ((q = 0; q < nq; q++)); do
			rx=$((rx + $(out_value $tag "queue${q}_rx_packets")))
		done
		ooo=$(out_value $tag rx_out_of_order) unknown=$(out_value $tag rx_unknown_conn)
		echo "run $run: $role received $rx packets, $ooo out of order, $unknown to an engine" \
			"without their connection"
		((ooo * 100 <= rx && unknown * 100 <= rx)) ||
			hvm_fail "run $run: more than 1% of $rx packets out of order ($ooo) or to the wrong engine ($unknown)"
	fi
	if [ $role = server ] && [ -n "$stall" ]; then
		grep -q 'delivered nothing for .* falls back to copy mode' "/tmp/$tag.out" ||
			hvm_fail "run $run: the stalled zero-copy socket was not reported"
		if [ -n "$zc_retry" ] && [ "$zc_retry" != 0 ]; then
			grep -q 'bound again in zero-copy mode' "/tmp/$tag.out" ||
				hvm_fail "run $run: zero copy was not bound again after the quiet period"
			[ "$(out_value $tag mode)" = zerocopy ] ||
				hvm_fail "run $run: $(out_value $tag mode) at the end, not zero copy again"
		else
			[ "$(out_value $tag mode)" = copy ] || hvm_fail "run $run: still $(out_value $tag mode) after the stall"
		fi
	fi
	if [ $role = client ] && [ -n "$tx_stall" ]; then
		grep -q 'has heard nothing of conn .* sends it in zero-copy mode: taking the zero-copy transmit for broken, eth0 falls back to copy mode' \
			"/tmp/$tag.out" || hvm_fail "run $run: the peer's silence report did not end zero copy"
		[ "$(out_value $tag mode)" = copy ] || hvm_fail "run $run: still $(out_value $tag mode) after the silence report"
	fi
	if ((side)); then
		wait "$iperf_pid" || { cat /tmp/iperf3.out; hvm_fail "run $run: kernel TCP (iperf3) failed beside harp"; }
		if [ $role = client ]; then
			# pings ran all through the transfer: stopped now, each must have been answered
			hvm_ping_stop "run $run"
			echo "run $run: kernel traffic beside harp: $hvm_ping_result," \
				"$(grep -E 'receiver' /tmp/iperf3.out | awk '{print $7, $8}') TCP"
		fi
	fi
done
# neither guest powers off (taking its side of the kernel traffic with it) before both are done
hvm_end
