#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Real NCCL through libnccl-net-harp.so, on a machine with one GPU: two ranks on that GPU made to
# look like two nodes (NCCL_HOSTID differs per rank), each in its own network namespace, joined
# by a veth pair. The all-reduce runs twice: with NCCL_NET_PLUGIN=harp, then with NCCL's own
# socket transport; each result is checked and both bus bandwidths are printed side by side.
#
#   tests/gpu/nccl_allreduce.sh [--sizes LIST] [--mtu N]
#
# Needs root, a GPU, python3 with torch (CUDA), and a build with the plugin (BUILD_DIR, default
# build). Exits 0 when both runs were right and harp's run used the plugin, 1 otherwise, 77 when
# this machine cannot run it (no GPU, no torch). Not part of ctest: CI machines have no GPU.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=tests/netns/lib.sh
source "$root/tests/netns/lib.sh"

sizes=1M,16M,128M mtu=1500
while (($#)); do
	case $1 in
	--sizes) sizes=${2:?} && shift ;;
	--mtu) mtu=${2:?} && shift ;;
	*)
		echo "nccl_allreduce: unknown argument '$1'" >&2
		exit 2
		;;
	esac
	shift
done

build=${BUILD_DIR:-$root/build}
plugin_dir=$build/nccl-net
if [[ ! -f $plugin_dir/libnccl-net-harp.so ]]; then
	echo "nccl_allreduce: no $plugin_dir/libnccl-net-harp.so: build first" >&2
	exit 1
fi
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "nccl_allreduce: no GPU here" >&2
	exit 77
fi
if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
	echo "nccl_allreduce: python3 has no CUDA-enabled torch" >&2
	exit 77
fi

harness_init gpu
topo_pair "$mtu" 1 || exit

# run_case NAME ENV...: both ranks with ENV added; their JSON lines in $tmp/NAME.rank*.out.
run_case() {
	local name=$1 port=$((29500 + RANDOM % 1000)) r pid rc=0
	shift
	local rank_pids=()
	for r in 0 1; do
		local ns=$ns_a ifname=$if_a
		if ((r == 1)); then
			ns=$ns_b ifname=$if_b
		fi
		spawn_bounded 300 ip netns exec "$ns" env \
			NCCL_HOSTID="harp-gpu-test-node$r" NCCL_SOCKET_IFNAME="=$ifname" \
			NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET LD_LIBRARY_PATH="$plugin_dir:${LD_LIBRARY_PATH:-}" \
			"$@" HARP_IFNAME="=$ifname" \
			python3 "$here/allreduce.py" --rank "$r" --world 2 --master "$ip_a" \
			--port "$port" --sizes "$sizes" --label "$name" \
			>"$tmp/$name.rank$r.out" 2>"$tmp/$name.rank$r.err"
		rank_pids+=("$spawned_pid")
		pids+=("$spawned_pid")
	done
	for pid in "${rank_pids[@]}"; do
		wait "$pid" || rc=1
	done
	if ((rc)); then
		echo "nccl_allreduce: $name failed; rank 0's log ends:"
		tail -n 30 "$tmp/$name.rank0.err" | sed 's/^/    | /'
	fi
	return "$rc"
}

fail=0
run_case harp NCCL_NET_PLUGIN=harp || fail=1
# The plugin must have carried the traffic, not NCCL's fallback.
if ! grep -q 'Using network HARP' "$tmp/harp.rank0.err"; then
	echo "nccl_allreduce: FAIL: rank 0 did not use the HARP network:"
	grep -E 'NET/|Using network' "$tmp/harp.rank0.err" | head -n 10 | sed 's/^/    | /'
	fail=1
fi
run_case socket NCCL_NET_PLUGIN=none NCCL_NET=Socket || fail=1
grep -q 'Using network Socket' "$tmp/socket.rank0.err" ||
	{ echo "nccl_allreduce: FAIL: the comparison run did not use NCCL's Socket transport"; fail=1; }

python3 - "$tmp/harp.rank0.out" "$tmp/socket.rank0.out" <<'PY'
import json, sys
runs = [dict((r["size"], r) for r in map(json.loads, open(p))) for p in sys.argv[1:]]
print(f"{'size':>12} {'harp busbw GB/s':>16} {'socket busbw GB/s':>18} {'ratio':>7}")
for size in sorted(runs[0]):
    h, s = runs[0][size], runs[1].get(size)
    sb = s["busbw_GBps"] if s else float("nan")
    print(f"{size:>12} {h['busbw_GBps']:>16.3f} {sb:>18.3f} {h['busbw_GBps'] / sb:>7.2f}"
          f"{'' if h['verified'] and s and s['verified'] else '  WRONG RESULT'}")
PY
for f in "$tmp"/*.rank*.out; do
	grep -q '"verified": false' "$f" && { echo "nccl_allreduce: FAIL: wrong result in $f"; fail=1; }
done
exit "$fail"
