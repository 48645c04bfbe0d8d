#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# harp-attach on veth in fresh namespaces, and the privilege split it exists for:
#   - up, status, down; up twice (the second changes nothing); down of an interface harp is not on;
#     a bad interface name; an MTU too large for native XDP (refused with the fix under
#     --xdp-mode native, generic XDP with a stated fallback under auto); --queues set and put
#     back; hugepages reserved and put back; --dry-run changes nothing;
#   - a bridge (no queue settings: ethtool -l is not supported) is brought up and down; an up that
#     fails (a second interface that is not there, native XDP refused after the queue change, the
#     profile's path taken by a directory) leaves nothing behind: no XDP, no pins, the queues and
#     hugepages as they were, no record; a down whose unpinning fails (a mount on the pin
#     directory) says so, exits 1 and forgets the interface all the same; a symlinked harp-attach
#     finds harp's XDP object;
#   - after up by root, harp-xfer moves verified data with every capability dropped but CAP_NET_RAW
#     and CAP_IPC_LOCK (so CAP_BPF, CAP_SYS_ADMIN and CAP_NET_ADMIN are gone), through the pinned
#     maps; with CAP_NET_RAW dropped too it fails and says why; with
#     no pinned maps and no privilege it says to run harp-attach; a port range the program does
#     not steer, or a program replaced behind harp's back, is refused with the fix.
#
# Everything lives under a pin root and a profile of this run's own (/sys/fs/bpf/harp-test-PID,
# a temporary directory), which the profile hands to libharp through HARP_PIN_ROOT. Processes run
# in the namespaces through nsenter --net, because `ip netns exec` remounts /sys and would hide
# bpffs. Needs root; exits 77 without it.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=tests/netns/lib.sh
. "$root/tests/netns/lib.sh"

attach=$root/scripts/harp-attach
xfer=${HARP_XFER:-${BUILD_DIR:-$root/build}/harp-xfer}
unset HARP_XFER
if [[ $(id -u) != 0 ]]; then
	echo "attach: needs root (XDP, namespaces)" >&2
	exit 77
fi
[[ -x $xfer ]] || { echo "attach: harp-xfer not found at '$xfer'" >&2; exit 1; }
for t in xdp-loader bpftool capsh ethtool nsenter; do
	command -v "$t" >/dev/null || { echo "attach: missing $t (scripts/setup.sh installs it)" >&2; exit 1; }
done

tmp=$(mktemp -d /tmp/harp-attach-test.XXXXXX)
pins=/sys/fs/bpf/harp-test-$$
conf=$tmp/etc/harp.conf
hp_start=$(cat /proc/sys/vm/nr_hugepages)
failures=0
pids=()
mounted=""

cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
	done
	[[ -n $mounted ]] && umount "$mounted"
	for ns_if in "$ns_a:$if_a" "$ns_a:${if_a}q" "$ns_a:${if_a}g" "$ns_b:$if_b"; do
		[[ -e /run/netns/${ns_if%%:*} ]] &&
			nsenter --net="/run/netns/${ns_if%%:*}" "$attach" down "${ns_if#*:}" \
				--conf "$conf" --pin-root "$pins" >/dev/null 2>&1
	done
	rm -rf "$pins"
	echo "$hp_start" >/proc/sys/vm/nr_hugepages
	topo_cleanup
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

in_ns() {
	local ns=$1
	shift
	nsenter --net="/run/netns/$ns" "$@"
}

# ha NS ARGS...: harp-attach in NS with this run's profile and pin root; output in $out, rc in $rc.
ha() {
	local ns=$1
	shift
	out=$(in_ns "$ns" timeout 60 "$attach" "$@" --conf "$conf" --pin-root "$pins" 2>&1)
	rc=$?
}

pass() { echo "PASS $*"; }
fail_case() {
	echo "FAIL $1"
	shift
	printf '  | %s\n' "$@"
	failures=$((failures + 1))
}

# want NAME RC PATTERN: the last ha exited RC and said something matching PATTERN (grep -E).
want() {
	if [[ $rc == "$2" ]] && grep -qE -- "$3" <<<"$out"; then
		pass "$1"
	else
		fail_case "$1: want exit $2 and /$3/, got exit $rc" "$out"
	fi
}

