"""Placeholder schemas for the control-flow and constant nodes the interpreter runs itself."""

from ptlite.ir.registry import kernel


def _interpreter_only(*args):
    raise RuntimeError("control-flow nodes are run by the interpreter, not called as kernels")


kernel("prim::Constant(...) -> ...", "prim::If(...) -> ...", "prim::Loop(...) -> ...")(_interpreter_only)
