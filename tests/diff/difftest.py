#!/usr/bin/env python3
"""Differential test: seeded random programs of NCCL calls, run on Purlin and on NCCL.

  difftest.py --device cuda --libs purlin=LIBPURLIN,nccl=LIBNCCL [--procs 1|N]
  difftest.py --device host --libs purlin=LIBPURLIN [--procs 1|N]
  difftest.py --dry-run
  difftest.py ... --seed S --program I       (replays one program, printing it)
  difftest.py ... --seed S --program I --calls 0,2,3
                                             (only those of its calls, to narrow a failure down)

Programs come from program.py: calls of every collective, element type and
reduction (PreMulSum with a scalar per rank, host-immediate or in device
memory), counts from zero up, roots, in place or not, groups of several
calls, four communicators (two inits and two splits), two streams, eager or
captured in a CUDA graph, and now and then a call NCCL rejects (avg or
PreMulSum on a float8 type on a one-rank communicator), which every library
must reject with ncclInvalidArgument, writing nothing. Each rank's buffers
live in one arena with poisoned guards; before a run the arena is staged
(inputs, poisoned outputs), after it the whole arena is read back and
checked: every defined output against the float64 reference (program.py: bit for bit where no summation order can
change the result, else within a stated tolerance), and every byte no call
may write (guards, out-of-place inputs, scalars) unchanged. With both
libraries loaded (ctypes, RTLD_LOCAL, in one process) each program runs on
NCCL and then on Purlin over the same buffers, and their outputs are also
compared with each other. NCCL failing the reference means the test's model
is wrong, not Purlin; such failures are named so.

--device cuda: one GPU per rank (rank g on GPU g % count); --procs 1: one
process, one thread drives every rank (every call in a group); --procs N:
N spawned processes, one rank each (unique ids through a queue).
--device host: Purlin's host Atom (PURLIN_ATOM=host), NumPy arenas, no
graphs (a graph program runs eagerly once per replay).
--dry-run: no library; a model writes the expected results, and the checker
must pass them and catch faults planted in them. --self-check N plants the
same faults in the first N programs' real results.

Features that fail on Purlin today (program.KNOWN_FAILING) are left out
unless --without or DIFFTEST_WITHOUT names others ("none": leave out nothing);
the run's first lines say which. Every failure prints the command that
replays it (--seed S --program I with the same shape options); one that stops a
library (an error, a hang) also prints every communicator's asynchronous error
on every rank that has one, so where each rank stopped, not only the first.
Exit status:
0 when every program passed.
"""

from __future__ import annotations

import argparse
import ctypes
from ctypes import c_void_p
import multiprocessing as mp
import os
import queue
import random
import sys
import time
import traceback
from collections import Counter
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "pynccl"))

import numpy as np  # noqa: E402

import codec  # noqa: E402
import memory  # noqa: E402
import program as prog  # noqa: E402
from nccl_library import NCCLError, NCCLLibrary  # noqa: E402

MAX_REPORTED = 6  # issues printed per program


class Failed(Exception):
    """A library call failed or a rank hung: the session stops (every session, after a hang:
    its work may still hold the streams they share)."""

    def __init__(self, text: str, hang: bool, where: Optional[List[str]] = None):
        super().__init__(text)
        self.hang = hang
        self.where = where or []  # Session.stopped_at


# ---------------------------------------------------------------- one library

