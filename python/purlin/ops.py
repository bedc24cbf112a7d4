"""Reduction operators: the five built-in ones and premul_sum(scalar).

ReduceOp values equal purlinRedOp_t. A PreMulSum is created in the library
for the one call that uses it (purlinRedOpCreatePreMulSum with the scalar in
the call's own dtype, host-immediate) and destroyed once the library no
longer needs it; see Communicator._reduce_op.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Union

from .errors import invalid_argument


class ReduceOp(enum.IntEnum):
    """purlinRedOp_t. AVG divides the sum by the world size (integers truncate toward zero)."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


@dataclass(frozen=True)
class PreMulSum:
    """sum over ranks of (x * scalar), accumulated like SUM; scalar is rounded to the call's dtype."""

    scalar: float


def premul_sum(scalar: float) -> PreMulSum:
    """The operator sum(x * scalar), NCCL's ncclRedOpCreatePreMulSum with a host scalar."""
    if isinstance(scalar, bool) or not isinstance(scalar, (int, float)):
        raise invalid_argument(f"purlin: premul_sum scalar must be a number, not {scalar!r}")
    return PreMulSum(scalar)


Op = Union[ReduceOp, PreMulSum, int, str]


def normalize(op: Op) -> Union[ReduceOp, PreMulSum]:
    """ReduceOp or PreMulSum from what a user may pass: the enum, its int, its name ("sum")."""
    if isinstance(op, (ReduceOp, PreMulSum)):
        return op
    if isinstance(op, str):
        try:
            return ReduceOp[op.upper()]
        except KeyError:
            pass
    elif isinstance(op, int) and not isinstance(op, bool):
        try:
            return ReduceOp(op)
        except ValueError:
            pass
    names = ", ".join(o.name for o in ReduceOp)
    raise invalid_argument(f"purlin: unknown reduction op {op!r} (use {names} or premul_sum(scalar))")
