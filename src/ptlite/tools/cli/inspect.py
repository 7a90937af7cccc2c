"""`ptlite ops` and `ptlite inspect`: what a .ptlite file holds, needs and runs on."""

from __future__ import annotations

import argparse
import collections
import os
import warnings
from typing import Any

import numpy as np

import ptlite
from ptlite import ops
from ptlite.ir.weights import FLOAT16_KEY
from ptlite.quantization import describe
from ptlite.tools.errors import ToolError
from ptlite.tools.models import recorded_source

from .options import add_backend_option, human_bytes, load_program


def add_parser(commands: Any) -> None:
    ops_parser = commands.add_parser(
        "ops", help="list the operators a .ptlite or .ptl file uses, or those this ptlite runs (--supported)",
        description="Print the operators the program uses (ptlite.export_opnames), one a line; with "
                    "--yaml as the YAML list that PyTorch's selective build takes (like "
                    "torch.jit.mobile._export_operator_list). With --supported, the operators each backend "
                    "here has kernels for (ptlite.backends.supported_operators), sorted, with counts; with a MODEL "
                    "too, a table of which backend runs each of its operators.")
    ops_parser.add_argument("model", metavar="MODEL", nargs="?", help="a .ptlite or .ptl file")
    ops_parser.add_argument("--yaml", action="store_true",
                            help="print a YAML list (with --supported: a YAML mapping of backend to operators)")
    ops_parser.add_argument("--supported", action="store_true",
                            help="the operators each backend runs (the native backend a subset, the NumPy "
                                 "reference all of them); with MODEL, only the model's")
    ops_parser.set_defaults(handler=list_operators)

    parser = commands.add_parser(
        "inspect", help="describe a .ptlite or .ptl file: methods, operators, weights, what it carries",
        description="Describe a .ptlite file (or a PyTorch Mobile .ptl file, as translated): its methods with their "
                    "inputs and outputs, how many times each operator is used, its weights, how it was made, and "
                    "what it carries for the app (preprocessing, labels, bundled inputs).")
    parser.add_argument("model", metavar="MODEL", help="a .ptlite file, or a PyTorch Mobile .ptl file")
    parser.add_argument("--graph", action="store_true", help="also print the program's IR")
    add_backend_option(parser)
    parser.set_defaults(handler=run)


def list_operators(args: argparse.Namespace) -> int:
    if args.supported:
        return _list_supported(args)
    if args.model is None:
        raise ToolError("give a MODEL whose operators to list, or --supported for the operators this ptlite runs")
    names = ptlite.export_opnames(load_program(args.model))
    if args.yaml:
        print("\n".join(f"- {name}" for name in names) if names else "[]")
    else:
        print("\n".join(names))
    return 0


def _list_supported(args: argparse.Namespace) -> int:
    """`ptlite ops --supported [MODEL]`: per backend, the operators it has kernels for (only the model's, as a table,
    where one is given)."""
    program = None if args.model is None else load_program(args.model)
    wanted = None if program is None else ptlite.export_opnames(program)
    lists: dict[str, list[str]] = {}
    notes: dict[str, str] = {}
    for info in ptlite.backends():
        if info.available:
            names = ptlite.backends.supported_operators(info.name)
            lists[info.name] = names if wanted is None else sorted(set(names) & set(wanted))
            notes[info.name] = info.detail
        else:
            notes[info.name] = f"not available here: {info.detail}"
    if args.yaml:
        for name in lists:
            print(f"{name}:" + ("".join(f"\n- {op}" for op in lists[name]) if lists[name] else " []"))
        return 0
    if program is not None:
        _print_support_table(args.model, wanted, lists, notes)
        if not program.lowered_for:
            print("note: the program is not optimized; ptlite.load optimizes a .ptl file for the first backend, and "
                  "its operators then differ (prepacked convolutions and linear layers): 'ptlite convert' makes "
                  "the optimized .ptlite file to list")
        return 0
    for info in ptlite.backends():
        if info.name not in lists:
            print(f"{info.name}: {notes[info.name]}")
            continue
        print(f"{info.name}: {len(lists[info.name])} operators ({notes[info.name]})")
        for op in lists[info.name]:
            print(f"  {op}")
    print("A backend may still decline a node of an operator it lists (another dtype or layout than its kernel's): "
          "the next backend runs it, the NumPy reference last. The interpreter itself runs prim::Constant, "
          "prim::If, prim::Loop and ptlite::module_state.")
    return 0


