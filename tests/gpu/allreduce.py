# SPDX-License-Identifier: Apache-2.0
"""One rank of an all-reduce or all-gather through torch.distributed's NCCL backend (run by
nccl_allreduce.sh).

all-reduce: each rank fills a float32 tensor on its GPU with rank + 1, all-reduces it (sum) a few
times per size, checks every element came back as n(n+1)/2. all-gather: each rank gathers every
rank's size/n bytes, each part filled with its rank + 1, and checks each part. One JSON line per
size with the bus bandwidth as nccl-tests computes it (algbw x 2(n-1)/n for all-reduce, algbw x
(n-1)/n for all-gather, algbw = size / time). Exits 1 if a result was wrong.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist


def sizes_arg(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    out = []
    for word in text.split(","):
        scale = units.get(word[-1:].upper(), 1)
        out.append(int(word[:-1] if scale > 1 else word) * scale)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True, help="rank 0's address for the TCP store")
    ap.add_argument("--port", type=int, default=29500)
    ap.add_argument("--sizes", type=sizes_arg, default=sizes_arg("1M,16M,128M"))
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--label", default="")
    ap.add_argument("--op", choices=("allreduce", "allgather"), default="allreduce")
    a = ap.parse_args()

    torch.cuda.set_device(0)  # both ranks share the one GPU: NCCL_HOSTID makes them two nodes
    dist.init_process_group(
        "nccl",
        init_method=f"tcp://{a.master}:{a.port}",
        rank=a.rank,
        world_size=a.world,
    )
    n = a.world
    wrong = 0
    for size in a.sizes:
        count = max(size // 4 // n * n, n)  # all-gather: n equal parts
        size = count * 4
        x = torch.empty(count, dtype=torch.float32, device="cuda")
        part = torch.empty(count // n, dtype=torch.float32, device="cuda")

        def once():
            if a.op == "allreduce":
                x.fill_(a.rank + 1)
                dist.all_reduce(x)
            else:
                part.fill_(a.rank + 1)
                dist.all_gather_into_tensor(x, part)

        for _ in range(a.warmup):
            once()
        torch.cuda.synchronize()
        dist.barrier()
        elapsed = 0.0
        for _ in range(a.iters):
            x.fill_(0)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            once()
            torch.cuda.synchronize()
            elapsed += time.perf_counter() - t0
        if a.op == "allreduce":
            bad = int((x != n * (n + 1) / 2).sum().item())
        else:
            want = torch.arange(1, n + 1, dtype=torch.float32, device="cuda")
            bad = int((x.view(n, -1) != want.view(n, 1)).sum().item())
        wrong += bad
        t = elapsed / a.iters
        algbw = size / t / 1e9
        factor = 2 * (n - 1) / n if a.op == "allreduce" else (n - 1) / n
        print(json.dumps({
            "schema": "harp-perf/1", "tool": "torch.distributed", "test": a.op,
            "role": "rank", "label": a.label, "rank": a.rank, "nranks": n, "size": size,
            "iters": a.iters, "time_us": t * 1e6, "algbw_GBps": algbw,
            "busbw_GBps": algbw * factor, "verified": bad == 0,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "net_plugin": os.environ.get("NCCL_NET_PLUGIN", ""),
        }), flush=True)
    dist.destroy_process_group()
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
