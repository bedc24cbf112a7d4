"""Where the difftest's buffers live, its streams, and how it waits for them.

Each rank has one arena (one allocation, every call's buffers inside it,
poisoned guard bytes between them), staged from a host image before a run
and read back whole after it, and two streams.

HostMemory: NumPy arenas for Purlin's host Atom (no GPU). Stream 0 is NULL
(the communicator's own queue), stream 1 a purlinHostStreamCreate stream;
waiting is purlinHostStreamSynchronize and purlinCommSynchronize. No CUDA
graphs: a graph program runs eagerly once per replay.

CudaMemory: the CUDA driver API (libcuda.so.1, present wherever a CUDA driver
is) through ctypes, so neither torch nor a CUDA toolkit is needed. Rank g
uses GPU g % count through its primary context (which the libraries' CUDA
runtimes share); arenas come from cuMemAlloc; both streams are non-blocking.
Staging copies run on the rank's stream 0 and are waited for. Waiting polls
the streams and each communicator's async error, under a deadline. Graphs:
each rank's stream 0 captures (thread-local mode) with stream 1 forked in
and joined back through events. Every rank's graph is instantiated once every
capture has ended (CUDA refuses it while another stream of the thread captures)
and before any is launched: the README (Configuration) says why, for ranks that
share a GPU.
"""

from __future__ import annotations

import ctypes
import time
from ctypes import byref, c_int, c_size_t, c_uint, c_ulonglong, c_void_p
from typing import Dict, List, Optional

import numpy as np


class Hang(RuntimeError):
    """A rank's streams did not finish before the deadline."""


class HostMemory:
    graphs = False

    def __init__(self, lib, ranks: List[int], capacity: int):
        self.lib = lib
        self.arenas = {g: np.zeros(capacity, dtype=np.uint8) for g in ranks}
        self.streams = {g: [None, lib.host_stream_create()] for g in ranks}

    def select(self, g: int) -> None:
        pass

    def base(self, g: int) -> int:
        return self.arenas[g].ctypes.data

    def upload(self, g: int, image: np.ndarray) -> None:
        self.arenas[g][:len(image)] = image

    def download(self, g: int, n: int) -> np.ndarray:
        return self.arenas[g][:n].copy()

    def stream(self, g: int, i: int) -> Optional[int]:
        return self.streams[g][i]

    def wait(self, g: int, lib, comms: List[int], deadline: float) -> None:
        # The bound is the library's own (PURLIN_TIMEOUT): these calls block.
        for s in self.streams[g][1:]:
            lib.host_stream_synchronize(s)
        for c in comms:
            lib.purlin_synchronize(c)

    def close(self) -> None:
        for streams in self.streams.values():
            for s in streams[1:]:
                self.lib.host_stream_destroy(s)


# CUDA driver API constants (cuda.h).
CU_STREAM_NON_BLOCKING = 0x1
CU_EVENT_DISABLE_TIMING = 0x2
CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1
CUDA_SUCCESS = 0
CUDA_ERROR_NOT_READY = 600

_DRIVER = {
    # name: argtypes (every function returns CUresult, an int)
    "cuInit": [c_uint],
    "cuGetErrorString": [c_int, ctypes.POINTER(ctypes.c_char_p)],
    "cuDeviceGetCount": [ctypes.POINTER(c_int)],
    "cuDeviceGet": [ctypes.POINTER(c_int), c_int],
    "cuDevicePrimaryCtxRetain": [ctypes.POINTER(c_void_p), c_int],
    "cuCtxSetCurrent": [c_void_p],
    "cuMemAlloc_v2": [ctypes.POINTER(c_ulonglong), c_size_t],
    "cuMemFree_v2": [c_ulonglong],
    "cuMemcpyHtoDAsync_v2": [c_ulonglong, c_void_p, c_size_t, c_void_p],
    "cuMemcpyDtoHAsync_v2": [c_void_p, c_ulonglong, c_size_t, c_void_p],
    "cuStreamCreate": [ctypes.POINTER(c_void_p), c_uint],
    "cuStreamDestroy_v2": [c_void_p],
    "cuStreamQuery": [c_void_p],
    "cuStreamSynchronize": [c_void_p],
    "cuStreamWaitEvent": [c_void_p, c_void_p, c_uint],
    "cuEventCreate": [ctypes.POINTER(c_void_p), c_uint],
    "cuEventRecord": [c_void_p, c_void_p],
    "cuStreamBeginCapture_v2": [c_void_p, c_int],
    "cuStreamEndCapture": [c_void_p, ctypes.POINTER(c_void_p)],
    "cuStreamIsCapturing": [c_void_p, ctypes.POINTER(ctypes.c_int)],
    "cuGraphInstantiateWithFlags": [ctypes.POINTER(c_void_p), c_void_p, c_ulonglong],
    "cuGraphLaunch": [c_void_p, c_void_p],
    "cuGraphExecDestroy": [c_void_p],
    "cuGraphDestroy": [c_void_p],
}


class CudaError(RuntimeError):
    pass


