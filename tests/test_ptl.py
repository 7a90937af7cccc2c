"""PyTorch Mobile .ptl files (zip and flatbuffer): read without torch, run on ptlite's interpreter with the lite
interpreter's results, converted to .ptlite; crafted, truncated and corrupt files are refused with a FormatError,
and nothing in them runs.

torch writes the files in the set-up and is the oracle (`torch.jit.mobile._load_for_lite_interpreter`).
No `from __future__ import annotations`: TorchScript must see the module interface's class annotation itself.
"""

import pickle
import shutil
import struct
import subprocess
import sys
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_close
from models import flatten

import ptlite
from ptlite import zoo
from ptlite.cli import main
from ptlite.format.ptl import read_ptl
from ptlite.format.ptl.unpickler import rebuild_tensor, unpickle

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.jit.mobile import _backport_for_mobile, _load_for_lite_interpreter  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:The TorchScript type system:UserWarning")]

RTOL = 1e-5  # float32 results, same operations in the same order as the lite interpreter


# ------------------------------------------------------------------------------------------------ models

class Branchy(nn.Module):
    """if/else, for and while loops, lists, tuples, a dict, an int argument with a default, an optional argument,
    a list attribute, a buffer, and a second method that raises with an f-string."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("offset", torch.linspace(-1.0, 1.0, 4))
        self.gains: list[float] = [0.5, 2.0]

    def forward(self, x: torch.Tensor, steps: int = 3, scale: float | None = None
                ) -> tuple[torch.Tensor, list[int], dict[str, int]]:
        sizes: list[int] = []
        for i in range(steps):
            x = torch.tanh(self.lin(x)) + self.offset
            sizes.append(i * 2)
        j = 0
        while j < len(sizes) and x.sum() > -100.0:
            x = x * self.gains[j % 2]
            j += 1
        if scale is not None:
            x = x * scale
        else:
            x = -x
        pair = (x, x.mean())
        counts = {"steps": steps, "loops": j}
        return pair[0] + pair[1], sizes, counts

    @torch.jit.export
    def rescale(self, x: torch.Tensor, factor: int = 2) -> torch.Tensor:
        if x.dim() != 2:
            raise ValueError(f"rescale expects 2-D input, got {x.dim()}-D")
        return x * factor


with warnings.catch_warnings():  # torch.jit.interface is deprecated, like all of TorchScript
    warnings.simplefilter("ignore", FutureWarning)

    @torch.jit.interface
    class Step(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            pass


class Double(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0


class Shift(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x - 1.0


class Interfaces(nn.Module):
    """A call through a module interface (INTERFACE_CALL), dict indexing, tolist(), a warning, is-None checks."""

    step: Step

    def __init__(self) -> None:
        super().__init__()
        self.step = Double()
        self.shift = Shift()
        self.table: dict[str, int] = {"a": 1, "b": 2}

    def forward(self, x: torch.Tensor, key: str = "a") -> tuple[torch.Tensor, list[float], int]:
        y = self.shift(self.step(x))
        parts = {"p": y, "q": y + 1.0}
        z = parts["p"] if key == "a" else parts["q"]
        sums: list[float] = z.sum(1).tolist()
        if len(sums) > 100:
            warnings.warn("a large batch", stacklevel=2)
        return z, sums, self.table[key]


class IntDivision(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a / b, torch.div(a, 3)


class Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x + self.calls


def _save(module: nn.Module, path: Path, **kwargs) -> Path:
    torch.jit.script(module.eval())._save_for_lite_interpreter(str(path), **kwargs)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ptl")
    torch.manual_seed(0)
    out = {"branchy": _save(Branchy(), root / "branchy.ptl"),
           "interfaces": _save(Interfaces(), root / "interfaces.ptl"),
           "lstm_classifier": _save(zoo.lstm_classifier(), root / "lstm_classifier.ptl")}
    for version in (4, 5, 6, 7):
        target = root / f"branchy_v{version}.ptl"
        assert _backport_for_mobile(str(out["branchy"]), str(target), version)
        out[f"branchy_v{version}"] = target
    for name, build in (("branchy", Branchy), ("interfaces", Interfaces), ("lstm_classifier", zoo.lstm_classifier)):
        out[f"{name}_flatbuffer"] = _save(build(), root / f"{name}_flatbuffer.ptl", _use_flatbuffer=True)
    return out


@pytest.fixture(scope="module")
def vision_files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ptl_vision")
    return {name: _save(getattr(zoo, name)(), root / f"{name}.ptl") for name in ("mobilenet_v2", "resnet18")}


def _numpy(args: tuple) -> tuple:
    return tuple(a.numpy() if isinstance(a, torch.Tensor) else a for a in args)


def _compare(path: Path, args: tuple, method: str = "forward", what: str = "") -> None:
    """ptlite's result for `method(*args)` equals the lite interpreter's, leaf by leaf."""
    lite = _load_for_lite_interpreter(str(path))
    expected = lite(*args) if method == "forward" else lite.run_method(method, *args)
    actual = ptlite.load(path).run_method(method, *_numpy(args))
    what = what or f"{path.name} {method}"
    exp_leaves, act_leaves = flatten(expected), flatten(actual)
    assert len(act_leaves) == len(exp_leaves), f"{what}: {len(act_leaves)} outputs, lite has {len(exp_leaves)}"
    for i, (a, e) in enumerate(zip(act_leaves, exp_leaves)):
        if isinstance(e, np.ndarray):
            assert np.asarray(a).dtype == e.dtype, f"{what} output {i}: dtype {np.asarray(a).dtype} != {e.dtype}"
            assert_close(a, e, what=f"{what} output {i}", rtol=RTOL)
        else:
            assert a == pytest.approx(e, rel=RTOL) and type(a) is type(e), f"{what} output {i}: {a!r} != {e!r}"


# ------------------------------------------------------------------------------------------------ results

@pytest.mark.parametrize("args", [(), (0,), (5, 0.5), (1, None)], ids=["defaults", "no-loop", "scale", "none"])
def test_control_flow_matches_lite_interpreter(files, args):
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(len(args)))
    _compare(files["branchy"], (x, *args), what=f"branchy{args}")


def test_second_method_with_default_argument(files):
    x = torch.randn(2, 4)
    _compare(files["branchy"], (x,), method="rescale")
    _compare(files["branchy"], (x, 5), method="rescale")
    assert ptlite.load(files["branchy"]).method_names == ["forward", "rescale"]


def test_exception_raised_by_the_model_keeps_its_message(files):
    with pytest.raises(torch.jit.Error, match="rescale expects 2-D input, got 3-D"):
        _load_for_lite_interpreter(str(files["branchy"])).run_method("rescale", torch.zeros(1, 2, 3))
    with pytest.raises(ptlite.ScriptError, match="ValueError: rescale expects 2-D input, got 3-D"):
        ptlite.load(files["branchy"]).run_method("rescale", np.zeros((1, 2, 3), np.float32))


@pytest.mark.parametrize("key", ["a", "b"])
def test_interface_call_dict_and_tolist(files, key):
    _compare(files["interfaces"], (torch.randn(3, 5), key), what=f"interfaces(key={key})")


def test_lstm_classifier(files):
    _compare(files["lstm_classifier"], zoo.example_inputs("lstm_classifier", batch=2))


@pytest.mark.parametrize("version", [4, 5, 6, 7])
def test_back_ported_bytecode_versions(files, version):
    path = files[f"branchy_v{version}"]
    assert read_ptl(path).metadata["bytecode_version"] == version
    _compare(path, (torch.randn(3, 4), 2, 1.5), what=f"branchy bytecode v{version}")
    _compare(path, (torch.randn(2, 4), 3), method="rescale", what=f"branchy bytecode v{version} rescale")


@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet18"])
def test_torchvision_models(vision_files, name):
    _compare(vision_files[name], (zoo.sample_images(1, 224),), what=name)


def test_vision_model_forward_only_by_default(vision_files):
    assert list(read_ptl(vision_files["resnet18"]).methods) == ["forward"]
    both = read_ptl(vision_files["resnet18"], methods=["_forward_impl", "forward"])
    assert list(both.methods) == ["forward", "_forward_impl"]
    with pytest.raises(ValueError, match="no method nope"):
        read_ptl(vision_files["resnet18"], methods=["nope"])


def test_old_operator_version_divides_integers_with_truncation(tmp_path):
    """Files of operator version <= 3 (PyTorch < 1.9) meant truncation for integer `/`: the upgrader applies."""
    fresh = _save(IntDivision(), tmp_path / "div.ptl")
    old = _rewrite(fresh, tmp_path / "div_v3.ptl", {"version": b"3\n"})
    ints = (torch.tensor([7, -7, 9, 5]), torch.tensor([2, 2, 4, 3]))
    floats = (ints[0].float(), ints[1])
    for path in (fresh, old):
        for args in (ints, floats):
            _compare(path, args, what=f"{path.name} {args[0].dtype}")
    assert ptlite.load(old)(*_numpy(ints))[0].tolist() == [3, -3, 2, 1]


def test_file_recognised_by_content_not_name(files, tmp_path):
    renamed = tmp_path / "model.bin"
    shutil.copy(files["branchy"], renamed)
    _compare(renamed, (torch.randn(2, 4),))


def test_convert_command(files, tmp_path):
    out = tmp_path / "branchy.ptlite"
    assert main(["convert", str(files["branchy"]), "-o", str(out)]) == 0
    module = ptlite.load(out)
    lite = _load_for_lite_interpreter(str(files["branchy"]))
    x = torch.randn(3, 4)
    for args in ((x,), (x, 2, 0.5)):
        exp, act = flatten(lite(*args)), flatten(module(*_numpy(args)))
        assert_close(act[0], exp[0], what=f"converted branchy{args[1:]}", rtol=RTOL)
        assert act[1:] == exp[1:], f"converted branchy{args[1:]}: {act[1:]} != {exp[1:]}"
    assert_close(module.run_method("rescale", x.numpy(), 3), lite.run_method("rescale", x, 3),
                 what="converted branchy rescale", rtol=RTOL)


BLOCK_TORCH = """
import sys
class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is not installed here (blocked by the test)")
sys.meta_path.insert(0, _NoTorch())
"""


def test_load_and_convert_without_torch(files, tmp_path):
    x = zoo.example_inputs("lstm_classifier", batch=2)[0]
    np.save(tmp_path / "x.npy", x.numpy())
    ptl, out = files["lstm_classifier"], tmp_path / "lstm.ptlite"
    code = BLOCK_TORCH + f"""
