#!/usr/bin/env python3
"""vLLM-style pynccl client on Purlin: N ranks as spawned processes.

Each rank loads the library by path with ctypes (no LD_PRELOAD), proves it is
Purlin (the bound ncclAllReduce lies in that file, the file has Purlin's own
purlin* names, and Purlin logged the communicator's creation at
PURLIN_DEBUG=INFO), then runs every case of cases.py and graph_cases.py on its
buffers: torch tensors on its GPU (--mode cuda) or numpy arrays on Purlin's
host datapath (--mode host, for machines without a GPU).

Exit status 0 only if every rank ran every case (host mode: all but the
CUDA-graph case) and every result matched the local reference.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))

from buffers import make_buffers  # noqa: E402
from cases import CASES, Ctx, Skip  # noqa: E402
from graph_cases import test_graph_capture_replay  # noqa: E402
from nccl_library import DTYPES, OPS, NCCLLibrary  # noqa: E402
from proof import StderrLog, atom_of, init_lines, where  # noqa: E402
from ranks import collect, finish, start  # noqa: E402

ALL_CASES = CASES + [test_graph_capture_replay]


def prove_purlin(lib: NCCLLibrary) -> str:
    """Checks the loaded file is Purlin and serves the NCCL names; returns the version."""
    path = os.path.realpath(lib.path)
    for name in ("ncclAllReduce", "ncclCommInitRank", "ncclGetVersion"):
        owner = where(lib.symbol_address(name))
        if owner != path:
            raise AssertionError(f"{name} resolves into {owner or '?'}, not {path}")
    if not hasattr(lib.lib, "purlinGetVersion"):
        raise AssertionError(f"{path} has no purlinGetVersion: it is not Purlin")
    code = lib.get_version()
    if len(str(code)) != 5:
        raise AssertionError(f"ncclGetVersion gave {code}; vLLM slices a 5-digit code")
    return lib.version_string()


def exchange_id(lib: NCCLLibrary, rank: int, nranks: int, ids: mp.Queue, timeout: float) -> bytes:
    if rank == 0:
        uid = lib.get_unique_id()
        for _ in range(nranks - 1):
            ids.put(uid)
        return uid
    return ids.get(timeout=timeout)


def rank_main(rank: int, args: argparse.Namespace, ids: mp.Queue, results: mp.Queue) -> None:
    log = StderrLog(os.path.join(args.logdir, f"pynccl-rank{rank}.stderr"), f"rank{rank}")
    report = {"rank": rank, "passed": [], "skipped": [], "failed": None}
    try:
        lib = NCCLLibrary(args.library)
        report["version"] = lib.version_string() if args.baseline else prove_purlin(lib)
        bufs = make_buffers(args.mode, lib, rank)
        uid = exchange_id(lib, rank, args.nranks, ids, args.timeout)
        comm = lib.comm_init_rank(args.nranks, uid, rank)
        bufs.comm = comm
        # vLLM's warm-up: one tiny AllReduce and a stream sync.
        one = bufs.upload(np.ones(1), "float32")
        lib.all_reduce(bufs.ptr(one), bufs.ptr(one), 1, DTYPES["float32"], OPS["sum"], comm, bufs.stream())
        bufs.synchronize()
        if bufs.download(one)[0] != args.nranks:
            raise AssertionError(f"warm-up AllReduce gave {bufs.download(one)[0]}, expected {args.nranks}")
        lines = [] if args.baseline else init_lines(log.text(), rank, args.nranks)
        if not args.baseline and len(lines) != 1:
            raise AssertionError(f"expected one Purlin INFO line for rank {rank} of {args.nranks} "
                                 f"from pid {os.getpid()}, found {len(lines)} (is PURLIN_DEBUG=INFO set?)")
        report["atom"] = atom_of(lines[0]) if lines else "baseline"
        if lines and report["atom"] and report["atom"] != args.mode:
            raise AssertionError(f"Purlin used its {report['atom']} Atom, expected {args.mode}: {lines[0]}")
        ctx = Ctx(lib=lib, bufs=bufs, comm=comm, rank=rank, nranks=args.nranks, seed=args.seed)
        for case in ALL_CASES:
            try:
                case(ctx)
            except Skip as why:
                report["skipped"].append(f"{case.__name__} ({why})")
                continue
            report["passed"].append(case.__name__)
        lib.comm_destroy(comm)
    except BaseException:  # reported to the parent, which fails the run
        report["failed"] = traceback.format_exc()
    finally:
        log.close()
        results.put(report)


def main() -> int:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--library", default=os.path.join(root, "build", "libpurlin.so"))
    p.add_argument("--mode", choices=["cuda", "host"], default="cuda")
    p.add_argument("--nranks", type=int, default=2)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--logdir", default=os.environ.get("OUT", "/tmp"))
    p.add_argument("--baseline", action="store_true",
                   help="the library is another NCCL (say the real one): run the cases, skip the Purlin proof")
    p.add_argument("--timeout", type=float, default=480.0, help="seconds for the whole run")
    args = p.parse_args()
    args.library = os.path.realpath(args.library)
    if not os.path.exists(args.library):
        print(f"pynccl: no library at {args.library}", file=sys.stderr)
        return 2
    os.makedirs(args.logdir, exist_ok=True)
    # Read by Purlin when the library first needs them, in each rank.
    os.environ.setdefault("PURLIN_DEBUG", "INFO")
    os.environ.setdefault("PURLIN_ATOM", args.mode)
    os.environ.setdefault("PURLIN_TIMEOUT", "60")

    procs, _ids, results = start("spawn", rank_main, args.nranks, args)
    reports = collect(procs, results, args.timeout)
    finish(procs, len(reports) == len(procs))

    ok = len(reports) == args.nranks
    for r in range(args.nranks):
        rep = reports.get(r)
        if rep is None:
            print(f"pynccl: rank {r}: no report (exit code {procs[r].exitcode})")
            ok = False
            continue
        print(f"pynccl: rank {r}: library {args.library}, NCCL version {rep.get('version')}, "
              f"{rep.get('atom') or '?'} Atom; {len(rep['passed'])} cases passed: {', '.join(rep['passed'])}")
        for s in rep["skipped"]:
            print(f"pynccl: rank {r}: skipped {s}")
        if rep["failed"]:
            ok = False
            print(f"pynccl: rank {r}: FAILED\n{rep['failed']}")
        elif len(rep["passed"]) + len(rep["skipped"]) != len(ALL_CASES):
            ok = False
        elif args.mode == "cuda" and rep["skipped"]:
            ok = False  # on GPUs every case, CUDA graphs included, must run
    print(f"pynccl ({args.mode}, {args.nranks} ranks): {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
