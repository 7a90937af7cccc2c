"""Quantized models (PyTorch's eager-mode or dynamic quantization, saved for the lite interpreter) are refused
with one error naming their quantized operators, before their packed weights (native objects) are read."""

from __future__ import annotations

import re

from ptlite.errors import UnsupportedOperatorError

from .bytecode import Function

# ATen operators that make, read or take apart quantized tensors (by name without namespace and overload).
_QUANTIZED_ATEN = re.compile(r"quantize_per_\w+|dequantize|q_\w+|int_repr|qscheme|quantized_\w+|"
                             r"_make_per_\w+_quantized_tensor|_empty_\w*quantized")


def is_quantized_operator(key: str) -> bool:
    """Whether an operator ('quantized::conv2d.new', 'aten::dequantize.self') belongs to quantized models."""
    namespace, _, name = key.partition("::")
    if namespace in ("quantized", "_quantized"):
        return True
    return namespace == "aten" and _QUANTIZED_ATEN.fullmatch(name.split(".", 1)[0]) is not None


def refuse_quantized(functions: dict[str, Function], name: str) -> None:
    """Raise one UnsupportedOperatorError naming every quantized operator the file's functions use, if any."""
    found: dict[str, list[str]] = {}
    for fn in functions.values():
        for op in fn.operators:
            if is_quantized_operator(op.key):
                found.setdefault(op.key, []).append(fn.qualname)
    if not found:
        return
    lines = [f"  {op}  (used in {', '.join(dict.fromkeys(where))})" for op, where in sorted(found.items())]
    raise UnsupportedOperatorError(
        f"{name}: a quantized model; quantized models are not supported yet. It uses {len(found)} quantized "
        "operator(s):\n" + "\n".join(lines) + "\nSave the float model (before torch.ao.quantization's prepare and "
        "convert) for the lite interpreter instead; ptlite runs it in float32.")
