# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# Guest scenario (tests/vm/xfer.sh --guest attach): each guest is a node prepared with
# harp-attach, as a DaemonSet would prepare it, on its virtio-net NIC:
#   1. `harp-attach up eth0`, then `harp-attach status eth0`, which must exit 0;
#   2. a verified harp-xfer transfer both ways that uses the program and maps harp-attach pinned
#      (harp must say so), with the kernel's ping beside it;
#   3. `harp-attach down eth0`: no XDP program is left on eth0, status exits non-zero, and the
#      kernel's own traffic still flows.
# Words of hvm_args:
#   conns=N             connections of the transfer (default 4)
#   mode=MODE           harp must report AF_XDP mode MODE (zerocopy or copy)
#   quirks=0            HARP_ZEROCOPY_QUIRKS=0 (guest/xfer.sh says why)
set -e

conns=4
for w in ${hvm_args//,/ }; do
	case $w in
	conns=*) conns=${w#conns=} ;;
	*) hvm_common_word "$w" || hvm_fail "unknown scenario word '$w'" ;;
	esac
done
role=$hvm_role
conf=/tmp/harp/harp.conf
attach() {
	"$hvm_source/scripts/harp-attach" --bpf-object "$hvm_build/bpf/harp_xdp.bpf.o" \
		--agent "$hvm_build/harp-agent" --conf "$conf" "$@"
}

attach up eth0 >/tmp/up.out 2>&1 || { cat /tmp/up.out; hvm_fail "harp-attach up eth0 failed"; }
sed 's/^/[up] /' /tmp/up.out
attach status eth0 >/tmp/status.out 2>&1 || {
	cat /tmp/status.out
	hvm_fail "harp-attach status exited non-zero right after up"
}
sed 's/^/[status] /' /tmp/status.out
ip link show eth0 | grep -q 'xdp' || hvm_fail "no XDP program on eth0 after up"

# harp reads the node profile up wrote, and uses the pinned program and maps
export HARP_CONF=$conf HARP_LOG_LEVEL=info
hvm_barrier attached
if [ $role = client ]; then
	hvm_ping_start 60
fi
hvm_xfer $role a1 --conns "$conns" --sizes 1M --count 8 --bidir --timeout 120 ||
	hvm_fail "the transfer over the attached interface failed"
grep -q 'steer: using the XDP program harp-attach attached to eth0' /tmp/a1.out ||
	hvm_fail "harp did not use the program harp-attach attached"
mode=$(sed -n 's/^mode=//p' /tmp/a1.out | tail -n 1)
echo "attach: $role verified $(sed -n 's/^verified_bytes=//p' /tmp/a1.out | tail -n 1) bytes" \
	"through the pinned program, AF_XDP $mode mode"
if [ -n "$hvm_want_mode" ] && [ "$mode" != "$hvm_want_mode" ]; then
	hvm_fail "AF_XDP mode $mode, expected $hvm_want_mode"
fi
if [ $role = client ]; then
	hvm_ping_stop attach
	echo "attach: $hvm_ping_result beside harp"
fi
hvm_barrier transferred

attach down eth0 >/tmp/down.out 2>&1 || { cat /tmp/down.out; hvm_fail "harp-attach down eth0 failed"; }
sed 's/^/[down] /' /tmp/down.out
if ip link show eth0 | grep -q 'xdp'; then
	ip link show eth0
	hvm_fail "an XDP program is still on eth0 after down"
fi
if attach status eth0 >/tmp/status2.out 2>&1; then
	cat /tmp/status2.out
	hvm_fail "harp-attach status exited 0 after down"
fi
echo "attach: $role: down left no XDP program, and status says eth0 is not attached"
# the kernel's stack alone on the NIC again: the web server carries the last barrier
hvm_end