class Session:
    """One library's communicators on the ranks this process drives, and how it runs a program."""

    def __init__(self, name: str, lib: NCCLLibrary, mem, ranks: List[int], nranks: int, ids: List[bytes]):
        self.name, self.lib, self.mem, self.ranks, self.n = name, lib, mem, ranks, nranks
        self.broken: Optional[str] = None
        self.comms: List[Dict[int, int]] = [{} for _ in prog.COMMS]
        self._each(lambda g: self.comms[0].__setitem__(g, lib.comm_init_rank(nranks, ids[0], g)))
        self._each(lambda g: self.comms[1].__setitem__(g, lib.comm_init_rank(nranks, ids[1], g)))
        self._split(2, lambda g, into: lib.comm_split(self.comms[0][g], 0, nranks - 1 - g, into))
        self._split(3, lambda g, into: lib.comm_split(self.comms[1][g], g, 0, into))

    def _split(self, index: int, split) -> None:
        """comms[index] from split(g, into) on every local rank, read once the group ended."""
        made = {g: c_void_p() for g in self.ranks}
        self._each(lambda g: split(g, made[g]))
        for g, new in made.items():
            if not new.value:
                raise RuntimeError(f"{self.name}: ncclCommSplit gave rank {g} no communicator")
            self.comms[index][g] = new.value

    def _each(self, fn) -> None:
        """fn(g) for every local rank; in one group when this process drives several."""
        grouped = len(self.ranks) > 1
        if grouped:
            self.lib.group_start()
        for g in self.ranks:
            self.mem.select(g)
            fn(g)
        if grouped:
            self.lib.group_end()

    def close(self) -> None:
        """Destroys the communicators, split ones first, rank by rank."""
        for c in reversed(range(len(prog.COMMS))):
            for g in self.ranks:
                self.mem.select(g)
                self.lib.comm_destroy(self.comms[c][g])

    def _issue(self, p: prog.Program, lays, j: int, g: int, redops) -> None:
        op, lib = p.ops[j], self.lib
        b = lays[g].calls[j]
        base = self.mem.base(g)
        send, recv = base + b.send, base + b.recv
        comm, stream = self.comms[op.comm][g], self.mem.stream(g, op.stream)
        dt, c = op.dt.nccl, op.count
        red = redops.get((j, g), prog.REDOP_CODES.get(op.redop or "sum"))
        group = prog.members(op.comm, g, self.n)
        k, m = group.index(g), len(group)
        self.mem.select(g)
        if op.kind == "allreduce":
            lib.all_reduce(send, recv, c, dt, red, comm, stream)
        elif op.kind == "reduce":
            lib.reduce(send, recv, c, dt, red, op.root, comm, stream)
        elif op.kind == "reducescatter":
            lib.reduce_scatter(send, recv, c, dt, red, comm, stream)
        elif op.kind == "allgather":
            lib.all_gather(send, recv, c, dt, comm, stream)
        elif op.kind == "broadcast" and op.bcast:
            lib.bcast(recv, c, dt, op.root, comm, stream)
        elif op.kind == "broadcast":
            lib.broadcast(send, recv, c, dt, op.root, comm, stream)
        elif op.kind == "alltoall":
            lib.all_to_all(send, recv, c, dt, comm, stream)
        elif op.kind == "gather":
            lib.gather(send, recv, c, dt, op.root, comm, stream)
        elif op.kind == "scatter":
            lib.scatter(send, recv, c, dt, op.root, comm, stream)
        elif op.kind == "sendrecv":
            lib.send(send, c, dt, (k + op.root) % m, comm, stream)
            lib.recv(recv, c, dt, (k - op.root) % m, comm, stream)
        else:
            raise ValueError(op.kind)

    def _create_ops(self, p: prog.Program, lays) -> Dict[Tuple[int, int], int]:
        """PreMulSum ops, one per call and rank, each with that rank's scalar. A host-immediate
        scalar's memory is overwritten right after creation: the library must have read it."""
        redops = {}
        for j, op in enumerate(p.ops):
            if op.redop != "premulsum":
                continue
            for g in self.ranks:
                self.mem.select(g)
                comm = self.comms[op.comm][g]
                if op.residence == "host":
                    code = codec.scalar_code(prog.scalar(op, g, 0), op.dt)
                    buf = ctypes.create_string_buffer(np.array([code], dtype=op.dt.raw).tobytes(), 8)
                    redops[(j, g)] = self.lib.redop_create_premulsum(ctypes.addressof(buf), op.dt.nccl, 1, comm)
                    ctypes.memset(buf, 0xEE, 8)
                else:
                    ptr = self.mem.base(g) + lays[g].calls[j].scalar
                    redops[(j, g)] = self.lib.redop_create_premulsum(ptr, op.dt.nccl, 0, comm)
        return redops

    def _destroy_ops(self, p: prog.Program, redops, calls) -> None:
        for (j, g), handle in list(redops.items()):
            if j in calls:
                self.mem.select(g)
                self.lib.redop_destroy(handle, self.comms[p.ops[j].comm][g])
                del redops[(j, g)]

    def _reject(self, p: prog.Program, lays, j: int, g: int, redops) -> None:
        """Issues call j, which NCCL rejects (program.Op.rejected), outside any group: it must
        return ncclInvalidArgument before it starts anything."""
        try:
            self._issue(p, lays, j, g, redops)
        except NCCLError as exc:
            if exc.result == prog.INVALID_ARGUMENT:
                return
            raise
        self.broken = (f"rank {g}: call {j} ({p.ops[j].describe()}) returned 0; "
                       f"NCCL returns ncclInvalidArgument ({prog.INVALID_ARGUMENT})")
        raise Failed(self.broken, False)

    def _steps(self, p: prog.Program, lays, redops) -> None:
        j = 0
        for step in p.steps:
            if step[0].rejected:  # alone in its step (program.py)
                for g in self.ranks:
                    self._reject(p, lays, j, g, redops)
                j += 1
                continue
            grouped = len(step) > 1 or len(self.ranks) > 1 or any(op.kind == "sendrecv" for op in step)
            first = j
            if grouped:
                self.lib.group_start()
            for _ in step:
                for g in self.ranks:
                    self._issue(p, lays, j, g, redops)
                j += 1
            if grouped:
                self.lib.group_end()
            if p.early_destroy:  # NCCL: an op may go as soon as the last call given it returns
                self._destroy_ops(p, redops, range(first, j))

    def _wait(self, deadline: float) -> None:
        for g in self.ranks:
            self.mem.wait(g, self.lib, [self.comms[c][g] for c in range(len(prog.COMMS))], deadline)

    def stopped_at(self) -> List[str]:
        """After a failure, each communicator's asynchronous error on each local rank that has
        one, a second on (its other ranks' waits end about then): where every rank stopped,
        which Purlin names (rank, block, step, flag slot), not only the first to report."""
        time.sleep(1)
        out = []
        for c, name in enumerate(prog.COMMS):
            for g in self.ranks:
                self.mem.select(g)
                try:
                    self.lib.check_async(self.comms[c][g])
                except NCCLError as exc:
                    out.append(f"{name}, global rank {g}: {str(exc).rsplit('purlin: ', 1)[-1]}")
        return out

    def run(self, p: prog.Program, lays, images, timeout: float) -> Dict[Tuple[int, int], np.ndarray]:
        """Runs p; returns every local rank's arena after each replay."""
        deadline = time.monotonic() + timeout
        out = {}
        try:
            redops = self._create_ops(p, lays)
            graph = p.graph and self.mem.graphs
            if graph:
                for g in self.ranks:
                    self.mem.capture_begin(g)
                self._steps(p, lays, redops)
                for g in self.ranks:
                    self.mem.capture_end(g)
                for g in self.ranks:
                    self.mem.instantiate(g)
            for r in range(p.replays):
                for g in self.ranks:
                    self.mem.upload(g, images[(g, r)])
                if graph:
                    for g in self.ranks:
                        self.mem.launch(g)
                else:
                    self._steps(p, lays, redops)
                self._wait(deadline)
                for g in self.ranks:
                    out[(g, r)] = self.mem.download(g, lays[g].size)
            if graph:
                for g in self.ranks:
                    self.mem.drop_graph(g)
            self._destroy_ops(p, redops, range(len(p.ops)))
        except (NCCLError, memory.Hang, memory.CudaError) as exc:
            if p.graph and self.mem.graphs:
                for g in self.ranks:
                    self.mem.capture_abandon(g)
            self.broken = f"{type(exc).__name__}: {exc}"
            raise Failed(self.broken, isinstance(exc, memory.Hang), self.stopped_at()) from exc
        return out


