"""Pure-Python parts, no library needed: minifloat rounding, dtype and op mapping,
errors, array description, UniqueId, and how the loader reports failure."""

from __future__ import annotations

import math
import os
import random
import struct
import subprocess
import sys

import numpy as np
import pytest

import purlin
from purlin import buffers, dtypes, errors, minifloat, ops

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None

FORMATS = [
    (minifloat.FLOAT16, "float16"),
    (minifloat.BFLOAT16, "bfloat16"),
    (minifloat.FLOAT8_E4M3, "float8_e4m3fn"),
    (minifloat.FLOAT8_E5M2, "float8_e5m2"),
]


def _reference_dtype(name):
    if name == "float16":
        return np.float16
    if ml_dtypes is None:
        pytest.skip("ml_dtypes not installed")
    return getattr(ml_dtypes, name)


def _interesting_values(fmt, rng):
    values = [0.0, -0.0, 1.0, -1.0, fmt.max_finite, -fmt.max_finite, math.ldexp(1.0, 1 - fmt.bias)]
    for code in range(1 << min(fmt.width, 12)):  # every code of float8, a slice of the 16-bit ones
        value = minifloat.decode(code, fmt)
        if math.isfinite(value):
            values.append(value)
            values.append(value * (1 + 2.0 ** -(fmt.mantissa_bits + 1)))  # exactly half-way up
    values += [rng.uniform(-fmt.max_finite, fmt.max_finite) for _ in range(2000)]
    values += [rng.uniform(-4, 4) for _ in range(2000)]
    return values


@pytest.mark.parametrize("fmt,name", FORMATS, ids=[n for _, n in FORMATS])
def test_minifloat_encode_matches_reference_rounding(fmt, name):
    reference = _reference_dtype(name)
    rng = random.Random(fmt.width)
    code_type = np.uint16 if fmt.width == 16 else np.uint8
    for value in _interesting_values(fmt, rng):
        if abs(value) > fmt.max_finite:
            continue  # ml_dtypes overflows to NaN/inf; Purlin saturates (tested below)
        want = int(np.array([value], dtype=np.float64).astype(reference).view(code_type)[0])
        assert minifloat.encode(value, fmt) == want, f"{name}: {value!r}"


@pytest.mark.parametrize("fmt", [f for f, _ in FORMATS], ids=[n for _, n in FORMATS])
def test_minifloat_decode_inverts_encode(fmt):
    for code in range(1 << min(fmt.width, 12)):
        value = minifloat.decode(code, fmt)
        if math.isfinite(value):
            assert minifloat.encode(value, fmt) == code, hex(code)


def test_float8_saturates_and_keeps_nan():
    e4m3, e5m2 = minifloat.FLOAT8_E4M3, minifloat.FLOAT8_E5M2
    assert minifloat.encode(1e6, e4m3) == 0x7E  # 448, not NaN
    assert minifloat.encode(-1e6, e4m3) == 0xFE
    assert minifloat.encode(math.inf, e5m2) == 0x7B  # 57344, not inf
    assert minifloat.encode(464.0, e4m3) == 0x7E  # half-way to the next step saturates too
    assert math.isnan(minifloat.decode(minifloat.encode(math.nan, e4m3), e4m3))
    assert math.isnan(minifloat.decode(minifloat.encode(math.nan, e5m2), e5m2))
    assert minifloat.encode(1e6, minifloat.FLOAT16) == 0x7C00  # IEEE types overflow to inf


@pytest.mark.parametrize("name,expected", [
    ("int8", 0), ("uint8", 1), ("int32", 2), ("uint32", 3), ("int64", 4), ("uint64", 5),
    ("float16", 6), ("float32", 7), ("float64", 8), ("bfloat16", 9), ("float8_e4m3fn", 10),
    ("float8_e5m2", 11), ("torch.bfloat16", 9), ("torch.half", 6), ("torch.float8_e5m2", 11),
])
def test_dtype_values_equal_the_c_enum(name, expected):
    assert int(dtypes.from_name(name)) == expected


def test_numpy_dtypes_map_and_unsupported_ones_are_named():
    assert dtypes.from_dtype(np.dtype(np.float32)) is purlin.DataType.FLOAT32
    assert dtypes.from_dtype(np.dtype(np.uint64)).itemsize == 8
    for bad in (np.int16, np.bool_, np.complex64):
        with pytest.raises(purlin.InvalidArgument, match=f"dtype {np.dtype(bad).name} is not supported"):
            dtypes.from_dtype(np.dtype(bad))


@pytest.mark.skipif(ml_dtypes is None, reason="ml_dtypes not installed")
def test_ml_dtypes_arrays_map_to_purlin_types():
    for name, value in (("bfloat16", 9), ("float8_e4m3fn", 10), ("float8_e5m2", 11)):
        array = np.ones(3, dtype=getattr(ml_dtypes, name))
        assert int(buffers.describe(array, "x").dtype) == value


@pytest.mark.parametrize("dtype,value,packed", [
    (purlin.DataType.INT8, -3, struct.pack("<b", -3)),
    (purlin.DataType.UINT64, 7, struct.pack("<Q", 7)),
    (purlin.DataType.FLOAT32, 0.1, struct.pack("<f", 0.1)),
    (purlin.DataType.FLOAT64, 0.1, struct.pack("<d", 0.1)),
    (purlin.DataType.FLOAT16, 0.5, struct.pack("<e", 0.5)),
    (purlin.DataType.BFLOAT16, 1.0, struct.pack("<H", 0x3F80)),
    (purlin.DataType.FLOAT8_E4M3, 448.0, b"\x7e"),
    (purlin.DataType.FLOAT8_E5M2, -2.0, b"\xc0"),
])
def test_scalar_bytes_are_one_element_of_the_dtype(dtype, value, packed):
    assert dtypes.scalar_bytes(value, dtype) == packed


