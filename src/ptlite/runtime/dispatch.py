"""Which backend runs each node: chosen once, when a method is compiled, so that a call pays nothing for it.

Each operator node asks the backends in order for a kernel; the first that accepts it runs it (the NumPy reference,
asked last, accepts every declared operator). Before that, each backend may claim runs of consecutive top-level
nodes to run as one step (delegates); a node claimed twice, or a claim that is not such a run, is refused.
"""

from __future__ import annotations

from collections.abc import Sequence

from ptlite import ops
from ptlite.backends.base import Backend, Delegate, Kernel
from ptlite.errors import UnsupportedOperatorError
from ptlite.ir.graph import Graph, Node, Program
from ptlite.ir.liveness import last_reads, region_values
from ptlite.ops import MODULE_STATE, OpDef


class Placement:
    """Where one operator node runs: the backend, and the delegate step it is part of (None: its own kernel)."""

    __slots__ = ("node", "backend", "delegate")

    def __init__(self, node: Node, backend: str, delegate: str | None = None) -> None:
        self.node = node
        self.backend = backend
        self.delegate = delegate

    def __repr__(self) -> str:
        return f"Placement({self.node.op}, backend={self.backend!r}" + \
            (f", delegate={self.delegate!r})" if self.delegate else ")")


class Dispatcher:
    """The backends a module runs on, in the order they are asked."""

    def __init__(self, backends: Sequence[Backend]) -> None:
        if not backends:
            raise ValueError("a dispatcher needs at least one backend")
        self.backends = list(backends)
        # Kernels chosen per operator when every backend chooses by the operator alone (Backend.per_operator).
        self._by_operator: dict[str, Kernel] | None = {} if all(b.per_operator for b in self.backends) else None

    @property
    def names(self) -> list[str]:
        return [b.name for b in self.backends]

    def kernel(self, node: Node, op: OpDef | None = None) -> Kernel:
        """The first backend's kernel that accepts the node (`op`: its operator, if the caller has it)."""
        op = op or ops.lookup(node.op)
        if op is None:
            raise UnsupportedOperatorError(f"{where(node)}: ptlite has no operator {node.op}")
        cache = self._by_operator
        if cache is not None and op.key in cache:
            return cache[op.key]
        for backend in self.backends:
            found = backend.kernel(op, node)
            if found is not None:
                if cache is not None:
                    cache[op.key] = found
                return found
        raise UnsupportedOperatorError(f"{where(node)}: none of the backends {', '.join(self.names)} has a kernel "
                                       f"for {node.op}")

    def delegates(self, graph: Graph, program: Program, kernels: dict[int, Kernel]) -> list[Delegate]:
        """The delegate steps the backends claim in the method's top-level block, checked."""
        steps = [n for n in graph.nodes if not is_template(n)]
        position = {id(n): i for i, n in enumerate(steps)}
        claimed: dict[int, str] = {}
        found = []
        last: dict[int, int] | None = None  # last_reads of the method, made for the first delegate
        for backend in self.backends:
            for delegate in backend.delegates(graph, program, kernels):
                indexes = [position.get(id(n)) for n in delegate.nodes]
                if not indexes or None in indexes or indexes != list(range(indexes[0], indexes[0] + len(indexes))):
                    raise ValueError(f"backend {backend.name}: a delegate must be consecutive top-level nodes of "
                                     f"method {graph.name} (constants aside)")
                if any(n.blocks for n in delegate.nodes):
                    raise ValueError(f"backend {backend.name}: a delegate cannot hold prim::If or prim::Loop")
                twice = [claimed[id(n)] for n in delegate.nodes if id(n) in claimed]
                if twice:
                    raise ValueError(f"backend {backend.name}: its delegate claims nodes backend {twice[0]} claimed")
                if last is None:
                    last = last_reads(graph.nodes)
                want = region_values(graph, delegate.nodes, last)
                if ([v.id for v in delegate.inputs], [v.id for v in delegate.outputs]) != \
                        ([v.id for v in want[0]], [v.id for v in want[1]]):
                    raise ValueError(f"backend {backend.name}: a delegate's inputs and outputs must be "
                                     "ptlite.ir.liveness.region_values of its nodes")
                claimed.update((id(n), backend.name) for n in delegate.nodes)
                found.append(delegate)
        return found


def where(node: Node) -> str:
    return node.op + (f" (from {node.source})" if node.source else "")


def is_template(node: Node) -> bool:
    """Nodes that become registers of the template rather than steps (constants, the module's state)."""
    return node.op in ("prim::Constant", MODULE_STATE)
