#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# A fresh Debian 12 machine, as a new user has one: harp's tree as a clone holds it (the files git
# tracks, and those it does not ignore) in a container of the bare base image (base.sh), where
#   1. scripts/setup.sh installs what it needs and builds into /build, a build directory away from
#      the source (BUILD_DIR), as any `cmake -B` may put it;
#   2. every tool the tests call is on PATH, and the configure step left nothing out (CMake says
#      "not usable", "will skip", "missing" or "not found", or warns, when it does: the fuzz tests
#      without clang's libFuzzer runtime did);
#   3. the unit and fuzz tests pass there with none skipped, run from the build directory (each
#      fuzzer for 3 s, HARP_FUZZ_SECONDS: that they build and run is what a fresh machine can
#      get wrong; the host's own fuzz tests fuzz for their full time).
#
#   fresh.sh --repo DIR
#
# The container shares this machine's network to reach its apt mirror. Exits 0 if every step
# held, 1 if one did not (its output's tail says which), 2 on bad usage.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/../netns/lib.sh"
# shellcheck source=tests/container/base.sh
source "$here/base.sh"

repo=""
while (($#)); do
	case $1 in
	--repo) repo=${2:?} && shift ;;
	*) echo "fresh: unknown argument '$1'" >&2 && sed -n '13s/^# \{0,1\}//p' "$0" >&2 && exit 2 ;;
	esac
	shift
done
[[ -f $repo/scripts/setup.sh ]] || { echo "fresh: --repo names harp's source" >&2; exit 2; }
repo=$(realpath "$repo")
for t in podman runc debootstrap tar git; do
	command -v "$t" >/dev/null ||
		{ echo "fresh: missing $t (scripts/setup.sh installs podman, runc and debootstrap)"; exit 1; }
done
((EUID == 0)) || { echo "fresh: needs root (podman, debootstrap)"; exit 1; }

one_container fresh

base_image fresh || exit 1

# the tree as a clone has it: no build directory, no cache, nothing git ignores
git -C "$repo" ls-files -z --cached --others --exclude-standard |
	(cd "$repo" && tar --null -T - -cf "$tmp/src.tar")

# What the tests call, beside the compilers (the build proves those): each must be found.
tools="ip tc nft ethtool xdp-loader bpftool iperf3 sockperf python3 gnuplot valgrind npm capsh
podman runc debootstrap qemu-system-x86_64 busybox cpio xz ping"
cat >"$tmp/inside.sh" <<INSIDE
set -euo pipefail
mkdir /src && tar -xf /src.tar -C /src
cd /src
echo "fresh: setup.sh, building into /build"
BUILD_DIR=/build scripts/setup.sh 2>&1 | tee /setup.log
missing=""
for t in $(echo $tools); do
	command -v "\$t" >/dev/null || missing+=" \$t"
done
[[ -z \$missing ]] || { echo "fresh: FAIL tools missing after setup.sh:\$missing"; exit 1; }
# CMake's own lines: "-- ..." status, and warnings
if grep -E '^-- .*(not usable|will skip|[Mm]issing|NOT found|not found)|^CMake Warning' /setup.log; then
	echo "fresh: FAIL the configure step left something out (the lines above)"
	exit 1
fi
echo "fresh: unit and fuzz tests from /build"
cmake -B /build -DHARP_FUZZ_SECONDS=3 >/dev/null
ctest --test-dir /build -L 'unit|fuzz' -j "\$(nproc)" --output-on-failure 2>&1 | tee /ctest.log
if grep -E '\((Skipped|Disabled|Not Run)\)|Not Run' /ctest.log; then
	echo "fresh: FAIL tests skipped (the lines above)"
	exit 1
fi
grep -q '100% tests passed' /ctest.log || { echo "fresh: FAIL unit or fuzz tests failed"; exit 1; }
echo "fresh: setup, tools, configure, unit and fuzz tests all held"
INSIDE

rc=0
run_bounded 3000 "${pm[@]}" run --name "$name" --network host --privileged "${limits[@]}" \
	-v "$tmp/src.tar:/src.tar:ro" -v "$tmp/inside.sh:/inside.sh:ro" "$base" \
	bash /inside.sh >"$tmp/run.log" 2>&1 || rc=$?
if ((rc)); then
	echo "fresh: FAIL (exit $rc); the container's last lines:"
	grep -E '^fresh:' "$tmp/run.log" | sed 's/^/    | /' || true
	tail -n 25 "$tmp/run.log" | sed 's/^/    | /'
	exit 1
fi
grep -E '^fresh:' "$tmp/run.log"
grep -E 'tests passed|Total Test time' "$tmp/run.log" | tail -n 2
