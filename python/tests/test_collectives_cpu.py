"""Every collective end to end on the host Atom: 2 and 4 spawned ranks, NumPy arrays,
results against the float64 references of reference.py."""

from __future__ import annotations

import pytest

from reference import ALL_DTYPES, FLOAT_DTYPES

WORLDS = [2, 4]
# A few dtypes for the collectives whose code does not depend on the element type.
COPY_DTYPES = ["uint8", "int64", "float16"] + (["float8_e5m2"] if "float8_e5m2" in FLOAT_DTYPES else [])
# Counts: one packet, a few packets with a partial last one, and a staged size.
COUNTS = [1, 7, 3000]


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("count", [7, 3000])
def test_all_reduce_every_op(clusters, world, dtype, count):
    clusters.run(world, "all_reduce", dtype, count, 1)


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dtype", ["int32", "float32", "bfloat16" if "bfloat16" in FLOAT_DTYPES else "float16"])
def test_all_reduce_large_is_chunked(clusters, world, dtype):
    # 3 Mi elements: more than one half of the default 8 MiB host staging area.
    clusters.run(world, "all_reduce", dtype, 3 << 20 if dtype == "int32" else 1 << 20, 2, timeout=60)


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dtype", ["int8", "float32", FLOAT_DTYPES[-1]])
@pytest.mark.parametrize("count", COUNTS)
def test_reduce_every_root(clusters, world, dtype, count):
    clusters.run(world, "reduce_to_roots", dtype, count, 3)


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_reduce_scatter_every_op(clusters, world, dtype):
    clusters.run(world, "reduce_scatter", dtype, 5, 4)
    clusters.run(world, "reduce_scatter", dtype, 1001, 5)


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dtype", COPY_DTYPES)
@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("collective", ["all_gather", "broadcast", "all_to_all", "gather", "scatter",
                                        "send_recv_ring"])
def test_copy_collectives(clusters, world, dtype, count, collective):
    clusters.run(world, collective, dtype, count, 6)


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dtype", ["int32", "float32", FLOAT_DTYPES[-1]])
@pytest.mark.parametrize("collective", ["all_gather_v", "reduce_scatter_v", "all_to_all_v"])
def test_v_collectives(clusters, world, dtype, collective):
    for seed in (0, 1, 2):
        clusters.run(world, collective, dtype, seed)


@pytest.mark.parametrize("world", WORLDS)
def test_every_collective_every_dtype(clusters, world):
    assert clusters.run(world, "every_collective", 8) == [len(ALL_DTYPES)] * world
