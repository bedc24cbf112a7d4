#!/usr/bin/env python3
"""CuPy's own NCCL clients on Purlin: N ranks as processes.

CuPy links `libnccl.so.2` into its binding `cupy.cuda.nccl`, and builds its
distributed API (`cupyx.distributed`, `NCCLBackend`) on that binding: scatter,
gather, all-to-all and send_recv as grouped sends and receives, sparse matrices
as a size exchange followed by groups of sends of different lengths. Neither
was written with Purlin in mind. run.sh starts this script with Purlin in
LD_PRELOAD; each rank proves that Purlin serves the names CuPy binds, then runs
every case on GPU `rank % devices` against a numpy reference computed from
every rank's inputs (each rank regenerates the others' from their seeds).

Exit status 0 only if every rank ran every case and every result matched.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import sys
import traceback
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pynccl"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))

from ranks import collect, finish, free_port, start  # noqa: E402

# The NCCL names cupy.cuda.nccl (CuPy 13-14) binds.
CUPY_IMPORTS = """ncclGetErrorString ncclGetVersion ncclCommGetAsyncError ncclGetUniqueId ncclCommInitRank
ncclCommInitAll ncclGroupStart ncclGroupEnd ncclCommDestroy ncclCommAbort ncclCommCuDevice ncclCommUserRank
ncclCommCount ncclAllReduce ncclReduce ncclBroadcast ncclBcast ncclReduceScatter ncclAllGather ncclSend
ncclRecv""".split()

# Every dtype NCCLBackend maps (numpy type characters); complex travels as twice the floats.
BACKEND_DTYPES = "bBiIlLqQefdFD"
OPS = ("sum", "prod", "max", "min")


class Ctx:
    def __init__(self, rank: int, nranks: int, seed: int, port: int):
        self.rank, self.nranks, self.seed, self.port = rank, nranks, seed, port
        self.notes: list[str] = []
        self.backend = None  # cupyx.distributed.NCCLBackend, made by the first case that needs it

    def data(self, rank: int, tag: str, dtype: str, shape) -> np.ndarray:
        """Rank's input for case tag: the same on every rank that asks."""
        rng = np.random.default_rng([self.seed, rank, sum(map(ord, tag))])
        dt = np.dtype(dtype)
        if dt.kind in "iu":  # small values: sums, products and extremes stay in range
            lo = 0 if dt.kind == "u" else -3
            return rng.integers(lo, 4, size=shape).astype(dt)
        if dt.kind == "c":
            return (rng.uniform(-1, 1, size=shape) + 1j * rng.uniform(-1, 1, size=shape)).astype(dt)
        return rng.uniform(-1, 1, size=shape).astype(dt)

    def all_data(self, tag: str, dtype: str, shape) -> list[np.ndarray]:
        return [self.data(r, tag, dtype, shape) for r in range(self.nranks)]


def reduce_ref(parts: list[np.ndarray], op: str) -> np.ndarray:
    """The reduction of parts in float64 (complex128) for floats, in the dtype for integers."""
    dt = parts[0].dtype
    wide = parts if dt.kind in "iu" else [p.astype(np.complex128 if dt.kind == "c" else np.float64) for p in parts]
    fold = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[op]
    out = wide[0].copy()
    for p in wide[1:]:
        out = fold(out, p)
    return out


def same(got, want: np.ndarray, what: str) -> None:
    import cupy

    got = cupy.asnumpy(got) if not isinstance(got, np.ndarray) else got
    tol = {"e": 2e-3, "f": 1e-5, "F": 1e-5, "d": 1e-12, "D": 1e-12}.get(np.dtype(got.dtype).char, 0)
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {got.shape}, want {want.shape}")
    if tol == 0:
        bad = np.flatnonzero(got.reshape(-1) != want.astype(got.dtype).reshape(-1))
    else:
        bad = np.flatnonzero(~np.isclose(got.reshape(-1), want.reshape(-1), rtol=tol, atol=tol * 4))
    if bad.size:
        i = bad[0]
        raise AssertionError(f"{what}: {bad.size} of {got.size} elements wrong, first [{i}] = "
                             f"{got.reshape(-1)[i]!r}, want {want.reshape(-1)[i]!r}")


# ---------- cupy.cuda.nccl, the binding ----------

