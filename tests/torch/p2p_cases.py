"""Point-to-point, barrier and sub-group cases of the torch drop-in test."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from collective_cases import Ctx, Unsupported, expected
from reference import check, grid, to_dtype


def theirs(ctx: Ctx, src: int, count: int, dtype, seed_offset: int) -> torch.Tensor:
    return to_dtype(grid(ctx.seed + seed_offset, src, count, dtype), dtype)


def test_send_recv(ctx: Ctx) -> None:
    """Blocking send/recv between ranks 0 and 1, both directions, in opposite orders."""
    if ctx.rank > 1:
        return
    peer = 1 - ctx.rank
    for dtype, count in ((torch.float32, 1031), (torch.bfloat16, 1 << 20), (torch.int64, 1)):
        mine = ctx.input(count, dtype, 21)
        got = torch.zeros(count, dtype=dtype, device=ctx.device)
        if ctx.rank == 0:
            ctx.call("send", dist.send, mine, dst=peer)
            ctx.call("recv", dist.recv, got, src=peer)
        else:
            ctx.call("recv", dist.recv, got, src=peer)
            ctx.call("send", dist.send, mine, dst=peer)
        ctx.sync()
        check(f"send/recv {dtype} count={count} rank {ctx.rank}", got, theirs(ctx, peer, count, dtype, 21))


def test_batch_isend_irecv(ctx: Ctx) -> None:
    """A ring in one batch (one NCCL group), two dtypes per direction."""
    nxt, prv = (ctx.rank + 1) % ctx.world, (ctx.rank - 1) % ctx.world
    specs = ((torch.float32, 4099, 31), (torch.bfloat16, 262147, 32))
    ops, outs = [], []
    for dtype, count, off in specs:
        out = torch.zeros(count, dtype=dtype, device=ctx.device)
        ops += [dist.P2POp(dist.isend, ctx.input(count, dtype, off), nxt), dist.P2POp(dist.irecv, out, prv)]
        outs.append(out)
    works = ctx.call("batch_isend_irecv", dist.batch_isend_irecv, ops)
    for w in works:
        w.wait()
    ctx.sync()
    for (dtype, count, off), out in zip(specs, outs):
        check(f"batch_isend_irecv {dtype} rank {ctx.rank}", out, theirs(ctx, prv, count, dtype, off))


def test_batch_against_plain(ctx: Ctx) -> None:
    """NCCL matches sends and receives in order, not by grouping: rank 0 posts two transfers of
    one shape (a pipeline's microbatches) in one batch_isend_irecv (one NCCL group), rank 1 posts
    them as two plain calls; first rank 0 sends, then rank 1 (a size past the staging half)."""
    if ctx.rank > 1:
        return
    peer = 1 - ctx.rank
    for rnd, (dtype, count) in enumerate(((torch.float32, 4099), (torch.bfloat16, 1 << 20))):
        sender, offs = rnd, (51 + 2 * rnd, 52 + 2 * rnd)
        if ctx.rank == sender:
            bufs = [ctx.input(count, dtype, off) for off in offs]
        else:
            bufs = [torch.zeros(count, dtype=dtype, device=ctx.device) for _ in offs]
        if ctx.rank == 0:
            op = dist.isend if ctx.rank == sender else dist.irecv
            works = ctx.call("batch_isend_irecv", dist.batch_isend_irecv, [dist.P2POp(op, b, peer) for b in bufs])
            for w in works or ():
                w.wait()
        else:
            for b in bufs:
                if ctx.rank == sender:
                    ctx.call("send", dist.send, b, dst=peer)
                else:
                    ctx.call("recv", dist.recv, b, src=peer)
        ctx.sync()
        if ctx.rank != sender:
            for off, b in zip(offs, bufs):
                check(f"batched against plain {dtype} rank {ctx.rank}", b, theirs(ctx, sender, count, dtype, off))


def test_barrier(ctx: Ctx) -> None:
    """The last rank arrives late; nobody may leave the barrier before it arrives."""
    late = ctx.world - 1
    delay = 1.0
    if ctx.rank == late:
        time.sleep(delay)
    start = time.monotonic()
    ctx.call("barrier", dist.barrier)
    ctx.sync()
    waited = time.monotonic() - start
    if ctx.rank != late and waited < delay * 0.5:
        raise AssertionError(f"barrier on rank {ctx.rank} returned after {waited:.3f}s, "
                             f"before rank {late} arrived ({delay}s late)")


def test_new_group(ctx: Ctx) -> None:
    """A group of every rank (in reverse order) and a group of rank 0 alone."""
    everyone = dist.new_group(ranks=list(reversed(range(ctx.world))))
    solo = dist.new_group(ranks=[0])
    t = ctx.input(1031, torch.float32, 41)
    ctx.call("all_reduce on new_group", dist.all_reduce, t, group=everyone)
    ctx.sync()
    want = expected(ctx.seed + 41, ctx.world, 1031, torch.float32, "sum")
    check(f"all_reduce on new_group(all) rank {ctx.rank}", t, want)
    if ctx.rank == 0:
        alone = ctx.input(1031, torch.bfloat16, 42)
        ctx.call("all_reduce on a group of one", dist.all_reduce, alone, group=solo)
        ctx.sync()
        check("all_reduce on new_group([0])", alone, theirs(ctx, 0, 1031, torch.bfloat16, 42))
    # The sub-group's rank numbering is its own; broadcast from group rank 0 (a global rank).
    src = dist.get_global_rank(everyone, 0) if hasattr(dist, "get_global_rank") else ctx.world - 1
    b = ctx.input(777, torch.int32, 43)
    ctx.call("broadcast on new_group", dist.broadcast, b, src=src, group=everyone)
    ctx.sync()
    check(f"broadcast on new_group src={src} rank {ctx.rank}", b, theirs(ctx, src, 777, torch.int32, 43))
    if ctx.rank == 0:  # elsewhere solo is GroupMember.NON_GROUP_MEMBER
        dist.destroy_process_group(solo)
    dist.destroy_process_group(everyone)
    ctx.notes.append("new_group: groups created and destroyed")


test_send_recv.min_ranks = test_batch_against_plain.min_ranks = 2  # both name ranks 0 and 1
CASES = [test_send_recv, test_batch_isend_irecv, test_batch_against_plain, test_barrier, test_new_group]

__all__ = ["CASES", "Unsupported"]
