#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The long RSS round, run in a loop outside CI: two guests with 2-queue virtio-net NICs under
# QEMU's Toeplitz RSS, copy mode, 2 GiB each, two connections moving data both ways (the case in
# which a connection once died with every path dark: issue 37, docs/PROTOCOL.md "Paths"), run
# after run until RUNS have passed or one fails. Each run's harp figures that tell how paths
# fared (timeouts, paths retired and rescued, probes) are printed on one line; a failed run's
# whole console is kept.
#
#   tests/vm/rss_loop.sh [--runs N] [--count N] [--keep DIR] [--all]
#     --runs N    runs (default 20; each about 30 s at --count 64 on a 2-core host)
#     --count N   1 MiB messages per connection and direction (default 256)
#     --keep DIR  where failed runs' consoles go (default /tmp/harp-rss-loop.PID)
#     --all       go on after a failure, to count how often it fails
#
# Exits 0 when every run passed, 1 otherwise, 77 when the guests cannot run here.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
runs=20 count=256 keep=/tmp/harp-rss-loop.$$ all=0
while (($#)); do
	case $1 in
	--runs) runs=${2:?} && shift ;;
	--count) count=${2:?} && shift ;;
	--keep) keep=${2:?} && shift ;;
	--all) all=1 ;;
	*)
		sed -n '10,15s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
		exit 2
		;;
	esac
	shift
done
[[ $runs =~ ^[1-9][0-9]*$ && $count =~ ^[1-9][0-9]*$ ]] || {
	echo "rss_loop: --runs and --count take positive whole numbers" >&2
	exit 2
}
mkdir -p "$keep"
log=$(mktemp "${TMPDIR:-/tmp}/harp-rss-loop.XXXXXX")
trap 'rm -f "$log"' EXIT

# sum NAME: NAME= summed over both guests' harp-xfer reports in the run's console
sum() {
	tr -d '\r' <"$log" | sed -n "s/^\\[x[0-9]* [a-z]*\\] $1=\\([0-9]*\\)$/\\1/p" |
		awk '{ s += $1 } END { print s + 0 }'
}

passed=0 failed=0 rescued_runs=0
for ((i = 1; i <= runs; i++)); do
	start=$SECONDS rc=0
	"$here/xfer.sh" --queues 2 --device rss=on --mem 2048 --verbose --limit 600 \
		-- conns=2 bidir size=1M count="$count" mode=copy >"$log" 2>&1 || rc=$?
	((rc == 77)) && { cat "$log"; exit 77; }
	line="timeouts=$(sum timeouts) paths_retired=$(sum paths_retired)"
	line+=" paths_rescued=$(sum paths_rescued) probes_sent=$(sum probes_sent)"
	(($(sum paths_rescued) > 0)) && rescued_runs=$((rescued_runs + 1))
	if ((rc == 0)); then
		passed=$((passed + 1))
		echo "rss_loop: run $i passed in $((SECONDS - start)) s: $line"
		continue
	fi
	failed=$((failed + 1))
	cp "$log" "$keep/run-$i.log"
	echo "rss_loop: run $i FAILED in $((SECONDS - start)) s: $line; console in $keep/run-$i.log"
	grep -hE 'harp: (ERROR|WARN)|^FAIL' "$log" | sort -u | head -n 20 || true
	((all)) || break
done
echo "rss_loop: $passed passed, $failed failed of $((passed + failed)) runs" \
	"($rescued_runs with paths rescued)"
((failed == 0))
