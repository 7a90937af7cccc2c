"""Size, agreement with float32 and latency of quantized models, side by side: ptlite's fp16_weights and int8_static
files, ONNX Runtime's int8 (onnxruntime.quantization.quantize_static: QDQ, per-channel weights, the same calibration
images) and PyTorch's lite interpreter running its qnnpack int8 (torchvision's quantizable model with the same
weights: fuse_model, qconfig 'qnnpack', prepare, calibrate, convert, then _save_for_lite_interpreter).

    python benchmarks/bench_quantized.py [--models mobilenet_v2,resnet18] [--runs 20] [--rounds 3]
                                         [--calibration 32] [--evaluation 64] [--out docs/benchmarks-quantized.md]

Models are ptlite.tools.zoo's (re-drawn weights, batch-norm statistics re-estimated on photographs). Calibration
and evaluation images are different varied crops of scikit-learn's sample photographs (zoo.varied_crops, seeds 1 and
2). A preparation process writes every file and computes each int8 model's agreement with the float32 PyTorch model
on the evaluation images: top-1 (the same class) and top-5 (the share of float32's five best classes among the
int8 model's five). Then, one at a time and in interleaved rounds, a fresh process per runtime times batch 1 with 2
threads (median over every timed run; ratios are the median of the per-round ratios). OPENBLAS_CORETYPE /
OPENBLAS_L2_SIZE are unset in the child processes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_models import child_env, cpu_name, peak_rss_mb, short_error, timeit  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
THREADS = 2
SIZE = 224
# runtime -> (what the table calls it, file suffix)
RUNTIMES = {
    "ptlite_fp32": ("ptlite float32 (native)", ".ptlite"),
    "ptlite_fp16": ("ptlite fp16_weights (native)", ".fp16.ptlite"),
    "ptlite_int8": ("ptlite int8_static", ".int8.ptlite"),
    "ptlite_torch_int8": ("ptlite, PyTorch's qnnpack int8 captured", ".torch-int8.ptlite"),
    "ort_fp32": ("ONNX Runtime float32", ".onnx"),
    "ort_int8": ("ONNX Runtime int8 (QDQ)", ".int8.onnx"),
    "lite_fp32": ("lite interpreter float32", ".ptl"),
    "lite_int8": ("lite interpreter qnnpack int8", ".int8.ptl"),
}


# --- preparation (a child process with torch) -----------------------------------------------------------------------

def agreement(float_logits: Any, logits: Any) -> dict[str, float]:
    import numpy as np

    float_logits, logits = np.asarray(float_logits), np.asarray(logits)
    top1 = float(np.mean(np.argmax(float_logits, 1) == np.argmax(logits, 1)))
    want5, got5 = np.argsort(-float_logits, 1)[:, :5], np.argsort(-logits, 1)[:, :5]
    top5 = float(np.mean([len(set(a) & set(b)) / 5 for a, b in zip(want5, got5)]))
    return {"top1": top1, "top5": top5}


def prepare_ptlite(model: Any, calibration: Any, evaluation: Any, float_logits: Any, base: str) -> dict:
    import numpy as np
    import torch

    import ptlite

    program = ptlite.capture(model, (torch.from_numpy(calibration[:1]),), method="export")
    samples = [calibration[i:i + 1] for i in range(len(calibration))]
    results = {}
    for key, make in (("ptlite_fp32", lambda: program),
                      ("ptlite_fp16", lambda: ptlite.quantize(program, "fp16_weights")),
                      ("ptlite_int8", lambda: ptlite.quantize(program, "int8_static", samples))):
        try:
            start = time.perf_counter()
            made = make()
            seconds = time.perf_counter() - start
            path = base + RUNTIMES[key][1]
            ptlite.save(ptlite.optimize_for_mobile(made), path)
            module = ptlite.load(path)
            logits = np.concatenate([np.asarray(module(evaluation[i:i + 1])) for i in range(len(evaluation))])
            results[key] = {"bytes": os.path.getsize(path), **agreement(float_logits, logits),
                            "note": f"quantized in {seconds:.1f} s" if key != "ptlite_fp32" else ""}
        except Exception as exc:
            results[key] = {"error": short_error(exc)}
    return results


def prepare_ort(model: Any, calibration: Any, evaluation: Any, float_logits: Any, base: str) -> dict:
    import warnings

    import numpy as np
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    fp32, int8 = base + RUNTIMES["ort_fp32"][1], base + RUNTIMES["ort_int8"][1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.from_numpy(calibration[:1]),), fp32, dynamo=False, input_names=["x"])

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter([{"x": calibration[i:i + 1]} for i in range(len(calibration))])

        def get_next(self) -> dict | None:
            return next(self.items, None)

    start = time.perf_counter()
    quantize_static(fp32, int8, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    seconds = time.perf_counter() - start
    results = {"ort_fp32": {"bytes": os.path.getsize(fp32), "note": ""}}
    session = ort.InferenceSession(int8, providers=["CPUExecutionProvider"])
    logits = np.concatenate([session.run(None, {"x": evaluation[i:i + 1]})[0] for i in range(len(evaluation))])
    results["ort_int8"] = {"bytes": os.path.getsize(int8), **agreement(float_logits, logits),
                           "note": f"quantized in {seconds:.1f} s"}
    return results


def prepare_lite(name: str, model: Any, calibration: Any, evaluation: Any, float_logits: Any, base: str) -> dict:
    """The float model and its qnnpack int8 twin (torchvision's quantizable model, the same weights) saved for the
    lite interpreter; ptlite's capture of the int8 twin."""
    import numpy as np
    import torch
    import torch.ao.quantization as tq
    import torchvision

    import ptlite

    torch.jit.script(model)._save_for_lite_interpreter(base + RUNTIMES["lite_fp32"][1])
    results = {"lite_fp32": {"bytes": os.path.getsize(base + RUNTIMES["lite_fp32"][1]), "note": ""}}
    torch.backends.quantized.engine = "qnnpack"
    twin = getattr(torchvision.models.quantization, name)(weights=None, quantize=False)
    twin.load_state_dict(model.state_dict())
    twin.eval().fuse_model(is_qat=False)
    twin.qconfig = tq.get_default_qconfig("qnnpack")
    tq.prepare(twin, inplace=True)
    with torch.no_grad():
        for i in range(len(calibration)):
            twin(torch.from_numpy(calibration[i:i + 1]))
    tq.convert(twin, inplace=True)
    with torch.no_grad():
        logits = np.concatenate([twin(torch.from_numpy(evaluation[i:i + 1])).numpy() for i in range(len(evaluation))])
    scripted = torch.jit.script(twin)
    scripted._save_for_lite_interpreter(base + RUNTIMES["lite_int8"][1])
    results["lite_int8"] = {"bytes": os.path.getsize(base + RUNTIMES["lite_int8"][1]),
                            **agreement(float_logits, logits), "note": "torchvision quantizable twin"}
    try:
        program = ptlite.capture(scripted, (torch.from_numpy(calibration[:1]),), method="script")
        path = base + RUNTIMES["ptlite_torch_int8"][1]
        ptlite.save(ptlite.optimize_for_mobile(program), path)
        module = ptlite.load(path)
        got = np.concatenate([np.asarray(module(evaluation[i:i + 1])) for i in range(len(evaluation))])
        results["ptlite_torch_int8"] = {"bytes": os.path.getsize(path), **agreement(float_logits, got),
                                        "note": "the same int8 model, captured by script"}
    except Exception as exc:
        results["ptlite_torch_int8"] = {"error": short_error(exc)}
    return results


def prepare(name: str, base: str, calibration_count: str, evaluation_count: str) -> dict:
    import numpy as np
    import torch

    from ptlite.tools import zoo

    torch.set_num_threads(THREADS)
    model = getattr(zoo, name)()
    calibration = zoo.varied_crops(int(calibration_count), SIZE, seed=1)
    evaluation = zoo.varied_crops(int(evaluation_count), SIZE, seed=2)
    np.save(base + ".input.npy", evaluation[:1])
    with torch.inference_mode():
        float_logits = np.concatenate([model(torch.from_numpy(evaluation[i:i + 1])).numpy()
                                       for i in range(len(evaluation))])
    results: dict[str, Any] = {}
    for step in (lambda: prepare_ptlite(model, calibration, evaluation, float_logits, base),
                 lambda: prepare_ort(model, calibration, evaluation, float_logits, base),
                 lambda: prepare_lite(name, model, calibration, evaluation, float_logits, base)):
        try:
            results.update(step())
        except Exception as exc:
            results.setdefault("errors", []).append(short_error(exc))
    return results


# --- timing (a fresh child process per runtime) ---------------------------------------------------------------------

def time_runtime(kind: str, base: str, warmup: str, runs: str) -> dict:
    import numpy as np

    x = np.load(base + ".input.npy")
    path = base + RUNTIMES[kind][1]
    if kind.startswith("ptlite"):
        import ptlite

        module = ptlite.load(path)
        call = lambda: module(x)  # noqa: E731
    elif kind.startswith("ort"):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = THREADS
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        call = lambda: session.run(None, {"x": x})  # noqa: E731
    else:
        import torch
        from torch.jit.mobile import _load_for_lite_interpreter

        torch.set_num_threads(THREADS)
        torch.backends.quantized.engine = "qnnpack"
        module = _load_for_lite_interpreter(path)
        tensor = torch.from_numpy(x)
        call = lambda: module(tensor)  # noqa: E731
    return {"times": timeit(call, int(warmup), int(runs)), "rss_mb": peak_rss_mb()}


def run_child(*args: str) -> dict:
    result = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", *args], capture_output=True,
                            text=True, env=child_env())
    if result.returncode != 0:
        lines = [line for line in result.stderr.strip().splitlines() if line.strip()] or [f"exit {result.returncode}"]
        return {"error": lines[-1].strip()[:300]}
    return json.loads(result.stdout.strip().splitlines()[-1])


