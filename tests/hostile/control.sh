#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# An on-path attacker on the forwarding hop forges messages into the TCP control connection of a
# live transfer (control_inject.py): A - M - B, harp-xfer sending 64 KiB messages from the client
# in A to the server in B for a few seconds, the attacker in M. Per TYPE:
#
#   close    M drops the first packet of each of A's messages (A still sends the rest of each),
#            then a CLOSE "from B" tells A that B took every psn A sent (1 + the highest psn M
#            saw from A): taken as B's final ack, it would complete sends whose first packets
#            never reached B (harp at 438fa4b completed 8)
#   path     M drops A's probes; PATH reports "from B" for the candidates of A's probe rounds
#            tell A that pairs no probe crossed reach B, and M black-holes half of them
#   silent   SILENT "from B" tells A that nothing of its data path arrives (3 messages)
#   unheard  M drops A's UDP for 3 s, then UNHEARD "from A" tells B that A's timeouts found
#            every path silent and A heard nothing for 2.9 s: B replaces its pairs
#   none     the attacker only watches: the harness's baseline
#   all      close, path, silent, unheard in turn, each on a topology of its own
#
#   control.sh [--family 4|6] TYPE[,TYPE...] [auth]
#
# The assertion, for every type: the server verified at least the bytes whose sends completed on
# the client (verified_bytes >= sent_bytes): a send that completes must have arrived. The
# attacker may break the connection (an end failing with an error is fine); a false completion
# never is. Where an end ended with result=ok it must have moved bytes, and the attacker must
# have injected what it meant to (else the run proves nothing). With auth (HARP_AUTH=1 on both
# ends, and the attacker's messages in the authenticated 40-byte form, counter and a random tag),
# the attacked end (the client, but the server for unheard) must also report ctrl_refused >= 1:
# the forgery was refused and counted; an end that prints no ctrl_refused= line fails the test,
# it never skips it.
#
# $HARP_XFER is harp-xfer. Exits 0 if every check held, 1 if one did not, 77 if it cannot run
# here.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/../netns/lib.sh"

usage() {
	echo "usage: control.sh [--family 4|6] close|path|silent|unheard|none|all[,...] [auth]" >&2
	exit 2
}
if [[ ${1:-} == --family ]]; then
	topo_family=${2:-}
	shift 2 || usage
