#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Configures and builds harp from SOURCE in every build type a packager or developer picks
# (Debug, RelWithDebInfo, Release) with every compiler here (gcc, clang), warnings as errors
# (HARP_WERROR=ON) and the tests included, each in a fresh temporary tree; then checks that a
# build configured with no options has neither -Werror nor the fault injector.
#
#   build_types.sh --source DIR [--compilers "gcc clang"] [--types "Debug RelWithDebInfo Release"]
#
# Prints one line per combination; for a failed one, its first compiler errors. Exits 0 if every
# combination built, 1 if one did not, 2 on bad usage. A compiler that is not installed fails
# its combinations: the tests install both.
set -euo pipefail

source="" compilers="gcc clang" types="Debug RelWithDebInfo Release"
while (($#)); do
	case $1 in
	--source) source=${2:?} && shift ;;
	--compilers) compilers=${2:?} && shift ;;
	--types) types=${2:?} && shift ;;
	*) echo "build_types: unknown argument '$1'" >&2 && sed -n '8s/^# \{0,1\}//p' "$0" >&2 && exit 2 ;;
	esac
	shift
done
[[ -f $source/CMakeLists.txt ]] || { echo "build_types: --source must be harp's source tree" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/harp-build-types.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failed=0
for cc in $compilers; do
	for type in $types; do
		dir=$tmp/$cc-$type log=$tmp/$cc-$type.log
		if ! command -v "$cc" >/dev/null; then
			echo "build_types: FAIL $cc $type: no $cc on PATH"
			failed=1
			continue
		fi
		if CC=$cc cmake -S "$source" -B "$dir" -DCMAKE_BUILD_TYPE="$type" -DHARP_WERROR=ON \
			>"$log" 2>&1 && cmake --build "$dir" -j "$(nproc)" >>"$log" 2>&1; then
			echo "build_types: ok $cc $type"
		else
			echo "build_types: FAIL $cc $type:"
			{ grep -E 'error|Error' "$log" || tail -n 20 "$log"; } | head -n 12
			failed=1
		fi
		rm -rf "$dir"
	done
done
# What a packager gets by default: no -Werror (a newer compiler's new warning must not break
# their build) and no fault injector (HARP_FAULT_DROP_PPM would drop packets in production).
dir=$tmp/defaults log=$tmp/defaults.log
if cmake -S "$source" -B "$dir" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >"$log" 2>&1; then
	bad=$(grep -o -e '-Werror' -e 'HARP_FAULT_INJECTION=1' "$dir/compile_commands.json" | sort -u | tr '\n' ' ' || true)
	if [[ -z $bad ]]; then
		echo "build_types: ok defaults: no -Werror, no fault injector"
	else
		echo "build_types: FAIL defaults: a build configured with no options compiles with $bad"
		failed=1
	fi
else
	echo "build_types: FAIL defaults: configuring failed:"
	tail -n 5 "$log"
	failed=1
fi
exit "$failed"
