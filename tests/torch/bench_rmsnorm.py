#!/usr/bin/env python3
"""The end of a tensor-parallel transformer layer, three ways: one process per
GPU, bf16, CUDA graphs.

  fused     Purlin's all_reduce_rmsnorm: all-reduce, residual add and RMSNorm
            in one collective (the epilogue runs where the reduced rows land)
  purlin    Purlin's all_reduce, then PyTorch's residual add and rms_norm
  nccl      torch.distributed.all_reduce on NCCL, then the same PyTorch ops

Each figure is CALLS layers captured in one CUDA graph, replayed REPLAYS times
and timed with CUDA events: microseconds per layer, the slower rank's. The
activations are zeros, so values stay finite however often the graph adds
them into the residual (the kernels' time does not depend on the values;
correctness is the tests' business). Needs a machine with NVIDIA GPUs and a
CUDA driver, torch with CUDA, and Purlin's Python package (PURLIN_LIBRARY
names the library it loads); torch's nccl backend must be the real NCCL (no
LD_PRELOAD), which this script checks.

  python3 tests/torch/bench_rmsnorm.py [--hidden 4096,8192] [--tokens 1,16,128,1024,8192] [--json FILE]

Prints one row per (hidden, tokens): the three times and fused's speedup over
each of the others. NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_allreduce import bench_parser, per_call_us, run_ranks  # noqa: E402

EPS = 1e-6


def rank_main(rank: int, args: argparse.Namespace, results) -> None:
    import purlin

    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=rank, world_size=args.nranks, device_id=device,
                            timeout=datetime.timedelta(seconds=120))
    comm = purlin.Communicator.from_torch_group()
    stream = torch.cuda.Stream()
    rows = []
    for hidden in args.hidden:
        weight = torch.ones(hidden, dtype=torch.bfloat16, device=device)
        for tokens in args.tokens:
            x = torch.zeros(tokens, hidden, dtype=torch.bfloat16, device=device)
            residual = torch.zeros_like(x)
            out = torch.empty_like(x)

            def fused():
                comm.all_reduce_rmsnorm(x, residual, weight, EPS, out=out)

            def unfused(all_reduce):
                def layer():
                    all_reduce(x)
                    torch.add(x, residual, out=residual)
                    torch.nn.functional.rms_norm(residual, (hidden,), weight, EPS)
                return layer

            calls = args.calls if tokens * hidden < 1 << 22 else max(2, args.calls // 4)
            row = {"hidden": hidden, "tokens": tokens, "calls": calls}
            for name, fn in (("fused_us", fused), ("purlin_us", unfused(lambda t: comm.all_reduce(t))),
                             ("nccl_us", unfused(lambda t: dist.all_reduce(t)))):
                row[name] = per_call_us(fn, calls, args.replays, stream)
            t = torch.tensor([row[k] for k in ("fused_us", "purlin_us", "nccl_us")], device=device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slower rank's figure
            for k, v in zip(("fused_us", "purlin_us", "nccl_us"), t.tolist()):
                row[k] = round(v, 2)
            rows.append(row)
            del x, residual, out
            torch.cuda.empty_cache()
    comm.close()
    dist.destroy_process_group()
    if rank == 0:
        results.put(rows)


def main() -> int:
    p = bench_parser(__doc__, "layers captured in one graph (a quarter from 4M elements)")
    p.add_argument("--hidden", default="4096,8192")
    p.add_argument("--tokens", default="1,16,128,1024,8192")
    args = p.parse_args()
    args.hidden = [int(s) for s in args.hidden.split(",")]
    args.tokens = [int(s) for s in args.tokens.split(",")]
    if "nccl" in os.environ.get("LD_PRELOAD", ""):
        print("bench_rmsnorm: run without LD_PRELOAD: the nccl column must be the real NCCL")
        return 2
    rows, ok = run_ranks("bench_rmsnorm", rank_main, args)
    if rows is None:
        return 2
    print(f"bench_rmsnorm: torch {torch.__version__}, {args.nranks} processes, bf16 sum + residual add + "
          f"RMSNorm, CUDA graphs; us per layer")
    print("| hidden | tokens | fused us | Purlin + torch us | NCCL + torch us | vs Purlin + torch | vs NCCL + torch |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['hidden']} | {r['tokens']} | {r['fused_us']:.2f} | {r['purlin_us']:.2f} | {r['nccl_us']:.2f} | "
              f"{r['purlin_us'] / r['fused_us']:.2f}x | {r['nccl_us'] / r['fused_us']:.2f}x |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "rows": rows}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