def _print_support_table(model: str, wanted: list[str], lists: dict[str, list[str]], notes: dict[str, str]) -> None:
    """Which backend has a kernel for each of a model's operators: one row an operator, one column a backend."""
    print(f"{model}: {len(wanted)} operators")
    for name, names in lists.items():
        print(f"  {name}: {len(names)} of {len(wanted)} ({notes[name]})")
    for name, note in notes.items():
        if name not in lists:
            print(f"  {name}: {note}")
    if not wanted:
        return
    width = max(len(op) for op in wanted)
    columns = list(lists)
    print(f"{'operator':<{width}}  " + "  ".join(columns))
    have = {name: set(names) for name, names in lists.items()}
    for op in wanted:
        print(f"{op:<{width}}  " + "  ".join(f"{'yes' if op in have[c] else '-':<{len(c)}}" for c in columns).rstrip())


_NO_PLAN = "no memory plan in the file (if every input is a tensor, the first call makes one for its shapes)"


def _operator_counts(program: ptlite.Program) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for graph in program.methods.values():
        for node in graph.walk():
            if node.op != "prim::Constant":
                counts[node.op] += 1
    return counts


def run(args: argparse.Namespace) -> int:
    program = load_program(args.model)
    meta = program.metadata
    size = os.path.getsize(args.model)
    print(f"file:       {args.model} ({human_bytes(size)}, {size} bytes)")
    print(f"producer:   {meta.get('producer') or 'unknown'}")
    print(f"captured:   {meta.get('capture', 'unknown')}"
          + (f" with torch {meta['torch_version']}" if meta.get("torch_version") else "")
          + (f" from {source}" if (source := recorded_source(program)) else ""))
    print(f"methods:    {len(program.methods)}")
    for graph in program.methods.values():
        print(f"  {graph.name}")
        for spec in graph.input_specs:
            print(f"    in   {spec.describe()}")
        for spec in graph.output_specs:
            print(f"    out  {spec.describe()}")
    counts = _operator_counts(program)
    print(f"operators:  {len(counts)} distinct, {sum(counts.values())} calls")
    width = max((len(op) for op in counts), default=0)
    for op, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        print(f"  {op:<{width}}  {n}")
    _print_weights(program)
    _print_described(program)
    from ptlite.ir.memory_plan import summary

    for graph in program.methods.values():
        plan = summary(program, graph.name)
        print(f"memory:     {graph.name}: {plan.describe() if plan else _NO_PLAN}")
    _print_limits(program)
    from ptlite.ir.verifier import unknown_operators

    missing = unknown_operators(program)
    if missing:
        print(f"runnable:   no; this ptlite lacks {', '.join(sorted(missing))}")
    else:
        print("runnable:   yes, every operator is one this ptlite has (the NumPy reference runs them all)")
        _print_backends(program, args.backends)
    if args.graph:
        print()
        print(program)
    return 0


def _print_described(program: ptlite.Program) -> None:
    """What the file carries for the app: the ptlite it needs, preprocessing, labels, user keys, bundled inputs."""
    from ptlite.format.layout import MIN_VERSION_KEY
    from ptlite.preprocess.spec import LABELS_KEY, PREPROCESSING_KEY

    meta = program.metadata
    if meta.get(MIN_VERSION_KEY):
        print(f"needs:      ptlite >= {meta[MIN_VERSION_KEY]}")
    if meta.get(PREPROCESSING_KEY) is not None:
        try:
            text = ptlite.Preprocessing.from_metadata(meta[PREPROCESSING_KEY]).describe()
        except ValueError as exc:
            text = f"invalid ({exc})"
        print(f"preprocess: {text}")
    labels = meta.get(LABELS_KEY)
    if isinstance(labels, list):
        shown = ", ".join(map(str, labels[:5])) + (", ..." if len(labels) > 5 else "")
        print(f"labels:     {len(labels)}: {shown}")
    if isinstance(meta.get("user"), dict):
        for key, value in meta["user"].items():
            print(f"user:       {key} = {str(value)[:80]}")
    if program.bundled_inputs:
        outputs = sum(len(b.outputs) for b in program.bundled_inputs)
        print(f"bundled:    {len(program.bundled_inputs)} call(s), {outputs} output(s) with PyTorch's answers "
              "('ptlite check' replays them)")


def _print_limits(program: ptlite.Program) -> None:
    """The run-time limits a load applies by default (ptlite.Limits), and a memory plan they would refuse."""
    from ptlite.ir.memory_plan import method_plan
    from ptlite.runtime.limits import DEFAULT, format_bytes

    rows = "; ".join(f"{what} {value}" for what, value in DEFAULT.describe())
    print(f"limits:     {rows} (ptlite.load's defaults; limits=ptlite.Limits(...) changes them)")
    for name in program.methods:
        arena = (method_plan(program, name) or {}).get("arena_bytes")
        if type(arena) is int and DEFAULT.max_bytes is not None and arena > DEFAULT.max_bytes:
            print(f"            note: {name}'s memory plan needs an arena of {format_bytes(arena)}, past the memory "
                  "limit: load it with a larger Limits.max_bytes")


