#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# harp's images as an operator runs them, with podman: the node agent image and the plugin
# layer built from container/*.Dockerfile (base images as build arguments, no file edited), and
# a training image made from the plugin layer the way container/README.md says. Two node
# network namespaces A and B joined by veth, each prepared by the agent image running
# `harp-attach run` privileged in that namespace, then:
#   agent        a server on B and a client on A, each a training container with --cap-drop ALL
#                --cap-add NET_RAW --cap-add IPC_LOCK under podman's default seccomp profile
#                (which refuses bpf()), move data through the plugin (NCCL's default name,
#                libnccl-net.so) and the node agents; every byte checked
#   refused      the same container with /sys/fs/bpf instead of the agent's socket cannot open
#                the pins, and says the seccomp profile is why
#   pins         a server on B with seccomp=unconfined, /sys/fs/bpf and no agent socket uses the
#                pinned maps, against a client on A through A's agent; every byte checked
#   stop         podman stop on each agent container runs down: no XDP program, no pins, no
#                socket left
#
#   podman.sh --repo DIR --driver BIN [--images TAG --step build|test|remove]
#
# By default one run builds the images (tagged with its PID), runs the cases and removes the
# images. With --images the steps run apart on the images tagged TAG: build makes them, test runs
# the cases on them, remove removes them (ctest builds them in container_images, beside the other
# tests that build, runs the cases alone in container_podman, and removes them in
# container_images_rm). The base image is made once per machine (debootstrap from the mirror in
# this machine's apt sources, podman import) and kept as
# localhost/harp-test/debian:bookworm-minbase. The intermediate images of the builds' layer cache
# are removed once the images are built; the cache lets the plugin image take the agent image's
# build stage (the two Dockerfiles' build stages are the same instructions on the same tree;
# where they differ, the cache misses and each builds its own). podman runs with --runtime runc
# (crun refuses this machine's cgroup set-up). Exits 0 if every case held (or the step did its
# work), 1 if one did not or podman cannot run here (one line says why), 2 on bad usage.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/../netns/lib.sh"
# shellcheck source=tests/container/base.sh
source "$here/base.sh"

usage() {
	echo "container: $*" >&2
	sed -n '20s/^# \{0,1\}//p' "$0" >&2
	exit 2
}
repo="" driver="" tag="" step=all
while (($#)); do
	case $1 in
	--repo) repo=${2:?} && shift ;;
	--driver) driver=${2:?} && shift ;;
	--images) tag=${2:?} && shift ;;
	--step) step=${2:?} && shift ;;
	*) usage "unknown argument '$1'" ;;
	esac
	shift
done
[[ -f $repo/container/agent.Dockerfile && -x $driver ]] ||
	usage "--repo (harp's source) and --driver (harp-net-driver) are required"
[[ $step =~ ^(all|build|test|remove)$ ]] || usage "--step is build, test or remove, not '$step'"
[[ $step == all || -n $tag ]] || usage "--step $step needs --images TAG"
[[ -z $tag || $tag =~ ^[a-z0-9][a-z0-9_.-]{0,63}$ ]] ||
	usage "--images '$tag' is no image tag (lowercase letters, digits, '_', '.', '-')"
repo=$(realpath "$repo")
for t in podman runc debootstrap tar; do
	command -v "$t" >/dev/null ||
		{ echo "container: missing $t (scripts/setup.sh installs podman, runc and debootstrap)"; exit 1; }
done
((EUID == 0)) || { echo "container: needs root (podman with XDP, network namespaces)"; exit 1; }

run_id=harp-ct-$$
tag=${tag:-$$}
agent_img=localhost/harp-test/agent:$tag plugin_img=localhost/harp-test/plugin:$tag
train_img=localhost/harp-test/train:$tag
pins=/sys/fs/bpf/$run_id
bpffs_mounted=0 # this run mounted /sys/fs/bpf (below), and unmounts it if it is left empty
# the images go when this run ends: always in one run, on failure when it only builds them, and
# when it is the step that removes them
remove_images=$([[ $step == all || $step == remove ]] && echo 1 || echo 0)

