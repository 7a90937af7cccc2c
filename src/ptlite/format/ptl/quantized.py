"""Quantized models (PyTorch's eager-mode or dynamic quantization, saved for the lite interpreter) are refused
with one error naming their quantized operators, before their packed weights (native objects) are read: their
convolutions rebuild their packed weights in __setstate__ bytecode (quantized::conv2d_prepack), which the reader
does not run yet. The same models captured from TorchScript run in int8 (ptlite.frontend.torch_quantized)."""

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
        f"{name}: a quantized model; ptlite does not read quantized .ptl files yet. It uses {len(found)} quantized "
        "operator(s):\n" + "\n".join(lines) + "\nWhere you have the model, capture it instead: "
        "ptlite.capture(torch.jit.script(quantized_model)) runs PyTorch's quantized operators in int8 (or "
        "`ptlite convert` the scripted model); or quantize the float model with ptlite.quantize.")
