"""Scenarios for ranks that each own one GPU through torch (Cluster(gpus="torch"))."""

from __future__ import annotations

import numpy as np
import torch

import purlin
from reference import as_dtype, assert_equal, op_defined, rank_op, reduce, values


def _tensor(comm, rank, count, dtype, seed, op=purlin.SUM):
    host = as_dtype(values(rank, count, dtype, seed, op), dtype).astype(np.float64)
    return torch.tensor(host, dtype=torch.float64).to(getattr(torch, dtype)).to(f"cuda:{comm.device}")


def _host(tensor):
    torch.cuda.current_stream(tensor.device).synchronize()
    return tensor.to(torch.float64).cpu().numpy()


def all_reduce(comm, dtype, count, seed):
    ops = [purlin.SUM, purlin.MAX, purlin.MIN, purlin.AVG, purlin.premul_sum(3)]
    if not dtype.startswith("float8"):
        ops.append(purlin.PROD)
    for op in [op for op in ops if op_defined(op, dtype, comm.world_size)]:
        inputs = [values(r, count, dtype, seed, op) for r in range(comm.world_size)]
        expected = reduce(inputs, op, dtype, comm.world_size)
        send = _tensor(comm, comm.rank, count, dtype, seed, op)
        recv = torch.empty_like(send)
        comm.all_reduce(send, recv, op=rank_op(op, comm.rank))
        assert_equal(_host(recv), expected, f"torch all_reduce {op} {dtype}")
        comm.all_reduce(send, op=rank_op(op, comm.rank))
        assert_equal(_host(send), expected, f"torch all_reduce {op} {dtype} in place")


def copies(comm, dtype, count, seed):
    n, me = comm.world_size, comm.rank
    send = _tensor(comm, me, count, dtype, seed)
    gathered = torch.empty((n, count), dtype=send.dtype, device=send.device)
    comm.all_gather(send, gathered)
    for r in range(n):
        assert_equal(_host(gathered[r]), _host(_tensor(comm, r, count, dtype, seed)), f"all_gather {r}")
    blocks = _tensor(comm, me, count * n, dtype, seed).reshape(n, count)
    swapped = torch.empty_like(blocks)
    comm.all_to_all(blocks, swapped)
    for r in range(n):
        theirs = _tensor(comm, r, count * n, dtype, seed).reshape(n, count)
        assert_equal(_host(swapped[r]), _host(theirs[me]), f"all_to_all from {r}")
    for root in range(n):
        buf = _tensor(comm, me, count, dtype, seed + root)
        comm.broadcast(buf, root=root)
        assert_equal(_host(buf), _host(_tensor(comm, root, count, dtype, seed + root)), f"broadcast {root}")
    incoming = torch.empty_like(send)
    with purlin.group():
        comm.send(send, (me + 1) % n)
        comm.recv(incoming, (me - 1) % n)
    assert_equal(_host(incoming), _host(_tensor(comm, (me - 1) % n, count, dtype, seed)), "ring")


def reduce_scatter_and_v(comm, dtype, seed):
    n, me = comm.world_size, comm.rank
    count = 33
    inputs = [values(r, count * n, dtype, seed) for r in range(n)]
    expected = reduce(inputs, purlin.SUM, dtype, n)
    recv = torch.empty(count, dtype=getattr(torch, dtype), device=f"cuda:{comm.device}")
    comm.reduce_scatter(_tensor(comm, me, count * n, dtype, seed), recv)
    assert_equal(_host(recv), expected[me * count:(me + 1) * count], "reduce_scatter")
    counts = [r + 1 for r in range(n)]
    out = torch.zeros(sum(counts), dtype=recv.dtype, device=recv.device)
    comm.all_gather_v(_tensor(comm, me, counts[me], dtype, seed), out, counts)
    want = np.concatenate([_host(_tensor(comm, r, counts[r], dtype, seed)) for r in range(n)])
    assert_equal(_host(out), want, "all_gather_v")


def graph_capture_replay(comm, seed):
    """all_reduce captured in a CUDA graph: replays reduce the buffer's current contents."""
    device = torch.device("cuda", comm.device)
    static = torch.zeros(1000, device=device)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        comm.all_reduce(static)  # warm-up (first-call setup) outside capture
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        comm.all_reduce(static)
    for replay in range(3):
        host = values(comm.rank, 1000, "float32", seed + replay)
        static.copy_(torch.tensor(host, dtype=torch.float32))
        graph.replay()
        inputs = [values(r, 1000, "float32", seed + replay) for r in range(comm.world_size)]
        assert_equal(_host(static), reduce(inputs, purlin.SUM, "float32", comm.world_size), f"replay {replay}")


def explicit_stream(comm, seed):
    device = torch.device("cuda", comm.device)
    stream = torch.cuda.Stream(device)
    x = torch.ones(4096, device=device)
    torch.cuda.current_stream(device).synchronize()
    comm.all_reduce(x, stream=stream)
    stream.synchronize()
    assert float(x[0].item()) == comm.world_size


def bad_inputs(comm):
    device = f"cuda:{comm.device}"
    x = torch.ones(8, device=device)
    cases = {
        "cpu_tensor": lambda: comm.all_reduce(torch.ones(8)),
        "numpy": lambda: comm.all_reduce(np.ones(8, np.float32)),
        "non_contiguous": lambda: comm.all_reduce(torch.ones(8, 2, device=device).t()),
        "dtype_mismatch": lambda: comm.all_reduce(x, torch.ones(8, device=device, dtype=torch.float16)),
        "all_gather_size": lambda: comm.all_gather(x, torch.ones(8, device=device)),
    }
    if torch.cuda.device_count() > 1:
        other = (comm.device + 1) % torch.cuda.device_count()
        cases["other_gpu"] = lambda: comm.all_reduce(torch.ones(8, device=f"cuda:{other}"))
    out = {}
    for name, call in cases.items():
        try:
            call()
        except purlin.InvalidArgument as exc:
            out[name] = str(exc)
        else:
            raise AssertionError(f"{name}: accepted")
    return out


def fresh_thread(comm, seed):
    """A communicator made on a thread that has done no CUDA work, for device (rank + 1) % GPUs:
    for rank 1 that is device 0, which such a thread already calls current without any context
    being current, so the package must make it current (else the library takes device 1)."""
    import threading

    uid = torch.zeros(128, dtype=torch.uint8, device=f"cuda:{comm.device}")  # a UniqueId's bytes
    if comm.rank == 0:
        uid.copy_(torch.frombuffer(bytearray(purlin.UniqueId.generate().bytes()), dtype=torch.uint8))
    comm.broadcast(uid, root=0)
    uid_bytes = bytes(uid.cpu().numpy().tobytes())
    device = (comm.rank + 1) % torch.cuda.device_count()
    failure = []

    def work():
        try:
            with purlin.Communicator(comm.world_size, comm.rank, purlin.UniqueId.from_bytes(uid_bytes),
                                     device=device) as other:
                assert other.device == device
                x = torch.full((4099,), float(comm.rank + seed), device=f"cuda:{device}")
                other.all_reduce(x)
                want = sum(float(r + seed) for r in range(comm.world_size))
                assert_equal(_host(x), np.full(4099, want), f"all_reduce on device {device} from a fresh thread")
        except BaseException as exc:  # noqa: BLE001 (reported by the scenario's thread)
            failure.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