# xfer_pair NAME DROP [ENV...]: harp-xfer server in B and client in A, each under capsh with the
# capabilities in DROP removed and ENV set; output in $tmp/NAME.{server,client}; rc_s, rc_c.
xfer_pair() {
	local name=$1 drop=$2
	shift 2
	local handle=$tmp/$name.handle args="--sizes 4096,1M --count 4 --timeout 20"
	rm -f "$handle"
	spawn_bounded 45 env "$@" HARP_LOG_LEVEL=info HARP_CONF="$conf" nsenter --net="/run/netns/$ns_b" \
		capsh --drop="$drop" -- -c "exec '$xfer' server --ifname $if_b --handle-file $handle $args" \
		>"$tmp/$name.server" 2>&1
	local s=$spawned_pid c
	pids+=("$s")
	spawn_bounded 45 env "$@" HARP_LOG_LEVEL=info HARP_CONF="$conf" nsenter --net="/run/netns/$ns_a" \
		capsh --drop="$drop" -- -c "exec '$xfer' client --ifname $if_a --handle-file $handle $args" \
		>"$tmp/$name.client" 2>&1
	c=$spawned_pid
	pids+=("$c")
	wait "$s"
	rc_s=$?
	# A server that failed (as the cases of a refused start expect) wrote no handle: its client
	# would wait for one until its timeout, so it is ended.
	((rc_s == 0)) || kill "$c" 2>/dev/null
	wait "$c"
	rc_c=$?
}

topo_pair 1500 1 >/dev/null 2>"$tmp/topo.log" || { cat "$tmp/topo.log"; exit 1; }
# A spare veth in A for the queue and MTU cases: four queues a side, its peer in A too.
ip -n "$ns_a" link add "${if_a}q" numtxqueues 4 numrxqueues 4 type veth peer name "${if_a}r" \
	numtxqueues 4 numrxqueues 4 || exit 1
ip -n "$ns_a" link set "${if_a}q" up && ip -n "$ns_a" link set "${if_a}r" up || exit 1
xa=$if_a xb=$if_b xq=${if_a}q

# xdp_on NS IF: is any XDP program attached to IF?
xdp_on() {
	ip -n "$1" -o link show dev "$2" | grep -q 'prog/xdp'
}

# rx_queues NS IF: IF's current rx queue count (veth), from ethtool -l.
rx_queues() {
	in_ns "$1" ethtool -l "$2" | awk '/^RX:/ {v = $2} END {print v}'
}

# left_nothing NS IF: nothing of harp's is left for IF: no XDP, no pins, no record, no profile.
left_nothing() {
	! xdp_on "$1" "$2" && [[ ! -e $pins/$2 && ! -e $(dirname "$conf")/attached/$2 && ! -e $conf ]]
}

# what_is_left NS IF: what left_nothing looks at, for a failure's report.
what_is_left() {
	ip -n "$1" -o link show dev "$2"
	ls -la "$pins" "$(dirname "$conf")" "$(dirname "$conf")/attached" 2>&1
}

# ---- usage and bad input ------------------------------------------------------------------------

ha "$ns_a" up "bad/name"
want "a bad interface name is refused" 2 "'bad/name' is not a valid interface name"
ha "$ns_a" up "${xa}zz"
want "an interface that is not there is named, with the fix" 1 "up ${xa}zz: find interface: no interface ${xa}zz .*fix: check the name"
ha "$ns_a" up "$xa" --port-count 65
want "a port range over 64 is refused" 2 "--port-count 65: expected 1..64"
ha "$ns_a" up "$xa" --port-count 8 --port-base 65528
want "a port base past libharp's HARP_PORT_BASE range is refused" 2 "--port-base 65528: expected 1024..65472 for 8 ports"
ha "$ns_a" up "$xa" --port-base 65500
want "a port range past 65535 is refused" 2 "--port-base 65500: expected 1024..65472 for 64 ports"
ha "$ns_a" frobnicate "$xa"
want "an unknown command is refused" 2 "unknown command 'frobnicate'"
# the links carry one family (topo_family): --family of the other is refused before any change
own=ipv4 other=ipv6
[[ $topo_family != 6 ]] || own=ipv6 other=ipv4
ha "$ns_a" up "$xa" --family ip5
want "an unknown family is refused" 2 "--family ip5: expected auto, ipv4 or ipv6"
ha "$ns_a" up "$xa" --family "$other" --hugepages off
want "--family $other on an interface without such an address is refused, with the fix" 1 \
	"up $xa: find address: --family $other, but $xa has no IPv. address.*fix: give $xa an address"
