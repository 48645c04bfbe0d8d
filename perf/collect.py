#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""perf/run's results: the kernel peers' output turned into harp-perf/1 records, and from all the
records a CSV, gnuplot plots, a Markdown summary with the target ratios, and a checker.

    collect.py peer KIND --records FILE [--in F] [--perf-stat F] [--rss F] [--full-log F]
                         [--set KEY=VALUE]...      append one record (KIND: iperf3, sockperf-pp,
                                                   sockperf-tp, sockperf-sr)
    collect.py note --records FILE --set KEY=VALUE...     append one free-form JSON line
    collect.py config --set KEY=VALUE... --list KEY=A,B...   print a JSON object (the run's
                                                  configuration)
    collect.py brief FILE FIRST                   one line per record from line FIRST (1-based)
    collect.py report DIR                         results.csv, plots, summary.md from DIR's
                                                  results.jsonl, config.json, notes.jsonl
    collect.py check DIR                          exit 1 naming each bad record (see check())
    collect.py clean DIR                          remove what an earlier run wrote there

Every ratio in the summary is computed here from the records; nothing is typed in. Standard
library only.
"""
import argparse
import csv
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys

SCHEMA = "harp-perf/1"
TOOLS = ("harp-perf", "iperf3", "sockperf")
TESTS = ("pingpong", "stream", "bidir", "msgrate", "allreduce", "raw")
ROLES = ("server", "client", "rank")
TRANSPORTS = ("harp", "kernel-tcp", "kernel-udp", "raw-afxdp")
GIB = 1 << 30

# The CSV's columns, in perf/README.md's order; keys a record has beyond these go in "extra".
COLUMNS = [
    "schema", "tool", "test", "role", "transport", "label",
    "plugin", "plugin_name", "plugin_version",
    "ifname", "driver", "mtu", "queues", "kernel", "host", "xdp_mode", "bind_mode",
    "size", "window", "conns", "messages", "bytes", "seconds", "gbps", "msgs_per_s",
    "cpu_s", "rss_kb", "verified", "verified_bytes",
    "iters", "p50_us", "p99_us", "p999_us", "mean_us", "min_us", "max_us", "cdf_us",
    "tx_packets_per_rt",
    "nranks", "rank", "count", "time_us", "algbw_GBps", "busbw_GBps",
    "frame_bytes", "frames", "pps", "lost",
]

INT_KEYS = {"plugin_version", "mtu", "queues", "size", "window", "conns", "messages", "bytes",
            "rss_kb", "verified_bytes", "iters", "nranks", "rank", "count", "frame_bytes",
            "frames", "lost"}
NUM_KEYS = {"seconds", "gbps", "msgs_per_s", "cpu_s", "p50_us", "p99_us", "p999_us", "mean_us",
            "min_us", "max_us", "time_us", "algbw_GBps", "busbw_GBps", "pps", "tx_packets_per_rt"}
STR_KEYS = {"schema", "tool", "test", "role", "transport", "label", "plugin", "plugin_name",
            "ifname", "driver", "kernel", "host", "xdp_mode", "bind_mode"}

# Keys a record must carry with a value (not null), by test, for every role and for one role.
REQUIRED_ALL = ("label", "ifname", "mtu", "kernel", "host")
REQUIRED = {
    "stream": {"*": ("size", "conns", "bytes", "seconds", "gbps", "cpu_s")},
    "bidir": {"*": ("size", "conns", "bytes", "seconds", "gbps", "cpu_s")},
    "msgrate": {"*": ("size", "messages", "cpu_s"),
                "client": ("seconds", "msgs_per_s")},
    "pingpong": {"*": ("size", "cpu_s"),
                 "client": ("iters", "p50_us", "p99_us", "p999_us", "mean_us", "min_us",
                            "max_us")},
    "allreduce": {"*": ("nranks", "rank", "size", "count", "iters", "time_us", "algbw_GBps",
                        "busbw_GBps", "cpu_s")},
    "raw": {"*": ("frames", "seconds", "cpu_s"), "server": ("gbps", "pps")},
}


def die(msg):
    print("collect: " + msg, file=sys.stderr)
    sys.exit(1)


def typed(text):
    """A --set value: null, true/false, an integer, a number, or the text itself."""
    if text in ("", "null"):
        return None
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"-?[0-9]+", text):
        return int(text)
    if re.fullmatch(r"-?[0-9]*\.[0-9]+([eE][-+]?[0-9]+)?", text):
        return float(text)
    return text


def parse_sets(pairs):
    out = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            die("--set wants KEY=VALUE, got '%s'" % pair)
        out[key] = typed(value)
    return out


def read_text(path):
    if not path or not os.path.exists(path):
        return None
    with open(path, errors="replace") as f:
        return f.read()


def perf_stat_seconds(path):
    """CPU seconds from `perf stat -x, -e task-clock -o PATH` (all threads and children)."""
    text = read_text(path)
    if text is None:
        return None
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) >= 3 and fields[2].startswith("task-clock"):
            try:
                value = float(fields[0])
            except ValueError:
                return None
            return value / 1e3 if fields[1] == "msec" else value
    return None


def time_rss_kb(path):
    """Peak RSS (KiB) from GNU time -f %M -o PATH (its last line; a failed command adds one)."""
    text = read_text(path)
    if text is None:
        return None
    for line in reversed(text.strip().splitlines()):
        if re.fullmatch(r"[0-9]+", line.strip()):
            return int(line.strip())
    return None


def percentile(sorted_vals, p):
    """Nearest rank: the smallest value with at least p% of the values at or below it."""
    if not sorted_vals:
        return None
    if p <= 0:
        return sorted_vals[0]
    rank = math.ceil(p / 100.0 * len(sorted_vals))
    return sorted_vals[min(max(rank, 1), len(sorted_vals)) - 1]


# ---- the peers -------------------------------------------------------------------------------

def peer_iperf3(args, rec):
    text = read_text(args.input)
    if not text:
        die("iperf3: no output in %s" % args.input)
    try:
        data = json.loads(text)
    except ValueError as e:
        die("iperf3: %s is not JSON: %s" % (args.input, e))
    if data.get("error"):
        die("iperf3 (%s): %s" % (rec.get("role"), data["error"]))
    end = data.get("end", {})
    start = data.get("start", {})
    received = end.get("sum_received") or end.get("sum") or {}
    sent = end.get("sum_sent") or {}
    mine = received if rec.get("role") == "server" else sent
    test_start = start.get("test_start", {})
    rec.setdefault("size", test_start.get("blksize"))
    rec.setdefault("conns", test_start.get("num_streams"))
    rec["messages"] = None
    rec["bytes"] = mine.get("bytes")
    rec["seconds"] = received.get("seconds") or mine.get("seconds")
    bps = received.get("bits_per_second")
    rec["gbps"] = bps / 1e9 if bps is not None else None
    rec["msgs_per_s"] = None
    if "retransmits" in sent:
        rec["retransmits"] = sent["retransmits"]


PCT_RE = re.compile(r"---> percentile +([0-9.]+) = +([0-9.]+)")
OBS_RE = re.compile(r"---> <(MAX|MIN)> observation = +([0-9.]+)")


def sockperf_latency(text, full_log, rec):
    """Round trips: sockperf ran with --full-rtt, so its figures are RTTs, not halves."""
    m = re.search(r"avg-rtt=([0-9.]+)", text)
    if not m:
        die("sockperf pp: no avg-rtt in its output (ran without --full-rtt?)")
    rec["mean_us"] = float(m.group(1))
    pcts = {float(p): float(v) for p, v in PCT_RE.findall(text)}
    obs = dict(OBS_RE.findall(text))
    rec["p50_us"] = pcts.get(50.0)
    rec["p99_us"] = pcts.get(99.0)
    rec["p999_us"] = pcts.get(99.9)
    rec["min_us"] = float(obs["MIN"]) if "MIN" in obs else None
    rec["max_us"] = float(obs["MAX"]) if "MAX" in obs else None
    m = re.search(r"\[Valid Duration\] RunTime=([0-9.]+) sec; SentMessages=([0-9]+); "
                  r"ReceivedMessages=([0-9]+)", text)
    if m:
        rec["seconds"] = float(m.group(1))
        rec["iters"] = int(m.group(3))
        rec["messages"] = int(m.group(3))
    rtts = []
    for line in (read_text(full_log) or "").splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 4 and re.fullmatch(r"[0-9]+", fields[0]):
            try:
                rtts.append(float(fields[3]))
            except ValueError:
                pass
    if rtts:
        rtts.sort()
        rec["cdf_us"] = [percentile(rtts, p) for p in range(101)]
    else:
        rec["cdf_us"] = None


def peer_sockperf(kind, args, rec):
    text = read_text(args.input)
    if text is None:
        die("%s: no output in %s" % (kind, args.input))
    if kind == "sockperf-pp":
        sockperf_latency(text, args.full_log, rec)
    elif kind == "sockperf-tp":
        m = re.search(r"Total of ([0-9]+) messages sent in ([0-9.]+) sec", text)
        r = re.search(r"Message Rate is ([0-9]+) \[msg/sec\]", text)
        if not m or not r:
            die("sockperf tp: no message rate in its output")
        rec["messages"] = int(m.group(1))
        rec["seconds"] = float(m.group(2))
        rec["msgs_per_s"] = float(r.group(1))
        size = rec.get("size") or 0
        rec["bytes"] = rec["messages"] * size
        rec["gbps"] = rec["msgs_per_s"] * size * 8 / 1e9
    else:  # the server of either: what it received
        m = re.search(r"Total ([0-9]+) messages received and handled", text)
        rec["messages"] = int(m.group(1)) if m else None
        if rec.get("size") is not None and rec["messages"] is not None:
            rec["bytes"] = rec["messages"] * rec["size"]


def cmd_peer(args):
    rec = {"schema": SCHEMA}
    sets = parse_sets(args.set)
    for key in ("tool", "test", "role", "transport"):
        if key not in sets:
            die("peer: --set %s=... is required" % key)
    rec.update(sets)
    if args.kind == "iperf3":
        peer_iperf3(args, rec)
    elif args.kind in ("sockperf-pp", "sockperf-tp", "sockperf-sr"):
        peer_sockperf(args.kind, args, rec)
    else:
        die("peer: unknown kind '%s'" % args.kind)
    rec["cpu_s"] = perf_stat_seconds(args.perf_stat)
    rec["rss_kb"] = time_rss_kb(args.rss)
    # The kernel's stacks check nothing end to end.
    rec["verified"] = None
    rec["verified_bytes"] = None
    with open(args.records, "a") as f:
        f.write(json.dumps(rec, separators=(",", ":")) + "\n")


def cmd_note(args):
    with open(args.records, "a") as f:
        f.write(json.dumps(parse_sets(args.set), separators=(",", ":")) + "\n")


def cmd_config(args):
    cfg = parse_sets(args.set)
    for pair in args.list or ():
        key, _, value = pair.partition("=")
        cfg[key] = [typed(v) for v in value.split(",") if v]
    print(json.dumps(cfg, indent=1))


# ---- reading the results ---------------------------------------------------------------------

def load_records(path):
    """[(line number, record or None, error)] for each non-empty line."""
    out = []
    with open(path, errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as e:
                out.append((n, None, "not JSON (%s)" % e))
                continue
            if not isinstance(rec, dict):
                out.append((n, None, "not a JSON object"))
                continue
            out.append((n, rec, None))
    return out


def load_jsonl(path):
    if not os.path.exists(path):
        return []
    return [rec for _, rec, err in load_records(path) if not err]


def human_size(n):
    if n is None:
        return "-"
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d %s" % (n >> shift, unit)
    return "%d B" % n


def fmt(v):
    """A figure with three significant digits or so; - for none."""
    if v is None:
        return "-"
    if isinstance(v, bool) or not isinstance(v, float):
        return str(v)
    if not math.isfinite(v):
        return "-"
    a = abs(v)
    if a >= 1000:
        return "%.0f" % v
    if a >= 100:
        return "%.1f" % v
    if a >= 1 or a == 0:
        return "%.2f" % v
    return "%.3g" % v


def pick(records, **want):
    """Records whose keys equal every value in want (None matches a missing key or null)."""
    out = []
    for r in records:
        if all(r.get(k) == v for k, v in want.items()):
            out.append(r)
    return out


def one(records, **want):
    """The last record matching want, or None (a re-run case overrides an earlier one)."""
    found = pick(records, **want)
    return found[-1] if found else None


def harp_stream_rate(records, **want):
    """Goodput of a harp stream: the receiver's (the server's) record."""
    r = one(records, tool="harp-perf", test="stream", role="server", **want)
    return r.get("gbps") if r else None


def cpu_per_gib(records, tool, **want):
    """(CPU seconds of both ends per GiB delivered, server record, client record)."""
    srv = one(records, tool=tool, test="stream", role="server", **want)
    cli = one(records, tool=tool, test="stream", role="client", **want)
    if not srv or not cli:
        return None, srv, cli
    if srv.get("cpu_s") is None or cli.get("cpu_s") is None or not srv.get("bytes"):
        return None, srv, cli
    return (srv["cpu_s"] + cli["cpu_s"]) / (srv["bytes"] / GIB), srv, cli


def parse_rate(text):
    """A tc rate ("250mbit", "1gbit", "1.5Gbit", "800kbit", "1000000bit") in Gbit/s."""
    if text is None:
        return None
    m = re.fullmatch(r"([0-9.]+)\s*([kmgt]?)(bit|bps)?", str(text).strip().lower())
    if not m:
        return None
    value = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
    if m.group(3) == "bps":  # tc's bps is bytes per second
        value *= 8
    return value / 1e9


# ---- targets ---------------------------------------------------------------------------------

class Target:
    def __init__(self, num, what, harp, peer, ratio, op, goal, unit, note=""):
        self.num, self.what, self.harp, self.peer = num, what, harp, peer
        self.ratio, self.op, self.goal, self.unit, self.note = ratio, op, goal, unit, note

    def verdict(self):
        if self.op is None:
            return "reported"
        if self.ratio is None:
            return "not measured"
        if self.op == ">=":
            if self.ratio >= self.goal:
                return "met (%+.0f%%)" % ((self.ratio / self.goal - 1) * 100)
            return "**missed** by %.0f%%" % ((1 - self.ratio / self.goal) * 100)
        if self.ratio <= self.goal:
            return "met (%.0f%% under)" % ((1 - self.ratio / self.goal) * 100)
        return "**missed**: %.2fx the limit" % (self.ratio / self.goal)


def median(vals):
    """The median of the values that are not None; None when there are none."""
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def targets(recs, cfg):
    """The issue's targets, each from the cases it needs (all of them when cfg names none)."""
    ran = set(cfg.get("cases") or ["bandwidth", "raw", "latency", "msgrate", "growth", "rss",
                                  "fabric"])
    return [t for t in all_targets(recs, cfg) if ran & set(TARGET_CASES[t.num[0]])]


