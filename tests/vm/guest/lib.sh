# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# Helpers for guest scripts (bash; busybox gives the other commands), sourced by the guest's init before /scenario.
#
#   hvm_net_up              eth0 up at $hvm_ip/24 with $hvm_queues queue pairs (and, with the
#                           word ipv6, at hvm_ip6/64 too); a web server on port 8080 publishes
#                           /tmp/pub to the other guests
#   hvm_publish NAME FILE   offers FILE to the other guests as NAME
#   hvm_fetch NAME DEST [SEC]  fetches NAME from the first peer into DEST, waiting up to SEC
#                           seconds (default 120) for it to be published
#   hvm_barrier NAME [SEC]  returns once the first peer reached the barrier NAME too
#   hvm_end                 the scenario's last barrier: returns once the peer has passed it too
#   hvm_xfer ROLE TAG ARGS...  harp-xfer ROLE over eth0: the server publishes its handle as TAG,
#                           the client fetches it; prints harp-xfer's output; harp-xfer's status
#   hvm_fail WHY...         prints WHY and ends the scenario with status 1; the peer's next
#                           hvm_fetch ends its scenario too
#   hvm_arg WORD            true when WORD is one of the words of hvm_args
#   hvm_ping_start SEC      pings the peer 5 times a second for at most SEC seconds, behind
#   hvm_ping_stop WHAT      stops it: every ping must have been answered but the one in flight
#                           and a tenth (else hvm_fail, WHAT saying when); sets hvm_ping_result
#                           ("R of S pings answered")
#   hvm_rdv ROLE TAG DIR CMD...  runs CMD (harp-net-driver, harp-perf: programs that meet their
#                           peer through files in a directory both share) with DIR as that
#                           directory: while it runs, its files ROLE.* go to the peer and the
#                           peer's (server.handles, client.handles and the marks) come into
#                           DIR, named by TAG; CMD's status
#
#   hvm_common_word WORD    takes a scenario word every guest script knows: mode=MODE (the AF_XDP
#                           mode harp must report, kept in hvm_want_mode), quirks=0
#                           (HARP_ZEROCOPY_QUIRKS=0, guest/xfer.sh says why) or ipv6 (eth0 gets
#                           an IPv6 address beside its IPv4 one, 2001:2:N::X for 198.18.N.X in
#                           hvm_ip6, and harp runs over it: HARP_FAMILY=ipv6); false for another
#
# The environment holds hvm_name, hvm_ip, hvm_queues, hvm_peers and hvm_args from the kernel's
# command line (tests/vm/vm.sh), and this file sets hvm_build and hvm_source (the build tree and
# the checkout, at the same paths as on the host) and hvm_role (guest a is the server, the other
# the client). The kernel's own TCP and ICMP run on the same NIC throughout: every handle and
# barrier goes through the web server.

hvm_build=$(cat /lib/harp-vm/build)
hvm_source=$(cat /lib/harp-vm/source) # the checkout: scripts/harp-attach
hvm_peer=${hvm_peers%%,*}
hvm_role=client
[ "$hvm_name" = a ] && hvm_role=server
hvm_want_mode=""
hvm_ip6=""
export HARP_CONF=

hvm_fail() {
	echo "FAIL ($hvm_name): $*"
	echo "$hvm_name: $*" >/tmp/pub/FAILED
	hvm_nic_state
	exit 1
}

# hvm_nic_state: what the NIC's driver counted (its non-zero per-queue counters) and its
# interrupts, for a failure's console
hvm_nic_state() {
	echo "-- $hvm_name: ethtool -S eth0 (non-zero)"
	ethtool -S eth0 2>&1 | grep -v ': 0$' | tr -s ' \t' ' ' | paste -sd ' ' || true
	echo "-- $hvm_name: UDP"
	grep '^Udp:' /proc/net/snmp | tail -n 1 || true
	echo "-- $hvm_name: interrupts"
	grep -E 'virtio|CPU' /proc/interrupts | tr -s ' ' || true
}

hvm_common_word() {
	case $1 in
	mode=*) hvm_want_mode=${1#mode=} ;;
	quirks=*) export HARP_ZEROCOPY_QUIRKS=${1#quirks=} ;;
	ipv6)
		# 198.18.N.X: 2001:2:N::X (lib.sh's groups), the handshake's family from the handle
		hvm_ip6=$(echo "$hvm_ip" | awk -F. '{ printf "2001:2:%s::%s", $3, $4 }')
		export HARP_FAMILY=ipv6
		;;
	*) return 1 ;;
	esac
}

hvm_arg() {
	case ",$hvm_args," in
	*",$1,"*) return 0 ;;
	*) return 1 ;;
	esac
}

hvm_net_up() {
	local i=0
	ip link set lo up
	while ! ip link show eth0 >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -lt 100 ] || hvm_fail "no eth0 (virtio_net did not come up)"
		sleep 0.1
	done
	if [ "${hvm_queues:-1}" -gt 1 ] && ! hvm_arg default-channels; then
		ethtool -L eth0 combined "$hvm_queues" || hvm_fail "ethtool -L eth0 combined $hvm_queues"
	fi
	ip link set eth0 mtu "${hvm_mtu:-1500}" || hvm_fail "ip link set eth0 mtu $hvm_mtu"
	ip link set eth0 up
	ip addr add "$hvm_ip/24" dev eth0
	if hvm_arg ipv6; then
		ip -6 addr add "$(echo "$hvm_ip" | awk -F. '{ printf "2001:2:%s::%s", $3, $4 }')/64" \
			dev eth0 nodad || hvm_fail "no IPv6 address on eth0"
	fi
	mkdir -p /tmp/pub
	httpd -p 8080 -h /tmp/pub
	echo "guest $hvm_name: $(uname -r), eth0 $hvm_ip, driver $(ethtool -i eth0 | sed -n 's/^driver: //p')," \
		"$(ls /sys/class/net/eth0/queues | grep -c rx) rx queues, features $(cat /sys/class/net/eth0/device/features 2>/dev/null)"
}

