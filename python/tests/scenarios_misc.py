"""Scenarios for groups, host streams, bad inputs and errors the library reports."""

from __future__ import annotations

import numpy as np

import purlin
from reference import as_dtype, assert_equal, rank_op, reduce, values


def grouped_collectives(comm, seed):
    """Several collectives, nested groups and a PreMulSum, launched by one group."""
    n, me = comm.world_size, comm.rank
    a = values(me, 10, "float32", seed).astype(np.float32)
    b = values(me, 4, "int64", seed + 1).astype(np.int64)
    gathered = np.zeros((n, 4), dtype=np.int64)
    scaled = np.zeros(10, dtype=np.float32)
    with purlin.group():
        comm.all_reduce(a, op=purlin.MAX)
        with purlin.group():
            comm.all_gather(b, gathered)
            comm.all_reduce(values(me, 10, "float32", seed + 2).astype(np.float32), scaled,
                            op=rank_op(purlin.premul_sum(0.5), me))
    inputs = [values(r, 10, "float32", seed) for r in range(n)]
    assert_equal(a, reduce(inputs, purlin.MAX, "float32", n), "grouped all_reduce MAX")
    for r in range(n):
        assert_equal(gathered[r], values(r, 4, "int64", seed + 1), f"grouped all_gather slice {r}")
    scaled_inputs = [values(r, 10, "float32", seed + 2) for r in range(n)]
    assert_equal(scaled, reduce(scaled_inputs, purlin.premul_sum(0.5), "float32", n), "grouped premul_sum")


def all_pairs_exchange(comm, count):
    """Every rank sends to and receives from every other rank in one group (all-to-all by hand)."""
    n, me = comm.world_size, comm.rank
    outgoing = [np.full(count, me * 100 + p, dtype=np.int32) for p in range(n)]
    incoming = [np.zeros(count, dtype=np.int32) for _ in range(n)]
    with purlin.group():
        for p in range(n):
            if p != me:
                comm.send(outgoing[p], p)
                comm.recv(incoming[p], p)
    for p in range(n):
        if p != me:
            assert (incoming[p] == p * 100 + me).all(), f"from {p}: {incoming[p][:4]}"


def host_stream_async(comm, seed):
    """Calls on an explicit HostStream return at once and complete at synchronize()."""
    n, me = comm.world_size, comm.rank
    buffers = [values(me, 257, "float64", seed + i) for i in range(3)]
    with purlin.HostStream() as stream:
        for buf in buffers:
            comm.all_reduce(buf, stream=stream)
        stream.synchronize()
        for i, buf in enumerate(buffers):
            inputs = [values(r, 257, "float64", seed + i) for r in range(n)]
            assert_equal(buf, reduce(inputs, purlin.SUM, "float64", n), f"stream all_reduce {i}")


def _read_only(count):
    array = np.zeros(count, dtype=np.float32)
    array.flags.writeable = False
    return array


def bad_input(comm, case):
    """Makes one bad call (the same on every rank); returns the exception's class name and text."""
    x = np.ones(8, dtype=np.float32)
    n = comm.world_size
    calls = {
        "dtype_mismatch": lambda: comm.all_reduce(x, np.zeros(8, dtype=np.float64)),
        "non_contiguous": lambda: comm.all_reduce(np.ones((8, 2), dtype=np.float32)[:, 0]),
        "all_gather_size": lambda: comm.all_gather(x, np.zeros(8 * n + 1, dtype=np.float32)),
        "reduce_scatter_size": lambda: comm.reduce_scatter(np.ones(8 * n - 1, np.float32), x),
        "all_reduce_size": lambda: comm.all_reduce(x, np.zeros(9, dtype=np.float32)),
        "all_to_all_divisible": lambda: comm.all_to_all(np.ones(n * 2 + 1, np.float32),
                                                        np.ones(n * 2 + 1, np.float32)),
        "bad_root": lambda: comm.broadcast(x, root=n),
        "negative_root": lambda: comm.reduce(x, root=-1),
        "bad_peer": lambda: comm.send(x, peer=n),
        "read_only_recv": lambda: comm.all_reduce(x, _read_only(8)),
        "unsupported_dtype": lambda: comm.all_reduce(np.ones(8, dtype=np.int16)),
        "bool_dtype": lambda: comm.all_reduce(np.ones(8, dtype=bool)),
        "not_an_array": lambda: comm.all_reduce([1.0, 2.0]),
        "bad_op": lambda: comm.all_reduce(x, op="median"),
        "counts_length": lambda: comm.all_gather_v(x, np.zeros(64, np.float32), [8] * (n + 1)),
        "counts_overflow": lambda: comm.all_gather_v(x, np.zeros(8, np.float32), [8] * n),
        "gather_root_needs_recv": lambda: comm.gather(x, None, root=comm.rank),
        "int_premul_fraction": lambda: comm.all_reduce(np.ones(8, np.int32), op=purlin.premul_sum(0.5)),
    }
    try:
        calls[case]()
    except purlin.PurlinError as exc:
        return type(exc).__name__, str(exc), exc.code
    raise AssertionError(f"{case}: no error raised")


def library_rejects_overlap(comm):
    """Partly overlapping send and recv pass Python's checks; the library's spec rejects them."""
    base = np.zeros(16, dtype=np.float32)
    try:
        comm.all_reduce(base[0:8], base[4:12])
    except purlin.PurlinError as exc:
        return type(exc).__name__, str(exc), exc.code, exc.library_message
    raise AssertionError("overlapping all_reduce buffers were accepted")