# The cases each target's figures come from (by the target's number).
TARGET_CASES = {"1": ["bandwidth"], "2": ["latency"], "3": ["msgrate"],
                "4": ["bandwidth"], "5": ["fabric"], "6": ["growth", "rss"],
                "7": ["bandwidth", "latency", "msgrate", "fabric"]}


def all_targets(recs, cfg):
    out = []
    size = cfg.get("target_stream_size", 524288)
    for mtu in cfg.get("mtus", [1500, 3500]):
        harp = harp_stream_rate(recs, label="bandwidth", mtu=mtu, size=size, conns=1)
        raw = one(recs, tool="harp-perf", test="raw", role="server", mtu=mtu, mode=None)
        raw_gbps = None
        if raw:
            raw_gbps = raw.get("body_gbps", raw.get("gbps"))
        out.append(Target("1", "stream goodput / raw AF_XDP, MTU %d, %s messages" % (
            mtu, human_size(size)), harp, raw_gbps, ratio(harp, raw_gbps), ">=", 0.9, "Gbit/s",
            "raw: the payload harp could carry in raw's frames (body_gbps)"))
    mtu0 = cfg.get("mtus", [1500])[0]
    hp = one(recs, tool="harp-perf", test="pingpong", role="client", size=8, mtu=mtu0)
    sp = one(recs, tool="sockperf", test="pingpong", role="client", transport="kernel-tcp",
             mtu=mtu0)
    h50 = hp.get("p50_us") if hp else None
    s50 = sp.get("p50_us") if sp else None
    out.append(Target("2", "8 B ping-pong p50 RTT / sockperf TCP p50 RTT (%s), MTU %d" % (
        human_size(sp.get("size")) if sp else "-", mtu0), h50, s50, ratio(h50, s50), "<=", 0.5,
        "us"))
    hm = one(recs, tool="harp-perf", test="msgrate", role="server", size=64, mtu=mtu0)
    sm = one(recs, tool="sockperf", test="msgrate", role="client", mtu=mtu0)
    hr = hm.get("msgs_per_s") if hm else None
    sr = sm.get("msgs_per_s") if sm else None
    out.append(Target("3", "64 B messages/s / kernel TCP (sockperf tp, TCP_NODELAY), MTU %d" %
                      mtu0, hr, sr, ratio(hr, sr), ">=", 2.0, "msg/s"))
    for mtu in cfg.get("mtus", [1500, 3500]):
        hc, _, _ = cpu_per_gib(recs, "harp-perf", label="bandwidth", mtu=mtu, size=size, conns=1)
        ic, _, _ = cpu_per_gib(recs, "iperf3", label="bandwidth", mtu=mtu, size=size, conns=1)
        out.append(Target("4", "CPU-seconds per GiB, both ends / iperf3's, MTU %d, %s" % (
            mtu, human_size(size)), hc, ic, ratio(hc, ic), "<=", 1.0, "CPU-s/GiB"))
    if cfg.get("fabric"):
        flows = cfg.get("fabric_flows")
        agg = parse_rate(cfg.get("fabric_rate"))
        hf = harp_stream_rate(recs, label="fabric", conns=flows)
        fi = one(recs, tool="iperf3", test="stream", role="server", label="fabric", conns=flows)
        fg = fi.get("gbps") if fi else None
        out.append(Target("5a", "fabric (%s per flow, %s in all, %s ppm lost): goodput / "
                          "aggregate cap, %s connections" % (
                              cfg.get("fabric_flow_rate"), cfg.get("fabric_rate"),
                              cfg.get("fabric_loss_ppm"), flows),
                          hf, agg, ratio(hf, agg), ">=", 0.9, "Gbit/s"))
        out.append(Target("5b", "fabric: goodput / iperf3 -P %s" % flows, hf, fg, ratio(hf, fg),
                          ">=", 1.0, "Gbit/s"))
    grow = sorted(pick(recs, tool="harp-perf", test="stream", role="server", label="growth",
                       queues=1), key=lambda r: r.get("conns") or 0)
    if grow:
        lo, hi = grow[0], grow[-1]
        out.append(Target("6a", "growth: goodput at %s connections / at %s" % (
            hi.get("conns"), lo.get("conns")), hi.get("gbps"), lo.get("gbps"),
            ratio(hi.get("gbps"), lo.get("gbps")), None, None, "Gbit/s"))
        per_conn = rss_per_conn(grow)
        if per_conn is not None:
            own = (hi.get("window") or 0) * (hi.get("size") or 0) / 1024
            out.append(Target("6b", "growth: resident memory per connection (server, %s to %s "
                              "connections); beside: harp-perf's own receive buffers per "
                              "connection (window x size)" % (lo.get("conns"), hi.get("conns")),
                              per_conn, own or None, None, None, None, "KiB"))
    q1 = one(recs, tool="harp-perf", test="stream", role="server", label="growth-queues",
             queues=1)
    q2 = one(recs, tool="harp-perf", test="stream", role="server", label="growth-queues",
             queues=2)
    if q1 and q2:
        out.append(Target("6c", "growth: goodput on 2 queues / on 1 (%s connections)" %
                          q2.get("conns"), q2.get("gbps"), q1.get("gbps"),
                          ratio(q2.get("gbps"), q1.get("gbps")), None, None, "Gbit/s"))
    rss = {q: one(recs, tool="harp-perf", test="stream", role="server", label="rss-q%d" % q)
           for q in (1, 2, 4)}
    for q in (2, 4):
        if rss.get(1) and rss.get(q):
            out.append(Target("6d", "rss (a hop whose flow hash picks the queue): goodput on %d "
                              "queues / on 1 (%s connections)" % (q, rss[q].get("conns")),
                              rss[q].get("gbps"), rss[1].get("gbps"),
                              ratio(rss[q].get("gbps"), rss[1].get("gbps")), None, None,
                              "Gbit/s"))
    two = [one(recs, tool="harp-perf", test="stream", role="server", label="rss-2p-r%d" % r)
           for r in (0, 1)]
    if all(two) and all(t.get("gbps") is not None for t in two):
        both = two[0]["gbps"] + two[1]["gbps"]
        base = rss[4].get("gbps") if rss.get(4) else None
        out.append(Target("6e", "rss: 2 processes at once on one NIC, 2 queues each (sum of "
                          "their goodputs) / 1 process on 4 queues", both, base,
                          ratio(both, base), None, None, "Gbit/s"))
    return out + peer_targets(recs, cfg)