def nccl_dtypes():
    from cupy.cuda import nccl

    table = {"b": "NCCL_INT8", "B": "NCCL_UINT8", "i": "NCCL_INT32", "I": "NCCL_UINT32", "q": "NCCL_INT64",
             "Q": "NCCL_UINT64", "e": "NCCL_FLOAT16", "f": "NCCL_FLOAT32", "d": "NCCL_FLOAT64"}
    return {ch: getattr(nccl, name) for ch, name in table.items() if hasattr(nccl, name)}


def nccl_ops():
    from cupy.cuda import nccl

    return {"sum": nccl.NCCL_SUM, "prod": nccl.NCCL_PROD, "max": nccl.NCCL_MAX, "min": nccl.NCCL_MIN}


def case_binding_api(ctx: Ctx, comm, device: int) -> None:
    from cupy.cuda import nccl

    version = nccl.get_version()
    if len(str(version)) != 5:
        raise AssertionError(f"get_version gave {version}; CuPy expects a 5-digit code")
    if (comm.rank_id(), comm.size(), comm.device_id()) != (ctx.rank, ctx.nranks, device):
        raise AssertionError(f"rank_id/size/device_id gave {(comm.rank_id(), comm.size(), comm.device_id())}, "
                             f"want {(ctx.rank, ctx.nranks, device)}")
    comm.check_async_error()
    ctx.notes.append(f"binding: NCCL version {version} (built against {nccl.get_build_version()})")


def case_binding_allreduce(ctx: Ctx, comm, device: int) -> None:
    """allReduce over every dtype x op, odd length, out of place and in place."""
    import cupy

    stream = cupy.cuda.get_current_stream()
    for ch, dt in nccl_dtypes().items():
        for opname, op in nccl_ops().items():
            tag = f"ar-{ch}-{opname}"
            mine = cupy.asarray(ctx.data(ctx.rank, tag, ch, 1023))
            want = reduce_ref(ctx.all_data(tag, ch, 1023), opname)
            out = cupy.full_like(mine, 7)
            comm.allReduce(mine.data.ptr, out.data.ptr, mine.size, dt, op, stream.ptr)
            comm.allReduce(mine.data.ptr, mine.data.ptr, mine.size, dt, op, stream.ptr)
            stream.synchronize()
            same(out, want, f"allReduce {ch} {opname}")
            same(mine, want, f"allReduce {ch} {opname} in place")


def case_binding_rooted(ctx: Ctx, comm, device: int) -> None:
    """reduce, broadcast and bcast from every root; the receive buffers of others untouched by reduce."""
    import cupy

    stream = cupy.cuda.get_current_stream()
    dts = nccl_dtypes()
    for root in range(ctx.nranks):
        for ch in "fqe":
            tag = f"rooted-{ch}-{root}"
            mine = cupy.asarray(ctx.data(ctx.rank, tag, ch, 777))
            out = cupy.full_like(mine, 5)
            comm.reduce(mine.data.ptr, out.data.ptr, mine.size, dts[ch], nccl_ops()["max"], root, stream.ptr)
            bc = mine.copy()
            comm.bcast(bc.data.ptr, bc.size, dts[ch], root, stream.ptr)
            bo = cupy.zeros_like(mine)
            comm.broadcast(mine.data.ptr, bo.data.ptr, mine.size, dts[ch], root, stream.ptr)
            stream.synchronize()
            parts = ctx.all_data(tag, ch, 777)
            if ctx.rank == root:
                same(out, reduce_ref(parts, "max"), f"reduce {ch} root {root}")
            else:
                same(out, np.full(777, 5, dtype=ch), f"reduce {ch} root {root}: a non-root's receive buffer")
            same(bc, parts[root], f"bcast {ch} root {root}")
            same(bo, parts[root], f"broadcast {ch} root {root}")


def case_binding_scatter_gather(ctx: Ctx, comm, device: int) -> None:
    """reduceScatter and allGather, and both as one group of two."""
    import cupy
    from cupy.cuda import nccl

    stream = cupy.cuda.get_current_stream()
    n, count = ctx.nranks, 301
    for ch in "fid":
        dt = nccl_dtypes()[ch]
        rs_in = cupy.asarray(ctx.data(ctx.rank, f"rs-{ch}", ch, n * count))
        rs_out = cupy.zeros(count, dtype=ch)
        ag_in = cupy.asarray(ctx.data(ctx.rank, f"ag-{ch}", ch, count))
        ag_out = cupy.zeros(n * count, dtype=ch)
        nccl.groupStart()
        comm.reduceScatter(rs_in.data.ptr, rs_out.data.ptr, count, dt, nccl_ops()["sum"], stream.ptr)
        comm.allGather(ag_in.data.ptr, ag_out.data.ptr, count, dt, stream.ptr)
        nccl.groupEnd()
        stream.synchronize()
        full = reduce_ref(ctx.all_data(f"rs-{ch}", ch, n * count), "sum")
        same(rs_out, full[ctx.rank * count:(ctx.rank + 1) * count], f"reduceScatter {ch}")
        same(ag_out, np.concatenate(ctx.all_data(f"ag-{ch}", ch, count)), f"allGather {ch}")


