"""Structural checks on the IR: every value defined before use, known operators, control-flow shape."""

from __future__ import annotations

from ptlite import ops
from ptlite.ops import MODULE_STATE

from .graph import Block, Graph, Node, Program
from .memory_plan import plan_problems


class VerificationError(ValueError):
    """The IR breaks one of its invariants; the message lists every problem found."""


def _where(node: Node) -> str:
    return f"{node.op}" + (f" ({node.source})" if node.source else "")


# Nodes the interpreter turns into one register of its template instead of a step.
_SINGLE_VALUE = ("prim::Constant", MODULE_STATE)


def _check_node(node: Node, scope: set[int], program: Program, problems: list[str], check_ops: bool) -> None:
    for v in node.inputs:
        if v.id not in scope:
            problems.append(f"{_where(node)}: input {v!r} is used before it is defined")
    if node.op in _SINGLE_VALUE and (node.inputs or len(node.outputs) != 1):
        problems.append(f"{_where(node)}: takes no inputs and defines one value, not {len(node.inputs)} and "
                        f"{len(node.outputs)}")
    if node.op == "prim::Constant":
        if "weight" in node.attrs and node.attrs["weight"] not in program.weights:
            problems.append(f"{_where(node)}: weight {node.attrs['weight']!r} is missing from the program")
    elif node.op == "prim::If":
        if len(node.blocks) != 2 or len(node.inputs) != 1:
            problems.append(f"{_where(node)}: needs one condition and two blocks")
        for b in node.blocks:
            if len(b.outputs) != len(node.outputs):
                problems.append(f"{_where(node)}: a branch returns {len(b.outputs)} values, the node has "
                                f"{len(node.outputs)}")
    elif node.op == "prim::Loop":
        if len(node.blocks) != 1 or len(node.inputs) < 2:
            problems.append(f"{_where(node)}: needs a trip count, a condition and one body block")
        else:
            body, carried = node.blocks[0], len(node.inputs) - 2
            if len(body.inputs) != carried + 1 or len(body.outputs) != carried + 1 or len(node.outputs) != carried:
                problems.append(f"{_where(node)}: body inputs/outputs do not match {carried} carried values")
    else:
        if node.blocks:  # a kernel never runs blocks: they would be dead code that liveness still walks
            problems.append(f"{_where(node)}: only prim::If and prim::Loop hold blocks, this node has "
                            f"{len(node.blocks)}")
        op = ops.lookup(node.op)
        if op is None:
            if check_ops:
                problems.append(f"{_where(node)}: unknown operator")
        elif not op.variadic and len(node.inputs) != len(op.argument_texts):
            problems.append(f"{_where(node)}: {len(node.inputs)} inputs, schema {op.schema} takes "
                            f"{len(op.argument_texts)}")
        elif check_ops and (problem := argument_problem(node, op)):
            problems.append(f"{_where(node)}: {problem}")
    for block in node.blocks:
        _check_block(block, set(scope), program, problems, check_ops)
    for out in node.outputs:
        if out.id in scope:
            problems.append(f"{_where(node)}: output {out!r} is defined twice")
        scope.add(out.id)


def _check_block(block: Block, scope: set[int], program: Program, problems: list[str], check_ops: bool) -> None:
    scope.update(v.id for v in block.inputs)
    for node in block.nodes:
        _check_node(node, scope, program, problems, check_ops)
    for v in block.outputs:
        if v.id not in scope:
            problems.append(f"block output {v!r} is not defined in the block")


def verify_graph(graph: Graph, program: Program, check_operators: bool = True) -> list[str]:
    """Problems found in one method (empty if none), its memory plan's buffers included. With
    check_operators=False, operators missing from the table are not reported (the loader reports them itself,
    all together, with a fix)."""
    problems: list[str] = []
    _check_block(graph, set(), program, problems, check_operators)
    problems.extend(plan_problems(graph, program))
    return problems


def unknown_operators(program: Program, graphs: list[Graph] | None = None) -> dict[str, list[str]]:
    """Operators the program uses that the operator table does not declare, each with where it is used (default:
    in every method)."""
    unknown: dict[str, list[str]] = {}
    for graph in graphs if graphs is not None else program.methods.values():
        for node in graph.walk():
            if node.op != "prim::Constant" and ops.lookup(node.op) is None:  # (constants: the most common node)
                unknown.setdefault(node.op, []).append(node.source or f"method {graph.name}")
    return unknown


def argument_problem(node: Node, op: ops.OpDef, ranks: dict[int, int] | None = None) -> str | None:
    """What the operator table says ptlite's kernels cannot take among the node's arguments, as far as they are known
    before running (a dtype outside its @dtypes, a first tensor argument of a rank outside its @ranks), or None.
    `ranks`: ranks known for values whose shape is not recorded (a method's inputs, from their specs), by value id."""
    if op.dtypes is not None:
        bad = [v for v in node.inputs if v.dtype is not None and v.dtype not in op.dtypes and v.is_tensor]
        if bad:
            return f"input {bad[0]!r} is {bad[0].dtype}; the operator takes {', '.join(sorted(op.dtypes))} tensors"
    if op.ranks is not None:
        first = next((v for v in node.inputs if v.is_tensor), None)
        rank = None if first is None else len(first.shape) if first.shape is not None else (ranks or {}).get(first.id)
        if rank is not None and rank not in op.ranks:
            return (f"its input {first!r} has {rank} dimensions; ptlite runs {node.op} on "
                    f"{' or '.join(f'{r}-D' for r in sorted(op.ranks))} inputs")
    return None


def unsupported_uses(program: Program, graphs: list[Graph] | None = None) -> dict[str, list[str]]:
    """Nodes of declared operators whose arguments ptlite's kernels cannot take (`argument_problem`), by operator:
    "where: why" for each, in every method (default)."""
    found: dict[str, list[str]] = {}
    for graph in graphs if graphs is not None else program.methods.values():
        ranks = {v.id: len(spec.shape) for v, spec in zip(graph.inputs, graph.input_specs)
                 if spec.type == "Tensor" and spec.shape is not None}
        for node in graph.walk():
            if node.op != "prim::Constant" and (op := ops.lookup(node.op)) is not None \
                    and (problem := argument_problem(node, op, ranks)):
                found.setdefault(node.op, []).append(f"{node.source or f'method {graph.name}'}: {problem}")
    return found


def verify(program: Program) -> None:
    """Raise VerificationError listing every problem in the program's methods."""
    problems = [f"{name}: {p}" for name, g in program.methods.items() for p in verify_graph(g, program)]
    if problems:
        raise VerificationError("invalid ptlite program:\n  " + "\n  ".join(problems))
