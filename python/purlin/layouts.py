"""Collectives named by their layouts (purlinCollective), mixed into a Communicator.

A column-block collective treats a buffer as a row-major matrix of `rows`
rows whose column block r belongs to rank r: a tensor-parallel gather along
the last dimension lands in place, with no transpose after it.

  all_gather_columns:     every rank's send is a rows x w block; every recv,
                          rows x (world_size * w), gets rank r's block at columns [r*w, (r+1)*w)
  reduce_scatter_columns: every send is rows x (world_size * w); rank r's recv,
                          rows x w, gets op over every rank's column block r

An all-to-all by a matrix takes every pair's size at once, as every rank
knows them (a mixture of experts' token dispatch once the counts are
exchanged): counts[p][q] elements go from rank p to rank q, and land at
displs[p][q] of q's recv (default: packed in source order); each rank's send
holds its slices packed in destination order.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, List, Optional, Sequence

from . import _library
from .buffers import Buffer, check_count, same_dtype
from .errors import invalid_argument
from .ops import Op, ReduceOp

if TYPE_CHECKING:
    from .communicator import Communicator

    _Base = Communicator
else:
    _Base = object

_PACKED = _library.LayoutStruct(0, 0, 0, 0, 0)
_COLUMNS = _library.LayoutStruct(1, 0, 0, 1, 0)  # scattered, column blocks
_SCATTERED_MATRIX = _library.LayoutStruct(1, 1, 0, 0, 1)
_TRANSPOSED_MATRIX = _library.LayoutStruct(2, 1, 0, 0, 1)
_COPY, _REDUCE = 0, 1


class LayoutCollectives(_Base):
    """all_gather_columns, reduce_scatter_columns, all_to_all_matrix."""

    def all_gather_columns(self, send: Any, recv: Any, rows: int, *, stream: Any = None) -> Any:
        """Rank r's rows x w send lands in columns [r*w, (r+1)*w) of every rank's rows x (world_size*w) recv."""
        call = "all_gather_columns"
        s = self._buffer(send, "send", call)
        r = self._buffer(recv, "recv", call, writable=True)
        same_dtype(s, r, call)
        rows = _rows(rows, s.count, "send", call)
        check_count(r, self.world_size * s.count, "recv (world_size x send)", call)
        self._by_layouts(call, _COPY, _PACKED, _COLUMNS, s, r, s.count, rows, None, stream)
        return r.array

    def reduce_scatter_columns(self, send: Any, recv: Any, rows: int, op: Op = ReduceOp.SUM, *,
                               stream: Any = None) -> Any:
        """Rank r's rows x w recv gets op over column block r of every rank's rows x (world_size*w) send."""
        call = "reduce_scatter_columns"
        s = self._buffer(send, "send", call)
        r = self._buffer(recv, "recv", call, writable=True)
        same_dtype(s, r, call)
        rows = _rows(rows, r.count, "recv", call)
        check_count(s, self.world_size * r.count, "send (world_size x recv)", call)
        self._by_layouts(call, _REDUCE, _COLUMNS, _PACKED, s, r, r.count, rows, op, stream)
        return r.array

    def all_to_all_matrix(self, send: Any, recv: Any, counts: Sequence[Sequence[int]],
                          displs: Optional[Sequence[Sequence[int]]] = None, *, stream: Any = None) -> Any:
        """counts[p][q] elements from rank p to rank q, landing at displs[p][q] of q's recv.

        counts and displs are world_size x world_size, equal on every rank; displs
        defaults to the slices packed in source order. send holds this rank's
        slices packed in destination order.
        """
        call = "all_to_all_matrix"
        n, me = self.world_size, self.rank
        counts = _matrix(counts, "counts", n, call)
        if displs is None:
            displs = [[sum(counts[o][q] for o in range(p)) for q in range(n)] for p in range(n)]
        displs = _matrix(displs, "displs", n, call)
        s = self._buffer(send, "send", call)
        r = self._buffer(recv, "recv", call, writable=True)
        same_dtype(s, r, call)
        if s.count < sum(counts[me]):
            raise invalid_argument(f"purlin: {call}: send has {s.count} elements, its slices need {sum(counts[me])}")
        need = max((displs[p][me] + counts[p][me] for p in range(n) if counts[p][me]), default=0)
        if r.count < need:
            raise invalid_argument(f"purlin: {call}: recv has {r.count} elements, the slices reach element {need}")
        flat_counts = (ctypes.c_size_t * (n * n))(*[v for row in counts for v in row])
        flat_displs = (ctypes.c_size_t * (n * n))(*[v for row in displs for v in row])
        self._by_layouts(call, _COPY, _SCATTERED_MATRIX, _TRANSPOSED_MATRIX, s, r, 0, 0, None, stream,
                         counts=flat_counts, displs=flat_displs)
        return r.array

    def _by_layouts(self, call: str, consume: int, in_layout: Any, out_layout: Any, s: Buffer, r: Buffer,
                    count: int, rows: int, op: Any, stream: Any, counts: Any = None, displs: Any = None) -> None:
        """One purlinCollective call; the descriptor and its arrays are read before it returns."""
        raw_op = self._reduce_op(op, s.dtype) if op is not None else 0
        try:
            desc = _library.CollectiveDescStruct(consume=consume, in_=in_layout, out=out_layout, sendbuff=s.ptr,
                                                 recvbuff=r.ptr, count=count, datatype=int(s.dtype), op=raw_op,
                                                 rows=rows, counts=counts, displs=displs)
            self._launch(call, _library.load().purlinCollective, [ctypes.byref(desc)], [s, r], stream)
        finally:
            if op is not None:
                self._release_op(raw_op)


def _matrix(values: Any, name: str, n: int, call: str) -> List[List[int]]:
    rows = [list(row) for row in values]
    if len(rows) != n or any(len(row) != n for row in rows):
        raise invalid_argument(f"purlin: {call}: {name} must be {n} x {n} (world_size x world_size)")
    for row in rows:
        for v in row:
            if isinstance(v, bool) or int(v) != v or v < 0:
                raise invalid_argument(f"purlin: {call}: {name} must hold non-negative integers, got {v!r}")
    return [[int(v) for v in row] for row in rows]


def _rows(rows: Any, count: int, name: str, call: str) -> int:
    if isinstance(rows, bool) or int(rows) != rows or rows < 1:
        raise invalid_argument(f"purlin: {call}: rows must be a positive integer, got {rows!r}")
    if count % int(rows):
        raise invalid_argument(f"purlin: {call}: {name} has {count} elements, not a whole number of {rows} rows")
    return int(rows)
