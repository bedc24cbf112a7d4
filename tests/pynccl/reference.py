"""Inputs and expected results of the ctypes client, computed locally on
every rank: tests/common/grid_reference.py's rule for numpy dtype names."""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))

import grid_reference as grid  # noqa: E402
from grid_reference import assert_equal  # noqa: E402,F401

INTEGER_TYPES = {"int8": np.int8, "uint8": np.uint8, "int32": np.int32, "uint32": np.uint32,
                 "int64": np.int64, "uint64": np.uint64}


def rank_input(seed: int, rank: int, count: int, dtype: str) -> np.ndarray:
    """Grid values as float64, the same on every rank that asks."""
    kind = "uint" if dtype.startswith("uint") else "int" if dtype.startswith("int") else "float"
    return grid.grid(seed, rank, count, dtype, kind)


def all_inputs(seed: int, nranks: int, count: int, dtype: str):
    return [rank_input(seed, r, count, dtype) for r in range(nranks)]


def expected(seed: int, nranks: int, count: int, dtype: str, op: str, bufs) -> np.ndarray:
    """The reduction of every rank's input rounded once to dtype, as float64;
    floats are rounded by the backend's own cast (numpy or torch)."""
    inputs = all_inputs(seed, nranks, count, dtype)
    if dtype in INTEGER_TYPES:
        return grid.integer_reduction(inputs, op, INTEGER_TYPES[dtype])
    return bufs.download(bufs.upload(grid.combine(inputs, op), dtype))
