"""The drop-in tests' reference: inputs on a grid and their exact reductions.

tests/torch and tests/pynccl both use it (their reference.py adapt it to
torch dtypes and to numpy names). Every rank's input is a function of
(seed, rank, count, dtype name), so each rank computes locally what every
other rank contributed. Values lie on a grid (quarters in [-2, 2] for
floats, small integers for integers) on which sums and products of a few
ranks are exact in float64: the expected result is that exact value rounded
once to the dtype (integers wrap like the type, Avg of integers truncates
toward zero), which is what NCCL's and Purlin's fp32 accumulation produce.
So results are compared exactly, and a single wrong element fails.
"""

from __future__ import annotations

import zlib

import numpy as np

OPS = ("sum", "prod", "max", "min", "avg")


def grid(seed: int, rank: int, count: int, name: str, kind: str) -> np.ndarray:
    """Rank's input as float64; kind is "uint", "int" or "float", name (the
    dtype's name) seeds it."""
    rng = np.random.default_rng([seed, rank, count, zlib.crc32(name.encode())])
    if kind == "uint":
        return rng.integers(0, 100, count).astype(np.float64)
    if kind == "int":
        return rng.integers(-50, 51, count).astype(np.float64)
    if kind != "float":
        raise ValueError(kind)
    return rng.integers(-8, 9, count).astype(np.float64) / 4


def combine(values, op: str) -> np.ndarray:
    """The exact reduction of per-rank float64 arrays, in rank order."""
    stack = np.stack(list(values))
    if op == "sum":
        return stack.sum(axis=0)
    if op == "prod":
        return stack.prod(axis=0)
    if op == "max":
        return stack.max(axis=0)
    if op == "min":
        return stack.min(axis=0)
    if op == "avg":
        return stack.sum(axis=0) / len(stack)
    raise ValueError(op)


def wrap(values: np.ndarray, integer_type) -> np.ndarray:
    """Integral float64 values as integer_type holds them (wrapped), as float64."""
    return np.asarray(values, dtype=np.int64).astype(integer_type).astype(np.int64).astype(np.float64)


def integer_reduction(values, op: str, integer_type) -> np.ndarray:
    """The reduction an integer type gives: exact, wrapped like the type; Avg
    is the wrapped sum divided by the rank count, truncated toward zero."""
    total = wrap(combine(values, "sum" if op == "avg" else op), integer_type)
    return np.trunc(total / len(values)) if op == "avg" else total


def assert_equal(name: str, got: np.ndarray, want: np.ndarray) -> None:
    """Exact comparison of float64 arrays (NaN equal to NaN) naming the first difference."""
    got, want = np.ravel(got), np.ravel(want)
    if got.shape != want.shape:
        raise AssertionError(f"{name}: {got.size} elements, expected {want.size}")
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    if not same.all():
        bad = np.flatnonzero(~same)
        i = int(bad[0])
        raise AssertionError(f"{name}: {bad.size} of {got.size} elements differ; "
                             f"first at {i}: got {got[i]!r}, expected {want[i]!r}")
