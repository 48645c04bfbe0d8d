#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Measures what a path does to UDP: loss, duplication, reordering, corruption.

  impair_probe.py recv --port P --count N [--idle SEC] [--deadline SEC]
  impair_probe.py send --dst ADDR --port P --count N --size BYTES [--pps RATE]

The sender numbers each datagram and fills it with a pattern derived from its number; the
receiver prints key=value counts: received, unique, lost, duplicated, reordered (arrived after a
higher number), bad_content (pattern wrong: corruption the kernel did not catch). Datagrams the
kernel drops for a bad checksum show up in the namespace's UdpInCsumErrors, not here.
"""
import argparse
import socket
import struct
import sys
import time

SEQ = struct.Struct("!Q")


def pattern(seq, size):
    """Bytes after the sequence number: a function of seq and position."""
    base = bytes((seq * 7 + i) & 0xFF for i in range(256))
    body = size - SEQ.size
    return (base * (body // 256 + 1))[:body]


def send(args):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    gap = 1.0 / args.pps if args.pps > 0 else 0.0
    start = time.monotonic()
    patterns = [pattern(s, args.size) for s in range(256)]
    for seq in range(args.count):
        payload = SEQ.pack(seq) + patterns[seq % 256]
        while True:
            try:
                sock.sendto(payload, (args.dst, args.port))
                break
            except (BlockingIOError, ConnectionRefusedError):
                time.sleep(0.0005)
        if gap:
            due = start + (seq + 1) * gap
            while time.monotonic() < due:
                pass
    print(f"sent={args.count} seconds={time.monotonic() - start:.3f}")


def recv(args):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    sock.bind(("0.0.0.0", args.port))
    sock.settimeout(args.idle)
    seen = bytearray(args.count)
    received = dups = reordered = bad = 0
    highest = -1
    deadline = time.monotonic() + args.deadline
    patterns = {}
    while time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            if received:
                break
            continue
        received += 1
        if len(data) < SEQ.size:
            bad += 1
            continue
        (seq,) = SEQ.unpack_from(data)
        if seq >= args.count:
            bad += 1
            continue
        key = (seq % 256, len(data))
        if key not in patterns:
            patterns[key] = pattern(seq, len(data))
        if data[SEQ.size:] != patterns[key]:
            bad += 1
        if seen[seq]:
            dups += 1
        seen[seq] = 1
        if seq < highest:
            reordered += 1
        highest = max(highest, seq)
    unique = sum(seen)
    print(f"received={received} unique={unique} lost={args.count - unique} "
          f"duplicated={dups} reordered={reordered} bad_content={bad}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("send")
    s.add_argument("--dst", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--count", type=int, required=True)
    s.add_argument("--size", type=int, default=1400)
    s.add_argument("--pps", type=float, default=20000)
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--count", type=int, required=True)
    r.add_argument("--idle", type=float, default=1.0)
    r.add_argument("--deadline", type=float, default=30.0)
    args = parser.parse_args()
    if args.mode == "send":
        if args.size < SEQ.size:
            sys.exit("size must be at least 8")
        send(args)
    else:
        recv(args)


if __name__ == "__main__":
    main()
