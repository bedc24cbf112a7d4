"""Finding and loading libpurlin.so, and the ctypes prototypes of its C API.

The library is loaded once, on first use, from the first of these that loads:
  1. the file named by the PURLIN_LIBRARY environment variable;
  2. lib/libpurlin.so inside this package (built into the wheel by `pip install ./python`);
  3. the system search path (ctypes.util.find_library("purlin"), then "libpurlin.so").
When none loads, LibraryNotFound (an ImportError) lists every path tried and why.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from ctypes import POINTER, c_char, c_char_p, c_float, c_int, c_size_t, c_void_p
from typing import List, Optional, Tuple

from .errors import LibraryNotFound, make_error

LIBRARY_ENV = "PURLIN_LIBRARY"
UNIQUE_ID_BYTES = 128


class UniqueIdStruct(ctypes.Structure):
    """purlinUniqueId: 128 opaque bytes, passed by value to purlinCommInitRank."""

    _fields_ = [("internal", c_char * UNIQUE_ID_BYTES)]


class LayoutStruct(ctypes.Structure):
    """purlinLayout_t: a buffer's shape over the ranks and its variants."""

    _fields_ = [("shape", c_int), ("varying", c_int), ("rooted", c_int), ("columns", c_int), ("matrix", c_int)]


_SizePtr = POINTER(c_size_t)


class CollectiveDescStruct(ctypes.Structure):
    """purlinCollectiveDesc_t: a collective named by its layouts (purlinCollective)."""

    _fields_ = [("consume", c_int), ("in_", LayoutStruct), ("out", LayoutStruct),
                ("sendbuff", c_void_p), ("recvbuff", c_void_p), ("count", c_size_t),
                ("counts", _SizePtr), ("displs", _SizePtr), ("sendcounts", _SizePtr), ("sdispls", _SizePtr),
                ("recvcounts", _SizePtr), ("rdispls", _SizePtr),
                ("datatype", c_int), ("op", c_int), ("root", c_int), ("rows", c_size_t)]


class EpilogueStruct(ctypes.Structure):
    """purlinEpilogue_t: what an AllReduce does to each row of its result (purlinAllReduceEpilogue)."""

    _fields_ = [("kind", c_int), ("hidden", c_size_t), ("residual", c_void_p), ("weight", c_void_p),
                ("quant", c_void_p), ("scales", c_void_p), ("eps", c_float)]


_Comm = c_void_p
_Stream = c_void_p
_SizeArray = POINTER(c_size_t)

# name -> (restype, argtypes), one entry per function of include/purlin.h.
_PROTOTYPES = {
    "purlinGetVersion": (c_int, [POINTER(c_int)]),
    "purlinGetUniqueId": (c_int, [POINTER(UniqueIdStruct)]),
    "purlinGetErrorString": (c_char_p, [c_int]),
    "purlinGetLastError": (c_char_p, [_Comm]),
    "purlinCommGetAsyncError": (c_int, [_Comm, POINTER(c_int)]),
    "purlinCommInitRank": (c_int, [POINTER(_Comm), c_int, UniqueIdStruct, c_int]),
    "purlinCommFinalize": (c_int, [_Comm]),
    "purlinCommDestroy": (c_int, [_Comm]),
    "purlinCommAbort": (c_int, [_Comm]),
    "purlinCommCount": (c_int, [_Comm, POINTER(c_int)]),
    "purlinCommCuDevice": (c_int, [_Comm, POINTER(c_int)]),
    "purlinCommUserRank": (c_int, [_Comm, POINTER(c_int)]),
    "purlinCommSynchronize": (c_int, [_Comm]),
    "purlinHostStreamCreate": (c_int, [POINTER(_Stream)]),
    "purlinHostStreamSynchronize": (c_int, [_Stream]),
    "purlinHostStreamDestroy": (c_int, [_Stream]),
    "purlinRedOpCreatePreMulSum": (c_int, [POINTER(c_int), c_void_p, c_int, c_int, _Comm]),
    "purlinRedOpDestroy": (c_int, [c_int, _Comm]),
    "purlinAllReduce": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int, _Comm, _Stream]),
    "purlinBroadcast": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int, _Comm, _Stream]),
    "purlinReduce": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int, c_int, _Comm, _Stream]),
    "purlinAllGather": (c_int, [c_void_p, c_void_p, c_size_t, c_int, _Comm, _Stream]),
    "purlinReduceScatter": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int, _Comm, _Stream]),
    "purlinAlltoAll": (c_int, [c_void_p, c_void_p, c_size_t, c_int, _Comm, _Stream]),
    "purlinGather": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int, _Comm, _Stream]),
    "purlinScatter": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int, _Comm, _Stream]),
    "purlinSend": (c_int, [c_void_p, c_size_t, c_int, c_int, _Comm, _Stream]),
    "purlinRecv": (c_int, [c_void_p, c_size_t, c_int, c_int, _Comm, _Stream]),
    "purlinAllGatherV": (c_int, [c_void_p, c_void_p, _SizeArray, _SizeArray, c_int, _Comm, _Stream]),
    "purlinReduceScatterV": (
        c_int, [c_void_p, c_void_p, _SizeArray, _SizeArray, c_int, c_int, _Comm, _Stream]),
    "purlinAlltoAllV": (
        c_int, [c_void_p, _SizeArray, _SizeArray, c_void_p, _SizeArray, _SizeArray, c_int, _Comm,
                _Stream]),
    "purlinCollective": (c_int, [POINTER(CollectiveDescStruct), _Comm, _Stream]),
    "purlinAllReduceEpilogue": (
        c_int, [c_void_p, c_void_p, c_size_t, c_int, c_int, POINTER(EpilogueStruct), _Comm, _Stream]),
    "purlinGroupStart": (c_int, []),
    "purlinGroupEnd": (c_int, []),
    "purlinGroupCancel": (c_int, []),
}

