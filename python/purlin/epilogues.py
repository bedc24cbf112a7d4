"""AllReduce epilogues (purlinAllReduceEpilogue), mixed into a Communicator.

What a transformer layer runs after its tensor-parallel all-reduce, fused
into the collective. The result is rows of `hidden` elements, and each rank
applies the epilogue to every row of its own result; the EpilogueKind bits
combine (RESIDUAL_ADD or RMSNORM is required, ROW_SCALE needs QUANT_FP8):

  z = T(reduced + residual), residual = z      RESIDUAL_ADD (else z = reduced)
  y = T(z * rsqrt(mean(z*z) + eps) * weight)    RMSNORM (else y = z)
  recv = y; quant = e4m3(y / scale)             QUANT_FP8

T rounds to the dtype (float32, float16 or bfloat16), every step computes in
float32 as the unfused kernels do, and the float8 e4m3 output saturates at
+-448. The scale is the one float32 of scales (read), or with ROW_SCALE each
row's largest |y| / 448 (1 for a row of zeros), written to scales[row].

all_reduce_epilogue is the general form; all_reduce_rmsnorm the usual one of
a transformer layer (residual add, RMSNorm, optionally fp8), over torch
tensors as well as NumPy or CuPy arrays. Arrays are checked here against
each other (dtypes, sizes, devices); the rules of the epilogue itself (its
kinds, whole rows, eps, buffers that overlap) are the library's, and its
refusal says which.
"""

from __future__ import annotations

import ctypes
import enum
from typing import TYPE_CHECKING, Any, Dict, Optional

from . import _library
from .buffers import Buffer, check_count, empty_like, same_dtype
from .dtypes import DataType
from .errors import invalid_argument
from .ops import Op, ReduceOp

if TYPE_CHECKING:
    from .communicator import Communicator

    _Base = Communicator
else:
    _Base = object


class EpilogueKind(enum.IntFlag):
    """purlinEpilogueKind_t: what an AllReduce does to each row of its result."""

    RESIDUAL_ADD = 1
    RMSNORM = 2
    QUANT_FP8 = 4
    ROW_SCALE = 8


_INT_MAX = (1 << 31) - 1