harness_init container
# shellcheck disable=SC2317 # called from the EXIT trap
harness_cleanup_extra() {
	local c side ns_var if_var
	for c in $("${pm[@]}" ps -a --format '{{.Names}}' 2>/dev/null | grep "^$run_id-" || true); do
		"${pm[@]}" rm -f -t 5 "$c" >/dev/null 2>&1 || true
	done
	for side in a b; do
		ns_var=ns_$side if_var=if_$side
		[[ -n ${!ns_var} && -e /run/netns/${!ns_var} ]] &&
			nsenter --net="/run/netns/${!ns_var}" "$repo/scripts/harp-attach" down "${!if_var}" \
				--conf "$tmp/$side/etc/harp.conf" --pin-root "$pins" >/dev/null 2>&1
	done
	rm -rf "$pins"
	# what bpffs holds of itself (its preloaded iterators) and libxdp's empty directory aside
	if ((bpffs_mounted)) && [[ -z $(find /sys/fs/bpf -mindepth 1 ! -name maps.debug \
		! -name progs.debug ! \( -type d -name xdp -empty \) 2>/dev/null) ]]; then
		umount /sys/fs/bpf 2>/dev/null || true
	fi
	if ((remove_images)); then
		"${pm[@]}" rmi -f "$train_img" "$plugin_img" "$agent_img" >/dev/null 2>&1 || true
	fi
	remove_layers
}
# The untagged images there were before this run's builds (image_ids), and remove_layers: those
# made since, the layer cache's intermediates, children before parents (each pass removes the
# ones no other image stands on). A tagged image is never one of them.
images_before="" layers_taken=0
image_ids() {
	"${pm[@]}" images -a --no-trunc --format '{{.ID}} {{.Repository}}' 2>/dev/null |
		awk '$2 == "<none>" {print $1}' | sort -u
}
remove_layers() {
	local ours _
	((layers_taken)) || return 0
	for _ in 1 2 3 4 5 6 7 8; do
		ours=$(comm -13 <(echo "$images_before") <(image_ids))
		[[ -n $ours ]] || return 0
		# shellcheck disable=SC2086 # one id a word
		"${pm[@]}" rmi $ours >/dev/null 2>&1 || true
	done
	echo "container: the layer cache's images of this run left behind: ${ours//$'\n'/ }"
}
fail=0
report() {
	echo "container: FAIL $*"
	fail=1
}

if ! "${pm[@]}" info >"$tmp/info.log" 2>&1; then
	echo "container: podman cannot run here: $(grep -m1 -i error "$tmp/info.log" || tail -n 1 "$tmp/info.log")"
	exit 1
fi

# ---- images ---------------------------------------------------------------------------------------

# build NAME IMAGE DOCKERFILE CONTEXT BUILD_ARG...: podman build; the log's tail on failure.
build() {
	local name=$1 image=$2 file=$3 ctx=$4 args=() t0=$SECONDS
	shift 4
	for a in "$@"; do
		args+=(--build-arg "$a")
	done
	if ! run_bounded 1500 "${pm[@]}" build --layers --network host "${limits[@]}" "${args[@]}" -f "$file" \
		-t "$image" "$ctx" >"$tmp/build-$name.log" 2>&1; then
		echo "container: FAIL podman build $name:"
		tail -n 15 "$tmp/build-$name.log" | sed 's/^/    | /'
		exit 1
	fi
	echo "container: built $image from ${file#"$repo"/} in $((SECONDS - t0)) s"
}

# build_images: the agent image, the plugin layer and the training image; a failure removes
# what was built.
build_images() {
	base_image container || exit 1
	images_before=$(image_ids)
	layers_taken=1 remove_images=1
	build agent "$agent_img" "$repo/container/agent.Dockerfile" "$repo" \
		"BUILD_BASE=$base" "RUNTIME_BASE=$base"
	build plugin "$plugin_img" "$repo/container/plugin.Dockerfile" "$repo" "BUILD_BASE=$base"
	mkdir -p "$tmp/train-ctx"
	cp "$driver" "$tmp/train-ctx/harp-net-driver"
	build train "$train_img" "$here/train.Dockerfile" "$tmp/train-ctx" "BASE=$base" \
		"PLUGIN=$plugin_img"
	remove_layers
	[[ $step == all ]] || remove_images=0
}

