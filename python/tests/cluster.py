"""A set of spawned processes, one rank each, that run named scenarios on request.

Starting a process and a communicator costs about a second, so a Cluster is
made once per world size and serves many tests: each test sends a scenario
name (a function in scenarios.py) to every rank and gets each rank's result
or traceback. Nothing can hang: every receive has a deadline, PURLIN_TIMEOUT
bounds the library's waits, and a cluster that missed a deadline is killed.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import time
import traceback
from typing import Any, Dict, List, Optional

# Bounds every wait inside the library; smaller than the harness deadline so
# that a lost peer surfaces as a Purlin error rather than a harness timeout.
LIBRARY_TIMEOUT_S = "20"
DEADLINE_S = 40.0


def _serve(rank: int, world_size: int, uid: bytes, inbox: Any, outbox: Any, env: Dict[str, str],
           gpus: str) -> None:
    os.environ.update(env)
    import importlib

    import purlin  # noqa: E402  (after the environment is set)

    try:
        device = None
        if gpus:  # "torch" or "cupy": that framework owns the device; ranks take the GPUs in turn
            module = importlib.import_module(gpus)
            if gpus == "torch":
                device = rank % module.cuda.device_count()
                module.cuda.set_device(device)
            else:
                device = rank % module.cuda.runtime.getDeviceCount()
        comm = purlin.Communicator(world_size, rank, purlin.UniqueId.from_bytes(uid), device=device)
    except BaseException:
        outbox.put((rank, False, traceback.format_exc()))
        return
    outbox.put((rank, True, "ready"))
    while True:
        job = inbox.get()
        if job is None:
            break
        name, args = job
        try:
            module, _, function = name.rpartition(".")
            value = getattr(importlib.import_module(module or "scenarios"), function)(comm, *args)
            outbox.put((rank, True, value))
        except BaseException:
            outbox.put((rank, False, traceback.format_exc()))
    try:
        comm.close()
    except BaseException:
        pass


class ScenarioFailed(AssertionError):
    pass


class Cluster:
    """world_size spawned ranks sharing one communicator: a host one, or with gpus="torch"
    or "cupy" one on GPU r for rank r."""

    def __init__(self, world_size: int, env: Optional[Dict[str, str]] = None, gpus: str = "") -> None:
        import purlin

        self.world_size = world_size
        context = mp.get_context("spawn")
        self._outbox = context.Queue()
        self._inboxes = [context.Queue() for _ in range(world_size)]
        settings = {"PURLIN_TIMEOUT": LIBRARY_TIMEOUT_S, **(env or {})}
        uid = purlin.UniqueId.generate().bytes()
        self._processes = [
            context.Process(target=_serve, args=(r, world_size, uid, self._inboxes[r], self._outbox, settings, gpus),
                            daemon=True)
            for r in range(world_size)
        ]
        for process in self._processes:
            process.start()
        self._collect("startup", DEADLINE_S)

    def run(self, scenario: str, *args: Any, timeout: float = DEADLINE_S) -> List[Any]:
        """Runs scenario ("function" of scenarios.py, or "module.function") as fn(comm, *args)
        on every rank; returns the results by rank."""
        for inbox in self._inboxes:
            inbox.put((scenario, args))
        return self._collect(scenario, timeout)

    def _collect(self, what: str, timeout: float) -> List[Any]:
        deadline = time.monotonic() + timeout
        results: Dict[int, Any] = {}
        failures = []
        while len(results) + len(failures) < self.world_size:
            left = deadline - time.monotonic()
            try:
                rank, ok, value = self._outbox.get(timeout=min(max(left, 0.01), 0.5))
            except queue.Empty:
                dead = [r for r, p in enumerate(self._processes) if not p.is_alive() and r not in results]
                if left > 0 and not dead:
                    continue
                self.kill()
                missing = sorted(set(range(self.world_size)) - set(results))
                why = f"died (exit codes {[self._processes[r].exitcode for r in dead]})" if dead else \
                    f"gave no answer in {timeout} s"
                raise ScenarioFailed(f"{what}: ranks {missing} {why}") from None
            if ok:
                results[rank] = value
            else:
                failures.append(f"--- rank {rank} ---\n{value}")
        if failures:
            raise ScenarioFailed(f"{what} failed:\n" + "\n".join(failures))
        return [results[r] for r in range(self.world_size)]

    @property
    def alive(self) -> bool:
        return all(p.is_alive() for p in self._processes)

    def close(self) -> None:
        for inbox in self._inboxes:
            inbox.put(None)
        for process in self._processes:
            process.join(timeout=10)
        self.kill()

    def kill(self) -> None:
        for process in self._processes:
            if process.is_alive():
                process.kill()
                process.join(timeout=5)
