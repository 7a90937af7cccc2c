"""Text form of the IR, in the style of TorchScript's graph printer."""

from __future__ import annotations

from .graph import Block, Graph, Node, Program, Value


def _value(v: Value) -> str:
    return f"%{v.name}" if v.name else f"%_{v.id}"


def _typed(v: Value) -> str:
    ty = v.type
    if v.is_tensor and (v.dtype or v.shape is not None):
        dims = "" if v.shape is None else "[" + ", ".join("?" if d is None else str(d) for d in v.shape) + "]"
        ty = f"Tensor({v.dtype or '?'}{dims})"
    return f"{_value(v)} : {ty}"


def _const(node: Node) -> str:
    if "weight" in node.attrs:
        return f"[weight={node.attrs['weight']}]"
    return f"[value={node.attrs.get('value')!r}]"


def _node_lines(node: Node, indent: str) -> list[str]:
    outs = ", ".join(_typed(v) for v in node.outputs)
    args = ", ".join(_value(v) for v in node.inputs)
    attrs = _const(node) if node.op == "prim::Constant" else ""
    lhs = f"{outs} = " if outs else ""
    lines = [f"{indent}{lhs}{node.op}{attrs}({args})" + (f"  # {node.source}" if node.source else "")]
    for i, block in enumerate(node.blocks):
        lines.extend(_block_lines(block, indent + "  ", f"block{i}"))
    return lines


def _block_lines(block: Block, indent: str, label: str) -> list[str]:
    params = ", ".join(_typed(v) for v in block.inputs)
    lines = [f"{indent}{label}({params}):"]
    for node in block.nodes:
        lines.extend(_node_lines(node, indent + "  "))
    lines.append(f"{indent}  -> ({', '.join(_value(v) for v in block.outputs)})")
    return lines


def format_graph(graph: Graph) -> str:
    """The graph as text: one node a line, nested blocks indented."""
    params = ", ".join(_typed(v) for v in graph.inputs)
    lines = [f"graph {graph.name}({params}):"]
    for node in graph.nodes:
        lines.extend(_node_lines(node, "  "))
    lines.append(f"  return ({', '.join(_value(v) for v in graph.outputs)})")
    return "\n".join(lines)


def format_program(program: Program) -> str:
    """Every method of the program, then a summary of its weights."""
    parts = [format_graph(g) for g in program.methods.values()]
    nbytes = sum(w.nbytes for w in program.weights.values())
    parts.append(f"# {len(program.weights)} weights, {nbytes} bytes")
    return "\n\n".join(parts)