# ---------------------------------------------------------------- checks

def where(lay: prog.Layout, p: prog.Program, byte: int) -> str:
    """Names the buffer byte lies in."""
    for j, b in enumerate(lay.calls):
        off, n = b.inputs
        if off <= byte < off + n:
            return f"byte {byte - off} of call {j}'s input ({p.ops[j].kind})"
        if b.scalar is not None and b.scalar <= byte < b.scalar + 8:
            return f"call {j}'s device scalar"
    before = [j for j, b in enumerate(lay.calls) if min(b.send, b.recv) <= byte]
    return f"a guard byte at {byte}" + (f", after call {before[-1]}'s buffers" if before else "")


def compare(e: prog.Expect, got: np.ndarray, dt: codec.DType, against: str) -> Optional[str]:
    """Differences of got from e, or None."""
    if e.exact:
        bad = np.flatnonzero(got != e.codes)
        if not bad.size:
            return None
        i = int(bad[0])
        return (f"{bad.size} of {got.size} elements differ from {against} (bit for bit); first [{i}]: "
                f"got {codec.show(got[i], dt)}, want {codec.show(e.codes[i], dt)}")
    v = codec.decode(got, dt)
    with np.errstate(invalid="ignore"):
        bad = np.flatnonzero(~(np.abs(v - e.value) <= e.tol))
    if not bad.size:
        return None
    i = int(bad[0])
    return (f"{bad.size} of {got.size} elements off {against} by more than the tolerance; first [{i}]: "
            f"got {v[i]!r}, want {e.value[i]!r} +- {e.tol[i]:.3g}")