left_nothing "$ns_a" "$xa" || fail_case "a refused --family left nothing" "$(what_is_left "$ns_a" "$xa")"
ha "$ns_a" down "$xa"
want "down where harp is not attached changes nothing and says so" 0 "harp is not attached to $xa; nothing to undo"

# ---- dry run ------------------------------------------------------------------------------------

ha "$ns_a" up "$xa" --dry-run --hugepages 64
if [[ $rc == 0 ]] && grep -q "would load: xdp-loader load -m native -p $pins/$xa $xa" <<<"$out" &&
	grep -q "dry run: nothing changed" <<<"$out" && [[ ! -e $pins/$xa && ! -e $conf ]] &&
	! xdp_on "$ns_a" "$xa" &&
	[[ $(cat /proc/sys/vm/nr_hugepages) == "$hp_start" ]]; then
	pass "--dry-run prints the steps and changes nothing"
else
	fail_case "--dry-run" "$out"
fi

# ---- up, status, up again, down -----------------------------------------------------------------

ha "$ns_a" up "$xa" --hugepages off --family "$own"
want "up attaches, pins and ends with one line" 0 "^harp-attach: up: $xa \(native XDP, 1 queue\); UDP ports 47000-47063; maps in $pins/<ifname>; hugepages left alone"
for m in xsks_map counters harp_config probe_queues; do
	[[ -e $pins/$xa/$m ]] || fail_case "up pinned $pins/$xa/$m" "missing"
done
if grep -qx "HARP_IFNAME==$xa" "$conf" && grep -qx "HARP_PIN_ROOT=$pins" "$conf" &&
	grep -qx "HARP_QUEUES=auto" "$conf" && grep -qx "HARP_PORT_BASE=47000" "$conf" &&
	grep -qx "HARP_FAMILY=$own" "$conf"; then
	pass "up wrote the node profile"
else
	fail_case "the node profile" "$(cat "$conf" 2>&1)"
fi
id1=$(ip -n "$ns_a" -o link show dev "$xa" | grep -o 'prog/xdp id [0-9]*')
ha "$ns_a" status "$xa"
want "status of an interface that is up: exit 0, program, maps, counters" 0 "program   harp_xdp_steer id [0-9]+, native mode.*"
if ! grep -q "ports 47000-47063, made for id" <<<"$out" ||
	! grep -q "counters  steered 0,.*, refused 0 (IPv6 extension headers)" <<<"$out"; then
	fail_case "status names the ports and counters" "$out"
fi
ha "$ns_a" up "$xa" --hugepages off
want "up twice: the second finds it up" 0 "up: $xa \(native XDP, 1 queue, already up\)"
[[ $(ip -n "$ns_a" -o link show dev "$xa" | grep -o 'prog/xdp id [0-9]*') == "$id1" ]] ||
	fail_case "up twice kept the same program" "$id1 then $(ip -n "$ns_a" -o link show dev "$xa")"
ha "$ns_a" down "$xa"
want "down detaches and unpins" 0 "down: $xa: detached XDP program [0-9]+, removed $pins/$xa"
if ! xdp_on "$ns_a" "$xa" && [[ ! -e $pins/$xa && ! -e $conf ]]; then
	pass "after down: no program, no pins, no profile"
else
	fail_case "after down" "$(ip -n "$ns_a" -o link show dev "$xa")" "$(ls -la "$pins" "$conf" 2>&1)"
fi
ha "$ns_a" down "$xa"
want "down twice changes nothing" 0 "nothing to undo"
ha "$ns_a" status "$xa"
want "status after down: exit 1, says what is missing" 1 "program   none"

# ---- queues, MTU and modes on the spare veth ----------------------------------------------------

