#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Real NCCL through libnccl-net-harp.so, on a machine with one GPU: two ranks on that GPU made to
# look like two nodes (NCCL_HOSTID differs per rank), each in its own network namespace, joined
# by a veth pair. All-reduce and all-gather (torch.distributed) run through four transports, one
# after the other on the same veth:
#   harp        NCCL_NET_PLUGIN=harp, host buffers (NCCL stages GPU data: HARP_CUDA off); where
#               the rank may use 2 x queues + 2 CPUs each engine runs on a thread of its own and
#               each comm stripes over every engine (HARP_ENGINE_THREADS, HARP_STRIPES: auto)
#   harp-serial the same with HARP_ENGINE_THREADS=off: the engines take turns on NCCL's proxy
#               thread and a comm has one connection (harp before engine threads and stripes)
#   harp-cuda   the same with HARP_CUDA=on: GPU buffers copied straight into harp's frames
#               (NCCL_NET_GDR_LEVEL=SYS: veth has no PCI path, so NCCL would not use them)
#   socket      NCCL's own socket transport at its defaults
#   socket16    the same with NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4
# Each result is checked; NCCL_DEBUG=INFO lines prove which transport ran (and, for harp-cuda,
# that NCCL used the plugin's GPU-memory path: GDRDMA); bus bandwidths print side by side.
#
#   tests/gpu/nccl_allreduce.sh [--sizes LIST] [--mtu N] [--queues N] [--cases LIST] [--ops LIST]
#                               [--iters N] [--out F] [--logs DIR]
#     --sizes  default 1K,4K,16K,64K,256K,1M,4M,16M,64M,256M
#     --queues queue pairs of the veth pair (default 1; harp uses them all)
#     --cases  default harp,harp-serial,harp-cuda,socket,socket16
#     --ops    default allreduce,allgather
#     --iters  timed iterations a size (default 10; 3 warm-up ones before them)
#     --out    rank 0's figures appended as harp-gpu/1 records, the form perf/gpu/ keeps for the
#              results page (perf/results_page.py gpu perf/RESULTS.md)
#     --logs   keep every rank's logs there: NAME.rankR.out (its JSON lines), .err (its stderr:
#              harp's lines, Python's), .nccl (NCCL_DEBUG's lines, which NCCL writes to
#              NCCL_DEBUG_FILE, else to stdout, where an aborting rank loses them)
#
# Needs root, a GPU, python3 with torch (CUDA), and a build with the plugin (BUILD_DIR, default
# build). Exits 0 when every run was right and used the transport it names, 1 otherwise, 77 when
# this machine cannot run it (no GPU, no torch). Not part of ctest: CI machines have no GPU.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=tests/netns/lib.sh
source "$root/tests/netns/lib.sh"

