"""`ptlite bench`: load time, latency, memory, the per-operator profile, the JSON figures, input errors, and
--compare with eager PyTorch and ONNX Runtime (each in its own process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ptlite
from ptlite.errors import InputError
from ptlite.ir.graph import ValueSpec
from ptlite.tools import bench
from ptlite.tools.bench import runtimes
from ptlite.tools.cli import main

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore:.*torch.jit.*deprecated:FutureWarning")

SRC = os.path.dirname(os.path.dirname(os.path.abspath(ptlite.__file__)))
MODULE = "ptlite_bench_test_models"  # unique, so that no other test's module of the same name is reused
MODEL_SOURCE = textwrap.dedent("""
    import torch
    from torch import nn


    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.fc = nn.Linear(4, 5)

        def forward(self, x):
            return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


    def tiny():
        torch.manual_seed(0)
        return Tiny().eval()


    def tiny_reseeded():  # other weights: --compare must say the outputs differ
        torch.manual_seed(1)
        return Tiny().eval()


    class TwoOutputs(nn.Module):  # ONNX Runtime returns a flat list: matched to ptlite's outputs by position
        def __init__(self):
            super().__init__()
            self.tiny = Tiny()

        def forward(self, x):
            return self.tiny(x), x.amax(dim=(2, 3))


    def two_outputs():
        torch.manual_seed(0)
        return TwoOutputs().eval()
""")

# Makes `import torch` fail, to show that a command works without torch.
BLOCK_TORCH = textwrap.dedent("""
    import importlib.abc, sys
    class _NoTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError("torch is blocked")
    sys.meta_path.insert(0, _NoTorch())
""")

FAST = ("--runs", "3", "--warmup", "1", "--threads", "1")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The user's model file, and the model saved twice: exported (static shape) and scripted (dynamic shape)."""
    folder = tmp_path_factory.mktemp("bench")
    (folder / f"{MODULE}.py").write_text(MODEL_SOURCE)
    sys.path.insert(0, str(folder))
    try:
        import importlib

        model = importlib.import_module(MODULE).tiny()
        x = torch.randn(1, 3, 16, 16)
        static, dynamic = folder / "tiny.ptlite", folder / "tiny_dynamic.ptlite"
        ptlite.save(ptlite.capture(model, (x,), method="export"), static)
        ptlite.save(ptlite.capture(model, (x,), method="script"), dynamic)
        yield {"folder": folder, "static": static, "dynamic": dynamic}
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop(MODULE, None)