ha "$ns_a" up "$xq" --queues 2 --hugepages off
want "fewer rx queues than the peer's tx: native refused, skb fallback stated" 0 "native XDP refused: veth runs native XDP only with at least as many rx queues as its peer has tx queues; falling back to generic \(skb\) XDP"
grep -q "up: $xq (skb XDP, 2 queues)" <<<"$out" || fail_case "up says skb and 2 queues" "$out"
[[ $(rx_queues "$ns_a" "$xq") == 2 ]] ||
	fail_case "--queues 2 set the queues" "$(in_ns "$ns_a" ethtool -l "$xq")"
ha "$ns_a" down "$xq"
want "down puts the queues back" 0 "queues back to 4"

# An up that fails after changing the queues puts them back: native XDP is refused once the
# queues are fewer than the peer's.
ha "$ns_a" up "$xq" --queues 2 --xdp-mode native --hugepages off
want "native refused after --queues 2: the failure is named" 1 "up $xq: load XDP \(native mode\): veth runs native XDP only with at least as many rx queues"
if grep -q "undone: $xq's queues back to 4" <<<"$out" && [[ $(rx_queues "$ns_a" "$xq") == 4 ]] &&
	left_nothing "$ns_a" "$xq"; then
	pass "a failed up puts the queues back and leaves no record"
else
	fail_case "after the failed up: queues $(rx_queues "$ns_a" "$xq"), want 4" "$out" "$(what_is_left "$ns_a" "$xq")"
fi
ha "$ns_a" down "$xq"

# The profile's path taken by a directory: up fails at its last step, with XDP attached, the
# queues changed and hugepages reserved, and undoes all of it.
mkdir -p "$conf"
ha "$ns_a" up "$xq" --queues 2 --hugepages $((hp_start + 2))
want "a directory where the profile belongs: the failure is named" 1 "up write profile: cannot write $conf"
rmdir "$conf" 2>/dev/null || rm -rf "$conf"
if grep -q "undone: hugepages back to $hp_start, detached XDP program [0-9]* from $xq, removed $pins/$xq, $xq's queues back to 4, forgot $xq" <<<"$out" &&
	[[ $(rx_queues "$ns_a" "$xq") == 4 && $(cat /proc/sys/vm/nr_hugepages) == "$hp_start" ]] &&
	left_nothing "$ns_a" "$xq"; then
	pass "a failed up detaches, unpins, puts queues and hugepages back and forgets"
else
	fail_case "after the failed up: queues $(rx_queues "$ns_a" "$xq"), hugepages $(cat /proc/sys/vm/nr_hugepages)" \
		"$out" "$(what_is_left "$ns_a" "$xq")"
fi
ha "$ns_a" down "$xq"
ip -n "$ns_a" link set "$xq" mtu 9000 && ip -n "$ns_a" link set "${if_a}r" mtu 9000
# MTU 9000 (cloud jumbo frames): the program is multi-buffer aware, so veth runs it natively and
# nobody lowers the MTU (a single-buffer program was refused here above MTU 3506)
ha "$ns_a" up "$xq" --xdp-mode native --hugepages off
want "MTU 9000: native XDP attaches" 0 "up: $xq \(native XDP"
if ! xdp_on "$ns_a" "$xq" || [[ $(ip -n "$ns_a" -o link show dev "$xq" | grep -o ' mtu [0-9]*') != " mtu 9000" ]]; then
	fail_case "MTU 9000: attached, the MTU left at 9000" "$(ip -n "$ns_a" -o link show dev "$xq")"
fi
ha "$ns_a" down "$xq"
want "down at MTU 9000" 0 "detached XDP program"

# ---- interfaces without queue settings, failures, a symlinked harp-attach --------------------------

