#!/usr/bin/env python3
"""All-reduce as PyTorch users see it: one process per GPU, bf16, CUDA graphs.

Times torch.distributed.all_reduce on the nccl backend (the real NCCL, or
Purlin when started with LD_PRELOAD=<Purlin's libnccl.so.2>) beside PyTorch's
own symmetric-memory one-shot and two-shot all-reduce kernels, in the same
processes and the same run. Each figure is CALLS calls captured in one CUDA
graph, replayed REPLAYS times and timed with CUDA events: microseconds per
call, the slower rank's. Needs a machine with NVIDIA GPUs and a CUDA driver,
and torch with CUDA.

  python3 tests/torch/bench_allreduce.py [--sizes 8,64K,256M] [--json FILE]
  LD_PRELOAD=build/nccl-so/libnccl.so.2 python3 tests/torch/bench_allreduce.py
  python3 tests/torch/bench_allreduce.py --with-library build/nccl-so/libnccl.so.2

Prints one row per size: bytes, all_reduce, one-shot and two-shot us per call
(n/a where a kernel refuses the size or is missing from this torch). With
--with-library LIB (and no LD_PRELOAD) it runs twice in one command: on the
NCCL torch links, then again with LD_PRELOAD=LIB (each rank first proves, as
tests/torch does, that LIB serves every NCCL name torch binds), and prints both all_reduce columns beside
the symmetric-memory kernels of the first run, with Purlin's time over each.
NVLink multicast stays off (TORCH_SYMM_MEM_DISABLE_MULTICAST, NCCL_NVLS_ENABLE).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as tmp
from check_torch import free_port

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(s: str) -> int:
    s = s.strip().upper()
    return int(s[:-1]) * UNITS[s[-1]] if s[-1] in UNITS else int(s)


def per_call_us(fn, calls: int, replays: int, stream: torch.cuda.Stream) -> float:
    """fn's time per call in a CUDA graph of `calls` calls (warmed up eagerly first)."""
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / (replays * calls)


def symmetric_kernels(n: int, device: torch.device, group_name: str):
    """PyTorch's one-shot and two-shot all-reduce on a symmetric buffer of n
    bf16 elements, as callables (None where this torch lacks them)."""
    try:
        import torch.distributed._symmetric_memory as symm_mem
    except ImportError:
        return None, None
    if hasattr(symm_mem, "enable_symm_mem_for_group"):  # needed before torch 2.9, deprecated since
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            symm_mem.enable_symm_mem_for_group(group_name)
    buf = symm_mem.empty(n, dtype=torch.bfloat16, device=device)
    symm_mem.rendezvous(buf, group_name)
    buf.fill_(1)
    ops = torch.ops.symm_mem
    one = (lambda: ops.one_shot_all_reduce(buf, "sum", group_name)) if hasattr(ops, "one_shot_all_reduce") else None
    two = (lambda: ops.two_shot_all_reduce_(buf, "sum", group_name)) if hasattr(ops, "two_shot_all_reduce_") else None
    return one, two


