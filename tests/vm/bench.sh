#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# harp beside the kernel's TCP in two virtio-net guests (guest/bench.sh): prints each round's
# figures. A benchmark, not a test.
#
#   tests/vm/bench.sh [--queues N] [--device OPTS] [--qemu WHICH] [--rounds N] [--mem MB]
#                     [--ncclsock SO]
#     defaults: 2 queues, rss=on,iommu_platform=on (zero copy allowed), backports, 3 rounds,
#     512 MiB guests (1024 with --ncclsock: libnccl.so.2 rides in the initramfs; either keeps
#     virtio_net's transmit header address outside guest memory, tests/vm/README.md)
#   --ncclsock SO   also NCCL's own socket transport, as ../shared/tools/ncclsock builds it
#                   (make -C ../shared/tools/ncclsock), beside harp's NCCL plugin: harp-perf
#                   streams through both. The plugin loads NCCL_LIB (default
#                   /usr/local/cuda/lib/libnccl.so.2), which goes into the guests too.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
queues=2 device=rss=on,iommu_platform=on rounds=3 mem="" ncclsock=""
while (($#)); do
	case $1 in
	--queues) queues=${2:?} && shift ;;
	--device) device=${2:?} && shift ;;
	--qemu) VM_QEMU=${2:?} && shift ;;
	--rounds) rounds=${2:?} && shift ;;
	--mem) mem=${2:?} && shift ;;
	--ncclsock) ncclsock=$(realpath "${2:?}") && shift ;;
	*)
		sed -n '4,15s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
		exit 2
		;;
	esac
	shift
done
VM_ARGS="rounds=$rounds" VM_MEM=${mem:-512} VM_FILES=""
if [[ -n $ncclsock ]]; then
	nccl_lib=${NCCL_LIB:-/usr/local/cuda/lib/libnccl.so.2}
	[[ -r $ncclsock && -r $nccl_lib ]] || {
		echo "vm bench: cannot read $ncclsock or $nccl_lib" >&2
		exit 2
	}
	VM_ARGS+=" ncclsock=$ncclsock" VM_MEM=${mem:-1024} VM_FILES="$ncclsock $nccl_lib"
fi
export VM_QEMU VM_ARGS VM_MEM VM_FILES
# shellcheck source=tests/vm/vm.sh
source "$here/vm.sh"
trap vm_cleanup EXIT
vm_init
vm_pair "$here/guest/bench.sh" "$device" "$queues"
rc=0
vm_wait_all 900 || rc=1
grep -h '^bench:' "$(vm_log a)" "$(vm_log b)" | sort -k2,2n -k3
exit "$rc"