# A bridge answers ethtool -l with "Operation not supported", as bond, tun and macvlan do.
xg=${if_a}g
ip -n "$ns_a" link add "$xg" type bridge && ip -n "$ns_a" link set "$xg" up || exit 1
ha "$ns_a" up "$xg" --dry-run --hugepages off
want "--dry-run on a bridge: queues taken as fixed, in one line" 0 "up $xg: $xg has no queue settings \(ethtool -l is not supported by its driver\), so its queues are taken as fixed and harp runs on 1"
left_nothing "$ns_a" "$xg" || fail_case "--dry-run on a bridge changed nothing" "$(what_is_left "$ns_a" "$xg")"
ha "$ns_a" up "$xg" --hugepages off
want "up on a bridge: generic XDP, one queue" 0 "^harp-attach: up: $xg \(skb XDP, 1 queue\)"
if ! xdp_on "$ns_a" "$xg" || [[ ! -e $pins/$xg/harp_config ]]; then
	fail_case "up on a bridge attached and pinned" "$(what_is_left "$ns_a" "$xg")"
fi
ha "$ns_a" down "$xg"
want "down on a bridge" 0 "down: $xg: detached XDP program [0-9]+, removed $pins/$xg"
left_nothing "$ns_a" "$xg" || fail_case "after down on a bridge" "$(what_is_left "$ns_a" "$xg")"

# One up for two interfaces, the second not there: the first is taken down again.
ha "$ns_a" up "$xa" "${xa}zz" --hugepages off
want "up of two interfaces, the second missing: named" 1 "up ${xa}zz: find interface: no interface ${xa}zz"
if grep -q "undone: detached XDP program [0-9]* from $xa, removed $pins/$xa, forgot $xa" <<<"$out" &&
	left_nothing "$ns_a" "$xa"; then
	pass "a failed up detaches and unpins the interfaces it had brought up"
else
	fail_case "after the failed up of two" "$out" "$(what_is_left "$ns_a" "$xa")"
fi
ha "$ns_a" down "$xa"

# A down whose unpinning fails: a mount on the pin directory makes it busy.
ha "$ns_a" up "$xa" --hugepages off
want "up for the failing down" 0 "up: $xa"
mount -t tmpfs harp-test "$pins/$xa" && mounted=$pins/$xa
ha "$ns_a" down "$xa"
want "a failed down names the step, the interface and the fix" 1 "down $xa: unpin maps: cannot remove $pins/$xa; fix: "
if grep -q "down: $xa: detached XDP program" <<<"$out" && ! xdp_on "$ns_a" "$xa" &&
	[[ ! -e $(dirname "$conf")/attached/$xa && ! -e $conf ]]; then
	pass "a failed down still detaches the rest and forgets the interface"
else
	fail_case "after the failed down" "$out" "$(what_is_left "$ns_a" "$xa")"
fi
umount "$mounted" && mounted=""
ha "$ns_a" down "$xa"
want "a second down removes what the first could not" 0 "down: $xa: removed $pins/$xa"

# Installed as a symlink (/usr/local/bin/harp-attach): the object is found beside the real file.
mkdir -p "$tmp/bin" && ln -s "$attach" "$tmp/bin/harp-attach"
out=$(in_ns "$ns_a" timeout 60 "$tmp/bin/harp-attach" up "$xa" --dry-run --hugepages off \
	--conf "$conf" --pin-root "$pins" 2>&1)
rc=$?
want "a symlinked harp-attach finds harp_xdp.bpf.o" 0 "would load: xdp-loader load -m native -p $pins/$xa $xa /.+/harp_xdp\.bpf\.o$"

# ---- hugepages ------------------------------------------------------------------------------------

ha "$ns_a" up "$xa" --hugepages $((hp_start + 3))
want "up reserves the hugepages asked for" 0 "$((hp_start + 3)) hugepages of 2 MiB reserved"
ha "$ns_a" down "$xa"
if [[ $rc == 0 && $(cat /proc/sys/vm/nr_hugepages) == "$hp_start" ]] && grep -q "hugepages back to $hp_start" <<<"$out"; then
	pass "the last down puts the hugepages back"
else
	fail_case "hugepages back to $hp_start (now $(cat /proc/sys/vm/nr_hugepages))" "$out"
fi

# ---- the privilege split --------------------------------------------------------------------------

ha "$ns_a" up "$xa" --hugepages off
want "up A for the transfers" 0 "up: $xa"
ha "$ns_b" up "$xb" --hugepages off
want "up B for the transfers" 0 "up: $xb"
# Both namespaces share one profile path here, so each up rewrote it with both interfaces: one
# node profile naming two interfaces, as on a host with two NICs.
grep -qx "HARP_IFNAME==$xa,$xb" "$conf" || fail_case "one profile, two interfaces" "$(cat "$conf")"

