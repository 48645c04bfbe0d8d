#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# What `cmake --install` lays out, and whether a program outside harp's tree can use it.
#
#   install.sh --build DIR --source DIR --version V --harp-perf BIN --plugin SO --bpf-object O
#              --libdir D --bindir D --sbindir D --includedir D --datadir D --full-libdir D
#              [--cmake BIN] [--cc CC]
#     --build, --source   harp's build and source trees
#     --harp-perf, --plugin, --bpf-object   the build's harp-perf, plugin and XDP object
#     --libdir ... --datadir   GNUInstallDirs' CMAKE_INSTALL_*DIR, relative to the prefix
#     --full-libdir   CMAKE_INSTALL_FULL_LIBDIR, the library directory the build was configured for
#
# 1. cmake --install DIR --prefix T/prefix: every file of the layout is there and is what it
#    should be: libharp.so's version links and soname, libharp.a, harp.h as in the source,
#    harp.pc naming T/prefix, the CMake package, the plugin exporting ncclNetPlugin_v8..v12 and
#    nothing else with RUNPATH $ORIGIN then the configured library directory, the alias
#    libnccl-net.so linking to it, the tools (harp-perf defaulting to the installed plugin),
#    the node agent harp-agent and harp-attach beside it, the XDP object (a BPF ELF with an "xdp.frags" section); no
#    installed binary has a RUNPATH into the build or source tree.
# 2. DESTDIR=T/stage cmake --install DIR --prefix /opt/harp: the same, under T/stage/opt/harp,
#    with harp.pc naming /opt/harp.
# 3. consumer/ built against T/prefix through pkg-config, and through CMake (find_package(harp
#    CONFIG), harp::harp and harp::harp_static); each program runs and prints the version its
#    build system found; find_package(harp) for the next major version must fail.
# The build's own harp-perf must still default to the build's plugin.
#
# Prints each failed check; exits 0 if every check held, 1 if one did not, 2 on bad usage, 77
# if a tool it needs is missing. The temporary tree is removed however it ends.
set -euo pipefail

# usage [WHAT]: what was wrong, if known, then the synopsis; exits 2.
usage() {
	if (($#)); then
		echo "install: $*" >&2
	fi
	sed -n '6,10s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build="" source="" version="" harp_perf="" plugin="" bpf_object="" cmake=cmake cc=${CC:-cc}
libdir="" bindir="" sbindir="" includedir="" datadir="" full_libdir=""
while (($#)); do
	case $1 in
	--build) build=${2:?} && shift ;;
	--source) source=${2:?} && shift ;;
	--version) version=${2:?} && shift ;;
	--harp-perf) harp_perf=${2:?} && shift ;;
	--plugin) plugin=${2:?} && shift ;;
	--bpf-object) bpf_object=${2:?} && shift ;;
	--libdir) libdir=${2:?} && shift ;;
	--bindir) bindir=${2:?} && shift ;;
	--sbindir) sbindir=${2:?} && shift ;;
	--includedir) includedir=${2:?} && shift ;;
	--datadir) datadir=${2:?} && shift ;;
	--full-libdir) full_libdir=${2:?} && shift ;;
	--cmake) cmake=${2:?} && shift ;;
	--cc) cc=${2:?} && shift ;;
	*) usage "unknown argument '$1'" ;;
	esac
	shift
done
for v in build source version harp_perf plugin bpf_object libdir bindir sbindir includedir \
	datadir full_libdir; do
	[[ -n ${!v} ]] || usage "--${v//_/-} is required"
done
for tool in "$cmake" "$cc" pkg-config readelf nm ar ldd cmp; do
	if ! command -v "$tool" >/dev/null; then
		echo "install: SKIP: no $tool" >&2
		exit 77
	fi
done
major=${version%%.*}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/harp-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

failures=0
fail() {
	echo "install: FAIL: $*" >&2
	failures=$((failures + 1))
}

# matches ERE CMD...: CMD's output (stdout and stderr, whatever its status) has a line matching
# ERE. Output is taken whole first: grep -q in a pipe would end the writer early (pipefail).
matches() {
	local ere=$1 out
	shift
	out=$("$@" 2>&1) || true
	grep -Eq -- "$ere" <<<"$out"
}