def peer_targets(recs, cfg):
    """harp beside each --peer-plugin (labels peer<k>-...), case by case; the fabric's goodput
    and tail are held to the issue's goals, the rest reported."""
    specs = [s for s in str(cfg.get("peer_plugins") or "").split("|") if s]
    out = []
    size = cfg.get("target_stream_size", 524288)
    mtu0 = cfg.get("mtus", [1500])[0]
    for k, spec in enumerate(specs, 1):
        peer = "peer%d" % k
        name = "%s (%s)" % (peer, os.path.basename(spec))
        rows = []
        for mtu in cfg.get("mtus", [1500, 3500]):
            h = harp_stream_rate(recs, label="bandwidth", mtu=mtu, size=size, conns=1)
            p = harp_stream_rate(recs, label=peer + "-bandwidth", mtu=mtu, size=size, conns=1)
            rows.append(("stream goodput, 1 connection, %s messages, MTU %d" % (
                human_size(size), mtu), h, p, None, None, "Gbit/s"))
        flows = cfg.get("multi_conns")
        h = harp_stream_rate(recs, label="multi", mtu=mtu0, conns=flows)
        p = harp_stream_rate(recs, label=peer + "-multi", mtu=mtu0, conns=flows)
        rows.append(("stream goodput, %s connections, MTU %d" % (flows, mtu0), h, p, None, None,
                     "Gbit/s"))
        hp = one(recs, tool="harp-perf", test="pingpong", role="client", size=8, mtu=mtu0,
                 label="latency")
        pp = one(recs, tool="harp-perf", test="pingpong", role="client", size=8, mtu=mtu0,
                 label=peer + "-latency")
        for q in ("p50_us", "p99_us"):
            rows.append(("8 B ping-pong %s, MTU %d" % (q[:3], mtu0), hp.get(q) if hp else None,
                         pp.get(q) if pp else None, None, None, "us"))
        hm = one(recs, tool="harp-perf", test="msgrate", role="server", size=64, mtu=mtu0,
                 label="msgrate")
        pm = one(recs, tool="harp-perf", test="msgrate", role="server", size=64, mtu=mtu0,
                 label=peer + "-msgrate")
        rows.append(("64 B messages/s, MTU %d" % mtu0, hm.get("msgs_per_s") if hm else None,
                     pm.get("msgs_per_s") if pm else None, None, None, "msg/s"))
        if cfg.get("fabric"):
            flows = cfg.get("fabric_flows")
            h = harp_stream_rate(recs, label="fabric", conns=flows)
            p = harp_stream_rate(recs, label=peer + "-fabric", conns=flows)
            rows.append(("fabric goodput, %s connections" % flows, h, p, ">=", 1.0, "Gbit/s"))
            hp = one(recs, tool="harp-perf", test="pingpong", role="client",
                     label="fabric-latency")
            pp = one(recs, tool="harp-perf", test="pingpong", role="client",
                     label=peer + "-fabric-latency")
            rows.append(("fabric 512 KiB ping-pong p99", hp.get("p99_us") if hp else None,
                         pp.get("p99_us") if pp else None, "<=", 0.25, "us"))
        for i, (what, h, p, op, goal, unit) in enumerate(rows):
            out.append(Target("7%s%d" % (chr(ord("a") + k - 1), i + 1),
                              "%s: harp / %s" % (what, name), h, p, ratio(h, p), op, goal, unit))
    return out