import numpy as np, ptlite
from ptlite.cli import main
x = np.load({str(tmp_path / 'x.npy')!r})
np.save({str(tmp_path / 'loaded.npy')!r}, ptlite.load({str(ptl)!r})(x))
assert main(["convert", {str(ptl)!r}, "-o", {str(out)!r}]) == 0
np.save({str(tmp_path / 'converted.npy')!r}, ptlite.load({str(out)!r})(x))
assert "torch" not in sys.modules, "ptlite imported torch"
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    expected = _load_for_lite_interpreter(str(ptl))(x).detach().numpy()
    for name in ("loaded", "converted"):
        assert_close(np.load(tmp_path / f"{name}.npy"), expected, what=f"lstm_classifier {name} without torch",
                     rtol=RTOL)


# ------------------------------------------------------------------------------------------------ refusals

def _rewrite(src: Path, dst: Path, changes: dict[str, bytes | None]) -> Path:
    """A copy of a .ptl zip with some records replaced (bytes) or removed (None)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            record = info.filename.split("/", 1)[1]
            data = changes[record] if record in changes else zin.read(info)
            if data is not None:
                zout.writestr(info.filename, data, compress_type=zipfile.ZIP_STORED)
    return dst


def _edit_bytecode(src: Path, dst: Path, edit) -> Path:
    """A copy whose bytecode.pkl is `edit(functions)` (functions as nested lists), pickled again."""
    with zipfile.ZipFile(src) as z:
        data = z.read(f"{z.namelist()[0].split('/')[0]}/bytecode.pkl")
    code = _as_lists(unpickle(data, "test"))
    edit(code)
    return _rewrite(src, dst, {"bytecode.pkl": pickle.dumps(_as_tuples(code), protocol=2)})


def _as_lists(value):
    return [_as_lists(v) for v in value] if isinstance(value, tuple) else value


def _as_tuples(value):
    return tuple(_as_tuples(v) for v in value) if isinstance(value, list) else value


def _code_table(code: list, function: str, table: str) -> list:
    (fn,) = [f for f in code[1:] if f[0].endswith(function)]
    (rows,) = [value for name, value in fn[1] if name == table]
    return rows


def _binunicode(text: str) -> bytes:
    data = text.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def _pickle_calling(module: str, name: str, argument: str) -> bytes:
    """A protocol-2 pickle that calls module.name(argument) when loaded by an ordinary unpickler."""
    return b"\x80\x02c" + f"{module}\n{name}\n".encode() + _binunicode(argument) + b"\x85R."


@pytest.mark.parametrize("record", ["data.pkl", "bytecode.pkl"])
@pytest.mark.parametrize("global_name", ["os.system", "builtins.eval"])
def test_forbidden_global_is_refused_and_nothing_runs(files, tmp_path, record, global_name):
    marker = tmp_path / "created_by_the_pickle"
    module, name = global_name.split(".")
    argument = f"touch {marker}" if name == "system" else f"open({str(marker)!r}, 'w')"
    payload = _pickle_calling(module, name, argument)
    crafted = _rewrite(files["branchy"], tmp_path / "crafted.ptl", {record: payload})
    with pytest.raises(ptlite.FormatError, match=rf"global '{global_name}'"):
        ptlite.load(crafted)
    assert not marker.exists(), f"loading ran {global_name} from the file"


def test_forbidden_global_deep_inside_a_valid_pickle_is_refused(files, tmp_path):
    """A forbidden global after valid content (here: in place of a storage type) is refused by name too."""
    with zipfile.ZipFile(files["branchy"]) as z:
        data = z.read("branchy/data.pkl")
    assert b"torch\nFloatStorage\n" in data
    crafted = _rewrite(files["branchy"], tmp_path / "crafted.ptl",
                       {"data.pkl": data.replace(b"torch\nFloatStorage\n", b"posix\nsystem\n", 1)})
    with pytest.raises(ptlite.FormatError, match="global 'posix.system'"):
        ptlite.load(crafted)


def test_truncated_zip_is_refused(files, tmp_path):
    data = files["branchy"].read_bytes()
    for keep in (len(data) // 2, len(data) - 30, 10):
        truncated = tmp_path / f"truncated_{keep}.ptl"
        truncated.write_bytes(data[:keep])
        with pytest.raises(ptlite.FormatError, match="truncated|corrupt|too short"):
            ptlite.load(truncated)


def test_bad_storage_size_is_refused(files, tmp_path):
    with zipfile.ZipFile(files["branchy"]) as z:
        storage = z.read("branchy/data/0")
    crafted = _rewrite(files["branchy"], tmp_path / "short.ptl", {"data/0": storage[:-4]})
    with pytest.raises(ptlite.FormatError, match=r"storage record 'data/0' holds \d+ bytes"):
        ptlite.load(crafted)


def test_missing_record_is_refused(files, tmp_path):
    for record in ("data.pkl", "data/1", "version"):
        crafted = _rewrite(files["branchy"], tmp_path / "missing.ptl", {record: None})
        with pytest.raises(ptlite.FormatError, match=f"record '{record}' is missing"):
            ptlite.load(crafted)


def test_tensor_view_outside_its_storage_is_refused():
    storage = np.zeros(6, np.float32)
    assert rebuild_tensor(storage, 2, (2, 2), (2, 1)).tolist() == [[0, 0], [0, 0]]
    with pytest.raises(ptlite.FormatError, match="reaches element 7 of a 6-element storage"):
        rebuild_tensor(storage, 2, (2, 3), (3, 1))
    with pytest.raises(ptlite.FormatError, match="repeats"):
        rebuild_tensor(storage, 0, (1 << 20, 1 << 20), (0, 0))


def test_self_containing_attribute_is_refused_quickly(files, tmp_path):
    """A pickle whose list contains itself (a loop through the memo) is refused, not walked forever."""
    with zipfile.ZipFile(files["branchy"]) as z:
        cls = z.read("branchy/data.pkl").split(b"\n")[:2]  # the GLOBAL of the root class: '__torch__...', 'Branchy'
    names = ["_is_full_backward_hook", "lin", "offset", "gains"]
    cyclic = b"]q\x00h\x00a"  # EMPTY_LIST, memo it, get it back, append it to itself
    state = _binunicode("training") + cyclic + b"".join(_binunicode(n) + b"h\x00" for n in names)
    data = cls[0] + b"\n" + cls[1] + b"\n)\x81}(" + state + b"ub."
    crafted = _rewrite(files["branchy"], tmp_path / "loop.ptl", {"data.pkl": data})
    start = time.perf_counter()
    message = r"Branchy.forward, instruction \d+: \w+: a module attribute or constant contains itself"
    with pytest.raises(ptlite.FormatError, match=message):
        ptlite.load(crafted)
    assert time.perf_counter() - start < 30, "refusing a self-containing attribute took too long"


def test_memo_index_that_skips_ahead_is_refused(files, tmp_path):
    data = b"\x80\x02]r\xff\xff\xff\xff."  # LONG_BINPUT 2**32-1: would make the unpickler reserve 32 GiB
    crafted = _rewrite(files["branchy"], tmp_path / "memo.ptl", {"data.pkl": data})
    with pytest.raises(ptlite.FormatError, match="memo index 4294967295 skips ahead"):
        ptlite.load(crafted)


@pytest.mark.parametrize("instruction, message", [
    (("JMP", -1, 0), "a jump that is not part of an if/else or loop shape"),
    (("JF", -3, 0), "does not match the if/else shape"),
    (("FROB", 0, 0), "unknown instruction 'FROB'"),
    (("FORK", 0, 0), "FORK is not allowed"),
])
def test_malformed_bytecode_is_refused(files, tmp_path, instruction, message):
    def edit(code):
        rows = _code_table(code, ".forward", "instructions")
        rows[2] = list(instruction)
    crafted = _edit_bytecode(files["branchy"], tmp_path / "bad.ptl", edit)
    with pytest.raises(ptlite.FormatError, match=message):
        ptlite.load(crafted)


def test_every_missing_operator_is_listed(files, tmp_path):
    def edit(code):
        for row in _code_table(code, ".forward", "operators"):
            if row[0] in ("aten::tanh", "aten::mean"):
                row[0] += "_frobnicated"
    crafted = _edit_bytecode(files["branchy"], tmp_path / "ops.ptl", edit)
    with pytest.raises(ptlite.UnsupportedOperatorError) as info:
        ptlite.load(crafted)
    text = str(info.value)
    assert "aten::tanh_frobnicated" in text and "aten::mean_frobnicated" in text and "2 operator(s)" in text


def test_module_state_changed_while_running_is_refused(tmp_path):
    path = _save(Counter(), tmp_path / "counter.ptl")
    with pytest.raises(ptlite.UnsupportedOperatorError, match="SET_ATTR"):
        ptlite.load(path)


def test_flatbuffer_files_match_lite_interpreter(files):
    """The flatbuffer variant (bytecode 9) decodes into the same program as the zip variant."""
    x = torch.randn(3, 4)
    for args in ((x,), (x, 0, 2.0)):
        _compare(files["branchy_flatbuffer"], args, what=f"branchy flatbuffer{args[1:]}")
    _compare(files["branchy_flatbuffer"], (x, 4), method="rescale", what="branchy flatbuffer rescale")
    _compare(files["interfaces_flatbuffer"], (torch.randn(2, 5), "b"), what="interfaces flatbuffer")
    _compare(files["lstm_classifier_flatbuffer"], zoo.example_inputs("lstm_classifier", batch=2),
             what="lstm_classifier flatbuffer")
    assert files["branchy_flatbuffer"].read_bytes()[4:8] == b"PTMF"
    assert read_ptl(files["branchy_flatbuffer"]).metadata["bytecode_version"] == 9


def test_truncated_flatbuffer_is_refused(files, tmp_path):
    data = files["lstm_classifier_flatbuffer"].read_bytes()
    for keep in (len(data) // 2, len(data) - 16, 12):
        truncated = tmp_path / f"truncated_{keep}.ptl"
        truncated.write_bytes(data[:keep])
        with pytest.raises(ptlite.FormatError, match="truncated|too short"):
            ptlite.load(truncated)


def test_torchscript_archive_is_not_taken_for_a_ptl_file(tmp_path):
    path = tmp_path / "full.pt"
    torch.jit.save(torch.jit.script(Double()), str(path))
    with pytest.raises(ptlite.FormatError, match="without bytecode.pkl"):
        ptlite.load(path)
