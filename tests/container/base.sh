# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# The bare Debian 12 image the container tests start from, made once per machine: debootstrap
# (minbase) from the mirror in this machine's apt sources, imported into podman as $base. Sourced
# after tests/netns/lib.sh (run_bounded, harness_init, $tmp); sets pm, the podman command.

base=localhost/harp-test/debian:bookworm-minbase
pm=(podman --runtime runc)
# runc cannot raise this machine's open-file and process limits inside a container: set them
limits=(--ulimit nofile=4096:4096 --ulimit nproc=4096:4096)

# mirror: the Debian mirror this machine's apt uses (never a host written into the repository).
mirror() {
	local m
	m=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null |
		grep -v security | head -n 1)
	[[ -n $m ]] || m=$(awk '$1 == "deb" && $0 !~ /security/ {print $2; exit}' \
		/etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null)
	echo "$m"
}

# one_container NAME: harness_init NAME, and the one container the test runs, $name
# (harp-NAME-PID), removed at exit whatever happened.
one_container() {
	name=harp-$1-$$
	harness_init "$1"
	# shellcheck disable=SC2317 # called from the EXIT trap
	harness_cleanup_extra() {
		"${pm[@]}" rm -f -t 5 "$name" >/dev/null 2>&1 || true
	}
}

# base_image NAME: $base exists, or is made now; NAME says whose message it is. 1 on failure.
# Two tests that start side by side on a fresh machine (container_fresh, container_images) make
# it once: the second waits on the lock for the first.
base_image() {
	local rc=0 lock
	exec {lock}>/run/lock/harp-test-base-image.lock
	if ! run_bounded 1000 flock "$lock"; then
		echo "$1: FAIL waiting for another test making the base image (/run/lock/harp-test-base-image.lock)"
		exec {lock}>&-
		return 1
	fi
	make_base_image "$1" || rc=1
	exec {lock}>&-
	return "$rc"
}

make_base_image() {
	local url
	"${pm[@]}" image exists "$base" && return 0
	url=$(mirror)
	[[ -n $url ]] || { echo "$1: no Debian mirror in this machine's apt sources"; return 1; }
	echo "$1: making $base with debootstrap from $url (once per machine)"
	if ! run_bounded 900 debootstrap --variant=minbase bookworm "$tmp/rootfs" "$url" >"$tmp/debootstrap.log" 2>&1 ||
		! tar -C "$tmp/rootfs" -c . | "${pm[@]}" import - "$base" >"$tmp/import.log" 2>&1; then
		echo "$1: FAIL making the base image:"
		tail -n 5 "$tmp/debootstrap.log" "$tmp/import.log" 2>/dev/null
		return 1
	fi
	rm -rf "$tmp/rootfs"
}
