"""The NCCL-shaped collectives of a Communicator (mixed into it).

Each method checks its arguments in Python (dtypes agree, arrays are
contiguous and on this communicator's device, sizes fit the collective,
roots and peers exist), then makes one C call. Every method takes a
keyword-only stream=; see communicator.py for the default and completion.
Counts are in elements; arrays may have any shape, only their sizes matter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional

from . import _library
from .buffers import Buffer, check_count, same_dtype
from .errors import invalid_argument
from .ops import Op, ReduceOp

if TYPE_CHECKING:
    from .communicator import Communicator

    _Base = Communicator
else:
    _Base = object


def _ptr(buf: Optional[Buffer]) -> Optional[int]:
    return None if buf is None else buf.ptr


class Collectives(_Base):
    """all_reduce, broadcast, reduce, all_gather, reduce_scatter, all_to_all, gather, scatter, send, recv."""

    def all_reduce(self, send: Any, recv: Any = None, op: Op = ReduceOp.SUM, *, stream: Any = None) -> Any:
        """Every rank gets op over all ranks' send; recv=None reduces in place. Returns the result array."""
        call = "all_reduce"
        s = self._buffer(send, "send", call, writable=recv is None)
        r = s if recv is None else self._buffer(recv, "recv", call, writable=True)
        same_dtype(s, r, call)
        check_count(r, s.count, "recv (like send)", call)
        self._reduced(call, _library.load().purlinAllReduce, [s.ptr, r.ptr, s.count, int(s.dtype)],
                      op, s, [s, r], stream, tail=[])
        return r.array

    def broadcast(self, send: Any, recv: Any = None, root: int = 0, *, stream: Any = None) -> Any:
        """Every rank gets root's send; recv=None receives in place into send. Returns the result array."""
        call = "broadcast"
        root = self._peer(root, "root", call)
        s = self._buffer(send, "send", call, writable=recv is None)
        r = s if recv is None else self._buffer(recv, "recv", call, writable=True)
        same_dtype(s, r, call)
        check_count(r, s.count, "recv (like send)", call)
        self._launch(call, _library.load().purlinBroadcast, [s.ptr, r.ptr, s.count, int(s.dtype), root],
                     [s, r], stream)
        return r.array

    def reduce(self, send: Any, recv: Any = None, op: Op = ReduceOp.SUM, root: int = 0, *,
               stream: Any = None) -> Any:
        """root gets op over all ranks' send in recv (in place into send when recv is None)."""
        call = "reduce"
        root = self._peer(root, "root", call)
        s = self._buffer(send, "send", call, writable=recv is None and self.rank == root)
        r = s if recv is None else self._buffer(recv, "recv", call, writable=True)
        same_dtype(s, r, call)
        check_count(r, s.count, "recv (like send)", call)
        self._reduced(call, _library.load().purlinReduce, [s.ptr, r.ptr, s.count, int(s.dtype)],
                      op, s, [s, r], stream, tail=[root])
        return r.array

    def all_gather(self, send: Any, recv: Any, *, stream: Any = None) -> Any:
        """recv holds every rank's send in rank order: world_size x send elements."""
        call = "all_gather"
        s = self._buffer(send, "send", call)
        r = self._buffer(recv, "recv", call, writable=True)
        same_dtype(s, r, call)
        check_count(r, self.world_size * s.count, "recv (world_size x send)", call)
        self._launch(call, _library.load().purlinAllGather, [s.ptr, r.ptr, s.count, int(s.dtype)],
                     [s, r], stream)
        return r.array

    def reduce_scatter(self, send: Any, recv: Any, op: Op = ReduceOp.SUM, *, stream: Any = None) -> Any:
        """send is world_size slices; rank r gets op over all ranks' slice r in recv."""
        call = "reduce_scatter"
        s = self._buffer(send, "send", call)
        r = self._buffer(recv, "recv", call, writable=True)
        same_dtype(s, r, call)
        check_count(s, self.world_size * r.count, "send (world_size x recv)", call)
        self._reduced(call, _library.load().purlinReduceScatter, [s.ptr, r.ptr, r.count, int(s.dtype)],
                      op, s, [s, r], stream, tail=[])
        return r.array

    def all_to_all(self, send: Any, recv: Any, *, stream: Any = None) -> Any:
        """send and recv are world_size equal slices; slice p of send goes to rank p's slice of me."""
        call = "all_to_all"
        s = self._buffer(send, "send", call)
        r = self._buffer(recv, "recv", call, writable=True)
        same_dtype(s, r, call)
        check_count(r, s.count, "recv (like send)", call)
        if s.count % self.world_size:
            raise invalid_argument(
                f"purlin: {call}: send has {s.count} elements, not a multiple of world_size {self.world_size}")
        per_peer = s.count // self.world_size
        self._launch(call, _library.load().purlinAlltoAll, [s.ptr, r.ptr, per_peer, int(s.dtype)],
                     [s, r], stream)
        return r.array

    def gather(self, send: Any, recv: Any = None, root: int = 0, *, stream: Any = None) -> Any:
        """root's recv holds every rank's send in rank order; other ranks may pass recv=None."""
        call = "gather"
        root = self._peer(root, "root", call)
        s = self._buffer(send, "send", call)
        buffers = [s]
        r: Optional[Buffer] = None
        if recv is not None:
            r = self._buffer(recv, "recv", call, writable=True)
            same_dtype(s, r, call)
            check_count(r, self.world_size * s.count, "recv (world_size x send)", call)
            buffers.append(r)
        elif self.rank == root:
            raise invalid_argument(f"purlin: {call}: the root (rank {root}) needs a recv array")
        self._launch(call, _library.load().purlinGather, [s.ptr, _ptr(r), s.count, int(s.dtype), root],
                     buffers, stream)
        return None if r is None else r.array

    def scatter(self, send: Any, recv: Any, root: int = 0, *, stream: Any = None) -> Any:
        """Rank p's recv gets slice p of root's send; other ranks may pass send=None."""
        call = "scatter"
        root = self._peer(root, "root", call)
        r = self._buffer(recv, "recv", call, writable=True)
        buffers = [r]
        s: Optional[Buffer] = None
        if send is not None:
            s = self._buffer(send, "send", call)
            same_dtype(s, r, call)
            check_count(s, self.world_size * r.count, "send (world_size x recv)", call)
            buffers.append(s)
        elif self.rank == root:
            raise invalid_argument(f"purlin: {call}: the root (rank {root}) needs a send array")
        self._launch(call, _library.load().purlinScatter, [_ptr(s), r.ptr, r.count, int(r.dtype), root],
                     buffers, stream)
        return r.array

    def send(self, array: Any, peer: int, *, stream: Any = None) -> None:
        """Sends array to peer, which must post a matching recv (pair them in purlin.group())."""
        call = "send"
        peer = self._peer(peer, "peer", call)
        s = self._buffer(array, "array", call)
        self._launch(call, _library.load().purlinSend, [s.ptr, s.count, int(s.dtype), peer], [s], stream)

    def recv(self, array: Any, peer: int, *, stream: Any = None) -> Any:
        """Receives into array what peer sends. Returns array."""
        call = "recv"
        peer = self._peer(peer, "peer", call)
        r = self._buffer(array, "array", call, writable=True)
        self._launch(call, _library.load().purlinRecv, [r.ptr, r.count, int(r.dtype), peer], [r], stream)
        return r.array

    def _reduced(self, call: str, function: Any, head: List[Any], op: Op, typed: Buffer,
                 buffers: List[Buffer], stream: Any, tail: List[Any]) -> None:
        """Launches function(*head, op, *tail, comm, stream) with op resolved for typed's dtype."""
        raw_op = self._reduce_op(op, typed.dtype)
        try:
            self._launch(call, function, head + [raw_op] + tail, buffers, stream)
        finally:
            self._release_op(raw_op)
