#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Stray and hostile connections to a harp listener's control port (tests/hostile/listener.sh).

  control_attack.py KIND HANDLE_FILE READY_FILE STOP_FILE

Reads the listener's address (IPv4 or IPv6) and nonce from the first handle in HANDLE_FILE
(harp-xfer's hex lines), opens KIND's connections, writes how many it holds into READY_FILE, and holds them until
STOP_FILE appears (60 s at most).
"""
import os, resource, socket, struct, sys, time
kind, handle_file, ready, stop = sys.argv[1:5]
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
h = bytes.fromhex(open(handle_file).readline().strip())
port = struct.unpack("!H", h[12:14])[0]
# the handle's family: 2 (AF_INET) with the address at 8, 10 (AF_INET6) with it at 24
if struct.unpack("!H", h[6:8])[0] == 10:
    family, addr = socket.AF_INET6, (socket.inet_ntop(socket.AF_INET6, h[24:40]), port)
else:
    family, addr = socket.AF_INET, (socket.inet_ntoa(h[8:12]), port)
nonce = h[16:24]

def conn():
    s = socket.create_connection(addr, timeout=5)
    s.setblocking(False)
    return s

def hello_version():
    # the control protocol this tree speaks (src/ctrlmsg.h), so a hello fails only for what
    # the case means it to
    here = os.path.dirname(os.path.abspath(__file__))
    for line in open(os.path.join(here, "..", "..", "src", "ctrlmsg.h")):
        if line.startswith("#define HELLO_VERSION"):
            return int(line.split()[2])
    raise SystemExit("control_attack: no HELLO_VERSION in src/ctrlmsg.h")

HELLO_REQ, HELLO_REFUSE = 1, 3
EAGAIN = 11

def hello(s, nonce, kind=HELLO_REQ, refuse_errno=0):
    # magic "HRPC", control protocol, type, nonce, token, id, IPv4 address, UDP port, queues,
    # MTU, refuse errno, UDP port count, auth flags (none), family (4 or 6), IPv6 address, 4
    # reserved bytes, no key: 96 bytes in network order. The data address is the connection s's
    # own, in the listener's family, as harp's connector sends it.
    me = s.getsockname()[0]
    if family == socket.AF_INET6:
        ipv4, fam, ipv6 = 0, 6, socket.inet_pton(socket.AF_INET6, me)
    else:
        ipv4, fam, ipv6 = struct.unpack("!I", socket.inet_aton(me))[0], 4, bytes(16)
    return struct.pack("!IHH8sQIIHHHHHBB16s4x32x", 0x48525043, hello_version(), kind, nonce, 7,
                       99, ipv4, 47000, 1, 1500, refuse_errno, 64, 0, fam, ipv6)

HELLO_BYTES = 96  # a whole hello's worth, so the listener judges it rather than waits for more

held = []
if kind == "garbage":
    s = conn(); s.send(os.urandom(HELLO_BYTES)); held.append(s)
elif kind == "nonce":
    wrong = bytes(b ^ 0xff for b in nonce)
    s = conn(); s.send(hello(s, wrong)); held.append(s)
elif kind == "refuse":
    # refusals to the listener, "try again" in them: a set-up must not wait on one
    for _ in range(20):
        s = conn(); s.send(hello(s, nonce, HELLO_REFUSE, EAGAIN)); held.append(s)
elif kind == "connsmax":
    # more silent connections than the listener's HARP_CONNS_MAX (listener.sh sets 4)
    held = [conn() for _ in range(20)]
elif kind == "partial":
    s = conn(); s.send(hello(s, nonce)[:10]); held.append(s)
elif kind == "slowloris":
    held = [conn() for _ in range(300)]
elif kind == "oversized":
    s = conn()
    s.setblocking(True)
    s.settimeout(5)
    try:
        s.sendall(os.urandom(HELLO_BYTES + (1 << 20)))
    except OSError:
        pass  # the listener dropped it: what we want
    held.append(s)
elif kind == "reset":
    for _ in range(50):
        s = socket.create_connection(addr, timeout=5)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
elif kind == "many":
    for _ in range(1000):
        s = socket.socket(family)
        s.setblocking(False)
        s.connect_ex(addr)
        held.append(s)
    time.sleep(0.5)
    for s in held:
        try:
            s.send(os.urandom(HELLO_BYTES))
        except OSError:
            pass
open(ready, "w").write(f"{len(held)}\n")
deadline = time.time() + 60
while not os.path.exists(stop) and time.time() < deadline:
    time.sleep(0.05)
