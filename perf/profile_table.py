#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""perf/profile's table: each end's CPU-seconds per GiB, by what the time went to.

Reads OUT/{harp,tcp}.report.txt (perf report -n --sort pid,dso,sym: samples per thread),
OUT/{harp,tcp}.pids (server and client process), OUT/{harp,tcp}.tids (each process's threads)
and OUT/{harp,tcp}.frames; arguments: OUT GIB MTU. Samples are cpu-clock at 1999 Hz.
"""
import os
import re
import sys

HZ = 1999
# (category, pattern on "dso sym"), first match wins; user space is [.], the kernel [k]
RULES = [
    ("checksum", r"csum|checksum"),
    ("copy, user space", r"\[\.\] .*(memmove|memcpy|__memcpy)"),
    ("copy, kernel", r"\[k\] .*(memcpy|memmove|copy_user|copy_to_iter|copy_from_iter|copy_page|"
                     r"rep_movs|skb_copy_datagram|copyout|copyin)"),
    ("harp-perf's checks of the data", r"(memcmp|bcmp|harp-perf \[\.\]|iperf3 \[\.\])"),
    ("clock reads (vDSO)", r"\[vdso\]"),
    ("harp: engine, protocol, polling", r"libnccl-net-harp\.so \[\.\]"),
    ("user space, other", r"\[\.\]"),
    ("skb, page and memory handling", r"\[k\] .*(alloc|free|kmem_cache|page_frag|page_pool|"
                                      r"skb_release|consume_skb|memcg|slab|folio|pte|fault|"
                                      r"clear_page|rmqueue|put_page|get_page|refill)"),
    ("TCP/IP", r"\[k\] .*(tcp_|ip_|inet_|__ip|ipv4|sk_stream|sock_|skb_|__skb|dst_|"
               r"raw_|udp_|nf_|__netif_receive|netif_receive|ip_finish)"),
    ("AF_XDP, veth and XDP", r"\[k\] .*(xsk|xp_|veth|xdp|bpf|dev_direct_xmit|dev_hard_start|"
                             r"net_rx_action|napi|netif|dev_queue|sch_|qdisc)"),
    ("system calls and scheduling", r"\[k\] .*(entry_SYSCALL|do_syscall|syscall|schedule|"
                                    r"__x64_sys|sys_|futex|__switch|finish_task|pick_next|"
                                    r"hrtimer|irq|softirq|rcu|clock|poll|epoll|wake)"),
    ("kernel, other", r"\[k\]"),
    ("other", r"."),
]
LINE = re.compile(r"^\s*([\d.]+)%\s+(\d+)\s+(\d+)(?::\S*)?\s+(\S+)\s+(\[[.k]\])\s+(.*)$")


def load(out, impl):
    """{process pid: {category: samples}} for the server and the client of impl, or None."""
    try:
        srv, cli = open(os.path.join(out, f"{impl}.pids")).read().split()
    except OSError:
        return None
    owner = {srv: srv, cli: cli}
    with open(os.path.join(out, f"{impl}.tids")) as f:
        for line in f:
            pid, tid = line.split()
            owner[tid] = pid
    cats = {p: {name: 0 for name, _ in RULES} for p in (srv, cli)}
    with open(os.path.join(out, f"{impl}.report.txt"), encoding="utf-8", errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if not m or m.group(3) not in owner:
                continue
            key = f"{m.group(4)} {m.group(5)} {m.group(6)}"
            for name, pat in RULES:
                if re.search(pat, key):
                    cats[owner[m.group(3)]][name] += int(m.group(2))
                    break
    return cats[cli], cats[srv]


def main():
    out, gib, mtu = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    cols = []
    for impl in ("harp", "tcp"):
        frames_path = os.path.join(out, f"{impl}.frames")
        frames = int(open(frames_path).read()) if os.path.exists(frames_path) else 0
        ends = load(out, impl)
        if ends is not None:
            cols.append((f"{impl} sender", ends[0], frames))
            cols.append((f"{impl} receiver", ends[1], frames))
    if not cols:
        sys.exit("profile: no reports")
    print(f"MTU {mtu}, {gib:g} GiB per stream; CPU-seconds per GiB (perf cpu-clock samples at "
          f"{HZ} Hz, each end's process):\n")
    print("| | " + " | ".join(c[0] for c in cols) + " |")
    print("|---|" + "---|" * len(cols))
    for name, _ in RULES:
        vals = [c[1][name] / HZ / gib for c in cols]
        if max(vals) < 0.0005:
            continue
        print(f"| {name} | " + " | ".join(f"{v:.3f}" for v in vals) + " |")
    totals = [sum(c[1].values()) / HZ / gib for c in cols]
    print("| **all** | " + " | ".join(f"**{v:.3f}**" for v in totals) + " |")
    print("| frames on the link per GiB | " + " | ".join(f"{c[2] / gib:.0f}" for c in cols) + " |")
    print("| CPU-us per frame | " + " | ".join(
        f"{t * gib / c[2] * 1e6:.2f}" if c[2] else "-" for t, c in zip(totals, cols)) + " |")


if __name__ == "__main__":
    main()
