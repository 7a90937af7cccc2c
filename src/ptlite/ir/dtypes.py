"""Tensor element types: PyTorch's ScalarType numbering, mapped to NumPy dtypes."""

from __future__ import annotations

import numpy as np

# PyTorch's c10::ScalarType enumeration (the integers TorchScript and .ptl files use for dtype arguments).
SCALAR_TYPES: dict[int, str] = {
    0: "uint8",
    1: "int8",
    2: "int16",
    3: "int32",
    4: "int64",
    5: "float16",
    6: "float32",
    7: "float64",
    11: "bool",
    15: "bfloat16",
}
SCALAR_TYPE_OF: dict[str, int] = {name: code for code, name in SCALAR_TYPES.items()}

# Names as PyTorch prints them (torch.float32 -> "float32"); a few aliases.
_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "long": "int64", "int": "int32",
            "short": "int16", "char": "int8", "byte": "uint8"}

SUPPORTED_NUMPY = {"uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "bool"}


def normalize_dtype_name(name: str) -> str:
    """Return ptlite's canonical name for a dtype name such as 'torch.float' or 'float32'."""
    name = str(name)
    if name.startswith("torch."):
        name = name[len("torch."):]
    return _ALIASES.get(name, name)


def to_numpy(dtype: int | str | None) -> np.dtype:
    """NumPy dtype for a ScalarType code or dtype name (None means float32, PyTorch's default)."""
    if dtype is None:
        return np.dtype(np.float32)
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        if int(dtype) not in SCALAR_TYPES:
            raise ValueError(f"unknown ScalarType code {dtype}")
        name = SCALAR_TYPES[int(dtype)]
    else:
        name = normalize_dtype_name(dtype)
    if name not in SUPPORTED_NUMPY:
        raise ValueError(f"dtype {name} has no NumPy equivalent that ptlite supports")
    return np.dtype(name)


def scalar_type_of(array_or_dtype) -> int:
    """ScalarType code of a NumPy array or dtype."""
    dt = getattr(array_or_dtype, "dtype", array_or_dtype)
    name = np.dtype(dt).name
    if name not in SCALAR_TYPE_OF:
        raise ValueError(f"NumPy dtype {name} has no PyTorch ScalarType")
    return SCALAR_TYPE_OF[name]