# plugin_default HARP_PERF: the plugin harp-perf loads when given no --plugin (from its usage).
plugin_default() {
	"$1" pingpong --help 2>&1 | sed -n 's/.*--plugin SO .*(default \(.*\))$/\1/p'
}

# check_elf_paths FILE...: no RPATH or RUNPATH points into harp's build or source tree.
check_elf_paths() {
	local f paths
	for f in "$@"; do
		paths=$(readelf -d "$f" | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]$/\2/p')
		if [[ -n $paths && ($paths == *"$build"* || $paths == *"$source"*) ]]; then
			fail "$f: run path '$paths' points into the build or source tree"
		fi
	done
}

# check_libharp ROOT: libharp.so with its version links, soname and API; libharp.a; harp.h.
check_libharp() {
	local lib=$1/$libdir so
	so=$lib/libharp.so.$version
	if [[ ! -f $so || -L $so ]]; then
		fail "$so: missing or not a file"
		return
	fi
	for link in libharp.so libharp.so."$major"; do
		if [[ ! -L $lib/$link || $(readlink -f "$lib/$link") != "$(readlink -f "$so")" ]]; then
			fail "$lib/$link: not a link to libharp.so.$version"
		fi
	done
	if ! matches "Library soname: \[libharp\.so\.$major\]" readelf -d "$so"; then
		fail "$so: soname is not libharp.so.$major"
	fi
	if ! matches ' T harp_ctx__create$' nm -D --defined-only "$so"; then
		fail "$so: does not export harp_ctx__create"
	fi
	if ! matches ' T harp_ctx__create$' nm --defined-only "$lib/libharp.a"; then
		fail "$lib/libharp.a: missing, or no harp_ctx__create in it"
	fi
	if ! cmp -s "$source/include/harp/harp.h" "$1/$includedir/harp/harp.h"; then
		fail "$1/$includedir/harp/harp.h: missing, or not the source's harp.h"
	fi
}

# check_packages ROOT PREFIX: harp.pc names PREFIX and the version; the CMake package's files.
check_packages() {
	local lib=$1/$libdir pc got
	pc=$lib/pkgconfig/harp.pc
	if [[ ! -f $pc ]]; then
		fail "$pc: missing"
	else
		got=$(PKG_CONFIG_PATH=$lib/pkgconfig pkg-config --variable=prefix harp || true)
		[[ $got == "$2" ]] || fail "$pc: prefix is '$got', not '$2'"
		got=$(PKG_CONFIG_PATH=$lib/pkgconfig pkg-config --modversion harp || true)
		[[ $got == "$version" ]] || fail "$pc: version is '$got', not '$version'"
	fi
	for f in harpConfig.cmake harpConfigVersion.cmake harpTargets.cmake; do
		[[ -f $lib/cmake/harp/$f ]] || fail "$lib/cmake/harp/$f: missing"
	done
}

