"""The `ptlite` command line: convert, run, ops, inspect, and its one-line errors with exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ptlite
from ptlite.passes import BLOCKLIST_KEY
from ptlite.tools.cli import main

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore:.*torch.jit.*deprecated:FutureWarning")

SRC = os.path.dirname(os.path.dirname(os.path.abspath(ptlite.__file__)))

# A user's own model file, as `ptlite convert` finds it: a module in the current directory.
MODEL_SOURCE = textwrap.dedent("""
    import torch
    from torch import nn


    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(4, 5)

        def forward(self, x):
            return self.fc(torch.flatten(self.pool(torch.relu(self.conv(x))), 1))

        @torch.jit.export
        def embed(self, x):
            return torch.flatten(self.pool(self.conv(x)), 1)


    def tiny():
        torch.manual_seed(0)
        return Tiny().eval()


    def not_a_model():
        return 42


    def tiny_reseeded():  # the same architecture with other weights: what `compare` must catch
        torch.manual_seed(1)
        return Tiny().eval()


    class Pair(nn.Module):  # two outputs, as a dict: compared output by output
        def forward(self, x):
            return {"sum": x.sum(dim=1), "argmax": x.argmax(dim=1)}


    def pair():
        return Pair().eval()


    class Broken(nn.Module):  # a reference that fails: compare says it was PyTorch's side, in one line
        def forward(self, x):
            raise RuntimeError("this model fails" + chr(10) + "at a second line")


    def broken():
        return Broken()
""")
MODULE = "ptlite_cli_test_models"  # unique, so that no other test's module of the same name is reused

# Makes `import torch` fail, to show that a command works without torch.
BLOCK_TORCH = textwrap.dedent("""
    import importlib.abc, sys
    class _NoTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError("torch is blocked")
    sys.meta_path.insert(0, _NoTorch())
""")


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Run the command line in this process: (exit status, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_clean_error(code: int, err: str, expected: str) -> None:
    assert code == 2, f"exit status {code}, stderr: {err}"
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith("ptlite") and ": error:" in line]
    assert len(errors) == 1, f"expected one 'ptlite...: error:' line in: {err}"
    assert all(line.startswith("ptlite: ") for line in lines[:errors[0]]), f"only progress lines come before: {err}"
    headline = lines[errors[0]]
    assert expected in headline, f"expected {expected!r} in the error line of: {err}"


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A folder with the user's model file, and the tiny model converted three ways (export, script, file)."""
    folder = tmp_path_factory.mktemp("cli")
    (folder / f"{MODULE}.py").write_text(MODEL_SOURCE)
    cwd, path = os.getcwd(), list(sys.path)
    os.chdir(folder)
    try:
        files = {"folder": folder}
        code = main(["convert", f"{MODULE}:tiny", "--input-shape", "1,3,16,16", "--method", "export",
                     "-o", "tiny_export.ptlite"])
        assert code == 0
        code = main(["convert", f"{MODULE}:tiny", "--method", "script", "--preserve-method", "embed",
                     "-o", "tiny_script.ptlite"])
        assert code == 0
        model = sys.modules[MODULE].tiny()
        torch.jit.save(torch.jit.script(model), str(folder / "tiny.pt"))
        files.update(export=folder / "tiny_export.ptlite", script=folder / "tiny_script.ptlite",
                     model=model, jit=folder / "tiny.pt")
        x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
        np.save(folder / "x.npy", x)
        files["x"] = x
        yield files
    finally:
        os.chdir(cwd)
        sys.path[:] = path


def torch_forward(model, x: np.ndarray, method: str = "forward") -> np.ndarray:
    with torch.no_grad():
        return getattr(model, method)(torch.from_numpy(x)).numpy()


def write_png(path, height: int = 40, width: int = 30, seed: int = 0) -> None:
    from PIL import Image

    pixels = (np.random.default_rng(seed).random((height, width, 3)) * 255).astype(np.uint8)
    Image.fromarray(pixels).save(path)


# ----------------------------------------------------------------------------------------------------
# convert