case $step in
remove)
	echo "container: removing $agent_img, $plugin_img and $train_img"
	exit 0
	;;
build)
	build_images
	exit 0
	;;
test)
	for img in "$agent_img" "$plugin_img" "$train_img"; do
		"${pm[@]}" image exists "$img" ||
			{ echo "container: FAIL no image $img: run --step build --images $tag first"; exit 1; }
	done
	;;
all) build_images ;;
esac

# ---- nodes ----------------------------------------------------------------------------------------

# The node's bpffs, where the agent containers pin the maps for the training containers to see:
# every node's init system (systemd) mounts it at /sys/fs/bpf. A host whose init mounts none
# (this machine's) gets it here, as `harp-attach up` mounts it on a host: otherwise each agent
# container mounted a bpffs of its own, private to it, and no other container saw the pins
# (container_podman failed so on a fresh machine unless an earlier test had mounted one).
if ! mountpoint -q /sys/fs/bpf; then
	mount -t bpf bpf /sys/fs/bpf || { echo "container: FAIL cannot mount bpffs at /sys/fs/bpf"; exit 1; }
	bpffs_mounted=1
	echo "container: no bpffs at /sys/fs/bpf, as a node's init would mount: mounted one"
fi
topo_pair 1500 1 || exit 1
for side in a b; do
	ns_var=ns_$side if_var=if_$side
	mkdir -p "$tmp/$side/etc" "$tmp/$side/run"
	"${pm[@]}" run -d --name "$run_id-agent-$side" --privileged --network "ns:/run/netns/${!ns_var}" \
		"${limits[@]}" -v /sys/fs/bpf:/sys/fs/bpf -v "$tmp/$side/etc:/etc/harp" \
		-v "$tmp/$side/run:/run/harp" "$agent_img" --pin-root "$pins" --hugepages off \
		run "${!if_var}" >/dev/null
	for _ in $(seq 100); do
		"${pm[@]}" logs "$run_id-agent-$side" 2>&1 | grep -q 'harp-attach: run: harp is up' && break
		sleep 0.2
	done
	if ! "${pm[@]}" logs "$run_id-agent-$side" 2>&1 | grep -q 'harp-attach: run: harp is up'; then
		echo "container: FAIL the agent container of node $side did not come up:"
		"${pm[@]}" logs "$run_id-agent-$side" 2>&1 | tail -n 10 | sed 's/^/    | /'
		exit 1
	fi
	"${pm[@]}" logs "$run_id-agent-$side" 2>&1 | grep '^harp-attach: up:' | sed "s/^/container: node $side: /"
done

# ---- training containers --------------------------------------------------------------------------

# train SIDE NAME MODE ROLE: a training container on SIDE's node running the driver as ROLE, in
# the background; MODE agent (default seccomp, the agent's socket), pins (seccomp=unconfined,
# /sys/fs/bpf, no socket) or refused (default seccomp, /sys/fs/bpf, no socket). Output in
# $tmp/NAME.out, pid in train_pid.
train_env=() # more podman run options for the next training containers
train() {
	local side=$1 name=$2 mode=$3 role=$4 ns_var=ns_$1 opts=()
	case $mode in
	agent) opts=(-v "$tmp/$side/run:/run/harp:ro") ;;
	pins) opts=(--security-opt seccomp=unconfined -v /sys/fs/bpf:/sys/fs/bpf:ro) ;;
	refused) opts=(-v /sys/fs/bpf:/sys/fs/bpf:ro) ;;
	esac
	spawn_bounded 120 "${pm[@]}" run --rm --name "$run_id-$name" --network "ns:/run/netns/${!ns_var}" \
		--cap-drop ALL --cap-add NET_RAW --cap-add IPC_LOCK "${limits[@]}" "${opts[@]}" \
		-v "$tmp/$side/etc:/etc/harp:ro" -v "$tmp/rdv-$5:/rdv" -e HARP_LOG_LEVEL=info "${train_env[@]}" \
		"$train_img" --plugin libnccl-net.so --version 12 --scenario basic --role "$role" \
		--dir /rdv --timeout 60 >"$tmp/$name.out" 2>&1
	train_pid=$spawned_pid
	pids+=("$spawned_pid")
}

