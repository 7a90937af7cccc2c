"""Files that carry what an app needs: preprocessing, labels, user keys, the ptlite version they need, and bundled
inputs with PyTorch's answers that `ptlite check` replays (issue 19, items 1 and 2)."""

from __future__ import annotations

import json
import os
import struct
import sys
import textwrap

import numpy as np
import pytest

import ptlite
from ptlite.errors import FormatError
from ptlite.format.layout import HEADER, HEADER_SIZE
from ptlite.preprocess.spec import Preprocessing
from ptlite.tools.cli import main

torch = pytest.importorskip("torch")
PIL = pytest.importorskip("PIL.Image")
sklearn_datasets = pytest.importorskip("sklearn.datasets")

pytestmark = pytest.mark.filterwarnings("ignore:.*torch.jit.*deprecated:FutureWarning")

MODEL_SOURCE = textwrap.dedent("""
    import torch
    from torch import nn


    class Small(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.fc = nn.Linear(8, 5)

        def forward(self, x):
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(torch.relu(self.bn(self.conv(x))), 1), 1))


    def small():
        torch.manual_seed(0)
        model = Small().eval()
        with torch.no_grad():  # statistics that keep the outputs O(1)
            model.bn.running_mean.uniform_(-0.5, 0.5)
            model.bn.running_var.uniform_(0.5, 1.5)
            model.fc.weight.mul_(4)
        return model
""")
MODULE = "ptlite_described_test_models"


def photo(tmp_path, name: str = "china.jpg") -> str:
    """One of scikit-learn's sample photographs, as a file."""
    path = str(tmp_path / name)
    PIL.fromarray(sklearn_datasets.load_sample_image(name)).save(path, quality=95)
    return path


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder holding the user's model module, importable by `ptlite convert`."""
    path = tmp_path_factory.mktemp("described")
    (path / f"{MODULE}.py").write_text(MODEL_SOURCE)
    cwd, sys_path = os.getcwd(), list(sys.path)
    os.chdir(path)
    try:
        yield path
    finally:
        os.chdir(cwd)
        sys.path[:] = sys_path
        sys.modules.pop(MODULE, None)


def small_model():
    namespace: dict = {}
    exec(compile(MODEL_SOURCE, "<small>", "exec"), namespace)
    return namespace["small"]()


# -- preprocessing ---------------------------------------------------------------------------------------------------

def test_imagenet_preprocessing_equals_torchvisions_evaluation_transform(tmp_path):
    transforms = pytest.importorskip("torchvision.transforms")
    path = photo(tmp_path)
    expected = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(),
                                   transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])(
        PIL.open(path).convert("RGB"))[None].numpy()
    got = Preprocessing.parse("imagenet").load(path)
    assert got.shape == expected.shape == (1, 3, 224, 224) and got.dtype == np.float32
    diff = float(np.abs(got - expected).max())
    assert diff < 1e-5, f"imagenet preprocessing differs from torchvision's transform by {diff:.3g}"


def test_channel_order_value_range_and_layout(tmp_path):
    path = photo(tmp_path, "flower.jpg")
    base = Preprocessing.parse("size=64 resize=80 mean=0 std=1")
    rgb = base.load(path)
    bgr = Preprocessing.parse("size=64 resize=80 mean=0 std=1 channels=BGR").load(path)
    np.testing.assert_array_equal(bgr, rgb[:, ::-1], err_msg="BGR is RGB with the channels reversed")
    wide = Preprocessing.parse("size=64 resize=80 mean=0 std=1 range=0,255").load(path)
    np.testing.assert_allclose(wide, rgb * 255, rtol=1e-5, atol=1e-3, err_msg="range=0,255 scales by 255")
    nhwc = Preprocessing.parse("size=64 resize=80 mean=0 std=1 layout=NHWC").load(path)
    np.testing.assert_array_equal(nhwc, rgb.transpose(0, 2, 3, 1), err_msg="NHWC is NCHW transposed")
    gray = Preprocessing.parse("size=64 resize=80 channels=L mean=0.5 std=0.25").load(path)
    assert gray.shape == (1, 1, 64, 64)
    stretched = Preprocessing.parse("size=48,64 crop=no mean=0 std=1").load(path)
    assert stretched.shape == (1, 3, 48, 64)