class CudaMemory:
    graphs = True

    def __init__(self, ranks: List[int], capacity: int, driver: str = "libcuda.so.1"):
        self.cu = ctypes.CDLL(driver)
        for name, argtypes in _DRIVER.items():
            fn = getattr(self.cu, name)
            fn.restype, fn.argtypes = c_int, argtypes
        self.call("cuInit", 0)
        count = c_int()
        self.call("cuDeviceGetCount", byref(count))
        if count.value < 1:
            raise CudaError("no CUDA device")
        self.devices = {g: g % count.value for g in ranks}
        self.ctx: Dict[int, c_void_p] = {}
        self.arenas: Dict[int, int] = {}
        self.streams: Dict[int, List[int]] = {}
        self.events: Dict[int, List[int]] = {}
        self.graph: Dict[int, int] = {}
        self.exec: Dict[int, int] = {}
        for g in ranks:
            dev, ctx = c_int(), c_void_p()
            self.call("cuDeviceGet", byref(dev), self.devices[g])
            self.call("cuDevicePrimaryCtxRetain", byref(ctx), dev)
            self.ctx[g] = ctx
            self.select(g)
            ptr = c_ulonglong()
            self.call("cuMemAlloc_v2", byref(ptr), capacity)
            self.arenas[g] = ptr.value
            self.streams[g] = [self._new(c_void_p, "cuStreamCreate", CU_STREAM_NON_BLOCKING) for _ in range(2)]
            self.events[g] = [self._new(c_void_p, "cuEventCreate", CU_EVENT_DISABLE_TIMING) for _ in range(2)]

    def call(self, name: str, *args) -> None:
        res = getattr(self.cu, name)(*args)
        if res != CUDA_SUCCESS:
            text = ctypes.c_char_p()
            self.cu.cuGetErrorString(res, byref(text))
            raise CudaError(f"{name}: CUDA error {res} ({(text.value or b'?').decode()})")

    def _new(self, ctype, name: str, flags: int) -> int:
        out = ctype()
        self.call(name, byref(out), flags)
        return out.value

    def select(self, g: int) -> None:
        self.call("cuCtxSetCurrent", self.ctx[g])

    def base(self, g: int) -> int:
        return self.arenas[g]

    def upload(self, g: int, image: np.ndarray) -> None:
        self.select(g)
        s = self.streams[g][0]
        self.call("cuMemcpyHtoDAsync_v2", self.arenas[g], image.ctypes.data, image.nbytes, s)
        self.call("cuStreamSynchronize", s)

    def download(self, g: int, n: int) -> np.ndarray:
        self.select(g)
        out = np.empty(n, dtype=np.uint8)
        s = self.streams[g][0]
        self.call("cuMemcpyDtoHAsync_v2", out.ctypes.data, self.arenas[g], n, s)
        self.call("cuStreamSynchronize", s)
        return out

    def stream(self, g: int, i: int) -> int:
        return self.streams[g][i]

    def wait(self, g: int, lib, comms: List[int], deadline: float) -> None:
        self.select(g)
        pending = list(self.streams[g])
        while pending:
            res = self.cu.cuStreamQuery(pending[0])
            if res == CUDA_SUCCESS:
                pending.pop(0)
                continue
            if res != CUDA_ERROR_NOT_READY:
                self.call("cuStreamQuery", pending[0])
            for c in comms:
                lib.check_async(c)
            if time.monotonic() > deadline:
                raise Hang(f"rank {g}: streams still busy at the deadline")
            time.sleep(0.0001)

    def capture_begin(self, g: int) -> None:
        self.select(g)
        s0, s1 = self.streams[g]
        fork = self.events[g][0]
        self.call("cuStreamBeginCapture_v2", s0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        self.call("cuEventRecord", fork, s0)
        self.call("cuStreamWaitEvent", s1, fork, 0)

    def capture_end(self, g: int) -> None:
        self.select(g)
        s0, s1 = self.streams[g]
        join = self.events[g][1]
        self.call("cuEventRecord", join, s1)
        self.call("cuStreamWaitEvent", s0, join, 0)
        graph = c_void_p()
        self.call("cuStreamEndCapture", s0, byref(graph))
        self.graph[g] = graph.value

    def capture_abandon(self, g: int) -> None:
        """Ends g's capture, if one is under way, after a call in it failed,
        and drops what it captured: the streams are usable again (by the
        next library, by close) whatever state the failure left."""
        self.select(g)
        s0, s1 = self.streams[g]
        status = ctypes.c_int()
        if self.cu.cuStreamIsCapturing(s0, byref(status)) != CUDA_SUCCESS or status.value == 0:
            return
        join = self.events[g][1]
        self.cu.cuEventRecord(join, s1)
        self.cu.cuStreamWaitEvent(s0, join, 0)
        graph = c_void_p()
        self.cu.cuStreamEndCapture(s0, byref(graph))
        if graph.value:
            self.cu.cuGraphDestroy(graph)

    def instantiate(self, g: int) -> None:
        """Makes g's graph executable. Session.run does so for every rank
        before it launches any: see the module's docstring."""
        self.select(g)
        exe = c_void_p()
        self.call("cuGraphInstantiateWithFlags", byref(exe), self.graph[g], 0)
        self.exec[g] = exe.value

    def launch(self, g: int) -> None:
        self.select(g)
        self.call("cuGraphLaunch", self.exec[g], self.streams[g][0])

    def drop_graph(self, g: int) -> None:
        self.select(g)
        if g in self.exec:
            self.call("cuGraphExecDestroy", self.exec.pop(g))
        if g in self.graph:
            self.call("cuGraphDestroy", self.graph.pop(g))

    def close(self) -> None:
        for g in list(self.arenas):
            self.select(g)
            for s in self.streams[g]:
                self.call("cuStreamSynchronize", s)
                self.call("cuStreamDestroy_v2", s)
            self.call("cuMemFree_v2", self.arenas.pop(g))


def make_memory(kind: str, ranks: List[int], capacity: int, purlin: Optional[object] = None):
    if kind == "host":
        if purlin is None:
            raise ValueError("the host device needs Purlin (its host streams)")
        return HostMemory(purlin, ranks, capacity)
    return CudaMemory(ranks, capacity)

