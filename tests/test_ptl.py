"""PyTorch Mobile .ptl files (zip and flatbuffer): read without torch, run on ptlite's interpreter with the lite
interpreter's results (module state kept across calls included), converted to .ptlite; crafted, truncated and corrupt
files are refused with a FormatError or UnsupportedOperatorError, and nothing in them runs. Quantized files are in
tests/quantization/test_ptl_quantized.py.

torch writes the files in the set-up and is the oracle (`torch.jit.mobile._load_for_lite_interpreter`). The zoo
models are in tests/test_ptl_models.py.
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
from fuzzing import random_edits
from models import flatten

import ptlite
from ptlite.backends.numpy.state import get_attr, set_attr
from ptlite.format.ptl import unpickler
from ptlite.format.ptl.unpickler import rebuild_tensor, unpickle
from ptlite.tools import zoo
from ptlite.tools.cli import main

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.jit.mobile import _backport_for_mobile, _load_for_lite_interpreter  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:The TorchScript type system:UserWarning")]

RTOL = 1e-5  # float32 results, same operations in the same order as the lite interpreter
VARIANTS = ("zip", "v4", "v5", "v6", "v7", "flatbuffer")  # torch 2.14 writes bytecode 8; back-ported; bytecode 9


# ------------------------------------------------------------------------------------------------ models

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


class Scripted(nn.Module):
    """if/else, for and while loops, lists, tuples, a dict, string formatting, an int argument with a default, an
    optional argument, a list attribute, a buffer, a submodule called through an interface, a call counter changed
    by SET_ATTR on every call, and a second method that reads the counter and raises with an f-string."""

    step: Step

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("offset", torch.linspace(-1.0, 1.0, 4))
        self.gains: list[float] = [0.5, 2.0]
        self.step = Double()
        self.calls = 0

    def forward(self, x: torch.Tensor, steps: int = 3, scale: float | None = None
                ) -> tuple[torch.Tensor, list[int], dict[str, int], str, int]:
        if steps < 0:
            raise ValueError(f"steps must be >= 0, got {steps}")
        self.calls += 1
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
        x = self.step(x)
        pair = (x, x.mean())
        counts = {"steps": steps, "loops": j}
        summary = f"call {self.calls}: {len(sizes)} steps, {j} loops"
        return pair[0] + pair[1], sizes, counts, summary, self.calls

    @torch.jit.export
    def rescale(self, x: torch.Tensor, factor: int = 2) -> torch.Tensor:
        if x.dim() != 2:
            raise ValueError(f"rescale expects 2-D input, got {x.dim()}-D")
        return x * factor + self.calls


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


class Smoother(nn.Module):
    """A submodule whose tensor attribute starts as None and is set on every call (an Optional attribute)."""

    last: torch.Tensor | None

    def __init__(self) -> None:
        super().__init__()
        self.last = None
        self.seen = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        last = self.last
        out = x if last is None else 0.5 * (x + last)
        self.last = out
        self.seen = self.seen + x.size(0)
        return out


class Stateful(nn.Module):
    """State kept across calls: in a submodule (a tensor, an int), a float total set by SET_ATTR, a buffer and a
    list changed in place (`add_`, `append`), and a method that reads and resets some of it."""

    sizes: list[int]

    def __init__(self) -> None:
        super().__init__()
        self.smooth = Smoother()
        self.total = 0.0
        self.register_buffer("acc", torch.zeros(3))
        self.sizes: list[int] = []

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, int, float, torch.Tensor, list[int]]:
        y = self.smooth(x)
        self.total += float(y.sum())
        self.acc.add_(y.sum(0))
        self.sizes.append(x.size(0))
        return y, self.smooth.seen, self.total, self.acc * 1.0, self.sizes

    @torch.jit.export
    def reset(self) -> tuple[float, int]:
        total = self.total
        self.total = 0.0
        self.smooth.last = None
        self.sizes.clear()
        return total, len(self.sizes)


class IntDivision(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a / b, torch.div(a, 3)


def _save(module: nn.Module, path: Path, **kwargs) -> Path:
    torch.jit.script(module.eval())._save_for_lite_interpreter(str(path), **kwargs)
    return path


def save_variants(module: nn.Module, root: Path, name: str, variants: tuple[str, ...] = VARIANTS) -> dict[str, Path]:
    """The module saved as each variant: 'zip' (bytecode 8), 'v4'...'v7' (back-ported by torch), 'flatbuffer'."""
    out = {"zip": _save(module, root / f"{name}.ptl")}
    for variant in variants:
        if variant.startswith("v"):
            target = root / f"{name}_{variant}.ptl"
            assert _backport_for_mobile(str(out["zip"]), str(target), int(variant[1:])), f"{name}: back-port failed"
            out[variant] = target
        elif variant == "flatbuffer":
            out[variant] = _save(module, root / f"{name}_flatbuffer.ptl", _use_flatbuffer=True)
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ptl")
    torch.manual_seed(0)
    out = {}
    for name, build, variants in (("scripted", Scripted, VARIANTS), ("interfaces", Interfaces, ("flatbuffer",)),
                                  ("stateful", Stateful, ("v5", "flatbuffer")),
                                  ("lstm_classifier", zoo.lstm_classifier, ("flatbuffer",))):
        for variant, path in save_variants(build(), root, name, variants).items():
            out[name if variant == "zip" else f"{name}_{variant}"] = path
    return out


def _numpy(args: tuple) -> tuple:
    return tuple(a.numpy() if isinstance(a, torch.Tensor) else a for a in args)


def assert_same(actual, expected, what: str, rtol: float = RTOL) -> None:
    """ptlite's result equals the lite interpreter's, leaf by leaf: arrays within rtol, other values exactly (of
    the same type; floats within rtol)."""
    exp_leaves, act_leaves = flatten(expected), flatten(actual)
    assert len(act_leaves) == len(exp_leaves), f"{what}: {len(act_leaves)} outputs, lite has {len(exp_leaves)}"
    for i, (a, e) in enumerate(zip(act_leaves, exp_leaves)):
        if isinstance(e, np.ndarray):
            assert np.asarray(a).dtype == e.dtype, f"{what} output {i}: dtype {np.asarray(a).dtype} != {e.dtype}"
            assert_close(a, e, what=f"{what} output {i}", rtol=rtol)
        elif isinstance(e, float):
            assert type(a) is float and a == pytest.approx(e, rel=rtol), f"{what} output {i}: {a!r} != {e!r}"
        else:
            assert type(a) is type(e) and a == e, f"{what} output {i}: {a!r} != {e!r}"


def compare(path: Path, args: tuple, method: str = "forward", what: str = "", rtol: float = RTOL) -> None:
    """ptlite's result for `method(*args)` equals the lite interpreter's (both freshly loaded)."""
    compare_calls(path, [(method, args)], what=what, rtol=rtol)


def compare_calls(path: Path, calls: list[tuple[str, tuple]], what: str = "", rtol: float = RTOL,
                  converted: Path | None = None, oracle: Path | None = None) -> ptlite.Module:
    """Each call of the sequence, on one lite-interpreter module and on ptlite modules loaded from the file (or
    from `converted`, the .ptlite file made from it) — as `ptlite.load` gives it (a .ptl file optimized at load)
    and as translated, unoptimized — gives the same result (so module state changed by a call reaches the next
    ones); the ptlite module as loaded by default. `oracle`: another file of the same module for the lite
    interpreter."""
    lite = _load_for_lite_interpreter(str(oracle or path))
    modules = {"": ptlite.load(converted or path), " (optimize=False)": ptlite.load(converted or path, optimize=False)}
    for i, (method, args) in enumerate(calls):
        expected = lite.run_method(method, *args)
        for how, module in modules.items():
            actual = module.run_method(method, *_numpy(args))
            assert_same(actual, expected, f"{what or path.name}{how} call {i} {method}{tuple(args[1:])}", rtol)
    return modules[""]


def _scripted_calls(seed: int = 0) -> list[tuple[str, tuple]]:
    gen = torch.Generator().manual_seed(seed)
    x = [torch.randn(3, 4, generator=gen) for _ in range(5)]
    return [("forward", (x[0],)), ("forward", (x[1], 0)), ("rescale", (x[2][:2],)), ("forward", (x[3], 5, 0.5)),
            ("forward", (x[4], 1, None)), ("rescale", (x[2], 5))]


# ------------------------------------------------------------------------------------------------ results

@pytest.mark.parametrize("variant", VARIANTS)
def test_scripted_module_matches_lite_interpreter(files, variant):
    """Every construct of `Scripted`, both methods, defaults, and the call counter across calls, in every
    variant of the file: bytecode 8, back-ported to 4-7, flatbuffer."""
    path = files["scripted" if variant == "zip" else f"scripted_{variant}"]
    expected_version = {"zip": 8, "flatbuffer": 9}.get(variant) or int(variant[1:])
    assert ptlite.load_program(path).metadata["bytecode_version"] == expected_version
    module = compare_calls(path, _scripted_calls(), what=f"scripted ({variant})")
    assert module.state == {"calls": 4}, f"scripted ({variant}): state after four forward calls: {module.state}"
    assert module.method_names == ["forward", "rescale"]


@pytest.mark.parametrize("variant", ["zip", "v5", "flatbuffer"])
def test_exception_raised_by_the_model_keeps_its_message(files, variant):
    path = files["scripted" if variant == "zip" else f"scripted_{variant}"]
    lite, module = _load_for_lite_interpreter(str(path)), ptlite.load(path)
    for method, args, message in (("rescale", (torch.zeros(1, 2, 3),), "rescale expects 2-D input, got 3-D"),
                                  ("forward", (torch.zeros(3, 4), -2), "steps must be >= 0, got -2")):
        with pytest.raises(torch.jit.Error, match=message):
            lite.run_method(method, *args)
        with pytest.raises(ptlite.ScriptError, match=f"ValueError: {message}"):
            module.run_method(method, *_numpy(args))
    assert module.state == {}, "a call that raised before changing the counter changed it"


@pytest.mark.parametrize("variant", ["zip", "v5", "flatbuffer"])
def test_state_across_calls_and_methods(files, tmp_path, variant):
    """An Optional tensor attribute of a submodule set on every call, an int and a float counter, a buffer and a
    list changed in place, and a second method that reads and resets some: ptlite keeps them in Module.state as the
    lite interpreter keeps them in the module."""
    path = files["stateful" if variant == "zip" else f"stateful_{variant}"]
    gen = torch.Generator().manual_seed(1)
    xs = [torch.randn(n, 3, generator=gen) for n in (2, 1, 3)]
    calls = [("forward", (xs[0],)), ("forward", (xs[1],)), ("reset", ()), ("forward", (xs[2],)),
             ("forward", (xs[1],)), ("reset", ())]
    # torch 2.14's lite interpreter crashes (segmentation fault) when a flatbuffer file's buffer is changed in place
    # (`self.acc.add_`): the flatbuffer file's results are compared with its results on the zip file.
    oracle = files["stateful"] if variant == "flatbuffer" else None
    module = compare_calls(path, calls, what=f"stateful ({variant})", oracle=oracle)
    if variant == "zip":  # optimized and saved: the passes keep every read and write of the state
        converted = tmp_path / "stateful.ptlite"
        assert main(["convert", str(path), "-o", str(converted)]) == 0
        compare_calls(path, calls, what="converted stateful", converted=converted)
    assert sorted(module.state) == ["acc", "sizes", "smooth.last", "smooth.seen", "total"]
    assert module.state["smooth.last"] is None and module.state["smooth.seen"] == 7 and module.state["sizes"] == []
    assert ptlite.load(path).state == {}, "a newly loaded module shares state with another"


def test_state_attributes_are_typed_from_their_assignments(files):
    program = ptlite.load_program(files["stateful"])
    assert program.metadata["state"] == {"smooth.last": "Optional[Tensor]", "smooth.seen": "int", "total": "float",
                                         "acc": "Tensor", "sizes": "List[Any]"}
    ops = program.operator_names()
    assert "ptlite::get_attr" in ops and "ptlite::set_attr" in ops
    # the module's state is the interpreter's own (structural), not an operator a build must include
    assert "ptlite::module_state" in ops and "ptlite::module_state" not in ptlite.export_opnames(program)
    assert "ptlite::get_attr" in ptlite.export_opnames(program)
    plain = ptlite.load_program(files["interfaces"])
    assert "state" not in plain.metadata and "ptlite::module_state" not in plain.operator_names()


def test_state_kernels_keep_their_own_copies():
    """The initial value is copied on first read (weights are read-only and shared); a stored array is copied
    (it may live in a memory-plan buffer that the next call overwrites)."""
    weight = np.arange(3.0)
    weight.flags.writeable = False
    state: dict = {}
    value = get_attr(state, "buf", weight)
    value += 1.0
    assert weight.tolist() == [0.0, 1.0, 2.0] and get_attr(state, "buf", weight).tolist() == [1.0, 2.0, 3.0]
    stored = np.ones(2)
    set_attr(state, "buf", stored)
    stored[:] = 7.0
    assert state["buf"].tolist() == [1.0, 1.0]
    items: list[int] = [1]
    get_attr(state, "items", items).append(2)
    assert items == [1] and state["items"] == [1, 2]


@pytest.mark.parametrize("key", ["a", "b"])
def test_interface_call_dict_and_tolist(files, key):
    compare(files["interfaces"], (torch.randn(3, 5), key), what=f"interfaces(key={key})")
    compare(files["interfaces_flatbuffer"], (torch.randn(2, 5), key), what=f"interfaces flatbuffer(key={key})")


def test_old_operator_version_divides_integers_with_truncation(tmp_path):
    """Files of operator version <= 3 (PyTorch < 1.9) meant truncation for integer `/`: the upgrader applies."""
    fresh = _save(IntDivision(), tmp_path / "div.ptl")
    old = _rewrite(fresh, tmp_path / "div_v3.ptl", {"version": b"3\n"})
    assert ptlite.load_program(old).metadata["operator_version"] == 3
    ints = (torch.tensor([7, -7, 9, 5]), torch.tensor([2, 2, 4, 3]))
    floats = (ints[0].float(), ints[1])
    for path in (fresh, old):
        for args in (ints, floats):
            compare(path, args, what=f"{path.name} {args[0].dtype}")
    assert ptlite.load(old)(*_numpy(ints))[0].tolist() == [3, -3, 2, 1]


class OldSignatures(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return (torch.nn.functional.gelu(x), torch.linspace(0.0, 1.0, 17) + x.sum(),
                torch.logspace(0.0, 2.0, 23) + x.sum())


def test_old_operator_versions_gelu_linspace_logspace(tmp_path):
    """Files of operator version <= 9 call gelu without `approximate` (the default fills in); <= 7 and <= 8 may pass
    linspace / logspace a None `steps`, meaning 100. Made from a current file: the version record lowered (results
    equal the lite interpreter's) and the steps constants replaced by None, as an old file would hold them (torch
    2.14's lite interpreter fails on that file, so the old meaning, 100 points, is checked against torch's eager
    linspace / logspace)."""
    fresh = _save(OldSignatures(), tmp_path / "signatures.ptl")
    x = torch.randn(3, 4)
    assert ptlite.load_program(fresh).metadata["operator_version"] == 10
    gelu_v9 = _rewrite(fresh, tmp_path / "signatures_v9.ptl", {".data/version": b"9\n"})
    assert ptlite.load_program(gelu_v9).metadata["operator_version"] == 9
    compare(gelu_v9, (x,), what="operator version 9")

    def none_steps(code):
        rows = _code_table(code, "OldSignatures.forward", "constants")
        assert 17 in rows and 23 in rows, rows
        rows[:] = [None if value in (17, 23) else value for value in rows]

    old = _edit_bytecode(_rewrite(fresh, tmp_path / "signatures_v7.ptl", {".data/version": b"7\n"}),
                         tmp_path / "signatures_v7_none.ptl", none_steps)
    expected = (torch.nn.functional.gelu(x), torch.linspace(0.0, 1.0, 100) + x.sum(),
                torch.logspace(0.0, 2.0, 100) + x.sum())
    for how, module in (("", ptlite.load(old)), (" (optimize=False)", ptlite.load(old, optimize=False))):
        assert_same(module(x.numpy()), expected, f"operator version 7, steps None{how}")


class RunTimeTypes(nn.Module):
    """isinstance() whose answer depends on the value passed: an Optional tensor, a Union of scalars and tensor."""

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None,
                z: int | float | torch.Tensor = 1) -> torch.Tensor:
        out = x
        if isinstance(y, torch.Tensor):
            out = out + y
        if isinstance(z, int):
            out = out * 2
        elif isinstance(z, float):
            out = out * 3
        else:
            out = out + z
        return out


def test_isinstance_decided_at_run_time(tmp_path):
    """Equal to the lite interpreter's results where it runs; it crashes (torch 2.14) when the Union argument is
    an int or a float, so those calls are checked against the scripted module."""
    path = _save(RunTimeTypes(), tmp_path / "types.ptl")
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    assert "ptlite::isinstance" in ptlite.load_program(path).operator_names()
    compare_calls(path, [("forward", (x,)), ("forward", (x, y)), ("forward", (x, None)), ("forward", (x, y, y))],
                  what="run-time isinstance")
    scripted = torch.jit.script(RunTimeTypes())
    for how, module in (("", ptlite.load(path)), (" (optimize=False)", ptlite.load(path, optimize=False))):
        for args in ((x, y, 5), (x, None, 0.5), (x, y, -2)):
            expected = scripted(*args)
            actual = module(*(a.numpy() if isinstance(a, torch.Tensor) else a for a in args))
            assert_close(actual, expected.numpy(), what=f"run-time isinstance{how}, z={args[2]!r}", rtol=1e-6)
    with pytest.raises(ptlite.InputError, match=r"input 'y' must be Optional\[Tensor\], got str"):
        ptlite.load(path)(x.numpy(), "y")
    # the file's Union argument is checked like TorchScript checks it: a bool is not an int
    assert [s.type for s in ptlite.load(path).input_specs][2] == "Union[Tensor, float, int]"  # as torch sorts it
    for bad in (True, "2", [1]):
        with pytest.raises(ptlite.InputError, match=r"input 'z' must be Union\[Tensor, float, int\], got "):
            ptlite.load(path)(x.numpy(), None, bad)
        with pytest.raises(RuntimeError):
            scripted(x, None, bad)


def test_file_recognised_by_content_not_name(files, tmp_path):
    renamed = tmp_path / "model.bin"
    shutil.copy(files["scripted"], renamed)
    compare(renamed, (torch.randn(2, 4),))


def test_convert_command(files, tmp_path):
    """`ptlite convert` (read, optimize_for_mobile, save) keeps results and the counter's behaviour: the .ptlite
    file stores the counter's initial value, and the converted module counts from there."""
    out = tmp_path / "scripted.ptlite"
    assert main(["convert", str(files["scripted"]), "-o", str(out)]) == 0
    module = compare_calls(files["scripted"], _scripted_calls(seed=1), what="converted scripted", converted=out)
    assert module.state == {"calls": 4}


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
from ptlite.tools.cli import main
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
    crafted = _rewrite(files["scripted"], tmp_path / "crafted.ptl", {record: payload})
    with pytest.raises(ptlite.FormatError, match=rf"global '{global_name}'"):
        ptlite.load(crafted)
    assert not marker.exists(), f"loading ran {global_name} from the file"


