"""Constant folding: compute at optimize time, with the reference backend's kernels (an evaluator handed in), every
result that is known before running, so that the device does not recompute it on every call.

A node folds when
- its operator is pure (the table's traits: no randomness, no in-place writes, no effects such as raising or
  printing; no blocks) and every input is a constant (a prim::Constant value or weight); or
- it asks about a tensor what the method's static facts answer, whatever the tensor holds (`aten::dim`,
  `aten::size`, `aten::numel`, `prim::dtype`, ... from the dtypes and shapes capture recorded and the input specs
  the runtime checks; see facts.py).
Tensor results become new weights; numbers, strings, None, and lists and tuples of them become value constants.
Nothing else has a constant form (a list of tensors, say), so such nodes stay. So does a node whose tensor results
are larger than max(its input tensors together, MAX_FOLDED_BYTES) (aten::zeros(1000, 1000) would only grow the
file), a node whose kernel raises (it may lie on a branch that is never taken), and a node whose inputs or results
may be written in place or flow through control flow (mutation.py): a constant is shared by every call.
A prim::If whose condition is constant is replaced by the nodes of the branch it takes.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ptlite import ops
from ptlite.ir.dtypes import SUPPORTED_NUMPY, scalar_type_of
from ptlite.ir.graph import Block, Graph, Node, Program, Value

from .base import NOT_CONSTANT, Pass, add_weight, blocks, constant_value, weight_of
from .facts import TensorFacts
from .mutation import Mutations, is_immutable_type

MAX_FOLDED_BYTES = 64 * 1024  # a tensor result may always be this large, or as large as the node's input tensors
MAX_FOLDED_ITEMS = 4096  # scalars (and 64-character pieces of strings) in one folded value constant


class FoldConstants(Pass):
    """`evaluate(key, args)` computes an operator's results (the reference backend's `evaluate`)."""

    name = "fold_constants"

    def __init__(self, evaluate: ops.Evaluate) -> None:
        self.evaluate = evaluate

    def run(self, graph: Graph, program: Program) -> bool:
        return _Folder(graph, program, self.evaluate).block(graph)


class _Folder:
    """Folds one method, block by block in program order, so that a folded result feeds the folds after it."""

    def __init__(self, graph: Graph, program: Program, evaluate: ops.Evaluate) -> None:
        self.graph = graph
        self.program = program
        self.evaluate_op = evaluate
        self.facts = TensorFacts(graph)
        self._mutations: Mutations | None = None

    def mutations(self) -> Mutations:
        if self._mutations is None:
            self._mutations = Mutations(self.graph)
        return self._mutations

    def block(self, block: Block) -> bool:
        changed = False
        i = 0
        while i < len(block.nodes):
            node = block.nodes[i]
            if node.op == "prim::If" and self.inline_if(block, i):
                changed = True  # the branch's nodes now start at i: fold them next
                continue
            constants = self.fold(node)
            if constants is not None:
                block.nodes[i:i + 1] = constants
                i += len(constants)
                changed = True
                continue
            for inner in node.blocks:
                changed = self.block(inner) or changed
            i += 1
        return changed

    # ------------------------------------------------------------------------------------------ prim::If

    def inline_if(self, block: Block, at: int) -> bool:
        """Replace a prim::If with a constant condition by the nodes of the branch it takes."""
        node = block.nodes[at]
        condition = constant_value(node.inputs[0])
        if not isinstance(condition, (bool, int)):
            return False
        taken = node.blocks[0] if condition else node.blocks[1]
        block.nodes[at:at + 1] = taken.nodes
        _replace_uses(self.graph, dict(zip((v.id for v in node.outputs), taken.outputs)))
        self._mutations = None  # uses moved
        return True

    # ------------------------------------------------------------------------------------------ folding

    def fold(self, node: Node) -> list[Node] | None:
        """The constant nodes to put in place of the node, or None if it stays."""
        if node.op == "prim::Constant" or node.blocks or not node.outputs:
            return None
        results, read = _answered_by_facts(node, self.facts), node.inputs[:1]
        if results is None:
            if not is_pure(node) or self.recorded_size(node.outputs) > self.size_limit(node):
                return None
            results, read = self.evaluate(node), node.inputs
        if results is None:
            return None
        forms = self.constant_forms(node, results)
        if forms is None or not self.safe(node, read):
            return None
        return [self.constant_node(node, out, form) for out, form in zip(node.outputs, forms)]

    def evaluate(self, node: Node) -> list[Any] | None:
        """The node's results from its kernel, or None if an input is not constant or the kernel raises."""
        args = []
        for v in node.inputs:
            array = weight_of(self.program, v)
            value = constant_value(v) if array is None else _read_only(array)
            if value is NOT_CONSTANT:
                return None
            args.append(value if array is not None else copy.deepcopy(value))
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = self.evaluate_op(node.op, args)
        except Exception:  # e.g. an index out of range on a branch the model never takes: leave it to run time
            return None
        if len(node.outputs) == 1 and not ops.get(node.op).unpacks:
            return [result]
        if not isinstance(result, (tuple, list)) or len(result) != len(node.outputs):
            return None
        return list(result)

    def constant_forms(self, node: Node, results: list[Any]) -> list[Any] | None:
        """Each result as a C-contiguous array (a weight to be) or a plain Python value; None if one has no
        constant form or the tensors are too large."""
        forms = []
        for out, result in zip(node.outputs, results):
            if isinstance(result, np.generic) and out.is_tensor:
                result = np.asarray(result)
            if isinstance(result, np.ndarray):
                if type(result) is not np.ndarray or result.dtype.name not in SUPPORTED_NUMPY:
                    return None
                forms.append(np.array(result, order="C", copy=True))
            elif out.is_tensor:
                return None
            else:
                value, items = _plain(result)
                if value is NOT_CONSTANT or items > MAX_FOLDED_ITEMS:
                    return None
                forms.append(value)
        result_bytes = sum(f.nbytes for f in forms if isinstance(f, np.ndarray))
        return forms if result_bytes <= self.size_limit(node) else None

    def size_limit(self, node: Node) -> int:
        """How many bytes the node's tensor results may hold together, to be folded."""
        return max(sum(a.nbytes for v in node.inputs if (a := weight_of(self.program, v)) is not None),
                   MAX_FOLDED_BYTES)

    def recorded_size(self, values: list[Value]) -> int:
        """Bytes of the tensors whose static shape capture recorded (so that a huge result is not even computed)."""
        return sum(n * np.dtype(self.facts.dtype(v) or "float64").itemsize
                   for v in values if (n := self.facts.numel(v)) is not None)

    def safe(self, node: Node, read: list[Value]) -> bool:
        """Whether the inputs the results depend on are never written in place, and the results (one object shared
        by every call, once folded) are never written or returned by the method."""
        mutable_reads = [v for v in read if not is_immutable_type(v.type)]
        mutable_results = [v for v in node.outputs if not is_immutable_type(v.type)]
        if mutable_reads and self.mutations().alias_class(mutable_reads, ignore=node).mutated:
            return False
        if mutable_results:
            found = self.mutations().alias_class(mutable_results, ignore=node)
            return not (found.mutated or found.returned)
        return True

    def constant_node(self, node: Node, out: Value, form: Any) -> Node:
        """A prim::Constant defining `out` (the same value, so its uses stay) as `form`."""
        if isinstance(form, np.ndarray):
            name = add_weight(self.program, _weight_hint(node, out), form)
            out.dtype, out.shape = form.dtype.name, tuple(form.shape)
            return Node("prim::Constant", [], [out], {"weight": name}, source=node.source)
        return Node("prim::Constant", [], [out], {"value": form}, source=node.source)


