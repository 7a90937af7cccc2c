"""`ptlite demo`: train a small CNN on scikit-learn's digits, capture it two ways, compare with PyTorch.

Everything happens locally and in seconds: the digits data set ships with scikit-learn (1797 8x8 images),
the model trains on the CPU, is captured with torch.jit.script and with torch.export, optimized for mobile
(`ptlite.optimize_for_mobile`: batch norm folded, weights prepacked, activations fused), saved, loaded with
`ptlite.load` and checked against PyTorch: test accuracy, largest logit difference, file size, load time
and latency. One check runs in a subprocess in which torch cannot be imported: the runtime does not need it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

try:  # the demo trains with torch; the torch-free check (run in a subprocess) imports this module without it
    import torch
    from torch import nn
except ImportError:
    torch = None  # type: ignore[assignment]

SEED = 0
TEST_SIZE = 360
EPOCHS, QUICK_EPOCHS = 8, 3
LATENCY_RUNS, QUICK_LATENCY_RUNS = 200, 40
BATCH_SIZE = 32
LABELS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
METHODS = ("script", "export")

# The subprocess's code: make `import torch` (and torch.*) fail, then run the check.
BLOCK_TORCH = """
import importlib.abc, sys
class _NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is blocked in this process")
        return None
sys.meta_path.insert(0, _NoTorch())
"""
_CHECK = "from ptlite.tools.demo import torch_free_check\ntorch_free_check(sys.argv[1], sys.argv[2])\n"


if torch is not None:

    class DigitsNet(nn.Module):
        """Three conv + batch norm + ReLU layers, max pooling, global average pooling, a linear classifier."""

        def __init__(self, classes: int = 10) -> None:
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                nn.MaxPool2d(2),
                nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                nn.AdaptiveAvgPool2d(1),
            )
            self.classifier = nn.Linear(64, classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.classifier(torch.flatten(self.features(x), 1))


@dataclass
class Digits:
    """The digits data set as float32 [N, 1, 8, 8] images in [0, 1] and int64 labels, split once for all."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


@dataclass
class Row:
    """One line of the results table."""

    name: str
    accuracy: float
    max_diff: float | None = None
    file_bytes: int | None = None
    load_ms: float | None = None
    latency_ms: float | None = None
    notes: list[str] = field(default_factory=list)


@contextmanager
def _quiet_jit() -> Iterator[None]:
    """Silence torch's deprecation warnings for torch.jit.script/save/load: the demo uses them on purpose."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*torch\.jit\..*deprecated", category=FutureWarning)
        yield


def load_digits_split() -> Digits:
    """scikit-learn's digits (bundled with it, nothing is downloaded), split with a fixed seed."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ImportError("the demo needs scikit-learn for its data set: pip install scikit-learn") from None
    data = load_digits()
    images = (np.asarray(data.images, dtype=np.float32) / 16.0)[:, None, :, :]
    labels = np.asarray(data.target, dtype=np.int64)
    order = np.random.default_rng(SEED).permutation(len(labels))
    test, train = order[:TEST_SIZE], order[TEST_SIZE:]
    return Digits(images[train], labels[train], images[test], labels[test])


