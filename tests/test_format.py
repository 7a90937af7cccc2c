"""The .ptlite file: round trip, memory-mapped weights, and refusal of damaged or hostile files."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import textwrap
import zlib

import numpy as np
import pytest
from fuzzing import random_edits

import ptlite
from ptlite import ops
from ptlite.backends.numpy import kernel
from ptlite.format.layout import ALIGN, HEADER, HEADER_SIZE, MAGIC
from ptlite.ir.graph import Block, Graph, Node, Program, Value, ValueSpec


@kernel(ops.declare("test::affine(Tensor x, Tensor w, float s=1.0) -> Tensor"))
def _affine(x, w, s):
    return x * w * s


@kernel(ops.declare("test::gt_zero(Tensor x) -> bool"))
def _gt_zero(x):
    return bool(x.sum() > 0)


def make_program() -> Program:
    """y = affine(x, w, 2.5) if sum(x) > 0 else affine(x, w2, -1.0)."""
    x = Value("x", "Tensor", "float32", (None, 4))
    w, w2 = Value("w", "Tensor"), Value("w2", "Tensor")
    s, neg = Value("s", "float"), Value("neg", "float")
    cond, y = Value("cond", "bool"), Value("y", "Tensor")
    then_out, else_out = Value("t", "Tensor"), Value("e", "Tensor")
    nodes = [
        Node("prim::Constant", [], [w], {"weight": "w"}),
        Node("prim::Constant", [], [w2], {"weight": "w2"}),
        Node("prim::Constant", [], [s], {"value": 2.5}),
        Node("prim::Constant", [], [neg], {"value": -1.0}),
        Node("test::gt_zero", [x], [cond]),
        Node("prim::If", [cond], [y], blocks=[
            Block([], [Node("test::affine", [x, w, s], [then_out])], [then_out]),
            Block([], [Node("test::affine", [x, w2, neg], [else_out])], [else_out]),
        ]),
    ]
    graph = Graph("forward", [x], nodes, [y])
    graph.input_specs = [ValueSpec("x", "Tensor", "float32", (None, 4))]
    graph.output_specs = [ValueSpec("y", "Tensor", "float32", (None, 4))]
    weights = {"w": np.arange(4, dtype=np.float32), "w2": np.full((4,), 3.0, dtype=np.float32)}
    return Program({"forward": graph}, weights, {"note": (1, float("inf"), {"k": [1, 2]})})


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "m.ptlite"
    ptlite.save(make_program(), path)
    return path


def test_round_trip_runs_both_branches(saved):
    m = ptlite.load(saved)
    x = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(m(x), x * np.arange(4) * 2.5)
    np.testing.assert_array_equal(m(-x), -x * 3.0 * -1.0)
    assert m.metadata["note"] == (1, float("inf"), {"k": [1, 2]})
    assert m.method_names == ["forward"]


def test_methods_are_chosen_only_from_pytorch_mobile_files(saved):
    with pytest.raises(ValueError, match="holds the methods it was saved with"):
        ptlite.load_program(saved, methods=["forward"])


def test_weights_are_aligned_read_only_maps(saved):
    program = ptlite.load_program(saved)
    raw = saved.read_bytes()
    (_, _, _, _, _, data_off, _, _, _) = HEADER.unpack_from(raw, 0)
    assert data_off % ALIGN == 0
    for arr in program.weights.values():
        assert not arr.flags.writeable
        assert isinstance(arr.base, (memoryview, bytes)) or arr.base is not None


def test_operator_list_in_file(saved):
    assert ptlite.export_opnames(saved) == ["test::affine", "test::gt_zero"]


def _rewrite_program(path, mutate):
    raw = bytearray(path.read_bytes())
    fields = list(HEADER.unpack_from(raw, 0))
    body = json.loads(bytes(raw[HEADER_SIZE:HEADER_SIZE + fields[4]]))
    mutate(body)
    new = json.dumps(body).encode()
    data = raw[fields[5]:]
    data_off = (HEADER_SIZE + len(new) + ALIGN - 1) // ALIGN * ALIGN
    fields[4], fields[5], fields[7] = len(new), data_off, zlib.crc32(new)
    out = HEADER.pack(*fields) + new + b"\0" * (data_off - HEADER_SIZE - len(new)) + data
    path.write_bytes(out)


@pytest.mark.parametrize("cut", [0, 10, HEADER_SIZE, HEADER_SIZE + 20, -1])
def test_truncated_file_is_refused(saved, cut):
    raw = saved.read_bytes()
    saved.write_bytes(raw[:cut] if cut >= 0 else raw[:-64])
    with pytest.raises(ptlite.FormatError, match="truncated|empty|too short|outside"):
        ptlite.load(saved)


def test_bad_magic(saved):
    raw = bytearray(saved.read_bytes())
    raw[1:7] = b"XXXXXX"
    saved.write_bytes(bytes(raw))
    with pytest.raises(ptlite.FormatError, match="not a ptlite file"):
        ptlite.load(saved)


def test_newer_version_is_refused(saved):
    raw = bytearray(saved.read_bytes())
    struct.pack_into("<I", raw, 8, 99)
    saved.write_bytes(bytes(raw))
    with pytest.raises(ptlite.FormatError, match="version 99 is newer"):
        ptlite.load(saved)


def test_corrupt_program_section(saved):
    raw = bytearray(saved.read_bytes())
    raw[HEADER_SIZE + 5] ^= 0xFF
    saved.write_bytes(bytes(raw))
    with pytest.raises(ptlite.FormatError, match="checksum"):
        ptlite.load(saved)


def test_weight_outside_data_section(saved):
    def mutate(body):
        body["weights"][0]["offset"] = 1 << 40
    _rewrite_program(saved, mutate)
    with pytest.raises(ptlite.FormatError, match="weight 'w'.*outside"):
        ptlite.load(saved)


def test_weight_size_mismatch(saved):
    def mutate(body):
        body["weights"][0]["shape"] = [1000]
    _rewrite_program(saved, mutate)
    with pytest.raises(ptlite.FormatError, match="does not match shape"):
        ptlite.load(saved)


def test_bad_value_reference(saved):
    def mutate(body):
        body["methods"][0]["body"]["nodes"][0]["out"] = [10**6]
    _rewrite_program(saved, mutate)
    with pytest.raises(ptlite.FormatError, match="out of range"):
        ptlite.load(saved)


def test_use_before_definition(saved):
    def mutate(body):
        nodes = body["methods"][0]["body"]["nodes"]
        nodes.insert(0, nodes.pop())  # the If now uses its condition before it exists
    _rewrite_program(saved, mutate)
    with pytest.raises(ptlite.FormatError, match="used before it is defined"):
        ptlite.load(saved)


def test_unknown_operators_are_listed_together(saved):
    from ptlite.errors import UnsupportedOperatorError

    def mutate(body):
        nodes = body["methods"][0]["body"]["nodes"]
        nodes[4]["op"] = "evil::first"
        nodes[5]["blocks"][0]["nodes"][0]["op"] = "evil::second"
    _rewrite_program(saved, mutate)
    with pytest.raises(UnsupportedOperatorError, match=r"(?s)2 operator.*evil::first.*evil::second"):
        ptlite.load(saved)


def test_hostile_json_nesting(saved):
    def mutate(body):
        deep = {"in": [], "nodes": [], "out": []}
        for _ in range(100):
            deep = {"in": [], "out": [], "nodes": [{"op": "prim::If", "in": [], "out": [], "blocks": [deep]}]}
        body["methods"][0]["body"] = deep
    _rewrite_program(saved, mutate)
    with pytest.raises(ptlite.FormatError, match="nested"):
        ptlite.load(saved)


def test_weight_of_too_many_dimensions(saved):
    def mutate(body):
        body["weights"][0]["shape"] = [1] * 65 + [4]  # the right size, but more dimensions than NumPy allows
    _rewrite_program(saved, mutate)
    with pytest.raises(ptlite.FormatError, match="weight 'w' has an invalid shape"):
        ptlite.load(saved)


@pytest.mark.parametrize("text", ['{"a":[1,2.5,"x",null,true,false]}', ' [1 , {"k" : -0.0}] ', '"\\u00e9\\ud800"',
                                  '{"a":NaN,"b":-Infinity}', "1e400", "[]", '{"a":1,"a":2}'])
def test_program_json_is_parsed_as_json_loads_parses_it(text):
    from ptlite.format.encoding import parse_json

    assert repr(parse_json(text)) == repr(json.loads(text)), text


@pytest.mark.parametrize("text", ['{"a":', "", "[1,2", '{"a":1}x', '"\x01"', "\ufeff[1]", "[1,]", "{'a':1}", "nan"])
def test_program_json_errors_are_json_loads_errors(text):
    from ptlite.format.encoding import parse_json

    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError) as got:
        parse_json(text)
    assert str(got.value) == str(expected.value), text


def test_program_json_errors_before_json_is_imported():
    """The C scanner reports errors through json.decoder, which the first error imports (fresh process)."""
    code = textwrap.dedent("""
        import sys
        from ptlite.format.encoding import parse_json
        assert "json" not in sys.modules
        for text in ("[1,2", '{"a":1}x', ""):
            try:
                parse_json(text)
            except ValueError as exc:
                print(type(exc).__name__, exc)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["JSONDecodeError Expecting ',' delimiter: line 1 column 5 (char 4)",
                                          "JSONDecodeError Extra data: line 1 column 8 (char 7)",
                                          "JSONDecodeError Expecting value: line 1 column 1 (char 0)"], result.stdout


