#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# harp beside the kernel's TCP in two virtio-net guests (guest/bench.sh): prints each round's
# figures. A benchmark, not a test.
#
#   tests/vm/bench.sh [--queues N] [--device OPTS] [--qemu WHICH] [--rounds N]
#     defaults: 2 queues, rss=on,iommu_platform=on (zero copy allowed), backports, 3 rounds
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
queues=2 device=rss=on,iommu_platform=on rounds=3
while (($#)); do
	case $1 in
	--queues) queues=${2:?} && shift ;;
	--device) device=${2:?} && shift ;;
	--qemu) VM_QEMU=${2:?} && shift ;;
	--rounds) rounds=${2:?} && shift ;;
	*)
		sed -n '4,8s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
		exit 2
		;;
	esac
	shift
done
VM_ARGS="rounds=$rounds"
export VM_QEMU VM_ARGS
# shellcheck source=tests/vm/vm.sh
source "$here/vm.sh"
trap vm_cleanup EXIT
vm_init
vm_pair "$here/guest/bench.sh" "$device" "$queues"
rc=0
vm_wait_all 900 || rc=1
grep -h '^bench:' "$(vm_log a)" "$(vm_log b)" | sort -k2,2n -k3
exit "$rc"