sizes=1K,4K,16K,64K,256K,1M,4M,16M,64M,256M mtu=1500 cases=harp,harp-serial,harp-cuda,socket,socket16
ops=allreduce,allgather out="" queues=1 iters=10 logs=""
while (($#)); do
	case $1 in
	--sizes) sizes=${2:?} && shift ;;
	--mtu) mtu=${2:?} && shift ;;
	--queues) queues=${2:?} && shift ;;
	--iters) iters=${2:?} && shift ;;
	--logs) logs=${2:?} && shift ;;
	--cases) cases=${2:?} && shift ;;
	--ops) ops=${2:?} && shift ;;
	--out) out=${2:?} && shift ;;
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
topo_pair "$mtu" "$queues" || exit
# keep_logs: the ranks' logs to --logs, whatever happened (on every exit)
# shellcheck disable=SC2317 # called from the EXIT trap
keep_logs() {
	[[ -n $logs ]] || return 0
	mkdir -p "$logs"
	cp "$tmp"/*.rank* "$logs"/ 2>/dev/null || true
}
trap 'keep_logs; harness_cleanup' EXIT

# run_case NAME OP ENV...: both ranks with ENV added; their JSON lines in $tmp/NAME-OP.rank*.out.
run_case() {
	local name=$1-$2 op=$2 port=$((29500 + RANDOM % 1000)) r pid rc=0
	shift 2
	local rank_pids=()
	for r in 0 1; do
		local ns=$ns_a ifname=$if_a
		if ((r == 1)); then
			ns=$ns_b ifname=$if_b
		fi
		spawn_bounded 300 ip netns exec "$ns" env \
			NCCL_HOSTID="harp-gpu-test-node$r" NCCL_SOCKET_IFNAME="=$ifname" \
			NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_DEBUG_FILE="$tmp/$name.rank$r.nccl" \
			PYTHONUNBUFFERED=1 LD_LIBRARY_PATH="$plugin_dir:${LD_LIBRARY_PATH:-}" \
			"$@" HARP_IFNAME="=$ifname" \
			python3 "$here/allreduce.py" --rank "$r" --world 2 --master "$ip_a" \
			--port "$port" --sizes "$sizes" --label "$name" --op "$op" --iters "$iters" \
			>"$tmp/$name.rank$r.out" 2>"$tmp/$name.rank$r.err"
		rank_pids+=("$spawned_pid")
		pids+=("$spawned_pid")
	done
	for pid in "${rank_pids[@]}"; do
		wait "$pid" || rc=1
	done
	if ((rc)); then
		for r in 0 1; do
			echo "nccl_allreduce: $name failed; rank $r's stderr and NCCL log end:"
			tail -n 20 "$tmp/$name.rank$r.err" | sed 's/^/    | /'
			tail -n 10 "$tmp/$name.rank$r.nccl" 2>/dev/null | sed 's/^/    nccl | /'
		done
	fi
	return "$rc"
}

# case_env NAME: the environment of a case (array env_of).
env_of=()
case_env() {
	case $1 in
	harp) env_of=(NCCL_NET_PLUGIN=harp) ;;
	harp-serial) env_of=(NCCL_NET_PLUGIN=harp HARP_ENGINE_THREADS=off) ;;
	harp-cuda) env_of=(NCCL_NET_PLUGIN=harp HARP_CUDA=on NCCL_NET_GDR_LEVEL=SYS) ;;
	socket) env_of=(NCCL_NET_PLUGIN=none NCCL_NET=Socket) ;;
	socket16) env_of=(NCCL_NET_PLUGIN=none NCCL_NET=Socket NCCL_SOCKET_NTHREADS=4
		NCCL_NSOCKS_PERTHREAD=4) ;;
	*)
		echo "nccl_allreduce: no case '$1' (harp, harp-serial, harp-cuda, socket, socket16)" >&2
		exit 2
		;;
	esac
}

# proves NAME-OP: rank 0's NCCL log shows the transport the case names.
proves() {
	local log=$tmp/$1-$2.rank0.nccl want
	case $1 in
	harp | harp-serial | harp-cuda) want='Using network HARP' ;;
	*) want='Using network Socket' ;;
	esac
	if ! grep -q "$want" "$log" 2>/dev/null; then
		echo "nccl_allreduce: FAIL: $1 $2: rank 0's log has no '$want':"
		grep -E 'NET/|Using network' "$log" | head -n 10 | sed 's/^/    | /'
		return 1
	fi
	if [[ $1 == harp* ]]; then
		# what harp ran on: threads or not, stripes per comm (the device line, the comms')
		echo "nccl_allreduce: $1 $2: $(grep -o 'queues\? (an engine each, [^)]*), a comm over [0-9]* connection' \
			"$log" | head -n 1); $(grep -c 'stripes, on queues' "$log") striped comms;" \
			"$(grep -o '[0-9]* coll channels' "$log" | head -n 1)"
	fi
	if [[ $1 == harp-cuda ]] && ! grep -q 'GDRDMA' "$log"; then
		echo "nccl_allreduce: FAIL: harp-cuda $2: NCCL did not use the plugin's GPU memory" \
			"path (no GDRDMA in its channel lines):"
		grep -E 'HARP_CUDA|GDR|via NET' "$log" | head -n 10 | sed 's/^/    | /'
		return 1
	fi
}

fail=0
IFS=, read -r -a case_list <<<"$cases"
IFS=, read -r -a op_list <<<"$ops"
for op in "${op_list[@]}"; do
	for c in "${case_list[@]}"; do
		case_env "$c"
		run_case "$c" "$op" "${env_of[@]}" || fail=1
		proves "$c" "$op" || fail=1
	done
done
if [[ -n $out ]]; then
	# rank 0's records as perf/gpu/ keeps them (harp-gpu/1: perf/results_page.py gpu)
	machine="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1 |
		sed 's/, / (driver /; s/$/)/'), $(nproc) cores, $(uname -r)"
	commit=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
	python3 - "$tmp" "$out" "$mtu" "$queues" "$machine" "$commit" <<'PY'
import datetime, glob, json, os, sys
tmp, out, mtu, queues, machine, commit = sys.argv[1:7]
run = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
with open(out, "a") as f:
    for path in sorted(glob.glob(os.path.join(tmp, "*.rank0.out"))):
        for line in open(path, errors="replace"):
            if not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
            except ValueError:
                continue
            f.write(json.dumps({
                "schema": "harp-gpu/1", "run": run, "date": run[:10], "machine": machine,
                "commit": commit, "mtu": int(mtu), "queues": int(queues),
                "case": r["label"][:-len(r["test"]) - 1], "test": r["test"], "size": r["size"],
                "iters": r["iters"], "busbw_GBps": round(r["busbw_GBps"], 4),
                "verified": r["verified"], "nccl": r["nccl"], "note": ""}) + "\n")
PY
fi

python3 - "$tmp" "$cases" "$ops" "$mtu" "$queues" <<'PY'
import json, os, sys
tmp, cases, ops = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
mtu, queues = sys.argv[4], sys.argv[5]


def records(path):
    # the rank's JSON lines; anything else a library printed on its stdout is passed over
    if not os.path.exists(path):
        return {}
    out = {}
    for line in open(path, errors="replace"):
        if line.startswith("{"):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            out[r["size"]] = r
    return out


for op in ops:
    runs = {}
    for c in cases:
        runs[c] = records(os.path.join(tmp, "%s-%s.rank0.out" % (c, op)))
    sizes = sorted(set().union(*runs.values()))
    print("%s, bus bandwidth GB/s (rank 0), MTU %s, %s queue(s)" % (op, mtu, queues))
    print("| bytes | " + " | ".join(cases) + " |")
    print("|---|" + "---|" * len(cases))
    for s in sizes:
        cells = []
        for c in cases:
            r = runs[c].get(s)
            cells.append("-" if not r else "%.3f%s" % (r["busbw_GBps"],
                                                      "" if r["verified"] else " WRONG"))
        print("| %d | %s |" % (s, " | ".join(cells)))
    print()
PY
for f in "$tmp"/*.rank*.out; do
	grep -q '"verified": false' "$f" && { echo "nccl_allreduce: FAIL: wrong result in $f"; fail=1; }
done
exit "$fail"