def cli(capsys, *argv) -> tuple[int, str, str]:
    """Run the command line in this process: (exit status, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def bench_json(capsys, tmp_path, *argv) -> tuple[str, dict]:
    path = tmp_path / "figures.json"
    code, out, err = cli(capsys, "bench", *argv, "--json", path)
    assert code == 0, err
    return out, json.loads(path.read_text())


def assert_clean_error(code: int, err: str, *expected: str) -> None:
    assert code == 2, f"exit status {code}, stderr: {err}"
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    headline = next((line for line in lines if "error:" in line), "")
    assert headline.startswith("ptlite"), err
    assert all(line.startswith("ptlite: ") for line in lines[:lines.index(headline)]), err  # progress lines only
    for text in expected:
        assert text in headline, f"expected {text!r} in the error line of: {err}"


def line_starting(out: str, prefix: str) -> str:
    lines = [line for line in out.splitlines() if line.startswith(prefix)]
    assert lines, f"no line starting with {prefix!r} in:\n{out}"
    return lines[0]


# ----------------------------------------------------------------------------------------------------
# the report


def test_bench_reports_load_latency_memory_and_blas(files, capsys):
    code, out, err = cli(capsys, "bench", files["static"], *FAST)
    assert code == 0, err
    assert "x float32[1, 3, 16, 16] (random, seed 0)" in line_starting(out, "inputs:")
    assert line_starting(out, "threads:") == "threads:  1"
    assert "BLAS:" in out
    load = line_starting(out, "load:")
    assert "first" in load and "median of 5 more" in load
    latency = line_starting(out, "latency:")
    assert "3 run(s) after 1 warm-up" in latency
    for stat in ("min", "median", "p90", "mean"):
        assert f"{stat} " in latency, latency
    memory = line_starting(out, "memory:")
    assert ("before load" in memory and "after the runs" in memory) or "n/a" in memory, memory
    assert "per-operator profile" not in out and "comparison" not in out


def test_bench_json_has_every_figure(files, capsys, tmp_path):
    _, figures = bench_json(capsys, tmp_path, files["static"], *FAST)
    assert figures["runtime"] == "ptlite" and figures["version"] == ptlite.__version__
    assert figures["file_bytes"] == os.path.getsize(files["static"])
    assert figures["inputs"] == [{"name": "x", "dtype": "float32", "shape": [1, 3, 16, 16]}]
    assert (figures["threads"], figures["warmup"], figures["runs"]) == (1, 1, 3)
    times = figures["times_ms"]
    assert len(times) == 3 and min(times) > 0
    latency = figures["latency_ms"]
    assert latency == pytest.approx({"min": min(times), "median": float(np.median(times)),
                                     "p90": float(np.percentile(times, 90)), "mean": float(np.mean(times))})
    assert figures["load_ms"]["first"] > 0 and figures["load_ms"]["median"] > 0
    assert figures["load_ms"]["repeats"] == bench.LOAD_REPEATS
    rss = figures["rss_bytes"]
    if rss["peak"] is not None:  # peak so far: it never goes down
        assert 0 < rss["before_load"] <= rss["after_load"] <= rss["peak"], rss
        assert figures["rss_source"]
    assert figures["blas"] is not None or "threadpoolctl" in figures["blas_note"]
    if figures["blas"]:
        assert figures["blas"][0]["threads"] == 1, figures["blas"]  # --threads 1 reached BLAS
    assert figures["profile"] is None and "compare" not in figures


def test_bench_profile_lists_the_models_operators(files, capsys, tmp_path):
    out, figures = bench_json(capsys, tmp_path, files["static"], *FAST, "--profile", "--top", "2")
    profile_text = out[out.index("per-operator profile"):]
    ops = ptlite.export_opnames(files["static"])
    assert ops == ["aten::conv2d", "aten::linear", "aten::mean.dim", "aten::relu"]
    for op in ops:
        assert op in profile_text, f"{op} missing from the profile:\n{profile_text}"
    assert "slowest 2 nodes" in profile_text
    profile = figures["profile"]
    assert sorted(o["op"] for o in profile["by_op"]) == ops
    assert sum(o["share"] for o in profile["by_op"]) == pytest.approx(1.0)
    assert len(profile["slowest"]) == 2
    assert profile["slowest"][0]["ms_per_run"] >= profile["slowest"][1]["ms_per_run"]
    assert profile["ms_in_operators"] <= profile["ms_per_run"]


# ----------------------------------------------------------------------------------------------------
# inputs


def test_dynamic_dimension_needs_input_shape(files, capsys, tmp_path):
    code, _, err = cli(capsys, "bench", files["dynamic"], *FAST)
    assert_clean_error(code, err, "input 'x'", "--input-shape")
    _, figures = bench_json(capsys, tmp_path, files["dynamic"], *FAST, "--input-shape", "2,3,8,8")
    assert figures["inputs"] == [{"name": "x", "dtype": "float32", "shape": [2, 3, 8, 8]}]


def test_inputs_from_npz_by_name_and_in_order(files, capsys, tmp_path):
    np.savez(tmp_path / "named.npz", x=np.ones((3, 3, 8, 8)))  # float64: converted to the model's float32
    np.savez(tmp_path / "ordered.npz", np.ones((2, 3, 8, 8), np.float32))
    out, figures = bench_json(capsys, tmp_path, files["dynamic"], *FAST, "--inputs", tmp_path / "named.npz")
    assert figures["inputs"] == [{"name": "x", "dtype": "float32", "shape": [3, 3, 8, 8]}]
    assert f"from {tmp_path / 'named.npz'}" in line_starting(out, "inputs:")
    _, figures = bench_json(capsys, tmp_path, files["dynamic"], *FAST, "--inputs", tmp_path / "ordered.npz")
    assert figures["inputs"][0]["shape"] == [2, 3, 8, 8]


def test_random_inputs_follow_the_specs():
    specs = [ValueSpec("image", dtype="float16", shape=(2, 3)), ValueSpec("tokens", dtype="int64", shape=(4, 50)),
             ValueSpec("mask", dtype="bool", shape=(4,)), ValueSpec("scale", type="float", default=0.5,
                                                                    has_default=True)]
    image, tokens, mask, scale = bench.random_inputs(specs)
    assert image.dtype == np.float16 and image.shape == (2, 3) and image.std() > 0
    assert tokens.dtype == np.int64 and 0 <= tokens.min() and tokens.max() < 10 and len(np.unique(tokens)) > 1
    assert mask.dtype == np.bool_ and not mask.any()
    assert scale == 0.5
    again = bench.random_inputs(specs)
    assert np.array_equal(again[0], image) and np.array_equal(again[1], tokens), "same seed, other inputs"
    with pytest.raises(InputError, match="input 'n' is int"):
        bench.random_inputs([ValueSpec("n", type="int")])
    with pytest.raises(InputError, match=r"input 'x' has a dynamic shape \(\?, 3\).*--input-shape 1,3"):
        bench.random_inputs([ValueSpec("x", dtype="float32", shape=(None, 3))])


@pytest.mark.parametrize("argv, expected", [
    (["{static}", "--input-shape", "1,3,16,16", "--input-shape", "1,3"], "1 tensor input(s) (x)"),
    (["{static}", "--input-shape", "2,3,16,16"], "input 'x' must have shape (1, 3, 16, 16)"),
    (["{static}", "--inputs", "{d}/x.npz", "--input-shape", "1,3,16,16"], "--inputs or --input-shape"),
    (["{static}", "--inputs", "{d}/missing.npz"], "missing.npz: no such file"),
    (["{static}", "--inputs", "{d}/wrong_name.npz"], "holds y; the inputs are x"),
    (["{d}/missing.ptlite"], "missing.ptlite: no such file"),
    (["{static}", "--runs", "0"], "--runs"),
    (["{static}", "--compare", "no_colon"], "must be 'module:function'"),
])
def test_errors_are_one_clear_line(files, capsys, tmp_path, argv, expected):
    np.savez(tmp_path / "wrong_name.npz", y=np.zeros((1, 3, 16, 16), np.float32))
    values = {"static": files["static"], "d": tmp_path}
    code, _, err = cli(capsys, "bench", *[a.format(**values) for a in argv], *FAST)
    assert_clean_error(code, err, expected)


def test_bench_needs_no_torch(files):
    code = BLOCK_TORCH + textwrap.dedent("""
        from ptlite.tools.cli import main
        status = main(sys.argv[1:])
        assert "torch" not in sys.modules, "torch was imported"
        sys.exit(status)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    argv = ["bench", str(files["static"]), *FAST, "--profile"]
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "latency:" in proc.stdout and "aten::conv2d" in proc.stdout