def case_binding_p2p(ctx: Ctx, comm, device: int) -> None:
    """A ring of sends and receives in a group, then one to itself."""
    import cupy
    from cupy.cuda import nccl

    stream = cupy.cuda.get_current_stream()
    n, dt = ctx.nranks, nccl_dtypes()["f"]
    nxt, prv = (ctx.rank + 1) % n, (ctx.rank - 1) % n
    send = cupy.asarray(ctx.data(ctx.rank, "ring", "f", 4099))
    recv = cupy.zeros_like(send)
    nccl.groupStart()
    comm.send(send.data.ptr, send.size, dt, nxt, stream.ptr)
    comm.recv(recv.data.ptr, recv.size, dt, prv, stream.ptr)
    nccl.groupEnd()
    self_recv = cupy.zeros_like(send)
    nccl.groupStart()
    comm.recv(self_recv.data.ptr, send.size, dt, ctx.rank, stream.ptr)
    comm.send(send.data.ptr, send.size, dt, ctx.rank, stream.ptr)
    nccl.groupEnd()
    stream.synchronize()
    same(recv, ctx.data(prv, "ring", "f", 4099), "ring receive")
    same(self_recv, ctx.data(ctx.rank, "ring", "f", 4099), "a send to itself")


def case_binding_errors(ctx: Ctx, comm, device: int) -> None:
    """Bad calls raise NcclError with NCCL's code; the communicator still works after them."""
    import cupy
    from cupy.cuda import nccl

    stream = cupy.cuda.get_current_stream()
    buf = cupy.ones(16, dtype="f")
    dt, op = nccl_dtypes()["f"], nccl_ops()["sum"]
    bad = [("reduce to root n", lambda: comm.reduce(buf.data.ptr, buf.data.ptr, 16, dt, op, ctx.nranks, stream.ptr)),
           ("an unknown dtype", lambda: comm.allReduce(buf.data.ptr, buf.data.ptr, 16, 99, op, stream.ptr)),
           ("an unknown op", lambda: comm.allReduce(buf.data.ptr, buf.data.ptr, 16, dt, 99, stream.ptr)),
           ("a send to peer n", lambda: comm.send(buf.data.ptr, 16, dt, ctx.nranks, stream.ptr))]
    for what, call in bad:
        try:
            call()
        except nccl.NcclError as err:
            if err.status != 4:  # ncclInvalidArgument
                raise AssertionError(f"{what}: status {err.status} ({err}), want 4 (invalid argument)")
        else:
            raise AssertionError(f"{what}: no error")
    comm.allReduce(buf.data.ptr, buf.data.ptr, 16, dt, op, stream.ptr)
    stream.synchronize()
    same(buf, np.full(16, ctx.nranks, dtype="f"), "allReduce after the refused calls")
    comm.check_async_error()


def case_binding_lifecycle(ctx: Ctx, comm, device: int) -> None:
    """initAll on this rank's device alone, a one-rank communicator aborted, get_unique_id twice."""
    import cupy
    from cupy.cuda import nccl

    (solo,) = nccl.NcclCommunicator.initAll([device])
    buf = cupy.arange(10, dtype="f")
    solo.allReduce(buf.data.ptr, buf.data.ptr, 10, nccl_dtypes()["f"], nccl_ops()["sum"],
                   cupy.cuda.get_current_stream().ptr)
    cupy.cuda.get_current_stream().synchronize()
    same(buf, np.arange(10, dtype="f"), "a one-rank initAll communicator's allReduce")
    if (solo.rank_id(), solo.size(), solo.device_id()) != (0, 1, device):
        raise AssertionError(f"initAll([{device}]) gave rank/size/device {(solo.rank_id(), solo.size(), solo.device_id())}")
    solo.destroy()
    uid = nccl.get_unique_id()
    if uid == nccl.get_unique_id():
        raise AssertionError("get_unique_id gave the same id twice")
    aborted = nccl.NcclCommunicator(1, uid, 0)
    aborted.abort()
    aborted.destroy()  # after abort: a no-op in CuPy (the handle is cleared)