# pair CASE SERVER_MODE CLIENT_MODE: a server on B and a client on A; both must verify the data.
pair() {
	local case=$1 srv cli rc_s=0 rc_c=0
	mkdir -p "$tmp/rdv-$case"
	train b "$case-server" "$2" server "$case"
	srv=$train_pid
	train a "$case-client" "$3" client "$case"
	cli=$train_pid
	wait "$srv" || rc_s=$?
	wait "$cli" || rc_c=$?
	echo "container: case=$case server($2) rc=$rc_s $(grep -h '^verified_bytes=\|result=' "$tmp/$case-server.out" | tr '\n' ' ')"
	echo "container: case=$case client($3) rc=$rc_c $(grep -h '^verified_bytes=\|result=' "$tmp/$case-client.out" | tr '\n' ' ')"
	if ((rc_s || rc_c)); then
		report "$case: server rc $rc_s, client rc $rc_c"
		tail -n 12 "$tmp/$case-server.out" "$tmp/$case-client.out" | sed 's/^/    | /'
		return
	fi
	for end in server client; do
		mode=$2
		[[ $end == client ]] && mode=$3
		case $mode in
		agent) want='using the node agent at /run/harp/agent.sock.*this process makes no bpf() call' ;;
		pins) want='using the XDP program harp-attach attached' ;;
		esac
		grep -q "$want" "$tmp/$case-$end.out" ||
			report "$case: the $end does not say it went the $mode way ($want)"
	done
}

pair agent agent agent

# refused: podman's default profile is in force, and the pins cannot be opened under it.
mkdir -p "$tmp/rdv-refused"
train b refused refused server refused
rc=0
wait "$train_pid" || rc=$?
line=$(grep -m1 'seccomp filter' "$tmp/refused.out" || true)
echo "container: case=refused rc=$rc"
echo "    ${line:0:240}"
if ((rc == 0)) || [[ -z $line ]]; then
	report "refused: the driver under the default profile did not fail naming seccomp"
	tail -n 8 "$tmp/refused.out" | sed 's/^/    | /'
fi

# With HARP_AUTH=1: the image has no libsodium but the plugin layer's, found beside the plugin.
train_env=(-e HARP_AUTH=1)
pair pins pins agent
train_env=()
for end in server client; do
	grep -q 'HARP_AUTH=1: every frame carries a MAC' "$tmp/pins-$end.out" ||
		report "pins: the $end did not authenticate its frames (HARP_AUTH=1)"
done

# stop: the agent containers take harp down as they stop.
for side in a b; do
	ns_var=ns_$side if_var=if_$side
	rc=0
	run_bounded 60 "${pm[@]}" stop -t 30 "$run_id-agent-$side" >/dev/null || rc=$?
	"${pm[@]}" logs "$run_id-agent-$side" >"$tmp/agent-$side.log" 2>&1 || true
	code=$("${pm[@]}" inspect --format '{{.State.ExitCode}}' "$run_id-agent-$side" 2>/dev/null || echo "?")
	echo "container: case=stop node=$side exit=$code $(grep -m1 '^harp-attach: down:' "$tmp/agent-$side.log" || true)"
	[[ $rc == 0 && $code == 0 ]] || report "stop: node $side's agent container ended with $code (podman stop rc $rc)"
	! ip -n "${!ns_var}" link show dev "${!if_var}" | grep -q ' xdp' ||
		report "stop: an XDP program is still attached to ${!if_var}"
	[[ ! -e $pins/${!if_var} ]] || report "stop: $pins/${!if_var} is still there"
	[[ ! -e $tmp/$side/run/agent.sock ]] || report "stop: node $side's agent socket is still there"
done

if ((fail)); then
	for side in a b; do
		sed "s/^/    agent-$side | /" "$tmp/agent-$side.log" | tail -n 15
	done
	exit 1
fi
echo "container: every case held"
