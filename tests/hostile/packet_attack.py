#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""An observer on harp's segment (tests/hostile/packets.sh): it sees harp's frames (the bridge
floods), then sends, each kind in turn, as fast as it can for a bounded time:

  replay     captured frames, unchanged
  token      captured frames with the token changed (right conn_id), checksums made valid
  ahead      captured frames with the psn moved 2^20 ahead (right token), checksums valid
  truncated  captured frames cut short at random lengths
  garbage    valid Ethernet, IPv4 and UDP to harp's ports with a random body
  flood      all of the above mixed, for FLOOD_S seconds

  packet_attack.py IFNAME PORT_LO PORT_HI FLOOD_S REPORT_FILE

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


def main():
    ifname, lo, hi, flood_s, report = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        float(sys.argv[4]), sys.argv[5]
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((ifname, 0))
    s.settimeout(0.2)
    captured = []
    end = time.time() + 5
    while len(captured) < 2000 and time.time() < end:
        try:
            f = s.recv(65536)
        except socket.timeout:
            continue
        if len(f) >= HDR + 64 and f[12:14] == b"\x08\x00" and f[23] == 17:
            dport = struct.unpack_from("!H", f, 36)[0]
            if lo <= dport <= hi and f[HDR] == 2:
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
        struct.pack_into("!I", g, HDR + 16, (psn + (1 << 20)) & 0xFFFFFFFF)
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
    sent = {"captured": len(captured)}
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