BINDING_CASES = [case_binding_api, case_binding_allreduce, case_binding_rooted, case_binding_scatter_gather,
                 case_binding_p2p, case_binding_errors, case_binding_lifecycle]


# ---------- cupyx.distributed.NCCLBackend ----------

def backend_dense(ctx: Ctx, be, ch: str) -> None:
    """Every dense method of NCCLBackend on dtype ch."""
    import cupy

    n, r = ctx.nranks, ctx.rank
    shape = (3, 5, 7)
    # Complex arrays only copy: NCCLBackend refuses every reduction of them, sum included
    # (CuPy 14 compares the op's name with NCCL's number for sum), on NCCL as on Purlin.
    ops = () if ch in "FD" else OPS
    for op in ops:
        tag = f"be-ar-{ch}-{op}"
        out = cupy.zeros(shape, dtype=ch)
        be.all_reduce(cupy.asarray(ctx.data(r, tag, ch, shape)), out, op)
        same(out, reduce_ref(ctx.all_data(tag, ch, shape), op), f"all_reduce {ch} {op}")
    for root in range(n):
        tag = f"be-red-{ch}-{root}"
        out = cupy.zeros(shape, dtype=ch)
        if ops:
            be.reduce(cupy.asarray(ctx.data(r, tag, ch, shape)), out, root, "sum")
            if r == root:
                same(out, reduce_ref(ctx.all_data(tag, ch, shape), "sum"), f"reduce {ch} root {root}")
        tag = f"be-bc-{ch}-{root}"
        buf = cupy.asarray(ctx.data(r, tag, ch, shape))
        be.broadcast(buf, root)
        same(buf, ctx.data(root, tag, ch, shape), f"broadcast {ch} root {root}")
        tag = f"be-sc-{ch}-{root}"
        out = cupy.zeros((5, 3), dtype=ch)
        be.scatter(cupy.asarray(ctx.data(r, tag, ch, (n, 5, 3))), out, root)
        same(out, ctx.data(root, tag, ch, (n, 5, 3))[r], f"scatter {ch} root {root}")
        tag = f"be-ga-{ch}-{root}"
        out = cupy.zeros((n, 4, 3), dtype=ch)
        be.gather(cupy.asarray(ctx.data(r, tag, ch, (4, 3))), out, root)
        if r == root:
            same(out, np.stack(ctx.all_data(tag, ch, (4, 3))), f"gather {ch} root {root}")
    tag = f"be-rs-{ch}"
    out = cupy.zeros(10, dtype=ch)
    if ops:
        be.reduce_scatter(cupy.asarray(ctx.data(r, tag, ch, (n, 10))), out, 10)
        same(out, reduce_ref(ctx.all_data(tag, ch, (n, 10)), "sum")[r], f"reduce_scatter {ch}")
    tag = f"be-ag-{ch}"
    out = cupy.zeros((n, 11), dtype=ch)
    be.all_gather(cupy.asarray(ctx.data(r, tag, ch, 11)), out, 11)
    same(out, np.stack(ctx.all_data(tag, ch, 11)), f"all_gather {ch}")
    tag = f"be-a2a-{ch}"
    out = cupy.zeros((n, 6), dtype=ch)
    be.all_to_all(cupy.asarray(ctx.data(r, tag, ch, (n, 6))), out)
    same(out, np.stack([ctx.data(s, tag, ch, (n, 6))[r] for s in range(n)]), f"all_to_all {ch}")
    for peer in range(n):  # as CuPy's own test: every rank walks the peers in order, itself included
        tag = f"be-sr-{ch}"
        out = cupy.zeros(9, dtype=ch)
        be.send_recv(cupy.asarray(ctx.data(r, tag, ch, 9)), out, peer)
        same(out, ctx.data(peer, tag, ch, 9), f"send_recv {ch} with {peer}")
    if n > 1:
        tag = f"be-p2p-{ch}"
        if r == 0:
            be.send(cupy.asarray(ctx.data(0, tag, ch, 13)), 1)
        elif r == 1:
            out = cupy.zeros(13, dtype=ch)
            be.recv(out, 0)
            same(out, ctx.data(0, tag, ch, 13), f"send/recv {ch}")
    cupy.cuda.get_current_stream().synchronize()


