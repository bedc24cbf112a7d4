"""Inputs and expected results for the torch.distributed drop-in test.

Every rank's input is a function of (seed, rank, count, dtype), so each rank
computes locally what every other rank contributed. Values lie on a grid
(quarters in [-2, 2] for floats, small integers for integers) on which the
reductions of a few ranks are exact in float64; the expected result is that
exact value rounded once to the dtype (integers wrap like the type, Avg of
integers truncates), which is what an fp32 accumulator gives. So results are
compared exactly, and a single wrong element fails.
"""

from __future__ import annotations

import zlib

import torch

INTEGER = {torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64}


def grid(seed: int, rank: int, count: int, dtype: torch.dtype) -> torch.Tensor:
    """Rank's input as float64 on the CPU."""
    g = torch.Generator().manual_seed(zlib.crc32(f"{seed}/{rank}/{count}/{dtype}".encode()))
    if dtype == torch.uint8:
        return torch.randint(0, 100, (count,), generator=g).to(torch.float64)
    if dtype in INTEGER:
        return torch.randint(-50, 51, (count,), generator=g).to(torch.float64)
    return torch.randint(-8, 9, (count,), generator=g).to(torch.float64) / 4


def to_dtype(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float64 values as dtype, rounded once (integers: wrapped like the type)."""
    if dtype in INTEGER:
        return values.round().to(torch.int64).to(dtype)
    return values.to(dtype)


def rank_input(seed: int, rank: int, count: int, dtype: torch.dtype, device) -> torch.Tensor:
    return to_dtype(grid(seed, rank, count, dtype), dtype).to(device)


def reduce_exact(values, op: str) -> torch.Tensor:
    stack = torch.stack(list(values))
    if op in ("sum", "avg"):
        total = stack.sum(0)
        return total / len(values) if op == "avg" else total
    if op == "prod":
        return stack.prod(0)
    if op == "max":
        return stack.max(0).values
    if op == "min":
        return stack.min(0).values
    raise ValueError(op)


def expected(seed: int, world: int, count: int, dtype: torch.dtype, op: str, scale=1.0) -> torch.Tensor:
    """The reduction over every rank of its input (times scale: PreMulSum; a
    sequence gives each rank its own scalar), on the CPU."""
    scales = list(scale) if isinstance(scale, (list, tuple)) else [scale] * world
    inputs = [grid(seed, r, count, dtype) * scales[r] for r in range(world)]
    if dtype in INTEGER:
        total = to_dtype(reduce_exact(inputs, "sum" if op == "avg" else op), dtype)
        if op == "avg":
            return torch.trunc(total.to(torch.float64) / world).to(dtype)
        return total
    return reduce_exact(inputs, op).to(dtype)


def check(name: str, got: torch.Tensor, want: torch.Tensor) -> None:
    """Exact comparison (as float64, NaN equal to NaN) naming the first difference."""
    g = got.detach().to("cpu").to(torch.float64).flatten()
    w = want.detach().to("cpu").to(torch.float64).flatten()
    if g.shape != w.shape:
        raise AssertionError(f"{name}: {g.numel()} elements, expected {w.numel()}")
    same = (g == w) | (torch.isnan(g) & torch.isnan(w))
    if not bool(same.all()):
        bad = torch.nonzero(~same).flatten()
        i = int(bad[0])
        raise AssertionError(f"{name}: {bad.numel()} of {g.numel()} elements differ; "
                             f"first at {i}: got {g[i].item()!r}, expected {w[i].item()!r}")