def rss_per_conn(grow):
    lo, hi = grow[0], grow[-1]
    if lo is hi or lo.get("rss_kb") is None or hi.get("rss_kb") is None:
        return None
    return (hi["rss_kb"] - lo["rss_kb"]) / (hi["conns"] - lo["conns"])


# ---- plots -----------------------------------------------------------------------------------

def datablock(name, rows):
    return "$%s << EOD\n%s\nEOD\n" % (name, "\n".join(" ".join(str(c) for c in row)
                                                       for row in rows))


def plot_bandwidth(recs, cfg):
    blocks, series = [], []
    for mtu in cfg.get("mtus", []):
        for tool, name in (("harp-perf", "harp"), ("iperf3", "iperf3 TCP")):
            rows = sorted((r["size"], r["gbps"]) for r in pick(
                recs, tool=tool, test="stream", role="server", label="bandwidth", mtu=mtu,
                conns=1) if r.get("gbps") is not None and r.get("size"))
            if rows:
                block = "bw_%s_%d" % (tool.replace("-", "_"), mtu)
                blocks.append(datablock(block, rows))
                series.append("$%s using 1:2 with linespoints title '%s, MTU %d'" % (
                    block, name, mtu))
        raw = one(recs, tool="harp-perf", test="raw", role="server", mtu=mtu, mode=None)
        if raw and raw.get("body_gbps", raw.get("gbps")) is not None:
            series.append("%s with lines dashtype 2 title 'raw AF_XDP, MTU %d'" % (
                raw.get("body_gbps", raw.get("gbps")), mtu))
    if not blocks:
        return None
    sizes = sorted({r["size"] for r in pick(recs, test="stream", label="bandwidth")
                    if r.get("size")})
    tics = ", ".join('"%s" %d' % (human_size(n).replace(" ", ""), n) for n in sizes)
    return "".join(blocks) + """set output 'bandwidth.png'
set title 'One-way goodput vs message size (1 connection)'
set logscale x 2
set xrange [%d:%d]
set xtics (%s)
set xlabel 'message size'
set ylabel 'Gbit/s'
set yrange [0:*]
set key outside right
plot """ % (sizes[0] // 2, sizes[-1] * 2, tics) + ", \\\n     ".join(series) + "\n"


def plot_latency(recs, cfg):
    mtu0 = cfg.get("mtus", [1500])[0]
    blocks, series = [], []
    cands = [("harp 8 B", one(recs, tool="harp-perf", test="pingpong", role="client", size=8,
                              mtu=mtu0))]
    for transport, name in (("kernel-tcp", "sockperf TCP"), ("kernel-udp", "sockperf UDP")):
        r = one(recs, tool="sockperf", test="pingpong", role="client", transport=transport,
                mtu=mtu0)
        cands.append(("%s %s" % (name, human_size(r.get("size")) if r else ""), r))
    for i, (name, r) in enumerate(cands):
        if not r:
            continue
        if r.get("cdf_us"):
            rows = [(v, p) for p, v in enumerate(r["cdf_us"]) if v is not None]
        else:
            rows = [(r[k], p) for k, p in (("min_us", 0), ("p50_us", 50), ("p99_us", 99),
                                           ("p999_us", 99.9), ("max_us", 100))
                    if r.get(k) is not None]
        if rows:
            blocks.append(datablock("lat%d" % i, rows))
            series.append("$lat%d using 1:2 with lines linewidth 2 title '%s'" % (i, name))
    if not blocks:
        return None
    return "".join(blocks) + """set output 'latency_cdf.png'
set title 'Ping-pong round trip, MTU %d'
set logscale x 10
set xlabel 'round trip (us)'
set ylabel 'percentile'
set yrange [0:100]
set key bottom right
plot %s
unset logscale x
set yrange [*:*]
""" % (mtu0, ", \\\n     ".join(series))


def plot_busbw(recs, cfg):
    ar = pick(recs, tool="harp-perf", test="allreduce", role="rank")
    sizes = sorted({r["size"] for r in ar if r.get("size")})
    blocks, series = [], []
    for size in sizes:
        by_n = {}
        for r in pick(ar, size=size):
            if r.get("busbw_GBps") is not None:
                by_n.setdefault(r["nranks"], []).append(r["busbw_GBps"])
        rows = sorted((n, min(v)) for n, v in by_n.items())
        if rows:
            name = "ar_%d" % size
            blocks.append(datablock(name, rows))
            series.append("$%s using 1:2 with linespoints title '%s'" % (name, human_size(size)))
    if not blocks:
        return None
    return "".join(blocks) + """set output 'busbw_ranks.png'
set title 'harp allreduce bus bandwidth vs ranks (slowest rank)'
set xlabel 'ranks'
set ylabel 'busbw (GB/s)'
set yrange [0:*]
set xtics 1
set key top right
plot %s
set xtics autofreq
""" % ", \\\n     ".join(series)


def plot_cpu(recs, cfg):
    size = cfg.get("target_stream_size", 524288)
    rows = []
    for mtu in cfg.get("mtus", []):
        h, _, _ = cpu_per_gib(recs, "harp-perf", label="bandwidth", mtu=mtu, size=size, conns=1)
        i, _, _ = cpu_per_gib(recs, "iperf3", label="bandwidth", mtu=mtu, size=size, conns=1)
        if h is not None or i is not None:
            rows.append(('"MTU %d"' % mtu, h if h is not None else "NaN",
                         i if i is not None else "NaN"))
    flows = cfg.get("multi_conns")
    h, _, _ = cpu_per_gib(recs, "harp-perf", label="multi", conns=flows)
    i, _, _ = cpu_per_gib(recs, "iperf3", label="multi", conns=flows)
    if h is not None or i is not None:
        rows.append(('"MTU %s, %s conns"' % (cfg.get("mtus", ["?"])[0], flows),
                     h if h is not None else "NaN", i if i is not None else "NaN"))
    if not rows:
        return None
    return datablock("cpu", rows) + """set output 'cpu_per_gib.png'
set title 'CPU-seconds per GiB delivered, both ends (%s messages)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel 'CPU-s / GiB'
set yrange [0:*]
set key top right
plot $cpu using 2:xtic(1) title 'harp', '' using 3 title 'iperf3 TCP'
set style data points
""" % human_size(size)


def plot_growth(recs, cfg):
    grow = sorted(pick(recs, tool="harp-perf", test="stream", role="server", label="growth",
                       queues=1), key=lambda r: r.get("conns") or 0)
    rows = [(r["conns"], r.get("gbps") if r.get("gbps") is not None else "NaN",
             r["rss_kb"] / 1024 if r.get("rss_kb") is not None else "NaN") for r in grow]
    if len(rows) < 2:
        return None
    return datablock("grow", rows) + """set output 'growth.png'
set title 'harp stream: goodput and resident memory (server) vs connections'
set logscale x 2
set xlabel 'connections'
set ylabel 'Gbit/s'
set y2label 'RSS (MiB)'
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:*]
plot $grow using 1:2 with linespoints title 'goodput', \\
     $grow using 1:3 axes x1y2 with linespoints title 'RSS'
unset logscale x
unset y2tics
set ytics mirror
"""


def write_plots(out_dir, recs, cfg):
    parts = [p for p in (plot_bandwidth(recs, cfg), plot_latency(recs, cfg),
                         plot_busbw(recs, cfg), plot_cpu(recs, cfg), plot_growth(recs, cfg))
             if p]
    if not parts:
        return [], None
    gp = os.path.join(out_dir, "plots.gp")
    with open(gp, "w") as f:
        f.write("# Written by perf/collect.py from results.jsonl; `gnuplot plots.gp` redraws.\n")
        f.write("set terminal pngcairo size 960,600 noenhanced font ',10'\n")
        for part in parts:
            f.write("\nreset\nset grid\n" + part)
    if not shutil.which("gnuplot"):
        return [], "gnuplot is not installed: plots.gp written, no PNGs"
    try:
        proc = subprocess.run(["gnuplot", "plots.gp"], cwd=out_dir, capture_output=True,
                              text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return [], "gnuplot did not finish in 60 s"
    if proc.returncode != 0:
        return [], "gnuplot failed: " + proc.stderr.strip()[-500:]
    pngs = re.findall(r"set output '([^']+)'", "\n".join(parts))
    return [p for p in pngs if os.path.exists(os.path.join(out_dir, p))], None


# ---- CSV -------------------------------------------------------------------------------------

def csv_cell(v):
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return ";".join(str(csv_cell(x)) for x in v)
    if isinstance(v, dict):
        return json.dumps(v, separators=(",", ":"))
    return v


def write_csv(path, recs):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS + ["extra"])
        for r in recs:
            extra = {k: v for k, v in r.items() if k not in COLUMNS}
            w.writerow([csv_cell(r.get(k)) for k in COLUMNS] +
                       [json.dumps(extra, separators=(",", ":"), sort_keys=True)
                        if extra else ""])


# ---- summary ---------------------------------------------------------------------------------

def md_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        lines.append("| " + " | ".join(fmt(c) if not isinstance(c, str) else c
                                       for c in row) + " |")
    return "\n".join(lines) + "\n"


def section_bandwidth(recs, cfg):
    rows = []
    for mtu in cfg.get("mtus", []):
        sizes = sorted({r["size"] for r in pick(recs, test="stream", label="bandwidth", mtu=mtu,
                                                conns=1) if r.get("size")})
        for size in sizes:
            h = harp_stream_rate(recs, label="bandwidth", mtu=mtu, size=size, conns=1)
            i = one(recs, tool="iperf3", test="stream", role="server", label="bandwidth",
                    mtu=mtu, size=size, conns=1)
            ig = i.get("gbps") if i else None
            rows.append((str(mtu), human_size(size), h, ig, ratio(h, ig)))
    conns = cfg.get("multi_conns")
    for mtu in cfg.get("mtus", []):
        h = harp_stream_rate(recs, label="multi", mtu=mtu, conns=conns)
        i = one(recs, tool="iperf3", test="stream", role="server", label="multi", mtu=mtu,
                conns=conns)
        ig = i.get("gbps") if i else None
        if h is not None or ig is not None:
            rows.append(("%d, %s conns" % (mtu, conns), human_size(
                (i or one(recs, test="stream", label="multi", mtu=mtu) or {}).get("size")),
                h, ig, ratio(h, ig)))
    if not rows:
        return ""
    text = "## Bandwidth (Gbit/s, receiver's goodput)\n\n" + md_table(
        ["MTU", "message", "harp", "iperf3 TCP", "harp / iperf3"], rows)
    raws = pick(recs, tool="harp-perf", test="raw", role="server", mode=None)
    if raws:
        text += "\nraw AF_XDP (no protocol), the link's ceiling for harp:\n\n" + md_table(
            ["MTU", "frame bytes", "Mpps", "Gbit/s (UDP payload)", "Gbit/s (harp body)",
             "lost frames"],
            [(str(r.get("mtu")), r.get("frame_bytes"),
              r["pps"] / 1e6 if r.get("pps") is not None else None, r.get("gbps"),
              r.get("body_gbps"), r.get("lost")) for r in raws])
    return text + "\n"


def section_latency(recs, cfg):
    rows = []
    latency = pick(recs, test="pingpong", role="client")
    latency += pick(recs, test="raw", role="client", mode="pingpong")
    for r in latency:
        rows.append(("%s (%s)" % (r["tool"], r["transport"]), str(r.get("mtu")),
                     human_size(r.get("size")), r.get("iters"), r.get("p50_us"),
                     r.get("p99_us"), r.get("p999_us"), r.get("mean_us"), r.get("min_us")))
    if not rows:
        return ""
    return ("## Ping-pong round trips (us)\n\nsockperf's smallest message is 14 bytes; it ran "
            "with --full-rtt, so its figures are whole round trips as harp's are. raw-afxdp is "
            "the floor: one frame each way through the same AF_XDP sockets, no protocol.\n\n" +
            md_table(["tool", "MTU", "message", "samples", "p50", "p99", "p99.9", "mean",
                      "min"], rows) + "\n")


def section_msgrate(recs, cfg):
    rows = []
    for r in pick(recs, test="msgrate"):
        if r["tool"] == "sockperf" and r["role"] != "client":
            continue
        if r["tool"] == "harp-perf" and r["role"] != "server":
            continue
        rows.append(("%s (%s)" % (r["tool"], r["transport"]), str(r.get("mtu")),
                     human_size(r.get("size")), r.get("window"), r.get("messages"),
                     r.get("msgs_per_s")))
    if not rows:
        return ""
    return ("## Message rate\n\nharp: the receiver's count; sockperf tp: the sender's (TCP "
            "delivers all of it).\n\n" + md_table(["tool", "MTU", "message", "window",
                                                   "messages", "msg/s"], rows) + "\n")


def section_cpu(recs, cfg):
    rows = []
    keys = [("bandwidth", dict(label="bandwidth", mtu=m, size=cfg.get(
        "target_stream_size", 524288), conns=1)) for m in cfg.get("mtus", [])]
    keys.append(("multi", dict(label="multi", conns=cfg.get("multi_conns"))))
    for name, want in keys:
        for tool in ("harp-perf", "iperf3"):
            per, srv, cli = cpu_per_gib(recs, tool, **want)
            if not srv:
                continue
            rows.append((tool, str(srv.get("mtu")), human_size(srv.get("size")),
                         srv.get("conns"), cli.get("cpu_s") if cli else None, srv.get("cpu_s"),
                         srv["bytes"] / GIB if srv.get("bytes") else None, per))
    if not rows:
        return ""
    return ("## CPU per GiB\n\nharp-perf: user + system seconds of each process during the "
            "measured phase; iperf3: `perf stat -e task-clock` over each process's life.\n\n" +
            md_table(["tool", "MTU", "message", "conns", "client CPU-s", "server CPU-s",
                      "GiB", "CPU-s/GiB"], rows) + "\n")


def section_allreduce(recs, cfg):
    ar = pick(recs, tool="harp-perf", test="allreduce", role="rank", label="allreduce")
    groups = {}
    for r in ar:
        groups.setdefault((r.get("nranks"), r.get("size")), []).append(r)
    rows = []
    for (n, size), rs in sorted(groups.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1] or 0)):
        slow = min(rs, key=lambda r: r.get("busbw_GBps") or 0)
        rows.append((n, human_size(size), len(rs), slow.get("time_us"), slow.get("algbw_GBps"),
                     slow.get("busbw_GBps")))
    if not rows:
        return ""
    return ("## Allreduce (harp, ranks on one bridge; the slowest rank's figures)\n\n" +
            md_table(["ranks", "size", "records", "time (us)", "algbw (GB/s)", "busbw (GB/s)"],
                     rows) + "\n")


