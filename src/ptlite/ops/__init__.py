"""The operator table: every operator ptlite knows, with its schema and traits, and no kernel.

Capture's unsupported-operator check, the verifier, the passes, the `.ptl` translator, `export_opnames` and the
runtime's missing-operator check read this table; backends register kernels for the operators it declares.

Operators are declared by family, one module each (`ptlite/ops/activation.py`, ...): a `DECLARATIONS` text with one
schema a line (a line starting with spaces continues the one before), each followed by its traits (`@out`,
`@effects`, ...: `opdef.TRAITS`). ptlite's own operators (`ptlite::...`) are declared there too, and named here by
constants (`ops.CONV2D_PREPACKED`) that the code emitting and running them uses. Lookups read the generated `_table.py`
(every family's declarations in one module, so that a lookup imports one module, not a family each); after editing
a declaration run `python -m ptlite.ops --write-table` (tests/ops/test_table.py fails until then).

    op = ops.lookup("aten::relu")      # OpDef, or None if ptlite has no such operator
    op.schema.arguments, op.pure, op.out, op.writes
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .opdef import TRAITS, OpDef, key_of

__all__ = ["OpDef", "Schema", "Argument", "TRAITS", "lookup", "get", "all_ops", "overloads", "declare", "families",
           "parse_schema", "key_of", "TABLE_COMMAND", "Evaluate"]

TABLE_COMMAND = "python -m ptlite.ops --write-table"

# ptlite's own operators, by the names the code emitting and running them uses; each is declared (schema, traits)
# in the family module named beside it.
CONV2D_POINTWISE_DEPTHWISE = "ptlite::conv2d_pointwise_depthwise"  # ops/conv_block.py
CONV2D_PACKED = "ptlite::conv2d_packed"  # ops/packed.py
CONV2D_PACKED_GATED = "ptlite::conv2d_packed_gated"  # ops/packed.py
LINEAR_PACKED = "ptlite::linear_packed"  # ops/packed.py
CONV2D_PREPACKED = "ptlite::conv2d_prepacked"  # ops/prepacked.py
LINEAR_PREPACKED = "ptlite::linear_prepacked"  # ops/prepacked.py
QUANTIZE_PER_TENSOR = "ptlite::quantize_per_tensor"  # ops/quantized.py
DEQUANTIZE_PER_TENSOR = "ptlite::dequantize_per_tensor"  # ops/quantized.py
DEQUANTIZE_PER_CHANNEL = "ptlite::dequantize_per_channel"  # ops/quantized.py
CONV2D_INT8 = "ptlite::conv2d_int8"  # ops/quantized.py
LINEAR_INT8 = "ptlite::linear_int8"  # ops/quantized.py
ADD_INT8 = "ptlite::add_int8"  # ops/quantized.py
LINEAR_DYNAMIC_INT8 = "ptlite::linear_dynamic_int8"  # ops/quantized.py
LSTM_DYNAMIC_INT8 = "ptlite::lstm_dynamic_int8"  # ops/quantized.py
EMBEDDING_INT8 = "ptlite::embedding_int8"  # ops/quantized.py
GRU_DYNAMIC_INT8 = "ptlite::gru_dynamic_int8"  # ops/quantized.py
CREATE_OBJECT = "ptlite::create_object"  # ops/objects.py
ISINSTANCE = "ptlite::isinstance"  # ops/script_types.py
SQUEEZE_EXCITE = "ptlite::squeeze_excite"  # ops/squeeze_excite.py
GET_ATTR = "ptlite::get_attr"  # ops/state.py
MODULE_STATE = "ptlite::module_state"  # ops/state.py
SET_ATTR = "ptlite::set_attr"  # ops/state.py
CONV2D_WINOGRAD = "ptlite::conv2d_winograd"  # ops/winograd.py
CONV2D_WINOGRAD_V2 = "ptlite::conv2d_winograd_v2"  # ops/winograd.py
CONV2D_WINOGRAD_2X2 = "ptlite::conv2d_winograd_2x2"  # ops/winograd.py

# Computes an operator's results from its arguments: evaluate("aten::add.Tensor", [a, b, 1]). Compile-time
# evaluation (constant folding, the .ptl translator) is handed one: the reference backend's kernels.
Evaluate = Callable[[str, Sequence[Any]], Any]

_ROWS: dict[str, OpDef] = {}  # the rows looked up so far, and every declared one once all_ops() has run
_DECLARED: dict[str, OpDef] = {}  # operators declared at run time (declare), by key
_COMPLETE = False  # _ROWS holds every row


def __getattr__(name: str) -> Any:
    """The schema parser's names (Schema, Argument, parse_schema), imported when first asked for: a load needs
    none of them."""
    if name in ("Schema", "Argument", "parse_schema"):
        from . import schema

        return getattr(schema, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def lookup(key: str) -> OpDef | None:
    """The row of an operator by its key ('aten::add.Tensor', 'aten::relu'), or None if it is not declared."""
    op = _ROWS.get(key)
    if op is None and not _COMPLETE:
        op = _DECLARED.get(key) or _find(key)
        if op is not None:
            _ROWS[key] = op
    return op


def get(key: str) -> OpDef:
    """Like `lookup`, but raises KeyError naming the operator."""
    op = lookup(key)
    if op is None:
        raise KeyError(f"ptlite has no operator {key}")
    return op


def all_ops() -> dict[str, OpDef]:
    """Every declared operator, by key."""
    global _COMPLETE
    if not _COMPLETE:
        from ._table import FAMILIES

        for family, text in FAMILIES.items():
            for line in text.splitlines():
                if line:
                    op = OpDef.parse(line, family)
                    _ROWS.setdefault(op.key, op)
        _ROWS.update(_DECLARED)
        _COMPLETE = True
    return dict(_ROWS)


def overloads(name: str) -> list[OpDef]:
    """Every overload of an operator name such as 'aten::add'."""
    return [op for op in all_ops().values() if op.schema.name == name]


def families() -> list[str]:
    """The declaration families, in the table's order (ptlite/ops/<family>.py each)."""
    from ._table import FAMILIES

    return list(FAMILIES)