def _print_weights(program: ptlite.Program) -> None:
    arrays = [np.asarray(w) for w in program.weights.values()]
    by_dtype: collections.Counter = collections.Counter()
    for arr in arrays:
        by_dtype[arr.dtype.name] += arr.nbytes
    total = sum(by_dtype.values())
    detail = ", ".join(f"{dtype} {human_bytes(n)}" for dtype, n in sorted(by_dtype.items()))
    print(f"weights:    {len(arrays)} tensors, {sum(a.size for a in arrays)} values, {human_bytes(total)}"
          + (f" ({detail})" if len(by_dtype) > 1 else ""))
    quantized = describe(program)
    if quantized is not None:
        widened = " (widened to float32 at load)" if FLOAT16_KEY in program.metadata else ""
        print(f"quantized:  {quantized}{widened}")


def _print_backends(program: ptlite.Program, selected: list[str] | None) -> None:
    """Which backend the program was lowered for, which are here, and which runs how many nodes of each method."""
    here = ", ".join(f"{info.name} ({info.detail})" if info.available else f"{info.name} (not available: {info.detail})"
                     for info in ptlite.backends())
    print(f"lowered:    {f'for {program.lowered_for}' if program.lowered_for else 'no (not optimized)'}")
    print(f"backends:   {here}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = ptlite.Module(program, selected, limits=ptlite.Limits.none())  # placements only: nothing runs
    for warning in caught:
        print(f"            note: {warning.message}")
    for name in module.method_names:
        counts = module.backend_counts(name)
        delegated = collections.Counter(p.delegate for p in module.placements(name) if p.delegate)
        text = ", ".join(f"{backend} {n} node(s)" for backend, n in counts.items()) or "no operator nodes"
        if delegated:
            text += "; in delegates: " + ", ".join(f"{d} {n}" for d, n in delegated.items())
        print(f"runs on:    {name}: {text}")
        shares = _shares(program, module.placements(name))
        if shares:
            print(f"            {shares}")


def _shares(program: ptlite.Program, placements: list) -> str:
    """Each backend's share of a method's nodes and of its floating-point operations (where the memory plan or the
    output specs give a node's output shape: a multiply-add counts 2, an elementwise operation 1)."""
    total = len(placements)
    if not total:
        return ""
    flops: collections.Counter[str] = collections.Counter()
    unknown = 0
    for placed in placements:
        counted = _flops(placed.node, program)
        if counted is None:
            unknown += 1
        else:
            flops[placed.backend] += counted
    nodes = collections.Counter(p.backend for p in placements)
    parts = []
    for backend, n in nodes.items():
        part = f"{backend} {100 * n / total:.0f}% of the nodes"
        if sum(flops.values()):
            part += f", {100 * flops[backend] / sum(flops.values()):.1f}% of the FLOPs"
        parts.append(part)
    gflop = sum(flops.values()) / 1e9
    note = f" ({unknown} node(s) of unknown size not counted)" if unknown else ""
    return "; ".join(parts) + (f" ({gflop:.3g} GFLOP a call{note})" if sum(flops.values()) else "")


def _flops(node, program: ptlite.Program) -> int | None:
    """Floating-point operations of one node, from its planned output shape and its weight; None if unknown."""
    planned = node.attrs.get("out")
    shape = planned.get("shape") if isinstance(planned, dict) else None
    if not isinstance(shape, list):
        return None
    size = 1
    for d in shape:
        size *= d
    at = 2 if node.op == ops.CONV2D_PACKED_GATED else 1  # where the weight is
    weight_node = node.inputs[at].node if len(node.inputs) > at else None
    weight = program.weights.get(weight_node.attrs.get("weight")) \
        if weight_node is not None and weight_node.op == "prim::Constant" else None
    if node.op in (ops.CONV2D_PACKED, ops.CONV2D_PACKED_GATED, ops.LINEAR_PACKED) and weight is not None \
            and weight.ndim == 3:
        return 2 * size * weight.shape[1]  # (panels, K, 16): K multiply-adds per output
    if node.op in (ops.CONV2D_PREPACKED, ops.LINEAR_PREPACKED) and weight is not None:
        return 2 * size * weight.shape[-2 if weight.ndim == 3 else 0]  # dense/linear K, depthwise taps, grouped K/g
    if node.op in (ops.CONV2D_WINOGRAD, ops.CONV2D_WINOGRAD_V2, ops.CONV2D_WINOGRAD_2X2) and weight is not None \
            and weight.ndim == 3:
        return 2 * size * 9 * weight.shape[1]  # (positions, C, O): the 3x3 convolution's, as if computed directly
    if node.op.startswith("ptlite::"):
        return None  # fused blocks: no simple count
    return size
