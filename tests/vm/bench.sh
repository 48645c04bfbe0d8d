#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# harp beside the kernel's TCP in two virtio-net guests (guest/bench.sh): prints each round's
# figures. A benchmark, not a test.
#
#   tests/vm/bench.sh [--queues N] [--device OPTS] [--qemu WHICH] [--rounds N] [--mem MB]
#                     [--nccl]
#     defaults: 2 queues, rss=on,iommu_platform=on (zero copy allowed), backports, 3 rounds,
#     512 MiB guests (1024 with --nccl: libnccl.so.2 rides in the initramfs; either keeps
#     virtio_net's transmit header address outside guest memory, tests/vm/README.md)
#   --nccl          also NCCL's own socket transport beside harp's NCCL plugin: harp-perf
#                   streams through both (--plugin nccl-socket, perf/nccl_socket.c). The
#                   libnccl.so.2 that `harp-perf nccl-socket` finds here (NCCL_LIB names it)
#                   goes into the guests at the same path.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
queues=2 device=rss=on,iommu_platform=on rounds=3 mem="" nccl=""
while (($#)); do
	case $1 in
	--queues) queues=${2:?} && shift ;;
	--device) device=${2:?} && shift ;;
	--qemu) VM_QEMU=${2:?} && shift ;;
	--rounds) rounds=${2:?} && shift ;;
	--mem) mem=${2:?} && shift ;;
	--nccl) nccl=1 ;;
	*)
		sed -n '4,15s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
		exit 2
		;;
	esac
	shift
done
# shellcheck source=tests/vm/vm.sh
source "$here/vm.sh"
VM_ARGS="rounds=$rounds" VM_MEM=${mem:-512} VM_FILES=""
if [[ -n $nccl ]]; then
	# harp-perf says which libnccl.so.2 it loads, or where it looked and how to name one
	found=$("$vm_build/harp-perf" nccl-socket 2>&1) || {
		echo "vm bench: --nccl: NCCL's socket transport cannot run here:" >&2
		echo "$found" | sed 's/^harp-perf: /    /' >&2
		exit 2
	}
	# "harp-perf: NCCL X.Y.Z's socket transport (PATH, net API vN)"
	nccl_lib=$(echo "$found" | sed -n 's/.*(\(.*\), net API v[0-9]*)$/\1/p')
	nccl_lib=$(realpath "$nccl_lib" 2>/dev/null) || nccl_lib=""
	[[ -n $nccl_lib && -r $nccl_lib ]] || {
		echo "vm bench: --nccl: no library path in harp-perf's answer: $found" >&2
		exit 2
	}
	echo "vm bench: ${found#harp-perf: }" >&2
	VM_ARGS+=" nccl-lib=$nccl_lib" VM_MEM=${mem:-1024} VM_FILES=$nccl_lib
fi
export VM_QEMU VM_ARGS VM_MEM VM_FILES
trap vm_cleanup EXIT
vm_init
vm_pair "$here/guest/bench.sh" "$device" "$queues"
rc=0
vm_wait_all 900 || rc=1
grep -h '^bench:' "$(vm_log a)" "$(vm_log b)" | sort -k2,2n -k3
exit "$rc"
