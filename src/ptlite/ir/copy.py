"""Copying a program: new values, nodes, blocks and specs (edits to the copy stay there); weight arrays shared."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .graph import Block, Graph, Node, Program, Value


def copy_program(program: Program) -> Program:
    """A copy whose methods (values, nodes, blocks, specs) are new objects; weight arrays are shared."""
    copied = Program(weights=dict(program.weights), metadata=_copy_metadata(program.metadata),
                     bundled_inputs=list(program.bundled_inputs))
    for name, graph in program.methods.items():
        mapping: dict[int, Value] = {}
        inputs = [_copy_value(v, mapping) for v in graph.inputs]
        new = Graph(name, inputs, [_copy_node(n, mapping) for n in graph.nodes], [mapping[v.id] for v in graph.outputs])
        new.input_specs = [replace(s) for s in graph.input_specs]
        new.output_specs = [replace(s) for s in graph.output_specs]
        copied.methods[name] = new
    return copied


def _copy_value(v: Value, mapping: dict[int, Value]) -> Value:
    mapping[v.id] = Value(v.name, v.type, v.dtype, v.shape)
    return mapping[v.id]


def _copy_node(node: Node, mapping: dict[int, Value]) -> Node:
    inputs = [mapping[v.id] for v in node.inputs]
    blocks_ = [_copy_block(b, mapping) for b in node.blocks]
    outputs = [_copy_value(v, mapping) for v in node.outputs]
    return Node(node.op, inputs, outputs, _copy_metadata(node.attrs), blocks_, node.source)


def _copy_block(block: Block, mapping: dict[int, Value]) -> Block:
    inputs = [_copy_value(v, mapping) for v in block.inputs]
    nodes = [_copy_node(n, mapping) for n in block.nodes]
    return Block(inputs, nodes, [mapping[v.id] for v in block.outputs])


def _copy_metadata(value: Any) -> Any:
    """Copy the containers of constants and metadata (lists, dicts) so that edits to the copy stay there."""
    if isinstance(value, dict):
        return {k: _copy_metadata(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_metadata(v) for v in value]
    return value