def is_pure(node: Node) -> bool:
    """Whether running the node has no effect but its results, and gives the same results for the same inputs."""
    if node.blocks or not node.outputs:
        return False
    op = ops.lookup(node.op)
    return op is not None and op.pure


# ---------------------------------------------------------------------------------------------- static facts

def _answered_by_facts(node: Node, facts: TensorFacts) -> list[Any] | None:
    """The result of a question about a tensor that the method's static facts answer, as a list of one, else None."""
    query = FACT_QUERIES.get(node.op)
    if query is None or len(node.outputs) != 1 or not node.inputs:
        return None
    answer = query(node, facts)
    return None if answer is None else [answer]


def _dtype_code(node: Node, facts: TensorFacts) -> int | None:
    dtype = facts.dtype(node.inputs[0])
    return None if dtype is None else scalar_type_of(np.dtype(dtype))


def _is_floating_point(node: Node, facts: TensorFacts) -> bool | None:
    dtype = facts.dtype(node.inputs[0])
    return None if dtype is None else np.dtype(dtype).kind == "f"


def _static_size(node: Node, facts: TensorFacts) -> list[int] | None:
    shape = facts.static_shape(node.inputs[0])
    return None if shape is None else list(shape)


def _dim_size(node: Node, facts: TensorFacts) -> int | None:
    shape, dim = facts.shape(node.inputs[0]), constant_value(node.inputs[1])
    if shape is None or type(dim) is not int or not -len(shape) <= dim < len(shape):
        return None
    return shape[dim]


