#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# harp in a process confined as a pod is, on a node harp-attach prepared: each confinement that
# keeps it from the pinned maps must fail fast with one "harp: ERROR:" line naming the pin and
# the confinement to lift, not a wrong cause.
#   seccomp      a seccomp filter that fails bpf() with EPERM (no-bpf: the runtimes' default
#                profiles do this to a process without CAP_SYS_ADMIN)
# Then the same harp-xfer, unconfined, moves verified data over the pinned program, so the
# failure was the confinement's; its server sees the pins through a read-only bpffs mount.
#
#   confined.sh
#
# $HARP_XFER is harp-xfer, $NO_BPF the no-bpf wrapper (no_bpf.c). Exits 0 if every case holds, 1
# if one does not, 77 if it cannot run here (not root, a tool missing).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/lib.sh"

xfer=${HARP_XFER:-${BUILD_DIR:-build}/harp-xfer}
no_bpf=${NO_BPF:-${BUILD_DIR:-build}/tests/netns/no-bpf}
attach=$(realpath "$here/../../scripts/harp-attach")
for bin in "$xfer" "$no_bpf"; do
	if [[ ! -x $bin ]]; then
		echo "confined: $bin is not built (set HARP_XFER, NO_BPF or BUILD_DIR)" >&2
		exit 1
	fi
done
xfer=$(realpath "$xfer") no_bpf=$(realpath "$no_bpf")
unset HARP_XFER NO_BPF # ours, not harp's: harp refuses HARP_* names it does not know
for t in xdp-loader bpftool unshare nsenter; do
	command -v "$t" >/dev/null || {
		echo "confined: missing $t (scripts/setup.sh installs it)" >&2
		exit 1
	}
done

harness_init confined
# nsenter, not ip netns exec, which mounts a fresh /sys and hides the bpffs with the pins
in_ns() {
	local ns=$1
	shift
	nsenter --net="/run/netns/$ns" "$@"
}
pins=/sys/fs/bpf/harp-cf-$$
conf=$tmp/harp.conf
# shellcheck disable=SC2317 # called from the EXIT trap
harness_cleanup_extra() {
	local ns_if
	for ns_if in "${ns_a:-}:${if_a:-}" "${ns_b:-}:${if_b:-}"; do
		[[ -e /run/netns/${ns_if%%:*} ]] &&
			in_ns "${ns_if%%:*}" "$attach" down "${ns_if#*:}" --conf "$conf" \
				--pin-root "$pins" >/dev/null 2>&1
	done
	rm -rf "$pins"
}
fail=0
report() {
	echo "confined: FAIL $*"
	fail=1
}

topo_pair 1500 1 || exit
for side in "$ns_a:$if_a" "$ns_b:$if_b"; do
	if ! in_ns "${side%%:*}" "$attach" up "${side#*:}" --conf "$conf" --pin-root "$pins" \
		--hugepages off >"$tmp/attach.log" 2>&1; then
		cat "$tmp/attach.log"
		exit 1
	fi
done

# expect_error NAME PATTERNS -- CMD...: CMD exits non-zero within 10 s, not by a signal, with one
# "harp: ERROR:" line holding every |-separated fixed string of PATTERNS.
expect_error() {
	local name=$1 patterns=$2 rc=0 lines line pat pats
	shift 3
	run_bounded 15 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
	lines=$(grep -c '^harp: ERROR:' "$tmp/$name.err" || true)
	line=$(grep -m 1 '^harp: ERROR:' "$tmp/$name.err" || true)
	echo "confined: case=$name rc=$rc error_lines=$lines"
	echo "    $line"
	if ((rc == 0)); then
		report "$name: exited 0"
	elif ((rc >= 124)); then
		report "$name: timed out or killed (rc $rc)"
	fi
	((lines == 1)) || report "$name: $lines 'harp: ERROR:' lines, expected 1"
	IFS='|' read -r -a pats <<<"$patterns"
	for pat in "${pats[@]}"; do
		grep -qF -- "$pat" <<<"$line" || report "$name: the error does not say '$pat'"
	done
	if ((lines != 1)); then
		sed 's/^/    | /' "$tmp/$name.err" | head -n 20
	fi
}

server=(env HARP_CONF="$conf" HARP_PIN_ROOT="$pins" "$xfer" server --ifname "$if_b"
	--handle-file "$tmp/handle" --timeout 5)
expect_error seccomp "$pins/$if_b/xsks_map|Operation not permitted|seccomp|seccompProfile" -- \
	nsenter --net="/run/netns/$ns_b" "$no_bpf" "${server[@]}"
# Unconfined, the same command moves data over the pinned program; the server sees the pins
# through a read-only mount of the bpf filesystem, as a pod may mount the host's (opening a
# pinned map read-write needs no write access to the mount).
rm -f "$tmp/handle"
# shellcheck disable=SC2016 # expanded by the inner shell
spawn_bounded 60 nsenter --net="/run/netns/$ns_b" unshare -m sh -c \
	'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"' ro "$pins" \
	env HARP_CONF="$conf" HARP_PIN_ROOT="$pins" HARP_LOG_LEVEL=info "$xfer" server \
	--ifname "$if_b" --handle-file "$tmp/handle" --sizes 0,4095,1M --timeout 30 \
	>"$tmp/server.out" 2>"$tmp/server.err"
srv=$spawned_pid
pids+=("$srv")
rc_c=0
run_bounded 60 nsenter --net="/run/netns/$ns_a" env HARP_CONF="$conf" HARP_PIN_ROOT="$pins" "$xfer" client \
	--ifname "$if_a" --handle-file "$tmp/handle" --sizes 0,4095,1M --timeout 30 \
	>"$tmp/client.out" 2>"$tmp/client.err" || rc_c=$?
rc_s=0
wait "$srv" || rc_s=$?
if ((rc_s || rc_c)) || ! grep -q '^result=ok' "$tmp/client.out" ||
	! grep -q '^result=ok' "$tmp/server.out"; then
	report "unconfined transfer: server rc $rc_s, client rc $rc_c"
	tail -n 5 "$tmp/server.err" "$tmp/client.err" "$tmp/server.out" "$tmp/client.out" |
		sed 's/^/    | /'
fi
grep -q 'using the XDP program harp-attach attached' "$tmp/server.err" ||
	report "the unconfined server did not use the pinned program"
echo "confined: unconfined transfer: $(grep -h '^verified_bytes=' "$tmp/server.out")"

if ((fail)); then
	exit 1
fi
echo "confined: every case held"
