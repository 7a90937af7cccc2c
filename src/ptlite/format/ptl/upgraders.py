"""Operator upgraders: files written before an operator changed meaning (operator version below 10) get the old
meaning back, as PyTorch's loader does with `torch/csrc/jit/mobile/upgrader_mobile.cpp`.

| operators | versions | old meaning |
|---|---|---|
| `div.Tensor`, `div.Scalar`, `div_.Tensor`, `div_.Scalar` | 0-3 | integer inputs divide with truncation |
| `gelu` | 0-9 | no `approximate` argument (the schema default 'none' is filled in) |
| `linspace`, `logspace` | 0-7, 0-8 | `steps` optional, None meaning 100 |

Instead of calling upgrader bytecode, the translation writes the old meaning as IR (a prim::If on the operands'
types for div).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CURRENT_OPERATOR_VERSION = 10


@dataclass(frozen=True)
class Upgrader:
    """How one operator is read from files of operator version <= max_version."""

    max_version: int
    old_arity: int  # arguments the old schema had (what bytecode 4/5 files push)
    steps_index: int | None = None  # linspace/logspace: position of the once optional 'steps'
    rewrite: Callable[..., None] | None = None  # emits the old meaning instead of the operator

    def adapt_arguments(self, args: list[Any], make_const: Callable[[Any], Any]) -> list[Any]:
        """Arguments in the current schema's form (a missing or None 'steps' becomes 100)."""
        if self.steps_index is None:
            return args
        args = list(args)
        if len(args) == self.steps_index:
            args.append(make_const(100))
        elif len(args) > self.steps_index:
            steps = args[self.steps_index]
            if getattr(steps, "value", 0) is None and not getattr(steps, "uninitialized", False):
                args[self.steps_index] = make_const(100)
        return args


def _old_div(mode_key: str) -> Callable[..., None]:
    """div of operator version <= 3: true division if either operand is floating point, else truncation."""

    def rewrite(tr: Any, frame: Any, pc: int, key: str, args: list[Any]) -> None:
        a, b = args[0], args[1]
        b_type = getattr(b, "type", "Any")
        if b_type == "float":
            tr.apply(frame, pc, key, args, None)
            return
        if b_type not in ("Tensor", "int", "bool"):
            tr.fail(frame, pc, f"{key} from a file of operator version <= 3 divides by a value of type {b_type}; "
                               "ptlite cannot tell integer from float division for it", unsupported=True)
        (a_float,) = tr.emit(frame, pc, "aten::is_floating_point", [a], ["bool"])
        cond = a_float
        if b_type == "Tensor":
            (b_float,) = tr.emit(frame, pc, "aten::is_floating_point", [b], ["bool"])
            (cond,) = tr.emit(frame, pc, "aten::__or__.bool", [a_float, b_float], ["bool"])

        def true_division() -> list[Any]:
            return tr.emit(frame, pc, key, [a, b], ["Tensor"])

        def truncation() -> list[Any]:
            return tr.emit(frame, pc, mode_key, [a, b, tr.const("trunc")], ["Tensor"])

        frame.stack.extend(tr.emit_if(frame, pc, cond, [true_division, truncation], ["Tensor"]))

    return rewrite


_UPGRADERS: dict[str, Upgrader] = {
    "aten::div.Tensor": Upgrader(3, 2, rewrite=_old_div("aten::div.Tensor_mode")),
    "aten::div.Scalar": Upgrader(3, 2, rewrite=_old_div("aten::div.Scalar_mode")),
    "aten::div_.Tensor": Upgrader(3, 2, rewrite=_old_div("aten::div_.Tensor_mode")),
    "aten::div_.Scalar": Upgrader(3, 2, rewrite=_old_div("aten::div_.Scalar_mode")),
    "aten::gelu": Upgrader(9, 1),
    "aten::linspace": Upgrader(7, 7, steps_index=2),
    "aten::logspace": Upgrader(8, 8, steps_index=2),
}


def find(key: str, operator_version: int) -> Upgrader | None:
    """The upgrader that applies to operator `key` in a file of this operator version, if any."""
    if operator_version >= CURRENT_OPERATOR_VERSION:
        return None
    upgrader = _UPGRADERS.get(key)
    return upgrader if upgrader is not None and operator_version <= upgrader.max_version else None