def section_growth(recs, cfg):
    rows = []
    for label in ("growth", "growth-queues"):
        for r in sorted(pick(recs, tool="harp-perf", test="stream", role="server", label=label),
                        key=lambda r: (r.get("queues") or 0, r.get("conns") or 0)):
            cli = one(recs, tool="harp-perf", test="stream", role="client", label=label,
                      queues=r.get("queues"), conns=r.get("conns"))
            rows.append((label, str(r.get("queues")), r.get("conns"), human_size(r.get("size")),
                         r.get("gbps"), r.get("rss_kb"), cli.get("rss_kb") if cli else None))
    if not rows:
        return ""
    return ("## Growth (harp stream)\n\nRSS is each process's peak; harp-perf's own buffers "
            "take window x size per connection and direction.\n\n" + md_table(
                ["case", "queues", "conns", "message", "Gbit/s", "server RSS (KiB)",
                 "client RSS (KiB)"], rows) + "\n")


def section_fabric(recs, cfg, notes):
    if not cfg.get("fabric"):
        return ""
    flows = cfg.get("fabric_flows")
    flow = parse_rate(cfg.get("fabric_flow_rate"))
    text = ("## VPC-like fabric\n\nA middle namespace forwards between the hosts. Each 5-tuple "
            "is hashed (nft jhash) into one of %s htb classes capped at %s; all flows share %s; "
            "%s per million forwarded TCP and UDP packets are dropped at random (nft numgen). "
            "Scaled down: clouds cap a flow near 5 Gbit/s (AWS), but this machine forwards only "
            "a few Gbit/s packet by packet, so a flow's cap here is %s of that (set by "
            "PERF_FABRIC_FLOW_RATE, PERF_FABRIC_RATE, PERF_FABRIC_FLOWS, PERF_FABRIC_LOSS_PPM). "
            "TSO is off on the hosts' ends (GSO segments before the wire, as a NIC's TSO would) "
            "and GRO off on the middle's, so caps and drops act on single packets.\n\n" % (
                cfg.get("fabric_buckets"), cfg.get("fabric_flow_rate"), cfg.get("fabric_rate"),
                cfg.get("fabric_loss_ppm"),
                "1/%.0f" % (5.0 / flow) if flow else "a fraction"))
    rows = []
    agg = parse_rate(cfg.get("fabric_rate"))
    for tool in ("harp-perf", "iperf3"):
        r = one(recs, tool=tool, test="stream", role="server", label="fabric", conns=flows)
        sender = one(recs, tool=tool, test="stream", role="client", label="fabric", conns=flows)
        # harp's stream has its own counts (notes of runs before it: the whole case's)
        note = next((n for n in reversed(notes) if n.get("case") == "fabric" and
                     n.get("tool") in (tool, tool + "-stream")), {})
        sent = max([v for k, v in note.items() if k.startswith("fabric_sent_bytes_") and
                    isinstance(v, int)] or [0])
        # how full the aggregate cap ran (Ethernet frames, as htb counts them): only where
        # the counts hold this stream alone (no --peer-plugin streams beside it)
        cap_used = (sent * 8 / (r["seconds"] * agg * 1e9)
                    if sent and agg and r and r.get("seconds") and
                    (tool == "iperf3" or not cfg.get("peer_plugins")) else None)
        flows_seen = max([v for k, v in note.items() if k.startswith("fabric_flows_") and
                          isinstance(v, int)] or [0]) if note else None
        capdrops = sum(v for k, v in note.items() if k.startswith("fabric_capdrops_") and
                       isinstance(v, int)) if note else None
        rows.append((tool, flows, r.get("gbps") if r else None,
                     "%.3f" % cap_used if cap_used is not None else None, flows_seen,
                     note.get("fabric_forwarded"), note.get("fabric_lost"), capdrops,
                     sender.get("retransmits") if sender else None))
    return text + md_table(["tool", "conns", "Gbit/s", "aggregate cap used (frames)",
                            "classes used (>1 MB)", "forwarded pkts", "lost pkts", "cap drops",
                            "TCP retransmits"], rows) + "\n"


