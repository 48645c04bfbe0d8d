#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The results page (perf/RESULTS.md) from one perf/run: a table per topology (veth pair, hashed
hop, VPC-like fabric, all-reduce) of harp beside each peer the run measured, the commit, date
and machine, and SVG plots drawn by gnuplot (latency, bandwidth and all-reduce bus bandwidth
against size) in plots/ beside the page.

    results_page.py write DIR FILE [--readme README] [--ipv6 DIR6]... [--ipv4 DIR4]...
    results_page.py gpu FILE
    results_page.py check README FILE

write: DIR is a perf/run results directory (results.jsonl, config.json). With --readme, the
page's headline table also replaces what README holds between its two harp-results markers.
With --ipv6, a section "Over IPv6" sets the veth pair's and the hashed hop's cases of DIR6 (perf/run
--family 6) beside DIR's; with several DIR6 and more IPv4 runs (DIR4), each figure is the median
of its family's runs. Every run must be of DIR's sitting (commit, machine, preset, peers).
gpu: the page's GPU section (also part of write) renewed in place from perf/gpu/*.jsonl, the
runs of tests/gpu/check.sh on GPU machines (harp-gpu/1 records), which perf/run cannot make here.
check: exit 1 unless README's headline block is FILE's Headline table, every plot FILE shows
exists, and FILE's GPU section is what perf/gpu/ holds.
Every figure is read from DIR's records; nothing is typed in. Standard library only.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import collect as C

README_BEGIN = "<!-- harp-results:begin (perf/run --results perf/RESULTS.md writes this) -->"
README_END = "<!-- harp-results:end -->"
HISTORY_COMMIT = "06f5b07"  # the last commit whose RESULTS.md held the step-by-step history
GPU_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu")
GPU_BEGIN = "<!-- gpu-runs:begin (perf/results_page.py gpu writes this from perf/gpu/) -->"
GPU_END = "<!-- gpu-runs:end -->\n"
PLOTS = ("latency.svg", "bandwidth.svg", "allreduce.svg")
COLORS = ("#1f5fbf", "#e07000", "#2a9d3a", "#9050c0", "#b03030")  # harp, then each peer
KERNEL_COLOR, RAW_COLOR = "#707070", "#000000"


def para(text):
    return textwrap.fill(text, 100, break_on_hyphens=False) + "\n"


def die(msg):
    print("results_page: " + msg, file=sys.stderr)
    sys.exit(1)


def peer_title(spec):
    """A peer's column title from its --peer-plugin spec."""
    so, _, env = spec.partition(":")
    name = "NCCL socket" if so == "nccl-socket" else os.path.basename(so)
    pairs = dict(w.split("=", 1) for w in env.split(",") if "=" in w)
    threads, socks = pairs.get("NCCL_SOCKET_NTHREADS"), pairs.get("NCCL_NSOCKS_PERTHREAD")
    if set(pairs) == {"NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD"} and (
            threads.isdigit() and socks.isdigit()):
        return "%s, %d sockets" % (name, int(threads) * int(socks))
    if pairs:
        return "%s (%s)" % (name, ", ".join("%s=%s" % kv for kv in pairs.items()))
    return name


def impls(cfg):
    """[(label prefix, column title)]: harp, then each peer the run measured."""
    specs = [s for s in str(cfg.get("peer_plugins") or "").split("|") if s]
    return [("", "harp")] + [("peer%d-" % k, peer_title(s)) for k, s in enumerate(specs, 1)]


