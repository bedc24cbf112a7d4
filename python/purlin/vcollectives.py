"""The V collectives of a Communicator (mixed into it): per-rank counts and displacements.

counts[r] is rank r's element count and displs[r] its offset (in elements)
in the larger buffer; displs defaults to the packed prefix sums of counts.
counts and displs must be equal on every rank (all_to_all_v: this rank's
view, as MPI_Alltoallv). The arrays may be larger than the slices need.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, List, Optional, Sequence

from . import _library
from .buffers import Buffer, check_count, same_dtype
from .errors import invalid_argument
from .group import after_group, in_group
from .ops import Op, ReduceOp

if TYPE_CHECKING:
    from .communicator import Communicator

    _Base = Communicator
else:
    _Base = object


def _sizes(values: Sequence[int], name: str, world_size: int, call: str) -> List[int]:
    values = list(values)
    if len(values) != world_size:
        raise invalid_argument(f"purlin: {call}: {name} needs {world_size} entries (one per rank), has {len(values)}")
    for value in values:
        if isinstance(value, bool) or int(value) != value or value < 0:
            raise invalid_argument(f"purlin: {call}: {name} must hold non-negative integers, got {values}")
    return [int(v) for v in values]


def _packed_displs(counts: List[int]) -> List[int]:
    displs, offset = [], 0
    for count in counts:
        displs.append(offset)
        offset += count
    return displs


def _layout(counts: Sequence[int], displs: Optional[Sequence[int]], prefix: str, world_size: int,
            call: str) -> tuple:
    counts = _sizes(counts, f"{prefix}counts", world_size, call)
    if displs is None:
        displs = _packed_displs(counts)
    else:
        displs = _sizes(displs, f"{prefix}displs", world_size, call)
    return counts, displs


def _fits(buf: Buffer, counts: List[int], displs: List[int], name: str, call: str) -> None:
    needed = max((d + c for c, d in zip(counts, displs) if c), default=0)
    if buf.count < needed:
        raise invalid_argument(
            f"purlin: {call}: {name} has {buf.count} elements but the counts and displs reach element {needed}")


def _c_sizes(values: List[int]) -> Any:
    return (ctypes.c_size_t * len(values))(*values)


class VCollectives(_Base):
    """all_gather_v, reduce_scatter_v, all_to_all_v."""

    def all_gather_v(self, send: Any, recv: Any, counts: Sequence[int],
                     displs: Optional[Sequence[int]] = None, *, stream: Any = None) -> Any:
        """Rank r's send (counts[r] elements) lands at displs[r] of every rank's recv."""
        call = "all_gather_v"
        counts, displs = _layout(counts, displs, "", self.world_size, call)
        s = self._buffer(send, "send", call)
        r = self._buffer(recv, "recv", call, writable=True)
        same_dtype(s, r, call)
        check_count(s, counts[self.rank], f"send (counts[{self.rank}])", call)
        _fits(r, counts, displs, "recv", call)
        sizes = [_c_sizes(counts), _c_sizes(displs)]
        self._launch_v(call, _library.load().purlinAllGatherV, [s.ptr, r.ptr, *sizes, int(s.dtype)],
                       [s, r], sizes, stream)
        return r.array

    def reduce_scatter_v(self, send: Any, recv: Any, counts: Sequence[int],
                         displs: Optional[Sequence[int]] = None, op: Op = ReduceOp.SUM, *,
                         stream: Any = None) -> Any:
        """Rank r's recv gets op over every rank's send[displs[r] : displs[r] + counts[r]]."""
        call = "reduce_scatter_v"
        counts, displs = _layout(counts, displs, "", self.world_size, call)
        s = self._buffer(send, "send", call)
        r = self._buffer(recv, "recv", call, writable=True)
        same_dtype(s, r, call)
        check_count(r, counts[self.rank], f"recv (counts[{self.rank}])", call)
        _fits(s, counts, displs, "send", call)
        sizes = [_c_sizes(counts), _c_sizes(displs)]
        raw_op = self._reduce_op(op, s.dtype)
        try:
            self._launch_v(call, _library.load().purlinReduceScatterV,
                           [s.ptr, r.ptr, *sizes, int(s.dtype), raw_op], [s, r], sizes, stream)
        finally:
            self._release_op(raw_op)
        return r.array

    def all_to_all_v(self, send: Any, recv: Any, send_counts: Sequence[int], recv_counts: Sequence[int],
                     send_displs: Optional[Sequence[int]] = None, recv_displs: Optional[Sequence[int]] = None,
                     *, stream: Any = None) -> Any:
        """send[send_displs[p] :][: send_counts[p]] goes to rank p, landing at its recv_displs[me].

        send_counts[p] here must equal recv_counts[me] on rank p.
        """
        call = "all_to_all_v"
        send_counts, send_displs = _layout(send_counts, send_displs, "send_", self.world_size, call)
        recv_counts, recv_displs = _layout(recv_counts, recv_displs, "recv_", self.world_size, call)
        s = self._buffer(send, "send", call)
        r = self._buffer(recv, "recv", call, writable=True)
        same_dtype(s, r, call)
        _fits(s, send_counts, send_displs, "send", call)
        _fits(r, recv_counts, recv_displs, "recv", call)
        sizes = [_c_sizes(v) for v in (send_counts, send_displs, recv_counts, recv_displs)]
        args = [s.ptr, sizes[0], sizes[1], r.ptr, sizes[2], sizes[3], int(s.dtype)]
        self._launch_v(call, _library.load().purlinAlltoAllV, args, [s, r], sizes, stream)
        return r.array

    def _launch_v(self, call: str, function: Any, args: List[Any], buffers: List[Buffer],
                  sizes: List[Any], stream: Any) -> None:
        """_launch, keeping the C count arrays alive until a deferred group launch has read them."""
        self._launch(call, function, args, buffers, stream)
        if in_group():
            after_group(lambda: sizes.clear())