def sparse_of(ctx: Ctx, rank: int, tag: str, dtype: str):
    """Rank's random CSR matrix (4 x 6, its own number of nonzeros) as scipy-style parts in numpy."""
    rng = np.random.default_rng([ctx.seed, rank, sum(map(ord, tag))])
    dense = rng.uniform(-1, 1, size=(4, 6)) * (rng.uniform(size=(4, 6)) < 0.3 + 0.1 * rank)
    return dense.astype(dtype)


def backend_sparse(ctx: Ctx, be) -> None:
    """Sparse CSR matrices: send/recv, broadcast and scatter. CuPy sends each matrix's sizes
    first, then its three arrays in a group of sends of other lengths; scatter's root sends every
    peer's sizes and arrays in one group, which each peer receives as one receive and then a
    group of three. (Sparse reduce, gather, all_reduce and all_gather are left out: CuPy 14.2
    builds their empty matrices from cupy.empty, which its own constructor then refuses at random,
    "index pointer should start with 0", on NCCL as on Purlin.)"""
    import cupy
    from cupyx.scipy import sparse

    n, r = ctx.nranks, ctx.rank
    warnings.filterwarnings("ignore", ".*transferring sparse.*", UserWarning)

    def csr(dense):
        return sparse.csr_matrix(cupy.asarray(dense))

    def empty(dt):  # a 0 x 0 matrix to receive into, as CuPy's own tests make it
        return sparse.csr_matrix((cupy.zeros(1, dt), cupy.zeros(1, "i"), cupy.zeros(1, "i")), shape=(0, 0))

    for dt in "fd":
        if n > 1:
            if r == 0:
                be.send(csr(sparse_of(ctx, 0, "sp-p2p", dt)), 1)
            elif r == 1:
                out = empty(dt)
                be.recv(out, 0)
                same(out.todense(), sparse_of(ctx, 0, "sp-p2p", dt), f"sparse send/recv {dt}")
        for root in range(n):
            m = csr(sparse_of(ctx, r, f"sp-bc-{root}", dt)) if r == root else empty(dt)
            be.broadcast(m, root)
            same(m.todense(), sparse_of(ctx, root, f"sp-bc-{root}", dt), f"sparse broadcast {dt} root {root}")
            out = empty(dt)
            # every rank passes a list of matrices (CuPy dispatches on it), only the root's is read
            be.scatter([csr(sparse_of(ctx, s, f"sp-sc-{root}", dt)) for s in range(n)], out, root)
            same(out.todense(), sparse_of(ctx, r, f"sp-sc-{root}", dt), f"sparse scatter {dt} root {root}")
    cupy.cuda.get_current_stream().synchronize()


def backend(ctx: Ctx):
    """The rank's NCCLBackend, made on first use (its rendezvous is CuPy's own TCP store)."""
    from cupyx.distributed import NCCLBackend

    if ctx.backend is None:
        ctx.backend = NCCLBackend(ctx.nranks, ctx.rank, port=ctx.port)
    return ctx.backend


def case_backend_dense(ctx: Ctx, comm, device: int) -> None:
    be, wrong = backend(ctx), []
    for ch in BACKEND_DTYPES:
        try:
            backend_dense(ctx, be, ch)
        except Exception as err:  # noqa: BLE001 (each dtype is reported; the next one runs)
            wrong.append(f"{ch}: {err}")
    be.barrier()
    if wrong:
        raise AssertionError(f"{len(wrong)} of {len(BACKEND_DTYPES)} dtypes failed: " + "; ".join(wrong))


def case_backend_sparse(ctx: Ctx, comm, device: int) -> None:
    be = backend(ctx)
    backend_sparse(ctx, be)
    be.barrier()


BACKEND_CASES = [case_backend_dense, case_backend_sparse]


# ---------- ranks ----------

def prove(lib: str) -> str:
    """Purlin in LD_PRELOAD serves every name the binding imports, and the binding's own NEEDED."""
    import cupy_backends.cuda.libs.nccl as binding  # noqa: F401 (the module whose NEEDED is checked)
    from proof import prove_preloaded

    facts = prove_preloaded(lib, CUPY_IMPORTS, binding.__file__)
    line = f"preload: {facts['library']} serves every NCCL name cupy.cuda.nccl binds (ncclGetVersion {facts['version']})"
    return line + "".join(f"; note: {n}" for n in facts["notes"])