def test_convert_module_function_reports_and_matches_torch(work, capsys, monkeypatch):
    monkeypatch.chdir(work["folder"])
    code, out, err = cli(capsys, "convert", f"{MODULE}:tiny", "--input-shape", "1,3,16,16",
                         "-o", "again.ptlite")
    assert code == 0, err
    assert "with export" in out  # auto tries torch.export first
    assert "operators: 4" in out  # conv + relu fused, conv and linear prepacked
    assert "weights:   4 tensors, 548 B" in out  # conv 4*3*3*3 + 4, linear 5*4 + 5 float32 values
    size = os.path.getsize(work["folder"] / "again.ptlite") / 1024
    assert f"wrote again.ptlite ({size:.1f} KB; needs ptlite >= 0.1.0)" in out
    module = ptlite.load(work["folder"] / "again.ptlite")
    got = module(work["x"])
    want = torch_forward(work["model"], work["x"])
    assert np.abs(got - want).max() <= 1e-5, f"max |diff| {np.abs(got - want).max()}"


def test_convert_blocklist_skips_those_passes_in_the_file(work, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(work["folder"])
    out_path = tmp_path / "blocked.ptlite"
    code, out, err = cli(capsys, "convert", f"{MODULE}:tiny", "--method", "script", "--blocklist", "WINOGRAD",
                         "--blocklist", "FUSE_ACTIVATIONS", "-o", out_path)
    assert code == 0, err
    program = ptlite.load_program(out_path)
    assert program.metadata[BLOCKLIST_KEY] == ["FUSE_ACTIVATIONS", "WINOGRAD"]  # first calls skip WINOGRAD too
    assert "fuse_activations" not in program.metadata["passes"] and "prepack" in program.metadata["passes"]
    assert "aten::relu" in ptlite.export_opnames(program)  # not fused into the convolution


def test_convert_quantize_fp16_weights_reports_inspects_and_runs(work, capsys, monkeypatch):
    monkeypatch.chdir(work["folder"])
    code, out, err = cli(capsys, "convert", f"{MODULE}:tiny", "--input-shape", "1,3,16,16", "--quantize",
                         "fp16_weights", "-o", "half.ptlite")
    assert code == 0, err
    assert "weights:   4 tensors, 292 B" in out  # conv 4*3*3*3 and linear 5*4 in float16, their 4 + 5 biases not
    assert "quantized: fp16_weights: 2 weights in float16 (256 B), 2 left in float32 (2 vectors)" in out
    code, out, err = cli(capsys, "inspect", "half.ptlite")
    assert code == 0, err
    assert "weights:    4 tensors, 137 values, 292 B (float16 256 B, float32 36 B)" in out
    assert "quantized:  fp16_weights: 2 weights in float16" in out
    got = ptlite.load(work["folder"] / "half.ptlite")(work["x"])
    want = torch_forward(work["model"], work["x"])
    assert got.dtype == np.float32
    assert np.abs(got - want).max() <= 1e-2 * np.abs(want).max(), f"max |diff| {np.abs(got - want).max()}"


def test_convert_quantize_int8_static_calibrates_on_a_folder(work, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(work["folder"])
    images = tmp_path / "calibration"
    images.mkdir()
    for i in range(6):
        write_png(images / f"img{i}.png", seed=i)
    code, out, err = cli(capsys, "convert", f"{MODULE}:tiny", "--input-shape", "1,3,16,16", "--quantize",
                         "int8_static", "--calibrate", str(images), "-o", "int8.ptlite")
    assert code == 0, err
    assert "calibrating on 6 input(s): 12/12 in" in err, err  # the histogram observer's two runs over six
    assert "quantized: int8_static: 2 operator(s) in int8, 2 in float (histogram observer, 6 calibration" in out
    assert "int8      1 x ptlite::conv2d_int8" in out and "int8      1 x ptlite::linear_int8" in out, out
    assert "float     1 x aten::adaptive_avg_pool2d: ptlite has no int8 kernel for it" in out, out
    code, out, err = cli(capsys, "inspect", "int8.ptlite")
    assert code == 0, err
    assert "quantized:  int8_static: 2 operator(s) in int8" in out and "widened" not in out, out
    assert "int8 " in out.split("weights:")[1].splitlines()[0], out  # bytes per dtype: the int8 weights
    from ptlite.preprocess.image import load_image

    x = load_image(images / "img0.png", (16, 16))[None]
    got = ptlite.load(work["folder"] / "int8.ptlite")(x)
    want = torch_forward(work["model"], x)
    assert np.abs(got - want).max() <= 0.05 * np.abs(want).max(), \
        f"tiny model int8_static: max |diff| {np.abs(got - want).max():.3g} of {np.abs(want).max():.3g}"


def test_convert_quantize_int8_dynamic(work, capsys, monkeypatch):
    monkeypatch.chdir(work["folder"])
    code, out, err = cli(capsys, "convert", f"{MODULE}:tiny", "--input-shape", "1,3,16,16", "--quantize",
                         "int8_dynamic", "-o", "dynamic.ptlite")
    assert code == 0, err
    assert "quantized: int8_dynamic: 1 layer(s) with int8 weights, inputs quantized per call and row" in out, out
    got = ptlite.load(work["folder"] / "dynamic.ptlite")(work["x"])
    want = torch_forward(work["model"], work["x"])
    assert np.abs(got - want).max() <= 0.02 * np.abs(want).max(), f"max |diff| {np.abs(got - want).max()}"


@pytest.mark.parametrize("flags, expected", [
    (["--quantize", "int8_static"], "--quantize int8_static needs --calibrate DIR"),
    (["--calibrate", "."], "--calibrate is int8_static's calibration data"),
    (["--quantize", "fp16_weights", "--calibrate", "."], "fp16_weights takes no calibration data"),
    (["--quantize", "int8_static", "--calibrate", "nowhere"], "--calibrate nowhere: not a folder"),
])
def test_convert_calibration_flags_are_checked(work, capsys, monkeypatch, flags, expected):
    monkeypatch.chdir(work["folder"])
    code, out, err = cli(capsys, "convert", f"{MODULE}:tiny", "--input-shape", "1,3,16,16", *flags, "-o", "x.ptlite")
    assert_clean_error(code, err, expected)


def test_convert_keeps_preserved_method(work):
    module = ptlite.load(work["script"])
    assert module.method_names == ["forward", "embed"]
    assert module.metadata["capture"] == "script"
    x = np.random.default_rng(1).standard_normal((3, 3, 16, 16)).astype(np.float32)
    got = module.run_method("embed", x)
    want = torch_forward(work["model"], x, "embed")
    assert np.abs(got - want).max() <= 1e-5, f"embed: max |diff| {np.abs(got - want).max()}"


def test_convert_torchscript_file(work, capsys, tmp_path):
    out_path = tmp_path / "from_jit.ptlite"
    code, out, err = cli(capsys, "convert", work["jit"], "-o", out_path)
    assert code == 0, err
    assert "with script" in out
    assert f"wrote {out_path}" in out
    got = ptlite.load(out_path)(work["x"])
    want = torch_forward(work["model"], work["x"])
    assert np.abs(got - want).max() <= 1e-5, f"max |diff| {np.abs(got - want).max()}"


def test_convert_python_file_path_and_dynamic_batch(work, capsys, tmp_path):
    out_path = tmp_path / "dynamic.ptlite"
    code, out, err = cli(capsys, "convert", f"{work['folder'] / MODULE}.py:tiny", "--method", "export",
                         "--input-shape", "1,3,16,16", "--dynamic-batch", "-o", out_path)
    assert code == 0, err
    module = ptlite.load(out_path)
    assert module.input_specs[0].shape == (None, 3, 16, 16)
    x = np.random.default_rng(2).standard_normal((5, 3, 16, 16)).astype(np.float32)
    assert np.abs(module(x) - torch_forward(work["model"], x)).max() <= 1e-5


def test_convert_default_output_name(work, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, "convert", work["jit"])
    assert code == 0, err
    assert (tmp_path / "tiny.ptlite").is_file()


# ----------------------------------------------------------------------------------------------------
# run


def _top_lines(out: str) -> list[str]:
    return [line.strip() for line in out.splitlines() if line.strip()[:2] in {f"{i}." for i in range(1, 10)}]


def test_run_npy_prints_outputs_top_k_and_saves(work, capsys, tmp_path):
    labels = tmp_path / "labels.txt"
    labels.write_text("cat\ndog\nbird\nfish\nfrog\n")
    saved = tmp_path / "outputs.npz"
    code, out, err = cli(capsys, "run", work["export"], work["folder"] / "x.npy", "--top-k", "3",
                         "--labels", labels, "--save-outputs", saved)
    assert code == 0, err
    assert "output: shape (1, 5) float32" in out
    want = torch_forward(work["model"], work["x"])[0]
    probs = np.exp(want - want.max()) / np.exp(want - want.max()).sum()
    order = np.argsort(-probs)
    lines = _top_lines(out)
    assert len(lines) == 3, out
    names = ["cat", "dog", "bird", "fish", "frog"]
    for rank, line in enumerate(lines):
        cls = order[rank]
        assert f"class {cls}" in line and names[cls] in line, f"rank {rank + 1}: {line}"
        assert f"{probs[cls] * 100:6.2f}%".strip() in line, f"softmax of class {cls}: {line}"
    with np.load(saved) as data:
        assert list(data.keys()) == ["output"]
        assert np.abs(data["output"][0] - want).max() <= 1e-5


def test_run_png_image_is_preprocessed_like_torchvision(work, capsys, tmp_path):
    transforms = pytest.importorskip("torchvision.transforms")
    from PIL import Image

    image_path = tmp_path / "photo.png"
    write_png(image_path)
    saved = tmp_path / "image_outputs.npz"
    code, out, err = cli(capsys, "run", work["export"], image_path, "--save-outputs", saved)
    assert code == 0, err
    assert "output: shape (1, 5) float32" in out
    assert len(_top_lines(out)) == 5
    # The export captured a 16x16 input: resize the shorter side to round(16 / 0.875) = 18, crop 16.
    pipeline = transforms.Compose([transforms.Resize(18), transforms.CenterCrop(16), transforms.ToTensor(),
                                   transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    with Image.open(image_path) as image:
        x = pipeline(image.convert("RGB"))[None].numpy()
    want = torch_forward(work["model"], x)
    with np.load(saved) as data:
        assert np.abs(data["output"] - want).max() <= 1e-5, np.abs(data["output"] - want).max()


def test_run_stacks_several_images_into_a_batch(work, capsys, tmp_path):
    paths = []
    for seed in range(3):
        paths.append(tmp_path / f"img{seed}.png")
        write_png(paths[-1], 20 + seed, 30, seed)
    code, out, err = cli(capsys, "run", work["script"], *paths, "--image-size", "16", "--top-k", "1")
    assert code == 0, err
    assert "output: shape (3, 5) float32" in out
    for path in paths:
        assert f"for {path}" in out
    assert len(_top_lines(out)) == 3


@pytest.mark.parametrize("damage, expected", [
    (lambda data: data[:len(data) // 2], "the image cannot be decoded (image file is truncated)"),
    (lambda data: b"not an image at all", "not an image that Pillow can read"),
])
def test_run_names_a_damaged_image_once(work, capsys, tmp_path, damage, expected):
    path = tmp_path / "photo.png"
    write_png(path)
    path.write_bytes(damage(path.read_bytes()))
    code, out, err = cli(capsys, "run", work["export"], path)
    assert code == 2 and err.strip() == f"ptlite: error: {path}: {expected}" + (
        "; the file is truncated or corrupt" if "decoded" in expected else ""), err


def test_run_refuses_a_number_for_a_tensor_input_by_name(work, capsys):
    code, out, err = cli(capsys, "run", work["export"], "1.5")
    assert code == 2 and "input x: Tensor float32" in err and "takes an .npy file or an image, not the number 1.5" \
        in err, err


def test_run_other_method_and_float64_input(work, capsys, tmp_path):
    x64 = tmp_path / "x64.npy"
    np.save(x64, work["x"].astype(np.float64))
    code, out, err = cli(capsys, "run", work["script"], x64, "--method", "embed", "--top-k", "0")
    assert code == 0, err
    assert "embed ran in" in out
    assert "output: shape (1, 4) float32" in out
    assert "converted float64 to float32" in err
    assert not _top_lines(out)


def test_run_needs_no_torch(work):
    code = BLOCK_TORCH + textwrap.dedent("""
        from ptlite.tools.cli import main
        status = main(sys.argv[1:])
        assert "torch" not in sys.modules, "torch was imported"
        sys.exit(status)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    argv = ["run", str(work["export"]), str(work["folder"] / "x.npy")]
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "output: shape (1, 5) float32" in proc.stdout


# ----------------------------------------------------------------------------------------------------
# ops and inspect


def test_ops_lists_the_programs_operators(work, capsys):
    code, out, err = cli(capsys, "ops", work["export"])
    assert code == 0, err
    names = out.split()
    assert names == ptlite.export_opnames(work["export"])
    assert names == sorted(["aten::adaptive_avg_pool2d", "ptlite::conv2d_prepacked", "aten::flatten.using_ints",
                            "ptlite::linear_prepacked"])  # convert optimizes: prepacked, relu fused


def test_ops_yaml_is_a_yaml_list(work, capsys):
    code, out, err = cli(capsys, "ops", work["script"], "--yaml")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines == [f"- {name}" for name in ptlite.export_opnames(work["script"])]
    assert "- ptlite::conv2d_prepacked" in lines


def test_ops_yaml_parses_with_pyyaml(work, capsys):
    yaml = pytest.importorskip("yaml")
    code, out, err = cli(capsys, "ops", work["script"], "--yaml")
    assert code == 0, err
    assert yaml.safe_load(out) == ptlite.export_opnames(work["script"])


def test_inspect_describes_methods_operators_and_weights(work, capsys):
    code, out, err = cli(capsys, "inspect", work["export"])
    assert code == 0, err
    assert f"{os.path.getsize(work['export'])} bytes)" in out
    assert "producer:   ptlite" in out
    assert "captured:   export with torch" in out
    assert "in   x: Tensor float32[1, 3, 16, 16]" in out
    assert "out  output: Tensor float32[1, 5]" in out
    assert "operators:  4 distinct, 4 calls" in out
    assert "weights:    4 tensors, 137 values, 548 B" in out
    assert "runnable:   yes" in out
    assert "graph forward(" not in out


def test_inspect_counts_operators_sorted_by_use(work, capsys):
    code, out, err = cli(capsys, "inspect", work["script"], "--graph")
    assert code == 0, err
    assert "methods:    2" in out
    counts = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].startswith(("aten::", "prim::", "ptlite::")) and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
    assert counts["ptlite::conv2d_prepacked"] == 2  # forward and embed each use it once
    assert counts["ptlite::linear_prepacked"] == 1
    listed = list(counts.values())
    assert listed == sorted(listed, reverse=True)
    assert "graph forward(" in out and "graph embed(" in out


# ----------------------------------------------------------------------------------------------------
# help, version, errors


def test_version_and_help(capsys):
    code, out, _ = cli(capsys, "--version")
    assert code == 0 and out.strip() == f"ptlite {ptlite.__version__}"
    code, out, _ = cli(capsys, "--help")
    assert code == 0
    for command in ("convert", "run", "ops", "inspect", "demo"):
        assert command in out
    code, out, _ = cli(capsys, "convert", "--help")
    assert code == 0 and "--input-shape" in out and "module:function" in out


def test_entry_point_module_runs_without_importing_torch():
    code = ("import sys; import ptlite.tools.cli; assert 'torch' not in sys.modules; "
            "sys.exit(ptlite.tools.cli.main(['--help']))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "usage: ptlite" in proc.stdout


@pytest.fixture
def bad_files(tmp_path):
    (tmp_path / "corrupt.ptlite").write_bytes(b"PTLITE" + bytes(range(200)))
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "broken.pt").write_bytes(b"not a zip archive")
    return tmp_path


@pytest.mark.parametrize("argv, expected", [
    (["run", "{d}/missing.ptlite", "{x}"], "missing.ptlite: no such file"),
    (["inspect", "{d}/missing.ptlite"], "no such file"),
    (["ops", "{d}/corrupt.ptlite"], "corrupt.ptlite"),
    (["run", "{d}/corrupt.ptlite", "{x}"], "corrupt.ptlite"),
    (["inspect", "{d}/notes.txt"], "notes.txt"),
    (["run", "{export}", "{d}/missing.npy"], "missing.npy: no such file"),
    (["run", "{export}", "{d}/notes.txt"], "not an .npy file or an image"),
    (["run", "{export}", "{x}", "{x}"], "takes 1 input(s)"),
    (["run", "{script}", "{x}", "--method", "nope"], "has no method 'nope'"),
    (["run", "{export}", "{x}", "--top-k", "-1"], "--top-k"),
    (["convert", "{mod}:tiny", "--input-shape", "1,3,a"], "invalid shape '1,3,a'"),
    (["convert", "{mod}:tiny", "--method", "magic"], "invalid choice: 'magic'"),
    (["convert", "{mod}:tiny", "--method", "export"], "needs example inputs"),
    (["convert", "{mod}:nothing"], "has no attribute 'nothing'"),
    (["convert", "{mod}:not_a_model"], "returned int, not an nn.Module"),
    (["convert", "no_such_module_xyz:model"], "cannot import 'no_such_module_xyz'"),
    (["convert", "{d}/broken.pt"], "not a TorchScript file"),
    (["convert", "{d}/nothing_here"], "no such file"),
    (["convert", "{mod}:tiny", "--blocklist", "NOPE"], "--blocklist: unknown optimization(s) in the blocklist: NOPE"),
    (["convert", "{mod}:tiny", "--blocklist", "WINOGRAD", "--no-optimize"], "give one or the other"),
    (["compare", "{export}", "--with", "{d}/nothing_here"], "no such file, and not 'module:function'"),
    (["compare", "{export}", "--with", "{mod}:not_a_model"], "returned int, not an nn.Module"),
    (["compare", "{export}", "--with", "{mod}:tiny", "--tolerance", "-1"], "non-negative number"),
    (["compare", "{export}", "--with", ":"], "--with ':' must be 'module:function'"),
    (["compare", "{export}", "--with", "{mod}:broken"],
     "the reference, ptlite_cli_test_models:broken on eager PyTorch (PyTorch "),
    (["compare", "{export}", "--with", "{mod}:tiny", "--no-optimize"], "are for a .ptl file"),
    (["compare", "{export}", "--with", "{mod}:tiny", "--blocklist", "WINOGRAD"], "are for a .ptl file"),
    (["compare", "{script}", "--with", "{mod}:tiny", "--method", "nope"], "has no method 'nope'"),
    (["compare", "{export}", "--with", "{mod}:tiny", "--inputs", "{x}", "--input-shape", "1,3,16,16"],
     "give --inputs or --input-shape, not both"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
])
def test_errors_are_one_clear_line_with_status_2(work, bad_files, capsys, monkeypatch, argv, expected):
    monkeypatch.chdir(work["folder"])
    values = {"d": bad_files, "x": work["folder"] / "x.npy", "export": work["export"],
              "script": work["script"], "mod": MODULE}
    code, _, err = cli(capsys, *[a.format(**{k: str(v) for k, v in values.items()}) for a in argv])
    assert_clean_error(code, err, expected)


# ----------------------------------------------------------------------------------------------------
# compare


def _table_rows(out: str) -> dict[str, list[str]]:
    """compare's table, by output name: the words of each row under the header."""
    lines = [line.split() for line in out.splitlines() if line.startswith("  ")]
    return {words[0]: words for words in lines[1:]}


def test_compare_with_the_model_it_came_from(work, capsys, monkeypatch):
    monkeypatch.chdir(work["folder"])
    code, out, err = cli(capsys, "compare", work["export"], "--with", f"{MODULE}:tiny")
    assert code == 0, err
    assert "eager PyTorch" in out and "x float32[1, 3, 16, 16] (random, seed 0)" in out
    row = _table_rows(out)["output"]
    assert row[1:4] == ["[1,", "5]", "float32"] and row[-1] == "ok", out
    assert float(row[-2]) <= 1e-5, f"tiny export vs eager: relative difference {row[-2]}"
    assert out.strip().endswith("all 1 output(s) match")


def test_compare_suggests_the_recorded_source_but_never_runs_it(work, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(work["folder"])
    assert ptlite.load_program(work["export"]).metadata["source"] == f"{MODULE}:tiny"
    code, out, err = cli(capsys, "inspect", work["export"])
    assert f"from {MODULE}:tiny" in out
    code, out, err = cli(capsys, "compare", work["export"])  # a name from a file is not imported unless given
    assert_clean_error(code, err, f"it records that it was converted from {MODULE}:tiny: --with {MODULE}:tiny")
    from_file = tmp_path / "from_jit.ptlite"  # a TorchScript file's conversion records no source
    assert main(["convert", str(work["jit"]), "-o", str(from_file)]) == 0
    capsys.readouterr()
    assert "source" not in ptlite.load_program(from_file).metadata
    code, _, err = cli(capsys, "compare", from_file)
    assert_clean_error(code, err, "say what to compare")
    assert "records" not in err
    crafted = ptlite.load_program(from_file)  # a file's own text is shown only if it is a plain module:function
    crafted.metadata["source"] = "x:y; rm -rf ~"
    ptlite.save(crafted, tmp_path / "crafted.ptlite")
    code, _, err = cli(capsys, "compare", tmp_path / "crafted.ptlite")
    assert_clean_error(code, err, "say what to compare")
    assert "rm -rf" not in err


def test_compare_catches_other_weights_and_exits_1(work, capsys, monkeypatch):
    monkeypatch.chdir(work["folder"])
    code, out, err = cli(capsys, "compare", work["export"], "--with", f"{MODULE}:tiny_reseeded",
                         "--inputs", work["folder"] / "x.npy")
    assert code == 1, out + err
    assert _table_rows(out)["output"][-1] == "DIFFERS" and "x.npy)" in out
    assert err.startswith("ptlite: 1 of 1 output(s) differ: output (relative difference "), err
    assert "Traceback" not in err


def test_compare_another_method_and_a_tolerance(work, capsys, monkeypatch):
    monkeypatch.chdir(work["folder"])
    argv = ["compare", work["script"], "--with", f"{MODULE}:tiny", "--method", "embed",
            "--input-shape", "2,3,20,20"]
    code, out, err = cli(capsys, *argv)
    assert code == 0, err
    assert "(embed)" in out and "x float32[2, 3, 20, 20]" in out and "[2, 4]" in out
    other = ["compare", work["script"], "--with", f"{MODULE}:tiny_reseeded", "--method", "embed",
             "--input-shape", "2,3,20,20"]  # other weights: relative differences of order 1
    code, out, err = cli(capsys, *other, "--tolerance", "100")
    assert code == 0 and "tolerance: 100 x max |reference|" in out, out + err
    code, out, err = cli(capsys, *other, "--tolerance", "1.5e-4")
    assert code == 1 and "tolerance: 0.00015 x" in out and "> 0.00015)" in err, out + err


@pytest.mark.filterwarnings("ignore:Lite Interpreter is deprecated")
def test_compare_ptl_file_against_the_lite_interpreter(work, capsys, tmp_path):
    model = work["model"]
    ptl = tmp_path / "tiny.ptl"
    torch.jit.script(model)._save_for_lite_interpreter(str(ptl))
    for extra in ([], ["--no-optimize"], ["--blocklist", "FUSE_ACTIVATIONS"]):
        code, out, err = cli(capsys, "compare", ptl, "--input-shape", "1,3,16,16", *extra)
        assert code == 0, err
        assert "lite interpreter" in out and out.strip().endswith("all 1 output(s) match"), out
    assert "(forward, without FUSE_ACTIVATIONS)" in out
    converted = tmp_path / "tiny_from_ptl.ptlite"
    assert main(["convert", str(ptl), "--input-shape", "1,3,16,16", "-o", str(converted)]) == 0
    capsys.readouterr()
    code, out, err = cli(capsys, "compare", converted, "--with", ptl)
    assert code == 0 and "lite interpreter" in out, out + err


def test_compare_dict_outputs_one_by_one(work, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(work["folder"])
    path = tmp_path / "pair.ptlite"
    assert main(["convert", f"{MODULE}:pair", "--input-shape", "2,5", "--method", "script", "-o", str(path)]) == 0
    capsys.readouterr()
    code, out, err = cli(capsys, "compare", path, "--with", f"{MODULE}:pair", "--input-shape", "2,5")
    assert code == 0, out + err
    rows = _table_rows(out)
    assert set(rows) == {"sum", "argmax"} and "int64" in rows["argmax"], out


def test_wrong_input_shape_is_reported_by_the_module(work, capsys, tmp_path):
    batch = tmp_path / "batch.npy"
    np.save(batch, np.zeros((2, 3, 16, 16), np.float32))
    code, _, err = cli(capsys, "run", work["export"], batch)
    assert_clean_error(code, err, "must have shape (1, 3, 16, 16)")


def test_convert_without_torch_says_how_to_install(tmp_path):
    code = BLOCK_TORCH + "from ptlite.tools.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code, "convert", "torchvision.models:resnet18"],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60)
    assert_clean_error(proc.returncode, proc.stderr, "pip install 'ptlite[export]'")


BN_SOURCE = '''
import torch
def conv_bn():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                                torch.nn.Dropout(0.5))
    with torch.no_grad():
        model[1].running_mean.uniform_(-1, 1)
        model[1].running_var.uniform_(0.5, 2)
    return model.eval()
'''


def test_convert_optimizes_by_default(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "bn_model.py").write_text(BN_SOURCE)
    code, out, err = cli(capsys, "convert", "bn_model:conv_bn", "--input-shape", "1,3,8,8", "-o", "opt.ptlite")
    assert code == 0, err
    assert "optimized:" in out and "fold_conv_bn" in out
    code, out, err = cli(capsys, "convert", "bn_model:conv_bn", "--input-shape", "1,3,8,8", "-o", "raw.ptlite",
                         "--no-optimize")
    assert code == 0, err
    assert "optimized:" not in out
    opt, raw = ptlite.export_opnames(tmp_path / "opt.ptlite"), ptlite.export_opnames(tmp_path / "raw.ptlite")
    assert "aten::batch_norm" in raw and "aten::batch_norm" not in opt
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    import bn_model

    want = torch_forward(bn_model.conv_bn(), x)
    for path in ("opt.ptlite", "raw.ptlite"):
        got = ptlite.load(tmp_path / path)(x)
        assert np.abs(got - want).max() <= 1e-5 * max(1.0, np.abs(want).max()), path


def test_progress_lines_go_to_stderr_and_quiet_silences_them(work, capsys):
    argv = ["convert", f"{MODULE}:tiny", "--input-shape", "1,3,16,16", "-o", "progress.ptlite"]
    code, out, err = cli(capsys, *argv)
    assert code == 0, err
    stages = [line for line in err.splitlines() if line.startswith("ptlite: ")]
    assert any("capturing" in line for line in stages) and any("optimizing" in line for line in stages), err
    assert any("writing progress.ptlite" in line for line in stages), err
    assert "wrote progress.ptlite" in out, "the results stay on standard output"
    for quiet in (["-q", *argv], [*argv, "--quiet"]):  # before or after the command's name
        code, out, err = cli(capsys, *quiet)
        assert code == 0 and err == "", f"-q printed: {err}"
        assert "wrote progress.ptlite" in out
    code, out, err = cli(capsys, *argv, "-v")
    assert code == 0 and "ptlite: debug: optimized in" in err, err  # -v: more detail
    code, out, err = cli(capsys, *argv)
    assert "debug:" not in err, err
