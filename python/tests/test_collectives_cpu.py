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


# A 64 KiB staging half makes medium calls take the chunked and ring regimes cheaply.
SMALL_STAGING = {"PURLIN_STAGE_BYTES": str(64 << 10)}


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dtype", ["int32", "float32", "bfloat16" if "bfloat16" in FLOAT_DTYPES else "float16"])
@pytest.mark.parametrize("count", [20_000, 100_003])
def test_reductions_larger_than_staging(clusters, world, dtype, count):
    clusters.run(world, "all_reduce", dtype, count, 2, env=SMALL_STAGING)
    clusters.run(world, "reduce_scatter", dtype, count // world, 3, env=SMALL_STAGING)


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("collective", ["all_gather", "broadcast", "all_to_all", "send_recv_ring"])
def test_copies_larger_than_staging(clusters, world, collective):
    clusters.run(world, collective, "float64", 40_000, 4, env=SMALL_STAGING)


@pytest.mark.parametrize("world", WORLDS)
def test_all_reduce_beyond_default_staging(clusters, world):
    # 9 MiB of float64: more than one half of the default 8 MiB host staging area.
    clusters.run(world, "all_reduce_sum", "float64", (9 << 20) // 8, 5, timeout=60)


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


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dtype", ["int32", "float32", FLOAT_DTYPES[-1]])
@pytest.mark.parametrize("rows,width", [(1, 1), (3, 5), (16, 33), (64, 700)])
def test_column_collectives(clusters, world, dtype, rows, width):
    clusters.run(world, "all_gather_columns", dtype, rows, width, 7)
    clusters.run(world, "reduce_scatter_columns", dtype, rows, width, 8)


def test_column_collectives_refuse_bad_rows(clusters):
    clusters.run(2, "columns_refused")


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dtype", ["int8", "float32", FLOAT_DTYPES[-1]])
@pytest.mark.parametrize("most", [0, 5, 3000])
def test_all_to_all_matrix(clusters, world, dtype, most):
    clusters.run(world, "all_to_all_matrix", dtype, most, 11)
