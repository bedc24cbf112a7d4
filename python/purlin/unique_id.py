"""UniqueId: the 128 bytes that name one communicator's rendezvous.

One rank makes it (UniqueId.generate, purlinGetUniqueId) and hands its
bytes() to every other rank by any out-of-band means (a multiprocessing
Queue, torch.distributed, a file); each rank rebuilds it with from_bytes.
"""

from __future__ import annotations

import ctypes

from . import _library
from .errors import invalid_argument

UNIQUE_ID_BYTES = _library.UNIQUE_ID_BYTES


class UniqueId:
    """An opaque purlinUniqueId."""

    __slots__ = ("_raw",)

    def __init__(self, raw: bytes) -> None:
        if not isinstance(raw, (bytes, bytearray, memoryview)) or len(raw) != UNIQUE_ID_BYTES:
            size = len(raw) if hasattr(raw, "__len__") else type(raw).__name__
            raise invalid_argument(f"purlin: a UniqueId is {UNIQUE_ID_BYTES} bytes, got {size}")
        self._raw = bytes(raw)

    @classmethod
    def generate(cls) -> "UniqueId":
        """A fresh id from the library (purlinGetUniqueId); the rank that calls it hosts the rendezvous."""
        raw = _library.UniqueIdStruct()
        _library.check(_library.load().purlinGetUniqueId(ctypes.byref(raw)), "purlinGetUniqueId")
        return cls(bytes(raw))

    @classmethod
    def from_bytes(cls, raw: bytes) -> "UniqueId":
        """The id whose bytes() is raw (exactly 128 bytes)."""
        return cls(raw)

    def __bytes__(self) -> bytes:
        return self._raw

    def bytes(self) -> bytes:
        """The 128 bytes, for any out-of-band exchange."""
        return self._raw

    def as_struct(self) -> _library.UniqueIdStruct:
        """The C struct, for purlinCommInitRank."""
        raw = _library.UniqueIdStruct()
        ctypes.memmove(ctypes.byref(raw), self._raw, UNIQUE_ID_BYTES)
        return raw

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UniqueId) and other._raw == self._raw

    def __hash__(self) -> int:
        return hash(self._raw)

    def __repr__(self) -> str:
        return f"UniqueId({self._raw[:8].hex()}...)"
