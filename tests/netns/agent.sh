#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The node agent (harp-agent) as the DaemonSet runs it, `harp-attach run` on each node (namespace),
# with its clients confined as pods under the runtimes' default seccomp profile are (no-bpf: every
# bpf() fails):
#   churn        both ends open and close 500 connections each (every close sends the agent a
#                FORGET) beside a transfer through the agents that runs until they are done:
#                the transfer completes verified, no end is dropped by its agent, the holders'
#                map still names each end on its queues, and no packet found its queue without
#                a socket (xdp_no_socket 0)
#   transfer     both ends reach their pinned program only through their node's agent and move
#                verified data over two queues, four connections; each end says it uses the
#                agent
#   taken        a second process asking for a queue the first holds is refused, the holder
#                named; once the holder is gone the queue is free again (the agent forgot it)
#   bad_client   a client sending garbage, one speaking a newer version, one an older (answered
#                in its own, shorter message size, so that it can read the refusal), one handing
#                over a descriptor that is no AF_XDP socket, one sending a message too long and
#                one with two descriptors get one clear answer each; the agent goes on serving
#   hijack       a process holding queue 0 through the pinned maps; a client of the agent asks
#                to enter its own socket, bound to queue 1, under key 0: refused, the holder
#                named
#   forged       a client claiming to be pid 1, named "attacker", bound at time 0: the agent's
#                record of it says its real pid and name and the time it entered
#   idle         300 connections that never say HELLO (the agent serves 256) do not keep a harp
#                process out
#   uid          a non-root client cannot connect to an agent serving root alone; an agent
#                serving another uid (--allow-uid) tells it it is not served, and serves that
#                uid, keeping at most --max-per-uid of its connections that have not said HELLO;
#                two pods (pid namespaces) of one uid keep a budget each, also where the kernel
#                cannot name a pidfd's pid namespace (before 6.11: forced in this test build),
#                where an agent in a pid namespace of its own refuses to start, saying why
#   restart      the agent killed while a server waits for its client: run starts another on
#                the same socket, which serves a new process, and the waiting server connects
#                to it again and moves verified data with a client that comes after
#   stop         SIGTERM to run stops the agent (its socket gone) and takes harp down (no XDP
#                program on the interface, no pins), run exiting 0
#
#   agent.sh
#
# $HARP_XFER is harp-xfer, $HARP_AGENT harp-agent, $NO_BPF the no-bpf wrapper, $XSK_HOLD
# xsk-hold. Exits 0 if every case holds, 1 if one does not.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$here/lib.sh"

xfer=${HARP_XFER:-${BUILD_DIR:-build}/harp-xfer}
agent=${HARP_AGENT:-${BUILD_DIR:-build}/harp-agent}
no_bpf=${NO_BPF:-${BUILD_DIR:-build}/tests/netns/no-bpf}
xsk_hold=${XSK_HOLD:-${BUILD_DIR:-build}/tests/netns/xsk-hold}
attach=$(realpath "$here/../../scripts/harp-attach")
for bin in "$xfer" "$agent" "$no_bpf" "$xsk_hold"; do
	if [[ ! -x $bin ]]; then
		echo "agent: $bin is not built (set HARP_XFER, HARP_AGENT, NO_BPF, XSK_HOLD or" \
			"BUILD_DIR)" >&2
		exit 1
	fi
done
xfer=$(realpath "$xfer") agent=$(realpath "$agent") no_bpf=$(realpath "$no_bpf")
xsk_hold=$(realpath "$xsk_hold")
unset HARP_XFER HARP_AGENT NO_BPF # ours, not harp's: harp refuses HARP_* names it does not know
for t in xdp-loader bpftool nsenter python3; do
	command -v "$t" >/dev/null || {
		echo "agent: missing $t (scripts/setup.sh installs it)" >&2
		exit 1
	}
done

