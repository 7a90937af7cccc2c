"""ptlite.load and ptlite.load_program of a model's bytes and of a binary file object (an app's asset, an archive's
member, a download): the same results, bit for bit, as loading the file by its path, for a .ptlite file and for
PyTorch Mobile .ptl files (zip and flatbuffer); bytes are always content, never a path; errors name the source;
in-memory loads are the load's own copy (64-byte aligned, unguarded, untouched by later changes to the original)."""

from __future__ import annotations

import gzip
import io
import os
import warnings
import zipfile

import numpy as np
import pytest

import ptlite
from ptlite.format.ptl import is_pytorch_mobile, sniff_file
from ptlite.format.source import open_source, sources_of

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]


class Small(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 6 * 6, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).flatten(1))


KINDS = ("ptlite", "ptl", "flatbuffer")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    torch.manual_seed(0)
    model = Small().eval()
    x = torch.randn(1, 3, 6, 6)
    made = {"ptlite": root / "small.ptlite", "ptl": root / "small.ptl", "flatbuffer": root / "small_fb.ptl"}
    ptlite.save(ptlite.optimize_for_mobile(ptlite.capture(model, (x,))), made["ptlite"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scripted = torch.jit.script(model)
        scripted._save_for_lite_interpreter(str(made["ptl"]))
        scripted._save_for_lite_interpreter(str(made["flatbuffer"]), _use_flatbuffer=True)
    made["x"] = x.numpy()
    return made


def _expected(path) -> np.ndarray:
    return ptlite.load(path)(np.zeros((1, 3, 6, 6), np.float32) + 0.5)


def _result(module) -> np.ndarray:
    return module(np.zeros((1, 3, 6, 6), np.float32) + 0.5)


def _sources(path, tmp_path):
    """Every kind of source for the file at path, by name (file objects opened fresh each time)."""
    data = path.read_bytes()
    prefixed = tmp_path / "prefixed.bin"
    prefixed.write_bytes(b"junk" + data)
    gz = tmp_path / "model.gz"
    gz.write_bytes(gzip.compress(data))
    archive = tmp_path / "assets.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("stored/" + path.name, data, compress_type=zipfile.ZIP_STORED)
        z.writestr("deflated/" + path.name, data, compress_type=zipfile.ZIP_DEFLATED)

    def at_offset():
        f = open(prefixed, "rb")  # noqa: SIM115  (closed by the test)
        f.seek(4)
        return f

    def bytes_io_at_offset():
        f = io.BytesIO(b"junk" + data)
        f.seek(4)
        return f

    return {
        "bytes": lambda: data,
        "bytearray": lambda: bytearray(data),
        "memoryview": lambda: memoryview(data),
        "memoryview of int32": lambda: memoryview(np.frombuffer(data + bytes(-len(data) % 4), np.int32).copy())
        .cast("B")[:len(data)],
        "BytesIO": lambda: io.BytesIO(data),
        "BytesIO past a prefix": bytes_io_at_offset,
        "open file": lambda: open(path, "rb"),  # noqa: SIM115
        "unbuffered file": lambda: open(path, "rb", buffering=0),  # noqa: SIM115
        "open file past a prefix": at_offset,
        "gzip file": lambda: gzip.open(gz, "rb"),
        "zip member (stored)": lambda: zipfile.ZipFile(archive).open("stored/" + path.name),
        "zip member (deflated)": lambda: zipfile.ZipFile(archive).open("deflated/" + path.name),
        "stream of small reads": lambda: _Stream(data, 1000),
    }


class _Stream:
    """A file object with read() alone, giving at most `step` bytes a call (a socket, a pipe)."""

    def __init__(self, data: bytes, step: int) -> None:
        self.data, self.step, self.at = data, step, 0

    def read(self, n: int = -1) -> bytes:
        n = self.step if n is None or n < 0 else min(n, self.step)
        chunk = self.data[self.at:self.at + n]
        self.at += len(chunk)
        return chunk


@pytest.mark.parametrize("kind", KINDS)
def test_every_source_gives_the_path_loads_results_bit_for_bit(files, tmp_path, kind):
    path = files[kind]
    expected = _expected(path)
    assert np.array_equal(_result(ptlite.load(path, in_memory=True)), expected)
    assert np.array_equal(_result(ptlite.load(str(path))), expected)
    for what, make in _sources(path, tmp_path).items():
        source = make()
        try:
            got = _result(ptlite.load(source))
        finally:
            if hasattr(source, "close"):
                source.close()
        assert np.array_equal(got, expected), f"{kind} file from {what}: results differ from the path load's"


@pytest.mark.parametrize("kind", KINDS)
def test_load_program_of_bytes_holds_the_path_loads_program(files, kind):
    path = files[kind]
    by_path, by_bytes = ptlite.load_program(path), ptlite.load_program(path.read_bytes())
    assert list(by_bytes.methods) == list(by_path.methods)
    assert by_bytes.weights.keys() == by_path.weights.keys()
    for name, w in by_path.weights.items():
        assert np.array_equal(by_bytes.weights[name], w) and by_bytes.weights[name].dtype == w.dtype, name
    for name, graph in by_path.methods.items():  # value names are numbered per process: compare the nodes
        assert [n.op for n in by_bytes.methods[name].walk()] == [n.op for n in graph.walk()], name
    if kind != "ptlite":
        assert list(ptlite.load_program(io.BytesIO(path.read_bytes()), methods=["forward"]).methods) == ["forward"]


def test_in_memory_weights_are_an_aligned_read_only_copy_untouched_by_changes_to_the_original(files):
    data = bytearray(files["ptlite"].read_bytes())
    program = ptlite.load_program(data)
    module = ptlite.load(data)
    expected = _result(module)
    for name, w in program.weights.items():
        assert w.ctypes.data % 64 == 0, f"weight {name} is not 64-byte aligned"
        assert not w.flags.writeable, name
    data[len(data) // 2:] = bytes(len(data) - len(data) // 2)  # the caller's buffer changes: the module does not
    assert np.array_equal(_result(module), expected)
    assert sources_of(program.weights.values()) == []  # nothing mapped: nothing to check after calls


def test_only_a_path_is_mapped_and_guarded(files):
    if ptlite.format.source.map_file is None:
        pytest.skip("the guarded map was not built here")
    path = files["ptlite"]
    assert open_source(path).mapped
    assert sources_of(ptlite.load_program(path).weights.values()), "a path is mapped, and its weights guarded"
    with open(path, "rb") as f:
        opened = open_source(f)
    assert not opened.mapped and opened.name == str(path)
    assert not open_source(path, in_memory=True).mapped


def test_bytes_are_content_never_a_path(files):
    """The bytes of a file's name are not a model: the error says to pass a str (bytes naming no file are read as
    content, and refused as such)."""
    with pytest.raises(TypeError, match="bytes are a file's content, and these name a file: pass the path as a str"):
        ptlite.load(os.fsencode(files["ptlite"]))
    with pytest.raises(ptlite.FormatError, match="^<bytes>: "):
        ptlite.load(b"/no/such/file.ptlite")


@pytest.mark.parametrize("source, name", [
    (lambda data: data, "<bytes>"),
    (lambda data: bytearray(data), "<bytes>"),
    (lambda data: io.BytesIO(data), "<BytesIO>"),
])
def test_errors_name_content_and_nameless_file_objects(source, name):
    corrupt = b"PTLITE" + bytes(range(200))
    with pytest.raises(ptlite.FormatError, match=f"^{name}: "):
        ptlite.load(source(corrupt))


def test_errors_name_a_file_object_by_its_name(files, tmp_path):
    data = bytearray(files["ptl"].read_bytes())
    data[-30:] = bytes(30)  # the zip's directory is damaged
    archive = tmp_path / "assets.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("models/broken.ptl", bytes(data))
    with zipfile.ZipFile(archive) as z, z.open("models/broken.ptl") as member:
        with pytest.raises(ptlite.FormatError, match="^models/broken.ptl: "):
            ptlite.load(member)
    (tmp_path / "broken.ptl").write_bytes(bytes(data))
    with open(tmp_path / "broken.ptl", "rb") as f, pytest.raises(ptlite.FormatError, match="broken.ptl: "):
        ptlite.load(f)


def test_methods_for_a_ptlite_file_from_bytes_names_it(files):
    with pytest.raises(ValueError, match="^<bytes>: methods= "):
        ptlite.load_program(files["ptlite"].read_bytes(), methods=["forward"])


def test_text_mode_file_objects_are_refused_saying_to_open_them_in_binary_mode(files):
    with open(files["ptlite"], encoding="latin-1") as f, pytest.raises(TypeError, match="binary mode"):
        ptlite.load(f)
    with pytest.raises(TypeError, match="binary mode"):
        ptlite.load(io.StringIO("PTLITE"))

    class Text:
        def read(self, n=-1):
            return "PTLITE"

    with pytest.raises(TypeError, match="binary mode"):
        ptlite.load(Text())


@pytest.mark.parametrize("source", [3, 2.5, None, ["model.ptlite"], np.zeros(8, np.uint8), object()])
def test_other_types_are_refused_naming_what_is_taken(source):
    with pytest.raises(TypeError, match=r"file path .* content \(bytes, bytearray or memoryview\) .* binary file"):
        ptlite.load(source)
    with pytest.raises(TypeError, match="file path"):
        ptlite.load_program(source)


def test_empty_content_and_non_contiguous_views_are_refused():
    for empty in (b"", bytearray(), memoryview(b""), io.BytesIO()):
        with pytest.raises(ptlite.FormatError, match="empty|nothing is left"):
            ptlite.load(empty)
    strided = memoryview(bytes(range(64)))[::2]
    with pytest.raises(TypeError, match="not contiguous"):
        ptlite.load(strided)


def test_sniffing_reads_content_and_puts_a_file_object_back(files):
    data = files["ptl"].read_bytes()
    assert sniff_file(data) == "zip" and is_pytorch_mobile(data)
    assert sniff_file(files["flatbuffer"].read_bytes()) == "flatbuffer"
    f = io.BytesIO(data)
    assert is_pytorch_mobile(f) and f.tell() == 0
    assert not is_pytorch_mobile(files["ptlite"].read_bytes())
    with pytest.raises(TypeError, match="cannot seek"):
        sniff_file(_Stream(data, 100))


def test_open_source_returns_an_opened_source_as_it_is(files):
    opened = open_source(files["ptlite"].read_bytes())
    assert open_source(opened) is opened and opened.name == "<bytes>" and not opened.mapped
    assert len(opened.data) == files["ptlite"].stat().st_size and opened.data.readonly


def test_a_missing_path_and_a_folder_say_so(tmp_path):
    with pytest.raises(FileNotFoundError):
        ptlite.load(tmp_path / "missing.ptlite")
    for in_memory in (False, True):
        with pytest.raises(IsADirectoryError):
            ptlite.load(tmp_path, in_memory=in_memory)

