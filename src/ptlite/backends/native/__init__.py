"""The native backend: ptlite's compiled CPU kernels (C, SIMD chosen at run time), behind the NumPy reference.

Its library (`_native`, built from csrc/ by `pip install`) has convolution (dense by an indirection-buffer GEMM
with the bias and activation fused, 1x1 as a plain GEMM, depthwise), linear layers, pooling, elementwise
arithmetic and activations, all float32 and channels-last. Kernels for the operators it runs are in kernels.py;
a node it cannot run (another dtype, grouped convolution, an operator it has no kernel for) goes to the NumPy
reference, per call where only the arguments tell. Where a method has a memory plan, runs of nodes it takes
completely become one step each (executor.py: one call into C over the planned arena). Its lowering (lower/) is the
reference's prepacking and activation fusion plus panel-packed dense weights, without the NumPy-only fused blocks
and Winograd.

    ptlite.backends()    # [BackendInfo(name='native', available=True, detail='... avx2 ...'), ...]
    ptlite.load(path, backends=("numpy",))   # the reference alone
"""

from __future__ import annotations

import os
from typing import Any

from ptlite import ops
from ptlite.backends import BackendUnavailable
from ptlite.backends.base import Backend, Delegate, Kernel
from ptlite.ir.graph import Graph, Node, Program
from ptlite.ops import OpDef

__all__ = ["NativeBackend", "OPERATORS", "create", "library", "set_num_threads"]

FAILURE_FILE = os.path.join(os.path.dirname(__file__), "_build_failure.txt")

# Every operator with a native kernel -> the module that registers it (kernels.py imports elementwise.py, whose
# kernels are its own). A module is imported when a node first needs one of its kernels: a load whose nodes all run
# in the executor's regions imports none of them (tests/backends/native/test_backend.py checks this table against
# the registrations).
OPERATORS: dict[str, str] = {
    **dict.fromkeys((
        "aten::_add_relu.Tensor", "aten::_add_relu_.Tensor", "aten::_reshape_alias", "aten::_unsafe_view",
        "aten::adaptive_avg_pool2d", "aten::add.Scalar", "aten::add.Tensor", "aten::add_.Tensor", "aten::avg_pool2d",
        "aten::cat", "aten::constant_pad_nd", "aten::contiguous", "aten::div.Scalar", "aten::div.Tensor", "aten::erf",
        "aten::expand", "aten::flatten.using_ints", "aten::gelu", "aten::hardsigmoid", "aten::hardswish",
        "aten::hardtanh", "aten::max_pool2d", "aten::mean.dim", "aten::mul.Scalar", "aten::mul.Tensor", "aten::narrow",
        "aten::numpy_T", "aten::pad", "aten::permute", "aten::relu", "aten::relu6", "aten::reshape", "aten::select.int",
        "aten::sigmoid", "aten::silu", "aten::slice.Tensor", "aten::squeeze", "aten::squeeze.dim", "aten::squeeze.dims",
        "aten::sub.Scalar", "aten::sub.Tensor", "aten::sum.dim_IntList", "aten::t", "aten::tanh", "aten::transpose.int",
        "aten::unflatten.int", "aten::unsqueeze", "aten::upsample_bilinear2d", "aten::upsample_bilinear2d.vec",
        "aten::view", ops.CONV2D_PACKED, ops.CONV2D_PACKED_GATED, ops.CONV2D_POINTWISE_DEPTHWISE, ops.CONV2D_PREPACKED,
        ops.CONV2D_WINOGRAD_2X2, ops.CONV2D_WINOGRAD_V2, ops.LINEAR_PACKED, ops.LINEAR_PREPACKED), "kernels"),
    **dict.fromkeys(("aten::softmax.int", "aten::_softmax", "aten::layer_norm", "aten::scaled_dot_product_attention",
                     "aten::matmul", "aten::mm"), "attention"),
    **dict.fromkeys(("aten::lstm.input", "aten::gru.input", "aten::rnn_tanh.input", "aten::rnn_relu.input"),
                    "recurrent"),
    **dict.fromkeys((ops.CONV2D_INT8, ops.LINEAR_INT8, ops.ADD_INT8, ops.QUANTIZE_PER_TENSOR,
                     ops.DEQUANTIZE_PER_TENSOR), "quantized"),
}


_threads_given = False  # the library has been given its thread count (the default, or set_num_threads's)


def library() -> Any:
    """The compiled library (ptlite.backends.native._native); BackendUnavailable saying why it is missing. The first
    time, its pool is given ptlite's default thread count (the CPUs this process may use: ptlite.backends.cpus), for
    the C side's own default, `sysconf(_SC_NPROCESSORS_ONLN)` in csrc/threads.c, counts the host's CPUs."""
    global _threads_given
    try:
        from . import _native
    except ImportError as exc:
        raise BackendUnavailable(_why_missing(exc)) from None
    if not _threads_given:
        from ptlite.backends.cpus import default_num_threads

        _native.set_num_threads(default_num_threads())
        _threads_given = True
    return _native


def set_num_threads(n: int) -> None:
    """Threads the native kernels use (the calling thread included); nothing where the library is missing. The
    default is ptlite.backends.cpus.default_num_threads() (see library)."""
    try:
        lib = library()
    except BackendUnavailable:
        return
    lib.set_num_threads(n)


def _why_missing(exc: ImportError) -> str:
    try:
        with open(FAILURE_FILE, encoding="utf-8") as f:
            reason = f.read().strip()
        return f"its C library was not built at install ({reason}); reinstall ptlite with a C compiler to get it"
    except OSError:
        return f"its C library cannot be imported ({exc}); reinstall ptlite with a C compiler to build it"


class NativeBackend(Backend):
    name = "native"
    per_operator = True  # kernel() answers by the operator alone (its kernels decline per call, to the reference)
    lowering_module = "ptlite.backends.native.lower"

    def __init__(self, lib: Any, executor: bool = True) -> None:
        self.lib = lib
        self.executor = executor  # run planned regions in one call each (executor.py); else node by node
        self._kernels: dict[str, Kernel | None] = {}

    def kernel(self, op: OpDef, node: Node | None = None) -> Kernel | None:
        if op.key not in self._kernels:
            self._kernels[op.key] = _Deferred(op.key, self.name, op.out) if op.key in OPERATORS else None
        return self._kernels[op.key]

    def delegates(self, graph: Graph, program: Program, kernels: dict[int, Kernel]) -> list[Delegate]:
        """The method's regions that the whole-graph executor runs in one call each (where it has a memory plan)."""
        if not self.executor:
            return []
        from .executor import delegates

        return delegates(self.name, graph, program, kernels)

    def set_num_threads(self, n: int) -> None:
        self.lib.set_num_threads(n)

    def describe(self) -> str:
        return f"compiled kernels, {self.lib.isa()}, int8 GEMM on {self.lib.qgemm_kernel()} " \
               f"({self.lib.get_num_threads()} threads)"


class _Deferred(Kernel):
    """A native kernel whose module (OPERATORS) is imported when its function is first asked for."""

    __slots__ = ("key", "_fn")

    def __init__(self, key: str, backend: str, accepts_out: bool) -> None:
        self.key, self._fn = key, None
        self.backend = backend
        self.accepts_out = accepts_out

    @property
    def fn(self) -> Any:
        if self._fn is None:
            from .kernels import kernel_for

            self._fn = kernel_for(self.key)
        return self._fn


def create() -> NativeBackend:
    if os.environ.get("PTLITE_DISABLE_NATIVE"):
        raise BackendUnavailable("disabled by the PTLITE_DISABLE_NATIVE environment variable")
    return NativeBackend(library())