_lock = threading.Lock()
_loaded: Optional[Tuple[ctypes.CDLL, str]] = None


def candidate_paths() -> List[Tuple[str, str]]:
    """The places searched, in order, as (label, path) pairs."""
    candidates = []
    env = os.environ.get(LIBRARY_ENV)
    if env:
        candidates.append((LIBRARY_ENV, env))
    packaged = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", "libpurlin.so")
    candidates.append(("package", packaged))
    found = ctypes.util.find_library("purlin")
    if found:
        candidates.append(("find_library", found))
    candidates.append(("system", "libpurlin.so"))
    return candidates


def _bind(lib: ctypes.CDLL) -> List[str]:
    """Sets restype/argtypes on every C API function; returns the names missing."""
    missing = []
    for name, (restype, argtypes) in _PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        fn.restype = restype
        fn.argtypes = argtypes
    return missing


def _why_missing(label: str, path: str) -> Optional[str]:
    if label == "package" and not os.path.exists(path):
        return ("no such file (`pip install ./python` from a checkout of Purlin builds the library into the "
                "package; or set PURLIN_LIBRARY to a libpurlin.so)")
    if label == LIBRARY_ENV and os.sep in path and not os.path.exists(path):
        return "no such file"
    return None


def load() -> ctypes.CDLL:
    """Returns the loaded library, loading it on the first call."""
    global _loaded
    if _loaded is not None:
        return _loaded[0]
    with _lock:
        if _loaded is not None:
            return _loaded[0]
        failures = []
        for label, path in candidate_paths():
            reason = _why_missing(label, path)
            if reason is None:
                try:
                    lib = ctypes.CDLL(path)
                except OSError as exc:
                    reason = str(exc)
                else:
                    missing = _bind(lib)
                    if not missing:
                        _loaded = (lib, path)
                        return lib
                    reason = "loaded, but lacks " + ", ".join(missing)
            failures.append(f"  {label}: {path}: {reason}")
        raise LibraryNotFound("purlin: could not load libpurlin.so; tried:\n" + "\n".join(failures))


def library_path() -> str:
    """The path the library was loaded from (loading it if needed)."""
    load()
    assert _loaded is not None
    return _loaded[1]


def last_error(comm: Optional[int]) -> str:
    """The library's purlinGetLastError text for comm (None: the calling thread's last call)."""
    text = load().purlinGetLastError(comm)
    return text.decode("utf-8", "replace") if text else ""


def check(result: int, call: str, comm: Optional[int] = None) -> None:
    """Raises the PurlinError for a failed C call; call names the call and its object."""
    if result == 0:
        return
    detail = last_error(comm)
    if not detail:
        text = load().purlinGetErrorString(result)
        detail = text.decode("utf-8", "replace") if text else f"result code {result}"
    raise make_error(result, f"{call} failed", detail)
