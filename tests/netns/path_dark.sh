#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The path between two idle connected processes goes dark: with nothing in flight and nothing
# posted, M starts dropping everything it forwards (TCP, UDP, ICMP), as a cut link or a host that
# vanished looks from the other end. The control connection's keepalive (HARP_PEER_TIMEOUT_MS)
# must find it, and the first request posted afterwards must fail with ETIMEDOUT (a timeout, as
# docs/PROTOCOL.md says), not ECONNRESET (a reset: the peer's kernel answered).
#
#   path_dark.sh
#
# A - M - B, one connection, HARP_PEER_TIMEOUT_MS=2000 on both sides; each side idles 8 s after
# set-up (harp-xfer --idle), the path going dark 1 s into it, then posts its transfer. Checks:
# both processes fail, the first request each posts failing with "Connection timed out", harp's
# error naming the control connection's timeout, and nothing saying "Connection reset"; both end
# within 12 s of the cut.
#
# The binary is $HARP_XFER (default ${BUILD_DIR:-build}/harp-xfer). Exits 0 when every check
# holds, 1 if one does not.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/lib.sh"

use_xfer path_dark

harness_init path-dark
topo_hop 1500 1 || exit
fail=0
report() {
	echo "path_dark: FAIL $*"
	fail=1
}

args=(--sizes 1M --count 4 --bidir --idle 8 --timeout 60)
spawn_xfer server 90 HARP_PEER_TIMEOUT_MS=2000 -- "${args[@]}"
srv=$spawned_pid
spawn_xfer client 90 HARP_PEER_TIMEOUT_MS=2000 -- "${args[@]}"
cli=$spawned_pid

# set-up takes well under a second here; then the cut, while both idle
sleep 1
ns_exec "$ns_m" nft -f - <<EOF
table inet harp_dark {
	chain forward {
		type filter hook forward priority filter; policy drop;
	}
}
EOF
t_cut=$SECONDS
rc_s=0 rc_c=0
wait "$srv" || rc_s=$?
wait "$cli" || rc_c=$?
took=$((SECONDS - t_cut))
for end in server client; do
	rc=$rc_s
	[[ $end == client ]] && rc=$rc_c
	line=$(grep -m 1 '^harp-xfer: ' "$tmp/$end.err" || true)
	echo "path_dark: $end rc=$rc: ${line:-no failed request}"
	grep -h 'harp: ERROR' "$tmp/$end.err" | head -n 2 | sed 's/^/    /'
	if ((rc == 0)); then
		report "$end: exit 0, expected a failed request"
	fi
	if ! grep -q ': Connection timed out$' <<<"$line"; then
		report "$end: the request did not fail with ETIMEDOUT (Connection timed out)"
	fi
	if ! grep -q 'harp: ERROR: .*(control connection: Connection timed out)' "$tmp/$end.err"; then
		report "$end: harp did not say the control connection timed out"
	fi
	if grep -q 'Connection reset' "$tmp/$end.err"; then
		report "$end: a reset was reported; the path went dark, nobody reset anything"
	fi
done
((took <= 12)) || report "the two ended $took s after the cut, more than 12"
if ((fail)); then
	exit 1
fi
echo "path_dark: held: both failed with ETIMEDOUT, $took s after the cut"