def test_scalar_bytes_refuses_what_the_dtype_cannot_hold():
    with pytest.raises(purlin.InvalidArgument, match="not an integer"):
        dtypes.scalar_bytes(0.5, purlin.DataType.INT32)
    with pytest.raises(purlin.InvalidArgument, match="does not fit"):
        dtypes.scalar_bytes(300, purlin.DataType.UINT8)


def test_ops_normalize():
    assert ops.normalize("max") is purlin.MAX
    assert ops.normalize(4) is purlin.AVG
    assert ops.normalize(purlin.premul_sum(2)) == purlin.PreMulSum(2)
    for bad in ("median", 5, True, None):
        with pytest.raises(purlin.InvalidArgument):
            ops.normalize(bad)
    with pytest.raises(purlin.InvalidArgument):
        purlin.premul_sum("2")


def test_error_classes_follow_codes_and_messages():
    assert isinstance(errors.make_error(4, "x", "bad"), purlin.InvalidArgument)
    assert isinstance(errors.make_error(5, "x", "ranks disagree"), purlin.InvalidUsage)
    assert isinstance(errors.make_error(6, "x", "purlin: timed out waiting for a peer"), purlin.Timeout)
    assert isinstance(errors.make_error(6, "x", "purlin: communicator aborted"), purlin.Aborted)
    assert type(errors.make_error(6, "x", "remote peer failed")) is purlin.RemoteError
    assert isinstance(errors.make_error(8, "x"), purlin.Timeout)
    error = errors.make_error(2, "purlinCommInitRank failed", "purlin: socket: refused")
    assert isinstance(error, purlin.SystemCallError) and error.code == 2
    assert str(error) == "purlinCommInitRank failed: purlin: socket: refused"
    assert error.library_message == "purlin: socket: refused"


def test_describe_checks_layout_before_any_c_call():
    with pytest.raises(purlin.InvalidArgument, match="C-contiguous"):
        buffers.describe(np.ones((4, 4))[:, 1], "send")
    frozen = np.ones(4, dtype=np.float32)
    frozen.flags.writeable = False
    with pytest.raises(purlin.InvalidArgument, match="read-only"):
        buffers.describe(frozen, "recv", writable=True)
    buffers.describe(frozen, "send")  # read-only is fine for what is only read
    array = np.arange(12, dtype=np.int32).reshape(3, 4)
    described = buffers.describe(array, "send")
    assert (described.ptr, described.count, described.nbytes) == (array.ctypes.data, 12, 48)
    assert described.device is None and described.shape == (3, 4)


def test_unique_id_round_trips_and_checks_its_size():
    raw = bytes(range(128))
    uid = purlin.UniqueId.from_bytes(raw)
    assert uid.bytes() == raw and bytes(uid) == raw
    assert bytes(uid.as_struct()) == raw
    assert uid == purlin.UniqueId(bytearray(raw))
    for bad in (b"", raw + b"x", "x" * 128):
        with pytest.raises(purlin.InvalidArgument, match="128 bytes"):
            purlin.UniqueId.from_bytes(bad)


def test_communicator_checks_its_arguments_before_loading_anything():
    uid = bytes(128)
    with pytest.raises(purlin.InvalidArgument, match="rank must be in"):
        purlin.Communicator(2, 2, uid)
    with pytest.raises(purlin.InvalidArgument, match="world_size must be >= 1"):
        purlin.Communicator(0, 0, uid)
    with pytest.raises(purlin.InvalidArgument, match="128 bytes"):
        purlin.Communicator(2, 0, b"short")


def test_a_device_the_framework_lacks_is_an_invalid_argument(monkeypatch):
    """With CuPy imported, a device past its count is refused before CuPy or the library
    sees it (a stand-in cupy module with one device; torch, if imported, is hidden)."""
    import types

    from purlin import _cuda

    def device(ordinal):
        raise AssertionError(f"cupy.cuda.Device({ordinal}) reached")

    runtime = types.SimpleNamespace(getDeviceCount=lambda: 1)
    cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime, Device=device))
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    with pytest.raises(purlin.InvalidArgument, match="device 3 does not exist"):
        with _cuda.current_device(3):
            pass


def test_loader_lists_every_path_tried_and_why(tmp_path):
    not_a_library = tmp_path / "libpurlin.so"
    not_a_library.write_text("not ELF")
    script = "import purlin\ntry:\n    purlin.load_library()\nexcept ImportError as e:\n    print(e)\n"
    env = {**os.environ, "PURLIN_LIBRARY": str(not_a_library), "LD_LIBRARY_PATH": ""}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(purlin.__file__)), timeout=30).stdout
    if "could not load" not in out:
        pytest.skip("a libpurlin.so is installed in this package or on the system path")
    assert f"PURLIN_LIBRARY: {not_a_library}:" in out
    assert "package:" in out and "system: libpurlin.so" in out


def test_loader_reports_a_library_without_the_api(tmp_path):
    # libm loads fine but has no purlin* function: the error must say which are missing.
    script = "import purlin\ntry:\n    purlin.load_library()\nexcept ImportError as e:\n    print(e)\n"
    env = {**os.environ, "PURLIN_LIBRARY": "libm.so.6"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(purlin.__file__)), timeout=30).stdout
    if "could not load" not in out:
        pytest.skip("a libpurlin.so is installed in this package or on the system path")
    assert "PURLIN_LIBRARY: libm.so.6: loaded, but lacks purlinGetVersion" in out
