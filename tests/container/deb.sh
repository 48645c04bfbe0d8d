#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# harp's Debian package as a user installs it. A release build of this tree (prefix /usr, no test
# options, in a directory of its own) and `cpack -G DEB` make harp_<version>_<arch>.deb; its
# control fields and files are checked here; then in a container of the bare Debian 12 image
# (base.sh) apt installs it, its Depends coming from the mirror, and from the installed files:
#   xfer     harp-xfer (/usr/bin) moves messages of 0 B to 64 MiB both ways between two network
#            namespaces joined by veth, every byte verified (tests/netns/xfer.sh)
#   dropin   harp-net-driver drives the installed NCCL plugin through conformance's basic
#            scenario (tables v12 and v8, every byte checked): by its full path, and, with no
#            LD_LIBRARY_PATH, as libnccl-net.so, the name NCCL opens when NCCL_NET_PLUGIN is unset
#   attach   harp-attach (/usr/sbin) finds the installed XDP object and harp-agent: `--dry-run up`
#
#   deb.sh --repo DIR --driver BIN     (BIN: harp-net-driver, which the package does not hold)
#
# Exits 0 if every step held, 1 if one did not, 2 on bad usage.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/../netns/lib.sh"
# shellcheck source=tests/container/base.sh
source "$here/base.sh"

repo="" driver=""
while (($#)); do
	case $1 in
	--repo) repo=${2:?} && shift ;;
	--driver) driver=${2:?} && shift ;;
	*) echo "deb: unknown argument '$1'" >&2 && sed -n '16s/^# \{0,1\}//p' "$0" >&2 && exit 2 ;;
	esac
	shift
done
[[ -f $repo/cmake/package.cmake && -x $driver ]] ||
	{ echo "deb: --repo (harp's source) and --driver (harp-net-driver) are required" >&2; exit 2; }
repo=$(realpath "$repo") driver=$(realpath "$driver")
for t in podman runc debootstrap cmake cpack dpkg-deb; do
	command -v "$t" >/dev/null || { echo "deb: missing $t"; exit 1; }
done
((EUID == 0)) || { echo "deb: needs root (podman, network namespaces, XDP)"; exit 1; }

one_container deb
fail=0
report() {
	echo "deb: FAIL $*"
	fail=1
}

# ---- the package ----------------------------------------------------------------------------------
echo "deb: release build and cpack -G DEB"
if ! { cmake -S "$repo" -B "$tmp/build" -DCMAKE_INSTALL_PREFIX=/usr -DHARP_TESTS=OFF \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build "$tmp/build" -j "$(nproc)" &&
	(cd "$tmp/build" && cpack -G DEB); } >"$tmp/build.log" 2>&1; then
	echo "deb: FAIL the release build or cpack:"
	tail -n 15 "$tmp/build.log" | sed 's/^/    | /'
	exit 1
fi
deb=$(find "$tmp/build" -maxdepth 1 -name 'harp_*_*.deb' -print -quit)
version=$(sed -n 's/^project(harp VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
[[ $(basename "${deb:-none}") == "harp_${version}_$(dpkg --print-architecture).deb" ]] ||
	{ echo "deb: FAIL no harp_${version}_$(dpkg --print-architecture).deb (found '${deb:-none}')"; exit 1; }
field() { dpkg-deb -f "$deb" "$1"; }
for dep in libbpf1 libxdp1 xdp-tools bpftool; do
	[[ ", $(field Depends), " == *", $dep"[\ ,]* ]] || report "Depends lacks $dep: $(field Depends)"
done
[[ $(field Recommends) == *libsodium23* ]] || report "Recommends lacks libsodium23"
dpkg-deb -c "$deb" | awk '{print $6 ($7 == "->" ? " -> " $8 : "")}' >"$tmp/files"
multi=usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
for f in "./$multi/libnccl-net-harp.so" "./$multi/libnccl-net.so -> libnccl-net-harp.so" \
	./usr/sbin/harp-attach ./usr/sbin/harp-agent ./usr/bin/harp-xfer ./usr/share/harp/harp_xdp.bpf.o \
	./usr/lib/systemd/system/harp-attach.service ./etc/default/harp-attach; do
	grep -qxF "$f" "$tmp/files" || report "the package lacks $f"
done
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles 2>/dev/null | grep -qx /etc/default/harp-attach ||
	report "/etc/default/harp-attach is not a conffile"
echo "deb: $(basename "$deb"): Depends: $(field Depends); Recommends: $(field Recommends)"

# ---- installed in a bare Debian 12 container ---------------------------------------------------
base_image deb || exit 1
cat >"$tmp/inside.sh" <<'INSIDE'
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends /pkg/harp.deb >/apt.log 2>&1 ||
	{ echo "deb: FAIL apt could not install the package:"; tail -n 8 /apt.log; exit 1; }
echo "deb: installed: $(dpkg-query -W -f='${Package} ${Version} ${Status}' harp)"
# what the tests' scripts use beside the package (not harp's dependencies)
apt-get install -y -q --no-install-recommends iputils-ping nftables procps binutils \
	>/apt-tools.log 2>&1 || { echo "deb: FAIL installing the test tools"; exit 1; }
rc=0
echo "deb: xfer"
HARP_XFER=/usr/bin/harp-xfer /src/tests/netns/xfer.sh --mtu 1500 -- --bidir \
	--sizes 0,1,4095,4096,1M,64M --timeout 60 >/xfer.log 2>&1 || rc=1
grep -E '^xfer: ' /xfer.log | tail -n 2
plugin=$(dpkg -L harp | grep '/libnccl-net-harp.so$')
echo "deb: dropin, full path ($plugin)"
env -u LD_LIBRARY_PATH /src/tests/plugin/conformance.sh --plugin "$plugin" --driver /driver \
	--versions 12,8 --scenarios basic >/full.log 2>&1 || rc=1
grep -E 'result=' /full.log | tail -n 3
echo "deb: dropin, as libnccl-net.so with no LD_LIBRARY_PATH"
env -u LD_LIBRARY_PATH /src/tests/plugin/conformance.sh --plugin "$plugin" --driver /driver \
	--versions 12,8 --scenarios basic --load-as libnccl-net.so >/alias.log 2>&1 || rc=1
grep -E 'result=' /alias.log | tail -n 3
echo "deb: attach"
ip netns add hdeb$$
ip -n hdeb$$ link add hdeba type veth peer name hdebb
ip netns exec hdeb$$ harp-attach --dry-run up hdeba >/attach.log 2>&1 || rc=1
grep -q '/usr/share/harp/harp_xdp.bpf.o' /attach.log ||
	{ echo "deb: harp-attach did not take the installed XDP object"; rc=1; }
tail -n 3 /attach.log
ip netns del hdeb$$
exit $rc
INSIDE

rc=0
run_bounded 1200 "${pm[@]}" run --name "$name" --network host --privileged "${limits[@]}" \
	-v "$deb:/pkg/harp.deb:ro" -v "$driver:/driver:ro" -v "$repo:/src:ro" \
	-v "$tmp/inside.sh:/inside.sh:ro" "$base" bash /inside.sh >"$tmp/run.log" 2>&1 || rc=$?
grep -E '^deb: |result=' "$tmp/run.log" | sed 's/^/    /' || true
if ((rc)); then
	report "in the container (exit $rc); its last lines:"
	tail -n 20 "$tmp/run.log" | sed 's/^/    | /'
fi
if ((fail)); then
	exit 1
fi
echo "deb: held: the package built, installed in a bare Debian 12 container, moved verified data and loaded as NCCL loads it"