def check(p: prog.Program, lay: prog.Layout, image: np.ndarray, after: np.ndarray, expects,
          skip=lambda op: False) -> List[str]:
    """What is wrong in one rank's arena after a run (outputs of calls skip(op) left out)."""
    issues = []
    changed, first = 0, None
    for lo, hi in lay.unchanged_spans():
        bad = np.flatnonzero(after[lo:hi] != image[lo:hi])
        if bad.size:
            changed += bad.size
            first = lo + int(bad[0]) if first is None else first
    if changed:
        issues.append(f"{changed} bytes changed that no call may write; first: {where(lay, p, first)}")
    for j, (b, e) in enumerate(zip(lay.calls, expects)):
        if b.output is None or e is None or skip(p.ops[j]):
            continue
        off, n = b.output
        msg = compare(e, after[off:off + n].view(p.ops[j].dt.raw), p.ops[j].dt, "the reference")
        if msg:
            issues.append(f"call {j} ({p.ops[j].describe()}): {msg}")
    return issues


def differ(p: prog.Program, lay: prog.Layout, mine: np.ndarray, theirs: np.ndarray, expects,
           skip=lambda op: False) -> List[str]:
    """Where two libraries' outputs differ: bit for bit where the reference is exact, else by
    more than twice its tolerance (outputs of calls skip(op) left out)."""
    issues = []
    for j, (b, e) in enumerate(zip(lay.calls, expects)):
        if b.output is None or e is None or skip(p.ops[j]):
            continue
        off, n = b.output
        dt = p.ops[j].dt
        other = theirs[off:off + n].view(dt.raw)
        # Each within tol of the float64 value, so within 2 tol of each other.
        ref = prog.Expect(True, codes=other) if e.exact else \
            prog.Expect(False, value=codec.decode(other, dt), tol=2 * e.tol)
        msg = compare(ref, mine[off:off + n].view(dt.raw), dt, "NCCL's")
        if msg:
            issues.append(f"call {j} ({p.ops[j].describe()}): {msg}")
    return issues


def model(p: prog.Program, lay: prog.Layout, image: np.ndarray, expects) -> np.ndarray:
    """A library that is right: the staged arena with every expected output written in."""
    after = image.copy()
    for j, (b, e) in enumerate(zip(lay.calls, expects)):
        if b.output is None or e is None:
            continue
        off, n = b.output
        codes = e.codes if e.exact else codec.encode(e.value, p.ops[j].dt)
        after[off:off + n] = codes.view(np.uint8)
    return after


