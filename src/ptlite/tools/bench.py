"""`ptlite bench`: latency, load time and memory of a .ptlite file, optionally beside eager PyTorch and ONNX Runtime.

    result = measure("model.ptlite", lambda specs: random_inputs(specs), Settings(threads=2))
    print(format_report(result))

Device side: NumPy only. PyTorch and ONNX Runtime are imported only in the child processes that `compare` starts,
one runtime per fresh process, one at a time (two runtimes in one process, or running side by side, distort each
other's timings and memory).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

import ptlite
from ptlite.errors import InputError, PtliteError
from ptlite.ir.graph import ValueSpec
from ptlite.ir.memory_plan import MemoryPlanSummary

SEED = 0
LOAD_REPEATS = 5  # loads after the first one, whose median is reported
# Set on some machines to pick a BLAS kernel; they can select a slow one, so comparisons run without them.
SLOW_BLAS_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
INSTALL = {"torch": "pip install 'ptlite[export]'", "onnxruntime": "pip install onnxruntime",
           "threadpoolctl": "pip install threadpoolctl"}
RUNTIME_TITLES = {"ptlite": "ptlite", "pytorch": "PyTorch", "onnxruntime": "ONNX Runtime"}
STATS = ("min", "median", "p90", "mean")

InputMaker = Callable[[list[ValueSpec]], list[Any]]


@dataclass
class Settings:
    """What to measure: warm-up and timed runs of forward, threads, and whether to profile each operator."""

    warmup: int = 5
    runs: int = 50
    threads: int = max(1, os.cpu_count() or 1)
    profile: bool = False
    top: int = 10


# ----------------------------------------------------------------------------------------------------
# measuring


def peak_rss_bytes() -> int | None:
    """The process's peak resident set size so far, in bytes; None where the system does not say.

    Linux: VmHWM of /proc/self/status, because getrusage's ru_maxrss there also counts the peak of the parent when
    a process was started by fork and exec (as `compare`'s measuring processes are). Elsewhere: ru_maxrss, which is
    in bytes on macOS and in KiB on the BSDs. Windows has neither: None.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # "VmHWM:   13632 kB"
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def rss_source() -> str | None:
    """Where `peak_rss_bytes` reads from here."""
    if os.path.exists("/proc/self/status"):
        return "VmHWM of /proc/self/status (peak so far)"
    return "getrusage ru_maxrss (peak so far)" if importlib.util.find_spec("resource") else None


def time_calls(fn: Callable[[], Any], warmup: int, runs: int) -> list[float]:
    """Milliseconds of each of `runs` calls of fn, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    clock = time.perf_counter
    for _ in range(runs):
        start = clock()
        fn()
        times.append((clock() - start) * 1e3)
    return times


def time_pair(a: Callable[[], Any], b: Callable[[], Any], warmup: int,
              runs: int) -> tuple[list[float], list[float]]:
    """Milliseconds of `runs` calls each of a and b, alternating (and alternating which goes first), after
    `warmup` untimed calls of each: side by side in one process, so that a drifting machine slows both alike."""
    for _ in range(warmup):
        a()
        b()
    times: tuple[list[float], list[float]] = ([], [])
    clock = time.perf_counter
    for run in range(runs):
        for i in ((0, 1) if run % 2 == 0 else (1, 0)):
            fn = a if i == 0 else b
            start = clock()
            fn()
            times[i].append((clock() - start) * 1e3)
    return times


@dataclass
class PairTiming:
    """Two callables on the same inputs, side by side (`side_by_side`)."""

    a_ms: float  # median latency of a
    b_ms: float  # median latency of b
    ratio: float  # median of the per-pair ratios b / a (above 1: a is faster)
    max_diff: float  # largest absolute difference between their (array) results


def side_by_side(a: Callable[..., Any], b: Callable[..., Any], inputs: Sequence[Any], warmup: int,
                 runs: int) -> PairTiming:
    """Run a(*inputs) and b(*inputs) in alternating calls (time_pair) and compare their results (arrays, or the
    same structure of tuples, lists and dicts of arrays, as a segmentation model returns)."""
    diff = _max_difference(a(*inputs), b(*inputs))
    ta, tb = time_pair(lambda: a(*inputs), lambda: b(*inputs), warmup, runs)
    return PairTiming(float(np.median(ta)), float(np.median(tb)), float(np.median(np.array(tb) / np.array(ta))),
                      diff)


def _max_difference(x: Any, y: Any, where: str = "result") -> float:
    """The largest absolute difference between two results of the same structure (arrays, numbers, and tuples,
    lists and dicts of them); inf where only one side is NaN. Raises ValueError naming where they differ in
    structure."""
    if isinstance(x, dict) or isinstance(y, dict):
        if not (isinstance(x, dict) and isinstance(y, dict)) or x.keys() != y.keys():
            raise ValueError(f"the two results differ in structure at {where}: "
                             f"{sorted(x) if isinstance(x, dict) else type(x).__name__} vs "
                             f"{sorted(y) if isinstance(y, dict) else type(y).__name__}")
        return max((_max_difference(x[k], y[k], f"{where}[{k!r}]") for k in x), default=0.0)
    if isinstance(x, (tuple, list)) or isinstance(y, (tuple, list)):
        if not (isinstance(x, (tuple, list)) and isinstance(y, (tuple, list))) or len(x) != len(y):
            raise ValueError(f"the two results differ in structure at {where}: {type(x).__name__} of "
                             f"{len(x) if isinstance(x, (tuple, list)) else '-'} vs {type(y).__name__} of "
                             f"{len(y) if isinstance(y, (tuple, list)) else '-'}")
        return max((_max_difference(u, v, f"{where}[{i}]") for i, (u, v) in enumerate(zip(x, y))), default=0.0)
    if x is None or y is None:
        if x is not y:
            raise ValueError(f"the two results differ at {where}: {x!r} vs {y!r}")
        return 0.0
    u, v = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if u.shape != v.shape:
        raise ValueError(f"the two results differ in shape at {where}: {u.shape} vs {v.shape}")
    if u.size == 0:
        return 0.0
    d = np.abs(u - v)
    d[np.isnan(u) != np.isnan(v)] = np.inf  # NaN on one side only
    d[np.isnan(u) & np.isnan(v)] = 0.0
    return float(np.max(d))


def latency_stats(times_ms: Sequence[float]) -> dict[str, float]:
    """min, median, p90 and mean of a list of timings."""
    t = np.asarray(times_ms, dtype=np.float64)
    return {"min": float(t.min()), "median": float(np.median(t)), "p90": float(np.percentile(t, 90)),
            "mean": float(t.mean())}


def _threadpoolctl() -> Any:
    try:
        import threadpoolctl
    except ImportError:
        return None
    return threadpoolctl


def blas_libraries() -> tuple[list[dict[str, Any]] | None, str | None]:
    """The BLAS libraries NumPy uses as threadpoolctl reports them (library, version, kernel, threads), or
    (None, why not) when threadpoolctl is missing."""
    threadpoolctl = _threadpoolctl()
    if threadpoolctl is None:
        return None, f"threadpoolctl is not installed ({INSTALL['threadpoolctl']}): BLAS unknown, its threads not set"
    libraries = [{"library": info.get("internal_api"), "version": info.get("version"),
                  "kernel": info.get("architecture"), "threads": info.get("num_threads")}
                 for info in threadpoolctl.threadpool_info() if info.get("user_api") == "blas"]
    return libraries, None


def _slow_blas_settings() -> dict[str, str]:
    return {var: os.environ[var] for var in SLOW_BLAS_VARIABLES if var in os.environ}


# ----------------------------------------------------------------------------------------------------
# inputs


def random_inputs(specs: Sequence[ValueSpec], shapes: Sequence[tuple[int, ...]] = (),
                  seed: int = SEED) -> list[Any]:
    """Inputs for a method from its specs: normal floats, small non-negative integers, False for booleans.

    `shapes` gives the shape of every tensor input, in order (needed where a spec has dynamic dimensions);
    inputs that are not tensors take their defaults.
    """
    tensors = [s for s in specs if s.type == "Tensor"]
    if shapes and len(shapes) != len(tensors):
        names = ", ".join(s.name for s in tensors)
        raise InputError(f"--input-shape was given {len(shapes)} time(s), but the model has {len(tensors)} tensor "
                         f"input(s) ({names}): give one per input, in order")
    rng = np.random.default_rng(seed)
    given = iter(shapes)
    values: list[Any] = []
    for spec in specs:
        if spec.type == "Tensor":
            shape = next(given) if shapes else _static_shape(spec)
            values.append(_random_tensor(rng, np.dtype(spec.dtype or "float32"), shape))
        elif spec.has_default:
            values.append(spec.default)
        else:
            raise InputError(f"input '{spec.name}' is {spec.type}, and random inputs are tensors only: give "
                             "every input with --inputs (numbers are written as they are)")
    return values


def _static_shape(spec: ValueSpec) -> tuple[int, ...]:
    if spec.shape is not None and all(d is not None for d in spec.shape):
        return tuple(int(d) for d in spec.shape)
    if spec.shape is None:
        dims, example = "of unknown rank", "1,3,224,224"
    else:
        dims = "(" + ", ".join("?" if d is None else str(d) for d in spec.shape) + ")"
        example = ",".join("1" if d is None else str(d) for d in spec.shape)
    raise InputError(f"input '{spec.name}' has a dynamic shape {dims}: give its shape with --input-shape "
                     f"(e.g. --input-shape {example}), once per input, in order")


def _random_tensor(rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    if dtype.kind in "fc":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return np.zeros(shape, dtype)  # masks that mask nothing: random ones could mask whole rows
    return rng.integers(0, 10, size=shape).astype(dtype)  # valid indices for any table of 10 or more rows


def describe_inputs(specs: Sequence[ValueSpec], values: Sequence[Any]) -> list[dict[str, Any]]:
    """Name, dtype and shape (or value, for numbers) of each input, for the report."""
    described = []
    for i, value in enumerate(values):
        name = specs[i].name if i < len(specs) else f"input{i}"
        if isinstance(value, np.ndarray):
            described.append({"name": name, "dtype": value.dtype.name, "shape": list(value.shape)})
        else:
            described.append({"name": name, "value": value})
    return described


def save_inputs(values: Sequence[Any], folder: str) -> dict[str, Any]:
    """Write inputs for a child process: arrays into an .npz file, other values into the returned description."""
    path = os.path.join(folder, "inputs.npz")
    arrays = {f"a{i}": v for i, v in enumerate(values) if isinstance(v, np.ndarray)}
    np.savez(path, **arrays)
    return {"path": path, "items": [{"array": f"a{i}"} if isinstance(v, np.ndarray) else {"value": v}
                                    for i, v in enumerate(values)]}


def load_inputs(saved: dict[str, Any]) -> list[Any]:
    """The inputs `save_inputs` wrote."""
    with np.load(saved["path"], allow_pickle=False) as data:
        return [data[item["array"]] if "array" in item else item["value"] for item in saved["items"]]


def save_outputs(result: Any, path: str) -> list[str]:
    """Write a call's outputs (flattened as ptlite.tools.compare names them; numbers and lists of numbers as arrays;
    None and strings, which ONNX Runtime does not return either, left out) to an .npz file; returns their names, in
    order."""
    from .compare import flatten_outputs

    leaves = [(name, np.asarray(v)) for name, v in flatten_outputs(result)
              if v is not None and not isinstance(v, str)]  # numbers and lists of them become arrays
    np.savez(path, **{f"o{i}": v for i, (_, v) in enumerate(leaves)})
    return [name for name, _ in leaves]


def load_outputs(path: str, names: Sequence[str]) -> dict[str, np.ndarray]:
    """The outputs `save_outputs` wrote, by name."""
    with np.load(path, allow_pickle=False) as data:
        return {name: data[f"o{i}"] for i, name in enumerate(names)}


# ----------------------------------------------------------------------------------------------------
# ptlite


def measure(path: str, make_inputs: InputMaker, settings: Settings, outputs_path: str | None = None) -> dict[str, Any]:
    """Measure a .ptlite file in this process: first and repeated load times, latency of forward, peak RSS
    before and after loading and after the runs, and (settings.profile) a per-operator profile.

    make_inputs(input_specs) gives forward's arguments; it is called after the first load, which is timed first.
    outputs_path: also save the outputs of one more call there (`save_outputs`), for `compare` to check.
    """
    _threadpoolctl()  # imported before measuring memory: it is the harness's, not the model's
    rss_before = peak_rss_bytes()
    start = time.perf_counter()
    module = ptlite.load(path)  # the first load in a process also imports the kernels
    first_load_ms = (time.perf_counter() - start) * 1e3
    rss_loaded = peak_rss_bytes()
    inputs = make_inputs(module.input_specs)
    ptlite.set_num_threads(settings.threads)
    times = time_calls(lambda: module(*inputs), settings.warmup, settings.runs)
    rss_peak = peak_rss_bytes()
    reloads = [_load_ms(path) for _ in range(LOAD_REPEATS)]
    blas, blas_note = blas_libraries()
    result: dict[str, Any] = {
        "runtime": "ptlite", "version": ptlite.__version__, "model": str(path), "file_bytes": os.path.getsize(path),
        "inputs": describe_inputs(module.input_specs, inputs),
        "threads": settings.threads, "warmup": settings.warmup, "runs": settings.runs,
        "blas": blas, "blas_note": blas_note, "slow_blas_variables": _slow_blas_settings(),
        "load_ms": {"first": first_load_ms, "median": float(np.median(reloads)), "repeats": LOAD_REPEATS},
        "latency_ms": latency_stats(times), "times_ms": times,
        "rss_bytes": {"before_load": rss_before, "after_load": rss_loaded, "peak": rss_peak},
        "rss_source": rss_source() if rss_peak is not None else None,
        "memory_plan": asdict(plan) if (plan := module.memory_plan()) is not None else None,
        "profile": _profile(module, inputs, settings) if settings.profile else None,
    }
    if outputs_path:
        _save_or_note(result, lambda: module(*inputs), outputs_path)
    return result


def _save_or_note(result: dict[str, Any], call: Callable[[], Any], path: str) -> None:
    """result["outputs"]: the names `save_outputs` wrote for one more call, or result["outputs_error"]: why not (the
    timings stand either way)."""
    try:
        result["outputs"] = save_outputs(call(), path)
    except Exception as exc:
        result["outputs_error"] = _one_line(exc)


def _load_ms(path: str) -> float:
    start = time.perf_counter()
    ptlite.load(path)
    return (time.perf_counter() - start) * 1e3


def _profile(module: ptlite.Module, inputs: list[Any], settings: Settings) -> dict[str, Any]:
    from ptlite.runtime.profile import profile

    prof = profile(module, inputs, runs=settings.runs, warmup=1)
    per_run = 1e3 / prof.runs
    return {
        "runs": prof.runs, "ms_per_run": prof.total_seconds * per_run, "ms_in_operators": prof.node_seconds * per_run,
        "by_op": [{"op": o.op, "nodes": o.nodes, "ms_per_run": o.seconds * per_run, "share": o.share}
                  for o in prof.by_op()],
        "slowest": [{"op": n.op, "output": n.output, "source": n.source, "ms_per_run": n.seconds * per_run}
                    for n in prof.slowest(settings.top)],
        "text": prof.format(settings.top),
    }


# ----------------------------------------------------------------------------------------------------
# comparison: each runtime in its own fresh process, one at a time


def installed(package: str) -> bool:
    """Whether `package` can be imported (without importing it)."""
    return importlib.util.find_spec(package) is not None


def compare(path: str, inputs: Sequence[Any], entry: str, settings: Settings) -> dict[str, Any]:
    """Measure ptlite on `path`, eager PyTorch on the model `entry` ('module:function') builds, and ONNX Runtime
    on that model exported with torch.onnx.export, all on the same inputs, each in a fresh process, one at a time.

    Returns ptlite's measurement (as `measure` does) with "compare": the other runtimes' figures, each with the
    ratio ptlite / other and "outputs_check" (whether ptlite's outputs match that runtime's, by ptlite.tools.compare's
    criterion: "match", "summary", "largest_relative"), or with "error" (and "install" when a package is missing).
    """
    with tempfile.TemporaryDirectory(prefix="ptlite-bench-") as folder:
        common = {**asdict(settings), "inputs": save_inputs(inputs, folder)}
        result = _run_child("ptlite", {**common, "model": os.path.abspath(path)}, folder)
        if "error" in result:
            raise PtliteError(f"measuring {path} failed: {result['error']}")
        result["model"] = str(path)
        onnx_path = os.path.join(folder, "model.onnx")
        want_onnx = installed("onnxruntime")
        if installed("torch"):
            pytorch = _run_child("pytorch", {**common, "entry": entry, "onnx": onnx_path if want_onnx else None},
                                 folder)
        else:
            pytorch = _missing("torch")
        if not want_onnx:
            onnxruntime = _missing("onnxruntime")
        elif "install" in pytorch:
            onnxruntime = {"error": "needs torch to export the model to ONNX, and torch is not installed",
                           "install": pytorch["install"]}
        elif "error" in pytorch:
            onnxruntime = {"error": "needs the model exported by PyTorch, which failed"}
        elif pytorch.get("onnx_error"):
            onnxruntime = {"error": f"torch.onnx.export failed: {pytorch['onnx_error']}"}
        else:
            onnxruntime = _run_child("onnxruntime", {**common, "onnx": onnx_path}, folder)
        others = {"pytorch": pytorch, "onnxruntime": onnxruntime}
        for other in others.values():
            if "latency_ms" in other:
                other["ratio"] = {s: result["latency_ms"][s] / other["latency_ms"][s] for s in ("min", "median", "p90")}
            if "outputs" in other and "outputs" in result:
                other["outputs_check"] = _check_outputs(folder, result, other)
    result["compare"] = {"entry": entry, "runtimes": others, "isolated": True,
                         "unset_variables": list(SLOW_BLAS_VARIABLES)}
    return result


def _check_outputs(folder: str, ptlite_result: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """ptlite's outputs against another runtime's (PyTorch's by name; ONNX Runtime's, a flat list, by position), by
    ptlite.tools.compare's criterion."""
    from .compare import compare_outputs, summary

    ours = load_outputs(os.path.join(folder, "ptlite.outputs.npz"), ptlite_result["outputs"])
    names = other["outputs"]
    if other["runtime"] == "onnxruntime":  # positions: name them as ptlite's outputs at the same places
        mine = list(ours)
        names = [mine[i] if i < len(mine) else f"extra {i}" for i in range(len(names))]
    theirs = load_outputs(os.path.join(folder, f"{other['runtime']}.outputs.npz"), names)
    differences = compare_outputs(ours, theirs)
    return {"match": all(d.ok for d in differences), "summary": summary(differences),
            "largest_relative": max((d.relative for d in differences), default=0.0)}


