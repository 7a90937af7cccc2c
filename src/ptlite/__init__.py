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
from typing import IO, Any

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
from .ir.graph import BundledInput, Program, ValueSpec
from .preprocess.spec import Preprocessing
from .runtime.bundled import OutputCheck
from .runtime.limits import Limits
from .runtime.module import Module
from .version import __version__

__all__ = ["capture", "optimize_for_mobile", "quantize", "save", "attach", "bundle_inputs", "load", "load_program",
           "export_opnames", "backends", "set_num_threads", "get_num_threads", "Program", "Module", "ValueSpec",
           "BundledInput", "OutputCheck", "Preprocessing", "Backend", "BackendInfo", "Limits", "PtliteError",
           "FormatError", "CaptureError", "InputError", "UnsupportedOperatorError", "ExecutionError",
           "FileChangedError", "LimitError", "ScriptError", "__version__"]


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


def save(program: Program, path: str | os.PathLike, *, preprocessing: Preprocessing | str | None = None,
         labels: Iterable[str] | None = None, metadata: dict[str, Any] | None = None,
         bundled_inputs: list[BundledInput] | None = None) -> None:
    """Write `program` to a .ptlite file, with what an app needs besides the weights (kept in the file's metadata;
    `program` itself is unchanged). The file records the least ptlite version its operators need.

    preprocessing: how an image becomes forward's input (a `ptlite.preprocess.Preprocessing`, or its text form such
        as "imagenet" or "size=28 channels=L mean=0.1307 std=0.3081"); `Module.preprocessing` and `ptlite run` use it.
    labels: the class names, index by index (`Module.labels`; `ptlite run` prints them).
    metadata: your own keys, any JSON values (`Module.metadata["user"]`).
    bundled_inputs: example calls with PyTorch's outputs (`ptlite.bundle_inputs`), which `ptlite check` and
        `Module.check_bundled()` replay on the device.
    """
    from .format.writer import save as _save

    _save(attach(program, preprocessing=preprocessing, labels=labels, metadata=metadata,
                   bundled_inputs=bundled_inputs), path)


def attach(program: Program, *, preprocessing: Preprocessing | str | None = None,
             labels: Iterable[str] | None = None, metadata: dict[str, Any] | None = None,
             bundled_inputs: list[BundledInput] | None = None) -> Program:
    """The program with preprocessing, labels, your metadata keys and bundled inputs recorded (see `save`): a new
    Program sharing methods and weights; what is not given stays as it was. ValueError for values a file cannot
    hold (a preprocessing the model's input cannot take, labels that are not strings, metadata that is not JSON)."""
    from dataclasses import replace

    from .preprocess.spec import LABELS_KEY, PREPROCESSING_KEY

    new = dict(program.metadata)
    if preprocessing is not None:
        spec = Preprocessing.parse(preprocessing) if isinstance(preprocessing, str) else preprocessing
        if not isinstance(spec, Preprocessing):
            raise TypeError(f"preprocessing must be a ptlite.preprocess.Preprocessing or its text, not "
                            f"{type(preprocessing).__name__}")
        forward = program.methods.get("forward")
        targets = [s for s in forward.input_specs if spec.input in (None, s.name)] if forward is not None else []
        if spec.input is not None and not targets:
            raise ValueError(f"preprocessing names input {spec.input!r}, which forward does not take")
        if targets:
            spec.with_input_shape(targets[0].shape)  # raises if the channels disagree
        new[PREPROCESSING_KEY] = spec.to_metadata()
    if labels is not None:
        if isinstance(labels, str):
            raise TypeError("labels must be a list of class names, not one string (the command line's 'imagenet' "
                            "is torchvision's list: torchvision.models._meta._IMAGENET_CATEGORIES)")
        names = list(labels)
        if not all(isinstance(n, str) for n in names):
            raise ValueError("labels must be strings (one class name per index)")
        new[LABELS_KEY] = names
    if metadata is not None:
        import json

        try:
            if not all(isinstance(key, str) for key in metadata):
                raise TypeError("keys must be strings")
            json.dumps(metadata, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"metadata must be JSON (str keys; lists, numbers, strings, ...): {exc}") from None
        new["user"] = {**new.get("user", {}), **metadata}
    bundled = list(bundled_inputs) if bundled_inputs is not None else program.bundled_inputs
    for i, call in enumerate(bundled):
        if not isinstance(call, BundledInput):
            raise TypeError(f"bundled input {i} is a {type(call).__name__}, not a BundledInput (make them with "
                            "ptlite.bundle_inputs)")
        if problem := call.problem(program):
            raise ValueError(f"bundled input {i}: {problem}")
    return replace(program, metadata=new, bundled_inputs=bundled)


def bundle_inputs(model: Any, calls: Any, method: str = "forward", **tolerances: Any) -> list[BundledInput]:
    """Run a PyTorch model on example calls and return them with its outputs, for `save(bundled_inputs=...)` (needs
    torch; see `ptlite.frontend.bundle.bundle_inputs` for the calls and the tolerances)."""
    from .frontend.bundle import bundle_inputs as _bundle

    return _bundle(model, calls, method, **tolerances)


def load_program(path: str | os.PathLike | bytes | bytearray | memoryview | IO[bytes],
                 methods: Iterable[str] | None = None, in_memory: bool = False) -> Program:
    """Read a .ptlite file into a Program without preparing it to run. A PyTorch Mobile file (.ptl, recognised by
    its content) is translated into the same IR, without torch and without running anything from it.

    path: the file's path, its content (bytes, bytearray, memoryview) or a binary file object, as for `load`.
    methods: for a PyTorch Mobile file, the methods to translate (default: forward and the other public ones;
        name helpers such as torchvision's `_forward_impl` to get them). A .ptlite file holds the methods it was
        saved with: ValueError if this is given for one.
    in_memory: copy the file into memory instead of mapping it (see `load`)."""
    return _read(path, methods, in_memory)[0]


