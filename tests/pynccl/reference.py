"""Inputs and expected results, computed locally on every rank.

Every rank's input is a function of (seed, rank, count, dtype), so each rank
can compute what all the others sent. Values lie on a grid (quarters in
[-2, 2] for floats, small integers for integers) on which sums and products of
a few ranks are exact in float64: the expected result is then the exact value
rounded once to the dtype (integers wrap like the type), which is what NCCL's
and Purlin's fp32 accumulation produce, so results are compared bit for bit.
"""

from __future__ import annotations

import zlib

import numpy as np

INTEGER_TYPES = {"int8": np.int8, "uint8": np.uint8, "int32": np.int32, "uint32": np.uint32,
                 "int64": np.int64, "uint64": np.uint64}


def rank_input(seed: int, rank: int, count: int, dtype: str) -> np.ndarray:
    """Grid values as float64, the same on every rank that asks."""
    rng = np.random.default_rng([seed, rank, count, zlib.crc32(dtype.encode())])
    if dtype.startswith("uint"):
        return rng.integers(0, 100, count).astype(np.float64)
    if dtype.startswith("int"):
        return rng.integers(-50, 51, count).astype(np.float64)
    return rng.integers(-8, 9, count).astype(np.float64) / 4


def all_inputs(seed: int, nranks: int, count: int, dtype: str):
    return [rank_input(seed, r, count, dtype) for r in range(nranks)]


def combine(values, op: str) -> np.ndarray:
    """The exact reduction of per-rank float64 arrays, in rank order."""
    stack = np.stack(values)
    if op == "sum":
        return stack.sum(axis=0)
    if op == "prod":
        return stack.prod(axis=0)
    if op == "max":
        return stack.max(axis=0)
    if op == "min":
        return stack.min(axis=0)
    if op == "avg":
        return stack.sum(axis=0) / len(values)
    raise ValueError(op)


def expected(seed: int, nranks: int, count: int, dtype: str, op: str, bufs) -> np.ndarray:
    """The reduction of every rank's input rounded once to dtype, as float64.
    Integers reduce in the type (wrapping) and Avg then truncates toward zero;
    floats are rounded by the backend's own cast (numpy or torch)."""
    inputs = all_inputs(seed, nranks, count, dtype)
    if dtype in INTEGER_TYPES:
        exact = combine(inputs, "sum" if op == "avg" else op)
        wrapped = np.asarray(exact, dtype=np.int64).astype(INTEGER_TYPES[dtype]).astype(np.int64)
        if op == "avg":
            wrapped = np.trunc(wrapped / nranks)
        return wrapped.astype(np.float64)
    return bufs.download(bufs.upload(combine(inputs, op), dtype))


def assert_equal(name: str, got: np.ndarray, want: np.ndarray) -> None:
    """Bit-for-bit (as float64) comparison that names the first difference."""
    if got.shape != want.shape:
        raise AssertionError(f"{name}: shape {got.shape}, expected {want.shape}")
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    if not same.all():
        bad = np.flatnonzero(~same)
        i = int(bad[0])
        raise AssertionError(f"{name}: {bad.size} of {got.size} elements differ; "
                             f"first at {i}: got {got[i]!r}, expected {want[i]!r}")
