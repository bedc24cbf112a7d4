"""The pynccl checks: each runs one kind of call through the ctypes client on
every rank and compares this rank's result with the local reference.

A case is a function of a Ctx; it raises AssertionError (or NCCLError) on the
first wrong result. Sizes cover one element, odd counts, and counts past the
datapath's staging area, so every protocol regime (packets, staged, chunked)
is reached. CUDA-graph cases live in graph_cases.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nccl_library import DTYPES, OPS, NCCLError
from reference import all_inputs, assert_equal, expected, rank_input

ALL_DTYPES = list(DTYPES)
FLOAT_DTYPES = ["float32", "bfloat16", "float16", "float64"]
SIZES = [1, 8, 1031, 262147, 4194311]  # the last is 16 MiB of fp32, beyond one staging half


class Skip(Exception):
    """A case that does not apply to this mode (say, CUDA graphs on the host)."""


@dataclass
class Ctx:
    lib: object
    bufs: object
    comm: int
    rank: int
    nranks: int
    seed: int

    def dtypes(self, names):
        return [d for d in names if self.bufs.has(d)]

    def my_input(self, count: int, dtype: str, seed_offset: int = 0):
        return self.bufs.upload(rank_input(self.seed + seed_offset, self.rank, count, dtype), dtype)

    def finish(self):
        self.bufs.synchronize()


def all_reduce_case(ctx: Ctx, count: int, dtype: str, op: str, in_place: bool) -> None:
    b, lib = ctx.bufs, ctx.lib
    send = ctx.my_input(count, dtype)
    recv = send if in_place else b.empty(count, dtype)
    lib.all_reduce(b.ptr(send), b.ptr(recv), count, DTYPES[dtype], OPS[op], ctx.comm, b.stream())
    ctx.finish()
    name = f"AllReduce {dtype} {op} count={count}{' in-place' if in_place else ''} rank {ctx.rank}"
    assert_equal(name, b.download(recv), expected(ctx.seed, ctx.nranks, count, dtype, op, b))


def test_all_reduce_dtypes_ops(ctx: Ctx) -> None:
    for dtype in ctx.dtypes(ALL_DTYPES):
        for op in OPS:
            if ctx.nranks == 1 and op == "avg" and dtype.startswith("float8"):
                refused_on_one_rank(ctx, dtype, op)
            else:
                all_reduce_case(ctx, 1031, dtype, op, in_place=False)


def refused_on_one_rank(ctx: Ctx, dtype: str, op: str) -> None:
    """NCCL refuses avg on the float8 types on a one-rank communicator (ncclInvalidArgument)."""
    b = ctx.bufs
    send = ctx.my_input(1031, dtype)
    try:
        ctx.lib.all_reduce(b.ptr(send), b.ptr(b.empty(1031, dtype)), 1031, DTYPES[dtype], OPS[op], ctx.comm, b.stream())
    except NCCLError as e:
        assert e.result == 4, f"AllReduce {dtype} {op} on one rank: {e}, want ncclInvalidArgument"
    else:
        raise AssertionError(f"AllReduce {dtype} {op} on one rank: accepted; NCCL refuses it")
    ctx.finish()


def test_all_reduce_sizes(ctx: Ctx) -> None:
    for dtype in ctx.dtypes(["float32", "bfloat16"]):
        for count in SIZES:
            all_reduce_case(ctx, count, dtype, "sum", in_place=False)
            all_reduce_case(ctx, count, dtype, "sum", in_place=True)


def test_all_gather(ctx: Ctx) -> None:
    b, lib = ctx.bufs, ctx.lib
    for dtype, count in [(d, 1031) for d in ctx.dtypes(ALL_DTYPES)] + [("float32", 1 << 20 | 3)]:
        want = np.concatenate(all_inputs(ctx.seed, ctx.nranks, count, dtype))
        want = b.download(b.upload(want, dtype))
        for in_place in (False, True):
            if in_place:  # NCCL's in-place form: sendbuff == recvbuff + rank*count
                recv = b.upload(np.concatenate([rank_input(ctx.seed, ctx.rank, count, dtype)] * ctx.nranks), dtype)
                send_ptr = b.ptr(recv, ctx.rank * count)
            else:
                send = ctx.my_input(count, dtype)
                recv, send_ptr = b.empty(count * ctx.nranks, dtype), b.ptr(send)
            lib.all_gather(send_ptr, b.ptr(recv), count, DTYPES[dtype], ctx.comm, b.stream())
            ctx.finish()
            assert_equal(f"AllGather {dtype} count={count} in_place={in_place} rank {ctx.rank}",
                         b.download(recv), want)


def test_reduce_scatter(ctx: Ctx) -> None:
    b, lib = ctx.bufs, ctx.lib
    cases = [(d, op, 1031) for d in ctx.dtypes(["float32", "bfloat16", "float16", "int32"])
             for op in ("sum", "max", "avg")] + [("float32", "sum", 262147)]
    for dtype, op, count in cases:
        total = count * ctx.nranks
        send = ctx.my_input(total, dtype)
        recv = b.empty(count, dtype)
        lib.reduce_scatter(b.ptr(send), b.ptr(recv), count, DTYPES[dtype], OPS[op], ctx.comm, b.stream())
        ctx.finish()
        want = expected(ctx.seed, ctx.nranks, total, dtype, op, b)[ctx.rank * count:(ctx.rank + 1) * count]
        assert_equal(f"ReduceScatter {dtype} {op} count={count} rank {ctx.rank}", b.download(recv), want)


def test_broadcast(ctx: Ctx) -> None:
    b, lib = ctx.bufs, ctx.lib
    for dtype in ctx.dtypes(["float32", "bfloat16", "uint8", "float8_e4m3", "int64"]):
        for root in range(ctx.nranks):
            for count in (1031, 262147):
                send = ctx.my_input(count, dtype)
                recv = b.empty(count, dtype)
                lib.broadcast(b.ptr(send), b.ptr(recv), count, DTYPES[dtype], root, ctx.comm, b.stream())
                ctx.finish()
                want = b.download(b.upload(rank_input(ctx.seed, root, count, dtype), dtype))
                assert_equal(f"Broadcast {dtype} root={root} count={count} rank {ctx.rank}",
                             b.download(recv), want)


def test_reduce(ctx: Ctx) -> None:
    b, lib = ctx.bufs, ctx.lib
    for dtype, op in [("float32", "sum"), ("bfloat16", "sum"), ("int32", "max"), ("float16", "min")]:
        if not b.has(dtype):
            continue
        for root in range(ctx.nranks):
            count = 4099
            send = ctx.my_input(count, dtype)
            recv = b.empty(count, dtype)
            untouched = b.download(recv)
            lib.reduce(b.ptr(send), b.ptr(recv), count, DTYPES[dtype], OPS[op], root, ctx.comm, b.stream())
            ctx.finish()
            name = f"Reduce {dtype} {op} root={root} rank {ctx.rank}"
            want = expected(ctx.seed, ctx.nranks, count, dtype, op, b) if ctx.rank == root else untouched
            assert_equal(name, b.download(recv), want)


def test_send_recv_ring(ctx: Ctx) -> None:
    """Each rank sends to rank+1 and receives from rank-1, in one group."""
    b, lib = ctx.bufs, ctx.lib
    nxt, prv = (ctx.rank + 1) % ctx.nranks, (ctx.rank - 1) % ctx.nranks
    for dtype in ctx.dtypes(["float32", "bfloat16", "int8"]):
        for count in (1, 1031, 1 << 20):
            send = ctx.my_input(count, dtype)
            recv = b.empty(count, dtype)
            lib.group_start()
            lib.send(b.ptr(send), count, DTYPES[dtype], nxt, ctx.comm, b.stream())
            lib.recv(b.ptr(recv), count, DTYPES[dtype], prv, ctx.comm, b.stream())
            lib.group_end()
            ctx.finish()
            want = b.download(b.upload(rank_input(ctx.seed, prv, count, dtype), dtype))
            assert_equal(f"Send/Recv ring {dtype} count={count} rank {ctx.rank}", b.download(recv), want)


def test_send_recv_pair(ctx: Ctx) -> None:
    """Ungrouped: rank 0 sends then receives, rank 1 receives then sends. One rank
    alone sends to itself and receives, in a group (ungrouped, NCCL's send would wait)."""
    b, lib = ctx.bufs, ctx.lib
    if ctx.rank > 1:
        return
    peer, count, dtype = (1 - ctx.rank) % ctx.nranks, 65537, "float32"
    send = ctx.my_input(count, dtype, seed_offset=5)
    recv = b.empty(count, dtype)
    steps = [lambda: lib.send(b.ptr(send), count, DTYPES[dtype], peer, ctx.comm, b.stream()),
             lambda: lib.recv(b.ptr(recv), count, DTYPES[dtype], peer, ctx.comm, b.stream())]
    if ctx.nranks == 1:
        steps = [lib.group_start, *steps, lib.group_end]
    for step in (steps if ctx.rank == 0 else steps[::-1]):
        step()
    ctx.finish()
    want = b.download(b.upload(rank_input(ctx.seed + 5, peer, count, dtype), dtype))
    assert_equal(f"Send/Recv pair rank {ctx.rank}", b.download(recv), want)


CASES = [test_all_reduce_dtypes_ops, test_all_reduce_sizes, test_all_gather, test_reduce_scatter,
         test_broadcast, test_reduce, test_send_recv_ring, test_send_recv_pair]