def _read(path: Any, methods: Iterable[str] | None = None, in_memory: bool = False) -> tuple[Program, bool]:
    """The program in a file (a path, its content, or a binary file object: ptlite.format.source), and whether it
    came from a PyTorch Mobile file. The source is opened once (a file object read once) and handed to the reader
    its magic names."""
    from .format.reader import is_ptlite_file, read_program
    from .format.source import open_source

    if isinstance(path, bytes) and len(path) < 4096 and b"\0" not in path and os.path.isfile(os.fsdecode(path)):
        raise TypeError(f"bytes are a file's content, and these name a file: pass the path as a str "
                        f"(os.fsdecode({path[:60]!r})), or the file's content")
    opened = open_source(path, in_memory)  # TypeError for anything else (an int is not taken as a descriptor)
    if not is_ptlite_file(bytes(opened.data[:8])):  # the legacy reader is imported only for files that may need it
        from .format.ptl import read_ptl, sniff_file

        if sniff_file(opened) is not None:
            chosen = None if methods is None else list(methods)
            return read_ptl(opened, chosen, evaluate=backends.reference().evaluate), True
    if methods is not None:
        raise ValueError(f"{opened.name}: methods= chooses what to translate from a PyTorch Mobile file; a .ptlite "
                         "file holds the methods it was saved with")
    return read_program(opened), False


def load(path: str | os.PathLike | bytes | bytearray | memoryview | IO[bytes], optimize: bool | None = None,
         backends: Iterable[str | Backend] | str | None = None, in_memory: bool = False,
         limits: Limits | None = None) -> Module:
    """Load a .ptlite (or PyTorch Mobile .ptl) file, check that every operator it uses is available, and return a
    runnable Module.

    path: the file's path (str or os.PathLike: mapped, see in_memory), its content (bytes, bytearray or memoryview:
        an app's asset, a download; copied once into aligned memory, so a later change to a bytearray does not
        reach the module), or a binary file object to read it from (anything with .read(): an open file,
        io.BytesIO, zipfile.ZipFile(...).open(name); read from its position to its end, into memory, never mapped).
        bytes are always the content, never a path (ptlite used to take bytes as a path: pass os.fsdecode(p) for
        a path held as bytes). A file object in text mode, or any other type, raises TypeError. Errors name the
        source by its path, the file object's name, or "<bytes>" (docs/reliability.md).

    backends: the backends to run it on, asked in order for each node (names, or Backend objects of your own; the
        NumPy reference is always added last and runs what the others decline). None: every backend available here
        (`ptlite.backends()` lists them). `Module.placements()` says which runs each node.

    optimize: apply `optimize_for_mobile` to the program before running it. None (the default): only to a PyTorch
        Mobile file, whose bytecode is never optimized (PyTorch's own optimizer fails on current wheels), so that it
        runs at least as fast as on the lite interpreter; this costs ~50-250 ms more at load (docs/legacy-ptl.md:
        `ptlite convert model.ptl` pays it once instead). A .ptlite file runs as written: `ptlite convert` has
        optimized it unless told not to (if optimizing a .ptl program fails, a warning says why and it runs as
        translated). True: optimize any file (errors raise); False: never.

    in_memory: copy the whole file into memory at load instead of mapping it (docs/reliability.md; content and file
        objects are always in memory). Mapped (the default for a path where ptlite's `_mapped` extension is built),
        loading copies nothing (but the weights a quantized
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

                from .format.source import source_name

                warnings.warn(f"{source_name(path)}: optimize_for_mobile failed ({type(exc).__name__}: {exc}); running "
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
    backend's matrix products (the BLAS library NumPy uses, through threadpoolctl, a dependency of ptlite: this
    sets it for the whole process). The NumPy backend's other kernels run on the calling thread (see
    ptlite.backends.numpy._parallel for why). ValueError for n < 1; ImportError, saying how to install it, where
    threadpoolctl is missing.

    The default (get_num_threads) is the CPUs this process may use; until this is called, BLAS keeps its own
    default (OpenBLAS: the CPUs of the affinity mask, not the cgroup quota): set_num_threads(get_num_threads())
    gives it ptlite's."""
    global _num_threads
    if int(n) < 1:
        raise ValueError(f"number of threads must be at least 1, got {n}")
    try:
        from threadpoolctl import threadpool_limits
    except ImportError as exc:
        raise ImportError(f"ptlite.set_num_threads sets BLAS's threads through threadpoolctl, a dependency of ptlite "
                          f"that is missing here ({exc}): pip install threadpoolctl") from None
    _num_threads = int(n)
    from .backends.native import set_num_threads as native_threads

    native_threads(_num_threads)
    threadpool_limits(limits=_num_threads, user_api="blas")


_num_threads: int | None = None  # as set by set_num_threads; None: the default, found when first asked for


def get_num_threads() -> int:
    """Threads for the native kernels and matrix products, as last set by set_num_threads. The default is the CPUs
    this process may use (`ptlite.backends.cpus.default_num_threads`): those of its affinity mask (taskset, a
    container's cpuset; `os.process_cpu_count()` on Python 3.13+), capped by its cgroup CPU quota rounded up (a
    container's --cpus=1.5: 2), not the host's core count (os.cpu_count()). The native backend starts with the
    same count; BLAS gets it when set_num_threads is called (see there)."""
    global _num_threads
    if _num_threads is None:
        from .backends.cpus import default_num_threads

        _num_threads = default_num_threads()
    return _num_threads
