#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# A soak: one bidirectional verified transfer (4 connections, sizes from 1 B to 1 MiB) through
# the impairment hop for DURATION seconds, the hop going through every fault profile in turn
# (PROFILE_S seconds each: none drop1 drop5 reorder dup2 corrupt ratecap all, then again), while
# both harp-xfer processes' resident memory and open file descriptors are sampled every SAMPLE_S
# seconds.
#
#   soak.sh DURATION [SAMPLE_S [PROFILE_S]]     (defaults: 30, and DURATION/9 per profile)
#
# Holds when both ends verified every message that completed, in both directions, with data
# lost and repaired (retransmits) and corrupted frames refused (rx_bad), and when both series are
# flat: every fd count equals the first sample's, and no RSS sample after the first full cycle
# of profiles (or the first half of the run, if shorter) exceeds the largest before it by more
# than RSS_SLACK_KIB (default 2048). Prints the samples. $HARP_XFER is harp-xfer. Exits 0 if it held, 1 if not.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/../netns/lib.sh"

duration=${1:?usage: soak.sh DURATION [SAMPLE_S [PROFILE_S]]}
sample_s=${2:-30}
profile_s=${3:-$(((duration + 8) / 9))}
slack_kib=${RSS_SLACK_KIB:-2048}
profiles=(none drop1 drop5 reorder dup2 corrupt ratecap all)
use_xfer soak
((duration >= 30 && sample_s >= 1 && profile_s >= 5)) ||
	{ echo "soak: DURATION at least 30, SAMPLE_S at least 1, PROFILE_S at least 5" >&2; exit 2; }

harness_init soak
fail=0
report() {
	echo "soak: FAIL $*"
	fail=1
}

topo_hop 1500 1 || exit 1
limit=$((duration + 90))
args=(--bidir --conns 4 --sizes 1,4095,64K,1M --count 4 --window 8 --duration "$duration"
	--timeout $((duration + 60)))
spawn_xfer server "$limit" -- "${args[@]}"
srv=$spawned_pid
spawn_xfer client "$limit" -- "${args[@]}"
cli=$spawned_pid

# the harp-xfer process under each timeout wrapper (ip netns exec replaced itself with it)
child_of() {
	local p
	for ((i = 0; i < 50; i++)); do
		p=$(pgrep -P "$1" | head -n 1 || true)
		[[ -n $p ]] && { echo "$p"; return; }
		sleep 0.1
	done
}
srv_x=$(child_of "$srv") cli_x=$(child_of "$cli")
[[ -n $srv_x && -n $cli_x ]] || { report "harp-xfer did not start"; exit 1; }

# sample: "t rss_kib fds" of each side into $tmp/NAME.samples, while it lives
sample() {
	local name=$1 pid=$2 t=$3 rss fds
	rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null) || return 0
	fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
	[[ -n $rss ]] && echo "$t $rss $fds" >>"$tmp/$name.samples"
}

start=$SECONDS next_sample=$sample_s next_profile=0 p=0
while kill -0 "$srv" 2>/dev/null || kill -0 "$cli" 2>/dev/null; do
	t=$((SECONDS - start))
	if ((t >= next_profile && t < duration)); then
		hop_impair_clear
		hop_impair "${profiles[p % ${#profiles[@]}]}" 2>/dev/null ||
			report "profile ${profiles[p % ${#profiles[@]}]} could not be set"
		echo "soak: t=${t}s profile=${profiles[p % ${#profiles[@]}]}"
		p=$((p + 1)) next_profile=$((next_profile + profile_s))
	fi
	if ((t >= next_sample && t <= duration)); then
		sample server "$srv_x" "$t"
		sample client "$cli_x" "$t"
		next_sample=$((next_sample + sample_s))
	fi
	sleep 0.5
done
hop_impair_stats >"$tmp/impair"
rc_s=0 rc_c=0
wait "$srv" || rc_s=$?
wait "$cli" || rc_c=$?

key() { sed -n "s/^$1=//p" "$2" | head -n 1; }
# the reference: the first cycle of profiles, or the first half of the run if shorter
cycle=$((profile_s * ${#profiles[@]}))
((cycle <= duration / 2)) || cycle=$((duration / 2))
for end in server client; do
	rc=$rc_s
	[[ $end == client ]] && rc=$rc_c
	out=$tmp/$end.out
	echo "soak: $end rc=$rc result=$(key result "$out") verified_bytes=$(key verified_bytes "$out")" \
		"verified_msgs=$(key verified_msgs "$out") abandoned=$(key duration_abandoned "$out")" \
		"retransmits=$(key retransmits "$out") rx_bad=$(key rx_bad "$out")" \
		"goodput_gbps=$(key goodput_gbps "$out")"
	if ((rc)) || [[ $(key result "$out") != ok ]]; then
		report "$end: rc $rc"
		grep -hv INFO "$tmp/$end.err" | tail -n 8 | sed 's/^/    | /'
	fi
	(($(key verified_bytes "$out") > 0)) 2>/dev/null || report "$end verified nothing"
	echo "soak: $end samples (t s, RSS KiB, fds): $(tr '\n' ';' <"$tmp/$end.samples" 2>/dev/null)"
	awk -v cycle="$cycle" -v slack="$slack_kib" -v who="$end" '
		NR == 1 { fds0 = $3 }
		$3 != fds0 { printf "soak: FAIL %s: %d fds at %d s, %d at first\n", who, $3, $1, fds0; bad = 1 }
		$1 <= cycle { if ($2 > base) base = $2; next }
		base && $2 > base + slack {
			printf "soak: FAIL %s: RSS %d KiB at %d s, more than %d KiB over the first cycle'"'"'s %d\n",
				who, $2, $1, slack, base; bad = 1 }
		END { if (NR < 3) { printf "soak: FAIL %s: only %d samples\n", who, NR; bad = 1 }; exit bad }
	' "$tmp/$end.samples" || fail=1
done
retx=$(($(key retransmits "$tmp/server.out") + $(key retransmits "$tmp/client.out")))
bad=$(($(key rx_bad "$tmp/server.out") + $(key rx_bad "$tmp/client.out")))
echo "soak: hop: $(tr '\n' ' ' <"$tmp/impair")"
((retx > 0)) || report "no retransmits: the hop lost nothing?"
((bad > 0)) || report "no frame refused: the hop corrupted nothing?"
if ((fail)); then
	exit 1
fi
echo "soak: held: ${duration} s, every completed message verified both ways, RSS and fds flat"