def rank_main(rank: int, args: argparse.Namespace, results) -> None:
    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    if args.prove:
        from preload_proof import prove_preload

        prove_preload()  # PURLIN_DROPIN_LIBRARY (--with-library's run) serves every NCCL name torch binds
    dist.init_process_group("nccl", rank=rank, world_size=args.nranks, device_id=device,
                            timeout=datetime.timedelta(seconds=120))
    group_name = dist.group.WORLD.group_name
    stream = torch.cuda.Stream()
    rows = []
    for nbytes in args.sizes:
        n = max(1, nbytes // 2)
        calls = args.calls if nbytes < 16 << 20 else max(2, args.calls // 4)
        x = torch.ones(n, dtype=torch.bfloat16, device=device)
        row = {"bytes": nbytes, "calls": calls}
        row["all_reduce_us"] = per_call_us(lambda: dist.all_reduce(x), calls, args.replays, stream)
        one, two = symmetric_kernels(n, device, group_name)
        for name, fn in (("one_shot_us", one), ("two_shot_us", two)):
            try:
                row[name] = per_call_us(fn, calls, args.replays, stream) if fn else None
            except Exception as err:  # noqa: BLE001 (a kernel that refuses a size is reported, not fatal)
                row[name] = None
                row[name.replace("_us", "_error")] = str(err).splitlines()[0][:120]
        # The slower rank's figure.
        t = torch.tensor([row[k] or 0.0 for k in ("all_reduce_us", "one_shot_us", "two_shot_us")], device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        for k, v in zip(("all_reduce_us", "one_shot_us", "two_shot_us"), t.tolist()):
            if row[k] is not None:
                row[k] = round(v, 2)
        rows.append(row)
        del x
        torch.cuda.empty_cache()
    dist.destroy_process_group()
    if rank == 0:
        results.put(rows)


def bench_parser(description: str, calls_help: str) -> argparse.ArgumentParser:
    """The options every benchmark here takes; a script adds its own."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nranks", type=int, default=2)
    p.add_argument("--calls", type=int, default=20, help=calls_help)
    p.add_argument("--replays", type=int, default=10)
    p.add_argument("--json", help="also write the rows here")
    return p


def run_ranks(name: str, rank_main, args: argparse.Namespace):
    """Runs rank_main(rank, args, results) in one spawned process per GPU;
    rank 0 puts its rows on results. Returns (rows, every process exited 0),
    or (None, False) after saying why where the machine has too few GPUs."""
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    if torch.cuda.device_count() < args.nranks:
        print(f"{name}: {args.nranks} ranks need {args.nranks} GPUs, found {torch.cuda.device_count()}")
        return None, False
    ctx = tmp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, args, results)) for r in range(args.nranks)]
    for proc in procs:
        proc.start()
    rows = results.get(timeout=600)
    for proc in procs:
        proc.join()
    return rows, all(proc.exitcode == 0 for proc in procs)


def preloaded_rows(script: str, argv: list, library: str) -> tuple:
    """Runs script again with argv, --json and --prove, under LD_PRELOAD=library
    (each rank proving the preload), and returns the rows it wrote ([] where
    none) and whether it exited 0."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "preloaded.json")
        lib = os.path.realpath(library)
        env = dict(os.environ, LD_PRELOAD=lib, PURLIN_DROPIN_LIBRARY=lib)
        ok = subprocess.run([sys.executable, os.path.abspath(script)] + argv + ["--json", out, "--prove"],
                            env=env).returncode == 0
        return (json.load(open(out))["rows"] if os.path.exists(out) else []), ok


def beside(args: argparse.Namespace, nccl_rows: list) -> tuple:
    """Runs this script again with LD_PRELOAD=args.with_library and returns its
    rows joined to nccl_rows (the run on the NCCL torch links) size by size,
    and whether it exited 0."""
    preloaded, ok = preloaded_rows(__file__, ["--nranks", str(args.nranks), "--calls", str(args.calls),
                                              "--replays", str(args.replays), "--sizes", ",".join(map(str, args.sizes))],
                                   args.with_library)
    purlin = {r["bytes"]: r for r in preloaded}
    rows = []
    for r in nccl_rows:
        p = purlin.get(r["bytes"], {})
        rows.append({"bytes": r["bytes"], "calls": r["calls"], "purlin_us": p.get("all_reduce_us"),
                     "nccl_us": r["all_reduce_us"], "one_shot_us": r["one_shot_us"], "two_shot_us": r["two_shot_us"]})
    return rows, ok and len(purlin) == len(nccl_rows)


def main() -> int:
    p = bench_parser(__doc__, "calls captured in one graph (a quarter from 16 MiB)")
    p.add_argument("--sizes", default="8,64,1K,4K,16K,64K,256K,1M,4M,16M,64M,256M")
    p.add_argument("--with-library", help="also run with LD_PRELOAD set to this library and print both all_reduce columns")
    p.add_argument("--prove", action="store_true", help=argparse.SUPPRESS)  # --with-library's run: each rank proves the preload
    args = p.parse_args()
    args.sizes = [parse_size(s) for s in args.sizes.split(",")]
    if args.with_library and os.environ.get("LD_PRELOAD"):
        print("bench_allreduce: --with-library runs the baseline without LD_PRELOAD; unset it")
        return 2
    library = os.environ.get("LD_PRELOAD", "") or "the NCCL torch links"
    rows, ok = run_ranks("bench_allreduce", rank_main, args)
    if rows is None:
        return 2
    if args.with_library:
        rows, also = beside(args, rows)
        print(f"bench_allreduce: torch {torch.__version__}, {args.nranks} processes, bf16 sum, CUDA graphs; "
              f"all_reduce on {args.with_library} (LD_PRELOAD) and on the NCCL torch links, in turn")
        print("| bytes | Purlin all_reduce us | NCCL all_reduce us | symm one-shot us | symm two-shot us "
              "| Purlin / NCCL | Purlin / one-shot | Purlin / two-shot |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        fmt = lambda v: "n/a" if v is None else f"{v:.2f}"  # noqa: E731
        over = lambda a, b: "n/a" if a is None or not b else f"{a / b:.2f}"  # noqa: E731
        for r in rows:
            print(f"| {r['bytes']} | {fmt(r['purlin_us'])} | {fmt(r['nccl_us'])} | {fmt(r['one_shot_us'])} | "
                  f"{fmt(r['two_shot_us'])} | {over(r['purlin_us'], r['nccl_us'])} | "
                  f"{over(r['purlin_us'], r['one_shot_us'])} | {over(r['purlin_us'], r['two_shot_us'])} |")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"torch": torch.__version__, "library": args.with_library, "rows": rows}, f, indent=1)
        return 0 if ok and also else 1
    print(f"bench_allreduce: torch {torch.__version__}, {args.nranks} processes, bf16 sum, CUDA graphs; "
          f"all_reduce on {library}")
    print("| bytes | all_reduce us | symm one-shot us | symm two-shot us |")
    print("|---:|---:|---:|---:|")
    fmt = lambda v: "n/a" if v is None else f"{v:.2f}"  # noqa: E731
    for r in rows:
        print(f"| {r['bytes']} | {fmt(r['all_reduce_us'])} | {fmt(r['one_shot_us'])} | {fmt(r['two_shot_us'])} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "library": library, "rows": rows}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