def bench_model(name: str, args: argparse.Namespace, tmp: str) -> dict:
    base = str(Path(tmp) / name)
    prepared = run_child("prepare", name, base, str(args.calibration), str(args.evaluation))
    if "error" in prepared:
        raise SystemExit(f"{name}: preparation failed: {prepared['error']}")
    kinds = [k for k in RUNTIMES if k in prepared and "error" not in prepared[k]]
    times: dict[str, list[float]] = {k: [] for k in kinds}
    per_round: dict[str, list[float]] = {k: [] for k in kinds}
    for r in range(args.rounds):
        order = kinds if r % 2 == 0 else kinds[::-1]
        for kind in order:
            result = run_child(kind, base, str(args.warmup), str(args.runs))
            if "error" in result:
                prepared[kind] = {**prepared[kind], "error": result["error"]}
                continue
            times[kind] += result["times"]
            per_round[kind].append(statistics.median(result["times"]))
        print(f"  {name} round {r + 1}/{args.rounds}", file=sys.stderr)
    return {"name": name, "prepared": prepared, "times": times, "per_round": per_round}


def table(rows: list[dict]) -> list[str]:
    lines = ["| model | runtime | file | x float32 file | top-1 agreement | top-5 agreement | latency | "
             "x ptlite float32 | x ONNX Runtime int8 |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        prepared, per_round = row["prepared"], row["per_round"]
        fp32_file = {"ptlite": prepared.get("ptlite_fp32", {}).get("bytes"),
                     "ort": prepared.get("ort_fp32", {}).get("bytes"),
                     "lite": prepared.get("lite_fp32", {}).get("bytes")}
        base_rounds, ort_rounds = per_round.get("ptlite_fp32", []), per_round.get("ort_int8", [])
        for kind, (label, _) in RUNTIMES.items():
            info = prepared.get(kind)
            if info is None:
                continue
            if "error" in info and not row["times"].get(kind):
                lines.append(f"| {row['name']} | {label} | {info['error'][:80]} | | | | | | |")
                continue
            family = "ptlite" if kind.startswith("ptlite") else kind.split("_")[0]
            size = info.get("bytes")
            ref = fp32_file[family] if kind != "ptlite_torch_int8" else fp32_file["ptlite"]
            rounds = per_round.get(kind, [])
            ratios = [a / b for a, b in zip(rounds, base_rounds)]
            file_cells = f"{size / 1e6:.1f} MB | {size / ref:.3f}" if size and ref else "- | -"
            agree_cells = f"{info['top1']:.0%} | {info['top5']:.0%}" if "top1" in info else "- | -"
            median = statistics.median(row["times"][kind]) if row["times"].get(kind) else None
            latency = f"{median:.2f} ms" if median else info.get("error", "-")[:60]
            ratio = f"{statistics.median(ratios):.2f}" if ratios else "-"
            to_ort = [a / b for a, b in zip(rounds, ort_rounds)] if kind.endswith("int8") else []
            ort_ratio = f"{statistics.median(to_ort):.2f}" if to_ort else "-"
            lines.append(f"| {row['name']} | {label} | {file_cells} | {agree_cells} | {latency} | {ratio} | "
                         f"{ort_ratio} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilenet_v2,resnet18")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--calibration", type=int, default=32)
    parser.add_argument("--evaluation", type=int, default=64)
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks-quantized.md"))
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            rows.append(bench_model(name, args, tmp))
    load_after = os.getloadavg()[0]
    command = "python benchmarks/bench_quantized.py " + " ".join(sys.argv[1:])
    notes = [f"- {row['name']}: " + "; ".join(
        f"{RUNTIMES[k][0]}: {v['note']}" for k, v in row["prepared"].items() if isinstance(v, dict) and v.get("note"))
        for row in rows]
    text = [
        "# Quantized models: size, agreement with float32, latency", "",
        f"`{command.strip()}` on {cpu_name()}, {THREADS} threads, batch 1, {SIZE}x{SIZE}; load average "
        f"{load_before:.2f} before, {load_after:.2f} after. Agreement: with the float32 PyTorch model over "
        f"{args.evaluation} varied crops of scikit-learn's sample photographs (top-1: the same class; top-5: the "
        f"share of its five best classes among the int8 model's five); calibration on {args.calibration} other "
        "crops. Latency: median of every timed run; ratios: median of the per-round ratios to ptlite's float32 "
        "file on the native backend, and for the int8 runtimes to ONNX Runtime's int8.", "",
        *table(rows), "",
        "Notes:", *notes, "",
        "ptlite's int8 files run on the native backend's int8 kernels (linear_int8, dense and depthwise "
        "conv2d_int8, add_int8, quantize / dequantize, uint8 max pooling: bit for bit the NumPy reference) as steps "
        "of the native executor's plans, as the float32 files' fused steps run: each model in one call into C.", "",
    ]
    Path(args.out).write_text("\n".join(text))
    print("\n".join(text))


CHILDREN = {"prepare": prepare, **{k: (lambda kind: (lambda *a: time_runtime(kind, *a)))(k) for k in RUNTIMES}}

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, *rest = sys.argv[2:]
        print(json.dumps(CHILDREN[kind](*rest)))
    else:
        main()