def test_text_form_round_trips_and_bad_words_are_named():
    spec = Preprocessing.parse("imagenet size=28 channels=L mean=0.1307 std=0.3081 layout=NHWC")
    assert spec.size == (28, 28) and spec.channels == "L" and spec.layout == "NHWC"
    assert Preprocessing.parse(spec.describe()) == spec
    assert Preprocessing.from_metadata(json.loads(json.dumps(spec.to_metadata()))) == spec
    assert Preprocessing.parse("imagenet").describe() == "imagenet"
    for text, expected in (("size=0", "size must be"), ("colour=RGB", "'colour=RGB' is not key=value"),
                           ("channels=RGBA", "channels must be one of"), ("std=0,1,1", "std values must be positive"),
                           ("mean=1,2", "mean needs 1 or 3"), ("range=1,0", "value_range must be two increasing"),
                           ("size=224 resize=100", "resize (100) must be at least"), ("size=x", "size='x'")):
        with pytest.raises(ValueError, match=expected.replace("(", r"\(").replace(")", r"\)")):
            Preprocessing.parse(text)


@pytest.mark.parametrize("stored, expected", [
    ("not an object", "must be an object"), ({"sizes": [224]}, "unknown field"), ({"size": "224"}, "size must be"),
    ({"mean": [1, 2, 3, 4, 5]}, "mean must be"), ({"crop": 1}, "crop must be"), ({"layout": 4}, "layout must be"),
    ({"channels": "CMYK"}, "channels must be one of")])
def test_a_files_malformed_preprocessing_is_refused_by_name(tmp_path, stored, expected):
    program = ptlite.capture(small_model(), (torch.randn(1, 3, 32, 32),), method="trace")
    program.metadata["preprocessing"] = stored
    ptlite.save(program, tmp_path / "m.ptlite")
    module = ptlite.load(tmp_path / "m.ptlite")
    with pytest.raises(FormatError, match=f"metadata 'preprocessing' is invalid: .*{expected}"):
        print(module.preprocessing)


# -- the Python API ---------------------------------------------------------------------------------------------------

def test_save_records_preprocessing_labels_user_keys_and_the_version_needed(tmp_path):
    model = small_model()
    program = ptlite.optimize_for_mobile(ptlite.capture(model, (torch.randn(1, 3, 32, 32),)))
    labels = ["cat", "dog", "fish", "bird", "ant"]
    ptlite.save(program, tmp_path / "m.ptlite", preprocessing="imagenet resize=40", labels=labels,
                metadata={"author": "me", "thresholds": [0.5, 0.9]})
    assert "preprocessing" not in program.metadata, "save must not change the program it is given"
    module = ptlite.load(tmp_path / "m.ptlite")
    assert module.preprocessing == Preprocessing(size=(32, 32), resize=40), "size comes from the input's shape"
    assert module.labels == labels
    assert module.metadata["user"] == {"author": "me", "thresholds": [0.5, 0.9]}
    assert module.metadata["min_ptlite_version"] == ptlite.__version__ == "0.1.0"
    path = photo(tmp_path)
    np.testing.assert_array_equal(module.preprocessing.load(path), Preprocessing.parse("size=32 resize=40").load(path))


def test_describe_refuses_what_the_model_cannot_take():
    program = ptlite.capture(small_model(), (torch.randn(1, 3, 32, 32),), method="export")  # records the shape
    with pytest.raises(ValueError, match=r"the input takes 3 channel\(s\), the preprocessing makes 1"):
        ptlite.attach(program, preprocessing="channels=L")
    with pytest.raises(ValueError, match="names input 'image', which forward does not take"):
        ptlite.attach(program, preprocessing="input=image")
    with pytest.raises(ValueError, match="labels must be strings"):
        ptlite.attach(program, labels=[1, 2])
    with pytest.raises(ValueError, match="metadata must be JSON"):
        ptlite.attach(program, metadata={"when": object()})