fi
[[ $topo_family == 4 || $topo_family == 6 ]] || usage
[[ $# -ge 1 ]] || usage
types=${1//,/ }
[[ $types == all ]] && types="close path silent unheard"
auth=${2:-}
[[ -z $auth || $auth == auth ]] || usage
for type in $types; do
	case $type in
	close | path | silent | unheard | none) ;;
	*) usage ;;
	esac
done
if ! command -v python3 >/dev/null; then
	echo "control: SKIP: python3 missing" >&2
	exit 77
fi
use_xfer control

harness_init control
form=16
if [[ $auth ]]; then
	export HARP_AUTH=1
	form=40
fi
fail=0
report() {
	echo "control: FAIL $*"
	fail=1
}
key() { sed -n "s/^$1=//p" "$2" | head -n 1; }
# how long each transfer sends; the attacks strike 1 to 4 s in
xfer_args=(--sizes 64K --duration 5 --timeout 60)

# end_line TYPE END RC FILE: the end's result line
end_line() {
	local f=$4
	echo "control: $1 $2 rc=$3 result=$(key result "$f") sent_bytes=$(key sent_bytes "$f")" \
		"verified_bytes=$(key verified_bytes "$f") verified_msgs=$(key verified_msgs "$f")" \
		"ctrl_refused=$(key ctrl_refused "$f" | grep . || echo none)" \
		"rx_bad_auth=$(key rx_bad_auth "$f") auth=$(key auth "$f")"
}

# check TYPE DIR ATTACKED RC_S RC_C RC_A: the checks of one run
check() {
	local type=$1 dir=$2 attacked=$3 rc_s=$4 rc_c=$5 rc_a=$6 sent verified refused end
	sent=$(key sent_bytes "$dir/client.out") verified=$(key verified_bytes "$dir/server.out")
	if [[ -z $sent || -z $verified ]]; then
		report "$type: no sent_bytes from the client or verified_bytes from the server" \
			"(client rc $rc_c, server rc $rc_s)"
		return
	fi
	if ((sent > verified)); then
		report "$type: false completion: the client's sends completed for $sent bytes," \
			"the server verified $verified ($(((sent - verified) / 65536)) messages of 64 KiB" \
			"reported complete that never arrived)"
	fi
	for end in server client; do
		if [[ $(key result "$dir/$end.out") == ok ]] &&
			(($(key "$([[ $end == server ]] && echo verified || echo sent)_bytes" \
				"$dir/$end.out") == 0)); then
			report "$type: the $end reports result=ok but moved no bytes"
		fi
	done
	if [[ $type == none ]]; then
		((rc_s == 0 && rc_c == 0)) || report "none: the transfer failed without an attack"
	elif ((rc_a)) || (($(key injected "$dir/attack" | grep . || echo 0) < 1)); then
		report "$type: the attacker did not inject (rc $rc_a): the run proves nothing"
		tail -n 5 "$dir/attack.log" | sed 's/^/    | /'
	fi
	[[ $auth ]] || return 0
	for end in server client; do
		if ! grep -q '^auth=AES-256-GCM$\|^auth=ChaCha20-Poly1305$' "$dir/$end.out"; then
			report "$type: HARP_AUTH=1, but the $end's connection did not authenticate"
		fi
	done
	[[ $type != none ]] || return 0
	refused=$(key ctrl_refused "$dir/$attacked.out")
	if [[ -z $refused ]]; then
		report "$type: the $attacked (attacked end) printed no ctrl_refused= line: this" \
			"harp-xfer does not count refused control messages"
	elif ((refused < 1)); then
		report "$type: the $attacked took the forged control messages (ctrl_refused=0)"
	fi
}

# attack TYPE: one transfer across a fresh A - M - B with TYPE's attacker on M.
attack() {
	local type=$1 dir="$tmp/$1" out victim peer attacked extra srv cli att rc_s=0 rc_c=0 rc_a=0
	mkdir "$dir"
	topo_hop 1500 1 || exit
	# the direction of the forgeries: B's messages to A, but A's to B for unheard
	out=$if_ma victim=$ip_a peer=$ip_b attacked=client extra=()
	if [[ $type == unheard ]]; then
		out=$if_mb victim=$ip_b peer=$ip_a attacked=server
		# B, waiting on A, sends on its paths only once it pings (a quarter of the 10 s
		# peer timeout): the deafness claimed must span that for B to replace its pairs
		extra=(--at 1 --lead 3 --hold 0.2)
	fi
	spawn_bounded 90 ip netns exec "$ns_b" "$xfer" server --ifname "$if_b" \
		--handle-file "$dir/handle" "${xfer_args[@]}" >"$dir/server.out" 2>"$dir/server.err"
	srv=$spawned_pid
	pids+=("$srv")
	wait_until 100 test -s "$dir/handle" || true
	# the attacker reads the listener's port from the handle and listens before the client
	# connects, so it follows the control stream from its first segment
	spawn_bounded 60 ip netns exec "$ns_m" python3 "$here/control_inject.py" --type "$type" \
		--out "$out" --victim "$victim" --peer "$peer" --handle "$dir/handle" \
		--report "$dir/attack" --ready "$dir/ready" --form "$form" "${extra[@]}" \
		>"$dir/attack.log" 2>&1
	att=$spawned_pid
	pids+=("$att")
	wait_until 100 test -e "$dir/ready" || true
	spawn_bounded 90 ip netns exec "$ns_a" "$xfer" client --ifname "$if_a" \
		--handle-file "$dir/handle" "${xfer_args[@]}" >"$dir/client.out" 2>"$dir/client.err"
	cli=$spawned_pid
	pids+=("$cli")
	wait "$cli" || rc_c=$?
	wait "$srv" || rc_s=$?
	wait "$att" || rc_a=$?
	echo "control: $type attacker rc=$rc_a: $(tr '\n' ' ' <"$dir/attack" 2>/dev/null || echo none)"
	end_line "$type" client "$rc_c" "$dir/client.out"
	end_line "$type" server "$rc_s" "$dir/server.out"
	grep -hv INFO "$dir/client.err" "$dir/server.err" 2>/dev/null | tail -n 6 |
		sed 's/^/    | /' || true
	check "$type" "$dir" "$attacked" "$rc_s" "$rc_c" "$rc_a"
	topo_cleanup
}

for type in $types; do
	attack "$type"
done
if ((fail)); then
	exit 1
fi
echo "control: held: no forged control message completed a send ($types${auth:+, auth})"
