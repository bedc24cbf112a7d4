#!/usr/bin/env python3
"""An unchanged torch.distributed (nccl backend) program, run on Purlin.

Started with LD_PRELOAD=<Purlin's libnccl.so.2> (tests/torch/run.sh does it),
it starts one process per GPU (spawned; --start fork forks them from this
process, which has Purlin mapped but has not called it, as Python's
multiprocessing does by default on Linux). Each rank first proves Purlin is the NCCL torch
binds to (preload_proof.py), then runs every case of collective_cases.py,
p2p_cases.py and graph_cases.py, each checked exactly against a reference
computed locally, calls destroy_process_group, and finally checks the INFO
lines Purlin logged for its communicators (and that the real NCCL logged none).

--backend gloo runs the same cases on the CPU with gloo: a self-check of the
harness for machines without a GPU (calls gloo lacks are listed, not failed).
--baseline runs on the real NCCL (no preload) to tell a wrong test from a wrong Purlin.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as tmp  # noqa: E402

import collective_cases  # noqa: E402
import graph_cases  # noqa: E402
import p2p_cases  # noqa: E402
from collective_cases import Ctx, Unsupported  # noqa: E402
from ranks import free_port  # noqa: E402

ALL_CASES = collective_cases.CASES + p2p_cases.CASES + graph_cases.CASES


def log_path(args, rank: int) -> str:
    return os.path.join(args.logdir, f"torch-{args.backend}-rank{rank}.stderr")


def run_cases(ctx: Ctx, report: list, cases: list) -> None:
    """Runs every case of cases, even after one fails, so one run shows them
    all; raises at the end naming the failed cases."""
    failed = []
    for case in cases:
        need = getattr(case, "min_ranks", 1)
        if ctx.world < need:  # torch refuses a send to oneself; NCCL's group would wait
            report.append(f"  {case.__name__}: not run ({need} ranks or more)")
            continue
        try:
            case(ctx)
        except Unsupported as why:
            if ctx.backend == "nccl":  # every call must work on NCCL
                failed.append(f"{case.__name__}: {why}")
                report.append(f"  {case.__name__}: FAILED (unsupported: {why})")
                continue
            report.append(f"  {case.__name__}: not run on {ctx.backend} ({why})")
            continue
        except Exception as err:  # noqa: BLE001 (a torch error fails the case, not the run)
            failed.append(f"{case.__name__}: {err}")
            report.append(f"  {case.__name__}: FAILED: {err}")
            continue
        report.append(f"  {case.__name__}: ok")
    if failed:
        raise AssertionError(f"{len(failed)} of {len(cases)} cases failed:\n" + "\n".join(failed))


def rank_main(rank: int, args: argparse.Namespace) -> None:
    from preload_proof import init_report, prove_preload
    from proof import StderrLog

    proving = args.backend == "nccl" and not args.baseline
    log = StderrLog(log_path(args, rank), f"rank{rank}")
    report = [f"torch rank {rank}: torch {torch.__version__}, backend {args.backend}"
              f"{' (baseline: real NCCL)' if args.baseline else ''}"]
    failure = None
    try:
        if proving:
            facts = prove_preload()
            report.append(f"  preload: {facts['library']} serves every NCCL name torch imports "
                          f"(ncclGetVersion {facts['version']})")
            report += [f"  note: {n}" for n in facts["notes"]]
        if args.backend == "nccl":
            device = torch.device("cuda", rank)
            torch.cuda.set_device(device)
            dist.init_process_group("nccl", rank=rank, world_size=args.nranks, device_id=device,
                                    timeout=datetime.timedelta(seconds=args.op_timeout))
        else:
            device = torch.device("cpu")
            dist.init_process_group("gloo", rank=rank, world_size=args.nranks,
                                    timeout=datetime.timedelta(seconds=args.op_timeout))
        ctx = Ctx(rank=rank, world=args.nranks, device=device, seed=args.seed, backend=args.backend)
        run_cases(ctx, report, [c for c in ALL_CASES if re.search(args.cases, c.__name__)])
        dist.destroy_process_group()
        report.append("  destroy_process_group: ok")
        report += [f"  {note}" for note in ctx.notes]
        if proving:
            report.append("  log: " + init_report(log.text(), rank, args.nranks, "cuda", need_solo=rank == 0))
    except BaseException:
        failure = traceback.format_exc()
    finally:
        log.close()
    print("\n".join(report), flush=True)
    if failure:
        print(f"torch rank {rank}: FAILED\n{failure}", flush=True)
        raise SystemExit(1)


def gpus_in_child() -> int:
    """torch.cuda.device_count() in a child process, which this one does not inherit CUDA from."""
    import subprocess

    code = "import torch; print(torch.cuda.device_count())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return int(out.stdout.strip() or 0)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    p.add_argument("--nranks", type=int, default=2)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--logdir", default=os.environ.get("OUT", "/tmp"))
    p.add_argument("--op-timeout", type=int, default=120, help="seconds torch lets one call take")
    p.add_argument("--baseline", action="store_true", help="no Purlin: check the cases on the real NCCL")
    p.add_argument("--cases", default="", help="run only the cases whose names this regular expression finds")
    p.add_argument("--start", choices=["spawn", "fork"], default="spawn", help="how the ranks are started")
    args = p.parse_args()
    os.makedirs(args.logdir, exist_ok=True)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    if args.backend == "nccl" and not args.baseline:
        os.environ.setdefault("PURLIN_DEBUG", "INFO")
        os.environ.setdefault("PURLIN_ATOM", "cuda")  # a build without kernels fails loudly
        os.environ.setdefault("NCCL_DEBUG", "INFO")  # the real NCCL, if it ran, would say so
    # Forked ranks need a parent that has not touched CUDA: then count the GPUs in a child.
    gpus = torch.cuda.device_count() if args.start == "spawn" else gpus_in_child()
    if args.backend == "nccl" and gpus < args.nranks:
        print(f"torch: {args.nranks} ranks need {args.nranks} GPUs, found {gpus}")
        return 2
    try:
        tmp.start_processes(rank_main, args=(args,), nprocs=args.nranks, join=True, start_method=args.start)
    except Exception as err:  # a rank failed; its report is above, its stderr in the log files
        print(f"torch: a rank failed: {str(err).strip().splitlines()[-1] if str(err).strip() else err!r}")
        for rank in range(args.nranks):
            path = log_path(args, rank)
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    tail = f.read().splitlines()[-25:]
                print(f"--- {path} (last lines)\n" + "\n".join(tail))
        print(f"torch ({args.backend}, {args.nranks} ranks): FAIL")
        return 1
    print(f"torch ({args.backend}, {args.nranks} ranks{', baseline' if args.baseline else ''}, {args.start}): PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