def plant_faults(p: prog.Program, lay: prog.Layout, image: np.ndarray, after: np.ndarray, expects) -> List[str]:
    """Plants faults in copies of a correct arena; returns the ones check() missed, and
    the output faults differ() missed (comparing the faulty arena with the correct one)."""
    missed, tried = [], 0
    faults = [("a guard byte", lambda a: a.__setitem__(prog.GUARD - 1, a[prog.GUARD - 1] ^ 0xFF))]
    for j, (b, e) in enumerate(zip(lay.calls, expects)):
        op = p.ops[j]
        if b.output is not None and e is not None and b.output[1] > 0:
            off, size = b.output[0], op.dt.size
            poison = codec.poison_byte(op.dt)
            faults.append((f"call {j}'s first output element left unwritten",
                           lambda a, off=off, size=size, poison=poison: a.__setitem__(slice(off, off + size), poison)))
            if e.exact:
                faults.append((f"one bit of call {j}'s last output element",
                               lambda a, end=sum(b.output): a.__setitem__(end - 1, a[end - 1] ^ 0x01)))
        if not op.inplace and b.inputs[1] > 0:
            faults.append((f"call {j}'s input overwritten",
                           lambda a, off=b.inputs[0]: a.__setitem__(off, a[off] ^ 0x10)))
    for name, plant in faults:
        bad = after.copy()
        plant(bad)
        if not np.array_equal(bad, after):
            tried += 1
            if not check(p, lay, image, bad, expects):
                missed.append(name)
            if "output" in name and not differ(p, lay, bad, after, expects):
                missed.append(f"{name}, comparing two libraries")
    return missed if tried else ["no fault could be planted"]


# ---------------------------------------------------------------- one process

class Report:
    def __init__(self):
        self.counts: Counter = Counter()
        self.lines: List[str] = []


def replay_hint(opts, p: prog.Program) -> str:
    mode = f"--device {opts.device} --nranks {opts.nranks} --procs {opts.procs}"
    without = ",".join(sorted(opts.without)) or "none"
    caps = f"--max-count {opts.max_count} --max-bytes {opts.max_bytes} --without {without}"
    libs = ",".join(f"{name}={path}" for name, path in opts.libs) or "purlin=build/libpurlin.so"
    calls = f" --calls {','.join(map(str, sorted(opts.calls)))}" if opts.calls is not None else ""
    return (f"replay: python3 tests/diff/difftest.py {mode} {caps} --libs {libs} --seed {p.seed} "
            f"--program {p.index}{calls}")