def _len_of_size(node: Node, facts: TensorFacts) -> int | None:
    size = node.inputs[0].node
    return facts.rank(size.inputs[0]) if size is not None and size.op in ("aten::size", "aten::sym_size") else None


# Questions about a tensor -> how the static facts answer them (None: they do not).
FACT_QUERIES: dict[str, Callable[[Node, TensorFacts], Any]] = {
    "aten::dim": lambda node, facts: facts.rank(node.inputs[0]),
    "aten::size": _static_size,
    "aten::sym_size": _static_size,
    "aten::size.int": _dim_size,
    "aten::sym_size.int": _dim_size,
    "aten::numel": lambda node, facts: facts.numel(node.inputs[0]),
    "aten::sym_numel": lambda node, facts: facts.numel(node.inputs[0]),
    "aten::len.t": _len_of_size,
    "prim::dtype": _dtype_code,
    "aten::is_floating_point": _is_floating_point,
    "prim::device": lambda node, facts: "cpu" if node.inputs[0].is_tensor else None,  # ptlite runs on the CPU
    "prim::requires_grad": lambda node, facts: False if node.inputs[0].is_tensor else None,  # inference only
}


# ---------------------------------------------------------------------------------------------- helpers

def _plain(value: Any) -> tuple[Any, int]:
    """A kernel result as a value constant can hold it (None, bool, int, float, str, lists and tuples of them;
    NumPy scalars become Python ones) and its size in items; (NOT_CONSTANT, 0) if it has no such form."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, float)):
        return value, 1
    if isinstance(value, str):
        return value, 1 + len(value) // 64
    if type(value) in (list, tuple):
        items, total = [], 0
        for v in value:
            plain, count = _plain(v)
            if plain is NOT_CONSTANT:
                return NOT_CONSTANT, 0
            items.append(plain)
            total += count
        return type(value)(items), total
    return NOT_CONSTANT, 0


def _read_only(array: np.ndarray) -> np.ndarray:
    """A view that a kernel cannot write through (pure kernels never do; this makes sure)."""
    view = array.view()
    view.flags.writeable = False
    return view


def _weight_hint(node: Node, out: Value) -> str:
    """A name for a folded weight: 'fc.weight.t' for aten::t of the weight 'fc.weight', else 'folded.<value>'."""
    short = node.op.split("::", 1)[-1].split(".", 1)[0]
    weights = [v.node.attrs["weight"] for v in node.inputs if v.node is not None and "weight" in v.node.attrs]
    return f"{weights[0]}.{short}" if weights else f"folded.{out.name or short}"


def _replace_uses(graph: Graph, mapping: dict[int, Value]) -> None:
    """Make every use of the values whose ids are keys (node inputs, block outputs) use the mapped values."""
    for block in blocks(graph):
        for node in block.nodes:
            node.inputs = [mapping.get(v.id, v) for v in node.inputs]
        block.outputs = [mapping.get(v.id, v) for v in block.outputs]

