"""Exact encoding of a Python float into the small float formats Purlin reduces.

A PreMulSum scalar travels to the library as raw bytes of the collective's
own type. NumPy has no bfloat16 or float8 without ml_dtypes, so this module
rounds a float to those formats itself, as the library does: round to
nearest even; float8 saturates to its largest finite value (CUDA's
__NV_SATFINITE), bfloat16 and float16 overflow to infinity; NaN stays NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Format:
    """A binary floating-point format with a sign bit."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    has_infinity: bool  # float8 e4m3fn has none: its top exponent holds normal numbers
    saturate: bool  # overflow goes to the largest finite value instead of infinity
    nan_code: int  # the positive NaN the library writes
    max_finite: float

    @property
    def bias(self) -> int:
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def width(self) -> int:
        return 1 + self.exponent_bits + self.mantissa_bits


FLOAT16 = Format("float16", 5, 10, True, False, 0x7E00, 65504.0)
BFLOAT16 = Format("bfloat16", 8, 7, True, False, 0x7FC0, 3.3895313892515355e38)
FLOAT8_E4M3 = Format("float8_e4m3fn", 4, 3, False, True, 0x7F, 448.0)
FLOAT8_E5M2 = Format("float8_e5m2", 5, 2, True, True, 0x7E, 57344.0)


def _round_magnitude(value: float, fmt: Format) -> float:
    """Rounds a finite non-negative value to fmt's grid, nearest even, without range limits."""
    min_normal_exponent = 1 - fmt.bias
    if value < math.ldexp(1.0, min_normal_exponent):
        exponent = min_normal_exponent
    else:
        exponent = math.frexp(value)[1] - 1
    quantum = math.ldexp(1.0, exponent - fmt.mantissa_bits)
    # value / quantum is exact (a power-of-two scaling); round() ties to even.
    return round(value / quantum) * quantum


def encode(value: float, fmt: Format) -> int:
    """The bit pattern of value rounded to fmt."""
    sign = (1 << (fmt.width - 1)) if math.copysign(1.0, value) < 0 else 0
    if math.isnan(value):
        return fmt.nan_code
    magnitude = abs(value)
    inf_code = ((1 << fmt.exponent_bits) - 1) << fmt.mantissa_bits
    rounded = math.inf if math.isinf(magnitude) else _round_magnitude(magnitude, fmt)
    if rounded > fmt.max_finite:
        if fmt.saturate or not fmt.has_infinity:
            rounded = fmt.max_finite
        else:
            return sign | inf_code
    if rounded == 0.0:
        return sign
    min_normal_exponent = 1 - fmt.bias
    if rounded < math.ldexp(1.0, min_normal_exponent):
        mantissa = int(rounded / math.ldexp(1.0, min_normal_exponent - fmt.mantissa_bits))
        return sign | mantissa
    exponent = math.frexp(rounded)[1] - 1
    fraction = rounded / math.ldexp(1.0, exponent) - 1.0
    mantissa = int(fraction * (1 << fmt.mantissa_bits))
    return sign | ((exponent + fmt.bias) << fmt.mantissa_bits) | mantissa


def decode(code: int, fmt: Format) -> float:
    """The value of a bit pattern of fmt (used by tests and error messages)."""
    sign = -1.0 if code >> (fmt.width - 1) & 1 else 1.0
    exponent_field = (code >> fmt.mantissa_bits) & ((1 << fmt.exponent_bits) - 1)
    mantissa = code & ((1 << fmt.mantissa_bits) - 1)
    top = (1 << fmt.exponent_bits) - 1
    if fmt.has_infinity and exponent_field == top:
        return sign * math.inf if mantissa == 0 else math.nan
    if not fmt.has_infinity and exponent_field == top and mantissa == (1 << fmt.mantissa_bits) - 1:
        return math.nan
    if exponent_field == 0:
        return sign * math.ldexp(mantissa, 1 - fmt.bias - fmt.mantissa_bits)
    return sign * math.ldexp((1 << fmt.mantissa_bits) | mantissa,
                             exponent_field - fmt.bias - fmt.mantissa_bits)
