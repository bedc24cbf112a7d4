"""Collectives captured in torch.cuda.graph and replayed many times.

The graph holds an in-place all_reduce, an all_gather_into_tensor and a
reduce_scatter_tensor over static tensors. Before each replay the static
inputs are refilled with that round's values (outside the graph); after it
every output is checked, so a replay that reused stale data, a stale epoch or
skipped a call fails the round it happened in.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from collective_cases import Ctx, Unsupported
from reference import check, expected, grid, rank_input, to_dtype

REPLAYS = 100
COUNT = 4099


def _inputs(ctx: Ctx, dtype, round_: int):
    s = ctx.seed + 1000 * (round_ + 1)
    return {"ar": rank_input(s, ctx.rank, COUNT, dtype, ctx.device),
            "ag": rank_input(s + 1, ctx.rank, COUNT, dtype, ctx.device),
            "rs": rank_input(s + 2, ctx.rank, COUNT * ctx.world, dtype, ctx.device)}


def _check(ctx: Ctx, dtype, round_: int, t) -> None:
    s = ctx.seed + 1000 * (round_ + 1)
    where = f"graph round {round_} {dtype} rank {ctx.rank}"
    check(f"all_reduce in {where}", t["ar"], expected(s, ctx.world, COUNT, dtype, "sum"))
    ag = torch.cat([to_dtype(grid(s + 1, r, COUNT, dtype), dtype) for r in range(ctx.world)])
    check(f"all_gather_into_tensor in {where}", t["ag_out"], ag)
    rs = expected(s + 2, ctx.world, COUNT * ctx.world, dtype, "sum")[ctx.rank * COUNT:(ctx.rank + 1) * COUNT]
    check(f"reduce_scatter_tensor in {where}", t["rs_out"], rs)


def _collectives(t) -> None:
    dist.all_reduce(t["ar"])
    dist.all_gather_into_tensor(t["ag_out"], t["ag"])
    dist.reduce_scatter_tensor(t["rs_out"], t["rs"])


def test_cuda_graph(ctx: Ctx) -> None:
    if ctx.device.type != "cuda":
        raise Unsupported("CUDA graphs need a GPU")
    for dtype in (torch.float32, torch.bfloat16):
        t = _inputs(ctx, dtype, 0)
        t["ag_out"] = torch.empty(COUNT * ctx.world, dtype=dtype, device=ctx.device)
        t["rs_out"] = torch.empty(COUNT, dtype=dtype, device=ctx.device)
        side = torch.cuda.Stream(ctx.device)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside capture, as torch's docs ask
            _collectives(t)
        torch.cuda.current_stream().wait_stream(side)
        ctx.sync()
        _check(ctx, dtype, 0, t)

        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            _collectives(t)
        for round_ in range(1, REPLAYS + 1):
            for key, value in _inputs(ctx, dtype, round_).items():
                t[key].copy_(value)
            graph.replay()
            ctx.sync()
            _check(ctx, dtype, round_, t)
        # Eager calls after the replays still agree with the peers.
        for key, value in _inputs(ctx, dtype, REPLAYS + 1).items():
            t[key].copy_(value)
        _collectives(t)
        ctx.sync()
        _check(ctx, dtype, REPLAYS + 1, t)
        graph.reset()
    ctx.notes.append(f"cuda graph: {REPLAYS} replays x 2 dtypes checked")


CASES = [test_cuda_graph]
