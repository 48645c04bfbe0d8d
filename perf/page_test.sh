#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# perf/page in short, as ctest's perf_page runs it: the quick preset, two runs of each family
# in turn, one case (latency). Then its page: the IPv6 section says how it was made, and each of
# its cells is the median of the runs' own records, read here from their results.jsonl.
#
#   perf/page_test.sh DIR [RUN_ARGS...]   (RUN_ARGS go to every perf/run)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?perf/page_test.sh DIR [RUN_ARGS...]}
shift
rm -rf "$out"
rc=0
"$here/page" --quick --pairs 2 --only latency --out "$out" --page "$out/RESULTS.md" \
	-- "$@" || rc=$?
if ((rc)); then
	echo "perf_page: perf/page exited $rc" >&2
	exit "$rc"
fi
python3 - "$out" "$here" <<'EOF'
import json, os, re, sys
out, here = sys.argv[1], sys.argv[2]
sys.path.insert(0, here)
import results_page as P

page = open(os.path.join(out, "RESULTS.md")).read()
bad = []
m = re.search(r"^## Over IPv6\n(.*?)(?=^## |^<!-- gpu-runs|\Z)", page, re.M | re.S)
if not m:
    sys.exit("perf_page: the page has no section 'Over IPv6'")
section = m.group(1)
if "IPv6 first, 2 and 2 times" not in " ".join(section.split()):
    bad.append("the section does not say it holds 2 runs of each family")
if not re.search(r"^    perf/page --quick --pairs 2 ", page, re.M):
    bad.append("the page's regenerate line is not the perf/page command")
for name, family in (("ipv6-1", "ipv6"), ("ipv4-1", "ipv4"), ("ipv6-2", "ipv6"),
                     ("ipv4-2", "ipv4")):
    with open(os.path.join(out, name, "config.json")) as f:
        got = json.load(f).get("family")
    if got != family:
        bad.append("%s ran over %s, not %s" % (name, got, family))

def records(name):
    with open(os.path.join(out, name, "results.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]

def harp(name, **want):
    hits = [r for r in records(name) if all(r.get(k) == v for k, v in want.items())]
    if len(hits) != 1:
        sys.exit("perf_page: %s has %d records of %s" % (name, len(hits), want))
    return hits[0]

cases = [("round trip p50, 8 B, MTU 1500 (us)", "p50_us",
          dict(tool="harp-perf", test="pingpong", role="client", label="latency", size=8,
               mtu=1500))]
rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")
        for line in section.splitlines() if line.startswith("| ")}
for case, key, want in cases:
    row = rows.get(case)
    if not row:
        bad.append("no row '%s'" % case)
        continue
    for col, runs in ((1, ("ipv4-1", "ipv4-2")), (2, ("ipv6-1", "ipv6-2"))):
        vals = [harp(r, **want)[key] for r in runs]
        cell = "%s (%s..%s)" % (P.num(sum(vals) / 2), P.num(min(vals)), P.num(max(vals)))
        if row[col] != cell:
            bad.append("%s, column %d: '%s', the runs' records give '%s'" % (
                case, col, row[col], cell))
for b in bad:
    print("perf_page: " + b, file=sys.stderr)
if bad:
    sys.exit(1)
print("perf_page: the IPv6 section holds the medians of %d cases over 2 runs a family" %
      len(cases))
EOF