# ----------------------------------------------------------------------------------------------------
# memory and the measuring processes


def test_peak_rss_of_a_child_is_its_own():
    """getrusage's ru_maxrss of a process started by fork and exec counts its parent's peak (on Linux): this
    process has torch loaded, so a fresh NumPy-only child must report less."""
    parent = bench.peak_rss_bytes()
    if parent is None:
        pytest.skip("no peak RSS on this system")
    code = "from ptlite.tools.bench import peak_rss_bytes; print(peak_rss_bytes())"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    child = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                               check=True, timeout=60).stdout)
    assert 0 < child < parent, f"child peak RSS {child} bytes, parent (with torch) {parent} bytes"


def test_child_env_drops_slow_blas_variables_and_sets_threads(monkeypatch):
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Prescott")
    monkeypatch.setenv("OPENBLAS_L2_SIZE", "1")
    env = bench.child_env(3)
    assert "OPENBLAS_CORETYPE" not in env and "OPENBLAS_L2_SIZE" not in env
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "3"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == SRC


def test_compare_measures_pytorch_and_onnxruntime(files, capsys, tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(files["folder"]), os.environ.get("PYTHONPATH", "")]))
    out, figures = bench_json(capsys, tmp_path, files["static"], *FAST, "--compare", f"{MODULE}:tiny")
    table = out[out.index("comparison with"):]
    rows = {}
    for line in table.splitlines()[2:5]:
        title = line.split("  ")[1]
        rows[title.split()[0]] = line
    assert set(rows) == {"ptlite", "PyTorch", "ONNX"}, table
    assert rows["PyTorch"].rstrip().endswith("x") and rows["ONNX"].rstrip().endswith("x"), table
    assert "ptlite measured in a fresh process" in out
    runtimes = figures["compare"]["runtimes"]
    assert figures["compare"]["entry"] == f"{MODULE}:tiny"
    assert runtimes["pytorch"]["version"] == torch.__version__
    for name in ("pytorch", "onnxruntime"):
        other = runtimes[name]
        assert "error" not in other, f"{name}: {other.get('error')}"
        assert len(other["times_ms"]) == 3
        for stat in ("min", "median", "p90"):
            want = figures["latency_ms"][stat] / other["latency_ms"][stat]
            assert other["ratio"][stat] == pytest.approx(want), f"{name} {stat}"
        assert other["rss_bytes"]["peak"] is None or other["rss_bytes"]["peak"] > 0
    assert runtimes["onnxruntime"]["load_ms"] > 0
    for name in ("pytorch", "onnxruntime"):  # the same outputs, checked as ptlite compare does
        check = runtimes[name]["outputs_check"]
        assert check["match"] and check["largest_relative"] < 1e-5, f"{name}: {check}"
    assert "  ONNX Runtime " in out[out.index("outputs, ptlite against each"):]
    # PyTorch's process is bigger than ptlite's: each runtime was measured in its own process
    if figures["rss_bytes"]["peak"] is not None:
        assert figures["rss_bytes"]["peak"] < runtimes["pytorch"]["rss_bytes"]["peak"]


