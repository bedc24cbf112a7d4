"""Ranks forked from a process that has loaded the library.

The library loads its Go core at the first call that needs one, so a process
that imported purlin and loaded the library (which asks only its version)
may fork its ranks, as multiprocessing does by default on Linux: each child
starts its own runtime. A child forked after the parent's first real call
gets InvalidUsage at once, naming the cause. Each scenario runs in a fresh
interpreter, since this test process has long used the library.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))

PROGRAM = textwrap.dedent("""
    import multiprocessing as mp, sys
    import numpy as np
    import purlin

    purlin.load_library()
    if sys.argv[1] == "called":
        purlin.UniqueId.generate()  # the parent's first call: its Go runtime starts here

    def rank_main(rank, ids, out):
        try:
            if rank == 0:
                uid = purlin.UniqueId.generate()
                ids.put(uid.bytes())
            else:
                uid = purlin.UniqueId.from_bytes(ids.get(timeout=30))
            with purlin.Communicator(2, rank, uid) as comm:
                x = np.arange(1000, dtype=np.float32) + rank
                comm.all_reduce(x)
                ok = bool((x == 2 * np.arange(1000, dtype=np.float32) + 1).all())
            out.put((rank, "ok" if ok else "wrong result"))
        except purlin.PurlinError as err:
            out.put((rank, f"{type(err).__name__}: {err}"))
            if rank == 0:
                ids.put(b"")  # rank 1 must not wait for an id that will not come

    fork = mp.get_context("fork")
    ids, out = fork.Queue(), fork.Queue()
    ranks = [fork.Process(target=rank_main, args=(r, ids, out)) for r in range(2)]
    for p in ranks:
        p.start()
    results = dict(out.get(timeout=60) for _ in ranks)
    for p in ranks:
        p.join(timeout=10)
    print(results[0])
    print(results[1])
""")


def run(mode: str) -> list:
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..") + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PURLIN_ATOM=os.environ.get("PURLIN_ATOM", "host"), PURLIN_TIMEOUT="20")
    done = subprocess.run([sys.executable, "-c", PROGRAM, mode], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def test_ranks_forked_before_the_first_call_work(library):
    assert run("loaded") == ["ok", "ok"]


def test_ranks_forked_after_a_call_are_refused_at_once(library):
    lines = run("called")
    assert lines[0].startswith("InvalidUsage:") and "fork" in lines[0], lines
