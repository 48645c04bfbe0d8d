#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The whole GPU check in one command, meant to finish in under 5 minutes on a GPU machine's
# device time: tests/gpu/nccl_allreduce.sh at MTU 9000 and 1500, with the veth pair at 1 and at
# 4 queues, all-reduce of 16, 64 and 256 MiB through harp (host buffers; engine threads and
# stripes where the cores allow, as by default), harp-serial (the same with HARP_ENGINE_THREADS=off:
# one connection a comm, the engines on NCCL's proxy thread), harp-cuda (HARP_CUDA=on) and NCCL's
# socket transport, and all-gather at MTU 9000 with 4 queues; 3 timed iterations a size. Every result is verified and every case proved by NCCL's own log (nccl_allreduce.sh).
#
#   bash .gpu/env.sh tests/gpu/check.sh [--logs DIR] [--cases LIST] [--iters N]
#     --logs   every rank's logs, one folder per setting, and records.jsonl: the figures as
#              harp-gpu/1 records, to append to perf/gpu/ (default $OUT when the device tool sets
#              it, else /tmp/harp-gpu-check.PID)
#     --cases  default harp,harp-serial,harp-cuda,socket       --iters  default 3
#
# Exits 0 when every setting passed, 1 otherwise, 77 when there is no GPU here.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
logs=${OUT:-/tmp/harp-gpu-check.$$} cases=harp,harp-serial,harp-cuda,socket iters=3
while (($#)); do
	case $1 in
	--logs) logs=${2:?} && shift ;;
	--cases) cases=${2:?} && shift ;;
	--iters) iters=${2:?} && shift ;;
	*)
		sed -n '10,13s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
		exit 2
		;;
	esac
	shift
done
mkdir -p "$logs"
fail=0 start=$SECONDS
# setting MTU QUEUES OPS
setting() {
	local dir=$logs/mtu$1-q$2 rc=0 t=$SECONDS
	echo "=== MTU $1, $2 queue(s), $3"
	"$here/nccl_allreduce.sh" --mtu "$1" --queues "$2" --ops "$3" --sizes 16M,64M,256M \
		--cases "$cases" --iters "$iters" --logs "$dir" --out "$logs/records.jsonl" || rc=$?
	((rc == 77)) && exit 77
	echo "=== MTU $1, $2 queue(s): $( ((rc)) && echo FAILED || echo passed) in $((SECONDS - t)) s"
	((rc == 0)) || fail=1
}
setting 9000 4 allreduce,allgather
setting 9000 1 allreduce
setting 1500 4 allreduce
setting 1500 1 allreduce
echo "gpu check: $( ((fail)) && echo FAILED || echo passed) in $((SECONDS - start)) s; logs in $logs"
echo "gpu check: to record the figures: cat $logs/records.jsonl >>perf/gpu/runs.jsonl &&" \
	"perf/results_page.py gpu perf/RESULTS.md"
exit "$fail"
