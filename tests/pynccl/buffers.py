"""Where the pynccl test's buffers live, and how it waits for them.

CudaBuffers: torch tensors on this rank's GPU, the stream is torch's current
stream (what vLLM passes), CUDA graphs available. HostBuffers: numpy arrays in
host memory for Purlin's host datapath (PURLIN_ATOM=host), the stream is NULL
(the communicator's own queue) and purlinCommSynchronize waits for it; it lets
the whole client run on a machine without a GPU.

Both take and give float64 numpy arrays, so checks are written once.
"""

from __future__ import annotations

import numpy as np


def _host_dtypes():
    table = {
        "int8": np.int8, "uint8": np.uint8, "int32": np.int32, "uint32": np.uint32,
        "int64": np.int64, "uint64": np.uint64, "float16": np.float16,
        "float32": np.float32, "float64": np.float64,
    }
    try:
        import ml_dtypes  # bf16 and fp8 for numpy; optional
    except ImportError:
        return table
    table.update(bfloat16=ml_dtypes.bfloat16, float8_e4m3=ml_dtypes.float8_e4m3fn,
                 float8_e5m2=ml_dtypes.float8_e5m2)
    return table


class HostBuffers:
    kind = "host"
    graphs = False

    def __init__(self, lib, rank: int):
        self.lib, self.rank, self.comm = lib, rank, None
        self.types = _host_dtypes()

    def has(self, dtype: str) -> bool:
        return dtype in self.types

    def empty(self, count: int, dtype: str):
        # Filled with a pattern, not zeros, so a missing write is seen.
        return np.full(count, 77, dtype=self.types[dtype])

    def upload(self, values: np.ndarray, dtype: str):
        return np.ascontiguousarray(values.astype(self.types[dtype]))

    def download(self, buf) -> np.ndarray:
        return np.asarray(buf).astype(np.float64)

    def ptr(self, buf, offset_elems: int = 0) -> int:
        return buf.ctypes.data + offset_elems * buf.itemsize

    def stream(self):
        return None

    def synchronize(self) -> None:
        self.lib.purlin_synchronize(self.comm)


class CudaBuffers:
    kind = "cuda"
    graphs = True

    def __init__(self, lib, rank: int):
        import torch

        self.torch, self.lib, self.rank, self.comm = torch, lib, rank, None
        self.device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(self.device)
        self.types = {
            "int8": torch.int8, "uint8": torch.uint8, "int32": torch.int32,
            "int64": torch.int64, "float16": torch.float16, "float32": torch.float32,
            "float64": torch.float64, "bfloat16": torch.bfloat16,
        }
        # uint32/uint64 are left out: torch gives them only bare-bones kernels (the
        # host mode and the C suites cover Purlin's unsigned types).
        for name, attr in (("float8_e4m3", "float8_e4m3fn"), ("float8_e5m2", "float8_e5m2")):
            if hasattr(torch, attr):
                self.types[name] = getattr(torch, attr)

    def has(self, dtype: str) -> bool:
        return dtype in self.types

    def empty(self, count: int, dtype: str):
        t = self.torch.empty(count, dtype=self.types[dtype], device=self.device)
        t.view(self.torch.uint8).fill_(0x5A)  # a pattern, so a missing write is seen
        return t

    def upload(self, values: np.ndarray, dtype: str):
        # Through float64 (exact for the test's grid values), then one cast on the GPU.
        return self.torch.from_numpy(values.astype(np.float64)).to(self.device).to(self.types[dtype])

    def download(self, buf) -> np.ndarray:
        return buf.to(self.torch.float64).cpu().numpy()

    def ptr(self, buf, offset_elems: int = 0) -> int:
        return buf.data_ptr() + offset_elems * buf.element_size()

    def stream(self):
        return self.torch.cuda.current_stream().cuda_stream

    def synchronize(self) -> None:
        self.torch.cuda.current_stream().synchronize()


def make_buffers(kind: str, lib, rank: int):
    return {"host": HostBuffers, "cuda": CudaBuffers}[kind](lib, rank)
