# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# QEMU guests with real virtio-net NICs for harp's tests; sourced, never run.
#
#   vm_init                 checks the tools, makes the namespace (a bridge inside it) and the
#                           guest's base initramfs; call once, after `trap vm_cleanup EXIT`
#   vm_start NAME IP PEERS SCRIPT [DEVICE_OPTS] [QUEUES]
#                           boots guest NAME at IP (a /24 on the bridge; PEERS the other guests'
#                           addresses, comma-separated, the first the one it talks to) running
#                           SCRIPT (a guest
#                           shell script; tests/vm/guest/lib.sh is sourced before it) on a
#                           virtio-net NIC with QUEUES queue pairs (default 2) and DEVICE_OPTS
#                           added to QEMU's virtio-net-pci device (e.g. rss=on,iommu_platform=on)
#   vm_pair SCRIPT [DEVICE_OPTS] [QUEUES]
#                           guests a (198.18.N.1) and b (.2), each the other's peer, both running
#                           SCRIPT on the same device
#   vm_wait NAME SEC        waits for NAME to power off; 0 if its script exited 0, else 1 (its
#                           console is printed then); kills it after SEC seconds
#   vm_wait_all SEC         vm_wait for every guest; once one has failed, the others get 20 s more
#   vm_log NAME             the path of NAME's console log
#   vm_cleanup              kills every guest still running and removes the namespace
#
# Every guest's kernel command line carries hvm_name, hvm_ip, hvm_queues, hvm_peers and hvm_args
# (a script's own words, comma-separated; set VM_ARGS before vm_start), which the kernel hands to
# the guest's init as environment variables.
# Guests reach each other only through the bridge inside a namespace this shell made (no QEMU
# user networking), addresses from 198.18.0.0/15; the namespace, the taps and the guests go on
# any exit through vm_cleanup.
#
# VM_MEM is each guest's memory in MiB (default 1024), VM_MTU the MTU of the bridge, the taps
# and the guests' NICs (default 1500). VM_FILES names more files for the
# initramfs (space-separated absolute paths, each with the libraries ldd names), such as a
# benchmark's peer plugin.
# VM_QEMU picks the hypervisor: backports (default), the QEMU tests/vm/fetch.sh took from
# bookworm-backports, or debian, Debian 12's own QEMU 7.2 (its software RSS stalls a receive
# queue left short of buffers: tests/vm/README.md).
#
# The guest: the Debian cloud kernel tests/vm/fetch.sh fetched (virtio_net as a module,
# so the initramfs loads it), busybox, and the build's binaries with the libraries ldd names,
# each at the same absolute path as on this machine (so build-tree RUNPATHs resolve). QEMU runs
# under TCG (`-cpu qemu64,-cx16`: QEMU 7.2's TCG mishandles cmpxchg16b; /dev/kvm here is a nested
# paravirtual backend that stock kernels crash on), one vCPU per guest. Timings measure the
# emulator: compare transports only inside the same guests.

