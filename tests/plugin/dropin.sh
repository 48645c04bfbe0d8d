#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The ways NCCL finds the installed plugin (OPERATIONS.md has which NCCL versions take which),
# each proven by harp-net-driver loading it the same way and moving data through it (conformance
# basic, table v12 and v8) with LD_LIBRARY_PATH unset unless the case sets it:
#   full-path   the installed libnccl-net-harp.so by its full path (NCCL_NET_PLUGIN=/.../lib/
#               libnccl-net-harp.so)
#   by-name     libnccl-net-harp.so by name with its directory on LD_LIBRARY_PATH
#               (NCCL_NET_PLUGIN=harp)
#   alias       libnccl-net.so by name with that directory on LD_LIBRARY_PATH (NCCL_NET_PLUGIN
#               unset): the alias the install lays beside the plugin
#   system-dir  libnccl-net.so by name with no LD_LIBRARY_PATH, found in /usr/lib as the plugin
#               layer puts it there (a link to the installed plugin, in a mount namespace of this
#               test's own whose /usr/lib is overlaid with that one link)
#
#   dropin.sh --build DIR --driver BIN
#
# Exits 0 if every case held, 1 if one did not, 2 on bad usage.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build="" driver=""
while (($#)); do
	case $1 in
	--build) build=${2:?} && shift ;;
	--driver) driver=${2:?} && shift ;;
	*) echo "dropin: unknown argument '$1'" >&2 && sed -n '18s/^# \{0,1\}//p' "$0" >&2 && exit 2 ;;
	esac
	shift
done
[[ -d $build && -x $driver ]] || { echo "dropin: --build DIR and --driver BIN are required" >&2; exit 2; }
for t in cmake unshare mount readelf; do
	command -v "$t" >/dev/null || { echo "dropin: missing $t" >&2; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/harp-dropin.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
if ! cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1; then
	echo "dropin: FAIL cmake --install:"
	tail -n 5 "$tmp/install.log"
	exit 1
fi
lib=$(dirname "$(find "$prefix" -name libnccl-net-harp.so -print -quit)")
[[ -f $lib/libnccl-net-harp.so && -L $lib/libnccl-net.so ]] ||
	{ echo "dropin: FAIL the install has no libnccl-net-harp.so with libnccl-net.so beside it"; exit 1; }

fail=0
# run_case NAME ENV... -- CONFORMANCE_ARGS...: conformance through the installed plugin.
run_case() {
	local name=$1 rc=0
	shift
	local envs=()
	while [[ $1 != -- ]]; do
		envs+=("$1")
		shift
	done
	shift
	env -u LD_LIBRARY_PATH "${envs[@]}" "$here/conformance.sh" --plugin "$lib/libnccl-net-harp.so" \
		--driver "$driver" --versions 12,8 --scenarios basic "$@" >"$tmp/$name.log" 2>&1 || rc=$?
	if ((rc == 0)) && grep -q 'result=PASS' "$tmp/$name.log" && ! grep -q 'result=FAIL' "$tmp/$name.log"; then
		echo "dropin: case=$name result=PASS ($(grep -c 'case=.*result=PASS' "$tmp/$name.log") cases, each byte checked)"
	else
		echo "dropin: case=$name result=FAIL (conformance exited $rc)"
		sed 's/^/    | /' "$tmp/$name.log" | tail -n 15
		fail=1
	fi
}

run_case full-path --
run_case by-name LD_LIBRARY_PATH="$lib" -- --load-as libnccl-net-harp.so
run_case alias LD_LIBRARY_PATH="$lib" -- --load-as libnccl-net.so

# system-dir: only when the machine's own /usr/lib has no libnccl-net.so (the case would then
# prove nothing; never on the test machines, where nothing installs one).
if [[ -e /usr/lib/libnccl-net.so ]]; then
	echo "dropin: FAIL system-dir: this machine has its own /usr/lib/libnccl-net.so"
	fail=1
else
	mkdir -p "$tmp/usrlib"
	ln -s "$lib/libnccl-net-harp.so" "$tmp/usrlib/libnccl-net.so"
	# the overlay lives only in this mount namespace: the machine's /usr/lib is untouched
	rc=0
	# shellcheck disable=SC2016 # expanded by the inner bash, from its arguments
	unshare --mount --propagation private env -u LD_LIBRARY_PATH bash -c '
		mount -t overlay harp-dropin -o "lowerdir=$1:/usr/lib" /usr/lib ||
			{ echo "dropin: cannot overlay /usr/lib in a private mount namespace"; exit 3; }
		exec "$2" --plugin "$3/libnccl-net-harp.so" --driver "$4" --versions 12,8 \
			--scenarios basic --load-as libnccl-net.so' \
		dropin "$tmp/usrlib" "$here/conformance.sh" "$lib" "$driver" >"$tmp/system-dir.log" 2>&1 || rc=$?
	if ((rc == 0)) && grep -q 'result=PASS' "$tmp/system-dir.log" &&
		! grep -q 'result=FAIL' "$tmp/system-dir.log"; then
		echo "dropin: case=system-dir result=PASS ($(grep -c 'case=.*result=PASS' "$tmp/system-dir.log") cases, each byte checked)"
	else
		echo "dropin: case=system-dir result=FAIL (exited $rc)"
		sed 's/^/    | /' "$tmp/system-dir.log" | tail -n 15
		fail=1
	fi
fi
exit "$fail"
