#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Two QEMU guests with virtio-net NICs on a bridge (tests/vm/vm.sh) run a guest scenario: by default
# guest/xfer.sh (verified harp transfers between them, and what each must show), or
# guest/plugin.sh (NCCL's net plugin between them, driven as NCCL drives it), or guest/attach.sh
# (each guest a node prepared with harp-attach up, then down).
#
#   tests/vm/xfer.sh [options] -- WORDS...
#     --queues N        virtio-net queue pairs per NIC, all in use (default 2)
#     --device OPTS     added to QEMU's virtio-net-pci device: rss=on (QEMU's Toeplitz RSS with
#                       the guest's indirection table), iommu_platform=on (VIRTIO_F_ACCESS_PLATFORM,
#                       which virtio-net's zero copy needs)
#     --qemu WHICH      backports (default) or debian (Debian 12's QEMU 7.2)
#     --limit SEC       the guests' time limit (default 300)
#     --mem MB          each guest's memory (default 1024; zero copy runs with 512, README.md)
#     --mtu N           the MTU of the guests' NICs, the taps and the bridge (default 1500)
#     --verbose         print both consoles whole (every counter harp-xfer printed) on success too
#     --guest NAME      the guest scenario: xfer (default), plugin or attach (guest/NAME.sh)
#   WORDS are the guest scenario's words (guest/xfer.sh: conns=1+8, bidir, mode=zerocopy, ...;
#   guest/plugin.sh: versions=12+8, scenarios=basic+many, ...; guest/attach.sh: conns=4, ...).
#
# Exits 0 when both guests' scenarios passed, 1 otherwise (both consoles printed), 77 when it
# cannot run here (not root, QEMU missing).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
queues=2 device="" limit=300 verbose=0 guest=xfer
while (($#)); do
	case $1 in
	--queues) queues=${2:?} && shift ;;
	--device) device=${2:?} && shift ;;
	--qemu) VM_QEMU=${2:?} && shift ;;
	--limit) limit=${2:?} && shift ;;
	--mem) VM_MEM=${2:?} && shift ;;
	--mtu) VM_MTU=${2:?} && shift ;;
	--verbose) verbose=1 ;;
	--guest) guest=${2:?} && shift ;;
	--)
		shift
		break
		;;
	*)
		sed -n '4,23s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
		exit 2
		;;
	esac
	shift
done
words=("$@")
VM_ARGS="${words[*]}"
export VM_QEMU VM_ARGS VM_MEM VM_MTU

# shellcheck source=tests/vm/vm.sh
source "$here/vm.sh"
trap vm_cleanup EXIT
vm_init
[[ -f $here/guest/$guest.sh ]] || {
	echo "vm xfer: no guest scenario $here/guest/$guest.sh" >&2
	exit 2
}
vm_pair "$here/guest/$guest.sh" "$device" "$queues"
rc=0
vm_wait_all "$limit" || rc=1
if ((rc == 0)); then
	for g in a b; do
		if ((verbose)); then
			cat "$(vm_log $g)"
		else
			grep -E '^(guest |run [0-9]|v[0-9]+-[a-z-]+: |attach: |\[zerocopy demanded\] harp|\[x[0-9]+ [a-z]+\] harp: (WARN|ERROR))' \
				"$(vm_log $g)" || true
		fi
	done
	echo "vm xfer: passed (${words[*]})"
else
	# the consoles above can be long, and CI keeps only the head and the tail of a log: the
	# failure's reason and harp's warnings once more, last
	for g in a b; do
		grep -E '^(FAIL \(|\[x[0-9]+ [a-z]+\] harp: (WARN|ERROR)|run [0-9])' "$(vm_log $g)" 2>/dev/null |
			sed "s/^/summary, guest $g: /" || true
	done
	echo "vm xfer: FAILED (${words[*]})"
fi
exit "$rc"
