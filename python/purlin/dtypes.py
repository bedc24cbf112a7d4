"""Purlin's element types and how NumPy, PyTorch and CuPy dtypes map to them.

DataType values equal purlinDataType_t (and NCCL's ncclDataType_t). Mapping
goes by dtype name, so neither torch nor ml_dtypes is imported here: a NumPy
bfloat16 or float8 array (ml_dtypes) maps like its torch counterpart.
"""

from __future__ import annotations

import enum
import struct
from typing import Any, Dict

from . import minifloat
from .errors import invalid_argument


class DataType(enum.IntEnum):
    """purlinDataType_t."""

    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    BFLOAT16 = 9
    FLOAT8_E4M3 = 10
    FLOAT8_E5M2 = 11

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return _ITEMSIZE[self]

    @property
    def is_float(self) -> bool:
        return self >= DataType.FLOAT16


_ITEMSIZE = {
    DataType.INT8: 1, DataType.UINT8: 1, DataType.INT32: 4, DataType.UINT32: 4,
    DataType.INT64: 8, DataType.UINT64: 8, DataType.FLOAT16: 2, DataType.FLOAT32: 4,
    DataType.FLOAT64: 8, DataType.BFLOAT16: 2, DataType.FLOAT8_E4M3: 1, DataType.FLOAT8_E5M2: 1,
}

# dtype names as NumPy/CuPy (dtype.name, ml_dtypes included) and torch (str(dtype)
# without "torch.") spell them.
_BY_NAME: Dict[str, DataType] = {
    "int8": DataType.INT8,
    "uint8": DataType.UINT8,
    "int32": DataType.INT32,
    "uint32": DataType.UINT32,
    "int64": DataType.INT64,
    "uint64": DataType.UINT64,
    "float16": DataType.FLOAT16,
    "half": DataType.FLOAT16,
    "float32": DataType.FLOAT32,
    "float": DataType.FLOAT32,
    "float64": DataType.FLOAT64,
    "double": DataType.FLOAT64,
    "bfloat16": DataType.BFLOAT16,
    "float8_e4m3fn": DataType.FLOAT8_E4M3,
    "float8_e5m2": DataType.FLOAT8_E5M2,
}


def from_name(name: str) -> DataType:
    """The DataType of a dtype name ("float32", "torch.bfloat16", "float8_e4m3fn")."""
    key = name[len("torch."):] if name.startswith("torch.") else name
    try:
        return _BY_NAME[key]
    except KeyError:
        supported = ", ".join(sorted({n for n in _BY_NAME if n not in ("half", "float", "double")}))
        raise invalid_argument(f"purlin: dtype {name} is not supported (supported: {supported})") from None


def from_dtype(dtype: Any) -> DataType:
    """The DataType of a NumPy/CuPy dtype, a torch.dtype, a DataType or a name."""
    if isinstance(dtype, DataType):
        return dtype
    if isinstance(dtype, str):
        return from_name(dtype)
    if type(dtype).__module__ == "torch":
        return from_name(str(dtype))
    name = getattr(dtype, "name", None)
    if isinstance(name, str):
        return from_name(name)
    raise invalid_argument(f"purlin: {dtype!r} is not a dtype")


_INT_FORMATS = {
    DataType.INT8: "<b", DataType.UINT8: "<B", DataType.INT32: "<i", DataType.UINT32: "<I",
    DataType.INT64: "<q", DataType.UINT64: "<Q",
}
_FLOAT_FORMATS = {DataType.FLOAT32: "<f", DataType.FLOAT64: "<d"}
_MINIFLOATS = {
    DataType.FLOAT16: (minifloat.FLOAT16, "<H"),
    DataType.BFLOAT16: (minifloat.BFLOAT16, "<H"),
    DataType.FLOAT8_E4M3: (minifloat.FLOAT8_E4M3, "<B"),
    DataType.FLOAT8_E5M2: (minifloat.FLOAT8_E5M2, "<B"),
}


def scalar_bytes(value: float, dtype: DataType) -> bytes:
    """value as one element of dtype, little-endian, as the library reads a host scalar."""
    if dtype in _INT_FORMATS:
        if value != int(value):
            raise invalid_argument(f"purlin: scalar {value} is not an integer, as {dtype.name} needs")
        try:
            return struct.pack(_INT_FORMATS[dtype], int(value))
        except struct.error as exc:
            raise invalid_argument(f"purlin: scalar {value} does not fit {dtype.name}: {exc}") from None
    if dtype in _FLOAT_FORMATS:
        return struct.pack(_FLOAT_FORMATS[dtype], float(value))
    fmt, code = _MINIFLOATS[dtype]
    return struct.pack(code, minifloat.encode(float(value), fmt))