def test_the_version_a_file_needs_follows_its_newest_operator(monkeypatch):
    from ptlite import ops

    assert ops.required_version(["aten::conv2d", "aten::relu"]) == ("0.1.0", [])
    monkeypatch.setattr(ops.get("aten::relu"), "since", "0.3.0")
    monkeypatch.setattr(ops.get("aten::conv2d"), "since", "0.2.1")
    assert ops.required_version(["aten::conv2d", "aten::relu", "aten::add.Tensor"]) == ("0.3.0", ["aten::relu"])
    assert ops.OpDef.parse("aten::relu(Tensor self) -> Tensor @since(0.4.2)").since == "0.4.2"
    with pytest.raises(ValueError, match="@since needs a version"):
        ops.OpDef.parse("aten::relu(Tensor self) -> Tensor @since(soon)")


def rewrite_program_section(path, edit) -> None:
    """Apply edit(doc) to a file's program JSON, moving the data section after it and keeping the header right."""
    import zlib

    from ptlite.format.layout import align

    data = bytes(open(path, "rb").read())
    fields = list(HEADER.unpack_from(data, 0))
    doc = json.loads(data[HEADER_SIZE:HEADER_SIZE + fields[4]])
    edit(doc)
    body = json.dumps(doc, separators=(",", ":")).encode()
    section = data[fields[5]:fields[5] + fields[6]]
    fields[4], fields[5], fields[7] = len(body), align(HEADER_SIZE + len(body)), zlib.crc32(body)
    with open(path, "wb") as f:
        f.write(HEADER.pack(*fields) + body + b"\0" * (fields[5] - HEADER_SIZE - len(body)) + section)


def test_a_file_needing_a_newer_ptlite_is_refused_naming_the_version(tmp_path):
    program = ptlite.capture(small_model(), (torch.randn(1, 3, 32, 32),), method="trace")
    path = tmp_path / "m.ptlite"
    ptlite.save(program, path)

    def newer(doc):
        doc["metadata"]["min_ptlite_version"] = "9.2.0"
        doc["operators"].append("aten::frobnicate")
    rewrite_program_section(path, newer)
    with pytest.raises(FormatError, match=r"needs ptlite 9\.2\.0 or newer \(this is 0\.1\.0\); operators this "
                                          r"version lacks: aten::frobnicate; upgrade: pip install -U"):
        ptlite.load(path)
    rewrite_program_section(path, lambda doc: doc["metadata"].update(min_ptlite_version="soon"))
    with pytest.raises(FormatError, match="'soon' is not a version"):
        ptlite.load(path)


# -- bundled inputs ---------------------------------------------------------------------------------------------------

class TwoHeads(torch.nn.Module):
    """Several outputs of several kinds: bundled and checked leaf by leaf."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 4)

    def forward(self, x, scale: float):
        y = self.fc(x) * scale
        return {"logits": y, "best": y.argmax(dim=1)}, (y.sum(),)


def test_bundled_inputs_round_trip_and_pass_their_check(tmp_path):
    torch.manual_seed(0)
    model = TwoHeads().eval()
    calls = [(torch.randn(2, 6), 2.0), (torch.randn(2, 6), -1.0)]
    program = ptlite.capture(model, calls[0], method="script")
    bundled = ptlite.bundle_inputs(model, calls)
    ptlite.save(program, tmp_path / "m.ptlite", bundled_inputs=bundled)
    module = ptlite.load(tmp_path / "m.ptlite")
    stored = module.bundled_inputs()
    assert len(stored) == 2 and stored[1].inputs[1] == -1.0
    np.testing.assert_array_equal(stored[0].inputs[0], calls[0][0].numpy())
    expected = model(*calls[0])
    np.testing.assert_array_equal(stored[0].outputs[0], expected[0]["logits"].detach().numpy())
    assert stored[0].outputs[1].dtype == np.int64
    results = module.check_bundled()
    assert [r.output for r in results[:3]] == ["output[0]['logits']", "output[0]['best']", "output[1][0]"]
    assert all(r.passed for r in results), "\n".join(r.describe() for r in results)
    assert max(r.error for r in results) < 1e-5


def tamper_weight(path, name: str) -> None:
    """Change one weight's values in place (the data section has no checksum: what `check` is for)."""
    data = bytearray(open(path, "rb").read())
    fields = HEADER.unpack_from(data, 0)
    doc = json.loads(bytes(data[HEADER_SIZE:HEADER_SIZE + fields[4]]))
    entry = next(w for w in doc["weights"] if w["name"] == name)
    start = fields[5] + entry["offset"]
    value = struct.unpack_from("<f", data, start)[0]
    struct.pack_into("<f", data, start, value + 0.5)
    open(path, "wb").write(bytes(data))


