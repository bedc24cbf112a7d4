"""torch.distributed calls of an unchanged NCCL program, each checked on every
rank against reference.py. A case is a function of a Ctx; it raises on the
first wrong element. Point-to-point, group and CUDA-graph cases are in
p2p_cases.py and graph_cases.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from reference import check, expected, grid, rank_input, to_dtype

OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "max": dist.ReduceOp.MAX,
       "min": dist.ReduceOp.MIN, "prod": dist.ReduceOp.PRODUCT}
FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
INTS = [torch.int32, torch.int64, torch.uint8, torch.int8]
SIZES = [1, 8, 1031, 262147, 4194311]  # the last is 16 MiB of fp32: past one staging half
FP8 = [getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n)]


class Unsupported(Exception):
    """The backend (gloo, in the harness self-check) cannot do this call."""


@dataclass
class Ctx:
    rank: int
    world: int
    device: torch.device
    seed: int
    backend: str
    notes: list = field(default_factory=list)

    def input(self, count: int, dtype: torch.dtype, seed_offset: int = 0) -> torch.Tensor:
        return rank_input(self.seed + seed_offset, self.rank, count, dtype, self.device)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def call(self, what: str, fn, *args, **kwargs):
        """Runs a torch.distributed call; on gloo an unsupported call is noted, not failed."""
        if self.backend == "nccl":
            return fn(*args, **kwargs)
        try:
            return fn(*args, **kwargs)
        except (RuntimeError, ValueError, NotImplementedError) as err:
            raise Unsupported(f"{what}: {str(err).splitlines()[0]}") from err


def all_reduce_one(ctx: Ctx, count: int, dtype, op: str) -> None:
    t = ctx.input(count, dtype)
    ctx.call(f"all_reduce {dtype} {op}", dist.all_reduce, t, op=OPS[op])
    ctx.sync()
    check(f"all_reduce {dtype} {op} count={count} rank {ctx.rank}", t,
          expected(ctx.seed, ctx.world, count, dtype, op))


def test_all_reduce(ctx: Ctx) -> None:
    for dtype in FLOATS:
        for op in ("sum", "avg", "max", "min", "prod"):
            all_reduce_one(ctx, 1031, dtype, op)
    for dtype in INTS:
        for op in ("sum", "max", "min", "prod"):
            all_reduce_one(ctx, 1031, dtype, op)
    for dtype in (torch.float32, torch.bfloat16):
        for count in SIZES:
            all_reduce_one(ctx, count, dtype, "sum")


def test_all_reduce_premul_sum(ctx: Ctx) -> None:
    make = getattr(dist, "_make_nccl_premul_sum", None)
    if make is None:
        raise Unsupported("torch.distributed has no _make_nccl_premul_sum")
    # Not bfloat16: torch passes a float scalar under ncclBfloat16, host-immediate,
    # and NCCL copies only 2 bytes of it, so real NCCL 2.28.9 returns -0.0 there
    # too (seen on 2x H200, 2026-11-29, TORCH_BASELINE=1); Purlin matches NCCL.
    # Each rank passes its own scalar (factor on even ranks, twice it on odd
    # ones): NCCL multiplies each rank's input by that rank's scalar.
    for dtype in (torch.float32, torch.float16):
        for factor in (2.5, 0.5):
            scales = [factor * (1 + r % 2) for r in range(ctx.world)]
            t = ctx.input(1031, dtype)
            ctx.call("premul_sum", dist.all_reduce, t, op=make(scales[ctx.rank]))
            ctx.sync()
            check(f"all_reduce {dtype} premul_sum({scales}) rank {ctx.rank}", t,
                  expected(ctx.seed, ctx.world, 1031, dtype, "sum", scale=scales))


def gathered(ctx: Ctx, count: int, dtype, seed_offset: int = 0) -> torch.Tensor:
    return torch.cat([to_dtype(grid(ctx.seed + seed_offset, r, count, dtype), dtype) for r in range(ctx.world)])


def test_all_gather_into_tensor(ctx: Ctx) -> None:
    cases = [(d, 1031) for d in FLOATS + INTS] + [(torch.float32, 1 << 20 | 3), (torch.bfloat16, 7)]
    cases += [(d, 1031) for d in FP8]  # last: gloo (the harness self-check) lacks them
    outs = [torch.empty(1031, dtype=torch.bfloat16, device=ctx.device) for _ in range(ctx.world)]
    ctx.call("all_gather", dist.all_gather, outs, ctx.input(1031, torch.bfloat16))
    ctx.sync()
    check(f"all_gather (list) bf16 rank {ctx.rank}", torch.cat(outs), gathered(ctx, 1031, torch.bfloat16))
    for dtype, count in cases:
        out = torch.full((count * ctx.world,), 3, dtype=torch.float32, device=ctx.device).to(dtype)
        ctx.call(f"all_gather_into_tensor {dtype}", dist.all_gather_into_tensor, out, ctx.input(count, dtype))
        ctx.sync()
        check(f"all_gather_into_tensor {dtype} count={count} rank {ctx.rank}", out, gathered(ctx, count, dtype))


def test_reduce_scatter_tensor(ctx: Ctx) -> None:
    cases = [(d, op, 1031) for d in (torch.float32, torch.bfloat16, torch.float16) for op in ("sum", "avg", "max")]
    cases += [(torch.int32, "sum", 1031), (torch.int64, "min", 1031), (torch.float32, "sum", 262147)]
    for dtype, op, count in cases:
        total = count * ctx.world
        out = torch.empty(count, dtype=dtype, device=ctx.device)
        ctx.call(f"reduce_scatter_tensor {dtype} {op}", dist.reduce_scatter_tensor, out,
                 ctx.input(total, dtype), op=OPS[op])
        ctx.sync()
        want = expected(ctx.seed, ctx.world, total, dtype, op)[ctx.rank * count:(ctx.rank + 1) * count]
        check(f"reduce_scatter_tensor {dtype} {op} count={count} rank {ctx.rank}", out, want)


def test_broadcast(ctx: Ctx) -> None:
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.uint8):
        for src in range(ctx.world):
            for count in (1031, 262147):
                t = ctx.input(count, dtype)
                ctx.call(f"broadcast {dtype}", dist.broadcast, t, src=src)
                ctx.sync()
                want = to_dtype(grid(ctx.seed, src, count, dtype), dtype)
                check(f"broadcast {dtype} src={src} count={count} rank {ctx.rank}", t, want)


def test_reduce(ctx: Ctx) -> None:
    for dtype, op in ((torch.float32, "sum"), (torch.bfloat16, "sum"), (torch.int32, "max"), (torch.float16, "min")):
        for dst in range(ctx.world):
            t = ctx.input(4099, dtype)
            ctx.call(f"reduce {dtype} {op}", dist.reduce, t, dst=dst, op=OPS[op])
            ctx.sync()
            if ctx.rank == dst:  # elsewhere the tensor's content is unspecified
                check(f"reduce {dtype} {op} dst={dst} rank {ctx.rank}", t,
                      expected(ctx.seed, ctx.world, 4099, dtype, op))


def split_size(src: int, dst: int) -> int:
    """Elements src sends to dst in the uneven all_to_all: all different."""
    return 3 + 7 * src + 5 * dst + 2 * src * dst


def test_all_to_all_single(ctx: Ctx) -> None:
    for dtype in (torch.float32, torch.bfloat16):
        # Even: chunk d of every rank's input goes to rank d.
        chunk = 1031
        out = torch.empty(chunk * ctx.world, dtype=dtype, device=ctx.device)
        ctx.call("all_to_all_single even", dist.all_to_all_single, out, ctx.input(chunk * ctx.world, dtype))
        ctx.sync()
        want = torch.cat([to_dtype(grid(ctx.seed, s, chunk * ctx.world, dtype), dtype)[ctx.rank * chunk:(ctx.rank + 1) * chunk]
                          for s in range(ctx.world)])
        check(f"all_to_all_single even {dtype} rank {ctx.rank}", out, want)
        # Uneven: sizes differ per (src, dst) pair.
        send_sizes = [split_size(ctx.rank, d) for d in range(ctx.world)]
        recv_sizes = [split_size(s, ctx.rank) for s in range(ctx.world)]
        out = torch.empty(sum(recv_sizes), dtype=dtype, device=ctx.device)
        ctx.call("all_to_all_single uneven", dist.all_to_all_single, out, ctx.input(sum(send_sizes), dtype, 9),
                 output_split_sizes=recv_sizes, input_split_sizes=send_sizes)
        ctx.sync()
        parts = []
        for s in range(ctx.world):
            sizes = [split_size(s, d) for d in range(ctx.world)]
            theirs = to_dtype(grid(ctx.seed + 9, s, sum(sizes), dtype), dtype)
            start = sum(sizes[:ctx.rank])
            parts.append(theirs[start:start + sizes[ctx.rank]])
        check(f"all_to_all_single uneven {dtype} rank {ctx.rank}", out, torch.cat(parts))


def test_torch_cuda_nccl(ctx: Ctx) -> None:
    """torch.cuda.nccl, what DataParallel's broadcast_coalesced and reduce_add use: one process
    driving every GPU it sees (ncclCommInitAll, then a group of one call per GPU), on rank 0
    alone; GPU d holds input d."""
    if ctx.backend != "nccl":
        raise Unsupported("torch.cuda.nccl needs NCCL on GPUs")
    if ctx.rank != 0:
        return
    import torch.cuda.nccl as tnccl

    n, count = torch.cuda.device_count(), 1031

    def inputs(seed: int, each: int, dtype) -> list:
        return [to_dtype(grid(seed, d, each, dtype), dtype).to(torch.device("cuda", d)) for d in range(n)]

    def synced(ts: list) -> list:
        for t in ts:
            torch.cuda.synchronize(t.device)
        return ts

    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        seed = ctx.seed + 21
        ts = inputs(seed, count, dtype)
        if not tnccl.is_available(ts):
            raise AssertionError(f"torch.cuda.nccl.is_available refused {n} tensors on {n} GPUs")
        tnccl.all_reduce(ts)
        for d, t in enumerate(synced(ts)):
            check(f"torch.cuda.nccl.all_reduce {dtype} GPU {d}", t, expected(seed, n, count, dtype, "sum"))
        ts = inputs(seed + 1, count, dtype)
        tnccl.broadcast(ts, root=n - 1)
        for d, t in enumerate(synced(ts)):
            check(f"torch.cuda.nccl.broadcast {dtype} GPU {d}", t, to_dtype(grid(seed + 1, n - 1, count, dtype), dtype))
        ts = inputs(seed + 2, count, dtype)
        out = torch.empty_like(ts[0])
        tnccl.reduce(ts, output=out, root=0)
        check(f"torch.cuda.nccl.reduce {dtype}", synced([out])[0], expected(seed + 2, n, count, dtype, "sum"))
        ts = inputs(seed + 3, count, dtype)
        outs = [torch.empty(n * count, dtype=dtype, device=t.device) for t in ts]
        tnccl.all_gather(ts, outs)
        want = torch.cat([to_dtype(grid(seed + 3, d, count, dtype), dtype) for d in range(n)])
        for d, t in enumerate(synced(outs)):
            check(f"torch.cuda.nccl.all_gather {dtype} GPU {d}", t, want)
        ts = inputs(seed + 4, n * count, dtype)
        outs = [torch.empty(count, dtype=dtype, device=t.device) for t in ts]
        tnccl.reduce_scatter(ts, outs)
        full = expected(seed + 4, n, n * count, dtype, "sum")
        for d, t in enumerate(synced(outs)):
            check(f"torch.cuda.nccl.reduce_scatter {dtype} GPU {d}", t, full[d * count:(d + 1) * count])
    ctx.notes.append(f"torch.cuda.nccl on {n} GPU(s) in one process, NCCL version {tnccl.version()}")


CASES = [test_all_reduce, test_all_reduce_premul_sum, test_all_gather_into_tensor, test_reduce_scatter_tensor,
         test_broadcast, test_reduce, test_all_to_all_single, test_torch_cuda_nccl]
