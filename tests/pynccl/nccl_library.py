"""A ctypes client of NCCL's C ABI in the style of vLLM's pynccl wrapper.

It loads one shared library by path (ctypes.CDLL, RTLD_LOCAL, never
LD_PRELOAD), binds every function with the restype/argtypes that vLLM and
sglang use (c_int enums, c_void_p handles and streams, ncclUniqueId passed by
value), and raises NCCLError on any result other than ncclSuccess. Nothing in
it is Purlin-specific except `purlin_synchronize`, which the host-datapath mode
needs because host buffers have no CUDA stream to wait on.
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_char_p, c_int, c_size_t, c_void_p
from typing import Dict, List, Optional, Tuple

UNIQUE_ID_BYTES = 128

# ncclDataType_t and ncclRedOp_t values (nccl.h 2.28).
DTYPES = {
    "int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5,
    "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9,
    "float8_e4m3": 10, "float8_e5m2": 11,
}
OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}


class ncclUniqueId(ctypes.Structure):
    """128 opaque bytes, passed by value to ncclCommInitRank."""

    _fields_ = [("internal", ctypes.c_byte * UNIQUE_ID_BYTES)]


_comm = c_void_p
_stream = c_void_p
_buf = c_void_p

# name -> (restype, argtypes): vLLM's table (nccl-abi.md section 3).
FUNCTIONS: Dict[str, Tuple[object, List[object]]] = {
    "ncclGetErrorString": (c_char_p, [c_int]),
    "ncclGetVersion": (c_int, [POINTER(c_int)]),
    "ncclGetUniqueId": (c_int, [POINTER(ncclUniqueId)]),
    "ncclCommInitRank": (c_int, [POINTER(_comm), c_int, ncclUniqueId, c_int]),
    "ncclAllReduce": (c_int, [_buf, _buf, c_size_t, c_int, c_int, _comm, _stream]),
    "ncclReduce": (c_int, [_buf, _buf, c_size_t, c_int, c_int, c_int, _comm, _stream]),
    "ncclAllGather": (c_int, [_buf, _buf, c_size_t, c_int, _comm, _stream]),
    "ncclReduceScatter": (c_int, [_buf, _buf, c_size_t, c_int, c_int, _comm, _stream]),
    "ncclSend": (c_int, [_buf, c_size_t, c_int, c_int, _comm, _stream]),
    "ncclRecv": (c_int, [_buf, c_size_t, c_int, c_int, _comm, _stream]),
    "ncclBroadcast": (c_int, [_buf, _buf, c_size_t, c_int, c_int, _comm, _stream]),
    "ncclCommDestroy": (c_int, [_comm]),
    "ncclGroupStart": (c_int, []),
    "ncclGroupEnd": (c_int, []),
}
# Bound when present: better error texts, the host-datapath wait, and the rest of
# the collectives and communicator calls (tests/diff uses them).
OPTIONAL_FUNCTIONS: Dict[str, Tuple[object, List[object]]] = {
    "ncclGetLastError": (c_char_p, [_comm]),
    "purlinCommSynchronize": (c_int, [_comm]),
    "purlinHostStreamCreate": (c_int, [POINTER(_stream)]),
    "purlinHostStreamSynchronize": (c_int, [_stream]),
    "purlinHostStreamDestroy": (c_int, [_stream]),
    "ncclCommGetAsyncError": (c_int, [_comm, POINTER(c_int)]),
    "ncclCommSplit": (c_int, [_comm, c_int, c_int, POINTER(_comm), c_void_p]),
    "ncclRedOpCreatePreMulSum": (c_int, [POINTER(c_int), c_void_p, c_int, c_int, _comm]),
    "ncclRedOpDestroy": (c_int, [c_int, _comm]),
    "ncclBcast": (c_int, [_buf, c_size_t, c_int, c_int, _comm, _stream]),
    "ncclAlltoAll": (c_int, [_buf, _buf, c_size_t, c_int, _comm, _stream]),
    "ncclGather": (c_int, [_buf, _buf, c_size_t, c_int, c_int, _comm, _stream]),
    "ncclScatter": (c_int, [_buf, _buf, c_size_t, c_int, c_int, _comm, _stream]),
}


class NCCLError(RuntimeError):
    def __init__(self, call: str, result: int, text: str, detail: Optional[str]):
        message = f"{call}: result {result} ({text})"
        if detail:
            message += f": {detail}"
        super().__init__(message)
        self.result = result


class NCCLLibrary:
    """One loaded library and its bound functions."""

    def __init__(self, path: str):
        self.path = path
        self.lib = ctypes.CDLL(path)
        self.fns = {}
        for table, required in ((FUNCTIONS, True), (OPTIONAL_FUNCTIONS, False)):
            for name, (restype, argtypes) in table.items():
                try:
                    fn = getattr(self.lib, name)
                except AttributeError:
                    if required:
                        raise AttributeError(f"{path} lacks {name}, which vLLM's pynccl requires")
                    continue
                fn.restype, fn.argtypes = restype, argtypes
                self.fns[name] = fn

    def _check(self, call: str, result: int, comm: Optional[int] = None) -> None:
        if result == 0:
            return
        text = self.fns["ncclGetErrorString"](result).decode(errors="replace")
        detail = None
        if "ncclGetLastError" in self.fns:
            raw = self.fns["ncclGetLastError"](comm)
            detail = raw.decode(errors="replace") if raw else None
        raise NCCLError(call, result, text, detail)

    def symbol_address(self, name: str) -> int:
        return ctypes.cast(getattr(self.lib, name), c_void_p).value

    # ---- version and ids ----
    def get_version(self) -> int:
        v = c_int()
        self._check("ncclGetVersion", self.fns["ncclGetVersion"](ctypes.byref(v)))
        return v.value

    def version_string(self) -> str:
        """vLLM's reading of the code: s[0], s[1:3], s[3:] of a 5-digit number."""
        s = str(self.get_version())
        return f"{s[0]}.{s[1:3].lstrip('0') or '0'}.{s[3:].lstrip('0') or '0'}"

    def get_unique_id(self) -> bytes:
        uid = ncclUniqueId()
        self._check("ncclGetUniqueId", self.fns["ncclGetUniqueId"](ctypes.byref(uid)))
        return bytes(bytearray(uid.internal))

    # ---- communicators ----
    def comm_init_rank(self, nranks: int, uid: bytes, rank: int) -> int:
        if len(uid) != UNIQUE_ID_BYTES:
            raise ValueError(f"a unique id has {UNIQUE_ID_BYTES} bytes, got {len(uid)}")
        cid = ncclUniqueId()
        ctypes.memmove(cid.internal, uid, UNIQUE_ID_BYTES)
        comm = c_void_p()
        self._check(f"ncclCommInitRank(rank {rank} of {nranks})",
                    self.fns["ncclCommInitRank"](ctypes.byref(comm), nranks, cid, rank))
        return comm.value

    def comm_destroy(self, comm: int) -> None:
        self._check("ncclCommDestroy", self.fns["ncclCommDestroy"](comm))

    def _optional(self, name: str):
        fn = self.fns.get(name)
        if fn is None:
            raise AttributeError(f"{self.path} has no {name}")
        return fn

    def purlin_synchronize(self, comm: int) -> None:
        self._check("purlinCommSynchronize", self._optional("purlinCommSynchronize")(comm), comm)

    def host_stream_create(self) -> int:
        stream = c_void_p()
        self._check("purlinHostStreamCreate", self._optional("purlinHostStreamCreate")(ctypes.byref(stream)))
        return stream.value

    def host_stream_synchronize(self, stream: int) -> None:
        self._check("purlinHostStreamSynchronize", self._optional("purlinHostStreamSynchronize")(stream))

    def host_stream_destroy(self, stream: int) -> None:
        self._check("purlinHostStreamDestroy", self._optional("purlinHostStreamDestroy")(stream))

    def check_async(self, comm: int) -> None:
        """Raises NCCLError when comm has an asynchronous error (ncclInProgress is none)."""
        state = c_int()
        self._check("ncclCommGetAsyncError", self._optional("ncclCommGetAsyncError")(comm, ctypes.byref(state)), comm)
        if state.value not in (0, 7):
            self._check("asynchronous error", state.value, comm)

    def comm_split(self, comm: int, color: int, key: int, into: Optional[c_void_p] = None):
        """The new communicator; with into, into itself, to be read once the
        group ends (inside a group NCCL may fill it in only at ncclGroupEnd)."""
        new = c_void_p() if into is None else into
        self._check(f"ncclCommSplit(color {color}, key {key})",
                    self._optional("ncclCommSplit")(comm, color, key, ctypes.byref(new), None), comm)
        return new.value if into is None else new

    def redop_create_premulsum(self, scalar: int, dtype: int, residence: int, comm: int) -> int:
        op = c_int()
        self._check("ncclRedOpCreatePreMulSum",
                    self._optional("ncclRedOpCreatePreMulSum")(ctypes.byref(op), scalar, dtype, residence, comm), comm)
        return op.value

    def redop_destroy(self, op: int, comm: int) -> None:
        self._check("ncclRedOpDestroy", self._optional("ncclRedOpDestroy")(op, comm), comm)

    # ---- collectives ----
    def all_reduce(self, send, recv, count, dtype, op, comm, stream) -> None:
        self._check("ncclAllReduce", self.fns["ncclAllReduce"](send, recv, count, dtype, op, comm, stream), comm)

    def reduce(self, send, recv, count, dtype, op, root, comm, stream) -> None:
        self._check("ncclReduce", self.fns["ncclReduce"](send, recv, count, dtype, op, root, comm, stream), comm)

    def all_gather(self, send, recv, count, dtype, comm, stream) -> None:
        self._check("ncclAllGather", self.fns["ncclAllGather"](send, recv, count, dtype, comm, stream), comm)

    def reduce_scatter(self, send, recv, count, dtype, op, comm, stream) -> None:
        self._check("ncclReduceScatter",
                    self.fns["ncclReduceScatter"](send, recv, count, dtype, op, comm, stream), comm)

    def broadcast(self, send, recv, count, dtype, root, comm, stream) -> None:
        self._check("ncclBroadcast", self.fns["ncclBroadcast"](send, recv, count, dtype, root, comm, stream), comm)

    def bcast(self, buf, count, dtype, root, comm, stream) -> None:
        self._check("ncclBcast", self._optional("ncclBcast")(buf, count, dtype, root, comm, stream), comm)

    def all_to_all(self, send, recv, count, dtype, comm, stream) -> None:
        self._check("ncclAlltoAll", self._optional("ncclAlltoAll")(send, recv, count, dtype, comm, stream), comm)

    def gather(self, send, recv, count, dtype, root, comm, stream) -> None:
        self._check("ncclGather", self._optional("ncclGather")(send, recv, count, dtype, root, comm, stream), comm)

    def scatter(self, send, recv, count, dtype, root, comm, stream) -> None:
        self._check("ncclScatter", self._optional("ncclScatter")(send, recv, count, dtype, root, comm, stream), comm)

    def send(self, buf, count, dtype, peer, comm, stream) -> None:
        self._check("ncclSend", self.fns["ncclSend"](buf, count, dtype, peer, comm, stream), comm)

    def recv(self, buf, count, dtype, peer, comm, stream) -> None:
        self._check("ncclRecv", self.fns["ncclRecv"](buf, count, dtype, peer, comm, stream), comm)

    def group_start(self) -> None:
        self._check("ncclGroupStart", self.fns["ncclGroupStart"]())

    def group_end(self) -> None:
        self._check("ncclGroupEnd", self.fns["ncclGroupEnd"]())