def where_failed(err: BaseException) -> str:
    """The line of this script that failed and, when the error came from deeper, where it came from."""
    frames = traceback.extract_tb(err.__traceback__)
    ours = [f for f in frames if f.filename == os.path.abspath(__file__)]
    places = [f"{os.path.basename(f.filename)}:{f.lineno} ({f.line})" for f in ([ours[-1]] if ours else []) + frames[-1:]]
    return " <- ".join(dict.fromkeys(places))


def rank_main(rank: int, args: argparse.Namespace, ids: mp.Queue, results: mp.Queue) -> None:
    from proof import StderrLog, init_lines

    log = StderrLog(os.path.join(args.logdir, f"cupy-rank{rank}.stderr"), f"rank{rank}")
    report, failed = [], []
    try:
        import cupy
        from cupy.cuda import nccl

        device = rank % cupy.cuda.runtime.getDeviceCount()
        cupy.cuda.Device(device).use()
        report.append(f"cupy rank {rank}: CuPy {cupy.__version__}, GPU {device}"
                      f"{' (baseline: real NCCL)' if args.baseline else ''}")
        if not args.baseline:
            report.append("  " + prove(args.library))
        ctx = Ctx(rank, args.nranks, args.seed, args.port)
        if rank == 0:
            uid = nccl.get_unique_id()
            for _ in range(args.nranks - 1):
                ids.put(uid)
        else:
            uid = ids.get(timeout=args.timeout)
        comm = nccl.NcclCommunicator(args.nranks, uid, rank)
        for case in BINDING_CASES + BACKEND_CASES:
            if not re.search(args.cases, case.__name__):
                continue
            try:
                case(ctx, comm, device)
                report.append(f"  {case.__name__}: ok")
            except Exception as err:  # noqa: BLE001 (a failed case is reported; the next one runs)
                failed.append(case.__name__)
                report.append(f"  {case.__name__}: FAILED: {err}")
                report.append("    at " + where_failed(err))
        store = getattr(ctx.backend, "_store", None)  # rank 0's store process
        if store is not None:
            store.stop()  # at exit CuPy would leave it to multiprocessing's join
        comm.destroy()
        report += [f"  {note}" for note in ctx.notes]
        if not args.baseline:
            lines = init_lines(log.text(), rank, args.nranks)
            if not lines:
                raise AssertionError(f"no Purlin INFO line for rank {rank} of {args.nranks}: Purlin did not serve it")
            report.append(f"  log: Purlin logged {len(lines)} communicator(s) of rank {rank} of {args.nranks}")
    except BaseException:  # noqa: BLE001 (the rank's failure goes to the parent)
        failed.append("rank")
        report.append(traceback.format_exc())
    finally:
        log.close()
    results.put({"rank": rank, "report": report, "failed": failed})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--library", default="", help="Purlin's file in LD_PRELOAD (proved in each rank)")
    p.add_argument("--nranks", type=int, default=2)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--logdir", default=os.environ.get("OUT", "/tmp"))
    p.add_argument("--timeout", type=float, default=300, help="seconds for the whole run")
    p.add_argument("--baseline", action="store_true", help="no Purlin: the cases on the real NCCL")
    p.add_argument("--cases", default="", help="only the cases whose names this regular expression finds")
    args = p.parse_args()
    os.makedirs(args.logdir, exist_ok=True)
    args.port = free_port()
    if not args.baseline:
        os.environ.setdefault("PURLIN_DEBUG", "INFO")
        os.environ.setdefault("PURLIN_ATOM", "cuda")
    # fork, as CuPy's own tests start ranks: rank 0's NCCLBackend forks its store process in
    # turn, which a spawned rank could not (the store holds a lock, and spawn pickles it).
    # This process has not touched CUDA, so forking it is safe.
    procs, _ids, results = start("fork", rank_main, args.nranks, args)
    got = collect(procs, results, args.timeout)
    finish(procs, len(got) == len(procs))
    missing = sorted(set(range(args.nranks)) - set(got))
    if missing:
        print(f"cupy: ranks {missing} gave no report in {args.timeout:.0f} s")
    for rank in sorted(got):
        print("\n".join(got[rank]["report"]), flush=True)
    bad = len(missing) + sum(len(r["failed"]) for r in got.values())
    verdict = "PASS" if bad == 0 else "FAIL"
    print(f"cupy ({args.nranks} ranks{', baseline' if args.baseline else ''}): {verdict}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