def float8_avg_and_premul_sum(comm):
    """AVG and premul_sum on a float8 type: NCCL's InvalidArgument on a one-rank
    communicator, which stays usable; reduced as usual on more ranks. Returns
    (type, text, code, library message) per call, None where it ran."""
    seen = []
    for dtype in ("float8_e4m3fn", "float8_e5m2"):
        for op in (purlin.AVG, purlin.premul_sum(2)):
            for call in ("all_reduce", "reduce", "reduce_scatter"):
                inputs = [np.full(4 * comm.world_size, r + 1.0) for r in range(comm.world_size)]
                x = as_dtype(inputs[comm.rank], dtype)
                mine = rank_op(op, comm.rank)  # premul_sum: each rank its own scalar
                try:
                    if call == "all_reduce":
                        got = comm.all_reduce(x, op=mine)
                    elif call == "reduce":
                        got = comm.reduce(x, op=mine)
                    else:
                        got = comm.reduce_scatter(x, x[:4].copy(), op=mine)
                except purlin.PurlinError as exc:
                    seen.append((type(exc).__name__, str(exc), exc.code, exc.library_message))
                    continue
                seen.append(None)
                want = reduce(inputs, op, dtype, comm.world_size)
                if call == "reduce_scatter":
                    want = want[4 * comm.rank:4 * comm.rank + 4]
                if call != "reduce" or comm.rank == 0:
                    assert_equal(got, want, f"{call} {dtype} {op}")
    x = np.full(4, comm.rank + 1, dtype=np.float32)
    comm.all_reduce(x, op=purlin.AVG)
    assert_equal(x, np.full(4, (comm.world_size + 1) / 2), "all_reduce float32 AVG after the rejected calls")
    return seen


def fresh_communicator(comm):
    """A second communicator over the same ranks, its id sent by a broadcast on the first."""
    raw = np.frombuffer(purlin.UniqueId.generate().bytes(), dtype=np.uint8).copy()
    comm.broadcast(raw, root=0)
    return purlin.Communicator(comm.world_size, comm.rank, purlin.UniqueId.from_bytes(raw.tobytes()))


def mismatched_calls(comm):
    """Ranks that disagree on a call's count get an error naming the disagreement, not wrong data."""
    other = fresh_communicator(comm)
    try:
        count = 8 if comm.rank == 0 else 16
        other.all_reduce(np.ones(count, dtype=np.float32))
    except purlin.PurlinError as exc:
        return type(exc).__name__, str(exc), exc.code
    finally:
        other.abort()
    return None


def closed_communicator(comm):
    """A closed communicator refuses calls in Python, with InvalidUsage."""
    other = fresh_communicator(comm)
    other.close()
    other.close()  # idempotent
    try:
        other.all_reduce(np.ones(4, dtype=np.float32))
    except purlin.InvalidUsage as exc:
        return str(exc)
    raise AssertionError("a closed communicator accepted a call")


def lone_rank_times_out(comm):
    """Rank 0 calls all_reduce alone; with PURLIN_TIMEOUT short it must fail, not hang."""
    if comm.rank != 0:
        return None
    try:
        comm.all_reduce(np.ones(4, dtype=np.float32))
    except purlin.PurlinError as exc:
        return type(exc).__name__, str(exc), exc.code
    raise AssertionError("a lone all_reduce completed")



def abort_unblocks_a_waiting_call(comm):
    """Rank 0 starts an all_reduce alone on a HostStream; abort() must end its wait at once."""
    import time

    other = fresh_communicator(comm)
    # Both inits have returned before rank 1 aborts: an abort that reaches a
    # rank still inside its init fails that init instead (seen in CI).
    comm.all_reduce(np.zeros(1, dtype=np.float32))
    if comm.rank != 0:
        other.abort()
        return None
    stream = purlin.HostStream()
    try:
        other.all_reduce(np.ones(4, dtype=np.float32), stream=stream)
    except purlin.PurlinError as exc:
        # Rank 1's abort reached this rank first (its bootstrap connection
        # dropped without a bye): the communicator is broken already, and the
        # call says so at once rather than waiting.
        stream.close()
        return (type(exc).__name__, str(exc), exc.code, 0.0)
    time.sleep(0.2)
    started = time.monotonic()
    other.abort()
    try:
        stream.synchronize()
        outcome = ("completed", "", 0)
    except purlin.PurlinError as exc:
        outcome = (type(exc).__name__, str(exc), exc.code)
    waited = time.monotonic() - started
    try:
        stream.close()  # destroys the stream even though its work failed
    except purlin.PurlinError:
        pass
    return outcome + (waited,)


def group_balanced_after_exception(comm):
    """An exception inside purlin.group() still ends the group, cancelled: the calls issued
    before it are not launched; later calls run normally."""
    x = np.ones(6, dtype=np.int32)
    try:
        with purlin.group():
            comm.all_reduce(x)
            with purlin.group():  # nested: the exception cancels the outer group too
                raise KeyError("inside the group")
    except KeyError:
        pass
    assert (x == 1).all(), f"the cancelled group launched its all_reduce: {x}"
    comm.all_reduce(x)
    assert (x == comm.world_size).all(), x
    from purlin.group import in_group

    assert not in_group()