def test_compare_exits_1_when_the_outputs_differ(files, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(files["folder"]), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setattr(runtimes, "installed", lambda name: name == "torch")  # PyTorch only: quicker
    path = tmp_path / "figures.json"
    code, out, err = cli(capsys, "bench", files["static"], *FAST, "--compare", f"{MODULE}:tiny_reseeded",
                         "--json", path)
    assert code == 1, out + err
    check = json.loads(path.read_text())["compare"]["runtimes"]["pytorch"]["outputs_check"]
    assert not check["match"] and check["largest_relative"] > 1e-2, check
    assert "DIFFER: 1 of 1 output(s) differ: output (relative difference" in out  # the report is printed first
    verdict = "ptlite: --compare: the outputs differ from PyTorch: 1 of 1 output(s) differ"
    assert any(line.startswith(verdict) for line in err.splitlines()), err  # after the progress lines


def test_compare_matches_several_onnxruntime_outputs_by_position(files, capsys, tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(files["folder"]), os.environ.get("PYTHONPATH", "")]))
    import importlib

    model = importlib.import_module(MODULE).two_outputs()
    path = tmp_path / "two.ptlite"
    ptlite.save(ptlite.capture(model, (torch.randn(1, 3, 16, 16),), method="export"), path)
    out, figures = bench_json(capsys, tmp_path, path, *FAST, "--compare", f"{MODULE}:two_outputs")
    for name in ("pytorch", "onnxruntime"):
        check = figures["compare"]["runtimes"][name]["outputs_check"]
        assert check["match"] and check["summary"] == "all 2 output(s) match", f"{name}: {check}"
    assert figures["compare"]["runtimes"]["onnxruntime"]["outputs"] == ["0", "1"]