def differing_outputs(result: dict[str, Any]) -> list[str]:
    """'runtime: what differs' for each compared runtime whose outputs ptlite's do not match."""
    runtimes = (result.get("compare") or {}).get("runtimes", {})
    return [f"{RUNTIME_TITLES[name]}: {r['outputs_check']['summary']}" for name, r in runtimes.items()
            if "outputs_check" in r and not r["outputs_check"]["match"]]


def failures(result: dict[str, Any]) -> list[str]:
    """'runtime: error' for each compared runtime that failed for another reason than a missing package."""
    runtimes = (result.get("compare") or {}).get("runtimes", {})
    return [f"{RUNTIME_TITLES[name]}: {r['error']}" for name, r in runtimes.items()
            if "error" in r and "install" not in r]


def _missing(package: str) -> dict[str, Any]:
    return {"error": f"{package} is not installed", "install": INSTALL[package]}


def child_env(threads: int) -> dict[str, str]:
    """The environment of a measuring process: no BLAS kernel overrides, `threads` threads, this ptlite first."""
    env = dict(os.environ)
    for var in SLOW_BLAS_VARIABLES:
        env.pop(var, None)
    env.update(dict.fromkeys(THREAD_VARIABLES, str(threads)))
    src = os.path.dirname(os.path.dirname(os.path.abspath(ptlite.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    return env


_CHILD = "import sys; from ptlite.tools.bench import child_main; sys.exit(child_main(sys.argv[1:]))"


def _run_child(kind: str, config: dict[str, Any], folder: str) -> dict[str, Any]:
    config_path = os.path.join(folder, f"{kind}.json")
    config = {**config, "result": os.path.join(folder, f"{kind}.result.json")}
    with open(config_path, "w") as f:
        json.dump(config, f)
    proc = subprocess.run([sys.executable, "-c", _CHILD, kind, config_path], env=child_env(config["threads"]),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if os.path.exists(config["result"]):
        with open(config["result"]) as f:
            return json.load(f)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    return {"error": lines[-1].strip() if lines else f"the measuring process exited with status {proc.returncode}"}


def child_main(argv: Sequence[str]) -> int:
    """Entry point of a measuring process: `kind config.json`; writes the figures (or "error") to config["result"]."""
    kind, config_path = argv
    with open(config_path) as f:
        config = json.load(f)
    try:
        result = _CHILDREN[kind](config)
    except Exception as exc:  # reported by the parent, as one line
        result = {"error": _one_line(exc)}
    with open(config["result"], "w") as f:
        json.dump(result, f)
    return 0


def _one_line(exc: BaseException) -> str:
    from .cli import CliError

    text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    return text if isinstance(exc, (CliError, PtliteError)) else f"{type(exc).__name__}: {text}"


def _settings(config: dict[str, Any]) -> Settings:
    return Settings(**{k: config[k] for k in ("warmup", "runs", "threads", "profile", "top")})


def _outputs_path(config: dict[str, Any], kind: str) -> str:
    return os.path.join(os.path.dirname(config["result"]), f"{kind}.outputs.npz")


def _child_ptlite(config: dict[str, Any]) -> dict[str, Any]:
    return measure(config["model"], lambda specs: load_inputs(config["inputs"]), _settings(config),
                   outputs_path=_outputs_path(config, "ptlite"))


def _child_pytorch(config: dict[str, Any]) -> dict[str, Any]:
    rss_before = peak_rss_bytes()
    import torch

    from .cli import _make_model
    from .compare import result_to_numpy

    settings = _settings(config)
    torch.set_num_threads(settings.threads)
    model, _ = _make_model(config["entry"], torch)
    model.eval()
    inputs = [torch.from_numpy(v) if isinstance(v, np.ndarray) else v for v in load_inputs(config["inputs"])]
    with torch.inference_mode():
        times = time_calls(lambda: model(*inputs), settings.warmup, settings.runs)
        rss_peak = peak_rss_bytes()
        result = {"runtime": "pytorch", "version": torch.__version__, "load_ms": None,
                  "latency_ms": latency_stats(times), "times_ms": times,
                  "rss_bytes": {"before_load": rss_before, "peak": rss_peak}}
        _save_or_note(result, lambda: result_to_numpy(model(*inputs), torch), _outputs_path(config, "pytorch"))
    if config.get("onnx"):  # after measuring, so that exporting adds nothing to PyTorch's figures
        result["onnx_error"] = _export_onnx(torch, model, inputs, config["onnx"])
    return result


def _export_onnx(torch: Any, model: Any, inputs: list[Any], path: str) -> str | None:
    """Export with torch.onnx.export (the torch.export-based exporter, else the TorchScript one); None when it
    worked, else why not."""
    try:
        torch.onnx.export(model, tuple(inputs), path)
    except Exception as exc:
        try:
            torch.onnx.export(model, tuple(inputs), path, dynamo=False)
        except Exception:
            return _one_line(exc)
    return None


def _child_onnxruntime(config: dict[str, Any]) -> dict[str, Any]:
    rss_before = peak_rss_bytes()
    import onnxruntime as ort

    settings = _settings(config)
    options = ort.SessionOptions()
    options.intra_op_num_threads = settings.threads
    start = time.perf_counter()
    session = ort.InferenceSession(config["onnx"], options, providers=["CPUExecutionProvider"])
    load_ms = (time.perf_counter() - start) * 1e3
    arrays = [v for v in load_inputs(config["inputs"]) if isinstance(v, np.ndarray)]
    names = [i.name for i in session.get_inputs()]
    if len(names) != len(arrays):
        raise ValueError(f"the exported ONNX model takes {len(names)} input(s) ({', '.join(names)}), "
                         f"ptlite's forward {len(arrays)} tensor(s)")
    feed = dict(zip(names, arrays))
    times = time_calls(lambda: session.run(None, feed), settings.warmup, settings.runs)
    result = {"runtime": "onnxruntime", "version": ort.__version__, "load_ms": load_ms,
              "latency_ms": latency_stats(times), "times_ms": times,
              "rss_bytes": {"before_load": rss_before, "peak": peak_rss_bytes()}}
    _save_or_note(result, lambda: list(session.run(None, feed)), _outputs_path(config, "onnxruntime"))
    return result


_CHILDREN: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "ptlite": _child_ptlite, "pytorch": _child_pytorch, "onnxruntime": _child_onnxruntime}


# ----------------------------------------------------------------------------------------------------
# report


def _mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:.1f} MiB"


def _file_size(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n / 1024:.1f} KB"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}" if value < 10 else f"{value:.2f}" if value < 100 else f"{value:.1f}"


def describe_input(item: dict[str, Any]) -> str:
    """One input as the reports show it: 'x float32[1, 3, 224, 224]', or 'n = 3'."""
    if "shape" in item:
        return f"{item['name']} {item['dtype']}[{', '.join(str(d) for d in item['shape'])}]"
    return f"{item['name']} = {item['value']!r}"


def _blas_line(result: dict[str, Any]) -> str:
    if result.get("blas") is None:
        text = result.get("blas_note") or "unknown"
    elif not result["blas"]:
        text = "none found by threadpoolctl"
    else:
        text = "; ".join(f"{b['library']} {b['version']}, kernel {b['kernel']}, {b['threads']} thread(s)"
                         for b in result["blas"])
    slow = result.get("slow_blas_variables") or {}
    if slow:
        settings = ", ".join(f"{k}={v}" for k, v in slow.items())
        text += f" (note: {settings} is set and may select a slow kernel; --compare measures without it)"
    return text


def format_report(result: dict[str, Any]) -> str:
    """The human-readable report of a `measure` or `compare` result."""
    rss = result["rss_bytes"]
    load = result["load_ms"]
    lat = result["latency_ms"]
    where = "; ptlite measured in a fresh process" if result.get("compare") else ""
    lines = [
        f"model:    {result['model']} ({_file_size(result['file_bytes'])})",
        f"inputs:   {', '.join(describe_input(i) for i in result['inputs']) or 'none'}"
        + (f" ({result['input_source']})" if result.get("input_source") else ""),
        f"threads:  {result['threads']}{where}",
        f"BLAS:     {_blas_line(result)}",
        f"load:     first {_ms(load['first'])} ms (includes importing the kernels it needs), "
        f"median of {load['repeats']} more {_ms(load['median'])} ms",
        f"latency:  {result['runs']} run(s) after {result['warmup']} warm-up: min {_ms(lat['min'])} ms, "
        f"median {_ms(lat['median'])} ms, p90 {_ms(lat['p90'])} ms, mean {_ms(lat['mean'])} ms",
    ]
    if rss["peak"] is None:
        lines.append("memory:   peak RSS n/a (neither /proc/self/status nor getrusage is available here)")
    else:
        lines.append(f"memory:   peak RSS {_mib(rss['before_load'])} before load, {_mib(rss['after_load'])} after "
                     f"load, {_mib(rss['peak'])} after the runs (+{_mib(rss['peak'] - rss['before_load'])} for "
                     "the model and its runs)")
    if result.get("memory_plan"):
        lines.append(f"          memory plan: {MemoryPlanSummary(**result['memory_plan']).describe()}")
    if result.get("profile"):
        lines += ["", result["profile"]["text"]]
    if result.get("compare"):
        lines += ["", *_comparison_lines(result)]
    return "\n".join(lines)


def _title(name: str, r: dict[str, Any]) -> str:
    version = f" {r['version']}" if r.get("version") else ""
    return RUNTIME_TITLES[name] + version + (" eager" if name == "pytorch" else "")


def _comparison_lines(result: dict[str, Any]) -> list[str]:
    compare = result["compare"]
    rows = [(_title(name, r), r) for name, r in [("ptlite", result), *compare["runtimes"].items()]]
    width = max(len(title) for title, _ in rows)
    lines = [f"comparison with {compare['entry']}: same inputs, {result['threads']} thread(s), each runtime alone "
             f"in a fresh process, {' and '.join(compare['unset_variables'])} unset",
             f"  {'runtime':<{width}}  {'load ms':>8}  {'min ms':>8}  {'median ms':>9}  {'p90 ms':>8}  "
             f"{'peak RSS':>10}  ptlite/other (median)"]
    for title, r in rows:
        if "error" in r:
            fix = f": {r['install']}" if "install" in r else ""
            lines.append(f"  {title:<{width}}  {r['error']}{fix}")
            continue
        load = r["load_ms"]["first"] if isinstance(r.get("load_ms"), dict) else r.get("load_ms")
        lat = r["latency_ms"]
        ratio = f"{r['ratio']['median']:.2f}x" if "ratio" in r else ""
        lines.append(f"  {title:<{width}}  {_ms(load):>8}  {_ms(lat['min']):>8}  {_ms(lat['median']):>9}  "
                     f"{_ms(lat['p90']):>8}  {_mib(r['rss_bytes']['peak']):>10}  {ratio}".rstrip())
    lines.append("  ratio = ptlite / other: above 1, ptlite is slower. load: ptlite.load; ONNX Runtime's session; "
                 "PyTorch's model is built in Python (not timed)")
    checks = [(_title(name, r), r) for name, r in compare["runtimes"].items()
              if "outputs_check" in r or "outputs_error" in r]
    if checks:
        lines.append("outputs, ptlite against each (the last call's; within 1e-4 x max |other|, as ptlite compare):")
        for title, r in checks:
            check = r.get("outputs_check")
            if check is None:
                text = f"not checked: {r['outputs_error']}"
            elif check["match"]:
                text = f"{check['summary']} (largest relative difference {check['largest_relative']:.1e})"
            else:
                text = f"DIFFER: {check['summary']}"
            lines.append(f"  {title:<{width}}  {text}")
    return lines
