"""The CPU example runs as documented and prints the right numbers."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "numpy_cpu.py")


@pytest.mark.parametrize("world", [2, 3])
def test_numpy_cpu_example(library, world):
    env = {**os.environ, "PURLIN_LIBRARY": library, "PURLIN_TIMEOUT": "20",
           "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(EXAMPLE)))}
    done = subprocess.run([sys.executable, EXAMPLE, str(world)], env=env, capture_output=True, text=True,
                          timeout=90)
    assert done.returncode == 0, done.stderr
    lines = sorted(done.stdout.splitlines())
    assert len(lines) == world, done.stdout
    total = world * (world + 1) // 2
    for rank, line in enumerate(lines):
        assert line.startswith(f"rank {rank}: sum={total} "), line
        assert f"gathered={[[r, r * r] for r in range(world)]}" in line, line
        assert f"mean={(world - 1) / 2:g}" in line, line
        assert line.endswith(f"from_left={(rank - 1) % world}"), line