def test_convert_bundles_an_image_and_check_fails_on_a_tampered_file(folder, capsys):
    path = photo(folder)
    code, out, err = cli(capsys, "convert", f"{MODULE}:small", "--input-shape", "1,3,64,64", "--preprocess",
                         "imagenet resize=72", "--labels", "imagenet", "--meta", "build=42", "--bundle-inputs", path,
                         "-o", "small.ptlite")
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("bundled: "))
    assert line.startswith("bundled: 1 call(s), 1 output(s); here: call 0 (forward) output: max |diff|"), out
    assert line.endswith(": ok"), out
    code, out, err = cli(capsys, "check", "small.ptlite", "-v")
    assert code == 0, err
    assert "small.ptlite: ok: 1 bundled call(s), 1 output(s)" in out, out
    module = ptlite.load("small.ptlite")
    np.testing.assert_array_equal(module.bundled_inputs()[0].inputs[0], module.preprocessing.load(path),
                                  err_msg="the bundled image is preprocessed as the file says")
    assert module.metadata["user"] == {"build": 42} and module.labels[0] == "tench"
    code, out, err = cli(capsys, "inspect", "small.ptlite")
    assert "preprocess: size=64,64 resize=72" not in out  # the size is the input's, not stored
    assert "preprocess: resize=72" in out and "labels:     1000: tench" in out and "bundled:    1 call(s)" in out

    weight = next(name for name in module.program.weights if "fc" in name or "linear" in name.lower())
    tamper_weight("small.ptlite", weight)
    code, out, err = cli(capsys, "check", "small.ptlite")
    assert code == 1, (out, err)
    assert "FAIL call 0 (forward) output: max |diff|" in out, out
    assert "1 of 1 output(s) exceed their tolerance" in err, err


def test_run_uses_the_files_preprocessing_and_labels(folder, capsys):
    path = photo(folder, "flower.jpg")
    code, _, err = cli(capsys, "convert", f"{MODULE}:small", "--input-shape", "1,3,40,40", "--preprocess",
                       "size=40 resize=48 channels=BGR mean=0.5 std=0.25", "--labels", "voc", "-o", "bgr.ptlite")
    assert code == 0, err
    code, out, err = cli(capsys, "run", "bgr.ptlite", path, "--save-outputs", "out.npz")
    assert code == 0, err
    module = ptlite.load("bgr.ptlite")
    expected = module(Preprocessing.parse("size=40 resize=48 channels=BGR mean=0.5 std=0.25").load(path))
    np.testing.assert_allclose(np.load("out.npz")["output"], expected, rtol=1e-6, atol=1e-6,
                               err_msg="ptlite run must preprocess as the file says")
    best = int(np.argmax(expected))
    voc = ["__background__", "aeroplane", "bicycle", "bird", "boat"]
    assert f"class {best}  {voc[best]}" in out, out


def test_check_without_bundled_inputs_and_bad_convert_flags_are_clear(folder, capsys):
    code, _, err = cli(capsys, "convert", f"{MODULE}:small", "--input-shape", "1,3,32,32", "-o", "plain.ptlite")
    assert code == 0, err
    code, _, err = cli(capsys, "check", "plain.ptlite")
    assert code == 2 and "has no bundled inputs to check; convert the model with --bundle-inputs" in err, err
    code, _, err = cli(capsys, "convert", f"{MODULE}:small", "--input-shape", "1,3,32,32", "--preprocess",
                       "channels=L", "-o", "gray.ptlite")
    assert code == 2 and "the input takes 3 channel(s), the preprocessing makes 1" in err, err
    code, _, err = cli(capsys, "convert", f"{MODULE}:small", "--input-shape", "1,3,32,32", "--meta", "novalue",
                       "-o", "x.ptlite")
    assert code == 2 and "--meta 'novalue': expected KEY=VALUE" in err, err
    code, _, err = cli(capsys, "convert", f"{MODULE}:small", "--input-shape", "1,3,32,32", "--bundle-inputs",
                       "--bundle-tolerance", "0", "-o", "strict.ptlite")
    assert code == 2 and "already exceed their tolerance here" in err and "--bundle-tolerance" in err, err