harness_init agent
pins=/sys/fs/bpf/harp-ag-$$
# shellcheck disable=SC2317 # called from the EXIT trap
harness_cleanup_extra() {
	local side ns_if
	for side in a:"${ns_a:-}:${if_a:-}" b:"${ns_b:-}:${if_b:-}"; do
		ns_if=${side#*:}
		[[ -e /run/netns/${ns_if%%:*} ]] &&
			nsenter --net="/run/netns/${ns_if%%:*}" "$attach" down "${ns_if#*:}" \
				--conf "$tmp/harp-${side%%:*}.conf" --pin-root "$pins" >/dev/null 2>&1
	done
	rm -rf "$pins"
}
fail=0
report() {
	echo "agent: FAIL $*"
	fail=1
}

topo_pair 1500 2 || exit

# harp-attach run per node (namespace), one after the other as nodes boot, each with its own
# profile and agent socket; nsenter keeps the host's /sys/fs/bpf. run_pid is timeout's, the
# bound on the whole run; the stop case sends SIGTERM to run itself (timeout's child), as the
# kubelet sends it to a container's first process. Sent to timeout, it would reach run's whole
# process group and be followed by a SIGCONT to the group, which cancels the SIGSTOP that an
# ASan agent's exit-time leak check (LeakSanitizer's ptrace of its threads) may have just sent:
# that check then waits forever (1 ASan run in 10-15 hung so). --kill-after 30 s is the
# kubelet's default grace (5 s, as spawn_bounded gives, cut down an ASan build's run before it
# had detached XDP).
declare -A run_pid=()
for side in a b; do
	ns_var=ns_$side if_var=if_$side
	timeout --kill-after=30 300 nsenter --net="/run/netns/${!ns_var}" "$attach" run "${!if_var}" \
		--conf "$tmp/harp-$side.conf" --pin-root "$pins" --hugepages off \
		--agent "$agent" --agent-socket "$tmp/agent-$side.sock" >>"$tmp/agent-$side.log" 2>&1 &
	run_pid[$side]=$!
	pids+=("$!")
	wait_until 150 grep -q "harp-attach: run: harp is up on .*serving $tmp/agent-$side.sock" "$tmp/agent-$side.log" || true
	[[ -S $tmp/agent-$side.sock ]] || { report "run on $side: no agent listens"; cat "$tmp/agent-$side.log"; exit 1; }
	grep '^harp-attach: up:' "$tmp/agent-$side.log" | sed 's/^/agent: /'
done

# xfer_env SIDE: the environment of a confined harp process on SIDE's node
xfer_env() {
	local ns_var=ns_$1
	echo nsenter --net="/run/netns/${!ns_var}" "$no_bpf" env HARP_CONF="$tmp/harp-$1.conf" \
		HARP_LOG_LEVEL=info
}

read -r -a in_b <<<"$(xfer_env b)"
read -r -a in_a <<<"$(xfer_env a)"

# churn: first, so that the program's counters start from nothing.
spawn_bounded 240 "${in_b[@]}" "$xfer" server --ifname "$if_b" --handle-file "$tmp/handle" \
	--queues 2 --conns 2 --sizes 4K,256K --bidir --churn 500 --timeout 200 >"$tmp/churn-server.out" \
	2>"$tmp/churn-server.err"
srv=$spawned_pid
pids+=("$srv")
spawn_bounded 240 "${in_a[@]}" "$xfer" client --ifname "$if_a" --handle-file "$tmp/handle" \
	--queues 2 --conns 2 --sizes 4K,256K --bidir --churn 500 --timeout 200 >"$tmp/churn-client.out" \
	2>"$tmp/churn-client.err"
cli=$spawned_pid
pids+=("$cli")
# while both still run (they drain for 5 s at least after the last churned connection): the
# holders' map of each node names its end on both queues
wait_until 1800 grep -q 'churned 500 connections' "$tmp/churn-server.err" || true
for side in a:"$if_a":"$cli" b:"$if_b":"$srv"; do
	IFS=: read -r s ifn p <<<"$side"
	holders=$(bpftool -j map dump pinned "$pins/$ifn/queue_owners" 2>/dev/null |
		python3 -c 'import json,sys
print(" ".join(str(e["formatted"]["value"]["pid"]) for e in json.load(sys.stdin)
               if e["formatted"]["key"] in (0, 1)))' ||
		true)
	p=$(pgrep -P "$p" || echo "?") # under timeout: harp-xfer is its child
	echo "agent: churn: $s's queue holders: $holders (the transfer's pid: $p)"
	[[ $holders == "$p $p" ]] || report "churn: the holders' map of $s does not name its end on queues 0 and 1 ($holders)"
done
if grep -h 'its records are gone\|whose records and entries are gone' "$tmp"/agent-[ab].log; then
	report "churn: an agent dropped a client while it ran"
fi
rc_s=0 rc_c=0
wait "$srv" || rc_s=$?
wait "$cli" || rc_c=$?
echo "agent: case=churn server_rc=$rc_s client_rc=$rc_c $(grep -h '^churned=\|^verified_bytes=\|^xdp_no_socket=' "$tmp/churn-server.out" "$tmp/churn-client.out" | tr '\n' ' ')"
for end in server client; do
	out=$tmp/churn-$end.out
	if ! grep -q '^result=ok' "$out" || ! grep -q '^churned=500$' "$out" ||
		! grep -q '^xdp_no_socket=0$' "$out" || grep -q '^verified_bytes=0$' "$out"; then
		report "churn: the $end did not finish its 500 connections and its transfer untouched"
		grep -v INFO "$tmp/churn-$end.err" | tail -n 6 | sed 's/^/    | /'
	fi
done

# transfer: both ends confined, through the agents only.
rm -f "$tmp/handle"
spawn_bounded 90 "${in_b[@]}" "$xfer" server --ifname "$if_b" --handle-file "$tmp/handle" \
	--queues 2 --conns 4 --sizes 0,4095,1M,16M --timeout 60 >"$tmp/server.out" 2>"$tmp/server.err"
srv=$spawned_pid
pids+=("$srv")
rc_c=0
run_bounded 90 "${in_a[@]}" "$xfer" client --ifname "$if_a" --handle-file "$tmp/handle" \
	--queues 2 --conns 4 --sizes 0,4095,1M,16M --timeout 60 >"$tmp/client.out" \
	2>"$tmp/client.err" || rc_c=$?
rc_s=0
wait "$srv" || rc_s=$?
echo "agent: case=transfer server_rc=$rc_s client_rc=$rc_c $(grep -h '^verified_bytes=' "$tmp/server.out")"
if ((rc_s || rc_c)) || ! grep -q '^result=ok' "$tmp/server.out" ||
	! grep -q '^result=ok' "$tmp/client.out"; then
	report "transfer: server rc $rc_s, client rc $rc_c"
	tail -n 8 "$tmp/server.err" "$tmp/client.err" | sed 's/^/    | /'
fi
for end in server client; do
	grep -q 'using the node agent at .*this process makes no bpf() call' "$tmp/$end.err" ||
		report "transfer: the $end does not say it uses the agent"
done
grep -q "queue 1 entered" "$tmp/agent-b.log" || report "transfer: agent b never entered queue 1"

# taken: a holder of queue 0 waits for a client that never comes; a second asks for queue 0.
rm -f "$tmp/handle"
spawn_bounded 60 "${in_b[@]}" HARP_QUEUES=0-0 "$xfer" server --ifname "$if_b" \
	--handle-file "$tmp/handle" --timeout 20 >"$tmp/holder.out" 2>"$tmp/holder.err"
holder=$spawned_pid
pids+=("$holder")
wait_until 100 test -s "$tmp/handle" || true
rc=0
run_bounded 30 "${in_b[@]}" HARP_QUEUES=0-0 "$xfer" server --ifname "$if_b" \
	--handle-file "$tmp/handle2" --timeout 5 >"$tmp/second.out" 2>"$tmp/second.err" || rc=$?
line=$(grep -m 1 '^harp: ERROR: queue 0' "$tmp/second.err" || true)
echo "agent: case=taken rc=$rc"
echo "    $line"
if ((rc == 0)) || [[ $line != *"taken by"*harp-xfer* ]]; then
	report "taken: the second process was not refused with the holder named"
	sed 's/^/    | /' "$tmp/second.err" | grep -v INFO | head -n 10
fi
kill "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true
wait_until 50 grep -q "its records are gone" "$tmp/agent-b.log" || true
rm -f "$tmp/handle"
spawn_bounded 60 "${in_b[@]}" HARP_QUEUES=0-0 "$xfer" server --ifname "$if_b" \
	--handle-file "$tmp/handle" --timeout 20 >"$tmp/after.out" 2>"$tmp/after.err"
after=$spawned_pid
pids+=("$after")
wait_until 100 test -s "$tmp/handle" || true
[[ -s $tmp/handle ]] || { report "taken: queue 0 was not free again after its holder ended"; tail -n 5 "$tmp/after.err"; }
kill "$after" 2>/dev/null || true
wait "$after" 2>/dev/null || true

# bad_client: raw clients of the agent's socket (python3: SOCK_SEQPACKET with SCM_RIGHTS).
nsenter --net="/run/netns/$ns_b" python3 - "$tmp/agent-b.sock" "$if_b" >"$tmp/bad.out" 2>&1 <<'PY' || report "bad_client: $(tail -n 3 "$tmp/bad.out")"
import socket, struct, sys
path, ifname = sys.argv[1], sys.argv[2]
SIZE, MAGIC, TEXT_AT = 336, 0x68617270, 136

def msg(op, version=4, ifname=b"", queue=0):
    m = bytearray(SIZE)
    struct.pack_into("<IHHiI16s", m, 0, MAGIC, version, op, 0, queue, ifname)
    return bytes(m)

def ask(data, fds=()):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(5)
    s.connect(path)
    if fds:
        s.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i" * len(fds), *fds))])
    else:
        s.send(data)
    return s

def answer(s):
    r = s.recv(4096)
    magic, version, _, status = struct.unpack_from("<IHHi", r, 0)
    if magic != MAGIC or version != 4:
        return len(r), 0, f"answered as version {version} (magic {magic:#x})"
    text = r[TEXT_AT:].split(b"\0")[0].decode()
    return len(r), status, text

cases = []
s = ask(b"hello agent"); cases.append(("garbage", answer(s))); s.close()
s = ask(msg(1, version=5, ifname=ifname.encode())); cases.append(("version 5", answer(s))); s.close()
# version 3's messages were 328 bytes: answered in as many, our header first, for it to read
s = ask(msg(1, version=3, ifname=ifname.encode())[:328]); cases.append(("version 3", answer(s)))
s.close()
s = ask(msg(1, ifname=ifname.encode()) + bytes(100)); cases.append(("too long", answer(s))); s.close()
with open("/dev/null") as f, open("/dev/zero") as g:
    s = ask(msg(1, ifname=ifname.encode()), (f.fileno(), g.fileno()))
    cases.append(("two descriptors", answer(s))); s.close()
s = ask(msg(1, ifname=ifname.encode()))
hello = answer(s)
with open("/dev/null") as f:
    s.sendmsg([msg(2, queue=1)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", f.fileno()))])
    cases.append(("not an AF_XDP socket", answer(s)))
s.close()
want = {"garbage": "a message of 11 bytes", "version 5": "protocol version 5",
        "version 3": "protocol version 3, and this side speaks 4",
        "not an AF_XDP socket": "not an AF_XDP socket",
        "too long": "one struct of 336 bytes", "two descriptors": "at most one descriptor"}
bad = 0
print("hello:", hello)
for name, (n, status, text) in cases:
    print(f"{name}: {n} bytes, status {status}: {text}")
    if n != (328 if name == "version 3" else SIZE) or status >= 0 or want[name] not in text:
        print(f"FAIL {name}"); bad = 1
sys.exit(bad)
PY
sed 's/^/agent: bad_client: /' "$tmp/bad.out"
# and the agent still serves: a confined server gets its queue
rm -f "$tmp/handle"
spawn_bounded 60 "${in_b[@]}" HARP_QUEUES=1-1 "$xfer" server --ifname "$if_b" \
	--handle-file "$tmp/handle" --timeout 20 >"$tmp/last.out" 2>"$tmp/last.err"
last=$spawned_pid
pids+=("$last")
wait_until 100 test -s "$tmp/handle" || true
[[ -s $tmp/handle ]] || { report "bad_client: the agent no longer serves"; tail -n 5 "$tmp/last.err" "$tmp/agent-b.log"; }
kill "$last" 2>/dev/null || true
wait "$last" 2>/dev/null || true

# idle: 300 connections to the agent that never say HELLO (more than its 256 clients) do not
# keep a harp process out, and go within the agent's 2 s.
python3 - "$tmp/agent-b.sock" "$tmp/idle.ready" "$tmp/idle.stop" >"$tmp/idle.out" 2>&1 <<'PY' &
import socket, sys, time, os
path, ready, stop = sys.argv[1:4]
held = []
for _ in range(300):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path); held.append(s)
    except OSError:
        pass
open(ready, "w").close()
deadline = time.time() + 20
while not os.path.exists(stop) and time.time() < deadline:
    time.sleep(0.05)
PY
idle=$!
pids+=("$idle")
wait_until 50 test -e "$tmp/idle.ready" || true
rm -f "$tmp/handle"
rc=0
run_bounded 30 "${in_b[@]}" HARP_QUEUES=1-1 "$xfer" server --ifname "$if_b" \
	--handle-file "$tmp/handle" --timeout 3 >"$tmp/idle-server.out" 2>"$tmp/idle-server.err" ||
	rc=$?
touch "$tmp/idle.stop"
wait "$idle" || true
echo "agent: case=idle server_rc=$rc"
# the server waits 3 s for a client that never comes (rc 1): what matters is that it got in
if ! grep -q 'using the node agent at' "$tmp/idle-server.err" || [[ ! -s $tmp/handle ]]; then
	report "idle: 300 silent connections kept a harp process out of the agent"
	grep -v INFO "$tmp/idle-server.err" | tail -n 5 | sed 's/^/    | /'
fi

# hijack: a holder of queue 0 through the pins (not confined, no agent); a client of the agent
# whose own socket is bound to queue 1 asks for key 0.
rm -f "$tmp/handle"
spawn_bounded 60 nsenter --net="/run/netns/$ns_b" env HARP_CONF="$tmp/harp-b.conf" \
	HARP_AGENT_SOCKET= HARP_QUEUES=0-0 "$xfer" server --ifname "$if_b" \
	--handle-file "$tmp/handle" --timeout 20 >"$tmp/victim.out" 2>"$tmp/victim.err"
victim=$spawned_pid
pids+=("$victim")
wait_until 100 test -s "$tmp/handle" || true
[[ -s $tmp/handle ]] || report "hijack: the holder of queue 0 did not start"
out=$(run_bounded 20 nsenter --net="/run/netns/$ns_b" "$xsk_hold" "$if_b" 1 100 \
	"$tmp/agent-b.sock" 0 1 attacker 2>&1 || true)
echo "agent: case=hijack"
printf '%s\n' "$out" | sed 's/^/    /'
[[ $out == *"enter: -16 "*"held by pid"*"harp-xfer"* ]] ||
	report "hijack: the agent entered a socket of queue 1 under queue 0's key"
kill "$victim" 2>/dev/null || true
wait "$victim" 2>/dev/null || true

# hijack_pidns: the same, with the holder of queue 0 (through the pins) and the client of the
# agent each in a pid namespace of its own, as two pods are: refused, the holder named.
rm -f "$tmp/handle"
spawn_bounded 60 nsenter --net="/run/netns/$ns_b" unshare --pid --fork env \
	HARP_CONF="$tmp/harp-b.conf" HARP_AGENT_SOCKET= HARP_QUEUES=0-0 "$xfer" server \
	--ifname "$if_b" --handle-file "$tmp/handle" --timeout 20 >"$tmp/victim2.out" \
	2>"$tmp/victim2.err"
victim=$spawned_pid
pids+=("$victim")
wait_until 100 test -s "$tmp/handle" || true
[[ -s $tmp/handle ]] || report "hijack_pidns: the holder of queue 0 did not start"
out=$(run_bounded 20 nsenter --net="/run/netns/$ns_b" unshare --pid --fork "$xsk_hold" "$if_b" 1 \
	100 "$tmp/agent-b.sock" 0 1 attacker 2>&1 || true)
echo "agent: case=hijack_pidns"
printf '%s\n' "$out" | sed 's/^/    /'
[[ $out == *"enter: -16 "*"held by pid 1 (harp-xfer) of another pid namespace"* ]] ||
	report "hijack_pidns: a client in another pid namespace replaced the holder's socket"
kill "$victim" 2>/dev/null || true
wait "$victim" 2>/dev/null || true

# interfaces: one agent serving three interfaces (b's and a veth pair x-y beside it), a client
# holding queue 0 on each of x and y. The pair is re-created (new indexes) and x prepared again;
# a new client of x enters queue 0 of x's new maps, and when the old clients go, their LEAVEs
# touch their own maps alone: the new client's record stays.
ix=${if_b}x iy=${if_b}y
ip -n "$ns_b" link add "$ix" type veth peer name "$iy"
ip -n "$ns_b" link set "$ix" up && ip -n "$ns_b" link set "$iy" up
attach_b() { # IF: harp-attach up IF on b's node, with the pins beside b's
	nsenter --net="/run/netns/$ns_b" "$attach" up "$1" --conf "$tmp/harp-$1.conf" \
		--pin-root "$pins" --hugepages off >>"$tmp/attach-xy.log" 2>&1 ||
		report "interfaces: harp-attach up $1 failed ($(tail -n 1 "$tmp/attach-xy.log"))"
}
attach_b "$ix"
attach_b "$iy"
declare -A old_holder=()
for ifn in "$ix" "$iy"; do
	nsenter --net="/run/netns/$ns_b" "$xsk_hold" "$ifn" 0 8000 "$tmp/agent-b.sock" 0 1 old \
		>"$tmp/hold-$ifn.out" 2>&1 &
	old_holder[$ifn]=$!
	pids+=("$!")
	wait_until 50 grep -q '^owner:' "$tmp/hold-$ifn.out" || true
	grep -q '^enter: 0 ' "$tmp/hold-$ifn.out" || report "interfaces: the first client of $ifn was not entered"
done
ip -n "$ns_b" link del "$ix"
ip -n "$ns_b" link add "$ix" type veth peer name "$iy"
ip -n "$ns_b" link set "$ix" up && ip -n "$ns_b" link set "$iy" up
attach_b "$ix"
nsenter --net="/run/netns/$ns_b" "$xsk_hold" "$ix" 0 12000 "$tmp/agent-b.sock" 0 1 new \
	>"$tmp/hold-new.out" 2>&1 &
new_holder=$!
pids+=("$new_holder")
wait_until 50 grep -q '^owner:\|^xsk-hold:' "$tmp/hold-new.out" || true
for ifn in "$ix" "$iy"; do
	kill "${old_holder[$ifn]}" 2>/dev/null || true
	wait "${old_holder[$ifn]}" 2>/dev/null || true
done
wait_until 50 grep -q "held queue(s) 0 of $iy" "$tmp/agent-b.log" || true
holder=$(bpftool -j map dump pinned "$pins/$ix/queue_owners" 2>/dev/null | python3 -c 'import json,sys
print(" ".join(str(e["formatted"]["value"]["pid"]) for e in json.load(sys.stdin) if e["formatted"]["key"] == 0))' || true)
echo "agent: case=interfaces new client of $ix: $(grep '^enter:' "$tmp/hold-new.out"); queue 0 of $ix held by pid $holder after the old clients went (the new client: $new_holder)"
grep -q '^enter: 0 ' "$tmp/hold-new.out" ||
	report "interfaces: the new client of $ix was refused ($(grep -v '^held' "$tmp/hold-new.out" | head -n 1))"
[[ $holder == "$new_holder" ]] ||
	report "interfaces: the old clients' LEAVEs cleared the new client's record on $ix ($holder)"
kill "$new_holder" 2>/dev/null || true
wait "$new_holder" 2>/dev/null || true
for ifn in "$ix" "$iy"; do
	nsenter --net="/run/netns/$ns_b" "$attach" down "$ifn" --conf "$tmp/harp-$ifn.conf" \
		--pin-root "$pins" >/dev/null 2>&1 || true
done
ip -n "$ns_b" link del "$ix" 2>/dev/null || true

# forged: what a client says of itself does not become the record
t0=$(date +%s)
out=$(run_bounded 20 nsenter --net="/run/netns/$ns_b" "$xsk_hold" "$if_b" 1 100 \
	"$tmp/agent-b.sock" 1 1 attacker 2>&1 || true)
echo "agent: case=forged"
printf '%s\n' "$out" | sed 's/^/    /'
read -r _ o_pid o_comm o_since < <(grep '^owner:' <<<"$out" || echo "owner: 0 - 0")
if [[ $out != *"enter: 0 "* || $o_pid == 1 || $o_comm != xsk-hold ]] ||
	((o_since / 1000000000 < t0 - 60)); then
	report "forged: the agent recorded what the client claimed (pid $o_pid, $o_comm, $o_since)"
fi

# uid: the socket admits root alone (0660); an agent serving other uids (--allow-uid) opens it
# (0666) and answers a uid it does not serve with the reason.
chmod 0755 "$tmp"
spawn_bounded 60 nsenter --net="/run/netns/$ns_b" "$agent" --socket "$tmp/agent-u.sock" \
	--pin-root "$pins" --allow-uid 1001 --max-per-uid 4 2>"$tmp/agent-u.log"
uagent=$spawned_pid
pids+=("$uagent")
wait_until 50 test -S "$tmp/agent-u.sock" || true
uid_client() {
	setpriv --reuid="$1" --regid="$1" --clear-groups /usr/bin/python3 - "$2" "$if_b" 2>&1 <<'PY' || true
import socket, struct, sys
path, ifname = sys.argv[1], sys.argv[2]
m = bytearray(336)
struct.pack_into("<IHHiI16s", m, 0, 0x68617270, 4, 1, 0, 0, ifname.encode())
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.settimeout(5)
try:
    s.connect(path)
except OSError as e:
    print(f"connect: {e.strerror}")
    sys.exit(0)
try:
    s.send(bytes(m))
except (BrokenPipeError, ConnectionResetError):
    pass  # turned away at once: the answer that says why is still there to read
try:
    r = s.recv(4096)
except ConnectionResetError:
    r = s.recv(4096)  # closed with our hello unread: reported once, ahead of the answer
text = r[136:].split(bytes(1))[0].decode()
print(f"status {struct.unpack_from('<i', r, 8)[0]}: {text}")
PY
}
got=$(uid_client 1000 "$tmp/agent-b.sock")
echo "agent: uid: 1000 at a root-only agent: $got"
[[ $got == "connect: Permission denied" ]] || report "uid: uid 1000 reached a root-only agent's socket ($got)"
got=$(uid_client 1000 "$tmp/agent-u.sock")
echo "agent: uid: 1000 at an agent serving 1001: $got"
[[ $got == "status -13: uid 1000 is not served by this node's agent"* ]] ||
	report "uid: uid 1000 was not told it is not served ($got)"
got=$(uid_client 1001 "$tmp/agent-u.sock")
echo "agent: uid: 1001 at an agent serving 1001: $got"
[[ $got == "status 0: "* ]] || report "uid: uid 1001 was not served ($got)"
# per-uid cap: uid 1001 holds 10 silent connections (--max-per-uid 4) and uid 1000 twenty the
# agent does not serve; a uid-1001 client that then says HELLO is served, and the agent keeps
# at most 4 of the silent ones, none of uid 1000's.
mkdir -p "$tmp/u" && chmod 0777 "$tmp/u" # where uid 1001 may write its ready file
setpriv --reuid=1001 --regid=1001 --clear-groups /usr/bin/python3 - "$tmp/agent-u.sock" \
	"$tmp/u/silent.ready" "$tmp/u/silent.stop" >"$tmp/silent.out" 2>&1 <<'PY' &
import socket, sys, time, os
path, ready, stop = sys.argv[1:4]
held = []
for _ in range(10):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect(path); held.append(s)
open(ready, "w").close()
deadline = time.time() + 20
while not os.path.exists(stop) and time.time() < deadline:
    time.sleep(0.05)
open_ = 0
for s in held:
    s.setblocking(False)
    try:
        open_ += s.recv(1) is None
    except BlockingIOError:
        open_ += 1  # nothing to read and not closed: still held by the agent
    except OSError:
        pass
print(f"silent still open: {open_}")
PY
silent=$!
pids+=("$silent")
wait_until 50 test -e "$tmp/u/silent.ready" || true
for _ in $(seq 20); do uid_client 1000 "$tmp/agent-u.sock" >/dev/null; done
got=$(uid_client 1001 "$tmp/agent-u.sock")
touch "$tmp/u/silent.stop"
wait "$silent" || true
echo "agent: uid: 1001 beside 10 silent connections of its own: $got; $(cat "$tmp/silent.out")"
[[ $got == "status 0: "* ]] || report "uid: silent connections kept a client of their uid out ($got)"
open_silent=$(sed -n 's/^silent still open: //p' "$tmp/silent.out")
if [[ -z $open_silent ]] || ((open_silent > 4)); then
	report "uid: the agent kept ${open_silent:-?} silent connections of one uid (--max-per-uid 4)"
fi
# pods: two pid namespaces (pods), both uid 1001 (pods share uids, most often 0): each holds
# --max-per-uid (4) connections that said HELLO, and neither is refused for the other's; a
# fifth from the first is.
pods_client() { # NS_READY NS_STOP N: N connections from a new pid namespace, each says HELLO
	unshare --pid --fork setpriv --reuid=1001 --regid=1001 --clear-groups /usr/bin/python3 - \
		"${pods_sock:-$tmp/agent-u.sock}" "$if_b" "$@" 2>&1 <<'PY' || true
import os, socket, struct, sys, time
path, ifname, ready, stop, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
held, said = [], []
for _ in range(n):
    m = bytearray(336)
    struct.pack_into("<IHHiI16s", m, 0, 0x68617270, 4, 1, 0, 0, ifname.encode())
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(5)
    s.connect(path)
    try:
        s.send(bytes(m))
    except OSError:
        pass
    try:
        r = s.recv(4096)
    except ConnectionResetError:
        r = s.recv(4096)
    said.append(str(struct.unpack_from("<i", r, 8)[0]))
    held.append(s)
print("statuses:", " ".join(said))
sys.stdout.flush()
open(ready, "w").close()
deadline = time.time() + 20
while stop != "-" and not os.path.exists(stop) and time.time() < deadline:
    time.sleep(0.05)
PY
}
pods_client "$tmp/u/pod1.ready" "$tmp/u/pod1.stop" 4 >"$tmp/pod1.out" &
pod1=$!
pids+=("$pod1")
wait_until 50 test -e "$tmp/u/pod1.ready" || true
pod2=$(pods_client "$tmp/u/pod2.ready" - 5)
touch "$tmp/u/pod1.stop"
wait "$pod1" || true
echo "agent: case=pods first pod: $(cat "$tmp/pod1.out"); second pod, 5 connections: $pod2"
[[ $(cat "$tmp/pod1.out") == "statuses: 0 0 0 0" ]] ||
	report "pods: the first pod's 4 connections were not all served"
# EUSERS (87): the fifth of one uid in one pid namespace
[[ $pod2 == "statuses: 0 0 0 0 -87" ]] ||
	report "pods: a second pod of the same uid was not served beside the first, or its fifth was"

# pods on a kernel before 6.11 (a test build says the pidfd cannot name a pid namespace): an
# agent in the host's pid namespace reads each client's from /proc, and the pods keep their own
# budgets; one in a pid namespace of its own cannot tell the pods apart, and refuses to start,
# saying what the kernel lacks.
spawn_bounded 60 nsenter --net="/run/netns/$ns_b" env HARP_AGENT_TEST_NO_PIDNS_IOCTL=1 "$agent" \
	--socket "$tmp/agent-o.sock" --pin-root "$pins" --allow-uid 1001 --max-per-uid 4 \
	2>"$tmp/agent-o.log"
oagent=$spawned_pid
pids+=("$oagent")
wait_until 50 test -S "$tmp/agent-o.sock" || true
pods_sock=$tmp/agent-o.sock
pods_client "$tmp/u/pod3.ready" "$tmp/u/pod3.stop" 4 >"$tmp/pod3.out" &
pod3=$!
pids+=("$pod3")
wait_until 50 test -e "$tmp/u/pod3.ready" || true
pod4=$(pods_client "$tmp/u/pod4.ready" - 5)
touch "$tmp/u/pod3.stop"
wait "$pod3" || true
pods_sock=""
kill "$oagent" 2>/dev/null || true
wait "$oagent" 2>/dev/null || true
echo "agent: case=pods_before_6.11 first pod: $(cat "$tmp/pod3.out"); second pod: $pod4"
grep -q "reading it from /proc" "$tmp/agent-o.log" ||
	report "pods_before_6.11: the agent did not say it reads pid namespaces from /proc"
[[ $(cat "$tmp/pod3.out") == "statuses: 0 0 0 0" && $pod4 == "statuses: 0 0 0 0 -87" ]] ||
	report "pods_before_6.11: the pods did not keep their own --max-per-uid budgets"
set +e
run_bounded 20 nsenter --net="/run/netns/$ns_b" unshare --pid --fork --mount-proc \
	env HARP_AGENT_TEST_NO_PIDNS_IOCTL=1 "$agent" --socket "$tmp/agent-p.sock" \
	--pin-root "$pins" >"$tmp/agent-p.log" 2>&1
prc=$?
set -e
echo "agent: case=pidns_unknown exit $prc: $(cat "$tmp/agent-p.log")"
if ((prc == 0 || prc == 124 || prc == 137)) || [[ -S $tmp/agent-p.sock ]] ||
	! grep -q "PIDFD_GET_PID_NAMESPACE, Linux 6.11" "$tmp/agent-p.log" ||
	! grep -q "hostPID" "$tmp/agent-p.log"; then
	report "pidns_unknown: an agent that cannot tell pods apart started, or did not say why"
fi

# hostile: with --allow-uid the socket is everyone's. While a refused uid writes in a tight loop
# (three processes on each connection, so that what they sent is never all read; reconnecting
# whenever the agent closes it) and a served one keeps handing over TCP sockets that linger 30 s
# on unsent data, a legitimate client's HELLO and ENTER are each answered within 100 ms, 1,000
# times over. The timed client starts once both attacks are under way.
ip -n "$ns_b" link set lo up
setpriv --reuid=1000 --regid=1000 --clear-groups /usr/bin/python3 - "$tmp/agent-u.sock" \
	"$tmp/u/hostile.stop" "$tmp/u/writer.ready" >"$tmp/writer.out" 2>&1 <<'PY' &
import os, socket, sys, time
path, stop, ready = sys.argv[1:4]
junk, conns, deadline = bytes(336), 0, time.time() + 120
while not os.path.exists(stop) and time.time() < deadline:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path)
    except OSError:
        s.close(); continue
    conns += 1
    kids = []
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            s.settimeout(0.5)
            while not os.path.exists(stop) and time.time() < deadline:
                try:
                    s.send(junk)
                except socket.timeout:
                    pass
                except OSError:
                    break
            os._exit(0)
        kids.append(pid)
    if conns == 1:
        open(ready, "w").close()
    for pid in kids:
        os.waitpid(pid, 0)
    s.close()
print(f"writer: {conns} connections")
PY
writer=$!
pids+=("$writer")
uagent_pid=$(pgrep -P "$uagent") # under timeout: the agent is its child
nsenter --net="/run/netns/$ns_b" python3 - "$tmp/agent-u.sock" "$if_b" "$tmp/u/hostile.stop" \
	"$tmp/u/linger.ready" "$uagent_pid" >"$tmp/linger.out" 2>&1 <<'PY' &
import os, signal, socket, struct, sys, time
path, ifname, stop, ready, agent = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
def msg(op, queue=0):
    m = bytearray(336)
    struct.pack_into("<IHHiI16s", m, 0, 0x68617270, 4, op, 0, queue, ifname.encode())
    return bytes(m)
lis = socket.socket(); lis.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
lis.bind(("127.0.0.1", 0)); lis.listen(64)
a = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); a.settimeout(5); a.connect(path)
a.send(msg(1)); a.recv(4096)
peers, passed, deadline = [], 0, time.time() + 120
while not os.path.exists(stop) and time.time() < deadline and passed < 2000:
    t = socket.socket()
    t.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    t.connect(lis.getsockname())
    peer, _ = lis.accept()            # never read: the window closes, the data stays unsent
    peers.append(peer)
    t.setblocking(False)
    try:
        while True:
            t.send(bytes(65536))
    except BlockingIOError:
        pass
    t.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 30))
    # the agent held still while the socket goes and ours is closed, so that the agent's copy
    # is the last (else a race, which the agent, woken at once, often wins)
    os.kill(agent, signal.SIGSTOP)
    a.sendmsg([msg(2, 0)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", t.fileno()))])
    t.close()
    os.kill(agent, signal.SIGCONT)
    passed += 1
    try:
        a.recv(4096)
    except OSError as e:
        print(f"linger: the agent did not answer pass {passed}: {e}")
        open(ready, "w").close(); break
    if passed == 20:
        open(ready, "w").close()
    if len(peers) > 200:
        peers.pop(0).close()
print(f"linger: {passed} lingering sockets handed over")
sys.stdout.flush()
while not os.path.exists(stop) and time.time() < deadline:
    time.sleep(0.05) # the receiving ends stay open (closed, they would reset the lingerers)
PY
linger=$!
pids+=("$linger")
wait_until 100 test -e "$tmp/u/writer.ready" -a -e "$tmp/u/linger.ready" || true
rounds=$(run_bounded 120 nsenter --net="/run/netns/$ns_b" "$xsk_hold" "$if_b" 1 0 --rounds 1000 \
	"$tmp/agent-u.sock" 2>&1 || true)
touch "$tmp/u/hostile.stop"
wait "$writer" || true
wait "$linger" || true
echo "agent: case=hostile $(cat "$tmp/writer.out"); $(cat "$tmp/linger.out")"
printf '%s\n' "$rounds" | sed 's/^/    /'
if [[ $rounds != *"rounds: 1000 answered"* || $rounds != *"hello_us:"*"over 100 ms: 0"*"enter_us:"*"over 100 ms: 0"* ]]; then
	report "hostile: a legitimate client was not answered within 100 ms, 1,000 times"
fi
[[ $(cat "$tmp/writer.out") == "writer: "* ]] || report "hostile: the writer did not run"

kill "$uagent" 2>/dev/null || true
wait "$uagent" 2>/dev/null || true

# restart: the agent of b killed while a server on b (queue 0) waits for its client; run starts
# another on the same socket, which serves a new process (queue 1); the waiting server connects
# to it again, and the client that comes after the restart moves verified data to it.
rm -f "$tmp/handle"
spawn_bounded 90 "${in_b[@]}" HARP_QUEUES=0-0 "$xfer" server --ifname "$if_b" \
	--handle-file "$tmp/handle" --conns 2 --sizes 0,4095,1M --timeout 60 >"$tmp/survivor.out" \
	2>"$tmp/survivor.err"
survivor=$spawned_pid
pids+=("$survivor")
wait_until 100 test -s "$tmp/handle" || true
apid=$(sed -n 's/^harp-attach: run: harp is up on .*node agent (pid \([0-9]*\)).*/\1/p' "$tmp/agent-b.log")
if [[ ! -s $tmp/handle || -z $apid ]] || ! kill -KILL "$apid" 2>/dev/null; then
	report "restart: no waiting server, or no agent pid in run's line"
else
	wait_until 50 grep -q "serving $tmp/agent-b.sock again" "$tmp/agent-b.log" || true
	grep "ended with status\|serving .* again" "$tmp/agent-b.log" | sed 's/^/agent: restart: /'
	grep -q "node agent (pid $apid) ended with status 137; starting it again" "$tmp/agent-b.log" ||
		report "restart: run did not see its agent end"
	rc=0
	run_bounded 60 "${in_a[@]}" "$xfer" client --ifname "$if_a" --handle-file "$tmp/handle" \
		--conns 2 --sizes 0,4095,1M --timeout 40 >"$tmp/late.out" 2>"$tmp/late.err" || rc=$?
	rc_s=0
	wait "$survivor" || rc_s=$?
	echo "agent: case=restart survivor_rc=$rc_s late_client_rc=$rc $(grep -h '^verified_bytes=' "$tmp/survivor.out")"
	grep -h 'went away and came back' "$tmp/survivor.err" | head -n 1 | sed 's/^/    /'
	if ((rc || rc_s)) || ! grep -q '^result=ok' "$tmp/survivor.out"; then
		report "restart: the server that outlived its agent did not serve a later client"
		tail -n 6 "$tmp/survivor.err" "$tmp/late.err" | sed 's/^/    | /'
	fi
	grep -q 'went away and came back' "$tmp/survivor.err" ||
		report "restart: the surviving server did not connect to the new agent"
	rm -f "$tmp/handle"
	spawn_bounded 60 "${in_b[@]}" HARP_QUEUES=1-1 "$xfer" server --ifname "$if_b" \
		--handle-file "$tmp/handle" --timeout 20 >"$tmp/restarted.out" 2>"$tmp/restarted.err"
	last=$spawned_pid
	pids+=("$last")
	wait_until 100 test -s "$tmp/handle" || true
	if [[ ! -s $tmp/handle ]] || ! grep -q 'using the node agent at' "$tmp/restarted.err"; then
		report "restart: the new agent does not serve a new process"
		tail -n 5 "$tmp/restarted.err"
	fi
	kill "$last" 2>/dev/null || true
	wait "$last" 2>/dev/null || true
fi

# stop: SIGTERM to run (as the kubelet sends) stops the agent and takes harp down.
for side in a b; do
	ns_var=ns_$side if_var=if_$side
	run_self=$(pgrep -P "${run_pid[$side]}" || true) # nsenter ran harp-attach in its place
	[[ -n $run_self ]] || report "stop: no harp-attach under timeout (pid ${run_pid[$side]}) on $side"
	kill -TERM "${run_self:-${run_pid[$side]}}"
	# should it still run after 20 s (timeout kills it at 30), what its processes wait in
	for ((t = 0; t < 200; t++)); do
		kill -0 "${run_pid[$side]}" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "${run_pid[$side]}" 2>/dev/null; then
		echo "agent: stop side=$side: run still runs 20 s after SIGTERM; its processes:"
		ps -e -o pid=,ppid=,stat=,wchan:24=,etime=,args= | awk -v top="${run_pid[$side]}" '
			{ line[$1] = $0; parent[$1] = $2 }
			END { for (p in line) { for (q = p; q in parent && q != top; q = parent[q]) {}
				if (q == top) print "    ps | " line[p] } }' | tee "$tmp/stuck.ps"
		# each thread of each: its state, who traces it, its signals, its kernel stack
		awk '{ print $3 }' "$tmp/stuck.ps" | while read -r p; do
			for task in /proc/"$p"/task/*; do
				echo "    task ${task#/proc/} $(grep -h '^State\|^TracerPid\|^SigPnd\|^ShdPnd\|^SigBlk\|^SigCgt' \
					"$task/status" 2>/dev/null | tr -s '\t\n' '  ')"
				sed 's/^/        | /' "$task/stack" 2>/dev/null | head -n 8
			done
		done
	fi
	rc=0
	wait "${run_pid[$side]}" || rc=$?
	echo "agent: case=stop side=$side rc=$rc"
	((rc == 0)) || report "stop: run on $side exited $rc"
	[[ ! -e $tmp/agent-$side.sock ]] || report "stop: $tmp/agent-$side.sock is still there"
	grep -q "^harp-agent: stopped" "$tmp/agent-$side.log" || report "stop: the agent of $side did not stop"
	! ip -n "${!ns_var}" link show dev "${!if_var}" | grep -q ' xdp' ||
		report "stop: an XDP program is still attached to ${!if_var}"
	[[ ! -e $pins/${!if_var} ]] || report "stop: $pins/${!if_var} is still there"
done

if ((fail)); then
	for side in a b; do
		sed "s/^/    agent-$side | /" "$tmp/agent-$side.log" | tail -n 40
	done
	exit 1
fi
echo "agent: every case held"
