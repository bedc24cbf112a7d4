"""pynccl calls captured in a CUDA graph and replayed, as vLLM does.

The graph holds an in-place AllReduce (vLLM's use), an AllGather, a
ReduceScatter and a grouped Send/Recv ring over static buffers. Before each
replay the static inputs are refilled with a new round's values (outside the
graph), and after it every output is checked: a replay that reran stale
pointers, skipped a call or reused a previous epoch's data shows up as a
wrong round.
"""

from __future__ import annotations

import numpy as np

from cases import Ctx, Skip
from nccl_library import DTYPES, OPS
from reference import all_inputs, assert_equal, expected, rank_input

REPLAYS = 50
COUNT = 4099


def _round_inputs(ctx: Ctx, dtype: str, round_: int):
    """This round's per-call inputs for this rank (seeds differ per call)."""
    s = ctx.seed + 1000 * (round_ + 1)
    return {
        "ar": rank_input(s, ctx.rank, COUNT, dtype),
        "ag": rank_input(s + 1, ctx.rank, COUNT, dtype),
        "rs": rank_input(s + 2, ctx.rank, COUNT * ctx.nranks, dtype),
        "p2p": rank_input(s + 3, ctx.rank, COUNT, dtype),
    }


def _check_round(ctx: Ctx, dtype: str, round_: int, out) -> None:
    b, s, prv = ctx.bufs, ctx.seed + 1000 * (round_ + 1), (ctx.rank - 1) % ctx.nranks
    where = f"graph replay {round_} {dtype} rank {ctx.rank}"
    assert_equal(f"AllReduce in {where}", b.download(out["ar"]), expected(s, ctx.nranks, COUNT, dtype, "sum", b))
    ag = b.download(b.upload(np.concatenate(all_inputs(s + 1, ctx.nranks, COUNT, dtype)), dtype))
    assert_equal(f"AllGather in {where}", b.download(out["ag_out"]), ag)
    rs = expected(s + 2, ctx.nranks, COUNT * ctx.nranks, dtype, "sum", b)[ctx.rank * COUNT:(ctx.rank + 1) * COUNT]
    assert_equal(f"ReduceScatter in {where}", b.download(out["rs_out"]), rs)
    p2p = b.download(b.upload(rank_input(s + 3, prv, COUNT, dtype), dtype))
    assert_equal(f"Send/Recv in {where}", b.download(out["p2p_out"]), p2p)


def _launch(ctx: Ctx, dtype: str, buf) -> None:
    """The calls the graph captures; also run once eagerly as a warm-up."""
    b, lib, dt, stream = ctx.bufs, ctx.lib, DTYPES[dtype], ctx.bufs.stream()
    nxt, prv = (ctx.rank + 1) % ctx.nranks, (ctx.rank - 1) % ctx.nranks
    lib.all_reduce(b.ptr(buf["ar"]), b.ptr(buf["ar"]), COUNT, dt, OPS["sum"], ctx.comm, stream)
    lib.all_gather(b.ptr(buf["ag"]), b.ptr(buf["ag_out"]), COUNT, dt, ctx.comm, stream)
    lib.reduce_scatter(b.ptr(buf["rs"]), b.ptr(buf["rs_out"]), COUNT, dt, OPS["sum"], ctx.comm, stream)
    lib.group_start()
    lib.send(b.ptr(buf["p2p"]), COUNT, dt, nxt, ctx.comm, stream)
    lib.recv(b.ptr(buf["p2p_out"]), COUNT, dt, prv, ctx.comm, stream)
    lib.group_end()


def _refill(ctx: Ctx, dtype: str, buf, round_: int) -> None:
    for key, values in _round_inputs(ctx, dtype, round_).items():
        buf[key].copy_(ctx.bufs.upload(values, dtype))


def test_graph_capture_replay(ctx: Ctx) -> None:
    b = ctx.bufs
    if not b.graphs:
        raise Skip("host buffers have no CUDA graphs")
    torch = b.torch
    for dtype in ctx.dtypes(["float32", "bfloat16"]):
        buf = {k: b.upload(v, dtype) for k, v in _round_inputs(ctx, dtype, 0).items()}
        buf.update(ag_out=b.empty(COUNT * ctx.nranks, dtype), rs_out=b.empty(COUNT, dtype),
                   p2p_out=b.empty(COUNT, dtype))
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # eager warm-up on a side stream, as torch asks
            _launch(ctx, dtype, buf)
        torch.cuda.current_stream().wait_stream(side)
        b.synchronize()
        _check_round(ctx, dtype, 0, buf)

        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            _launch(ctx, dtype, buf)
        for round_ in range(1, REPLAYS + 1):
            _refill(ctx, dtype, buf, round_)
            graph.replay()
            b.synchronize()
            _check_round(ctx, dtype, round_, buf)
        # Eager calls after the graph still work (epochs stay in step).
        _refill(ctx, dtype, buf, REPLAYS + 1)
        _launch(ctx, dtype, buf)
        b.synchronize()
        _check_round(ctx, dtype, REPLAYS + 1, buf)
        del graph