def write_summary(path, recs, cfg, notes, plots, plot_err, out_dir):
    ts = targets(recs, cfg)
    lines = ["# harp beside the kernel stack: %s\n" % cfg.get("date", "?")]
    lines.append("Command: `%s`\n" % cfg.get("command", "?"))
    def show(v):
        if isinstance(v, list):
            return ", ".join(str(x) for x in v)
        return "(harp-perf's default)" if v is None else str(v)
    run_rows = [(k, show(cfg.get(k))) for k in (
        "preset", "host", "kernel", "cpus", "harp_perf", "plugin", "mtus", "cases",
        "elapsed_s", "peer_cpu") if k in cfg]
    modes = sorted({"%s/%s" % (r.get("xdp_mode"), r.get("bind_mode")) for r in recs
                    if r.get("tool") == "harp-perf" and r.get("xdp_mode")})
    if modes:
        run_rows.append(("harp XDP/bind mode", ", ".join(modes)))
    lines.append("## Run\n\n" + md_table(["", ""], run_rows))
    lines.append("Every figure comes from this run's records (results.jsonl); the peers ran on "
                 "the same links just before harp, with no XDP program attached. The machine's "
                 "other load moves these figures from run to run.\n")
    rows = []
    for t in ts:
        goal = "%s %s" % (t.op, fmt(t.goal)) if t.op else "-"
        rows.append((t.num, t.what, "%s %s" % (fmt(t.harp), t.unit) if t.harp is not None
                     else "-", "%s %s" % (fmt(t.peer), t.unit) if t.peer is not None else "-",
                     fmt(t.ratio), goal, t.verdict()))
    lines.append("## Targets\n\n" + md_table(
        ["#", "what", "harp", "beside", "ratio", "target", "result"], rows))
    seen = set()
    for t in ts:
        if t.note and (t.num, t.note) not in seen:
            seen.add((t.num, t.note))
            lines.append("Target %s: %s.\n" % (t.num, t.note))
    for sec in (section_bandwidth(recs, cfg), section_latency(recs, cfg),
                section_msgrate(recs, cfg), section_cpu(recs, cfg),
                section_allreduce(recs, cfg), section_growth(recs, cfg),
                section_fabric(recs, cfg, notes)):
        if sec:
            lines.append(sec)
    missing = [m for m in str(cfg.get("peers_missing") or "").split("|") if m]
    if missing:
        lines.append("## Peers missing\n\nAsked for, but they could not run here, so their "
                     "rows are absent (perf/run printed where it looked):\n\n" +
                     "".join("- %s\n" % m for m in missing))
    failures = [n for n in notes if n.get("failure")]
    if failures:
        lines.append("## Failures\n\n" + "".join("- %s\n" % n["failure"] for n in failures))
    lines.append("## Files\n\n- `results.jsonl`: every record (schema harp-perf/1, "
                 "perf/README.md)\n- `results.csv`: the same, one row per record\n"
                 "- `logs/`: each process's output\n")
    for p in plots:
        lines.append("![%s](%s)\n" % (p, p))
    if plot_err:
        lines.append("Plots: %s\n" % plot_err)
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return ts


