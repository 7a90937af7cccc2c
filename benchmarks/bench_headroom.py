"""What a native kernel would gain: how much of a model's run time goes to the NumPy primitives that have no fast
path, measured by swapping each for a timing stand-in that does a known fraction of its work.

    python benchmarks/bench_headroom.py efficientnet_b0.ptlite mobilenet_v2.ptlite [--runs 40] [--out docs/headroom.md]

Each model runs as loaded and with one stand-in at a time, in alternating calls in one process (bench.time_pair),
so that the VM's drift hits both alike. A stand-in gives wrong outputs: it is for timing only, and the script
checks that it changed the output (otherwise the model has no such work, and the row says so). The stand-ins:

- silu: the SiLU fused into prepacked and pointwise-depthwise convolutions, x / (1 + exp(-x)) in four NumPy passes
  (~3 ns an element here, two thirds of it NumPy's float32 exp), replaced by one multiply pass (~0.15 ns): the
  floor, where the activation costs next to nothing. PyTorch's SiLU costs ~1.1 ns an element on one thread here
  (torch.nn.functional.silu on 64K-1M floats), so a native SiLU as fast as PyTorch's would gain ~70 % of this.
- depthwise: the tap sums of depthwise convolutions (prepacked.depthwise_sum: np.einsum, one pass over the output
  per tap) run only the first third of the kernel's rows (rounded up: 1 of 3, 2 of 5): a kernel ~3x faster.
- silu + depthwise: both at once.

The "as loaded" column drifts with the VM between rows; the ratio, from alternating calls, is the figure to read.
A ratio of 0.60 means the model would take 60 % of its time if that work cost what the stand-in costs. Needs only
NumPy; unset OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE on machines that set them.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from bench_models import cpu_name  # this directory's: the same machine line as docs/benchmarks.md

import ptlite
import ptlite.backends.numpy.conv_block as conv_block
import ptlite.backends.numpy.prepacked as prepacked
from ptlite.tools.bench import random_inputs, time_pair
from ptlite.tools.compare import flatten_outputs


def _one_pass_silu(x: np.ndarray, scratch: np.ndarray) -> None:
    np.multiply(x, x.dtype.type(0.5), out=x)


@contextlib.contextmanager
def silu_standin() -> Iterator[None]:
    real = prepacked._SMOOTH["silu"]
    prepacked._SMOOTH["silu"] = _one_pass_silu
    try:
        yield
    finally:
        prepacked._SMOOTH["silu"] = real


@contextlib.contextmanager
def depthwise_standin() -> Iterator[None]:
    real = prepacked.depthwise_sum

    def third(xp, taps, kernel_hw, stride, dilation, out_hw, out4):
        rows = math.ceil(kernel_hw[0] / 3)
        return real(xp, taps[:rows], (rows, kernel_hw[1]), stride, dilation, out_hw, out4)

    prepacked.depthwise_sum = conv_block.depthwise_sum = third
    try:
        yield
    finally:
        prepacked.depthwise_sum = conv_block.depthwise_sum = real


@contextlib.contextmanager
def both_standins() -> Iterator[None]:
    with silu_standin(), depthwise_standin():
        yield


COMBINED = "silu + depthwise"
STANDINS: dict[str, Callable[[], contextlib.AbstractContextManager]] = {
    "silu": silu_standin,
    "depthwise": depthwise_standin,
    COMBINED: both_standins,  # measured only where the model has both
}


def _flat(result) -> np.ndarray:
    """Every array of a result (tuples, lists, dicts: a segmentation model's), as one float64 vector."""
    return np.concatenate([np.asarray(leaf, dtype=np.float64).ravel() for _, leaf in flatten_outputs(result)])


def measure(path: str, runs: int, warmup: int) -> dict[str, tuple[float, float, float] | None]:
    """Per stand-in: (median ms as loaded, median ms with the stand-in, median of the per-pair ratios), or None
    when the stand-in leaves the output unchanged (the model has no such work; for the combined one: lacks a
    part)."""
    module = ptlite.load(path)
    inputs = random_inputs(module.input_specs, [])
    reference = _flat(module(*inputs))
    results: dict[str, tuple[float, float, float] | None] = {}
    for name, standin in STANDINS.items():
        if name == COMBINED and None in (results["silu"], results["depthwise"]):
            results[name] = None  # the same as the one part the model has
            continue
        with standin():
            changed = not np.array_equal(_flat(module(*inputs)), reference)
        if not changed:
            results[name] = None
            continue

        def with_standin(standin=standin) -> None:
            with standin():
                module(*inputs)

        plain, swapped = time_pair(lambda: module(*inputs), with_standin, warmup, runs)
        results[name] = (float(np.median(plain)), float(np.median(swapped)),
                         float(np.median(np.array(swapped) / np.array(plain))))
    return results


def table(rows: dict[str, dict[str, tuple[float, float, float] | None]]) -> str:
    lines = ["| model | stand-in | as loaded (ms) | with the stand-in (ms) | ratio |", "|---|---|---:|---:|---:|"]
    for model, results in rows.items():
        for name, r in results.items():
            absent = "the model lacks one of the two" if name == COMBINED else "no such work in the model"
            cells = ["-", "-", absent] if r is None else [f"{r[0]:.1f}", f"{r[1]:.1f}", f"{r[2]:.2f}"]
            lines.append(f"| {model} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", help=".ptlite files (shapes as recorded, random inputs, seed 0)")
    parser.add_argument("--runs", type=int, default=40, help="timed calls of each variant (default 40)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--out", help="also write the table, with how it was made, to this markdown file")
    args = parser.parse_args()
    rows = {Path(p).stem: measure(p, args.runs, args.warmup) for p in args.models}
    text = table(rows)
    print(text)
    if args.out:
        from threadpoolctl import threadpool_info

        blas = ", ".join(f"{i['internal_api']} {i['version']} {i.get('architecture', '')} x{i['num_threads']}"
                         for i in threadpool_info() if i["user_api"] == "blas")
        paragraphs = [p.strip() for p in __doc__.split("\n\n")]
        command = f"python benchmarks/bench_headroom.py {' '.join(args.models)} --runs {args.runs}"
        doc = "\n\n".join([
            "# Headroom: what native kernels would gain",
            paragraphs[0],
            f"Written by `{command}` (files from `ptlite convert ptlite.tools.zoo:NAME --input-shape 1,3,224,224`); "
            "batch 1, medians of the alternating calls.",
            *paragraphs[2:5],
            f"Machine: {cpu_name()}, {os.cpu_count()} cores; NumPy {np.__version__}, BLAS (threadpoolctl) {blas}.",
            text,
        ]) + "\n"
        Path(args.out).write_text(doc)


if __name__ == "__main__":
    main()
