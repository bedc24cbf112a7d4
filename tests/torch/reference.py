"""Inputs and expected results of the torch.distributed drop-in test:
tests/common/grid_reference.py's rule for torch dtypes."""

from __future__ import annotations

import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))

import grid_reference  # noqa: E402

INTEGER = {torch.int8: np.int8, torch.uint8: np.uint8, torch.int16: np.int16, torch.int32: np.int32,
           torch.int64: np.int64}


def grid(seed: int, rank: int, count: int, dtype: torch.dtype) -> torch.Tensor:
    """Rank's input as float64 on the CPU."""
    kind = "uint" if dtype == torch.uint8 else "int" if dtype in INTEGER else "float"
    return torch.from_numpy(grid_reference.grid(seed, rank, count, str(dtype), kind))


def to_dtype(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float64 values as dtype, rounded once (integers: wrapped like the type)."""
    if dtype in INTEGER:
        return values.round().to(torch.int64).to(dtype)
    return values.to(dtype)


def rank_input(seed: int, rank: int, count: int, dtype: torch.dtype, device) -> torch.Tensor:
    return to_dtype(grid(seed, rank, count, dtype), dtype).to(device)


def expected(seed: int, world: int, count: int, dtype: torch.dtype, op: str, scale=1.0) -> torch.Tensor:
    """The reduction over every rank of its input (times scale: PreMulSum; a
    sequence gives each rank its own scalar), on the CPU."""
    scales = list(scale) if isinstance(scale, (list, tuple)) else [scale] * world
    inputs = [grid(seed, r, count, dtype).numpy() * scales[r] for r in range(world)]
    if dtype in INTEGER:
        return torch.from_numpy(grid_reference.integer_reduction(inputs, op, INTEGER[dtype])).to(dtype)
    return torch.from_numpy(grid_reference.combine(inputs, op)).to(dtype)


def check(name: str, got: torch.Tensor, want: torch.Tensor) -> None:
    """Exact comparison (as float64, NaN equal to NaN) naming the first difference."""
    grid_reference.assert_equal(name, got.detach().to("cpu").to(torch.float64).flatten().numpy(),
                                want.detach().to("cpu").to(torch.float64).flatten().numpy())