@pytest.mark.parametrize("edit, expected", [
    (lambda b: b.update(atol=[0.1, 0.2]), "atol must list a tolerance per output"),
    (lambda b: b["outputs"][0]["array"].update(offset=1 << 40), "lies outside"),
    (lambda b: b["inputs"].append({"array": 3}), "must hold an array or a value"),
    (lambda b: b.pop("method"), "must be an object naming its method"),
])
def test_malformed_bundled_inputs_are_refused(tmp_path, edit, expected):
    model = small_model()
    x = torch.randn(1, 3, 32, 32)
    path = tmp_path / "m.ptlite"
    ptlite.save(ptlite.capture(model, (x,), method="trace"), path, bundled_inputs=ptlite.bundle_inputs(model, x))
    rewrite_program_section(path, lambda doc: edit(doc["bundled_inputs"][0]))
    with pytest.raises(FormatError, match=expected):
        ptlite.load(path)


def test_a_camera_frame_is_preprocessed_as_the_file_says(tmp_path):
    """frame_options makes the camera helpers crop and normalize a frame as `Preprocessing.apply` does a photo: exactly
    where no resampling is involved (resize = the frame's shorter side), and nearly where the camera samples by
    nearest neighbour and Pillow filters."""
    from ptlite.preprocess import rgba_to_tensor

    photo = sklearn_datasets.load_sample_image("china.jpg")  # 427 x 640
    rgba = np.concatenate([photo, np.full(photo.shape[:2] + (1,), 255, np.uint8)], axis=2)
    spec = Preprocessing.parse("size=96,128 resize=427 range=0,255 mean=120,110,100 std=60,50,40")
    frame = rgba_to_tensor(rgba.tobytes(), 640, 427, **spec.frame_options(640, 427))
    pil = spec.apply(PIL.fromarray(photo))
    assert frame.shape == pil.shape == (1, 3, 96, 128)
    np.testing.assert_allclose(frame, pil, rtol=0, atol=1e-4, err_msg="the same crop, scaled and normalized alike")
    sideways = np.ascontiguousarray(np.rot90(rgba, 1))  # stored turned a quarter anticlockwise: 90 clockwise fixes it
    upright = rgba_to_tensor(sideways.tobytes(), 427, 640, rotate=90, **spec.frame_options(427, 640, rotate=90))
    np.testing.assert_array_equal(upright, frame, err_msg="a rotated frame, turned upright, gives the same tensor")
    imagenet = Preprocessing.parse("size=224")
    near = rgba_to_tensor(rgba.tobytes(), 640, 427, **imagenet.frame_options(640, 427))
    diff = float(np.abs(near - imagenet.apply(PIL.fromarray(photo))).mean()) * 0.226  # in [0, 1] pixel units
    assert diff < 0.05, f"nearest and bilinear sampling of the same crop differ by {diff:.3f} on average"
    with pytest.raises(ValueError, match="camera helpers make RGB tensors; this model takes L"):
        Preprocessing.parse("channels=L").frame_options(640, 480)


