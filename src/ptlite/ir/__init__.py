"""ptlite's torch-free IR: graphs of operator nodes with nested blocks, and the operator table."""

from .graph import Block, Graph, Node, Program, Value, ValueSpec
from .printer import format_graph, format_program
from .verifier import VerificationError, verify

__all__ = ["Block", "Graph", "Node", "Program", "Value", "ValueSpec", "format_graph", "format_program",
           "VerificationError", "verify"]
