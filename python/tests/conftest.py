"""Shared fixtures: finding the freshly built library, and clusters of ranks.

The tests use ../../build/libpurlin.so (from `make lib`) unless
PURLIN_LIBRARY names another. Tests that need the library fail when a named
or built library does not load (or lacks a function of the C API), and skip
only when there is no library at all.
"""

from __future__ import annotations

import os
import sys
from typing import Dict, Iterator, Optional

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BUILT = os.path.join(HERE, "..", "..", "build", "libpurlin.so")
if "PURLIN_LIBRARY" not in os.environ and os.path.exists(BUILT):
    os.environ["PURLIN_LIBRARY"] = os.path.abspath(BUILT)
sys.path.insert(0, HERE)  # spawned ranks import scenarios modules by name
if os.path.join(HERE, "..") not in sys.path:
    sys.path.insert(1, os.path.abspath(os.path.join(HERE, "..")))  # the package under test, uninstalled

import purlin  # noqa: E402

from cluster import Cluster, ScenarioFailed  # noqa: E402


def _library_problem() -> str:
    try:
        purlin.load_library()
        return ""
    except purlin.LibraryNotFound as exc:
        return str(exc)


LIBRARY_PROBLEM = _library_problem()


@pytest.fixture(scope="session")
def library() -> str:
    """The loaded library's path; skips (or fails in CI) when there is none."""
    if LIBRARY_PROBLEM:
        if os.environ.get("PURLIN_LIBRARY"):
            pytest.fail(LIBRARY_PROBLEM)
        pytest.skip("libpurlin.so not built (make lib): " + LIBRARY_PROBLEM.splitlines()[0])
    return purlin.library_path()


class Clusters:
    """One live Cluster per world size; a cluster whose scenario failed is replaced."""

    def __init__(self) -> None:
        self._live: Dict[tuple, Cluster] = {}

    def run(self, world_size: int, scenario: str, *args, env: Optional[Dict[str, str]] = None, **kwargs):
        """Runs scenario on the cluster of world_size ranks whose environment adds env."""
        key = (world_size, tuple(sorted((env or {}).items())))
        cluster = self._live.get(key)
        if cluster is None or not cluster.alive:
            cluster = self._live[key] = Cluster(world_size, env=env)
        try:
            return cluster.run(scenario, *args, **kwargs)
        except ScenarioFailed:
            # Ranks may have left the communicator mid-call; never reuse it.
            self._live.pop(key, None)
            cluster.kill()
            raise

    def close(self) -> None:
        for cluster in self._live.values():
            cluster.close()
        self._live.clear()


@pytest.fixture(scope="session")
def clusters(library: str) -> Iterator[Clusters]:
    pool = Clusters()
    yield pool
    pool.close()