# Every capability this kernel knows but CAP_NET_RAW and CAP_IPC_LOCK (CAP_BPF, CAP_SYS_ADMIN and
# CAP_NET_ADMIN among them) leaves the bounding set of the transfer's processes.
unprivileged=$(capsh --print | sed -n 's/^Bounding set =//p' | tr ',' '\n' |
	grep -vx 'cap_net_raw\|cap_ipc_lock' | paste -sd,)
[[ $unprivileged == *cap_bpf* && $unprivileged == *cap_sys_admin* && $unprivileged == *cap_net_admin* ]] ||
	fail_case "the capabilities to drop" "$unprivileged"
xfer_pair split "$unprivileged"
if ((rc_s == 0 && rc_c == 0)) && grep -q "^verified_bytes=4210688" "$tmp/split.server" &&
	grep -q "using the XDP program harp-attach attached to $xb" "$tmp/split.server" &&
	grep -q "using the XDP program harp-attach attached to $xa" "$tmp/split.client"; then
	pass "with only CAP_NET_RAW and CAP_IPC_LOCK: 4210688 bytes verified through the pinned maps"
else
	fail_case "unprivileged transfer (server $rc_s, client $rc_c)" "$(tail -n 5 "$tmp/split.server" "$tmp/split.client")"
fi

xfer_pair noraw "$unprivileged,cap_net_raw"
if ((rc_s != 0)) && grep -q "AF_XDP sockets need CAP_NET_RAW" "$tmp/noraw.server"; then
	pass "without CAP_NET_RAW too: refused, naming CAP_NET_RAW"
else
	fail_case "no CAP_NET_RAW (server $rc_s)" "$(tail -n 5 "$tmp/noraw.server")"
fi

xfer_pair ports "$unprivileged" HARP_PORT_BASE=48000
if ((rc_s != 0)) && grep -q "steers UDP ports 47000-47063, but harp here uses 48000-48063" "$tmp/ports.server"; then
	pass "a port range the program does not steer is refused, naming both"
else
	fail_case "port range mismatch (server $rc_s)" "$(tail -n 5 "$tmp/ports.server")"
fi

# Replace harp's program behind its back: the pinned maps no longer belong to what runs.
in_ns "$ns_b" xdp-loader unload "$xb" --all >/dev/null 2>&1
xfer_pair stale "$unprivileged"
if ((rc_s != 0)) && grep -q "belong to XDP program id [0-9]*, but $xb runs none.*run .harp-attach up $xb. again" "$tmp/stale.server"; then
	pass "a detached program is noticed, with the fix"
else
	fail_case "stale pins (server $rc_s)" "$(tail -n 5 "$tmp/stale.server")"
fi
ha "$ns_b" status "$xb"
want "status sees it" 1 "program   none"
ha "$ns_b" up "$xb" --hugepages off
want "up repairs it" 0 "up: $xb \(native XDP, 1 queue\)"
xfer_pair repaired "$unprivileged"
if ((rc_s == 0 && rc_c == 0)) && grep -q "^verified_bytes=4210688" "$tmp/repaired.server"; then
	pass "after the repair the unprivileged transfer works again"
else
	fail_case "after repair (server $rc_s, client $rc_c)" "$(tail -n 5 "$tmp/repaired.server" "$tmp/repaired.client")"
fi

ha "$ns_b" down "$xb"
xfer_pair nopins "$unprivileged" HARP_PIN_ROOT="$pins"
if ((rc_s != 0)) && grep -q "loading XDP needs CAP_BPF and CAP_NET_ADMIN: .*harp-attach up IFNAME" "$tmp/nopins.server"; then
	pass "no pinned maps and no privilege: told to run harp-attach"
else
	fail_case "no pins, no privilege (server $rc_s)" "$(tail -n 5 "$tmp/nopins.server")"
fi
ha "$ns_a" down "$xa"

echo "attach: $failures failure(s)"
((failures == 0))
