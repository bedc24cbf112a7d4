"""NCCL's twelve element types as raw codes: encoding, decoding, rounding.

Buffers travel as raw unsigned codes (uint8/16/32/64), so every comparison
can be bit for bit. Integers are viewed as their NumPy type for arithmetic
(which wraps, as NCCL's in-type arithmetic does). Floats decode to float64;
float64 values round to a float type with round-to-nearest-even, bfloat16
and float8 through a table of every finite code (no ml_dtypes needed: the
GPU machine may lack it). The table values come from purlin.minifloat, the
package's own codec.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass
from typing import Optional

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

from purlin import minifloat  # noqa: E402


@dataclass(frozen=True)
class DType:
    name: str  # as tests/pynccl/nccl_library.DTYPES spells it
    nccl: int  # ncclDataType_t
    size: int  # bytes
    kind: str  # "int", "uint" or "float"
    eps: float = 0.0  # floats: the spacing of values just above 1 (2^-mantissa_bits)
    tiny: float = 0.0  # floats: the smallest positive (subnormal) value
    fmt: Optional[minifloat.Format] = None  # bfloat16 and float8: rounded through a table

    @property
    def raw(self) -> np.dtype:
        return np.dtype(f"uint{8 * self.size}")

    @property
    def numeric(self) -> np.dtype:
        """The NumPy type integer arithmetic runs in (wrapping)."""
        if self.kind == "float":
            raise TypeError(f"{self.name} is a float type")
        return np.dtype(f"{'u' if self.kind == 'uint' else ''}int{8 * self.size}")

    @property
    def is_float(self) -> bool:
        return self.kind == "float"


DTYPES = [
    DType("int8", 0, 1, "int"),
    DType("uint8", 1, 1, "uint"),
    DType("int32", 2, 4, "int"),
    DType("uint32", 3, 4, "uint"),
    DType("int64", 4, 8, "int"),
    DType("uint64", 5, 8, "uint"),
    DType("float16", 6, 2, "float", 2.0**-10, 2.0**-24),
    DType("float32", 7, 4, "float", 2.0**-23, 2.0**-149),
    DType("float64", 8, 8, "float", 2.0**-52, 2.0**-1074),
    DType("bfloat16", 9, 2, "float", 2.0**-7, 2.0**-133, minifloat.BFLOAT16),
    DType("float8_e4m3", 10, 1, "float", 2.0**-3, 2.0**-9, minifloat.FLOAT8_E4M3),
    DType("float8_e5m2", 11, 1, "float", 2.0**-2, 2.0**-16, minifloat.FLOAT8_E5M2),
]
BY_NAME = {d.name: d for d in DTYPES}

# Output poison: NaN in every float format (all bits set), 0xA5 bytes for integers.
POISON_FLOAT, POISON_INT = 0xFF, 0xA5


def poison_byte(dt: DType) -> int:
    return POISON_FLOAT if dt.is_float else POISON_INT


@functools.lru_cache(maxsize=None)
def _table(name: str) -> np.ndarray:
    """The float64 value of every code of a table-rounded format."""
    fmt = BY_NAME[name].fmt
    return np.array([minifloat.decode(c, fmt) for c in range(1 << fmt.width)], dtype=np.float64)


@functools.lru_cache(maxsize=None)
def _positive(name: str):
    """Codes 0.. of the non-negative finite values, ascending (code order is value order), and their values."""
    values = _table(name)
    half = len(values) // 2
    finite = np.isfinite(values[:half])
    codes = np.flatnonzero(finite)
    return codes.astype(np.uint64), values[codes]


def decode(raw: np.ndarray, dt: DType) -> np.ndarray:
    """Raw codes of a float type as float64 (NaN codes, such as the poison, stay NaN)."""
    raw = np.ascontiguousarray(raw, dtype=dt.raw)
    with np.errstate(invalid="ignore"):
        if dt.name == "float16":
            return raw.view(np.float16).astype(np.float64)
        if dt.name == "float32":
            return raw.view(np.float32).astype(np.float64)
        if dt.name == "float64":
            return raw.view(np.float64).copy()
        if dt.name == "bfloat16":
            return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return _table(dt.name)[raw]


def encode(values: np.ndarray, dt: DType) -> np.ndarray:
    """float64 values rounded to a float type (nearest, ties to even), as raw codes.
    Past the largest finite value float8 saturates (as CUDA's __NV_SATFINITE);
    bfloat16 goes to infinity from half an ulp above it, as IEEE rounding does."""
    x = np.asarray(values, dtype=np.float64)
    if dt.name == "float16":
        return x.astype(np.float16).view(np.uint16)
    if dt.name == "float32":
        return x.astype(np.float32).view(np.uint32)
    if dt.name == "float64":
        return x.copy().view(np.uint64)
    codes, grid = _positive(dt.name)
    mag = np.abs(x)
    hi = np.clip(np.searchsorted(grid, mag), 1, len(grid) - 1)
    lo = hi - 1
    below, above = mag - grid[lo], grid[hi] - mag
    pick_hi = (above < below) | ((above == below) & (codes[hi] % 2 == 0))
    out = np.where(pick_hi, codes[hi], codes[lo])
    top = grid[-1]
    over = mag > top
    if dt.fmt.has_infinity and not dt.fmt.saturate:
        inf_code = ((1 << dt.fmt.exponent_bits) - 1) << dt.fmt.mantissa_bits
        ulp = top - grid[-2]
        out = np.where(mag >= top + ulp / 2, inf_code, np.where(over, codes[-1], out))
    else:
        out = np.where(over, codes[-1], out)
    sign = np.signbit(x).astype(np.uint64) << np.uint64(8 * dt.size - 1)
    out = np.where(np.isnan(x), dt.fmt.nan_code, out.astype(np.uint64) | sign)
    return out.astype(dt.raw)


def as_ints(raw: np.ndarray, dt: DType) -> np.ndarray:
    """Raw codes of an integer type viewed as that type."""
    return np.ascontiguousarray(raw, dtype=dt.raw).view(dt.numeric)


def scalar_code(value: float, dt: DType) -> int:
    """A PreMulSum scalar as one raw code of dt (integers: two's complement)."""
    if dt.is_float:
        return int(encode(np.array([value]), dt)[0])
    return int(np.array([int(value)], dtype=np.int64).astype(dt.numeric).view(dt.raw)[0])


def scalar_value(code: int, dt: DType) -> float:
    """The value a scalar code stands for."""
    raw = np.array([code], dtype=dt.raw)
    return float(decode(raw, dt)[0]) if dt.is_float else float(as_ints(raw, dt)[0])


def show(raw_code: int, dt: DType) -> str:
    """One element for a message: its code and its value."""
    return f"{int(raw_code):#0{2 + 2 * dt.size}x} ({scalar_value(int(raw_code), dt):g})"