class EpilogueCollectives(_Base):
    """all_reduce_epilogue, all_reduce_rmsnorm."""

    def all_reduce_epilogue(self, send: Any, recv: Any = None, *, kind: int, hidden: Optional[int] = None,
                            residual: Any = None, weight: Any = None, quant: Any = None, scales: Any = None,
                            eps: float = 1e-6, op: Op = ReduceOp.SUM, stream: Any = None) -> Any:
        """all_reduce(send, recv, op), then the epilogue kind on each row of the result.

        recv=None reduces in place. hidden defaults to weight's size when
        weight is given, else send's last dimension. residual (read and
        written) is like send; weight holds hidden elements of send's dtype;
        quant (float8_e4m3fn, or uint8 for its raw bytes) one element per
        element of the result; scales is float32: one element, or with
        ROW_SCALE one per row. Give exactly the arrays kind uses. eps is
        RMSNorm's (passed only with RMSNORM). Returns the result array.
        """
        return self._epilogue("all_reduce_epilogue", _NAMES, send, recv, kind, hidden, residual, weight, quant,
                              scales, eps, op, stream)

    def all_reduce_rmsnorm(self, x: Any, residual: Any, weight: Any, eps: float, out: Any = None, *,
                           quant_out: Any = None, scales: Any = None, row_scale: bool = False,
                           op: Op = ReduceOp.SUM, stream: Any = None) -> Any:
        """The all-reduce after a tensor-parallel layer, then residual add and RMSNorm.

        x is this rank's partial result, rows of weight's size (x.shape[-1]
        as a rule). out = rmsnorm(sum over the ranks of x, + residual) *
        weight, and residual becomes that sum plus residual (in place, as
        the frameworks do; residual=None normalizes the sum alone). out=None
        allocates it like x (torch.empty_like for a tensor); out may be x.
        With quant_out (float8_e4m3fn, shaped like x) the output is also
        quantized: by the one float32 of scales, or with row_scale=True by
        each row's largest |value| / 448, written to scales (one float32 per
        row). Returns out.
        """
        call = "all_reduce_rmsnorm"
        kind = EpilogueKind.RMSNORM
        if residual is not None:
            kind |= EpilogueKind.RESIDUAL_ADD
        if quant_out is not None:
            kind |= EpilogueKind.QUANT_FP8
            if scales is None:
                raise invalid_argument(f"purlin: {call}: quant_out needs scales (one float32, or one per row "
                                       "with row_scale=True)")
            if row_scale:
                kind |= EpilogueKind.ROW_SCALE
        elif row_scale or scales is not None:
            raise invalid_argument(f"purlin: {call}: row_scale and scales go with quant_out")
        if out is None:
            out = empty_like(self._buffer(x, "x", call))
        return self._epilogue(call, _RMSNORM_NAMES, x, out, int(kind), None, residual, weight, quant_out, scales,
                              eps, op, stream)

    def _epilogue(self, call: str, names: Dict[str, str], send: Any, recv: Any, kind: Any, hidden: Any,
                  residual: Any, weight: Any, quant: Any, scales: Any, eps: float, op: Op, stream: Any) -> Any:
        """One purlinAllReduceEpilogue call; names gives each array's name in call's signature."""
        if isinstance(kind, bool) or not isinstance(kind, int) or not 0 <= kind <= _INT_MAX:
            raise invalid_argument(f"purlin: {call}: kind must be EpilogueKind bits, not {kind!r}")
        s = self._buffer(send, names["send"], call, writable=recv is None)
        r = s if recv is None else self._buffer(recv, names["recv"], call, writable=True)
        same_dtype(s, r, call)
        check_count(r, s.count, f"{names['recv']} (like {names['send']})", call)
        buffers = [s, r]

        def extra(array: Any, name: str, writable: bool) -> Optional[Buffer]:
            if array is None:
                return None
            buf = self._buffer(array, names[name], call, writable=writable)
            buffers.append(buf)
            return buf

        res = extra(residual, "residual", True)
        w = extra(weight, "weight", False)
        q = extra(quant, "quant", True)
        sc = extra(scales, "scales", bool(kind & EpilogueKind.ROW_SCALE))
        if hidden is None:
            hidden = w.count if w is not None else (s.shape[-1] if s.shape else s.count)
        if isinstance(hidden, bool) or not isinstance(hidden, int) or hidden < 1:
            raise invalid_argument(f"purlin: {call}: hidden must be a positive int, got {hidden!r}")
        like = f"like {names['send']}"
        if res is not None:
            _same_type(res, s, names, "residual", call)
            check_count(res, s.count, f"{names['residual']} ({like})", call)
        if w is not None:
            _same_type(w, s, names, "weight", call)
            check_count(w, hidden, f"{names['weight']} (hidden)", call)
        if q is not None:
            if q.dtype not in (DataType.FLOAT8_E4M3, DataType.UINT8):
                raise invalid_argument(f"purlin: {call}: {names['quant']} must be float8_e4m3fn (or uint8), not "
                                       f"{q.dtype.name.lower()}")
            check_count(q, s.count, f"{names['quant']} ({like})", call)
        if sc is not None:
            if sc.dtype != DataType.FLOAT32:
                raise invalid_argument(f"purlin: {call}: scales must be float32, not {sc.dtype.name.lower()}")
            if not kind & EpilogueKind.ROW_SCALE:
                check_count(sc, 1, "scales (one for the tensor)", call)
            elif s.count % hidden == 0:  # else the library refuses the rows
                check_count(sc, s.count // hidden, "scales (one per row with row scales)", call)
        desc = None  # kind 0 and no arrays: a plain all-reduce
        if kind or len(buffers) > 2:
            desc = _library.EpilogueStruct(kind=int(kind), hidden=hidden if kind else 0, residual=_ptr(res),
                                           weight=_ptr(w), quant=_ptr(q), scales=_ptr(sc),
                                           eps=eps if kind & EpilogueKind.RMSNORM else 0.0)
        raw_op = self._reduce_op(op, s.dtype)
        try:
            self._launch(call, _library.load().purlinAllReduceEpilogue,
                         [s.ptr, r.ptr, s.count, int(s.dtype), raw_op, None if desc is None else ctypes.byref(desc)],
                         buffers, stream)
        finally:
            self._release_op(raw_op)
        return r.array


_NAMES = {"send": "send", "recv": "recv", "residual": "residual", "weight": "weight", "quant": "quant",
          "scales": "scales"}
_RMSNORM_NAMES = {**_NAMES, "send": "x", "recv": "out", "quant": "quant_out"}


def _ptr(buf: Optional[Buffer]) -> Optional[int]:
    return None if buf is None else buf.ptr


def _same_type(buf: Buffer, send: Buffer, names: Dict[str, str], name: str, call: str) -> None:
    if buf.dtype != send.dtype:
        raise invalid_argument(f"purlin: {call}: {names[name]} is {buf.dtype.name.lower()} but {names['send']} is "
                               f"{send.dtype.name.lower()}")
