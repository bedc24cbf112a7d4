"""Starting a drop-in test's ranks as processes and gathering their reports
(tests/pynccl, tests/cupy; tests/torch uses free_port alone)."""

from __future__ import annotations

import multiprocessing as mp
import queue
import socket
import time


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(method: str, rank_main, nranks: int, args):
    """Starts rank_main(rank, args, ids, results) in nranks processes (multiprocessing's
    method: "spawn" or "fork"); ids carries rank 0's unique id to the others, results the
    ranks' reports (collect). Returns the processes and both queues (which must outlive the
ranks' start: a spawned rank reopens them)."""
    ctx = mp.get_context(method)
    ids, results = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, args, ids, results)) for r in range(nranks)]
    for proc in procs:
        proc.start()
    return procs, ids, results


def collect(procs, results, timeout: float) -> dict:
    """The reports the ranks put on results (dicts with "rank" and "failed"), by rank, until
    every rank has reported, timeout seconds have passed, a rank has died without reporting, or
    one has failed (its peers would only wait for it until PURLIN_TIMEOUT)."""
    reports, deadline = {}, time.monotonic() + timeout
    while len(reports) < len(procs) and time.monotonic() < deadline:
        try:
            r = results.get(timeout=1.0)
        except queue.Empty:
            if any(p.exitcode not in (None, 0) for p in procs):
                break
            continue
        reports[r["rank"]] = r
        if r["failed"]:
            break
    return reports


def finish(procs, reported: bool) -> None:
    """Joins the ranks, briefly where one did not report, and ends any still running."""
    for proc in procs:
        proc.join(timeout=5 if reported else 0.1)
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=5)