def test_loading_imports_neither_json_nor_the_writer_nor_the_legacy_reader(tmp_path):
    x, w, alpha, y = Value("x", "Tensor", "float32", (2, 4)), Value("w"), Value("alpha", "int"), Value("y")
    graph = Graph("forward", [x], [Node("prim::Constant", [], [w], {"weight": "w"}),
                                   Node("prim::Constant", [], [alpha], {"value": 1}),
                                   Node("aten::add.Tensor", [x, w, alpha], [y])], [y])
    graph.input_specs, graph.output_specs = [ValueSpec("x", "Tensor", "float32", (2, 4))], [ValueSpec("y")]
    path = tmp_path / "add.ptlite"
    ptlite.save(Program({"forward": graph}, {"w": np.arange(4, dtype=np.float32)}), path)
    unneeded = ("json", "ptlite.format.writer", "ptlite.format.ptl")
    code = textwrap.dedent(f"""
        import sys
        import numpy as np, ptlite
        y = ptlite.load({str(path)!r})(np.ones((2, 4), np.float32))
        assert y.tolist() == [[1.0, 2.0, 3.0, 4.0]] * 2, y
        print(" ".join(name for name in {unneeded!r} if name in sys.modules))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [], f"loading a .ptlite file imported {result.stdout.split()}, which it never needs"


def test_not_json(saved):
    raw = bytearray(saved.read_bytes())
    fields = list(HEADER.unpack_from(raw, 0))
    junk = b"{" * fields[4]
    raw[HEADER_SIZE:HEADER_SIZE + fields[4]] = junk
    fields[7] = zlib.crc32(junk)
    raw[:HEADER_SIZE] = HEADER.pack(*fields)
    saved.write_bytes(bytes(raw))
    with pytest.raises(ptlite.FormatError, match="JSON"):
        ptlite.load(saved)


def test_input_errors_name_the_input(saved):
    m = ptlite.load(saved)
    with pytest.raises(ptlite.InputError, match="'x' must have dtype float32, got float64"):
        m(np.ones((2, 4)))
    with pytest.raises(ptlite.InputError, match="'x' must have 2 dimensions"):
        m(np.ones((4,), np.float32))
    with pytest.raises(ptlite.InputError, match=r"'x' must have shape \(\?, 4\), got \(2, 5\)"):
        m(np.ones((2, 5), np.float32))
    with pytest.raises(ptlite.InputError, match="takes 1 input"):
        m(np.ones((2, 4), np.float32), 3)
    with pytest.raises(ptlite.InputError, match="no method 'nope'"):
        m.run_method("nope")


def test_magic_is_documented():
    assert MAGIC == b"\x89PTLITE\n"


def test_missing_operators_of_every_method_in_one_error():
    from ptlite.errors import UnsupportedOperatorError

    program = make_program()
    second = make_program().forward
    second.name = "other"
    program.methods["other"] = second
    next(n for n in program.forward.walk() if n.op == "test::gt_zero").op = "evil::in_forward"
    next(n for n in second.walk() if n.op == "test::gt_zero").op = "evil::in_other"
    with pytest.raises(UnsupportedOperatorError, match=r"(?s)2 operator.*evil::in_forward.*evil::in_other"):
        ptlite.Module(program)


# ------------------------------------------------------------------ hostile files that once escaped as raw errors
# Each was found by mutating a saved program's JSON (the seeded fuzz test below does the same): before the fix it
# raised a TypeError, KeyError or ValueError from inside the loader or the interpreter instead of a ptlite error.

def test_only_if_and_loop_hold_blocks(saved):
    def mutate(body):
        nodes = body["methods"][0]["body"]["nodes"]
        nodes[4]["blocks"] = nodes[5]["blocks"]  # test::gt_zero with the If's branches: liveness would walk them
    _rewrite_program(saved, mutate)
    with pytest.raises(ptlite.FormatError, match="only prim::If and prim::Loop hold blocks, this node has 2"):
        ptlite.load(saved)


def test_a_constant_defines_exactly_one_value(saved):
    def mutate(body):
        body["methods"][0]["body"]["nodes"][2]["out"] = []  # the interpreter reads a constant's one output
    _rewrite_program(saved, mutate)
    with pytest.raises(ptlite.FormatError, match="prim::Constant: takes no inputs and defines one value, not 0 and 0"):
        ptlite.load(saved)


@pytest.mark.parametrize("key", ["passes", "optimization_blocklist"])
def test_metadata_ptlite_acts_on_is_checked(saved, key):
    _rewrite_program(saved, lambda body: body["metadata"].update({key: None}))
    with pytest.raises(ptlite.FormatError, match=f"metadata '{key}' must be a list of pass names, not None"):
        ptlite.load(saved)


def test_dict_constant_with_unhashable_keys(saved):
    def mutate(body):
        body["methods"][0]["body"]["nodes"][2]["attrs"]["value"] = {"dict": [[[1], 2]]}
    _rewrite_program(saved, mutate)
    with pytest.raises(ptlite.FormatError, match="invalid constant encoding"):
        ptlite.load(saved)


def test_spec_dtype_must_be_one_ptlite_runs(saved):
    def mutate(body):
        body["methods"][0]["input_specs"][0]["dtype"] = ""
    _rewrite_program(saved, mutate)
    with pytest.raises(ptlite.FormatError, match="spec 'x' has the dtype '', not one ptlite runs"):
        ptlite.load(saved)


def test_a_program_needs_forward(saved):
    _rewrite_program(saved, lambda body: body.update(methods=[]))
    with pytest.raises(ptlite.FormatError, match="the program has no 'forward' method"):
        ptlite.load(saved)


def test_if_condition_must_be_a_bool(saved):
    def mutate(body):
        body["methods"][0]["body"]["nodes"][4]["op"] = "aten::relu"  # the condition is now an array
    _rewrite_program(saved, mutate)
    module = ptlite.load(saved)
    with pytest.raises(ptlite.errors.ExecutionError, match=r"prim::If: its condition is a float32 array of shape "
                                                           r"\(2, 4\), not a bool"):
        module(np.ones((2, 4), np.float32))


def make_loop_program(trip_count) -> Program:
    """y = x, then y = y + y `trip_count` times (a prim::Loop carrying y)."""
    x, trip, cond, y = Value("x", "Tensor"), Value("n", "int"), Value("c", "bool"), Value("y", "Tensor")
    i, carried, doubled, one = Value("i", "int"), Value("acc", "Tensor"), Value("d", "Tensor"), Value("one", "int")
    body = Block([i, carried], [Node("aten::add.Tensor", [carried, carried, one], [doubled])], [cond, doubled])
    nodes = [Node("prim::Constant", [], [trip], {"value": trip_count}),
             Node("prim::Constant", [], [cond], {"value": True}),
             Node("prim::Constant", [], [one], {"value": 1}),
             Node("prim::Loop", [trip, cond, x], [y], blocks=[body])]
    graph = Graph("forward", [x], nodes, [y])
    graph.input_specs = [ValueSpec("x", "Tensor", "float32", (3,))]
    graph.output_specs = [ValueSpec("y", "Tensor", "float32", (3,))]
    return Program({"forward": graph}, {}, {})


def test_loop_trip_count_must_be_an_int(tmp_path):
    ptlite.save(make_loop_program(3), tmp_path / "ok.ptlite")
    np.testing.assert_array_equal(ptlite.load(tmp_path / "ok.ptlite")(np.ones(3, np.float32)), np.full(3, 8.0))
    ptlite.save(make_loop_program(None), tmp_path / "bad.ptlite")
    with pytest.raises(ptlite.errors.ExecutionError, match=r"prim::Loop: its trip count is a NoneType \(None\), "
                                                           "not an int"):
        ptlite.load(tmp_path / "bad.ptlite")(np.ones(3, np.float32))


_REPLACEMENTS = [None, -1, 0, 1, 2, 2**63, 1.5, float("inf"), "", "x", "float32", "Tensor", "aten::relu",
                 "prim::If", "prim::Loop", "prim::TupleUnpack", True, [], {}, [1], [[1], 2], {"dict": [[[1], 2]]},
                 {"tuple": [1]}]
_WORDS = [r for r in _REPLACEMENTS if isinstance(r, str)]


def make_cnn_program(backend: str) -> Program:
    """A small CNN (dense, depthwise and 1x1 convolutions, pooling, a linear layer) lowered for `backend`, with
    its memory plan: the kernel parameters and planned offsets a hostile file would hand the native library."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, 16, 3, 1, 1, groups=16), nn.ReLU6(),
                          nn.Conv2d(16, 24, 1), nn.MaxPool2d(3, 2, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(24, 17)).eval()
    program = ptlite.capture(model, (torch.randn(1, 3, 12, 12),), method="export")
    return ptlite.optimize_for_mobile(program, backend=backend)


def make_sequence_program(backend: str) -> Program:
    """A transformer encoder layer, a GRU and a mean over time, lowered for `backend` with its memory plan: on the
    native backend attention, layer norm, views, broadcasting and the recurrent layer are steps of a plan."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    nn = torch.nn

    class Sequence(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
            self.rnn = nn.GRU(8, 8, batch_first=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (self.rnn(self.encoder(x))[0] * x).mean(1)

    program = ptlite.capture(Sequence().eval(), (torch.randn(1, 6, 8),), method="export")
    return ptlite.optimize_for_mobile(program, backend=backend)


@pytest.mark.parametrize("which", ["branch", "loop", "cnn", "sequence"])
def test_mutated_programs_fail_with_ptlite_errors_only(tmp_path, which):
    """600 seeded random edits of a program's JSON (checksum made valid, as a hostile file's would be): each file
    loads and runs, or fails with one of ptlite's errors (FormatError, UnsupportedOperatorError, InputError,
    ExecutionError), never another exception from inside the loader, the interpreter, NumPy or the native library
    (the CNN and the sequence model are lowered for the native backend where it is built: their kernel parameters
    and memory plans reach C)."""
    original = tmp_path / "original.ptlite"
    if which == "cnn":
        program = make_cnn_program("cpu")
        assert "ptlite::conv2d_packed" in program.operator_names() or ptlite.backends.get("cpu").name == "numpy"
    elif which == "sequence":
        program = make_sequence_program("cpu")
    else:
        program = make_program() if which == "branch" else make_loop_program(3)
    ptlite.save(program, original)
    raw = original.read_bytes()
    fields = HEADER.unpack_from(raw, 0)
    body = json.loads(raw[HEADER_SIZE:HEADER_SIZE + fields[4]])
    x = np.ones({"branch": (2, 4), "loop": (3,), "cnn": (1, 3, 12, 12), "sequence": (1, 6, 8)}[which], np.float32)
    rng = np.random.default_rng(0)
    outcomes = {"ran": 0, "refused": 0}
    case = tmp_path / "case.ptlite"
    for i in range(600):
        case.write_bytes(raw)
        mutated = random_edits(body, rng, _WORDS, _REPLACEMENTS)
        _rewrite_program(case, lambda b, mutated=mutated: (b.clear(), b.update(mutated)))
        try:
            ptlite.load(case)(x)
            outcomes["ran"] += 1
        except ptlite.errors.PtliteError:
            outcomes["refused"] += 1
        except Exception as exc:  # noqa: BLE001 - the point of the test
            pytest.fail(f"edit {i} of the {which} program: {type(exc).__name__} escaped: {exc}\n"
                        f"{json.dumps(mutated)[:2000]}")
    assert outcomes["ran"] > 20 and outcomes["refused"] > 200, outcomes  # the edits reach both outcomes


@pytest.mark.parametrize("path", [0, 2, None, 1.5])
def test_load_takes_paths_not_file_descriptors(path):
    """open() would read an int as a file descriptor (and close it afterwards): stdin for 0, stderr for 2."""
    with pytest.raises(TypeError, match=f"expected a file path .*got {type(path).__name__}"):
        ptlite.load(path)


def test_save_into_a_missing_folder_names_the_path(tmp_path):
    target = tmp_path / "missing" / "m.ptlite"
    with pytest.raises(FileNotFoundError, match=f"cannot write {target}: no directory {target.parent}"):
        ptlite.save(make_program(), target)