hvm_publish() {
	cp "$2" "/tmp/pub/$1.tmp" && mv "/tmp/pub/$1.tmp" "/tmp/pub/$1"
}

# hvm_get NAME DEST: one try at fetching NAME from the peer, 3 s at most.
hvm_get() {
	timeout 3 /lib/harp-vm/get "$hvm_peer" "$1" "$2" 2>/dev/null
}

hvm_fetch() {
	local name=$1 dest=$2 sec=${3:-120} i=0
	until hvm_get "$name" "$dest"; do
		# every second: has the peer given up? Then it will never publish NAME.
		if [ $((i % 5)) -eq 4 ] && hvm_get FAILED /tmp/peer-failed; then
			hvm_fail "the peer failed: $(cat /tmp/peer-failed)"
		fi
		i=$((i + 1))
		[ $i -lt $((sec * 5)) ] || hvm_fail "$name never came from $hvm_peer in $sec s"
		sleep 0.2
	done
}

hvm_barrier() {
	echo "$hvm_name" >/tmp/barrier
	hvm_publish "barrier-$1" /tmp/barrier
	hvm_fetch "barrier-$1" /tmp/barrier.peer "${2:-120}"
}

hvm_end() {
	local i
	hvm_barrier end
	# the peer may not have fetched our mark yet: until it says it has passed, we stay
	echo passed >/tmp/passed
	hvm_publish end-passed /tmp/passed
	for ((i = 0; i < 100; i++)); do
		if hvm_get end-passed /tmp/passed.peer; then
			sleep 1 # our own mark is up: the peer's next try, 0.1 s away, finds it
			return 0
		fi
		sleep 0.1
	done
	# the peer passed and left before we asked: it has what it needed
	return 0
}

hvm_xfer() {
	local role=$1 tag=$2 rc=0 i=0 pid
	shift 2
	rm -f "/tmp/$tag.handle"
	if [ "$role" = server ]; then
		"$hvm_build/harp-xfer" server --ifname eth0 --handle-file "/tmp/$tag.handle" "$@" \
			>"/tmp/$tag.out" 2>&1 &
		pid=$!
		while [ ! -s "/tmp/$tag.handle" ] && kill -0 $pid 2>/dev/null && [ $i -lt 600 ]; do
			i=$((i + 1))
			sleep 0.1
		done
		[ -s "/tmp/$tag.handle" ] && hvm_publish "$tag.handle" "/tmp/$tag.handle"
		wait $pid || rc=$?
	else
		hvm_fetch "$tag.handle" "/tmp/$tag.handle"
		"$hvm_build/harp-xfer" client --ifname eth0 --handle-file "/tmp/$tag.handle" "$@" \
			>"/tmp/$tag.out" 2>&1 || rc=$?
	fi
	sed "s/^/[$tag $role] /" "/tmp/$tag.out"
	if [ $rc != 0 ]; then
		# what the driver saw: the non-zero per-queue counters
		ethtool -S eth0 | grep -v ': 0$' | sed "s/^/[$tag $role ethtool -S] /"
	fi
	return $rc
}

hvm_rdv() {
	local role=$1 tag=$2 dir=$3 peer=server pid f n rc=0
	shift 3
	[ "$role" = server ] && peer=client
	mkdir -p "$dir"
	"$@" &
	pid=$!
	while kill -0 $pid 2>/dev/null; do
		for f in "$dir/$role".*; do
			n=${f##*/}
			if [ -e "$f" ] && [ ! -e "$dir/.sent-$n" ]; then
				hvm_publish "$tag-$n" "$f"
				: >"$dir/.sent-$n"
			fi
		done
		for n in $peer.handles $peer.flowing $peer.idle $peer.done; do
			if [ ! -e "$dir/$n" ] && hvm_get "$tag-$n" "$dir/.got-$n"; then
				mv "$dir/.got-$n" "$dir/$n"
			fi
		done
		sleep 0.2
	done
	wait $pid || rc=$?
	return $rc
}

hvm_ping_start() {
	ping -i 0.2 -w "$1" "$hvm_peer" >/tmp/ping.out 2>&1 &
	hvm_ping_pid=$!
}

hvm_ping_stop() {
	local sent replies
	kill -INT "$hvm_ping_pid" 2>/dev/null || true
	wait "$hvm_ping_pid" || true
	sent=$(sed -n 's/^\([0-9]*\) packets transmitted.*/\1/p' /tmp/ping.out)
	replies=$(grep -c 'bytes from' /tmp/ping.out || true)
	if ! ((sent >= 2 && replies * 10 >= (sent - 1) * 9)); then
		cat /tmp/ping.out
		hvm_fail "$1: $replies of $sent pings answered beside harp"
	fi
	hvm_ping_result="$replies of $sent pings answered"
}
