#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds harp from SOURCE with a sanitizer into BUILD (kept between runs, so a second run builds
# only what changed) and runs a set of that build's own tests in it; --step build only builds
# (ctest runs that step beside other tests, the tests alone), --step test builds what changed
# and runs the tests:
#
#   sanitize.sh --source DIR --build DIR --mode asan|tsan [--step build|test|all]
#     asan   -fsanitize=address,undefined: the library, the plugin and every tool; of the netns,
#            fault and plugin labels the tests that each take their own path through the code
#            (asan_tests below, 57 with the unit tests; valgrind's plugin run stays in the plain
#            build: memcheck and ASan cannot share a process; bad_input.sh leaves out its
#            valgrind cases here)
#     tsan   -fsanitize=thread: the plugin scenarios where threads meet (NCCL's service thread
#            setting comms up while its proxy thread moves data on others, harp's keeper thread
#            taking over an idle rank's engine, comms closed with requests out)
#
# A report from the sanitizer ends the process with an error, so the test that ran it fails
# with the report in its output. Exits 0 if every test passed (none skipped), 1 if not, 2 on bad
# usage.
set -euo pipefail

source="" build="" mode="" step=all
while (($#)); do
	case $1 in
	--source) source=${2:?} && shift ;;
	--build) build=${2:?} && shift ;;
	--mode) mode=${2:?} && shift ;;
	--step) step=${2:?} && shift ;;
	*) echo "sanitize: unknown argument '$1'" >&2 && exit 2 ;;
	esac
	shift
done
[[ -f $source/CMakeLists.txt && -n $build && $step =~ ^(build|test|all)$ ]] ||
	{ echo "usage: sanitize.sh --source DIR --build DIR --mode asan|tsan [--step build|test|all]" >&2
	  exit 2; }

case $mode in
asan)
	flags=address,undefined
	# Each path through harp's code once, not every variant of it, nor volume: the plain build
	# runs the rest (the same code under other queue counts, MTUs, families, devices and
	# impairments), and a test here costs twice to five times its plain run. Kept: both families
	# where their code differs (addresses, keys, headers), multi-buffer chains, the path MTU
	# search and parts, auth, pools at their limits, paths dark and rescued, hostile input, the
	# agent; the plugin's closes and aborts, largest sizes (UBSan on the int sizes of v8),
	# stripes, the keeper thread, losses, CUDA's lanes and failures; the fault profiles mixed
	# (all) in both families, with auth, parts and the exit of a lossy run. Left to the plain
	# build, as another test here runs their code: plugin_v8 to _v12 (the tables:
	# plugin_close_order drives all five, plugin_limits v8's sizes), plugin_threads (the keeper
	# thread: plugin_idle_peer_lossy; the threads: the ThreadSanitizer build), plugin_mtu9000 and netns_xfer_mtu9000 (chains:
	# netns_xfer6_mtu9000), plugin_stripes, _stripes_lossy, _cuda_stripes and
	# _ipv6_stripes_mtu9000 (plugin_stripes_hop_dup2 and the stripe kill and accept cases),
	# plugin_lossy (the other lossy plugin runs), plugin_queues2_devices2 and
	# netns_xfer_rss_q4 (netns_xfer_rss_q2of4_conns64 and the agent's two queues),
	# plugin_threads_engines and netns_xfer_engine_threads (the engines' threads: the
	# ThreadSanitizer build runs them), plugin_dropin (init as plugin_limits', NCCL's loader
	# aside), plugin_peer_timeout_short (timing), netns_path_blackhole and _dark (unit_conn
	# retires and rescues paths in every way the netns tests do, and netns_path_rescue runs it
	# over the wire), netns_xfer_pmtu_hop1280 (netns_xfer_pmtu_shrink searches, shrinks and
	# cuts parts), netns_xfer_frames_max, netns_xfer_hop, netns_msgsize
	# (fault_xfer_msgsize_all), netns_xfer_auth_corrupt (its IPv6 twin, fault_xfer_dup2_auth),
	# fault_xfer_all (fault_xfer_all_paced) and fault_xfer_drop1_rss_q2of4. The unit tests run
	# here too: seconds, and every branch of the protocol's state they reach.
	asan_tests=(
		unit_params unit_spsc unit_cc unit_conn unit_pairs unit_ids unit_agent unit_ifmatch
		unit_auth unit_frame_pool unit_stripe unit_engine unit_steer unit_nccl_socket unit_wire
		netns_xfer_mtu1500 netns_xfer6_mtu9000 netns_xfer6_link_local
		netns_xfer_dual_listener6 netns_xfer_pmtu_shrink
		netns_xfer_busy_poll netns_xfer_mtu_max netns_xfer_bidir
		netns_xfer_conns64 netns_xfer6_auth_corrupt
		netns_xfer_frames_min netns_xfer_slow_consumer
		netns_xfer_rss_q2of4_conns64 netns_path_rescue
		netns_bad_input netns_bad_input6 netns_xdp_gone netns_peer_death
		netns_queue_share netns_queue_busy netns_confined netns_agent
		plugin_close_order plugin_limits plugin_stripes_hop_dup2
		plugin_close_order_lossy plugin_idle_peer_lossy
		plugin_stripe_kill_s2 plugin_stripe_accept_stall plugin_stripe_accept_die
		plugin_cuda plugin_cuda_lanes_fallback plugin_cuda_copy_fail plugin_cuda_mixed
		fault_xfer6_all fault_xfer_all_paced fault_xfer_dup2_auth
		fault_xfer_reorder_auth_mtu9000 fault_xfer_corrupt_mtu9000 fault_xfer_msgsize_all
		fault_xfer_small_lossy_exit fault_xfer_shallow
	)
	select=(-R "^($(IFS='|' && echo "${asan_tests[*]}"))\$")
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
	>"$build.build.log" 2>&1; then
	echo "sanitize: FAIL: the $mode build failed"
	grep -m 20 -E 'error|Error' "$build.build.log" | sed 's/^/    | /'
	exit 1
fi
if [[ $mode == asan ]]; then
	# a test renamed or gone would drop out of the set without a word
	found=$(ctest --test-dir "$build" -N "${select[@]}" | sed -n 's/^Total Tests: //p')
	if [[ $found != "${#asan_tests[@]}" ]]; then
		echo "sanitize: FAIL: asan: ${#asan_tests[@]} tests named, ${found:-0} found; the names" \
			"in asan_tests must be tests of this tree"
		exit 1
	fi
fi
if [[ $step == build ]]; then
	echo "sanitize: $mode: built"
	exit 0
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