def run_programs(opts, ranks: List[int], sessions: List[Session], mem) -> Report:
    """Runs every program of the run on sessions (none in a dry run); rank list is this process's."""
    rep = Report()
    t0 = time.monotonic()
    for done, index in enumerate(opts.indices):
        if done and done % 100 == 0 and 0 in ranks:
            print(f"difftest: {done} programs in {time.monotonic() - t0:.1f} s", flush=True)
        # One process holds every rank, so it alone may stop early: processes would part ways.
        if opts.procs == 1 and done and time.monotonic() - t0 > opts.timeout:
            rep.lines.append(f"difftest: stopped after {done} of {len(opts.indices)} programs: "
                             f"--timeout {opts.timeout:g} s passed")
            break
        p = prog.generate(opts.seed, index, opts.nranks, opts.max_count, opts.max_bytes, without=opts.without)
        if opts.calls is not None:
            p = prog.keep_calls(p, opts.calls)
        if opts.verbose or opts.program is not None:
            print(p.describe(), flush=True)
        lays = {g: prog.layout(p, g) for g in ranks}
        inputs = prog.Inputs(p)
        images, expects = {}, {}
        for g in ranks:
            if lays[g].size > opts.arena:
                raise RuntimeError(f"program {index}: rank {g} needs {lays[g].size} arena bytes of {opts.arena}")
            for r in range(p.replays):
                images[(g, r)] = lays[g].image(p, inputs, g, r)
                expects[(g, r)] = [prog.expect(p, inputs, j, g, r) for j in range(len(p.ops))]
        issues: List[str] = []
        stops: List[str] = []  # where each rank stopped, after a library failed
        outs = {}
        if not sessions:  # dry run
            outs["model"] = {(g, r): model(p, lays[g], images[(g, r)], expects[(g, r)]) for (g, r) in images}
        for s in sessions:
            if s.broken:
                continue
            try:
                outs[s.name] = s.run(p, lays, images, opts.call_timeout)
            except Failed as exc:
                rep.counts[f"{s.name} errors"] += 1
                issues.append(f"{s.name}: {exc} (this library stops here)")
                stops += [f"{s.name} stopped at: {w}" for w in exc.where]
                if exc.hang:
                    for other in sessions:
                        other.broken = other.broken or f"stopped after {s.name} hung"
                    issues.append("every library stops here: the hung work may hold the streams")
        for name, result in outs.items():
            for (g, r), after in result.items():
                skip = (lambda op: op.nccl_tail_defect) if name == "nccl" else (lambda op: False)
                for msg in check(p, lays[g], images[(g, r)], after, expects[(g, r)], skip):
                    rep.counts[f"{name} vs reference"] += 1
                    what = "NCCL disagrees with the test's reference (the test is wrong)" if name == "nccl" else name
                    issues.append(f"{what}: rank {g} replay {r}: {msg}")
                if index < opts.self_check:
                    missed = plant_faults(p, lays[g], images[(g, r)], after, expects[(g, r)])
                    rep.counts["self-checks"] += 1
                    for m in missed:
                        rep.counts["self-check misses"] += 1
                        issues.append(f"self-check: rank {g} replay {r}: the checker missed a planted fault: {m}")
        if "purlin" in outs and "nccl" in outs:
            for (g, r), after in outs["purlin"].items():
                for msg in differ(p, lays[g], after, outs["nccl"][(g, r)], expects[(g, r)],
                                  lambda op: op.nccl_tail_defect):
                    rep.counts["purlin vs nccl"] += 1
                    issues.append(f"purlin differs from NCCL: rank {g} replay {r}: {msg}")
        if 0 in ranks:  # counted once, by rank 0's process
            rep.counts["programs"] += 1
            rep.counts["calls"] += len(p.ops)
            rep.counts["graph programs"] += p.graph
            rep.counts["premulsum calls"] += sum(op.redop == "premulsum" for op in p.ops)
            rep.counts["rejected calls"] += sum(op.rejected for op in p.ops)
            if "nccl" in outs:
                rep.counts["calls NCCL leaves a tail of (Purlin checked alone)"] += sum(op.nccl_tail_defect for op in p.ops)
        if issues:
            rep.counts["failing program runs"] += 1
            head = f"difftest FAIL ranks {ranks}: {p.describe()}"
            rep.lines += [head] + [f"  - {m}" for m in issues[:MAX_REPORTED]]
            if len(issues) > MAX_REPORTED:
                rep.lines.append(f"  - ... {len(issues) - MAX_REPORTED} more")
            rep.lines += [f"    {w}" for w in stops]
            rep.lines.append("  " + replay_hint(opts, p))
        for line in rep.lines:
            print(line, flush=True)
        rep.lines.clear()
        if sessions and all(s.broken for s in sessions):
            break
    return rep


