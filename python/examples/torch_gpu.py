"""Two processes, one GPU each, all-reduce torch tensors with Purlin (also inside a CUDA graph).

    torchrun --nproc-per-node 2 python/examples/torch_gpu.py     # torch.distributed carries the id
    python python/examples/torch_gpu.py                           # or: spawn, the id through a Queue
"""

from __future__ import annotations

import os

import torch
import torch.multiprocessing as tmp

import purlin


def work(comm: purlin.Communicator) -> None:
    device = torch.device("cuda", comm.device)
    x = torch.full((1024,), float(comm.rank + 1), device=device, dtype=torch.bfloat16)
    comm.all_reduce(x)                                       # on torch's current stream
    expected = sum(range(1, comm.world_size + 1))

    static = torch.ones(256, device=device)
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        comm.all_reduce(static)                              # warm-up outside capture
    torch.cuda.current_stream(device).wait_stream(side)
    with torch.cuda.graph(graph):
        comm.all_reduce(static)                              # captured: no sync, no allocation
    static.fill_(1.0)
    graph.replay()
    torch.cuda.synchronize(device)
    print(f"rank {comm.rank}: all_reduce {x[0].item()} (want {expected}), "
          f"graph replay {static[0].item()} (want {comm.world_size})")


def spawned(rank: int, world_size: int, ids: "tmp.Queue") -> None:
    torch.cuda.set_device(rank)
    if rank == 0:
        uid = purlin.UniqueId.generate()
        for _ in range(world_size - 1):
            ids.put(uid.bytes())
    else:
        uid = purlin.UniqueId.from_bytes(ids.get(timeout=60))
    with purlin.Communicator(world_size, rank, uid, device=rank) as comm:
        work(comm)


def main() -> None:
    if "LOCAL_RANK" in os.environ:                           # started by torchrun
        import torch.distributed as dist

        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group("gloo")
        with purlin.Communicator.from_torch_group() as comm:
            work(comm)
        dist.destroy_process_group()
        return
    world_size = 2
    context = tmp.get_context("spawn")
    ids = context.Queue()
    tmp.start_processes(spawned, args=(world_size, ids), nprocs=world_size, start_method="spawn")


if __name__ == "__main__":
    main()
