"""AllReduce epilogues end to end on the host Atom: 2 and 3 spawned ranks, NumPy arrays (and
CPU torch tensors where torch is installed), against the float64 reference of the unfused
sequence in scenarios_epilogue.py (its docstring states the tolerance); bad epilogues."""

from __future__ import annotations

import pytest

from reference import FLOAT_DTYPES

WORLDS = [2, 3]
DTYPES = [d for d in ("float32", "float16", "bfloat16") if d in FLOAT_DTYPES]


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_kind(clusters, world, dtype):
    calls = clusters.run(world, "scenarios_epilogue.every_kind", dtype, 10 * world + DTYPES.index(dtype))
    assert calls == [9 * 4 * 2] * world


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_all_reduce_rmsnorm(clusters, world, dtype):
    clusters.run(world, "scenarios_epilogue.rmsnorm", dtype, 7)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_all_reduce_rmsnorm_torch(clusters, dtype):
    pytest.importorskip("torch")
    clusters.run(2, "scenarios_epilogue.rmsnorm_torch", dtype, 3)


REFUSED = {
    # case: (exception class, words its message must contain, whether the library said them)
    "residual_dtype": ("InvalidArgument", "residual is float16 but x is float32", False),
    "weight_size": ("InvalidArgument", "weight (hidden) must have 8 elements, has 9", False),
    "quant_dtype": ("InvalidArgument", "quant_out must be float8_e4m3fn (or uint8), not float32", False),
    "scales_dtype": ("InvalidArgument", "scales must be float32, not float64", False),
    "row_scales_count": ("InvalidArgument", "scales (one per row with row scales) must have 4 elements", False),
    "quant_needs_scales": ("InvalidArgument", "quant_out needs scales", False),
    "row_scale_needs_quant": ("InvalidArgument", "row_scale and scales go with quant_out", False),
    "bad_kind": ("InvalidArgument", "kind must be EpilogueKind bits", False),
    "bad_hidden": ("InvalidArgument", "hidden must be a positive int", False),
    "read_only_residual": ("InvalidArgument", "read-only", False),
    "int_type": ("InvalidArgument", "(float32, float16 and bfloat16 only)", True),
    "not_whole_rows": ("InvalidArgument", "count 10 is not a whole number of rows of 3", True),
    "no_weight": ("InvalidArgument", "epilogue weight buffer is NULL", True),
    "overlap": ("InvalidArgument", "overlaps recvbuff", True),
    "negative_eps": ("InvalidArgument", "eps -1 is not a finite value >= 0", True),
    "unknown_kind": ("InvalidArgument", "unknown epilogue kind bits", True),
    "unused_buffer": ("InvalidArgument", "given a weight buffer it does not use", True),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_bad_epilogue_is_refused_and_the_communicator_stays_usable(clusters, case):
    cls, words, by_library = REFUSED[case]
    for name, text, code, library_message in clusters.run(2, "scenarios_epilogue.refused", case):
        assert (name, code) == (cls, 4), text
        assert words in (library_message if by_library else text), text
        assert bool(library_message) == by_library, text


def test_epilogue_kinds_and_struct_follow_the_header():
    """purlin.EpilogueKind equals purlinEpilogueKind_t, and the ctypes struct has
    purlinEpilogue_t's fields in its order (no library needed)."""
    import os
    import re

    import purlin
    from purlin import _library

    header = os.path.join(os.path.dirname(__file__), "..", "..", "include", "purlin.h")
    if not os.path.exists(header):
        pytest.skip("not in a checkout of Purlin")
    with open(header) as f:
        text = f.read()
    body = re.search(r"typedef enum \{([^}]*)\} purlinEpilogueKind_t;", text).group(1)
    kinds = {name: int(value) for name, value in re.findall(r"purlinEpilogue(\w+) = (\d+)", body)}
    assert kinds == {"ResidualAdd": purlin.EpilogueKind.RESIDUAL_ADD, "RMSNorm": purlin.EpilogueKind.RMSNORM,
                     "QuantFP8": purlin.EpilogueKind.QUANT_FP8, "RowScale": purlin.EpilogueKind.ROW_SCALE}
    body = re.search(r"typedef struct \{([^}]*)\} purlinEpilogue_t;", text).group(1)
    fields = re.findall(r"(\w+);", re.sub(r"/\*.*?\*/", "", body, flags=re.S))
    assert fields == [name for name, _ in _library.EpilogueStruct._fields_]