vm_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
vm_root=$(cd "$vm_dir/../.." && pwd)
vm_build=${BUILD_DIR:-build}
[[ $vm_build == /* ]] || vm_build="$vm_root/$vm_build"
vm_prefix="v$$"
vm_ns="" vm_tmp="" vm_kernel="" vm_base=""
declare -A vm_pid=()
vm_names=()
vm_net=$(($$ % 250 + 1))
: "${VM_MEM:=1024}" "${VM_MTU:=1500}"
: "${VM_QEMU:=backports}"
vm_qemu="" vm_qemu_opts=()
: "${VM_ARGS:=}"
: "${VM_FILES:=}"

vm_log_line() {
	printf 'vm: %s\n' "$*" >&2
}

# The files a guest may run or load: the build's (harp's XDP object among them) and
# scripts/harp-attach, then the system tools the guest scripts use.
vm_binaries() {
	local f
	for f in harp-xfer harp-agent harp-params harp-perf tests/plugin/harp-net-driver \
		nccl-net/libnccl-net-harp.so bpf/harp_xdp.bpf.o; do
		[[ -e $vm_build/$f ]] && echo "$vm_build/$f"
	done
	echo "$vm_root/scripts/harp-attach"
	for f in $VM_FILES; do
		echo "$f"
	done
	for f in ip ethtool iperf3 bash bpftool xdp-loader; do
		command -v "$f" || true
	done
}

# Data files the binaries read: libxdp's dispatcher objects, as a node with libxdp1 has them.
vm_data_files() {
	dpkg-query -L libxdp1 2>/dev/null | grep -E '/bpf/[^/]+\.o$' || true
}

vm_init() {
	local tool
	for tool in qemu-system-x86_64 busybox cpio ldd; do
		if ! command -v "$tool" >/dev/null; then
			vm_log_line "$tool is missing (scripts/setup.sh installs it)"
			exit 77
		fi
	done
	if [[ $(id -u) -ne 0 ]]; then
		vm_log_line "needs root (namespaces, taps)"
		exit 77
	fi
	[[ -x $vm_build/harp-xfer ]] || {
		vm_log_line "no build at $vm_build (set BUILD_DIR)"
		exit 1
	}
	vm_kernel=$("$vm_dir/fetch.sh" --print-kernel) || {
		vm_log_line "no guest kernel (tests/vm/fetch.sh failed)"
		exit 1
	}
	case $VM_QEMU in
	debian) vm_qemu=qemu-system-x86_64 vm_qemu_opts=() ;;
	backports)
		local q
		q=$("$vm_dir/fetch.sh" --print-qemu) || {
			vm_log_line "no QEMU from bookworm-backports (tests/vm/fetch.sh failed)"
			exit 1
		}
		vm_qemu=$q/usr/bin/qemu-system-x86_64
		vm_qemu_opts=(-L "$q/usr/share/seabios" -L "$q/usr/share/qemu")
		;;
	*)
		vm_log_line "VM_QEMU=$VM_QEMU: expected debian or backports"
		exit 2
		;;
	esac
	vm_log_line "$("$vm_qemu" --version | head -n 1), guest kernel ${vm_kernel##*/}"
	vm_tmp=$(mktemp -d "${TMPDIR:-/tmp}/harp-vm.XXXXXX")
	vm_make_base
	vm_ns="${vm_prefix}n"
	ip netns add "$vm_ns"
	ip -n "$vm_ns" link add br0 mtu "$VM_MTU" type bridge
	ip -n "$vm_ns" link set br0 up
	ip -n "$vm_ns" link set lo up
}

# vm_copy PATH: PATH into the initramfs tree at the same absolute path, symlinks followed.
vm_copy() {
	local src=$1 dst=$vm_tmp/root$1
	[[ -e $dst ]] && return 0
	mkdir -p "$(dirname "$dst")"
	cp -L "$src" "$dst"
}

vm_make_base() {
	local root=$vm_tmp/root bin lib applet f
	mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,run,etc,lib/harp-vm}
	cp "$(command -v busybox)" "$root/bin/busybox"
	for applet in $(busybox --list); do
		[[ -e $root/bin/$applet ]] || ln -s busybox "$root/bin/$applet"
	done
	ln -s /bin/busybox "$root/usr/bin/env" # scripts/harp-attach's #!/usr/bin/env bash
	while read -r bin; do
		vm_copy "$bin"
		while read -r lib; do
			vm_copy "$lib"
		done < <(ldd "$bin" 2>/dev/null | grep -oE '/[^ ]+' | grep -v '^/.*:$' || true)
	done < <(vm_binaries)
	while read -r f; do
		vm_copy "$f"
	done < <(vm_data_files)
	cp -r "$vm_kernel/modules" "$root/lib/harp-vm/modules"
	cp "$vm_dir/guest/init" "$root/init"
	cp "$vm_dir/guest/lib.sh" "$vm_dir/guest/get" "$root/lib/harp-vm/"
	chmod +x "$root/init"
	echo "root:x:0:0:root:/:/bin/sh" >"$root/etc/passwd"
	echo "root:x:0:" >"$root/etc/group"
	echo "$vm_build" >"$root/lib/harp-vm/build"
	echo "$vm_root" >"$root/lib/harp-vm/source"
	vm_base=$vm_tmp/base.cpio
	(cd "$root" && find . | cpio -o -H newc --quiet) >"$vm_base"
}