def num(v):
    """A figure for a table: thousands grouped from 10,000 up, else collect's fmt."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) >= 10000:
        return "{:,.0f}".format(v)
    return C.fmt(v if not isinstance(v, int) or isinstance(v, bool) else float(v))


def field(rec, key, scale=1.0):
    if not rec or rec.get(key) is None:
        return None
    return rec[key] * scale


class Row:
    """One case: a value per implementation (harp, each peer), the kernel's and raw AF_XDP's."""

    def __init__(self, what, better, values, kernel=None, raw=None):
        self.what, self.better, self.values = what, better, values
        self.kernel, self.raw = kernel, raw

    def cells(self, with_kernel=True):
        cells = [self.what] + [num(v) for v in self.values]
        if with_kernel:
            cells += [num(self.kernel), num(self.raw)]
        harp, first = self.values[0], self.values[1] if len(self.values) > 1 else None
        return cells + [C.fmt(C.ratio(harp, first)), self.better]


def table(rows, cfg, with_kernel=True):
    titles = [t for _, t in impls(cfg)]
    head = ["case"] + titles
    if with_kernel:
        head += ["kernel TCP", "raw AF_XDP"]
    head += ["harp / %s" % (titles[1] if len(titles) > 1 else "peer"), "better"]
    return C.md_table(head, [r.cells(with_kernel) for r in rows if any(
        v is not None for v in r.values + [r.kernel, r.raw])])


# ---- the cases -----------------------------------------------------------------------------

def stream(recs, prefix, label, **want):
    return C.harp_stream_rate(recs, label=prefix + label, **want)


def pingpong(recs, prefix, label, **want):
    return C.one(recs, tool="harp-perf", test="pingpong", role="client", label=prefix + label,
                 **want)


def slowest_busbw(recs, label, nranks, size):
    ranks = [r.get("busbw_GBps") for r in C.pick(
        recs, tool="harp-perf", test="allreduce", role="rank", label=label, nranks=nranks,
        size=size)]
    ranks = [v for v in ranks if v is not None]
    return min(ranks) if ranks else None


def veth_rows(recs, cfg):
    ims = impls(cfg)
    mtus = cfg.get("mtus") or [1500]
    mtu0 = mtus[0]
    size = cfg.get("target_stream_size", 524288)
    rows = []
    for mtu in mtus:
        kernel = C.one(recs, tool="iperf3", test="stream", role="server", label="bandwidth",
                       mtu=mtu, size=size, conns=1)
        raw = C.one(recs, tool="harp-perf", test="raw", role="server", label="raw", mtu=mtu)
        rows.append(Row("stream, 1 connection, %s messages, MTU %d (Gbit/s)" % (
            C.human_size(size), mtu), "higher",
            [stream(recs, p, "bandwidth", mtu=mtu, size=size, conns=1) for p, _ in ims],
            field(kernel, "gbps"), field(raw, "body_gbps")))
    conns = cfg.get("multi_conns")
    kernel = C.one(recs, tool="iperf3", test="stream", role="server", label="multi", mtu=mtu0,
                   conns=conns)
    rows.append(Row("stream, %s connections, MTU %d (Gbit/s)" % (conns, mtu0), "higher",
                    [stream(recs, p, "multi", mtu=mtu0, conns=conns) for p, _ in ims],
                    field(kernel, "gbps")))
    tcp = C.one(recs, tool="sockperf", test="pingpong", role="client", transport="kernel-tcp",
                mtu=mtu0)
    raw = C.one(recs, tool="harp-perf", test="raw", role="client", label="latency-raw",
                mtu=mtu0)
    for q in ("p50", "p99"):
        rows.append(Row("round trip %s, 8 B (kernel TCP: sockperf, %s), MTU %d (us)" % (
            q, C.human_size(tcp.get("size")) if tcp else "-", mtu0), "lower",
            [field(pingpong(recs, p, "latency", size=8, mtu=mtu0), q + "_us") for p, _ in ims],
            field(tcp, q + "_us"), field(raw, q + "_us")))
    sizes = sorted({r["size"] for r in C.pick(recs, tool="harp-perf", test="pingpong",
                                               role="client", label="latency", mtu=mtu0)
                    if (r.get("size") or 0) >= 65536})
    # raw AF_XDP's floor of the first large size: as many full frames each way, the replies
    # leaving once the whole message came (harp-perf raw --burst)
    raw_large = C.one(recs, tool="harp-perf", test="raw", role="client",
                      label="latency-raw-large", mtu=mtu0)
    for s in sizes[:1] + sizes[-1:] if len(sizes) > 1 else sizes:
        rows.append(Row("round trip p50, %s, MTU %d (us)" % (C.human_size(s), mtu0), "lower",
                        [field(pingpong(recs, p, "latency", size=s, mtu=mtu0), "p50_us")
                         for p, _ in ims], None,
                        field(raw_large, "p50_us") if s == sizes[0] else None))
    tp = C.one(recs, tool="sockperf", test="msgrate", role="client", mtu=mtu0)
    rows.append(Row("64 B messages per second, MTU %d" % mtu0, "higher",
                    [field(C.one(recs, tool="harp-perf", test="msgrate", role="server", size=64,
                                 mtu=mtu0, label=p + "msgrate"), "msgs_per_s") for p, _ in ims],
                    field(tp, "msgs_per_s")))
    for mtu in mtus:
        want = dict(mtu=mtu, size=size, conns=1)
        rows.append(Row("CPU-seconds per GiB, both ends, %s stream, MTU %d" % (
            C.human_size(size), mtu), "lower",
            [C.cpu_per_gib(recs, "harp-perf", label=p + "bandwidth", **want)[0]
             for p, _ in ims],
            C.cpu_per_gib(recs, "iperf3", label="bandwidth", **want)[0]))
    return rows


def hop_rows(recs, cfg):
    ims = impls(cfg)
    q4 = C.one(recs, tool="harp-perf", test="stream", role="server", label="rss-q4")
    if not q4:
        return []
    conns, size = q4.get("conns"), q4.get("size")
    kernel = C.one(recs, tool="iperf3", test="stream", role="server", label="rss")
    rows = [Row("stream, %s connections, %s messages, harp on 4 queues (Gbit/s)" % (
        conns, C.human_size(size)), "higher",
        [stream(recs, p, "rss-q4") for p, _ in ims], field(kernel, "gbps"))]
    blank = [None] * (len(ims) - 1)
    for q in (1, 2):
        rows.append(Row("the same, harp on %d queue%s" % (q, "s" if q > 1 else ""), "higher",
                        [stream(recs, "", "rss-q%d" % q)] + blank))
    two = [stream(recs, "", "rss-2p-r%d" % r) for r in (0, 1)]
    if all(v is not None for v in two):
        rows.append(Row("the same, two harp processes on each NIC, 2 queues each (sum)",
                        "higher", [two[0] + two[1]] + blank))
    return rows


def fabric_rows(recs, cfg):
    ims = impls(cfg)
    flows = cfg.get("fabric_flows")
    kernel = C.one(recs, tool="iperf3", test="stream", role="server", label="fabric",
                   conns=flows)
    rows = [Row("stream, %s connections (Gbit/s)" % flows, "higher",
                [stream(recs, p, "fabric", conns=flows) for p, _ in ims], field(kernel, "gbps"))]
    for q in ("p50", "p99"):
        rows.append(Row("round trip %s, 512 KiB (ms)" % q, "lower",
                        [field(pingpong(recs, p, "fabric-latency"), q + "_us", 1e-3)
                         for p, _ in ims]))
    return rows


def allreduce_points(recs, prefix):
    """{nranks: [(size, slowest rank's busbw)]} for one implementation."""
    out = {}
    label = prefix + "allreduce"
    for r in C.pick(recs, tool="harp-perf", test="allreduce", role="rank", label=label):
        n, s = r.get("nranks"), r.get("size")
        if n is None or s is None:
            continue
        out.setdefault(n, {})[s] = slowest_busbw(recs, label, n, s)
    return {n: sorted((s, v) for s, v in d.items() if v is not None) for n, d in out.items()}


def allreduce_rows(recs, cfg):
    ims = impls(cfg)
    keys = sorted({(r.get("nranks"), r.get("size")) for r in C.pick(
        recs, tool="harp-perf", test="allreduce", role="rank", label="allreduce") if
        r.get("nranks") and r.get("size")})
    return [Row("%d ranks, %s (busbw GB/s)" % (n, C.human_size(s)), "higher",
                [slowest_busbw(recs, p + "allreduce", n, s) for p, _ in ims]) for n, s in keys]


def scale_rows(recs, cfg):
    """All-reduce of 2 ranks against the channel count (perf/run's scale case, labels
    scale-cC), each channel count on as many queues; harp alone also with one channel striped
    over C queues (scale-sC) and with a thread for each engine (scale-tC)."""
    ims = impls(cfg)
    keys = set()
    for r in C.pick(recs, tool="harp-perf", test="allreduce", role="rank"):
        m = re.match(r"scale-([cst])(\d+)$", r.get("label") or "")
        if m and r.get("size"):
            keys.add((r["size"], int(m.group(2)), "cst".index(m.group(1))))
    rows = []
    for s, c, k in sorted(keys):
        plural = "" if c == 1 else "s"
        what = ("%d channel%s on %d queue%s" % (c, plural, c, plural),
                "1 channel striped over %d queues (HARP_STRIPES=%d)" % (c, c),
                "%d channels, engine threads on" % c)[k]
        label = "scale-%s%d" % ("cst"[k], c)
        rows.append(Row("2 ranks, %s, %s (busbw GB/s)" % (C.human_size(s), what), "higher",
                        [slowest_busbw(recs, p + label, 2, s) if k == 0 or not p else None
                         for p, _ in ims]))
    return rows


def floor_section(veth, cfg):
    """How far harp is from raw AF_XDP (its floor on these links) and how far that floor is
    from NCCL socket: where the floor itself loses, no protocol over these sockets wins."""
    titles = [t for _, t in impls(cfg)]
    peer = titles[1] if len(titles) > 1 else None
    body = []
    for r in veth:
        if r.raw is None or not r.values or r.values[0] is None:
            continue
        first = r.values[1] if len(r.values) > 1 else None
        body.append([r.what, num(r.values[0]), num(r.raw), num(first),
                     C.fmt(C.ratio(r.values[0], r.raw)), C.fmt(C.ratio(r.raw, first)), r.better])
    if not body:
        return ""
    return "## The copy-mode floor\n\n%s\n%s" % (para(
        "raw AF_XDP moves frames through the same sockets with no protocol at all: what these "
        "links allow harp (a stream of harp's, which batches its kicks, lands on either side of "
        "it from run to run). AF_XDP on veth runs in copy mode, and a byte is copied four "
        "times on its way (into a frame, into the kernel's skb, into the peer's frame, into the "
        "receive buffer) in frames of the MTU, where kernel TCP over veth copies it twice in "
        "64 KiB super-packets. Where the floor is already behind %s, no protocol over these "
        "sockets catches up here; a NIC with zero-copy AF_XDP (ENA, gve, mlx5, virtio-net with "
        "the fix: docs/OPERATIONS.md) takes two of the four copies away, and more cores (engine "
        "threads, stripes) spread the rest." % (peer or "the kernel's transports")),
        C.md_table(["case", "harp", "raw AF_XDP", peer or "peer", "harp / raw",
                    "raw / %s" % (peer or "peer"), "better"], body))


def headline_rows(recs, cfg):
    """The README's few rows: one of each kind, from the tables above."""
    veth, hop, fabric, ar = (veth_rows(recs, cfg), hop_rows(recs, cfg), fabric_rows(recs, cfg),
                             allreduce_rows(recs, cfg))
    big = [r for r in veth if r.what.startswith("round trip p50, ") and ", 8 B" not in r.what]
    pick = [r for r in veth if r in big[:1] or r.what.startswith((
        "stream, 1 connection", "round trip p50, 8 B", "64 B messages", "CPU-seconds"))]
    pick += [Row("hashed hop: " + r.what, r.better, r.values, r.kernel) for r in hop[:1]]
    pick += [Row("fabric: " + r.what, r.better, r.values, r.kernel) for r in fabric[:1]]
    largest = {}
    for r in ar:
        n = int(r.what.split()[0])
        largest[n] = r  # keys come sorted by size
    pick += [Row("all-reduce, " + r.what, r.better, r.values) for _, r in sorted(
        largest.items())]
    return pick


# ---- plots ---------------------------------------------------------------------------------

def block(name, rows):
    return C.datablock(name, rows) if rows else ""


def size_tics(sizes):
    return ", ".join('"%s" %d' % (C.human_size(n).replace(" ", ""), n) for n in sorted(sizes))


def size_axes(sizes, xlabel, ylabel, logy=False):
    """gnuplot lines for a plot against size: a log2 x axis labelled at each size measured."""
    return """set logscale x 2
%sset xrange [%d:%d]
set xtics (%s) rotate by -45
set xlabel '%s'
set ylabel '%s'
""" % ("set logscale y 10\n" if logy else "set yrange [0:*]\n", max(1, min(sizes) // 2),
       max(sizes) * 2, size_tics(sizes), xlabel, ylabel)


def plot_latency(recs, cfg):
    mtu0 = (cfg.get("mtus") or [1500])[0]
    text, series, sizes = "", [], set()
    for i, (prefix, title) in enumerate(impls(cfg)):
        rows = sorted((r["size"], r["p50_us"]) for r in C.pick(
            recs, tool="harp-perf", test="pingpong", role="client", label=prefix + "latency",
            mtu=mtu0) if r.get("size") and r.get("p50_us") is not None)
        if rows:
            sizes.update(s for s, _ in rows)
            text += block("lat%d" % i, rows)
            series.append("$lat%d using 1:2 with linespoints lw 2 pt 7 lc rgb '%s' title '%s'" %
                          (i, COLORS[i % len(COLORS)], title))
    for j, (transport, title) in enumerate((("kernel-tcp", "kernel TCP (sockperf)"),
                                            ("kernel-udp", "kernel UDP (sockperf)"))):
        r = C.one(recs, tool="sockperf", test="pingpong", role="client", transport=transport,
                  mtu=mtu0)
        if r and r.get("size") and r.get("p50_us") is not None:
            text += block("k%d" % j, [(r["size"], r["p50_us"])])
            series.append("$k%d using 1:2 with points pt %d ps 1.5 lc rgb '%s' title '%s'" % (
                j, 5 + 4 * j, KERNEL_COLOR, title))
    raw = C.one(recs, tool="harp-perf", test="raw", role="client", label="latency-raw",
                mtu=mtu0)
    if raw and raw.get("size") and raw.get("p50_us") is not None:
        text += block("raw", [(raw["size"], raw["p50_us"])])
        series.append("$raw using 1:2 with points pt 13 ps 1.5 lc rgb '%s' title "
                      "'raw AF_XDP (no protocol)'" % RAW_COLOR)
    if not sizes:
        return None
    return text + """set output 'latency.svg'
set title 'Round trip (ping-pong p50) against message size, veth, MTU %d'
%sset key top left
plot %s
""" % (mtu0, size_axes(sizes, "message size", "round trip p50 (us)", logy=True),
       ", \\\n     ".join(series))


def plot_bandwidth(recs, cfg):
    """One panel per MTU, the same series in each."""
    text, panels, sizes = "", [], set()
    mtus = cfg.get("mtus") or [1500]
    series_of = [(p, t, COLORS[i % len(COLORS)]) for i, (p, t) in enumerate(impls(cfg))]
    series_of.append((None, "kernel TCP (iperf3)", KERNEL_COLOR))
    for mtu in mtus:
        series = []
        for prefix, title, color in series_of:
            tool = "iperf3" if prefix is None else "harp-perf"
            label = "bandwidth" if prefix is None else prefix + "bandwidth"
            rows = sorted((r["size"], r["gbps"]) for r in C.pick(
                recs, tool=tool, test="stream", role="server", label=label, mtu=mtu, conns=1)
                if r.get("size") and r.get("gbps") is not None)
            if rows:
                name = "bw%d_%d" % (len(series), mtu)
                sizes.update(s for s, _ in rows)
                text += block(name, rows)
                series.append("$%s using 1:2 with linespoints lw 2 pt 7 lc rgb '%s' "
                              "title '%s'" % (name, color, title))
        raw = C.one(recs, tool="harp-perf", test="raw", role="server", label="raw", mtu=mtu)
        if raw and raw.get("body_gbps") is not None:
            series.append("%s with lines lw 1 dt 2 lc rgb '%s' title 'raw AF_XDP'" % (
                raw["body_gbps"], RAW_COLOR))
        if series:
            panels.append("set title 'MTU %d'\nplot %s\n" % (mtu, ", \\\n     ".join(series)))
    if not sizes:
        return None
    return text + """set output 'bandwidth.svg'
set multiplot layout 1,%d title 'One-way goodput against message size, 1 connection, veth'
%sset offsets 0, 0, graph 0.45, 0
set key top left
%sunset multiplot
""" % (len(panels), size_axes(sizes, "message size", "Gbit/s"), "".join(panels))


def plot_allreduce(recs, cfg):
    text, series, sizes = "", [], set()
    for i, (prefix, title) in enumerate(impls(cfg)):
        for k, (n, rows) in enumerate(sorted(allreduce_points(recs, prefix).items())):
            if not rows:
                continue
            name = "ar%d_%d" % (i, n)
            sizes.update(s for s, _ in rows)
            text += block(name, rows)
            series.append("$%s using 1:2 with linespoints lw 2 pt %d dt %d lc rgb '%s' "
                          "title '%s, %d ranks'" % (name, 7 + 2 * k, 1 + k,
                                                   COLORS[i % len(COLORS)], title, n))
    if not sizes:
        return None
    return text + """set output 'allreduce.svg'
set title 'All-reduce bus bandwidth against size (slowest rank), ranks on one bridge'
%sset key outside right
plot %s
""" % (size_axes(sizes, "bytes reduced", "busbw (GB/s)"), ", \\\n     ".join(series))


def draw(run_dir, plot_dir, recs, cfg):
    """The plots drawn into plot_dir: ([file names], None) or ([], why not)."""
    parts = {"latency.svg": plot_latency(recs, cfg), "bandwidth.svg": plot_bandwidth(recs, cfg),
             "allreduce.svg": plot_allreduce(recs, cfg)}
    os.makedirs(plot_dir, exist_ok=True)
    for name in PLOTS:  # no plot of an earlier run survives beside this one's tables
        path = os.path.join(plot_dir, name)
        if os.path.exists(path):
            os.remove(path)
    gp = os.path.join(run_dir, "results_plots.gp")
    with open(gp, "w") as f:
        f.write("# Written by perf/results_page.py; gnuplot draws the results page's plots.\n")
        f.write("set terminal svg size 900,560 noenhanced font 'sans,12' background '#ffffff'\n")
        for part in parts.values():
            if part:
                f.write("\nreset\nset grid\n" + part)
    if not any(parts.values()):
        return [], "no records to plot"
    if not shutil.which("gnuplot"):
        return [], "gnuplot is not installed (scripts/setup.sh installs it)"
    try:
        proc = subprocess.run(["gnuplot", gp], cwd=plot_dir, capture_output=True, text=True,
                              timeout=60)
    except subprocess.TimeoutExpired:
        return [], "gnuplot did not finish in 60 s"
    if proc.returncode != 0:
        return [], "gnuplot failed: " + proc.stderr.strip()[-500:]
    return [n for n in PLOTS if parts[n] and os.path.exists(os.path.join(plot_dir, n))], None


# ---- the page ------------------------------------------------------------------------------

def machine_rows(recs, cfg):
    modes = sorted({"%s XDP, %s AF_XDP" % (r.get("xdp_mode"), r.get("bind_mode")) for r in recs
                    if r.get("tool") == "harp-perf" and r.get("xdp_mode")})
    drivers = sorted({str(r.get("driver")) for r in recs if r.get("driver")})
    kernel = cfg.get("kernel") or "?"
    return [
        ("commit", "`%s`%s" % (cfg.get("commit"), " (with changes not committed)"
                               if str(cfg.get("commit", "")).endswith("+") else "")),
        ("date", str(cfg.get("date"))),
        ("machine", "%s: %s CPUs (%s), %s GiB, kernel %s" % (
            cfg.get("host"), cfg.get("cpus"), cfg.get("cpu_model") or "?",
            cfg.get("mem_gib") or "?", kernel)),
        ("links", "%s, %s; harp: %s" % (", ".join(drivers) or "?",
                                        "IPv6" if cfg.get("family") == "ipv6" else "IPv4",
                                        ", ".join(modes) or "?")),
        ("NCCL", str(cfg.get("nccl") or "not measured")),
        ("run", "preset %s, %s s, %d records" % (cfg.get("preset"), cfg.get("elapsed_s"),
                                                 len(recs))),
    ]


def headline(recs, cfg):
    return table(headline_rows(recs, cfg), cfg, with_kernel=False)


def gpu_section(gpu_dir=GPU_DIR):
    """The GPU section: a table per run, setting and collective, from the harp-gpu/1 records in
    gpu_dir (rank 0's bus bandwidth a size and case); "" when there are none."""
    recs = []
    for path in sorted(glob.glob(os.path.join(gpu_dir, "*.jsonl"))):
        recs += [r for r in C.load_jsonl(path) if r.get("schema") == "harp-gpu/1"]
    if not recs:
        return ""
    out = [GPU_BEGIN, "## GPU node\n", para(
        "Real NCCL through PyTorch (`torch.distributed`) on a GPU machine: two ranks on its one "
        "GPU posing as two nodes (`NCCL_HOSTID`), each in a network namespace, joined by a veth "
        "pair (`tests/gpu/nccl_allreduce.sh`, `tests/gpu/check.sh`). harp: the plugin with host "
        "buffers (NCCL stages GPU data; with engine threads and stripes where the cores allow, from "
        "the commit that brought them); harp-serial: the same with `HARP_ENGINE_THREADS=off` (one "
        "connection a comm, the engines on NCCL's proxy thread); harp-cuda: `HARP_CUDA=on`, GPU "
        "buffers copied straight "
        "into harp's frames; socket: NCCL's socket transport at its defaults (socket16: 16 "
        "sockets). Rank 0's bus bandwidth, GB/s; WRONG marks a result that did not verify, and a "
        "case that never finished has no column. Each table is one run on one machine, kept in "
        "`perf/gpu/` as it was measured.\n")]
    groups = {}
    for r in recs:
        groups.setdefault((r["run"], r["mtu"], r["queues"], r["test"]), []).append(r)
    for (run, mtu, queues, test), rows in groups.items():
        first = rows[0]
        cases = []
        for r in rows:
            if r["case"] not in cases:
                cases.append(r["case"])
        cells = {(r["case"], r["size"]): r for r in rows}
        body = []
        for size in sorted({r["size"] for r in rows}):
            line = [C.fmt(size)]
            for c in cases:
                r = cells.get((c, size))
                line.append("-" if not r else "%.3f%s" % (
                    r["busbw_GBps"], "" if r["verified"] else " WRONG"))
            body.append(line)
        out.append("**%s, %s, MTU %d, %d queue%s** (harp %s, NCCL %s; %s)%s\n" % (
            run, test, mtu, queues, "" if queues == 1 else "s", first["commit"], first["nccl"],
            first["machine"], ": " + first["note"] if first.get("note") else ""))
        out.append(C.md_table(["bytes"] + cases, body))
    out.append(GPU_END)
    return "\n".join(out)


def renew_gpu(page):
    """page's GPU section replaced by what perf/gpu/ holds (put before its plots if absent)."""
    with open(page) as f:
        text = f.read()
    section = gpu_section()
    if GPU_BEGIN in text:
        start = text.index(GPU_BEGIN)
        end = text.index(GPU_END, start) + len(GPU_END)
        text = text[:start] + section + text[end:].lstrip("\n")
    elif section:
        text = text.replace("## Plots\n", section + "\n## Plots\n", 1)
    with open(page, "w") as f:
        f.write(text)


def load_run(run_dir):
    """(records, config, notes) of a perf/run directory; dies when it holds no run."""
    recs = C.load_jsonl(os.path.join(run_dir, "results.jsonl"))
    cfg_path = os.path.join(run_dir, "config.json")
    if not recs or not os.path.exists(cfg_path):
        die("%s holds no run (results.jsonl and config.json)" % run_dir)
    with open(cfg_path) as f:
        cfg = json.load(f)
    return recs, cfg, C.load_jsonl(os.path.join(run_dir, "notes.jsonl"))


def same_sitting(cfg, other, what):
    """Dies unless another run (what: its directory) measured the same build and peers on the
    same machine with the same preset as the page's run: the IPv6 section sets them side by
    side."""
    for key in ("commit", "host", "cpu_model", "kernel", "preset", "peer_plugins", "mtus"):
        if other.get(key) != cfg.get(key):
            die("%s is not of this run's sitting: its %s is %s, this run's %s" % (
                what, key, other.get(key), cfg.get(key)))


def spread(vals):
    """A cell of several runs' figures: their median, with their range when more than one."""
    vals = [v for v in vals if v is not None]
    if len(vals) < 2:
        return num(C.median(vals))
    return "%s (%s..%s)" % (num(C.median(vals)), num(min(vals)), num(max(vals)))


def ipv6_section(recs, cfg, more4, runs6):
    """The veth pair's and the hashed hop's cases over IPv4 beside the same cases over IPv6,
    for harp and the first peer. IPv4's figures come from this run and more4, IPv6's from runs6
    (perf/run --family 6), all [(records, config, directory)] of the same sitting; with more
    than one run a side, each figure is the median of the runs'."""
    for _, cfg6, d in runs6:
        if cfg6.get("family") != "ipv6":
            die("%s: its config says family %s, not ipv6" % (d, cfg6.get("family")))
        same_sitting(cfg, cfg6, d)
    for _, cfg4, d in more4:
        if cfg4.get("family", "ipv4") != "ipv4":
            die("%s: its config says family %s, not ipv4" % (d, cfg4.get("family")))
        same_sitting(cfg, cfg4, d)
    titles = [t for _, t in impls(cfg)]
    peer = titles[1] if len(titles) > 1 else None

    def case(r):  # a row's case, without what the kernel's figure came from (none over IPv6)
        return re.sub(r" \(kernel TCP: [^)]*\)", "", r.what)

    def by_case(runs):
        return [{case(r): r for r in veth_rows(rs, c) + hop_rows(rs, c)} for rs, c, _ in runs]

    tables4 = by_case([(recs, cfg, None)] + more4)
    tables6 = by_case(runs6)

    def figures(tables, name, k):
        return [t[name].values[k] for t in tables
                if name in t and len(t[name].values) > k and t[name].values[k] is not None]

    head = ["case", "harp, IPv4", "harp, IPv6", "IPv6 / IPv4"]
    if peer:
        head += ["%s, IPv4" % peer, "%s, IPv6" % peer]
    head.append("better")
    lines = []
    for name, r in tables4[0].items():  # the page's own run, in its order
        h4, h6 = figures(tables4, name, 0), figures(tables6, name, 0)
        if not h4 or not h6:
            continue
        cells = [name, spread(h4), spread(h6), C.fmt(C.ratio(C.median(h6), C.median(h4)))]
        if peer:
            cells += [spread(figures(tables4, name, 1)), spread(figures(tables6, name, 1))]
        lines.append(cells + [r.better])
    if not lines:
        return ""
    n4, n6 = len(tables4), len(tables6)
    if n4 == 1 and n6 == 1:
        how = ("The same cases on links with IPv6 addresses only, measured right after this "
               "run (`%s`)." % runs6[0][1].get("command", "perf/run --family 6"))
    else:
        how = ("The same cases on links with IPv6 addresses only. A figure moves from one run "
               "to the next by more than IPv6 costs, so the two families ran in turn, IPv6 "
               "first, %d and %d times in this sitting (`%s`; the last IPv4 run is the rest of "
               "this page's). Each cell is the median of its family's runs, their range in "
               "brackets; the ratio is of the medians." % (
                   n6, n4, cfg.get("page_command") or cfg.get("command")))
    return "## Over IPv6\n\n%s\n%s" % (para(
        how + " 20 bytes more of IP header in every packet, a UDP checksum in every one. "
        "Kernel TCP and raw AF_XDP are left out here (sockperf 3.7 and `harp-perf raw` send "
        "IPv4 only)."), C.md_table(head, lines))


def write_page(path, run_dir, recs, cfg, notes, runs6=(), more4=()):
    plot_dir = os.path.join(os.path.dirname(path), "plots")
    plots, plot_err = draw(run_dir, plot_dir, recs, cfg)
    titles = [t for _, t in impls(cfg)]
    out = ["# harp's results\n",
           "<!-- Written by perf/results_page.py from perf/run's records; regenerate, do not edit. "
           "-->\n",
           "Regenerate (as root, after a build; every harp transfer is verified byte for "
           "byte):\n\n    %s\n" % (cfg.get("page_command") or
                                 cfg.get("command", "perf/run --results FILE")),
           C.md_table(["run", ""], machine_rows(recs, cfg)),
           para("Each figure is one run's. Beside harp: %s; kernel TCP (iperf3 streams, sockperf "
           "round trips and message rate); and raw AF_XDP (`harp-perf raw`: frames through the "
           "same AF_XDP sockets with no protocol, the link's ceiling for harp). harp and NCCL's "
           "socket transport are both driven through `harp-perf`, as NCCL drives a net plugin; "
           "the kernel peers ran first, with no XDP program attached. On a small machine two "
           "runs of a case differ by up to a third; `perf/collect.py medians` takes the median "
           "of several runs' directories.\n" % (
               "; ".join(titles[1:]) + " (NCCL's own, found by `harp-perf nccl-socket`)"
               if len(titles) > 1 else "no NCCL peer (run with --nccl)")),
           "## Headline\n", headline(recs, cfg)]
    sections = [("veth pair", "Two namespaces joined by veth, one queue each side.",
                 veth_rows(recs, cfg), True),
                ("Hashed hop", "A forwarding namespace between the hosts whose flow hash "
                 "picks each packet's receive queue, as a NIC's RSS does; 4 queues each side, so "
                 "harp probes for paths. raw AF_XDP does not run here (it has no probing).",
                 hop_rows(recs, cfg), True),
                ("VPC-like fabric", "A forwarding namespace that caps each 5-tuple at %s and "
                 "all flows at %s and loses %s packets per million, as a cloud VPC caps "
                 "flows (scaled down to this machine's forwarding rate)." % (
                     cfg.get("fabric_flow_rate"), cfg.get("fabric_rate"),
                     cfg.get("fabric_loss_ppm")) if cfg.get("fabric") else "",
                 fabric_rows(recs, cfg) if cfg.get("fabric") else [], True),
                ("All-reduce", "Ranks on one bridge, one queue each, `harp-perf allreduce` (a "
                 "ring through the plugin); the slowest rank's bus bandwidth.",
                 allreduce_rows(recs, cfg), False),
                ("Scaling with channels", "All-reduce of 2 ranks on a bridge whose ports have "
                 "C queues, as a ring of C channels (`harp-perf allreduce --conns C`: a "
                 "connection each way per channel, the pieces dealt round them, as NCCL's "
                 "channels); harp runs an engine a queue, NCCL's socket transport a socket a "
                 "channel. harp alone also runs one channel cut over the C engines "
                 "(`HARP_STRIPES=C`) and C channels with a thread for each engine "
                 "(`HARP_ENGINE_THREADS=on`, which by default needs 2 x C + 2 CPUs). The "
                 "machine's cores bound what more channels can add.",
                 scale_rows(recs, cfg), False)]
    for title, about, rows, with_kernel in sections:
        if rows:
            out.append("## %s\n\n%s\n%s" % (title, para(about), table(rows, cfg, with_kernel)))
    out.append(floor_section(veth_rows(recs, cfg), cfg))
    if runs6:
        out.append(ipv6_section(recs, cfg, list(more4), list(runs6)))
    missing = [m for m in str(cfg.get("peers_missing") or "").split("|") if m]
    if missing:
        out.append("Peers asked for that could not run:\n\n" +
                   "".join("- %s\n" % m for m in missing))
    failures = [n["failure"] for n in notes if n.get("failure")]
    if failures:
        out.append("Processes that failed in this run (their rows are absent):\n\n" +
                   "".join("- %s\n" % f for f in failures))
    gpu = gpu_section()
    if gpu:
        out.append(gpu)
    out.append("## Plots\n")
    rel = os.path.relpath(plot_dir, os.path.dirname(path))
    for p in plots:
        out.append("![%s](%s/%s)\n" % (p[:-4], rel, p))
    if plot_err:
        out.append("No plots: %s.\n" % plot_err)
    out.append("## Earlier results\n\n" + para(
        "Until commit %s this file was the lab notebook of how harp got here, by issue and "
        "step (profiles, before-and-after tables, what was tried and left): `git show "
        "%s:perf/RESULTS.md`." % (HISTORY_COMMIT, HISTORY_COMMIT)))
    with open(path, "w") as f:
        f.write("\n".join(out))
    return plot_err


def renew_readme(readme, recs, cfg, page):
    with open(readme) as f:
        text = f.read()
    begin, end = text.find(README_BEGIN), text.find(README_END)
    if begin < 0 or end < begin:
        die("%s has no '%s' ... '%s' block for the headline" % (readme, README_BEGIN,
                                                                README_END))
    rel = os.path.relpath(page, os.path.dirname(os.path.abspath(readme)))
    body = para("Measured at commit `%s` on %s (%s CPUs, %s), %s; every table and plot is in "
            "[`%s`](%s):" % (cfg.get("commit"), cfg.get("host"), cfg.get("cpus"),
                             ", ".join(sorted({str(r.get("driver")) for r in recs
                                               if r.get("driver")})),
                             str(cfg.get("date", ""))[:10], rel, rel)) + "\n" + headline(
                                 recs, cfg)
    text = text[:begin + len(README_BEGIN)] + "\n" + body + text[end:]
    with open(readme, "w") as f:
        f.write(text)


def headline_table(text):
    """The table lines of a page's Headline section, or of README's block."""
    if README_BEGIN in text:
        begin, end = text.find(README_BEGIN), text.find(README_END)
        part = text[begin:end] if begin < end else ""
    else:
        part = text.partition("\n## Headline\n")[2].partition("\n## ")[0]
    return [line for line in part.splitlines() if line.startswith("|")]


def check(readme, page):
    """README's headline block is the page's, every plot the page shows is there, and its GPU
    section is perf/gpu/'s."""
    with open(readme) as f:
        mine = headline_table(f.read())
    with open(page) as f:
        text = f.read()
    theirs = headline_table(text)
    bad = []
    if not theirs:
        bad.append("%s has no Headline table" % page)
    elif mine != theirs:
        bad.append("%s's headline block is not %s's Headline table (perf/run --results "
                   "perf/RESULTS.md writes both)" % (readme, page))
    for target in re.findall(r"!\[[^]]*\]\(([^)]+)\)", text):
        if not os.path.exists(os.path.join(os.path.dirname(page), target)):
            bad.append("%s shows %s, which is not there" % (page, target))
    gpu = gpu_section()
    if gpu and gpu not in text:
        bad.append("%s's GPU section is not what perf/gpu/ holds (perf/results_page.py gpu "
                   "%s renews it)" % (page, page))
    for b in bad:
        print("results_page: " + b, file=sys.stderr)
    print("results_page: %s and %s: %s" % (readme, page, "agree" if not bad else
                                           "%d problem(s)" % len(bad)))
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("write", help="the page and its plots from a perf/run directory")
    p.add_argument("dir")
    p.add_argument("file")
    p.add_argument("--readme")
    p.add_argument("--ipv6", action="append", default=[],
                   help="a perf/run --family 6 directory of the same sitting: its cases beside "
                   "this run's, in a section of their own (repeat: each figure the runs' median)")
    p.add_argument("--ipv4", action="append", default=[],
                   help="with --ipv6: another IPv4 run of the same sitting for that section's "
                   "medians (repeatable)")
    p = sub.add_parser("gpu", help="renew the page's GPU section from perf/gpu/")
    p.add_argument("file")
    p = sub.add_parser("check", help="README's headline is the page's; its plots exist")
    p.add_argument("readme")
    p.add_argument("page")
    args = ap.parse_args()
    if args.cmd == "check":
        sys.exit(check(args.readme, args.page))
    if args.cmd == "gpu":
        renew_gpu(args.file)
        return
    recs, cfg, notes = load_run(args.dir)
    if args.ipv4 and not args.ipv6:
        die("--ipv4 serves the IPv6 section; name its --ipv6 run(s) too")
    runs6 = [load_run(d)[:2] + (d,) for d in args.ipv6]
    more4 = [load_run(d)[:2] + (d,) for d in args.ipv4]
    plot_err = write_page(args.file, args.dir, recs, cfg, notes, runs6, more4)
    if args.readme:
        renew_readme(args.readme, recs, cfg, args.file)
    if plot_err:
        print("results_page: no plots: " + plot_err, file=sys.stderr)


if __name__ == "__main__":
    main()
