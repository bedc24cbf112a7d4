#!/usr/bin/env python3
"""What a communicator costs as PyTorch users see it: one process per GPU.

For the world communicator (dist.init_process_group with device_id, which
creates it at once) and then for a second one over the same ranks
(dist.new_group), each rank times the communicator's creation plus its
first all_reduce (bf16, one element, waited for) and measures the GPU memory
it took: the drop of the device's free memory (torch.cuda.mem_get_info)
less what PyTorch's own allocator reserved meanwhile. Each figure is the
largest over the ranks. Needs a machine with NVIDIA GPUs and a CUDA driver,
and torch with CUDA.

  python3 tests/torch/bench_init.py [--json FILE]
  LD_PRELOAD=build/nccl-so/libnccl.so.2 python3 tests/torch/bench_init.py
  python3 tests/torch/bench_init.py --with-library build/nccl-so/libnccl.so.2

With --with-library LIB (and no LD_PRELOAD) it runs on the NCCL torch links,
then again with LD_PRELOAD=LIB (each rank first proving, as tests/torch does,
that LIB serves every NCCL name torch binds), and prints both beside each
other with Purlin's figure over NCCL's. NVLink multicast stays off.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_allreduce import bench_parser, preloaded_rows, run_ranks  # noqa: E402

COMMS = ("first", "second")


def used_mib(free_before: int, reserved_before: int) -> float:
    """GPU memory taken since the two readings, less PyTorch's own reserve."""
    torch.cuda.synchronize()
    free, _ = torch.cuda.mem_get_info()
    return ((free_before - free) - (torch.cuda.memory_reserved() - reserved_before)) / (1 << 20)


def rank_main(rank: int, args: argparse.Namespace, results) -> None:
    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    x = torch.ones(1, dtype=torch.bfloat16, device=device)  # the context and the allocator's first block
    if args.prove:
        from preload_proof import prove_preload

        prove_preload()
    row = {}
    group = None
    for which in COMMS:
        torch.cuda.synchronize()
        free, _ = torch.cuda.mem_get_info()
        reserved = torch.cuda.memory_reserved()
        start = time.perf_counter()
        if which == "first":
            dist.init_process_group("nccl", rank=rank, world_size=args.nranks, device_id=device,
                                    timeout=datetime.timedelta(seconds=120))
        else:
            group = dist.new_group(list(range(args.nranks)), device_id=device)
        dist.all_reduce(x, group=group)
        torch.cuda.synchronize()
        row[f"{which}_s"] = time.perf_counter() - start
        row[f"{which}_mib"] = used_mib(free, reserved)
    # The largest over the ranks.
    t = torch.tensor([row[f"{w}_{k}"] for w in COMMS for k in ("s", "mib")], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    for i, key in enumerate(f"{w}_{k}" for w in COMMS for k in ("s", "mib")):
        row[key] = round(t[i].item(), 3 if key.endswith("_s") else 1)
    dist.destroy_process_group()
    if rank == 0:
        results.put([row])


def beside(args: argparse.Namespace) -> tuple:
    """This script again with LD_PRELOAD=args.with_library: its row, and whether it exited 0."""
    rows, ok = preloaded_rows(__file__, ["--nranks", str(args.nranks)], args.with_library)
    return (rows[0] if rows else None), ok and bool(rows)


def main() -> int:
    p = bench_parser(__doc__, "unused")
    p.add_argument("--with-library", help="also run with LD_PRELOAD set to this library and print both")
    p.add_argument("--prove", action="store_true", help=argparse.SUPPRESS)  # --with-library's run: each rank proves the preload
    args = p.parse_args()
    if args.with_library and os.environ.get("LD_PRELOAD"):
        print("bench_init: --with-library runs the baseline without LD_PRELOAD; unset it")
        return 2
    rows, ok = run_ranks("bench_init", rank_main, args)
    if rows is None:
        return 2
    mine = rows[0]
    if not args.with_library:
        library = os.environ.get("LD_PRELOAD", "") or "the NCCL torch links"
        print(f"bench_init: torch {torch.__version__}, {args.nranks} processes, on {library}")
        for w in COMMS:
            print(f"{w} communicator: created and first all_reduce done in {mine[w + '_s']:.3f} s, "
                  f"{mine[w + '_mib']:.1f} MiB of GPU memory")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"torch": torch.__version__, "library": library, "rows": rows}, f, indent=1)
        return 0 if ok else 1
    purlin, also = beside(args)
    out = []
    print(f"bench_init: torch {torch.__version__}, {args.nranks} processes; {args.with_library} (LD_PRELOAD) "
          "and the NCCL torch links, in turn; the largest over the ranks")
    print("| communicator | Purlin s | NCCL s | Purlin MiB | NCCL MiB | time P/N | memory P/N |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for w in COMMS:
        r = {"comm": w, "nccl_s": mine[w + "_s"], "nccl_mib": mine[w + "_mib"],
             "purlin_s": purlin and purlin[w + "_s"], "purlin_mib": purlin and purlin[w + "_mib"]}
        out.append(r)
        over = lambda a, b: "n/a" if a is None or not b else f"{a / b:.2f}"  # noqa: E731
        fmt = lambda v, d: "n/a" if v is None else f"{v:.{d}f}"  # noqa: E731
        print(f"| {w} | {fmt(r['purlin_s'], 3)} | {r['nccl_s']:.3f} | {fmt(r['purlin_mib'], 1)} | {r['nccl_mib']:.1f} "
              f"| {over(r['purlin_s'], r['nccl_s'])} | {over(r['purlin_mib'], r['nccl_mib'])} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "library": args.with_library, "rows": out}, f, indent=1)
    return 0 if ok and also else 1


if __name__ == "__main__":
    raise SystemExit(main())