def declare(schema_text: str, traits: tuple[str, ...] = (), family: str = "user") -> str:
    """Declare an operator of your own (an extension: give a backend a kernel for it with that backend's
    registration, e.g. `ptlite.backends.numpy.kernel`); returns its key. Declaring the same schema and traits again
    is allowed; anything else under a declared key raises ValueError."""
    op = OpDef.parse(schema_text + "".join(f" @{t}" for t in traits), family)
    known = lookup(op.key)
    if known is not None:
        if (known.schema_text, known.traits, known.dtypes) != (op.schema_text, op.traits, op.dtypes):
            raise ValueError(f"operator {op.key} is declared already, as {known.schema_text!r} (family "
                             f"{known.family})")
        return op.key
    _DECLARED[op.key] = _ROWS[op.key] = op
    return op.key


def _find(key: str) -> OpDef | None:
    """The table's row for a key, found by searching the generated table's text (a line per operator, starting
    with its key and the schema's "("): a program looks up a few dozen keys, which costs less than parsing all."""
    from ._table import FAMILIES

    needle = f"\n{key}("
    for family, text in FAMILIES.items():
        start = text.find(needle)
        if start >= 0:
            end = text.find("\n", start + 1)
            return OpDef.parse(text[start + 1:end], family)
    return None


def required_version(keys: Sequence[str]) -> tuple[str, list[str]]:
    """The ptlite version a program using these operators needs (the newest of their `@since`), and the operators
    that need exactly it (none when it is the first release). Undeclared keys count as the first release: the loader
    names them as missing instead."""
    from ptlite.version import version_key

    from .opdef import FIRST_VERSION

    found = [(op.since, key) for key in keys if (op := lookup(key)) is not None]
    newest = max((since for since, _ in found), key=version_key, default=FIRST_VERSION)
    if version_key(newest) <= version_key(FIRST_VERSION):
        return FIRST_VERSION, []
    return newest, sorted(key for since, key in found if since == newest)