vm_start() {
	local name=$1 ip=$2 peers=$3 script=$4 devopts=${5:-} queues=${6:-2}
	local tap="${vm_prefix}${name}" dir=$vm_tmp/$name mac
	mkdir -p "$dir/overlay"
	cp "$script" "$dir/overlay/scenario"
	(cd "$dir/overlay" && echo scenario | cpio -o -H newc --quiet) >"$dir/overlay.cpio"
	cat "$vm_base" "$dir/overlay.cpio" >"$dir/initrd"
	ip -n "$vm_ns" tuntap add dev "$tap" mode tap multi_queue
	ip -n "$vm_ns" link set "$tap" mtu "$VM_MTU" master br0 up
	mac=$(printf '52:54:00:%02x:%02x:%02x' $((vm_net)) $(($$ % 256)) $((${#vm_names[@]} + 1)))
	local dev="virtio-net-pci,id=nic0,netdev=n0,mac=$mac,romfile=,disable-legacy=on"
	((queues > 1)) && dev+=",mq=on,vectors=$((2 * queues + 2))"
	[[ -n $devopts ]] && dev+=",$devopts"
	# nokaslr: modules, virtio_net among them, load at the same address each boot. virtio_net's
	# zero-copy transmit reads its header from an address it derives wrongly from module memory
	# (src/xsk.c, zerocopy_quirk): without KASLR that address is the same in every boot,
	# 0x4020c5d0 with this kernel, outside a guest of up to 1 GiB (QEMU reads zeros there, a
	# valid header). With KASLR it fell anywhere from about 400 MiB up, inside guest memory in
	# some boots.
	local append="console=ttyS0 panic=-1 loglevel=4 nokaslr hvm_name=$name hvm_ip=$ip"
	append+=" hvm_queues=$queues hvm_mtu=$VM_MTU"
	append+=" hvm_peers=$peers hvm_args=${VM_ARGS// /,}"
	ip netns exec "$vm_ns" timeout --kill-after=5 900 "$vm_qemu" "${vm_qemu_opts[@]}" \
		-accel tcg -cpu qemu64,-cx16 -m "$VM_MEM" -smp 1 -nodefaults -no-user-config \
		-display none -serial "file:$dir/console" -monitor "unix:$dir/monitor,server=on,wait=off" -no-reboot \
		-kernel "$vm_kernel/vmlinuz" -initrd "$dir/initrd" -append "$append" \
		-netdev "tap,id=n0,ifname=$tap,script=no,downscript=no,vhost=off,queues=$queues" \
		-device "$dev" >"$dir/qemu.out" 2>&1 &
	vm_pid[$name]=$!
	vm_names+=("$name")
	vm_log_line "guest $name at $ip: $queues queues, virtio-net-pci ${devopts:-defaults}"
}

vm_pair() {
	vm_start a "198.18.$vm_net.1" "198.18.$vm_net.2" "$@"
	vm_start b "198.18.$vm_net.2" "198.18.$vm_net.1" "$@"
}

vm_log() {
	echo "$vm_tmp/$1/console"
}

vm_wait() {
	local name=$1 sec=$2 pid=${vm_pid[$1]} i rc=0 log
	log=$(vm_log "$name")
	for ((i = 0; i < sec * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		vm_log_line "guest $name still running at its time limit: killed"
		kill "$pid" 2>/dev/null || true
		rc=1
	fi
	wait "$pid" 2>/dev/null || true
	unset "vm_pid[$name]"
	if ((rc == 0)) && ! grep -q '^harp-vm: exit 0' "$log" 2>/dev/null; then
		rc=1
	fi
	if ((rc)); then
		echo "---- guest $name console (failed) ----"
		cat "$log" 2>/dev/null || true
		cat "$vm_tmp/$name/qemu.out" 2>/dev/null || true
		echo "---- host side of guest $name: its tap ----"
		ip -n "$vm_ns" -s -s link show "${vm_prefix}${name}" 2>&1 || true
		echo "---- end of guest $name ----"
	fi
	return "$rc"
}

vm_wait_all() {
	local sec=$1 name rc=0 left i
	for ((i = 0; i < sec * 10; i++)); do
		left=0
		for name in "${!vm_pid[@]}"; do
			if kill -0 "${vm_pid[$name]}" 2>/dev/null; then
				left=1
			elif ! grep -q '^harp-vm: exit 0' "$(vm_log "$name")" 2>/dev/null && ((sec > i / 10 + 20)); then
				sec=$((i / 10 + 20)) # a guest failed: the others have 20 s to finish
			fi
		done
		((left)) || break
		sleep 0.1
	done
	for name in "${vm_names[@]}"; do
		[[ -n ${vm_pid[$name]:-} ]] || continue
		vm_wait "$name" 1 || rc=1
	done
	return "$rc"
}

vm_cleanup() {
	local name
	for name in "${!vm_pid[@]}"; do
		kill "${vm_pid[$name]}" 2>/dev/null || true
	done
	for name in "${!vm_pid[@]}"; do
		wait "${vm_pid[$name]}" 2>/dev/null || true
	done
	[[ -n $vm_ns ]] && ip netns del "$vm_ns" 2>/dev/null
	[[ -n $vm_tmp && -d $vm_tmp ]] && rm -rf "$vm_tmp"
	vm_ns="" vm_tmp=""
	return 0
}