def test_save_outputs_keeps_numbers_and_number_lists(tmp_path):
    path = str(tmp_path / "o.npz")
    names = bench.save_outputs((np.ones(2), (np.int64(2), np.array(3)), None, "label", 1.5), path)
    assert names == ["0", "1", "4"]  # None and strings left out, as ONNX Runtime returns neither
    saved = bench.load_outputs(path, names)
    assert saved["1"].tolist() == [2, 3] and saved["4"] == 1.5


@pytest.mark.parametrize("package, install", [("torch", "pip install 'ptlite[export]'"),
                                              ("onnxruntime", "pip install onnxruntime")])
def test_compare_names_a_missing_package(files, capsys, tmp_path, monkeypatch, package, install):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(files["folder"]), os.environ.get("PYTHONPATH", "")]))
    # the other package counts as installed (without torch, ONNX Runtime is never started: nothing exports)
    monkeypatch.setattr(runtimes, "installed", lambda name: name != package)
    out, figures = bench_json(capsys, tmp_path, files["static"], *FAST, "--compare", f"{MODULE}:tiny")
    assert f"{package} is not installed: {install}" in out
    measured = figures["compare"]["runtimes"]
    assert measured["onnxruntime"]["install"] == install  # ONNX Runtime needs PyTorch to export the model
    if package == "onnxruntime":
        assert "ratio" in measured["pytorch"], measured["pytorch"]
    assert "latency:" in out and figures["latency_ms"]["median"] > 0  # ptlite's own figures are still there


def test_time_pair_alternates_which_runs_first():
    order: list[str] = []
    ta, tb = bench.time_pair(lambda: order.append("a"), lambda: order.append("b"), warmup=1, runs=4)
    assert len(ta) == len(tb) == 4 and all(t >= 0 for t in ta + tb)
    assert order == ["a", "b", "a", "b", "b", "a", "a", "b", "b", "a"]  # warm-up, then a first on even runs


def test_side_by_side_compares_results_and_times():
    x = np.arange(4.0)
    t = bench.side_by_side(lambda v: v * 2, lambda v: v * 2 + 0.5, [x], warmup=0, runs=3)
    assert t.max_diff == 0.5 and t.a_ms >= 0 and t.b_ms >= 0 and t.ratio > 0


def test_side_by_side_compares_structured_results():
    """A segmentation model returns a dict of arrays: compared leaf by leaf (the largest difference over all)."""
    x = np.arange(4.0)
    t = bench.side_by_side(lambda v: {"out": v, "aux": (v, v * 2)}, lambda v: {"out": v + 0.25, "aux": (v, v * 2 - 1)},
                           [x], warmup=0, runs=2)
    assert t.max_diff == 1.0
    nan_second = bench.side_by_side(lambda v: (v, v), lambda v: (v, np.where(v > 1, np.nan, v)), [x], 0, 1)
    assert nan_second.max_diff == np.inf  # NaN on one side, in a later output, is not hidden
    with pytest.raises(ValueError, match=r"differ in structure at result\['aux'\]"):
        bench.side_by_side(lambda v: {"aux": (v,)}, lambda v: {"aux": (v, v)}, [x], 0, 1)
    with pytest.raises(ValueError, match="differ in structure at result: \\['a'\\] vs \\['b'\\]"):
        bench.side_by_side(lambda v: {"a": v}, lambda v: {"b": v}, [x], 0, 1)