def train(data: Digits, epochs: int) -> tuple[Any, float, float]:
    """Train DigitsNet with Adam; returns the model in eval mode, the last epoch's mean loss, the seconds.

    Training uses one thread: as fast for this small model, the same result on any machine, and no slowdown
    when other programs keep the cores busy.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train(data, epochs)
    finally:
        torch.set_num_threads(threads)


def _train(data: Digits, epochs: int) -> tuple[Any, float, float]:
    torch.manual_seed(SEED)
    model = DigitsNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    x, y = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
    generator = torch.Generator().manual_seed(SEED)
    start = time.perf_counter()
    mean_loss = float("nan")
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=generator)
        total = 0.0
        for i in range(0, len(y), BATCH_SIZE):
            batch = order[i:i + BATCH_SIZE]
            optimizer.zero_grad()
            loss = loss_fn(model(x[batch]), y[batch])
            loss.backward()
            optimizer.step()
            total += loss.detach().item() * len(batch)
        mean_loss = total / len(y)
    return model.eval(), mean_loss, time.perf_counter() - start


def median_ms(fn: Callable[[], Any], runs: int, warmup: int = 5) -> float:
    """Median wall time of `fn()` in milliseconds over `runs` calls, after `warmup` untimed calls."""
    from .bench import time_calls

    return statistics.median(time_calls(fn, warmup, runs))


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(logits, axis=1) == labels))


def capture_and_save(model: Any, example: Any, method: str, path: str) -> tuple[float, str]:
    """Capture with `method`, optimize for mobile (what `ptlite convert` does by default), save to `path` with the
    preprocessing (pixels already in [0, 1]) and labels; returns the seconds taken and what optimizing did."""
    import ptlite

    start = time.perf_counter()
    options = {}
    if method == "export":  # let the batch size vary, so the whole test set runs in one call
        options["dynamic_shapes"] = ({0: torch.export.Dim("batch", min=1, max=4096)},)
    captured = ptlite.capture(model, (example,), method=method, **options)
    program = ptlite.optimize_for_mobile(captured)
    ptlite.save(program, path, preprocessing="size=8 crop=no channels=L mean=0 std=1", labels=list(LABELS))
    nodes = [sum(1 for node in p.forward.walk() if node.op != "prim::Constant") for p in (captured, program)]
    did = f"{nodes[0]} -> {nodes[1]} operator nodes: {', '.join(program.metadata.get('passes', []))}"
    return time.perf_counter() - start, did


def run_ptlite(path: str, data: Digits, torch_logits: np.ndarray, runs: int) -> tuple[Row, np.ndarray]:
    """Load a saved program with ptlite and measure it against PyTorch's logits."""
    import ptlite

    load_ms = median_ms(lambda: ptlite.load(path), runs=5, warmup=1)
    module = ptlite.load(path)
    logits = np.asarray(module(data.x_test))
    one = np.ascontiguousarray(data.x_test[:1])
    row = Row(f"ptlite ({module.metadata.get('capture', '?')})", accuracy(logits, data.y_test),
              max_diff=float(np.max(np.abs(logits - torch_logits))), file_bytes=os.path.getsize(path),
              load_ms=load_ms, latency_ms=median_ms(lambda: module(one), runs))
    return row, logits


def run_pytorch(model: Any, data: Digits, out_dir: str, runs: int) -> tuple[Row, np.ndarray]:
    """PyTorch eager: accuracy, latency; file size and load time of the model saved with torch.jit.save."""
    with torch.inference_mode():
        logits = model(torch.from_numpy(data.x_test)).numpy()
        one = torch.from_numpy(data.x_test[:1])

        def infer() -> Any:
            return model(one)

        latency = median_ms(infer, runs)
    path = os.path.join(out_dir, "digits_torchscript.pt")
    with _quiet_jit():
        torch.jit.save(torch.jit.script(model), path)
        load_ms = median_ms(lambda: torch.jit.load(path), runs=5, warmup=1)
    row = Row("PyTorch eager", accuracy(logits, data.y_test), file_bytes=os.path.getsize(path),
              load_ms=load_ms, latency_ms=latency, notes=["file"])
    return row, logits


def torch_free_check(model_path: str, data_path: str) -> None:
    """Run in the subprocess: prove torch is unavailable, run the model, print the predictions as JSON."""
    try:
        import torch  # noqa: F401
        importable = True
    except ImportError:
        importable = False
    import ptlite

    with np.load(data_path) as data:
        x, y = data["x"], data["y"]
    logits = np.asarray(ptlite.load(model_path)(x))
    predictions = np.argmax(logits, axis=1)
    print(json.dumps({"torch_importable": importable, "torch_loaded": "torch" in sys.modules,
                      "accuracy": float(np.mean(predictions == y)), "predictions": predictions.tolist()}))


def run_without_torch(model_path: str, data: Digits, out_dir: str) -> dict[str, Any]:
    """Run `torch_free_check` in a fresh Python in which importing torch fails; returns its report."""
    data_path = os.path.join(out_dir, "digits_test.npz")
    np.savez(data_path, x=data.x_test, y=data.y_test)
    return json.loads(run_torch_free(_CHECK, [model_path, data_path], timeout=300)[-1])


def run_torch_free(code: str, args: list[str], timeout: float) -> list[str]:
    """Run Python `code` (with sys.argv[1:] = args) in a fresh process in which importing torch fails, this ptlite
    first on its path; returns its standard output's lines, or raises RuntimeError with its last error line."""
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # .../src
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run([sys.executable, "-c", BLOCK_TORCH + code, *args], env=env, capture_output=True,
                          text=True, timeout=timeout)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the torch-free subprocess failed: {last}")
    return proc.stdout.strip().splitlines()


def _cell(value: float | None, fmt: str, unit: str = "", star: str = "") -> str:
    return "-" if value is None else f"{value:{fmt}}{unit}{star}"


