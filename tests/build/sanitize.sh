#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds harp from SOURCE with a sanitizer into BUILD (kept between runs, so a second run builds
# only what changed) and runs a set of that build's own tests in it:
#
#   sanitize.sh --source DIR --build DIR --mode asan|tsan
#     asan   -fsanitize=address,undefined: the library, the plugin and every tool; the netns,
#            fault and plugin labels (valgrind's plugin run stays in the plain build: memcheck and
#            ASan cannot share a process; bad_input.sh leaves out its valgrind cases here)
#     tsan   -fsanitize=thread: the plugin scenarios where threads meet (NCCL's service thread
#            setting comms up while its proxy thread moves data on others, harp's keeper thread
#            taking over an idle rank's engine, comms closed with requests out)
#
# A report from the sanitizer ends the process with an error, so the test that ran it fails
# with the report in its output. Exits 0 if every test passed (none skipped), 1 if not, 2 on bad
# usage.
set -euo pipefail

source="" build="" mode=""
while (($#)); do
	case $1 in
	--source) source=${2:?} && shift ;;
	--build) build=${2:?} && shift ;;
	--mode) mode=${2:?} && shift ;;
	*) echo "sanitize: unknown argument '$1'" >&2 && exit 2 ;;
	esac
	shift
done
[[ -f $source/CMakeLists.txt && -n $build ]] ||
	{ echo "usage: sanitize.sh --source DIR --build DIR --mode asan|tsan" >&2; exit 2; }

case $mode in
asan)
	flags=address,undefined
	select=(-L 'netns|fault|plugin' -E '^plugin_valgrind$')
	# abort_on_error off: the process exits non-zero (1) and the test sees a failure, not a core
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1
	export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
	# libbpf and libxdp are not instrumented; what they allocate at load and free at exit is
	# theirs. harp's own leaks are still reported.
	export LSAN_OPTIONS=suppressions=$source/tests/build/lsan.supp:print_suppressions=0
	;;
tsan)
	flags=thread
	select=(-R '^plugin_threads')
	export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$source/tests/build/tsan.supp
	;;
*)
	echo "sanitize: --mode must be asan or tsan" >&2
	exit 2
	;;
esac

log=$build.log
mkdir -p "$build"
echo "sanitize: $mode: building $source into $build (-fsanitize=$flags)"
if ! { cmake -S "$source" -B "$build" -DHARP_SANITIZE="$flags" -DHARP_FAULT_INJECTION=ON \
	-DHARP_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build "$build" -j "$(nproc)"; } \
	>"$log" 2>&1; then
	echo "sanitize: FAIL: the $mode build failed"
	grep -m 20 -E 'error|Error' "$log" | sed 's/^/    | /'
	exit 1
fi
rc=0
ctest --test-dir "$build" --output-on-failure "${select[@]}" >"$log" 2>&1 || rc=$?
grep -E '^ *[0-9]+/[0-9]+ Test|tests passed|Total Test time' "$log" | sed 's/^/sanitize: /'
if ((rc)); then
	echo "sanitize: FAIL: $mode: tests failed; their output:"
	sed -n '/The following tests FAILED/,$p' "$log" | sed 's/^/    /'
	# the sanitizers' reports, first lines of each
	grep -E -A 12 '^(==[0-9]+==ERROR|WARNING: ThreadSanitizer|SUMMARY: |.*runtime error:)' "$log" |
		head -n 120 | sed 's/^/    | /'
	exit 1
fi
if grep -qE '\((Skipped|Disabled)\)' "$log"; then
	echo "sanitize: FAIL: $mode: tests skipped:"
	grep -E '\((Skipped|Disabled)\)' "$log" | sed 's/^/    /'
	exit 1
fi
if ! grep -q 'tests passed' "$log" || grep -q 'No tests were found' "$log"; then
	echo "sanitize: FAIL: $mode: no tests ran"
	exit 1
fi
echo "sanitize: $mode: every test passed"