# What perf/run and this module write into a results directory.
OUTPUTS = ("results.jsonl", "results.csv", "notes.jsonl", "expected.txt", "config.json",
           "summary.md", "plots.gp", "bandwidth.png", "latency_cdf.png", "busbw_ranks.png",
           "cpu_per_gib.png", "growth.png", "results_plots.gp")


def cmd_clean(args):
    for name in OUTPUTS:
        path = os.path.join(args.dir, name)
        if os.path.exists(path):
            os.remove(path)
    shutil.rmtree(os.path.join(args.dir, "logs"), ignore_errors=True)


def cmd_report(args):
    out_dir = args.dir
    recs = load_jsonl(os.path.join(out_dir, "results.jsonl"))
    cfg_path = os.path.join(out_dir, "config.json")
    cfg = json.load(open(cfg_path)) if os.path.exists(cfg_path) else {}
    notes = load_jsonl(os.path.join(out_dir, "notes.jsonl"))
    write_csv(os.path.join(out_dir, "results.csv"), recs)
    plots, plot_err = write_plots(out_dir, recs, cfg)
    ts = write_summary(os.path.join(out_dir, "summary.md"), recs, cfg, notes, plots, plot_err,
                       out_dir)
    for t in ts:
        print("target %-3s %-90s ratio %-6s %s" % (t.num, t.what[:90], fmt(t.ratio),
                                                   t.verdict().replace("*", "")))
    if plot_err:
        print("collect: " + plot_err, file=sys.stderr)