def worker(opts, ranks: List[int], ids: Dict[str, List[bytes]], id_queue=None) -> Report:
    """One process's part: load the libraries, make communicators, run the programs."""
    if opts.dry_run:
        return run_programs(opts, ranks, [], None)
    libs = [(name, NCCLLibrary(path)) for name, path in opts.libs]
    if id_queue is not None:  # rank 0 of several processes makes the ids
        ids = {name: [lib.get_unique_id(), lib.get_unique_id()] for name, lib in libs}
        for _ in range(opts.nranks - 1):
            id_queue.put(ids)
    purlin = dict(libs).get("purlin")
    mem = memory.make_memory(opts.device, ranks, opts.arena, purlin)
    if not ids:
        ids = {name: [lib.get_unique_id(), lib.get_unique_id()] for name, lib in libs}
    sessions = []
    for name, lib in libs:
        t0 = time.monotonic()
        sessions.append(Session(name, lib, mem, ranks, opts.nranks, ids[name]))
        print(f"difftest: ranks {ranks}: {name} ({lib.path}, NCCL API {lib.get_version()}): "
              f"{len(prog.COMMS)} communicators in {time.monotonic() - t0:.1f} s", flush=True)
    rep = run_programs(opts, ranks, sessions, mem)
    for s in sessions:
        if s.broken:
            continue
        try:
            s.close()
        except NCCLError as exc:
            rep.counts[f"{s.name} errors"] += 1
            print(f"difftest FAIL ranks {ranks}: {s.name}: destroying the communicators: {exc}", flush=True)
    mem.close()
    return rep


def _process(rank: int, opts, id_queue, results) -> None:
    try:
        if rank == 0:
            rep = worker(opts, [0], {}, id_queue)
        else:
            rep = worker(opts, [rank], id_queue.get(timeout=opts.timeout))
        results.put((rank, dict(rep.counts), None))
    except BaseException:
        results.put((rank, {}, traceback.format_exc()))


def run_processes(opts) -> Report:
    ctx = mp.get_context("spawn")
    id_queue, results = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=_process, args=(r, opts, id_queue, results), daemon=True) for r in range(opts.nranks)]
    for proc in procs:
        proc.start()
    rep, done = Report(), set()
    deadline = time.monotonic() + opts.timeout
    while len(done) < opts.nranks:
        try:
            rank, counts, error = results.get(timeout=1)
        except queue.Empty:
            dead = [r for r, proc in enumerate(procs) if not proc.is_alive() and r not in done]
            if time.monotonic() < deadline and not dead:
                continue
            why = f"ranks {dead} died" if dead else f"no answer in {opts.timeout} s"
            rep.counts["process failures"] += 1
            rep.lines.append(f"difftest FAIL: {why}; stopping every rank")
            break
        done.add(rank)
        rep.counts.update(counts)
        if error:  # the other ranks would wait for it: stop them
            rep.counts["process failures"] += 1
            rep.lines.append(f"difftest FAIL: rank {rank} raised (stopping every rank):\n{error}")
            break
    for proc in procs:
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=5)
    return rep


# ---------------------------------------------------------------- command line

