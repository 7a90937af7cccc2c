"""Quantized models saved for the lite interpreter (PyTorch's eager-mode or dynamic quantization): their quantized
operators become ptlite's int8 ones (through ptlite.format.pytorch_quantized, as when the model is captured from
TorchScript). Their packed weights were rebuilt while loading (restore.py); here the translation follows each
quantized value's scale and zero point (QuantizedOps) and turns the operators that read packed weights into int8
nodes. Flatbuffer files are refused with one error naming their quantized operators: their packed weights are
stored as native objects this reader does not read.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from ptlite.errors import UnsupportedOperatorError
from ptlite.format.pytorch_quantized import Packed, QuantizedOps
from ptlite.ir.graph import Program, Value

from .bytecode import Function, Operator
from .restore import is_packed, is_slot_name
from .values import Static

if TYPE_CHECKING:
    from .translate import Translator
    from .values import Frame

# ATen operators that make, read or take apart quantized tensors (by name without namespace and overload).
_QUANTIZED_ATEN = re.compile(r"quantize_per_\w+|dequantize|q_\w+|int_repr|qscheme|quantized_\w+|"
                             r"_make_per_\w+_quantized_tensor|_empty_\w*quantized")
# The quantized operators the translation runs, by name without overload, and the numbers of arguments each takes
# (the last when the file does not say: bytecode before version 6).
TRANSLATED = {"quantized::conv2d": (4,), "quantized::conv2d_relu": (4,), "quantized::linear": (4,),
              "quantized::linear_relu": (4,), "quantized::add": (4,), "quantized::add_relu": (4,),
              "quantized::linear_dynamic": (2, 3), "aten::quantize_per_tensor": (4,), "aten::dequantize": (1,)}


def is_quantized_operator(key: str) -> bool:
    """Whether an operator ('quantized::conv2d.new', 'aten::dequantize.self') belongs to quantized models."""
    namespace, _, name = key.partition("::")
    if namespace in ("quantized", "_quantized"):
        return True
    return namespace == "aten" and _QUANTIZED_ATEN.fullmatch(name.split(".", 1)[0]) is not None


def is_translated(key: str) -> bool:
    """Whether the translation turns this quantized operator into ptlite's int8 ones."""
    return key.partition(".")[0] in TRANSLATED


def refuse_quantized(functions: dict[str, Function], name: str) -> None:
    """Raise one UnsupportedOperatorError naming every quantized operator a flatbuffer file's functions use."""
    found: dict[str, list[str]] = {}
    for fn in functions.values():
        for op in fn.operators:
            if is_quantized_operator(op.key):
                found.setdefault(op.key, []).append(fn.qualname)
    if not found:
        return
    lines = [f"  {op}  (used in {', '.join(dict.fromkeys(where))})" for op, where in sorted(found.items())]
    raise UnsupportedOperatorError(
        f"{name}: a quantized model in a flatbuffer file; ptlite reads quantized models from zip .ptl files only. "
        f"It uses {len(found)} quantized operator(s):\n" + "\n".join(lines) + "\nSave it with "
        "_save_for_lite_interpreter() without _use_flatbuffer, or capture it: "
        "ptlite.capture(torch.jit.script(quantized_model)).")


def companion(program: Program) -> QuantizedOps:
    """The QuantizedOps of one translation of a file into `program`."""
    def add_weight(array: np.ndarray, hint: str) -> str:
        name, i = hint, 1
        while name in program.weights:
            i += 1
            name = f"{hint}_{i}"
        program.weights[name] = np.ascontiguousarray(array)
        return name

    def weight_of(v: Value) -> np.ndarray | None:
        node = v.node
        if node is None or node.op != "prim::Constant" or "weight" not in node.attrs:
            return None
        return program.weights.get(node.attrs["weight"])

    return QuantizedOps(add_weight, UnsupportedOperatorError, weight_of)


def quantized_call(tr: Translator, frame: Frame, pc: int, operator: Operator, count: int | None) -> bool:
    """OP / OPN of a quantized operator the translation runs: its int8 nodes appended, its result pushed. False
    for any other operator."""
    key = operator.key
    kind = key.partition(".")[0]
    if kind not in TRANSLATED:
        return False
    pushed = count if count is not None else operator.nsa
    if pushed is None:
        pushed = TRANSLATED[kind][-1]
    if pushed not in TRANSLATED[kind]:
        tr.fail(frame, pc, f"{key} given {pushed} arguments; it takes {' or '.join(map(str, TRANSLATED[kind]))}")
    args = tr.pop_n(frame, pushed, pc)
    source = tr.source(frame, pc)
    packed: Packed | None = None
    inputs: list[Value] = []
    for i, arg in enumerate(args):
        if isinstance(arg, Static) and is_packed(arg.obj) and i == 1:
            packed = arg.obj.state
            packed.name = packed.name or _owner(tr, arg.obj)
            inputs.append(Value(type="Any"))  # a placeholder: QuantizedOps reads the packed weights themselves
        else:
            inputs.append(tr.materialize(arg, frame.fn, pc))
    output = Value(type="Tensor")
    nodes = tr.quantized.node(kind, key, inputs, [output], source, lambda: packed)
    if nodes is None:  # aten::dequantize of a float tensor returns it
        frame.stack.append(inputs[0])
        return True
    tr.block.nodes.extend(nodes)
    frame.stack.append(output)
    return True


def reads_quantized(tr: Translator, frame: Frame, pc: int, key: str, args: list[Any], out_types: list[str]
                    ) -> bool:
    """Another operator given a quantized value (flatten, max pooling, relu...): its nodes appended (in int8, or
    in float between a dequantize and a quantize), its results pushed. False if no argument is quantized."""
    q = tr.quantized
    if not any(isinstance(a, Value) and (a.id in q.qparams or a.id in q.containers) for a in args):
        return False
    inputs = [tr.materialize(a, frame.fn, pc) for a in args]
    outputs = [Value(type=t) for t in out_types]
    nodes = tr.quantized.node(key.partition(".")[0], key, inputs, outputs, tr.source(frame, pc), lambda: None)
    if nodes is None:
        return False
    tr.block.nodes.extend(nodes)
    frame.stack.extend(outputs)
    return True


def _owner(tr: Translator, obj: Any) -> str:
    """A packed weight object's name for its weights: the path of the layer holding it ('features.0.0')."""
    path = tr.paths.get(id(obj), "")
    parts = path.split(".")
    while parts and (parts[-1] == "_packed_params" or is_slot_name(parts[-1])):
        parts.pop()
    return ".".join(parts) or "quantized"