def test_forbidden_global_deep_inside_a_valid_pickle_is_refused(files, tmp_path):
    """A forbidden global after valid content (here: in place of a storage type) is refused by name too."""
    with zipfile.ZipFile(files["scripted"]) as z:
        data = z.read("scripted/data.pkl")
    assert b"torch\nFloatStorage\n" in data
    crafted = _rewrite(files["scripted"], tmp_path / "crafted.ptl",
                       {"data.pkl": data.replace(b"torch\nFloatStorage\n", b"posix\nsystem\n", 1)})
    with pytest.raises(ptlite.FormatError, match="global 'posix.system'"):
        ptlite.load(crafted)


def test_truncated_zip_is_refused(files, tmp_path):
    data = files["scripted"].read_bytes()
    for keep in (len(data) // 2, len(data) - 30, 10):
        truncated = tmp_path / f"truncated_{keep}.ptl"
        truncated.write_bytes(data[:keep])
        with pytest.raises(ptlite.FormatError, match="truncated|corrupt|too short"):
            ptlite.load(truncated)


def test_bad_storage_size_is_refused(files, tmp_path):
    with zipfile.ZipFile(files["scripted"]) as z:
        storage = z.read("scripted/data/0")
    crafted = _rewrite(files["scripted"], tmp_path / "short.ptl", {"data/0": storage[:-4]})
    with pytest.raises(ptlite.FormatError, match=r"storage record 'data/0' holds \d+ bytes"):
        ptlite.load(crafted)


def test_missing_record_is_refused(files, tmp_path):
    for record in ("data.pkl", "data/1", "version"):
        crafted = _rewrite(files["scripted"], tmp_path / "missing.ptl", {record: None})
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
    with zipfile.ZipFile(files["scripted"]) as z:
        cls = z.read("scripted/data.pkl").split(b"\n")[:2]  # the GLOBAL of the root class: '__torch__...', 'Scripted'
    names = ["offset", "_is_full_backward_hook", "gains", "calls", "lin", "step"]
    cyclic = b"]q\x00h\x00a"  # EMPTY_LIST, memo it, get it back, append it to itself
    state = _binunicode("training") + cyclic + b"".join(_binunicode(n) + b"h\x00" for n in names)
    data = cls[0] + b"\n" + cls[1] + b"\n)\x81}(" + state + b"ub."
    crafted = _rewrite(files["scripted"], tmp_path / "loop.ptl", {"data.pkl": data})
    start = time.perf_counter()
    message = r"Scripted.forward, instruction \d+: \w+: a module attribute or constant contains itself"
    with pytest.raises(ptlite.FormatError, match=message):
        ptlite.load(crafted)
    assert time.perf_counter() - start < 30, "refusing a self-containing attribute took too long"


def test_memo_index_that_skips_ahead_is_refused(files, tmp_path):
    data = b"\x80\x02]r\xff\xff\xff\xff."  # LONG_BINPUT 2**32-1: would make the unpickler reserve 32 GiB
    crafted = _rewrite(files["scripted"], tmp_path / "memo.ptl", {"data.pkl": data})
    with pytest.raises(ptlite.FormatError, match="memo index 4294967295 skips ahead"):
        ptlite.load(crafted)


def test_opcode_check_of_a_long_run_keeps_little_memory():
    """The pattern that skips fixed-size opcodes stops every 4096 of them: a crafted pickle of one long run (a zip
    compresses it to almost nothing) is checked without the regex engine's per-repetition records piling up."""
    import tracemalloc

    data = b"\x80\x02" + b")" * 2_000_000 + b"."
    tracemalloc.start()
    try:
        unpickler.check_opcodes(data, "long run")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"check_opcodes of a 2 MB run peaked at {peak >> 20} MiB"
    with pytest.raises(ptlite.FormatError, match="without STOP"):
        unpickler.check_opcodes(data[:-1], "long run")


def test_cyclic_garbage_made_while_unpickling_is_collected(files, tmp_path):
    """A pickle may build self-holding lists and drop them (memo slot and dict key written again): the reader
    unpickles with the cyclic collector running, so such garbage does not pile up for the whole read (a ~1 MB zip
    could otherwise hold gigabytes of it)."""
    import tracemalloc

    step = b"N]q\x00h\x00as"  # None, [], memo[0] = it, it.append(it), dict[None] = it: the previous list is dropped
    crafted = _rewrite(files["scripted"], tmp_path / "cycles.ptl", {"bytecode.pkl": b"\x80\x02}" + step * 200_000
                                                                      + b"."})
    tracemalloc.start()
    try:
        with pytest.raises(ptlite.FormatError):
            ptlite.load(crafted)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"reading a pickle that drops 200,000 self-holding lists peaked at {peak >> 20} MiB"


def test_malformed_bytecode_tables_are_named_briefly():
    """A code table in the wrong place, or a bad operator row, is refused naming the row and showing only the start
    of what was found (the message is made only on failure: a large table is never written out on a good load)."""
    from ptlite.format.ptl.bytecode import parse_bytecode

    instructions = tuple(("STOREN", i, 0) for i in range(100_000))
    code = (("operators", ()), ("instructions", instructions), ("constants", ()), ("types", ()),
            ("register_size", 1))
    with pytest.raises(ptlite.FormatError, match=r"row 0 must be \('instructions', ...\), got \('operators'") as info:
        parse_bytecode((8, ("__torch__.M.forward", code)), "test")
    assert len(str(info.value)) < 200, f"the message writes out the table: {len(str(info.value))} characters"
    good = (("instructions", (("RET", 0, 0),)), ("operators", ((1, 2),)), ("constants", ()), ("types", ()),
            ("register_size", 1))
    with pytest.raises(ptlite.FormatError, match=r"operator row \(1, 2\) is not \(name, overload"):
        parse_bytecode((8, ("__torch__.M.forward", good)), "test")


def _opcode_check_reference(data: bytes) -> str | None:
    """check_opcodes' verdict (None, or its error message) by one Python iteration per opcode, as it was written
    before the fixed-size runs were skipped by a pattern: the oracle for that shortcut."""
    i, n, puts = 0, len(data), 0
    while i < n:
        op = data[i]
        i += 1
        size = unpickler._FIXED_ARG.get(op)
        if size is not None:
            i += size
            if op == ord("."):
                break
            continue
        if op in (ord("q"), ord("r")):
            width = 1 if op == ord("q") else 4
            index = int.from_bytes(data[i:i + width], "little") if i + width <= n else 0
            i += width
            if index > puts:
                return f"memo index {index} skips ahead"
            puts += index == puts
        elif op == ord("c"):
            middle = data.find(b"\n", i)
            end = data.find(b"\n", middle + 1) if middle >= 0 else -1
            if end < 0:
                return "truncated GLOBAL"
            try:
                unpickler.check_global(data[i:middle].decode("utf-8", "replace"),
                                       data[middle + 1:end].decode("utf-8", "replace"), "test")
            except ptlite.FormatError as exc:
                return str(exc)
            i = end + 1
        elif op == 0x8a:
            i += 1 + (data[i] if i < n else 0)
        elif op in (ord("X"), 0x8d):
            width = 4 if op == ord("X") else 8
            i += width + (int.from_bytes(data[i:i + width], "little") if i + width <= n else 0)
        else:
            return f"pickle opcode {bytes([op])!r} at byte {i - 1}"
    else:
        return "ends without STOP"
    if i < n:
        return "bytes follow the pickle's STOP"
    return "truncated" if i > n else None


def test_opcode_check_agrees_with_one_opcode_at_a_time(files):
    """check_opcodes skips runs of fixed-size opcodes with a pattern: on real bytecode and data pickles, cut at
    many places and with bytes changed after long runs, it refuses exactly what a per-opcode walk refuses."""
    rng = np.random.default_rng(0)
    cases = []
    with zipfile.ZipFile(files["scripted"]) as z:
        pickles = [z.read(n) for n in z.namelist() if n.endswith(".pkl")]
    for data in pickles:
        cases.append(data)
        cases += [data[:k] for k in range(0, len(data), max(1, len(data) // 200))]
        for k in rng.integers(0, len(data), 200):
            for byte in (ord("."), ord("q"), 0xff, ord("K"), ord("X")):
                cases.append(data[:k] + bytes([byte]) + data[k + 1:])
    cases += [b"K", b"KK", b"M\x00", b"q\x00.", b"q\x01.", b"(" * 1000 + b".", b"\x87" * 5000]
    for data in cases:
        expected = _opcode_check_reference(data)
        try:
            unpickler.check_opcodes(data, "test")
            got = None
        except ptlite.FormatError as exc:
            got = str(exc)
        if expected is None:
            assert got is None, f"check_opcodes refused what the per-opcode walk accepts: {got} ({data[:40]!r})"
        else:
            assert got is not None and expected in got, \
                f"check_opcodes said {got!r} where the per-opcode walk says {expected!r} ({data[:40]!r})"


@pytest.mark.parametrize("instruction, message", [
    (("JMP", -1, 0), "a jump that is not part of an if/else or loop shape"),
    (("JF", -3, 0), "does not match the if/else shape"),
    (("FROB", 0, 0), "unknown instruction 'FROB'"),
    (("FORK", 0, 0), "FORK is not allowed"),
])
def test_malformed_bytecode_is_refused(files, tmp_path, instruction, message):
    def edit(code):
        rows = _code_table(code, "Scripted.forward", "instructions")
        rows[2] = list(instruction)
    crafted = _edit_bytecode(files["scripted"], tmp_path / "bad.ptl", edit)
    with pytest.raises(ptlite.FormatError, match=message):
        ptlite.load(crafted)


@pytest.mark.parametrize("constant, shown", [(4, "'q'"), (8, "100")])
def test_to_list_of_a_bad_dimension_count_is_refused(files, tmp_path, constant, shown):
    """TO_LIST's dimension count comes from the constant table: a string there raised a ValueError from int(), and a
    large count would build a nested type name that long (found by fuzzing the bytecode)."""
    def edit(code):
        rows = _code_table(code, "Interfaces.forward", "instructions")
        at = next(i for i, row in enumerate(rows) if row[0] == "TO_LIST")
        assert rows[at - 2][0] == "LOADC"  # the dimension count, then the element type
        rows[at - 2] = ["LOADC", constant, 0]
    crafted = _edit_bytecode(files["interfaces"], tmp_path / "bad.ptl", edit)
    with pytest.raises(ptlite.FormatError, match=rf"TO_LIST of {shown} dimensions \(an int from 0 to 64 expected\)"):
        ptlite.load(crafted)


def test_every_missing_operator_is_listed(files, tmp_path):
    def edit(code):
        for row in _code_table(code, "Scripted.forward", "operators"):
            if row[0] in ("aten::tanh", "aten::mean"):
                row[0] += "_frobnicated"
    crafted = _edit_bytecode(files["scripted"], tmp_path / "ops.ptl", edit)
    with pytest.raises(ptlite.UnsupportedOperatorError) as info:
        ptlite.load(crafted)
    text = str(info.value)
    assert "aten::tanh_frobnicated" in text and "aten::mean_frobnicated" in text and "2 operator(s)" in text


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


def test_object_created_while_running_is_refused(files, tmp_path):
    """PyTorch refuses to save TorchScript classes for the lite interpreter, so files never create objects; a
    crafted CREATE_OBJECT is refused by name, not translated into something else."""
    def edit(code):
        _code_table(code, "Scripted.forward", "instructions")[2] = ["CREATE_OBJECT", 0, 0]
        _code_table(code, "Scripted.forward", "types").append("__torch__.Point")
    crafted = _edit_bytecode(files["scripted"], tmp_path / "object.ptl", edit)
    with pytest.raises(ptlite.UnsupportedOperatorError, match=r"instruction 2 \(CREATE_OBJECT\): the model creates"):
        ptlite.load(crafted)


def test_convert_with_input_shape_plans_memory(tmp_path, capsys):
    """A .ptl file records no input shapes; `--input-shape` gives forward static ones, so the converted file gets a
    memory plan (and refuses other shapes, as an export capture does), and the 3x3 convolution on a large enough
    image, whose output size a run on zeros shows, becomes Winograd as in an export capture."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(16, 4, 1)).eval()
    path, out = tmp_path / "cnn.ptl", tmp_path / "cnn.ptlite"
    torch.jit.script(model)._save_for_lite_interpreter(str(path))
    assert main(["convert", str(path), "--input-shape", "1,3,24,24", "-o", str(out), "--backend", "numpy"]) == 0
    module = ptlite.load(out)
    assert module.memory_plan() is not None
    assert "ptlite::conv2d_winograd_v2" in module.program.operator_names(), module.program.operator_names()
    x = torch.randn(1, 3, 24, 24)
    with torch.inference_mode():
        expected = model(x).numpy()
    for _ in range(2):  # the planned buffers are reused
        assert_close(module(x.numpy()), expected, what="converted cnn.ptl (Winograd)", rtol=2e-5)
    with pytest.raises(ptlite.InputError, match="static shapes"):
        module(np.zeros((2, 3, 24, 24), np.float32))
    assert main(["convert", str(path), "--input-shape", "1,3,12,12", "--input-shape", "1,3", "-o", str(out)]) == 2
    assert "forward takes 1 tensor input(s)" in capsys.readouterr().err


def test_convert_notes_input_shapes_the_model_cannot_run(tmp_path, capsys):
    """A .ptl file records no input shapes, so any rank is taken: a shape without the batch dimension is written,
    but convert's trial run on random inputs of it says so (and a right one says nothing)."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
    path = tmp_path / "cnn.ptl"
    torch.jit.script(model)._save_for_lite_interpreter(str(path))
    assert main(["convert", str(path), "--input-shape", "1,3,16,16", "-o", str(tmp_path / "right.ptlite")]) == 0
    assert "warning:" not in capsys.readouterr().err
    assert main(["convert", str(path), "--input-shape", "3,16", "-o", str(tmp_path / "wrong.ptlite")]) == 0
    err = capsys.readouterr().err
    expected = "ptlite: warning: forward fails on random inputs of the shapes given (input [3, 16]): aten::conv2d"
    assert expected in err, err
    assert "check --input-shape" in err, err


def test_load_optimizes_legacy_files_only(tmp_path):
    """ptlite.load optimizes a .ptl file (its bytecode is never optimized) unless optimize=False; a .ptlite file
    runs as written unless optimize=True. All four give the model's result."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(8 * 36, 5)).eval()
    model[1].running_mean.uniform_(-1, 1)
    model[1].running_var.uniform_(0.5, 2)
    path, raw = tmp_path / "m.ptl", tmp_path / "raw.ptlite"
    torch.jit.script(model)._save_for_lite_interpreter(str(path))
    assert main(["convert", str(path), "--no-optimize", "-o", str(raw)]) == 0
    x = torch.randn(2, 3, 6, 6)
    with torch.inference_mode():
        expected = model(x).numpy()
    for file, optimize, optimized in ((path, None, True), (path, False, False), (raw, None, False),
                                      (raw, True, True)):
        module = ptlite.load(file, optimize=optimize)
        ops = module.program.operator_names()
        what = f"ptlite.load({file.name}, optimize={optimize})"
        assert ("ptlite::conv2d_prepacked" in ops and "aten::batch_norm" not in ops) == optimized, f"{what}: {ops}"
        assert_close(module(x.numpy()), expected, what=what, rtol=1e-5)


def test_a_ptl_that_cannot_be_optimized_still_loads(files, monkeypatch):
    """Optimizing at load is an extra: if it fails, ptlite.load warns and runs the program as translated; asked
    for explicitly (optimize=True), the failure is raised."""
    def broken(program, *args, **kwargs):
        raise RuntimeError("a pass failed")

    monkeypatch.setattr(ptlite, "optimize_for_mobile", broken)
    with pytest.warns(UserWarning, match="optimize_for_mobile failed .*a pass failed.*as translated"):
        module = ptlite.load(files["scripted"])
    assert "passes" not in module.program.metadata
    compare_calls(files["scripted"], _scripted_calls(seed=2)[:2], what="unoptimized fallback")
    with pytest.raises(RuntimeError, match="a pass failed"):
        ptlite.load(files["scripted"], optimize=True)


# ------------------------------------------------------------------------------------------------ fuzzing

_BYTECODE_WORDS = ["OP", "OPN", "LOADC", "MOVE", "STOREN", "LOAD", "DROPR", "JF", "JMP", "LOOP", "RET", "STORE",
                   "LIST_CONSTRUCT", "LIST_UNPACK", "TUPLE_CONSTRUCT", "TUPLE_SLICE", "DICT_CONSTRUCT", "TO_LIST",
                   "ISINSTANCE", "GET_ATTR", "SET_ATTR", "CALL", "INTERFACE_CALL", "RAISE_EXCEPTION", "FORMAT",
                   "aten::add", "aten::relu", "Tensor", "int", "float", "List[int]", "Tuple[int, int]",
                   "Dict[str, int]", "Optional[Tensor]", "__torch__.Foo", ""]
_OTHER_VALUES = [None, 0, -1, "x", [], [1], 1.5, True]


def _edited_pickle_values(data: bytes, rng: np.random.Generator) -> bytes:
    """The pickle with one to three of its ints, floats, strings, bools or Nones replaced (another value, or one of
    another kind), the structure (tuples, globals, storages, memo) left as it was."""
    import pickletools

    ops = list(pickletools.genops(data))
    kinds = {"BININT1", "BININT2", "BININT", "LONG1", "BINFLOAT", "SHORT_BINUNICODE", "BINUNICODE", "NEWTRUE",
             "NEWFALSE", "NONE"}
    candidates = [i for i, (op, _, _) in enumerate(ops) if op.name in kinds]
    chosen = set(rng.choice(candidates, size=min(len(candidates), int(rng.integers(1, 4))), replace=False).tolist())
    out = bytearray()
    for i, (_, arg, pos) in enumerate(ops):
        raw = data[pos:ops[i + 1][2] if i + 1 < len(ops) else len(data)]
        if i in chosen:
            if type(arg) is int:
                value = int(arg) + int(rng.choice([-1, 1, 7])) if rng.random() < 0.8 else int(rng.choice([-1, 2**30]))
                raw = b"J" + struct.pack("<i", max(-2**31, min(2**31 - 1, value)))
            elif type(arg) is str:
                raw = _binunicode(_BYTECODE_WORDS[int(rng.integers(len(_BYTECODE_WORDS)))])
            else:  # a float, bool or None: a value of another kind
                raw = [b"N", b"\x88", b"\x89", b"K\x00", _binunicode("x"), b"G" + struct.pack(">d", float("nan"))][
                    int(rng.integers(6))]
        out += raw
    return bytes(out)


@pytest.mark.parametrize("name", ["scripted", "interfaces"])
def test_edited_ptl_files_fail_with_ptlite_errors_only(files, tmp_path, name):
    """Hostile .ptl files: 150 seeded random edits of the bytecode tables (pickled again) and 150 of the values in
    data.pkl and bytecode.pkl (re-encoded in place): each loads and runs, or fails with one of ptlite's errors,
    never another exception from inside the reader, the translator or the interpreter. (A string dimension count
    for the interfaces module's TO_LIST once raised a ValueError here.)"""
    source = files[name]
    with zipfile.ZipFile(source) as z:
        prefix = z.namelist()[0].split("/")[0]
        records = {record: z.read(f"{prefix}/{record}") for record in ("bytecode.pkl", "data.pkl")}
    code = _as_lists(unpickle(records["bytecode.pkl"], "test"))
    gen = np.random.default_rng(0)
    args = (gen.standard_normal((3, 4)).astype(np.float32),) if name == "scripted" else \
        (gen.standard_normal((3, 5)).astype(np.float32), "a")
    rng = np.random.default_rng(0)
    outcomes = {"ran": 0, "refused": 0}
    for i in range(300):
        if i < 150:
            edited = random_edits(code, rng, _BYTECODE_WORDS, _OTHER_VALUES)
            change = {"bytecode.pkl": pickle.dumps(_as_tuples(edited), protocol=2)}
        else:
            record = ("bytecode.pkl", "data.pkl")[i % 2]
            change = {record: _edited_pickle_values(records[record], rng)}
        case = _rewrite(source, tmp_path / "case.ptl", change)
        try:
            ptlite.load(case)(*args)
            outcomes["ran"] += 1
        except ptlite.errors.PtliteError:
            outcomes["refused"] += 1
        except Exception as exc:  # noqa: BLE001 - the point of the test
            shutil.copy(case, tmp_path / f"escaped_{i}.ptl")
            pytest.fail(f"{name}, edit {i} ({', '.join(change)}): {type(exc).__name__} escaped: {exc}")
    assert outcomes["ran"] > 20 and outcomes["refused"] > 100, outcomes  # the edits reach both outcomes
