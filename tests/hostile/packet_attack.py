#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""An observer on harp's segment (tests/hostile/packets.sh): it sees harp's frames (the bridge
floods), over IPv4 or IPv6, whichever harp runs, then sends, each kind in turn, as fast as it
can for a bounded time:

  replay     captured frames, unchanged
  token      captured frames with the token changed (right conn_id), checksums made valid
  ahead      captured frames with the psn moved 2^30 ahead (right token), checksums valid: far
             beyond the window while the run lasts (a transfer's psns pass 2^20 within one)
  truncated  captured frames cut short at random lengths
  garbage    valid Ethernet, IP and UDP headers to harp's ports with a random body
  flood      all of the kinds mixed, for FLOOD_S seconds

Over IPv6, four kinds more, each of them in the flood too:

  ext        captured frames with extension headers between the IPv6 header and UDP: one
             Hop-by-Hop, Routing (type 0, no segments left), Fragment (offset 0, the only one),
             Destination Options, AH, ESP or unknown (253) header, or a chain of the first four;
             the payload length counts them, and the UDP checksum still holds
  jumbo      captured frames with a payload length of 0: half of them jumbograms as RFC 2675
             makes them (the length in a Hop-by-Hop Jumbo Payload option), half with nothing
  nocsum     captured frames with a UDP checksum of 0 ("none", which IPv6 does not allow)
  spoof      captured frames from another source address (one of the link's /64 no rank has,
             or a link-local one), the peer's ports, conn_id and token, the checksum made valid

and before them, for FORGE_S seconds, live6: live DATA frames copied the moment they pass, their
psn moved 1-8 ahead and their payload changed, then given one fault in turn: a spoofed source, a
UDP checksum of 0, a payload length of 0, or extension headers (the body cut short by their
length where the frame would not fit the MTU). Without HARP_AUTH nothing but the fault stands
between such a frame and the message it would write into, so every byte verifying shows that
each one was dropped.

With "forge" (packets.sh auth: harp runs HARP_AUTH=1), first, for FORGE_S seconds, live frames
copied and changed the moment they pass, as an on-path attacker who read the token would: DATA
with its psn moved 1-8 ahead and its payload changed (accepted, it would put these bytes in the
message in place of the real ones), the same with the MAC trailer stripped, and ACKs that
acknowledge 1-64 psns more than arrived. Each must fail the receiver's MAC check.

  packet_attack.py IFNAME PORT_LO PORT_HI FLOOD_S REPORT_FILE [forge]

Capturing stops after 2,000 harp frames or 5 s. Writes "kind sent" lines into REPORT_FILE
(live6-FAULT: the live6 frames given FAULT).
"""
import os
import random
import socket
import struct
import sys
import time

ETH_P_ALL = 3
ETH = 14  # harp sends untagged frames
FORGE_S = 4
AUTH_TRAILER = 24  # HARP_AUTH: frame counter and MAC after the records
# extension headers the ext kind puts before UDP, by next header value: their length in bytes
EXT_LEN = {0: 8, 43: 24, 44: 8, 60: 16, 51: 24, 50: 8, 253: 8}
EXT_CHAINS = [[0], [43], [44], [60], [51], [50], [253], [0, 43, 44, 60]]
EXT_MAX = max(sum(EXT_LEN[k] for k in chain) for chain in EXT_CHAINS)


def wire_version():
    """HARP_WIRE_VERSION, read from src/wire.h beside this tree: the first byte of every harp
    header, which tells harp's frames from others."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "src", "wire.h"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("#define HARP_WIRE_VERSION "):
                return int(line.split()[2])
    raise SystemExit("packet_attack: no HARP_WIRE_VERSION in src/wire.h")


WIRE_VERSION = wire_version()


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def is6(f):
    return f[12:14] == b"\x86\xdd"


def udp_at(f):
    """Where the UDP header of a frame without extension headers starts."""
    return ETH + (40 if is6(f) else 20)


def hdr_at(f):
    """Where the first harp header starts."""
    return udp_at(f) + 8


def pseudo(f, ulen):
    """The pseudo-header the UDP checksum covers: IPv4's (RFC 768) or IPv6's (RFC 8200)."""
    if is6(f):
        return bytes(f[22:54]) + struct.pack("!IxxxB", ulen, 17)
    return bytes(f[26:34]) + struct.pack("!BBH", 0, 17, ulen)


def fix_udp(frame):
    """Recomputes the UDP checksum after a change, over the frame's family's pseudo-header."""
    f = bytearray(frame)
    at = udp_at(f)
    ulen = struct.unpack_from("!H", f, at + 4)[0]
    f[at + 6:at + 8] = b"\0\0"
    c = checksum(pseudo(f, ulen) + bytes(f[at:at + ulen])) or 0xFFFF
    struct.pack_into("!H", f, at + 6, c)
    return bytes(f)


def set_lengths(g, ulen):
    """Writes the lengths of a UDP datagram of ulen bytes into bytearray g: IPv6's payload
    length, or IPv4's total length and header checksum; and UDP's."""
    if is6(g):
        struct.pack_into("!H", g, 18, ulen)
    else:
        struct.pack_into("!H", g, 16, 20 + ulen)
        g[24:26] = b"\0\0"
        struct.pack_into("!H", g, 24, checksum(bytes(g[14:34])))
    struct.pack_into("!H", g, udp_at(g) + 4, ulen)


def garbage(template, lo, hi):
    """Valid Ethernet, IP and UDP headers (from a captured frame) to a harp port, random body."""
    body = os.urandom(random.randint(0, 200))
    ports = struct.pack("!HHHH", random.randint(lo, hi), random.randint(lo, hi), 0, 0)
    g = bytearray(template[:udp_at(template)]) + ports + body
    set_lengths(g, 8 + len(body))
    return fix_udp(bytes(g))


def is_harp(f, lo, hi):
    if len(f) < ETH + 20 + 8 + 64:
        return False
    if f[12:14] == b"\x08\x00":
        proto = f[23]
    elif is6(f):
        proto = f[20]
    else:
        return False
    at = udp_at(f)
    if proto != 17 or len(f) < at + 8 + 64:
        return False
    dport = struct.unpack_from("!H", f, at + 2)[0]
    return lo <= dport <= hi and f[at + 8] == WIRE_VERSION


def tamper_data(g):
    """A DATA record's psn moved 1-8 ahead and its payload changed, in bytearray g."""
    h = hdr_at(g)
    psn = struct.unpack_from("!I", g, h + 16)[0]
    struct.pack_into("!I", g, h + 16, (psn + random.randint(1, 8)) & 0xFFFFFFFF)
    for i in range(h + 64, min(len(g), h + 64 + 256)):
        g[i] ^= 0x5A


def forge(f):
    """A live frame changed as an attacker who knows the token would; None if not DATA/ACK."""
    g = bytearray(f)
    h = hdr_at(g)
    kind = g[h + 1]
    if kind == 1 and len(g) > h + 64:  # DATA: psn ahead, payload changed
        tamper_data(g)
    elif kind == 2:  # ACK: more acknowledged than arrived
        ack = struct.unpack_from("!I", g, h + 20)[0]
        struct.pack_into("!I", g, h + 20, (ack + random.randint(1, 64)) & 0xFFFFFFFF)
    else:
        return None
    trailer = struct.unpack_from("!H", g, h + 60)[0]
    if trailer and random.random() < 0.5:  # and claim the frame carries no MAC at all
        del g[len(g) - trailer:]
        struct.pack_into("!H", g, h + 60, 0)
        set_lengths(g, len(g) - udp_at(g))
    return fix_udp(bytes(g))


def ext_header(kind, nxt, n):
    """An extension header of type kind and n bytes, naming nxt as the header after it."""
    e = bytearray(n)
    if kind == 50:  # ESP: SPI and sequence number; its next header would be in its trailer
        struct.pack_into("!II", e, 0, 0x100, 1)
        return bytes(e)
    e[0] = nxt
    if kind == 44:  # Fragment: offset 0, no more fragments; an identification
        struct.pack_into("!I", e, 4, random.getrandbits(32))
    elif kind == 51:  # AH: length in 4-byte units less 2, an SPI
        e[1] = n // 4 - 2
        struct.pack_into("!I", e, 4, 0x100)
    elif kind == 43:  # Routing: type 0, no segments left
        e[1] = n // 8 - 1
    else:  # Hop-by-Hop, Destination Options, unknown: one PadN option over the rest
        e[1] = n // 8 - 1
        e[2], e[3] = 1, n - 4
    return bytes(e)


def with_ext(f, chain):
    """IPv6 frame f with the chain of extension headers between its fixed header and UDP."""
    nxt, exts = 17, b""
    for kind in reversed(chain):
        exts = ext_header(kind, nxt, EXT_LEN[kind]) + exts
        nxt = kind
    g = bytearray(f[:ETH + 40]) + exts + f[ETH + 40:]
    g[20] = nxt
    struct.pack_into("!H", g, 18, struct.unpack_from("!H", f, 18)[0] + len(exts))
    return bytes(g)


def jumbo(f):
    """IPv6 frame f with a payload length of 0: half the time a jumbogram as RFC 2675 makes one
    (a Hop-by-Hop header holding the length in a Jumbo Payload option), else with nothing."""
    g = bytearray(f)
    if random.random() < 0.5:
        plen = struct.unpack_from("!H", g, 18)[0]
        g[ETH + 40:ETH + 40] = bytes([17, 0, 0xC2, 4]) + struct.pack("!I", plen + 8)
        g[20] = 0
    struct.pack_into("!H", g, 18, 0)
    return bytes(g)


def nocsum(f):
    g = bytearray(f)
    g[udp_at(g) + 6:udp_at(g) + 8] = b"\0\0"
    return bytes(g)


def spoof(f):
    """IPv6 frame f from another source: an interface id no rank has in the link's /64 (theirs
    are ::1 to ::N), or a link-local address; the checksum made to hold."""
    g = bytearray(f)
    g[30:38] = bytes([random.randint(0x10, 0xFD)]) + os.urandom(7)
    if random.random() < 0.5:
        g[22:30] = b"\xfe\x80" + bytes(6)
    return fix_udp(bytes(g))


def shorten(g, n):
    """Bytearray g, one DATA record (and its trailer, if any), with the last n bytes of its body
    cut out; None where g is not that."""
    h, at = hdr_at(g), udp_at(g)
    ulen, blen, trailer = (struct.unpack_from("!H", g, off)[0] for off in (at + 4, h + 56, h + 60))
    if ulen != 8 + 64 + blen + trailer or blen <= n or len(g) != at + ulen:
        return None
    del g[h + 64 + blen - n:h + 64 + blen]
    struct.pack_into("!H", g, h + 56, blen - n)
    set_lengths(g, ulen - n)
    return g


def live6(f, fault, max_frame):
    """DATA frame f, psn ahead and payload changed, then given fault; None if it cannot be."""
    g = bytearray(f)
    if g[hdr_at(g) + 1] != 1 or len(g) <= hdr_at(g) + 64:
        return None
    tamper_data(g)
    if fault == "ext":
        chain = random.choice(EXT_CHAINS)
        need = sum(EXT_LEN[k] for k in chain)
        if len(g) + need > max_frame and shorten(g, need) is None:
            return None
        return with_ext(fix_udp(bytes(g)), chain)
    g = fix_udp(bytes(g))
    if fault == "spoof":
        return spoof(g)
    if fault == "nocsum":
        return nocsum(g)
    h = bytearray(g)
    struct.pack_into("!H", h, 18, 0)  # jumbo: a payload length of 0, nothing else
    return bytes(h)


def from_live(s, lo, hi, seconds, make):
    """Sends make(frame) for frames of harp's as they pass, for a bounded time and count;
    returns how many went out."""
    n, end = 0, time.time() + seconds
    while time.time() < end and n < 200000:
        try:
            f, addr = s.recvfrom(65536)
        except socket.timeout:
            continue
        if addr[2] == socket.PACKET_OUTGOING or not is_harp(f, lo, hi):
            continue  # not our own forgeries again
        g = make(f)
        if g is None:
            continue
        try:
            s.send(g)
            n += 1
        except OSError:
            pass
    return n


def live6_all(s, lo, hi, max_frame, sent):
    """live6 for FORGE_S seconds, the four faults in turn; counts each in sent."""
    faults = ["spoof", "nocsum", "jumbo", "ext"]
    done = dict.fromkeys(faults, 0)

    def make(f):
        fault = faults[sum(done.values()) % len(faults)]
        g = live6(f, fault, max_frame)
        if g is not None:
            done[fault] += 1
        return g

    sent["live6"] = from_live(s, lo, hi, FORGE_S, make)
    for fault, n in done.items():
        sent[f"live6-{fault}"] = n


def capture(s, lo, hi):
    captured = []
    end = time.time() + 5
    while len(captured) < 2000 and time.time() < end:
        try:
            f = s.recv(65536)
        except socket.timeout:
            continue
        if is_harp(f, lo, hi):
            captured.append(f)
    return captured


def kinds_of(captured, lo, hi, max_frame):
    """What each kind sends, made from the captured frames."""
    def token(f):
        g = bytearray(f)
        g[hdr_at(g) + 8:hdr_at(g) + 16] = os.urandom(8)
        return fix_udp(bytes(g))

    def ahead(f):
        g = bytearray(f)
        psn = struct.unpack_from("!I", g, hdr_at(g) + 16)[0]
        struct.pack_into("!I", g, hdr_at(g) + 16, (psn + (1 << 30)) & 0xFFFFFFFF)
        return fix_udp(bytes(g))

    def truncated(f):
        return f[:random.randint(14, len(f) - 1)]

    kinds = {
        "replay": lambda: random.choice(captured),
        "token": lambda: token(random.choice(captured)),
        "ahead": lambda: ahead(random.choice(captured)),
        "truncated": lambda: truncated(random.choice(captured)),
        "garbage": lambda: garbage(captured[0], lo, hi),
    }
    if is6(captured[0]):
        small = [f for f in captured if len(f) + EXT_MAX <= max_frame] or captured
        kinds["ext"] = lambda: with_ext(random.choice(small), random.choice(EXT_CHAINS))
        kinds["jumbo"] = lambda: jumbo(random.choice(small))
        kinds["nocsum"] = lambda: nocsum(random.choice(captured))
        kinds["spoof"] = lambda: spoof(random.choice(captured))
    return kinds


def blast(s, make, count=None, seconds=None):
    """Sends make() count times, or for seconds; returns how many went out."""
    n, i, end = 0, 0, time.time() + (seconds or 0)
    while (count is not None and i < count) or (seconds is not None and time.time() < end):
        i += 1
        try:
            s.send(make())
            n += 1
        except OSError:
            pass
    return n


def main():
    ifname, lo, hi, flood_s, report = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        float(sys.argv[4]), sys.argv[5]
    forging = len(sys.argv) > 6 and sys.argv[6] == "forge"
    with open(f"/sys/class/net/{ifname}/mtu", encoding="ascii") as m:
        max_frame = int(m.read()) + ETH
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((ifname, 0))
    s.settimeout(0.2)
    sent = {}
    if forging:
        sent["forged"] = from_live(s, lo, hi, FORGE_S, forge)
    captured = capture(s, lo, hi)
    if not captured:
        open(report, "w").write("captured 0\n")
        return 1
    if is6(captured[0]):
        live6_all(s, lo, hi, max_frame, sent)
    kinds = kinds_of(captured, lo, hi, max_frame)
    sent["captured"] = len(captured)
    for name, make in kinds.items():
        sent[name] = blast(s, make, count=20000)
    makers = list(kinds.values())
    sent["flood"] = blast(s, lambda: random.choice(makers)(), seconds=flood_s)
    with open(report, "w") as out:
        for k, v in sent.items():
            out.write(f"{k} {v}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
