"""ptlite: capture a PyTorch model into a small safe file and run it anywhere with NumPy alone.

Workstation side (needs torch)::

    program = ptlite.capture(model, (example,))      # torch.export / jit.script / jit.trace
    program = ptlite.optimize_for_mobile(program)    # fold constants and batch norms, drop no-ops (no torch)
    program = ptlite.quantize(program, "fp16_weights")  # optional: weights stored as float16, half the file
    ptlite.save(program, "model.ptlite")

Device side (NumPy only)::

    module = ptlite.load("model.ptlite")             # backends=("numpy",): which run it (ptlite.backends() lists)
    logits = module(image)
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from . import backends
from .backends import BackendInfo
from .backends import resolve as _resolve_backends
from .backends.base import Backend
from .errors import (
    CaptureError,
    ExecutionError,
    FileChangedError,
    FormatError,
    InputError,
    LimitError,
    PtliteError,
    ScriptError,
    UnsupportedOperatorError,
)
from .ir.graph import Program, ValueSpec
from .runtime.limits import Limits
from .runtime.module import Module
from .version import __version__

__all__ = ["capture", "optimize_for_mobile", "quantize", "save", "load", "load_program", "export_opnames", "backends",
           "set_num_threads", "get_num_threads", "Program", "Module", "ValueSpec", "Backend", "BackendInfo",
           "Limits", "PtliteError", "FormatError", "CaptureError", "InputError", "UnsupportedOperatorError",
           "ExecutionError", "FileChangedError", "LimitError", "ScriptError", "__version__"]


def capture(model: Any, example_inputs: tuple | None = None, method: str = "auto", **options: Any) -> Program:
    """Capture a PyTorch model into a ptlite Program (needs torch; see `ptlite.frontend.capture`)."""
    from .frontend import capture as _capture

    return _capture(model, example_inputs, method=method, **options)


def quantize(program: Program, scheme: str, calibration_data: Any = None, **options: Any) -> Program:
    """Quantize a program (no torch needed) and return the result as a new Program; see `ptlite.quantization.quantize`
    (options: observer, progress). scheme: "fp16_weights" (weight matrices stored as float16: half the file,
    computed in float32) or "int8_static" (convolutions, linear layers and additions in 8-bit integers, activations
    calibrated on `calibration_data`, a list of inputs)."""
    from .quantization import quantize as _quantize

    return _quantize(program, scheme, calibration_data, **options)


def optimize_for_mobile(program: Program, backend: str | Backend = "cpu", optimization_blocklist: Iterable[Any] = (),
                        preserved_methods: Iterable[str] = ()) -> Program:
    """Optimize a captured program for inference and return the result as a new Program (`program` is unchanged).

    PyTorch's `torch.utils.mobile_optimizer.optimize_for_mobile`, on ptlite's IR (no torch needed): dropout with
    train=False and other no-ops (contiguous, detach, same-dtype casts...) are removed, what is known before running
    is computed once (constant folding), inference batch norms are folded into the convolution or linear layer
    feeding them, convolution and linear weights are prepacked into their kernels' layouts (Winograd-transformed
    for large 3x3 convolutions), activations and add + relu are fused, dead code and unused weights are dropped,
    and a memory plan is made where input shapes are static; docs/architecture.md lists the passes.
    `metadata["passes"]` lists the passes that changed the program, `metadata["backend"]` the backend it is lowered
    for (the file then runs anywhere: a backend that is missing at load is replaced by the NumPy reference).

    backend: the backend whose kernels the program is lowered for (packed weight layouts, fusions, memory plan),
        by name ("native", "numpy"; "cpu": the native backend where its library was built, else NumPy's) or as a
        Backend object.
    optimization_blocklist: optimizations to skip, by PyTorch's MobileOptimizerType names ("CONV_BN_FUSION",
        "REMOVE_DROPOUT", ...; members of torch's enum work too; those without a ptlite equivalent skip nothing) or
        ptlite's ("REMOVE_NOOPS", "FOLD_CONSTANTS", "DEAD_CODE", ...; see ptlite.passes); an unknown name raises
        ValueError listing the valid ones.
    preserved_methods: methods that must be kept; every method of the program is optimized and kept, so this only
        checks that they exist (capture with `preserved_methods=` to keep methods besides forward).
    """
    from .passes import blocklist_names, optimize

    target = _lowering_backend(backend)
    missing = [m for m in ([preserved_methods] if isinstance(preserved_methods, str) else preserved_methods)
               if m not in program.methods]
    if missing:
        raise ValueError(f"preserved method(s) {', '.join(missing)} not in the program, which has: "
                         f"{', '.join(program.methods)}; capture with preserved_methods=... to keep them")
    blocked = blocklist_names(optimization_blocklist, backends.lowering_passes(target))
    from .quantization import optimized  # a quantized program: its weights widened, quantized again after

    return optimized(program, frozenset(blocked), lambda p, skip: optimize(
        p, skip, evaluate=backends.reference().evaluate, lowering=_lowering(target)))


def _lowering_backend(backend: str | Backend) -> Backend:
    """The backend optimize_for_mobile lowers for: by name ("cpu": see ptlite.backends.ALIASES) or as given."""
    if not isinstance(backend, str):
        return backend
    try:
        return backends.get(backend.lower())
    except ValueError as exc:
        raise ValueError(f"cannot optimize for backend {backend!r}: {exc}") from None


def _lowering(target: Backend) -> Any:
    """The target's lowering as ptlite.passes.optimize takes it, running methods on zeros on the target alone."""
    from .backends.base import LoweringContext
    from .passes import Lowering
    from .runtime.interpreter import runner

    run = runner(target)
    return Lowering(target.name, backends.lowering_passes(target),
                    lambda program, blocked: target.lower(program, LoweringContext(blocked, run)))


def save(program: Program, path: str | os.PathLike) -> None:
    """Write `program` to a .ptlite file."""
    from .format.writer import save as _save

    _save(program, path)


def load_program(path: str | os.PathLike, methods: Iterable[str] | None = None, in_memory: bool = False) -> Program:
    """Read a .ptlite file into a Program without preparing it to run. A PyTorch Mobile file (.ptl, recognised by
    its content) is translated into the same IR, without torch and without running anything from it.

    methods: for a PyTorch Mobile file, the methods to translate (default: forward and the other public ones;
        name helpers such as torchvision's `_forward_impl` to get them). A .ptlite file holds the methods it was
        saved with: ValueError if this is given for one.
    in_memory: copy the file into memory instead of mapping it (see `load`)."""
    return _read(path, methods, in_memory)[0]


def _read(path: str | os.PathLike, methods: Iterable[str] | None = None,
          in_memory: bool = False) -> tuple[Program, bool]:
    """The program in a file, and whether it came from a PyTorch Mobile file."""
    from .format.reader import is_ptlite_file, read_program

    if not isinstance(path, (str, bytes, os.PathLike)):  # open() would take an int as a file descriptor
        raise TypeError(f"expected a file path (str or os.PathLike), got {type(path).__name__}: {str(path)[:60]}")
    with open(path, "rb") as f:
        head = f.read(8)
    if not is_ptlite_file(head):  # the legacy reader is imported only for files that may need it
        from .format.ptl import read_ptl, sniff_file

        if sniff_file(path) is not None:
            chosen = None if methods is None else list(methods)
            return read_ptl(path, chosen, evaluate=backends.reference().evaluate, in_memory=in_memory), True
    if methods is not None:
        raise ValueError(f"{os.fspath(path)}: methods= chooses what to translate from a PyTorch Mobile file; a .ptlite "
                         "file holds the methods it was saved with")
    return read_program(path, in_memory), False


def load(path: str | os.PathLike, optimize: bool | None = None,
         backends: Iterable[str | Backend] | str | None = None, in_memory: bool = False,
         limits: Limits | None = None) -> Module:
    """Load a .ptlite (or PyTorch Mobile .ptl) file, check that every operator it uses is available, and return a
    runnable Module.

    backends: the backends to run it on, asked in order for each node (names, or Backend objects of your own; the
        NumPy reference is always added last and runs what the others decline). None: every backend available here
        (`ptlite.backends()` lists them). `Module.placements()` says which runs each node.

    optimize: apply `optimize_for_mobile` to the program before running it. None (the default): only to a PyTorch
        Mobile file, whose bytecode is never optimized (PyTorch's own optimizer fails on current wheels), so that it
        runs at least as fast as on the lite interpreter; this costs ~50-250 ms more at load (docs/legacy-ptl.md:
        `ptlite convert model.ptl` pays it once instead). A .ptlite file runs as written: `ptlite convert` has
        optimized it unless told not to (if optimizing a .ptl program fails, a warning says why and it runs as
        translated). True: optimize any file (errors raise); False: never.

    in_memory: copy the whole file into memory at load instead of mapping it (docs/reliability.md). Mapped (the
        default where ptlite's `_mapped` extension is built), loading copies nothing (but the weights a quantized
        file stores narrower, widened to float32 in memory) and the file may still change
        on disk without harm to the process: replacing it (os.replace) leaves the module reading the old file, and
        truncating or overwriting it in place makes the calls after raise FileChangedError (never a crash, never
        results from the changed bytes).

    limits: bounds on each call (ptlite.Limits: the NumPy memory it holds at once, checked before allocating; its
        loop iterations; its wall time), on what a hostile or broken file can make a call allocate or how long it
        runs; past one, the call raises LimitError naming the node and the limit (docs/reliability.md says what is
        and is not counted). None: the defaults (4 GiB, 10 million iterations, 600 s:
        far above what real models need); `Limits.none()` lifts them all.

    The Module's weights are read-only: a .ptlite file's are views of the file, and those made at load (a .ptl
    file's, folded and packed ones) are sealed (`ptlite.ir.weights.seal`).
    """
    program, legacy = _read(path, in_memory=in_memory)
    if optimize or (optimize is None and legacy):
        from .format.reader import gc_paused
        from .ir.weights import widened

        with gc_paused():  # the passes make thousands of IR objects and drop few: collections would free nothing
            try:  # lowered for the backend asked first; weights stored narrower run widened (and stay so)
                program = optimize_for_mobile(widened(program), backend=_resolve_backends(backends)[0])
            except Exception as exc:
                if optimize:
                    raise
                import warnings  # the file still runs, as translated; say why it is not optimized

                warnings.warn(f"{os.fspath(path)}: optimize_for_mobile failed ({type(exc).__name__}: {exc}); running "
                              "the program as translated (ptlite.load(path, optimize=False) skips the attempt)",
                              stacklevel=2)
    if legacy or optimize:
        # Arrays made here (a .ptl file's weights, folded and packed ones) are this call's own: sealed read-only,
        # like a .ptlite file's mapped weights, so that kernels need not compare them with copies at every call.
        from .ir.weights import seal

        program.weights = {name: seal(w) for name, w in program.weights.items()}
    from .format.source import check_sources, sources_of

    sources = sources_of(program.weights.values())  # the guarded maps the weights read: checked after each call
    return Module(program, backends, after_call=(lambda: check_sources(sources)) if sources else None, limits=limits)


def export_opnames(program_or_path: Program | str | os.PathLike) -> list[str]:
    """Sorted names of the operators a program (or a saved file) uses, as PyTorch's `_export_operator_list`."""
    from .ops import lookup

    program = program_or_path if isinstance(program_or_path, Program) else load_program(program_or_path)
    # Structural nodes (constants, control flow) are the interpreter's own: PyTorch Mobile has instructions for them.
    return [name for name in program.operator_names() if not ((op := lookup(name)) is not None and op.structural)]


def set_num_threads(n: int) -> None:
    """Use n threads for the native backend's kernels (its own pool, the calling thread included) and for the NumPy
    backend's matrix products (the BLAS library NumPy uses, through threadpoolctl when it is installed; without it,
    set OPENBLAS_NUM_THREADS before starting Python). The default is the machine's core count. The NumPy backend's
    other kernels run on the calling thread (see ptlite.backends.numpy._parallel for why)."""
    global _num_threads
    if int(n) < 1:
        raise ValueError(f"number of threads must be at least 1, got {n}")
    _num_threads = int(n)
    from .backends.native import set_num_threads as native_threads

    native_threads(_num_threads)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(limits=int(n), user_api="blas")


_num_threads = max(1, os.cpu_count() or 1)


def get_num_threads() -> int:
    """Threads for the native kernels and matrix products, as last set by set_num_threads (default: the machine's
    core count)."""
    return _num_threads
