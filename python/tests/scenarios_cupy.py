"""Scenarios for ranks that each own one GPU through CuPy (Cluster(gpus="cupy"))."""

from __future__ import annotations

import cupy
import numpy as np

import purlin
from reference import assert_equal, reduce, values


def all_reduce_and_gather(comm, dtype, count, seed):
    with cupy.cuda.Device(comm.device):
        n, me = comm.world_size, comm.rank
        for op in (purlin.SUM, purlin.MAX, purlin.AVG):
            x = cupy.asarray(values(me, count, dtype, seed, op).astype(dtype))
            comm.all_reduce(x, op=op)
            cupy.cuda.get_current_stream().synchronize()
            inputs = [values(r, count, dtype, seed, op) for r in range(n)]
            assert_equal(cupy.asnumpy(x), reduce(inputs, op, dtype, n), f"cupy all_reduce {op}")
        send = cupy.asarray(values(me, count, dtype, seed).astype(dtype))
        recv = cupy.empty((n, count), dtype=dtype)
        comm.all_gather(send, recv)
        cupy.cuda.get_current_stream().synchronize()
        for r in range(n):
            assert_equal(cupy.asnumpy(recv[r]), values(r, count, dtype, seed), f"cupy all_gather {r}")


def bad_inputs(comm):
    with cupy.cuda.Device(comm.device):
        out = {}
        for name, call in {
            "numpy": lambda: comm.all_reduce(np.ones(4, np.float32)),
            "non_contiguous": lambda: comm.all_reduce(cupy.ones((4, 2), np.float32)[:, 0]),
        }.items():
            try:
                call()
            except purlin.InvalidArgument as exc:
                out[name] = str(exc)
        return out