def format_table(rows: list[Row]) -> str:
    """The results as an aligned text table; '*' marks PyTorch's file numbers (a TorchScript file)."""
    header = ("", "test accuracy", "max |logit diff|", "file size", "load time", "latency (batch 1)")
    lines = [header]
    for row in rows:
        star = "*" if "file" in row.notes else " "
        size_kb = None if row.file_bytes is None else row.file_bytes / 1024
        lines.append((row.name, f"{row.accuracy * 100:.2f} %", _cell(row.max_diff, ".1e"),
                      _cell(size_kb, ".1f", " KB", star), _cell(row.load_ms, ".2f", " ms", star),
                      _cell(row.latency_ms, ".3f", " ms")))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for line in lines:
        cells = [line[0].ljust(widths[0])]
        cells += [cell.rjust(width) for cell, width in zip(line[1:], widths[1:], strict=True)]
        out.append("  " + "  ".join(cells).rstrip())
    return "\n".join(out)


def agreement(rows: list[Row], predictions: dict[str, np.ndarray]) -> bool:
    """Whether every row has the same accuracy and every run predicted the same class for every image."""
    reference = next(iter(predictions.values()))
    same_predictions = all(np.array_equal(p, reference) for p in predictions.values())
    return same_predictions and len({r.accuracy for r in rows}) == 1


def _write_sample(data: Digits, out_dir: str) -> str:
    """The first test image as an .npy file, to try `ptlite run` on."""
    sample_path = os.path.join(out_dir, f"test_digit_{int(data.y_test[0])}.npy")
    np.save(sample_path, np.ascontiguousarray(data.x_test[:1]))
    return sample_path


def run(quick: bool = False, out_dir: str | None = None) -> int:
    """The whole demo; prints as it goes and returns 0 when ptlite agrees with PyTorch, 1 when it does not."""
    if torch is None:
        raise ImportError("the demo trains a model with PyTorch, which is not installed: "
                          "pip install 'ptlite[export]'")
    data = load_digits_split()
    out_dir = out_dir or tempfile.mkdtemp(prefix="ptlite-demo-")
    os.makedirs(out_dir, exist_ok=True)
    epochs, runs = (QUICK_EPOCHS, QUICK_LATENCY_RUNS) if quick else (EPOCHS, LATENCY_RUNS)

    print("ptlite demo: a small CNN on scikit-learn's digits (8x8 grayscale images, 10 classes)")
    print(f"  data:  {len(data.y_train)} training and {len(data.y_test)} test images "
          f"(fixed split, seed {SEED})")
    model, loss, seconds = train(data, epochs)
    params = sum(p.numel() for p in model.parameters())
    print(f"  model: DigitsNet, 3 conv + batch norm + ReLU layers, {params} parameters; "
          f"trained {epochs} epochs in {seconds:.1f} s (final loss {loss:.3f})")

    example = torch.from_numpy(data.x_test[:2])
    paths = {}
    for method in METHODS:
        paths[method] = os.path.join(out_dir, f"digits_{method}.ptlite")
        seconds, did = capture_and_save(model, example, method, paths[method])
        how = "torch.jit.script" if method == "script" else "torch.export"
        print(f"  captured with {how}, optimized for mobile and saved in {seconds:.1f} s -> {paths[method]}")
        print(f"    optimized: {did}")

    torch_row, torch_logits = run_pytorch(model, data, out_dir, runs)
    rows, predictions = [torch_row], {"PyTorch": np.argmax(torch_logits, axis=1)}
    for method in METHODS:
        row, logits = run_ptlite(paths[method], data, torch_logits, runs)
        rows.append(row)
        predictions[row.name] = np.argmax(logits, axis=1)
    report = run_without_torch(paths["script"], data, out_dir)
    if report["torch_importable"] or report["torch_loaded"]:
        raise RuntimeError("the torch-free check could import torch; it proves nothing")
    rows.append(Row("ptlite (script), no torch", report["accuracy"]))
    predictions["ptlite without torch"] = np.asarray(report["predictions"])

    print()
    print(format_table(rows))
    print("  * for comparison: the same model saved with torch.jit.save and read back with torch.jit.load")
    print(f"  the last row ran in a separate Python process in which 'import torch' fails "
          f"(accuracy {report['accuracy'] * 100:.2f} %)")
    agree = agreement(rows, predictions)
    print()
    if agree:
        print("result: ptlite matches PyTorch: the same accuracy and the same prediction for every test "
              "image, with both capture methods and without torch.")
    else:
        print("result: MISMATCH: ptlite's predictions differ from PyTorch's; this is a bug, please report it")

    sample_path = _write_sample(data, out_dir)
    print()
    print(f"The files are in {out_dir}, with their labels and preprocessing. Try next:")
    print(f"  ptlite inspect {paths['export']}")
    print(f"  ptlite ops {paths['script']} --yaml")
    print(f"  ptlite run {paths['script']} {sample_path} --top-k 3")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(run(quick="--quick" in sys.argv))
