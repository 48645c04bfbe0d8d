# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# Guest scenario (tests/vm/plugin.sh boots two guests with it): NCCL's net plugin between the
# guests, driven through its ncclNetPlugin_vN tables the way NCCL drives it (harp-net-driver,
# tests/plugin/net_driver.c), guest a the server and b the client. Each (version, scenario) is
# one pair of driver runs; the driver checks every byte and prints result=ok. The drivers swap
# their rendezvous files (listen handles, marks) through the guests' web servers, as they would
# through a shared directory. Words of hvm_args:
#   versions=V[+V...]   plugin table versions, 8..12 (default 12)
#   scenarios=S[+S...]  the driver's scenarios among basic, pipeline, many, grouped, idle-peer
#                       (default basic)
#   mode=MODE           both sides' plugin must report AF_XDP mode MODE (zerocopy or copy)
#   quirks=0            HARP_ZEROCOPY_QUIRKS=0 (guest/xfer.sh says why)
set -e

versions=12 scenarios=basic
for w in ${hvm_args//,/ }; do
	case $w in
	versions=*) versions=${w#versions=} ;;
	scenarios=*) scenarios=${w#scenarios=} ;;
	*) hvm_common_word "$w" || hvm_fail "unknown scenario word '$w'" ;;
	esac
done
role=$hvm_role
export HARP_IFNAME=eth0 HARP_QUEUES=$hvm_queues HARP_LOG_LEVEL=info
driver=$hvm_build/tests/plugin/harp-net-driver
plugin=$hvm_build/nccl-net/libnccl-net-harp.so

for v in ${versions//+/ }; do
	for s in ${scenarios//+/ }; do
		tag=v$v-$s
		dir=/tmp/pd-$tag
		mkdir -p "$dir"
		hvm_barrier "start-$tag"
		rc=0
		hvm_rdv $role "$tag" "$dir" timeout 170 "$driver" --plugin "$plugin" --version "$v" \
			--scenario "$s" --role $role --dir "$dir" --timeout 140 >"$dir/out" 2>"$dir/err" ||
			rc=$?
		sed "s/^/[$tag $role] /" "$dir/out"
		grep -E 'harp: (WARN|ERROR)|FAIL' "$dir/err" | head -n 20 | sed "s/^/[$tag $role err] /" || true
		if [ $rc != 0 ] || ! grep -q '^result=ok' "$dir/out"; then
			tail -n 30 "$dir/err" | sed "s/^/[$tag $role err] /"
			hvm_fail "$tag: harp-net-driver exited $rc"
		fi
		# the plugin's device line (NCCL's INFO): "..., AF_XDP zerocopy mode, ..."
		mode=$(sed -n 's/.*, AF_XDP \([a-z]*\) mode, .*/\1/p' "$dir/out" "$dir/err" | head -n 1)
		echo "$tag: $role result ok, verified" \
			"$(sed -n 's/^verified_bytes=//p' "$dir/out" | tail -n 1) bytes, AF_XDP ${mode:-?} mode"
		if [ -n "$hvm_want_mode" ] && [ "$mode" != "$hvm_want_mode" ]; then
			hvm_fail "$tag: the plugin's device line says AF_XDP ${mode:-no} mode, expected $hvm_want_mode"
		fi
	done
done
hvm_end
