#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""An observer on harp's segment (tests/hostile/packets.sh): it sees harp's frames (the bridge
floods), then sends, each kind in turn, as fast as it can for a bounded time:

  replay     captured frames, unchanged
  token      captured frames with the token changed (right conn_id), checksums made valid
  ahead      captured frames with the psn moved 2^30 ahead (right token), checksums valid: far
             beyond the window while the run lasts (a transfer's psns pass 2^20 within one)
  truncated  captured frames cut short at random lengths
  garbage    valid Ethernet, IPv4 and UDP to harp's ports with a random body
  flood      all of the above mixed, for FLOOD_S seconds

With "forge" (packets.sh auth: harp runs HARP_AUTH=1), first, for FORGE_S seconds, live frames
copied and changed the moment they pass, as an on-path attacker who read the token would: DATA
with its psn moved 1-8 ahead and its payload changed (accepted, it would put these bytes in the
message in place of the real ones), the same with the MAC trailer stripped, and ACKs that
acknowledge 1-64 psns more than arrived. Each must fail the receiver's MAC check.

  packet_attack.py IFNAME PORT_LO PORT_HI FLOOD_S REPORT_FILE [forge]

Capturing stops after 2,000 harp frames or 5 s. Writes "kind sent" lines into REPORT_FILE.
"""
import os
import random
import socket
import struct
import sys
import time

ETH_P_ALL = 3
HDR = 42  # Ethernet, IPv4 without options, UDP: the harp header starts here
FORGE_S = 4
AUTH_TRAILER = 24  # HARP_AUTH: frame counter and MAC after the records


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


def fix_udp(frame):
    """Recomputes the UDP checksum of an untagged IPv4/UDP frame after a change."""
    f = bytearray(frame)
    ulen = struct.unpack_from("!H", f, 38)[0]
    f[40:42] = b"\0\0"
    pseudo = bytes(f[26:34]) + struct.pack("!BBH", 0, 17, ulen)
    c = checksum(pseudo + bytes(f[34:34 + ulen])) or 0xFFFF
    struct.pack_into("!H", f, 40, c)
    return bytes(f)


def garbage(template, lo, hi):
    """Valid Ethernet, IPv4 and UDP headers (from a captured frame) to a harp port, random body."""
    body = os.urandom(random.randint(0, 200))
    f = bytearray(template[:34])
    ulen = 8 + len(body)
    struct.pack_into("!H", f, 16, 20 + ulen)  # IPv4 total length
    f[24:26] = b"\0\0"
    struct.pack_into("!H", f, 24, checksum(bytes(f[14:34])))
    udp = struct.pack("!HHHH", random.randint(lo, hi), random.randint(lo, hi), ulen, 0)
    return fix_udp(bytes(f) + udp + body)


def is_harp(f, lo, hi):
    if len(f) < HDR + 64 or f[12:14] != b"\x08\x00" or f[23] != 17:
        return False
    dport = struct.unpack_from("!H", f, 36)[0]
    return lo <= dport <= hi and f[HDR] == WIRE_VERSION


def forge(f):
    """A live frame changed as an attacker who knows the token would; None if not DATA/ACK."""
    g = bytearray(f)
    kind = g[HDR + 1]
    if kind == 1 and len(g) > HDR + 64:  # DATA: psn ahead, payload changed
        psn = struct.unpack_from("!I", g, HDR + 16)[0]
        struct.pack_into("!I", g, HDR + 16, (psn + random.randint(1, 8)) & 0xFFFFFFFF)
        for i in range(HDR + 64, min(len(g), HDR + 64 + 256)):
            g[i] ^= 0x5A
    elif kind == 2:  # ACK: more acknowledged than arrived
        ack = struct.unpack_from("!I", g, HDR + 20)[0]
        struct.pack_into("!I", g, HDR + 20, (ack + random.randint(1, 64)) & 0xFFFFFFFF)
    else:
        return None
    trailer = struct.unpack_from("!H", g, HDR + 60)[0]
    if trailer and random.random() < 0.5:  # and claim the frame carries no MAC at all
        del g[len(g) - trailer:]
        struct.pack_into("!H", g, HDR + 60, 0)
        struct.pack_into("!H", g, 16, len(g) - 14)  # IPv4 total length
        g[24:26] = b"\0\0"
        struct.pack_into("!H", g, 24, checksum(bytes(g[14:34])))
        struct.pack_into("!H", g, 38, len(g) - 34)  # UDP length
    return fix_udp(bytes(g))


def forge_live(s, lo, hi, seconds):
    """Forges from frames as they pass, for a bounded time and count; returns how many sent."""
    n, end = 0, time.time() + seconds
    while time.time() < end and n < 200000:
        try:
            f, addr = s.recvfrom(65536)
        except socket.timeout:
            continue
        if addr[2] == socket.PACKET_OUTGOING or not is_harp(f, lo, hi):
            continue  # not our own forgeries again
        g = forge(f)
        if g is None:
            continue
        try:
            s.send(g)
            n += 1
        except OSError:
            pass
    return n


def main():
    ifname, lo, hi, flood_s, report = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        float(sys.argv[4]), sys.argv[5]
    forging = len(sys.argv) > 6 and sys.argv[6] == "forge"
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((ifname, 0))
    s.settimeout(0.2)
    sent = {}
    if forging:
        sent["forged"] = forge_live(s, lo, hi, FORGE_S)
    captured = []
    end = time.time() + 5
    while len(captured) < 2000 and time.time() < end:
        try:
            f = s.recv(65536)
        except socket.timeout:
            continue
        if is_harp(f, lo, hi):
            captured.append(f)
    if not captured:
        open(report, "w").write("captured 0\n")
        return 1

    def token(f):
        g = bytearray(f)
        g[HDR + 8:HDR + 16] = os.urandom(8)
        return fix_udp(bytes(g))

    def ahead(f):
        g = bytearray(f)
        psn = struct.unpack_from("!I", g, HDR + 16)[0]
        struct.pack_into("!I", g, HDR + 16, (psn + (1 << 30)) & 0xFFFFFFFF)
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
    sent["captured"] = len(captured)
    for name, make in kinds.items():
        n = 0
        for _ in range(20000):
            try:
                s.send(make())
                n += 1
            except OSError:
                pass
        sent[name] = n
    n, end = 0, time.time() + flood_s
    makers = list(kinds.values())
    while time.time() < end:
        try:
            s.send(random.choice(makers)())
            n += 1
        except OSError:
            pass
    sent["flood"] = n
    with open(report, "w") as out:
        for k, v in sent.items():
            out.write(f"{k} {v}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