def parse(argv: List[str]):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=["cuda", "host"], default="cuda")
    ap.add_argument("--libs", default="", help="name=path,...: purlin=libpurlin.so and/or nccl=libnccl.so.2")
    ap.add_argument("--nranks", type=int, default=2)
    ap.add_argument("--procs", type=int, default=1, help="1 (one process drives every rank) or nranks")
    ap.add_argument("--programs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=None, help="default: DIFFTEST_SEED, else random (printed)")
    ap.add_argument("--program", type=int, default=None, help="run only this program index")
    ap.add_argument("--calls", default=None,
                    help="with --program: only these of its calls, comma-separated (numbered as its listing "
                    "numbers them; the cut program numbers its own anew), to narrow a failure down")
    ap.add_argument("--max-count", type=int, default=None, help="largest count (default 2^19 cuda, 2^14 host)")
    ap.add_argument("--max-bytes", type=int, default=None, help="one rank's buffers per program (48 MiB, 8 MiB)")
    ap.add_argument("--dry-run", action="store_true", help="no library: model results, checker self-test")
    ap.add_argument("--self-check", type=int, default=5, help="plant faults in the first N programs' results")
    ap.add_argument("--call-timeout", type=float, default=60, help="seconds one program may take on a library")
    ap.add_argument("--timeout", type=float, default=600,
                    help="seconds for the whole run: one process starts no program past them (and says how "
                         "many it ran); processes that have not all answered by then fail")
    ap.add_argument("--without", default=None,
                    help="features to leave out, comma-separated, or none (default: DIFFTEST_WITHOUT, else the "
                    "known failures: " + ",".join(prog.KNOWN_FAILING) + "): " +
                    "; ".join(f"{k}: {v}" for k, v in prog.FEATURES.items()))
    ap.add_argument("--verbose", action="store_true", help="print every program")
    opts = ap.parse_args(argv)
    opts.libs = [tuple(item.split("=", 1)) for item in opts.libs.split(",") if item]
    if not opts.dry_run and not opts.libs:
        ap.error("--libs is needed (or --dry-run)")
    if any(len(item) != 2 or item[0] not in ("purlin", "nccl") for item in opts.libs):
        ap.error("--libs takes purlin=PATH and/or nccl=PATH")
    if opts.device == "host" and any(name != "purlin" for name, _ in opts.libs):
        ap.error("the host device runs Purlin only (its host Atom)")
    if opts.without is None:
        opts.without = os.environ.get("DIFFTEST_WITHOUT") or ",".join(prog.KNOWN_FAILING)
    opts.without = frozenset(w for w in opts.without.split(",") if w and w != "none")
    if opts.without - set(prog.FEATURES):
        ap.error(f"--without: unknown {sorted(opts.without - set(prog.FEATURES))}; known: {sorted(prog.FEATURES)}")
    if opts.procs not in (1, opts.nranks):
        ap.error("--procs is 1 or --nranks")
    if opts.seed is None:
        opts.seed = int(os.environ.get("DIFFTEST_SEED") or random.SystemRandom().randrange(1 << 31))
    big = opts.device == "cuda"
    opts.max_count = opts.max_count or (1 << 19 if big else 1 << 14)
    opts.max_bytes = opts.max_bytes or ((48 if big else 8) << 20)
    opts.arena = opts.max_bytes + opts.max_bytes // 8 + (1 << 20)
    opts.indices = [opts.program] if opts.program is not None else list(range(opts.programs))
    if opts.calls is not None:
        if opts.program is None:
            ap.error("--calls needs --program")
        try:
            opts.calls = frozenset(int(c) for c in opts.calls.split(",") if c)
            prog.keep_calls(prog.generate(opts.seed, opts.program, opts.nranks, opts.max_count, opts.max_bytes,
                                          without=opts.without), opts.calls)
        except ValueError as exc:
            ap.error(f"--calls: {exc}")
    if opts.dry_run:
        opts.self_check = max(opts.indices) + 1
    return opts


def main(argv: List[str]) -> int:
    opts = parse(argv)
    if opts.device == "host":
        os.environ.setdefault("PURLIN_ATOM", "host")
    # NCCL, the oracle, connects its peers at init rather than at a communicator's first
    # call of a kind, which may come inside a graph capture.
    os.environ.setdefault("NCCL_RUNTIME_CONNECT", "0")
    libs = ",".join(name for name, _ in opts.libs) or "none (dry run)"
    mode = "one process" if opts.procs == 1 else f"{opts.procs} processes"
    print(f"difftest: seed {opts.seed}, {len(opts.indices)} programs, {opts.nranks} ranks on {opts.device}, "
          f"{mode}, libraries: {libs}", flush=True)
    for name in sorted(opts.without):
        why = prog.KNOWN_FAILING.get(name, "asked for")
        print(f"difftest: leaving out {name} ({prog.FEATURES[name]}): {why}", flush=True)
    t0 = time.monotonic()
    if opts.procs == 1 or opts.dry_run:
        rep = worker(opts, list(range(opts.nranks)), {})
    else:
        rep = run_processes(opts)
    for line in rep.lines:
        print(line, flush=True)
    c = rep.counts
    failures = sum(v for k, v in c.items() if k.endswith(("errors", "vs reference", "vs nccl", "misses", "failures")))
    detail = ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
    print(f"difftest: {'PASS' if not failures else 'FAIL'}: seed {opts.seed}, {mode}, "
          f"{time.monotonic() - t0:.1f} s: {detail}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