# check_plugin ROOT: the plugin exports the five tables and nothing else; RUNPATH is $ORIGIN,
# then the configured library directory; libnccl-net.so, NCCL's default name, links to it.
check_plugin() {
	local so=$1/$libdir/libnccl-net-harp.so got
	if [[ ! -L $1/$libdir/libnccl-net.so || $(readlink "$1/$libdir/libnccl-net.so") != libnccl-net-harp.so ]]; then
		fail "$1/$libdir/libnccl-net.so: not a link to libnccl-net-harp.so"
	fi
	if [[ ! -f $so ]]; then
		fail "$so: missing"
		return
	fi
	got=$(nm -D --defined-only "$so" | awk '{ print $3 }' | sort | tr '\n' ' ')
	if [[ $got != "ncclNetPlugin_v10 ncclNetPlugin_v11 ncclNetPlugin_v12 ncclNetPlugin_v8 ncclNetPlugin_v9 " ]]; then
		fail "$so: exports '$got', not ncclNetPlugin_v8..v12 alone"
	fi
	# shellcheck disable=SC2016 # $ORIGIN is the loader's, not the shell's
	got=$(readelf -d "$so" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p')
	if [[ $got != "\$ORIGIN:$full_libdir" ]]; then
		fail "$so: RUNPATH is '$got', not \$ORIGIN:$full_libdir"
	fi
}

# check_programs ROOT: the tools run; harp-perf defaults to the plugin installed with it;
# harp-attach is the source's, once the source has it.
check_programs() {
	local bin=$1/$bindir want got
	for p in harp-params harp-xfer harp-perf; do
		[[ -x $bin/$p ]] || fail "$bin/$p: missing or not executable"
	done
	# shellcheck disable=SC2016 # the backquotes are Markdown's
	if ! matches '^\| `HARP_QUEUES` \|' "$bin/harp-params" --markdown; then
		fail "$bin/harp-params --markdown: no HARP_QUEUES row"
	fi
	if ! matches '^usage: harp-xfer ' "$bin/harp-xfer" --help; then
		fail "$bin/harp-xfer --help: no usage line"
	fi
	want=$(readlink -f "$1/$libdir/libnccl-net-harp.so")
	got=$(plugin_default "$bin/harp-perf")
	[[ $got == "$want" ]] || fail "$bin/harp-perf: default plugin is '$got', not '$want'"
	if ! matches '^usage: harp-agent ' "$1/$sbindir/harp-agent" --help; then
		fail "$1/$sbindir/harp-agent --help: missing, or no usage line"
	fi
	if [[ -e $source/scripts/harp-attach ]]; then
		if [[ ! -x $1/$sbindir/harp-attach ]] ||
			! cmp -s "$source/scripts/harp-attach" "$1/$sbindir/harp-attach"; then
			fail "$1/$sbindir/harp-attach: missing, not executable or not the source's"
		fi
	fi
	check_elf_paths "$bin"/harp-* "$1/$sbindir/harp-agent" "$1/$libdir/libharp.so.$version" \
		"$1/$libdir/libnccl-net-harp.so"
}

# check_bpf ROOT: the build's XDP object, a relocatable BPF ELF with the "xdp.frags" program section (multi-buffer aware).
check_bpf() {
	local o=$1/$datadir/harp/harp_xdp.bpf.o
	if [[ ! -f $o ]]; then
		fail "$o: missing"
		return
	fi
	matches 'Machine: +Linux BPF$' readelf -h "$o" || fail "$o: not a BPF ELF object"
	matches 'Type: +REL ' readelf -h "$o" || fail "$o: not a relocatable object"
	matches '\] xdp\.frags +PROGBITS' readelf -SW "$o" || fail "$o: no \"xdp.frags\" section"
	cmp -s "$bpf_object" "$o" || fail "$o: not the build's $bpf_object"
}

# check_tree ROOT PREFIX: everything an install with this prefix lays out under ROOT.
check_tree() {
	check_libharp "$1"
	check_packages "$1" "$2"
	check_plugin "$1"
	check_programs "$1"
	check_bpf "$1"
}

# install_into LOG DESTDIR ARGS...: cmake --install the build with ARGS (DESTDIR empty: none);
# the log is printed on failure. Installing writes nothing into the build tree but CMake's own
# install_manifest.txt, so that a packager may install from a tree it cannot write (harp.pc was
# written there once).
install_into() {
	local log=$1 destdir=$2 stamp=$tmp/before-install changed
	shift 2
	touch "$stamp"
	if ! DESTDIR=$destdir "$cmake" --install "$build" "$@" >"$log" 2>&1; then
		cat "$log" >&2
		fail "cmake --install $* failed"
		return 1
	fi
	changed=$(find "$build" -newer "$stamp" ! -type d ! -name 'install_manifest*.txt' | head -n 5)
	[[ -z $changed ]] || fail "cmake --install $* wrote into the build tree: ${changed//$'\n'/, }"
}

# expect_line WHAT OUTPUT: OUTPUT is the consumer's line for this version.
expect_line() {
	local want="harp consumer: version $version, handle 128 bytes"
	[[ $2 == "$want" ]] || fail "$1: printed '$2', not '$want'"
}

# uses_prefix_lib WHAT BIN [ENV...]: BIN loads libharp.so.MAJOR from the installed tree.
uses_prefix_lib() {
	local want got
	want=$(readlink -f "$prefix/$libdir/libharp.so.$major")
	got=$(env "${@:3}" ldd "$2" | awk '$1 == "libharp.so.'"$major"'" { print $3 }')
	[[ -n $got && $(readlink -f "$got") == "$want" ]] ||
		fail "$1: loads libharp.so.$major from '$got', not $want"
}

# consumer_pkg_config: consumer.c built with `pkg-config --cflags --libs harp`; runs with
# LD_LIBRARY_PATH, as a program linked without a run path must.
consumer_pkg_config() {
	local pcpath=$prefix/$libdir/pkgconfig flags ver exe=$tmp/pc-consumer out
	flags=$(PKG_CONFIG_PATH=$pcpath pkg-config --cflags --libs harp) || {
		fail "pkg-config --cflags --libs harp failed"
		return
	}
	ver=$(PKG_CONFIG_PATH=$pcpath pkg-config --modversion harp)
	# shellcheck disable=SC2086 # flags are words
	if ! "$cc" -Wall -Wextra -Werror -DHARP_CONSUMER_VERSION="\"$ver\"" \
		"$here/consumer/consumer.c" -o "$exe" $flags; then
		fail "the pkg-config consumer does not build (flags: $flags)"
		return
	fi
	out=$(LD_LIBRARY_PATH=$prefix/$libdir "$exe") || fail "the pkg-config consumer failed"
	expect_line "the pkg-config consumer" "$out"
	uses_prefix_lib "the pkg-config consumer" "$exe" LD_LIBRARY_PATH="$prefix/$libdir"
}

# consumer_cmake: consumer/ as a CMake project that finds harp through CMAKE_PREFIX_PATH; the
# shared program runs from its build run path alone, the static one needs no libharp.so.
consumer_cmake() {
	local b=$tmp/cmake-consumer out dir
	if ! "$cmake" -S "$here/consumer" -B "$b" -DCMAKE_PREFIX_PATH="$prefix" \
		-DCMAKE_C_COMPILER="$cc" >"$tmp/consumer.log" 2>&1 ||
		! "$cmake" --build "$b" >>"$tmp/consumer.log" 2>&1; then
		cat "$tmp/consumer.log" >&2
		fail "the CMake consumer does not configure or build"
		return
	fi
	dir=$(sed -n 's/^harp_DIR:PATH=//p' "$b/CMakeCache.txt")
	[[ $dir == "$prefix/$libdir/cmake/harp" ]] || fail "CMake found harp in '$dir'"
	out=$(env -u LD_LIBRARY_PATH "$b/harp-consumer") || fail "harp-consumer failed"
	expect_line "harp-consumer (harp::harp)" "$out"
	uses_prefix_lib "harp-consumer (harp::harp)" "$b/harp-consumer" -u LD_LIBRARY_PATH
	out=$(env -u LD_LIBRARY_PATH "$b/harp-consumer-static") || fail "harp-consumer-static failed"
	expect_line "harp-consumer-static (harp::harp_static)" "$out"
	if matches 'NEEDED.*libharp' readelf -d "$b/harp-consumer-static"; then
		fail "harp-consumer-static (harp::harp_static) needs libharp.so"
	fi
	# SameMajorVersion: the next major version is another API.
	if "$cmake" -S "$here/consumer" -B "$tmp/cmake-consumer-next" -DCMAKE_PREFIX_PATH="$prefix" \
		-DHARP_WANT_VERSION="$((major + 1)).0" >"$tmp/next.log" 2>&1; then
		fail "find_package(harp $((major + 1)).0) found harp $version"
	fi
}

# The build tree's harp-perf keeps the build's plugin (perf/run and the tests rely on it).
got=$(plugin_default "$harp_perf")
[[ $got == "$plugin" ]] || fail "$harp_perf: default plugin is '$got', not the build's $plugin"

prefix=$tmp/prefix
if install_into "$tmp/install.log" "" --prefix "$prefix"; then
	check_tree "$prefix" "$prefix"
	consumer_pkg_config
	consumer_cmake
fi
if install_into "$tmp/install-destdir.log" "$tmp/stage" --prefix /opt/harp; then
	check_tree "$tmp/stage/opt/harp" /opt/harp
	if [[ $(find "$tmp/stage" -mindepth 1 -maxdepth 1) != "$tmp/stage/opt" ]]; then
		fail "DESTDIR install wrote outside DESTDIR/opt/harp: $(ls "$tmp/stage")"
	fi
fi

if ((failures)); then
	echo "install: $failures check(s) failed" >&2
	exit 1
fi
echo "install: every file in place under a prefix and under DESTDIR; pkg-config and CMake consumers built and ran"
