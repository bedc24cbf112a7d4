"""NumPy float64 references for the collectives, and the inputs every rank can recompute.

Inputs are small integers (times 0.5 for floats) so that the library's fp32
accumulation is exact for every float type; a reference is then the float64
result rounded once to the dtype (RNE, as the library does), and results
must match it exactly.

A premul_sum(s) in these tests is passed by each rank r as rank_op(op, r):
every rank has its own scalar, as NCCL allows. Each rank's input times its
scalar is rounded to the dtype (the value the rank sends), then summed.
"""

from __future__ import annotations

from typing import List

import numpy as np

import purlin

try:
    import ml_dtypes
except ImportError:  # bfloat16/float8 tests need it
    ml_dtypes = None

INT_DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64"]
FLOAT_DTYPES = ["float16", "float32", "float64"] + (
    ["bfloat16", "float8_e4m3fn", "float8_e5m2"] if ml_dtypes is not None else [])
ALL_DTYPES = INT_DTYPES + FLOAT_DTYPES


def np_dtype(name: str) -> np.dtype:
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def is_float(name: str) -> bool:
    return name in FLOAT_DTYPES


def is_unsigned(name: str) -> bool:
    return name.startswith("uint")


def values(rank: int, count: int, dtype: str, seed: int, op: purlin.ReduceOp = purlin.SUM) -> np.ndarray:
    """Rank rank's input as float64 (exactly representable in dtype)."""
    rng = np.random.default_rng(seed * 7919 + rank)
    if op == purlin.PROD:
        low, high = (0, 3) if is_unsigned(dtype) else (-2, 3)
    else:
        low, high = (0, 9) if is_unsigned(dtype) else (-4, 5)
    ints = rng.integers(low, high, count).astype(np.float64)
    return ints * 0.5 if is_float(dtype) else ints


def as_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    """x rounded (floats, RNE) or wrapped (integers, two's complement) to dtype."""
    if is_float(dtype):
        return x.astype(np_dtype(dtype))
    return np.asarray(x, dtype=np.float64).astype(np.int64).astype(np_dtype(dtype))


RANK_FACTORS = (1, 2, 3, 5)


def rank_op(op, rank: int):
    """Rank rank's op: a premul_sum's scalar times a factor of the rank's own
    (positive integers, so an unsigned or integer dtype still holds it)."""
    if isinstance(op, purlin.PreMulSum):
        return purlin.premul_sum(op.scalar * RANK_FACTORS[rank % len(RANK_FACTORS)])
    return op


def reduce(inputs: List[np.ndarray], op, dtype: str, world_size: int) -> np.ndarray:
    """op over float64 inputs in rank order, then the library's final rounding to dtype.
    A premul_sum multiplies rank r's input by rank_op(op, r)'s scalar, rounded to dtype."""
    stack = np.stack(inputs)
    if isinstance(op, purlin.PreMulSum):
        terms = []
        for r, x in enumerate(inputs):
            scalar = float(as_dtype(np.array([rank_op(op, r).scalar]), dtype).astype(np.float64)[0])
            terms.append(as_dtype(x * scalar, dtype).astype(np.float64) if is_float(dtype) else x * scalar)
        return as_dtype(np.stack(terms).sum(axis=0), dtype)
    if op == purlin.SUM:
        return as_dtype(stack.sum(axis=0), dtype)
    if op == purlin.PROD:
        if is_float(dtype):
            return as_dtype(stack.prod(axis=0), dtype)
        product = np.ones(stack.shape[1], dtype=np.int64)
        for row in stack.astype(np.int64):
            product = product * row  # int64 wraps like the narrower type's low bits
        return product.astype(np_dtype(dtype))
    if op == purlin.MAX:
        return as_dtype(stack.max(axis=0), dtype)
    if op == purlin.MIN:
        return as_dtype(stack.min(axis=0), dtype)
    if op == purlin.AVG:
        total = stack.sum(axis=0)
        if is_float(dtype):
            return as_dtype(total / world_size, dtype)
        return as_dtype(np.trunc(total / world_size), dtype)  # Go: truncate toward zero
    raise ValueError(op)


def op_defined(op, dtype: str, world_size: int) -> bool:
    """Whether NCCL reduces dtype with op across world_size ranks: all, but AVG and
    premul_sum on the float8 types only on two or more (one rank: InvalidArgument)."""
    scaled = op == purlin.AVG or isinstance(op, purlin.PreMulSum)
    return world_size > 1 or not (scaled and dtype.startswith("float8"))


def ops_for(dtype: str, world_size: int) -> list:
    """Every op NCCL reduces dtype with across world_size ranks worth testing
    (premul_sum with exact scalars)."""
    ops = [purlin.SUM, purlin.PROD, purlin.MAX, purlin.MIN, purlin.AVG, purlin.premul_sum(3)]
    if is_float(dtype):
        ops.append(purlin.premul_sum(0.5))
    return [op for op in ops if op_defined(op, dtype, world_size)]


def assert_equal(actual: np.ndarray, expected: np.ndarray, what: str) -> None:
    a = np.asarray(actual).astype(np.float64).ravel()
    e = np.asarray(expected).astype(np.float64).ravel()
    if a.shape != e.shape or not np.array_equal(a, e):
        bad = np.flatnonzero(a != e)[:5] if a.shape == e.shape else []
        details = ", ".join(f"[{i}] got {a[i]} want {e[i]}" for i in bad)
        raise AssertionError(f"{what}: results differ ({len(bad)} shown): {details} shape {a.shape} vs {e.shape}")
