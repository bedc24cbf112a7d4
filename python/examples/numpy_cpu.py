"""Several CPU processes sum NumPy arrays with Purlin's host Atom.

    pip install './python[numpy]'        # builds libpurlin.so into the package
    python python/examples/numpy_cpu.py 4

Rank 0 makes the UniqueId and hands its 128 bytes to the others through a
multiprocessing Queue; every rank then joins the communicator.
"""

from __future__ import annotations

import multiprocessing as mp
import sys

import numpy as np


def run_rank(rank: int, world_size: int, ids: "mp.Queue[bytes]", results: "mp.Queue[str]") -> None:
    import purlin

    if rank == 0:
        uid = purlin.UniqueId.generate()
        for _ in range(world_size - 1):
            ids.put(uid.bytes())
    else:
        uid = purlin.UniqueId.from_bytes(ids.get(timeout=60))

    with purlin.Communicator(world_size, rank, uid) as comm:
        x = np.full(4, rank + 1, dtype=np.float32)
        comm.all_reduce(x)                                   # in place: every rank gets 1+2+...+n
        gathered = np.empty((world_size, 2), dtype=np.int64)
        comm.all_gather(np.array([rank, rank * rank]), gathered)
        mean = comm.all_reduce(np.array([float(rank)]), np.empty(1), op=purlin.AVG)
        with purlin.group():                                 # a ring exchange, launched together
            incoming = np.empty(1, dtype=np.int32)
            comm.send(np.array([rank], dtype=np.int32), (rank + 1) % world_size)
            comm.recv(incoming, (rank - 1) % world_size)
        results.put(f"rank {rank}: sum={x[0]:g} gathered={gathered.tolist()} "
                    f"mean={mean[0]:g} from_left={incoming[0]}")


def main() -> None:
    world_size = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    context = mp.get_context("spawn")  # never fork a process that has loaded the Go runtime
    ids, results = context.Queue(), context.Queue()
    ranks = [context.Process(target=run_rank, args=(r, world_size, ids, results)) for r in range(world_size)]
    for process in ranks:
        process.start()
    for _ in range(world_size):
        print(results.get(timeout=120))
    for process in ranks:
        process.join(timeout=30)
    sys.exit(max(abs(p.exitcode or 0) for p in ranks))


if __name__ == "__main__":
    main()