def test_run_reads_raw_camera_frames_as_the_file_says(folder, capsys):
    """`ptlite run --frame`: a raw frame dumped from an app, rotated and preprocessed as the file says."""
    from ptlite.preprocess import rgba_to_tensor

    code, _, err = cli(capsys, "convert", f"{MODULE}:small", "--input-shape", "1,3,48,48", "--preprocess",
                       "resize=56", "-o", "frames.ptlite")
    assert code == 0, err
    photo = sklearn_datasets.load_sample_image("flower.jpg")
    sideways = np.ascontiguousarray(np.rot90(photo, 1))  # 640 x 427 as stored; 90 degrees clockwise is upright
    (folder / "frame.rgb").write_bytes(sideways.tobytes())
    code, _, err = cli(capsys, "run", "frames.ptlite", "frame.rgb", "--frame", "RGB,427x640,rotate=90",
                       "--save-outputs", "frame_out.npz")
    assert code == 0, err
    module = ptlite.load("frames.ptlite")
    x = rgba_to_tensor(sideways, 427, 640, order="RGB", rotate=90, **module.preprocessing.frame_options(427, 640, 90))
    np.testing.assert_allclose(np.load("frame_out.npz")["output"], module(x), rtol=1e-6, atol=1e-6,
                               err_msg="run --frame must crop and normalize as the file's preprocessing says")
    (folder / "short.rgb").write_bytes(sideways.tobytes()[:1000])
    code, _, err = cli(capsys, "run", "frames.ptlite", "short.rgb", "--frame", "RGB,427x640")
    assert code == 2 and "short.rgb:" in err and "bytes" in err, err
    code, _, err = cli(capsys, "run", "frames.ptlite", "frame.rgb", "--frame", "YUYV,427x640")
    assert code == 2 and "unknown format 'YUYV'" in err, err


@pytest.mark.parametrize("stored, expected", [
    ({"size": [1e400, 4]}, "size must be a list of at most 4 finite numbers"),
    ({"size": [224.5, 224]}, "size must be whole numbers"),
    ({"value_range": [float("-inf"), 0]}, "value_range must be a list of at most 4 finite numbers"),
    ({"mean": [float("nan")]}, "mean must be a list of at most 4 finite numbers")])
def test_non_finite_or_fractional_numbers_in_a_files_preprocessing_are_named(stored, expected):
    with pytest.raises(ValueError, match=expected):
        Preprocessing.from_metadata(stored)
    with pytest.raises(ValueError, match="value_range must be two increasing"):
        Preprocessing.parse("range=-inf,0")


def test_attach_refuses_bundled_inputs_the_reader_would_refuse():
    from ptlite.ir.graph import BundledInput

    program = ptlite.capture(small_model(), (torch.randn(1, 3, 32, 32),), method="export")
    out = np.zeros((1, 5), np.float32)
    for call, expected in ((BundledInput("forward", [], [out], [0.1, 0.2], [0.0]), "atol has 2 value"),
                           (BundledInput("forward", [], [out], [-1.0], [0.0]), "finite and non-negative"),
                           (BundledInput("embed", [], [out], [0.1], [0.0]), "method 'embed' is not in the program")):
        with pytest.raises(ValueError, match=expected):
            ptlite.attach(program, bundled_inputs=[call])
    with pytest.raises(ValueError, match=r"size 320x320 does not fit the input, which takes 32x32"):
        ptlite.attach(program, preprocessing="size=320")
    with pytest.raises(ValueError, match="looks NCHW: give layout=NCHW"):
        ptlite.attach(program, preprocessing="layout=NHWC")
    with pytest.raises(TypeError, match="not one string"):
        ptlite.attach(program, labels="imagenet")


def test_check_compares_numbers_within_tolerance_and_names_a_call_that_raises():
    from ptlite.errors import InputError
    from ptlite.ir.graph import BundledInput
    from ptlite.runtime.bundled import check

    call = BundledInput("forward", [], [1.0, float("nan"), True], [0.1] * 3, [0.0] * 3)
    results = check([call], lambda method, inputs: (1.05, float("nan"), True))
    assert [r.passed for r in results] == [True, True, True], [r.describe() for r in results]
    results = check([call], lambda method, inputs: (1.2, 0.0, False))
    assert [r.passed for r in results] == [False, False, False], [r.describe() for r in results]

    def fails(method, inputs):
        raise InputError("forward: input 'x' must have shape [1, 3]")
    results = check([call, call], fails)
    assert len(results) == 2 and not any(r.passed for r in results)
    assert results[1].describe() == "call 1 (forward) outputs: raises InputError: forward: input 'x' must have " \
                                    "shape [1, 3]"


def test_every_operator_runs_since_a_version_no_newer_than_this_one():
    from ptlite import ops
    from ptlite.version import version_key

    newer = [op.key for op in ops.all_ops().values() if version_key(op.since) > version_key(ptlite.__version__)]
    assert not newer, f"declared @since a version newer than {ptlite.__version__}: files using them would be refused"
