#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The XDP program that steers harp's packets is taken off the server's interface in the middle
# of a transfer (an operator, another tool that owns XDP there): harp's packets go to the kernel
# from then on. The server (HARP_PEER_TIMEOUT_MS=1500) must fail first, with ETIMEDOUT, saying
# what happened on its side: its program is gone; the client (3000) fails then too, by the
# server's close or its own timeout; both within 4 s.
#
#   xdp_gone.sh
#
# The binary is $HARP_XFER (default ${BUILD_DIR:-build}/harp-xfer). Exits 0 when every check
# holds, 1 if one does not.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/lib.sh"

use_xfer xdp_gone

harness_init xdp-gone
topo_pair 1500 1 || exit
fail=0
report() {
	echo "xdp_gone: FAIL $*"
	fail=1
}

args=(--sizes 1M --count 100000 --timeout 60)
spawn_xfer server 90 HARP_PEER_TIMEOUT_MS=1500 -- "${args[@]}"
srv=$spawned_pid
spawn_xfer client 90 HARP_PEER_TIMEOUT_MS=3000 -- "${args[@]}"
cli=$spawned_pid
sleep 2
if ! kill -0 "$srv" 2>/dev/null || ! kill -0 "$cli" 2>/dev/null; then
	report "the transfer ended before the program could be taken off"
	exit 1
fi
t0=${EPOCHREALTIME/./}
ip -n "$ns_b" link set dev "$if_b" xdp off
rc_s=0 rc_c=0
wait "$srv" || rc_s=$?
wait "$cli" || rc_c=$?
ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
for end in server client; do
	rc=$rc_s
	[[ $end == client ]] && rc=$rc_c
	line=$(grep -m 1 '^harp-xfer: ' "$tmp/$end.err" || true)
	echo "xdp_gone: $end rc=$rc: ${line:-no failed request}"
	grep -h 'harp: ERROR' "$tmp/$end.err" | head -n 3 | sed 's/^/    /'
	((rc != 0)) || report "$end: exit 0, expected a failed request"
done
grep -q '^harp-xfer: .*: Connection timed out$' "$tmp/server.err" ||
	report "server: the request did not fail with ETIMEDOUT (Connection timed out)"
grep -q "harp: ERROR: engine 0 on $if_b: the XDP program that steered harp's packets (id [0-9]*) is no longer attached" \
	"$tmp/server.err" || report "the server did not say its XDP program is gone"
((ms <= 4000)) || report "the two ended $ms ms after the program went, more than 4000"
if ((fail)); then
	exit 1
fi
echo "xdp_gone: held: both failed, $ms ms after the program went; the server named the cause"
