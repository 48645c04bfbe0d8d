#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Fetches what tests/vm runs from Debian's backports and unpacks it, leaving the machine's own
# packages and apt configuration as they were.
#
#   tests/vm/fetch.sh [--print-kernel | --print-qemu]
#
# - The guest kernel: the newest linux-image-6.18.*-cloud-amd64 in trixie-backports, a cloud
#   kernel as a VPC node runs, with virtio-net as a module. It lands in $HARP_VM_CACHE (default
#   /var/cache/harp-vm) as KVER/vmlinuz and KVER/modules/ (only the modules the guests load,
#   decompressed); $HARP_VM_CACHE/kernel names the KVER in use.
# - A second QEMU: the newest qemu-system-x86 in bookworm-backports (10.0 today), with its
#   firmware, in $HARP_VM_CACHE/qemu/VERSION/ ($HARP_VM_CACHE/qemu/current names it). Debian
#   12's own QEMU 7.2 (scripts/setup.sh installs it, and with it every library the newer one
#   links) stalls a receive queue under its software RSS when the guest leaves it short of
#   buffers, as zero copy does (tests/vm/README.md); the newer one does not.
# Both come through a temporary sources list (apt-get download, unpacked with dpkg-deb). A second
# run with both present touches nothing. --print-kernel and --print-qemu print the directory of
# the one in use (fetching what is missing first).
set -euo pipefail

cache=${HARP_VM_CACHE:-/var/cache/harp-vm}
series=${HARP_VM_KERNEL_SERIES:-6.18}
suite=trixie-backports
# what the guests load, in order (virtio_net needs net_failover, which needs failover)
modules=(net/core/failover drivers/net/net_failover drivers/net/virtio_net)

print=""
case ${1:-} in
"") ;;
--print-kernel) print=kernel ;;
--print-qemu) print=qemu ;;
*)
	echo "usage: tests/vm/fetch.sh [--print-kernel | --print-qemu]" >&2
	exit 2
	;;
esac

have_kernel() {
	[[ -s $cache/kernel ]] && kver=$(<"$cache/kernel") && [[ -s $cache/$kver/vmlinuz ]]
}
have_qemu() {
	[[ -s $cache/qemu/current ]] && qver=$(<"$cache/qemu/current") &&
		[[ -x $cache/qemu/$qver/usr/bin/qemu-system-x86_64 ]]
}
say() {
	case $print in
	kernel) echo "$cache/$kver" ;;
	qemu) echo "$cache/qemu/$qver" ;;
	esac
}

kver="" qver=""
if have_kernel && have_qemu; then
	say
	exit 0
fi

for tool in apt-get apt-cache dpkg-deb xz; do
	command -v "$tool" >/dev/null || {
		echo "vm-fetch: $tool is missing (scripts/setup.sh installs it)" >&2
		exit 1
	}
done

mkdir -p "$cache"
work=$(mktemp -d "$cache/fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
printf 'deb http://deb.debian.org/debian %s main\n' "$suite" bookworm-backports >"$work/sources.list"
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
apt_opts=(-o "Dir::Etc::sourcelist=$work/sources.list" -o Dir::Etc::sourceparts=-
	-o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o APT::Sandbox::User=root)
echo "vm-fetch: reading the package lists of $suite and bookworm-backports" >&2
apt-get -q "${apt_opts[@]}" update >&2

fetch_kernel() {
	local pkg ko mod src
	pkg=$(apt-cache "${apt_opts[@]}" pkgnames "linux-image-$series." |
		grep -E "^linux-image-${series//./\\.}\.[0-9]+\+deb[0-9]+-cloud-amd64$" | sort -V | tail -n 1)
	if [[ -z $pkg ]]; then
		echo "vm-fetch: no linux-image-$series.*-cloud-amd64 in $suite" >&2
		exit 1
	fi
	echo "vm-fetch: fetching $pkg" >&2
	(cd "$work" && apt-get -q "${apt_opts[@]}" download "$pkg" >&2)
	dpkg-deb -x "$work"/linux-image-*.deb "$work/root"
	kver=${pkg#linux-image-}
	src=$work/root/boot/vmlinuz-$kver
	[[ -s $src ]] || {
		echo "vm-fetch: $pkg holds no boot/vmlinuz-$kver" >&2
		exit 1
	}
	rm -rf "${cache:?}/$kver"
	mkdir -p "$cache/$kver/modules"
	cp "$src" "$cache/$kver/vmlinuz"
	cp "$work/root/boot/config-$kver" "$cache/$kver/config"
	for mod in "${modules[@]}"; do
		ko=$work/root/usr/lib/modules/$kver/kernel/$mod.ko.xz
		[[ -s $ko ]] || {
			echo "vm-fetch: $pkg has no $mod module" >&2
			exit 1
		}
		xz -dc "$ko" >"$cache/$kver/modules/${mod##*/}.ko"
	done
	printf '%s\n' "${modules[@]##*/}" >"$cache/$kver/modules/order"
	echo "$kver" >"$cache/kernel.tmp" && mv "$cache/kernel.tmp" "$cache/kernel"
	echo "vm-fetch: $kver in $cache/$kver" >&2
}

fetch_qemu() {
	local ver dir missing
	ver=$(apt-cache "${apt_opts[@]}" madison qemu-system-x86 | awk '$6 == "bookworm-backports/main" {print $3}' |
		sort -V | tail -n 1)
	if [[ -z $ver ]]; then
		echo "vm-fetch: no qemu-system-x86 in bookworm-backports" >&2
		exit 1
	fi
	echo "vm-fetch: fetching qemu-system-x86 $ver" >&2
	mkdir -p "$work/q"
	(cd "$work/q" && apt-get -q "${apt_opts[@]}" download "qemu-system-x86=$ver" \
		"qemu-system-data=$ver" seabios/bookworm-backports >&2)
	dir=$cache/qemu/${ver//[:~+]/_}
	rm -rf "$dir"
	mkdir -p "$dir"
	for deb in "$work"/q/*.deb; do
		dpkg-deb -x "$deb" "$dir"
	done
	missing=$(ldd "$dir/usr/bin/qemu-system-x86_64" | grep 'not found' || true)
	if [[ -n $missing ]]; then
		echo "vm-fetch: QEMU $ver needs libraries this machine lacks (install qemu-system-x86," \
			"as scripts/setup.sh does): $missing" >&2
		exit 1
	fi
	qver=${dir##*/}
	echo "$qver" >"$cache/qemu/current.tmp" && mv "$cache/qemu/current.tmp" "$cache/qemu/current"
	echo "vm-fetch: QEMU $ver in $dir" >&2
}

have_kernel || fetch_kernel
have_qemu || fetch_qemu
say
exit 0