def cmd_medians(args):
    """Every target's median over several runs' directories, with the spread of its ratio."""
    runs = []
    for d in args.dirs:
        recs = load_jsonl(os.path.join(d, "results.jsonl"))
        cfg_path = os.path.join(d, "config.json")
        cfg = json.load(open(cfg_path)) if os.path.exists(cfg_path) else {}
        if not recs:
            die("%s: no results.jsonl records" % d)
        runs.append(targets(recs, cfg))
    rows, order = {}, []
    for ts in runs:
        for t in ts:
            key = (t.num, t.what)
            if key not in rows:
                rows[key] = []
                order.append(key)
            rows[key].append(t)

    print("Medians of %d runs: %s" % (len(runs), ", ".join(os.path.basename(os.path.normpath(d))
                                                          for d in args.dirs)))
    print()
    print("| # | target | harp | beside it | ratio (median) | ratios, run by run | result |")
    print("|---|---|---|---|---|---|---|")
    for key in order:
        ts = rows[key]
        first = ts[0]
        m = Target(first.num, first.what, median(t.harp for t in ts),
                   median(t.peer for t in ts), median(t.ratio for t in ts), first.op, first.goal,
                   first.unit)
        spread = " ".join(fmt(t.ratio) for t in ts)
        print("| %s | %s | %s %s | %s | %s | %s | %s |" % (
            m.num, m.what, fmt(m.harp), m.unit, fmt(m.peer), fmt(m.ratio), spread,
            m.verdict()))


def brief(rec):
    t = rec.get("test")
    who = "%s %s %s %s" % (rec.get("tool"), t, rec.get("role"), rec.get("transport"))
    parts = []
    for k, unit in (("size", "B"), ("conns", "conns"), ("nranks", "ranks")):
        if rec.get(k) is not None:
            parts.append("%s %s" % (rec[k], unit))
    for k, unit in (("gbps", "Gbit/s"), ("msgs_per_s", "msg/s"), ("p50_us", "us p50"),
                    ("p99_us", "us p99"), ("busbw_GBps", "GB/s busbw"), ("cpu_s", "CPU-s"),
                    ("rss_kb", "KiB")):
        v = rec.get(k)
        if v is not None:
            parts.append("%s %s" % (fmt(float(v)), unit))
    if rec.get("verified") is not None:
        parts.append("verified" if rec["verified"] else "NOT VERIFIED")
    return "%s [%s]: %s" % (who, rec.get("label"), ", ".join(parts))


def cmd_brief(args):
    if not os.path.exists(args.file):
        return
    for n, rec, err in load_records(args.file):
        if n >= args.first:
            print("  " + (brief(rec) if rec else "line %d: %s" % (n, err)))


# ---- check -----------------------------------------------------------------------------------

def check_record(rec):
    """The problems of one record, as text."""
    bad = []
    if rec.get("schema") != SCHEMA:
        bad.append("schema is %r, not %r" % (rec.get("schema"), SCHEMA))
    for key, allowed in (("tool", TOOLS), ("test", TESTS), ("role", ROLES),
                         ("transport", TRANSPORTS)):
        if rec.get(key) not in allowed:
            bad.append("%s is %r (one of %s)" % (key, rec.get(key), ", ".join(allowed)))
    for key, val in rec.items():
        if val is None:
            continue
        if key in INT_KEYS and (not isinstance(val, int) or isinstance(val, bool)):
            bad.append("%s is %r, not an integer" % (key, val))
        elif key in NUM_KEYS and (not isinstance(val, (int, float)) or isinstance(val, bool)
                                  or not math.isfinite(val) or val < 0):
            bad.append("%s is %r, not a number >= 0" % (key, val))
        elif key in STR_KEYS and not isinstance(val, str):
            bad.append("%s is %r, not a string" % (key, val))
        elif key == "verified" and not isinstance(val, bool):
            bad.append("verified is %r, not true/false" % (val,))
    cdf = rec.get("cdf_us")
    if cdf is not None:
        if not isinstance(cdf, list) or len(cdf) != 101 or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in cdf):
            bad.append("cdf_us is not 101 numbers")
        elif any(b < a for a, b in zip(cdf, cdf[1:])):
            bad.append("cdf_us decreases")
    test, role = rec.get("test"), rec.get("role")
    req = REQUIRED.get(test, {})
    for key in REQUIRED_ALL + req.get("*", ()) + req.get(role, ()):
        if rec.get(key) is None:
            bad.append("%s is missing or null" % key)
    if rec.get("tool") == "harp-perf":
        # harp's records say whether every byte arrived right; raw's client checks nothing
        if not (test == "raw" and role == "client" and "verified" not in rec):
            if rec.get("verified") is not True:
                bad.append("verified is %r, not true" % (rec.get("verified"),))
        if rec.get("transport") == "harp" and not rec.get("plugin_name"):
            bad.append("plugin_name is missing")
    else:
        if rec.get("transport") not in ("kernel-tcp", "kernel-udp"):
            bad.append("a kernel peer's transport is %r" % (rec.get("transport"),))
    if test in ("stream", "bidir") and role == "server" and not (rec.get("bytes") or 0) > 0:
        bad.append("a receiver that received no bytes")
    return bad


def cmd_check(args):
    path = os.path.join(args.dir, "results.jsonl")
    if not os.path.exists(path):
        die("check: %s does not exist" % path)
    problems = []
    recs = []
    for n, rec, err in load_records(path):
        if err:
            problems.append("results.jsonl:%d: %s" % (n, err))
            continue
        recs.append(rec)
        for p in check_record(rec):
            problems.append("results.jsonl:%d (%s %s %s, label %r): %s" % (
                n, rec.get("tool"), rec.get("test"), rec.get("role"), rec.get("label"), p))
    # Each process perf/run started must have left a record.
    expected = os.path.join(args.dir, "expected.txt")
    if os.path.exists(expected):
        with open(expected) as f:
            for line in f:
                fields = line.split()
                if len(fields) < 4:
                    continue
                want = dict(tool=fields[0], test=fields[1], role=fields[2], label=fields[3])
                for extra in fields[4:]:
                    k, _, v = extra.partition("=")
                    want[k] = typed(v)
                if not pick(recs, **want):
                    problems.append("no record from %s" % " ".join(fields))
    if not recs:
        problems.append("results.jsonl holds no record")
    for p in problems:
        print("check: " + p, file=sys.stderr)
    print("check: %d records, %d problems" % (len(recs), len(problems)))
    sys.exit(1 if problems else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("peer")
    p.add_argument("kind")
    p.add_argument("--records", required=True)
    p.add_argument("--in", dest="input")
    p.add_argument("--perf-stat")
    p.add_argument("--rss")
    p.add_argument("--full-log")
    p.add_argument("--set", action="append")
    p = sub.add_parser("note")
    p.add_argument("--records", required=True)
    p.add_argument("--set", action="append")
    p = sub.add_parser("config")
    p.add_argument("--set", action="append")
    p.add_argument("--list", action="append", help="KEY=A,B,C: a list")
    p = sub.add_parser("brief")
    p.add_argument("file")
    p.add_argument("first", type=int)
    p = sub.add_parser("report")
    p.add_argument("dir")
    p = sub.add_parser("check")
    p.add_argument("dir")
    p = sub.add_parser("clean")
    p.add_argument("dir")
    p = sub.add_parser("medians", help="every target's median over several run directories")
    p.add_argument("dirs", nargs="+")
    args = ap.parse_args()
    {"peer": cmd_peer, "note": cmd_note, "config": cmd_config, "brief": cmd_brief,
     "report": cmd_report, "check": cmd_check, "clean": cmd_clean,
     "medians": cmd_medians}[args.cmd](args)


if __name__ == "__main__":
    main()
