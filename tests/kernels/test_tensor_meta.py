"""Tensor queries (size, dim, dtype, device, ...) and tensor <-> Python scalar conversions against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from oracle import op, torch_op  # noqa: E402

from ptlite.backends.numpy.attention import NestedArray  # noqa: E402

DTYPES = [np.float32, np.float64, np.int64, np.int32, np.uint8, np.bool_, np.float16, np.int8, np.int16]
SHAPES = [(), (3,), (2, 0), (2, 3, 4)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_shape_queries_match_torch(shape):
    a = np.zeros(shape, dtype=np.float32)
    t = torch.from_numpy(a)
    assert op("aten::size")(a) == list(t.size()), f"aten::size of {shape}"
    assert op("aten::dim")(a) == t.dim() and op("aten::numel")(a) == t.numel(), f"dim/numel of {shape}"
    assert op("aten::sym_numel")(a) == t.numel()
    assert op("aten::stride")(a) == list(t.stride()), f"aten::stride of {shape}"
    for d in range(-len(shape), len(shape)):
        assert op("aten::size.int")(a, d) == t.size(d), f"aten::size.int({shape}, {d})"
        assert op("aten::sym_size.int")(a, d) == t.size(d)
    if shape:
        assert op("aten::len.Tensor")(a) == len(t)
        with pytest.raises(IndexError):
            op("aten::size.int")(a, len(shape))
    else:
        with pytest.raises(TypeError):
            op("aten::len.Tensor")(a)


def test_stride_of_views():
    a = np.zeros((2, 3, 4), dtype=np.float32)
    t = torch.zeros(2, 3, 4)
    assert op("aten::stride")(a.transpose(2, 0, 1)) == list(t.permute(2, 0, 1).stride())
    assert op("aten::stride.int")(a[:, ::2], 1) == t[:, ::2].stride(1)
    assert op("aten::is_contiguous")(a) and not op("aten::is_contiguous")(a.transpose(1, 0, 2))
    nhwc = np.zeros((1, 4, 5, 3), dtype=np.float32).transpose(0, 3, 1, 2)
    assert op("aten::is_contiguous.memory_format")(nhwc, 2) == torch.zeros(1, 3, 4, 5).to(
        memory_format=torch.channels_last).is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_dtype_queries_match_torch(dtype):
    a = np.zeros((2,), dtype=dtype)
    t = torch.from_numpy(a)
    want_code = torch.jit.CompilationUnit("def fn(x: Tensor) -> int:\n    return x.dtype\n").fn(t)
    assert op("prim::dtype")(a) == want_code, f"prim::dtype of {np.dtype(dtype).name}"
    assert op("aten::is_floating_point")(a) == t.is_floating_point()
    assert op("aten::is_complex")(a) == t.is_complex()
    assert op("aten::element_size")(a) == t.element_size()


def test_device_queries():
    a = np.zeros(2, dtype=np.float32)
    fn = torch.jit.CompilationUnit("def fn(x: Tensor) -> str:\n    return x.device.type\n").fn
    assert op("prim::type")(op("prim::device")(a)) == fn(torch.zeros(2)) == "cpu"
    assert op("prim::is_cuda")(a) is False and op("prim::requires_grad")(a) is False
    assert op("prim::layout")(a) == 0 and op("aten::get_device")(a) == -1
    assert op("aten::eq.device")(op("prim::device")(a), op("aten::device")("cpu"))
    assert op("prim::index")(op("aten::device.with_index")("cuda", 1)) == 1
    assert op("prim::data")(a) is a


def test_is_nested_only_for_nested_arrays():
    a = np.zeros((2, 3, 4), dtype=np.float32)
    assert op("prim::is_nested")(a) is False
    assert op("prim::is_nested")(NestedArray.wrap(a, np.array([3, 1]))) is True


CONVERSIONS = [
    ("aten::Int.Tensor", np.asarray(2.7, np.float32)), ("aten::Int.Tensor", np.asarray([-3], np.int64)),
    ("aten::Float.Tensor", np.asarray(3, np.int64)), ("aten::Float.Tensor", np.asarray([[0.1]], np.float32)),
    ("aten::Bool.Tensor", np.asarray(0.0, np.float32)), ("aten::Bool.Tensor", np.asarray(True)),
    ("aten::item", np.asarray(0.1, np.float32)), ("aten::item", np.asarray([7], np.int32)),
    ("aten::item", np.asarray(False)), ("aten::ScalarImplicit", np.asarray(2.5, np.float64)),
    ("aten::_local_scalar_dense", np.asarray(4, np.int64)),
]


@pytest.mark.parametrize("key,value", CONVERSIONS, ids=[f"{k}-{v.dtype}" for k, v in CONVERSIONS])
def test_scalar_conversions_match_torch(key, value):
    want = torch_op(key)(torch.from_numpy(np.array(value)))
    got = op(key)(value)
    assert got == want and type(got) is type(want), f"{key}({value!r}): ptlite {got!r}, torch {want!r}"


def test_item_of_several_elements_raises():
    with pytest.raises(ValueError):
        op("aten::item")(np.zeros(2, np.float32))


@pytest.mark.parametrize("value", [3, -2, 2.5, True, False], ids=repr)
def test_num_to_tensor_matches_torch(value):
    want = torch.ops.prim.NumToTensor(value)
    got = op("prim::NumToTensor.Scalar")(value)
    assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == want.numpy().dtype, (
        f"prim::NumToTensor({value!r}): ptlite {got!r}, torch {want!r}")
    assert got.item() == want.item()


TOLIST_CASES = [
    ("List[float]", np.array([1.5, 2.0], np.float32)), ("List[List[float]]", np.ones((2, 2), np.float64)),
    ("List[int]", np.array([3, -1], np.int64)), ("List[bool]", np.array([True, False])),
    ("float", np.asarray(2.5, np.float32)), ("List[List[int]]", np.zeros((0, 2), np.int64)),
]


@pytest.mark.parametrize("annotation,value", TOLIST_CASES, ids=[a for a, _ in TOLIST_CASES])
def test_tolist_matches_torchscript(annotation, value):
    fn = torch.jit.CompilationUnit(f"def fn(x: Tensor) -> {annotation}:\n    return x.tolist()\n").fn
    node = [n for n in fn.graph.nodes() if n.kind() == "prim::tolist"][0]
    dim, elem = (i.toIValue() for i in list(node.inputs())[1:])
    want = fn(torch.from_numpy(value.copy()))
    got = op("prim::tolist")(value, dim, elem)
    assert got == want, f"prim::tolist({annotation}) of {value!r}: ptlite {got!r}, torch {want!r}"


@pytest.mark.parametrize("annotation,value", [("List[int]", np.ones(2, np.int32)),
                                              ("List[float]", np.ones((2, 2), np.float32)),
                                              ("List[bool]", np.ones(2, np.uint8))], ids=str)
def test_tolist_rejects_what_torchscript_rejects(annotation, value):
    fn = torch.jit.CompilationUnit(f"def fn(x: Tensor) -> {annotation}:\n    return x.tolist()\n").fn
    node = [n for n in fn.graph.nodes() if n.kind() == "prim::tolist"][0]
    dim, elem = (i.toIValue() for i in list(node.inputs())[1:])
    with pytest.raises(RuntimeError):
        fn(torch.from_numpy(value))
    with pytest.raises(ValueError):
        op("prim::tolist")(value, dim, elem)
