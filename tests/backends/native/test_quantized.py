"""The native int8 kernels (linear_int8 and dense conv2d_int8 on csrc/qgemm.c, depthwise conv2d_int8 on
csrc/qdepthwise.c) give the NumPy reference's results bit for bit (the same integer sums, the same float32
requantization), on every instruction set this CPU has (each with the GEMM micro-kernel it chooses: AVX-512 VNNI,
256-bit vpdpbusd, plain C), for reductions past the reference's float32 bound, every zero point and clamp; what the
library does not take goes to the reference."""

from __future__ import annotations

import numpy as np
import pytest

from ptlite.backends.numpy import quantized as reference


@pytest.fixture
def native(lib):
    from ptlite.backends.native import quantized

    return quantized


@pytest.fixture
def native_kernels(lib):
    from ptlite.backends.native import kernels

    return kernels


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            return {flag for line in f if line.startswith("flags") for flag in line.split(":", 1)[1].split()}
    except OSError:
        return set()


def test_each_instruction_set_chooses_its_int8_gemm_kernel(lib, isa):
    """The GEMM's micro-kernel follows the selected table and the CPU's dot-product instructions (qgemm.c): AVX-512
    VNNI under the AVX-512 table; under the AVX2 one the 256-bit vpdpbusd (AVX-VNNI's encoding, or AVX-512 VNNI's
    on a CPU with VL and without AVX-VNNI), or AVX2's vpmaddwd on a CPU with neither; plain C under the generic
    table. (The selftest runs every kernel the CPU can on every case, bit for bit.)"""
    flags = _cpu_flags()
    if not flags:
        pytest.skip("no /proc/cpuinfo to say what this CPU has")
    evex = {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"} <= flags
    without = "AVX2 (no dot product)"
    want = {"generic": "plain C",
            "avx2": "AVX-VNNI" if "avx_vnni" in flags else "AVX-512 VNNI at 256 bits" if evex else without,
            "avx512": "AVX-512 VNNI" if evex else "AVX-VNNI" if "avx_vnni" in flags else without}
    if isa not in want:
        pytest.skip(f"{isa}: not an x86 table")
    assert lib.qgemm_kernel() == want[isa], f"{isa} table: int8 GEMM on {lib.qgemm_kernel()}, expected {want[isa]}"


def _case(rng, m, k, n, relu, with_bias=True):
    x = rng.integers(0, 256, (m, k)).astype(np.uint8)
    w = rng.integers(-127, 128, (k, n)).astype(np.int8)
    scales = ((rng.random(n) + 0.1) / 100).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32) if with_bias else None
    zx, zo = int(rng.integers(0, 256)), int(rng.integers(0, 256))
    so = float(rng.random() * 0.5 + 0.01) * k ** 0.5
    return x, 0.02, zx, w, scales, bias, so, zo, (zo if relu else 0), 255


@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (5, 3, 17), (64, 16, 96), (33, 200, 40), (7, 700, 31),
                                     (130, 96, 24), (3, 4096, 10)])
@pytest.mark.parametrize("relu", [False, True])
def test_linear_int8_is_the_reference_bit_for_bit(native, isa, m, k, n, relu):
    rng = np.random.default_rng(m * 1000 + k + n)
    args = _case(rng, m, k, n, relu, with_bias=(m % 2 == 1))
    want = reference.linear_int8(*args)
    got = native.linear_int8(*args)
    assert got.dtype == np.uint8 and np.array_equal(got, want), \
        f"linear_int8 ({isa}) m={m} k={k} n={n}: {int((got != want).sum())} outputs differ from the reference"


@pytest.mark.parametrize("output_scale", [1e-9, 3e-5])
def test_linear_int8_clamps_products_past_int32_as_the_reference(native, isa, output_scale):
    """A tiny output scale makes sum x multiplier pass 2^31 (1e-9) or land near the clamps (3e-5): the library
    clamps in float first and converts after, so each output is the reference's lo or hi, not a wrapped value."""
    rng = np.random.default_rng(11)
    args = list(_case(rng, 13, 300, 70, relu=False))
    args[6], args[7] = output_scale, 128
    want, got = reference.linear_int8(*args), native.linear_int8(*args)
    assert np.array_equal(got, want), f"linear_int8 ({isa}) output scale {output_scale}: " \
                                      f"{int((got != want).sum())} outputs differ from the reference"
    assert {0, 255} <= set(np.unique(want).tolist()), "the case does not reach both clamps"


@pytest.mark.parametrize("layout", ["channels-last", "nchw"])
def test_pointwise_conv2d_int8_is_the_reference_bit_for_bit(native, isa, layout):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (2, 24, 9, 7)).astype(np.uint8)
    if layout == "channels-last":
        x = x.transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2)
    w = rng.integers(-127, 128, (24, 40)).astype(np.int8)
    args = (x, 0.03, 17, w, (rng.random(40) / 50).astype(np.float32), rng.standard_normal(40).astype(np.float32),
            [1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1, 0.2, 100, 100, 255)
    want = reference.conv2d_int8(*args)
    got = native.conv2d_int8(*args)
    assert np.array_equal(got, want), f"pointwise conv2d_int8 ({isa}, {layout} input) differs from the reference"
    assert got.transpose(0, 2, 3, 1).flags.c_contiguous, "the result is not channels-last"
    out = np.empty((2, 9, 7, 40), np.uint8).transpose(0, 3, 1, 2)
    assert native.conv2d_int8(*args, out=out) is out and np.array_equal(out, want), "out= not written"


@pytest.mark.parametrize("kernel, stride, padding, dilation", [
    (3, 1, [1, 1, 1, 1], 1), (3, 2, [1, 1, 1, 1], 1), (5, 1, [0, 2, 1, 0], 1), (3, 1, [2, 2, 2, 2], 2),
    (7, 2, [3, 3, 3, 3], 1), (3, 3, [0, 0, 0, 0], 1)])
@pytest.mark.parametrize("channels, outputs", [(5, 9), (3, 64), (16, 140)])
def test_dense_conv2d_int8_is_the_reference_bit_for_bit(native, isa, kernel, stride, padding, dilation, channels,
                                                        outputs):
    """The patches gathered with the input's zero point as padding, then the GEMM: every tap, stride, padding and
    dilation; tap rows of 3 bytes (k % 4 != 0) and outputs over several panels."""
    rng = np.random.default_rng(kernel * 10 + stride)
    x = rng.integers(0, 256, (2, channels, 11, 10)).astype(np.uint8)
    from ptlite.ops.layouts import pack_conv2d_weight

    w = pack_conv2d_weight(rng.integers(-127, 128, (outputs, channels, kernel, kernel)).astype(np.int8), 1)
    args = (x, 0.03, 201, w, (rng.random(outputs) / 50).astype(np.float32),
            rng.standard_normal(outputs).astype(np.float32),
            [kernel, kernel], [stride, stride], padding, [dilation, dilation], 1, 0.2, 30, 30, 255)
    want = reference.conv2d_int8(*args)
    got = native.conv2d_int8(*args)
    assert np.array_equal(got, want), f"{kernel}x{kernel} conv2d_int8 ({isa}) {channels} -> {outputs} channels, " \
        f"stride {stride} padding {padding} dilation {dilation}: {int((got != want).sum())} outputs differ"


@pytest.mark.parametrize("layout", ["channels-last", "nchw"])
@pytest.mark.parametrize("kernel, stride, padding, dilation", [
    (3, 1, 1, 1), (3, 2, 1, 1), (5, 1, 2, 1), (3, 1, 2, 2), (5, 2, 2, 1)])
@pytest.mark.parametrize("channels", [24, 300])
def test_depthwise_conv2d_int8_is_the_reference_bit_for_bit(native, isa, kernel, stride, padding, dilation, layout,
                                                            channels):
    """The library's int8 depthwise kernel: the same integer sums, the same requantization; more channels than its
    block of sums, a clamped output range, and out= written in place."""
    rng = np.random.default_rng(kernel + 7 * stride)
    x = rng.integers(0, 256, (2, channels, 13, 11)).astype(np.uint8)
    if layout == "channels-last":
        x = x.transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2)
    w = rng.integers(-127, 128, (kernel * kernel, channels)).astype(np.int8)
    args = (x, 0.02, 77, w, (rng.random(channels) / 50).astype(np.float32),
            rng.standard_normal(channels).astype(np.float32), [kernel, kernel], [stride, stride],
            [padding, padding + 1, padding, 0], [dilation, dilation], channels, 0.1, 50, 50, 200)
    got, want = native.conv2d_int8(*args), reference.conv2d_int8(*args)
    assert np.array_equal(got, want), f"depthwise {kernel}x{kernel} conv2d_int8 ({isa}, {layout}, {channels} " \
                                      f"channels): {int((got != want).sum())} outputs differ from the reference"
    out = np.empty(got.shape, np.uint8)
    assert native.conv2d_int8(*args, out=out) is out and np.array_equal(out, want), "out= not written"


def test_what_the_library_does_not_take_goes_to_the_reference(native):
    rng = np.random.default_rng(4)
    x = rng.integers(0, 256, (1, 8, 6, 6)).astype(np.uint8)
    w = rng.integers(-127, 128, (2, 9 * 4, 3)).astype(np.int8)  # two groups of four channels
    args = (x, 0.03, 17, w, np.full(6, 0.01, np.float32), None, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 2, 0.2, 100)
    assert np.array_equal(native.conv2d_int8(*args), reference.conv2d_int8(*args)), "grouped conv2d_int8"
    big = _case(rng, 2, 8, 3, False)  # a bias too large for int32 offsets: the reference sums in int64
    huge = (big[0], 1e-6, *big[2:4], np.full(3, 1e-6, np.float32), np.full(3, 1e6, np.float32), *big[6:])
    assert np.array_equal(native.linear_int8(*huge), reference.linear_int8(*huge))


def test_the_library_checks_its_buffers(lib):
    x = np.zeros((4, 8), np.uint8)
    packed = np.zeros((2, 16, 4), np.int8)
    offsets, mults = np.zeros(16, np.int32), np.zeros(16, np.float32)
    with pytest.raises(ValueError, match="shorter than the sizes need"):
        lib.qgemm(x, packed, offsets, mults, np.zeros((4, 3), np.uint8), (5, 8, 3, 8, 0, 0, 255))
    with pytest.raises(ValueError, match="invalid sizes"):
        lib.qgemm(x, packed, offsets, mults, np.zeros((4, 3), np.uint8), (4, 9, 3, 8, 0, 0, 255))
    with pytest.raises(ValueError, match="outside uint8"):
        lib.qgemm(x, packed, offsets, mults, np.zeros((4, 3), np.uint8), (4, 8, 3, 8, 300, 0, 255))
    with pytest.raises(ValueError, match="invalid convolution"):  # m is not batch x ho x wo
        lib.qgemm(x, packed, offsets, mults, np.zeros((4, 3), np.uint8), (4, 8, 3, 8, 0, 0, 255),
                  (1, 2, 2, 2, 2, 1, 1, 1, 1, 1, 0, 0, 1, 2, 0))
    with pytest.raises(ValueError, match="shorter than the sizes need"):  # the image is 2 x 2 x 2, not 3 x 2 x 2
        lib.qgemm(x[:1], packed, offsets, mults, np.zeros((6, 3), np.uint8), (6, 4, 3, 4, 0, 0, 255),
                  (1, 3, 2, 2, 2, 1, 1, 1, 1, 1, 0, 0, 2, 3, 0))
    image, taps = np.zeros((1, 4, 4, 8), np.uint8), np.zeros((9, 8), np.int32)
    dw_offsets, dw_mults = np.zeros(8, np.int32), np.zeros(8, np.float32)
    with pytest.raises(ValueError, match="shorter than the sizes need"):
        lib.qdepthwise(image, taps, dw_offsets, dw_mults, np.zeros((1, 4, 4, 8), np.uint8),
                       (1, 5, 4, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4, 4, 0, 0, 0, 255))
    with pytest.raises(ValueError, match="invalid sizes"):
        lib.qdepthwise(image, taps, dw_offsets, dw_mults, np.zeros((1, 4, 4, 8), np.uint8),
                       (1, 4, 4, 8, 3, 3, 0, 1, 1, 1, 1, 1, 4, 4, 0, 0, 0, 255))
    with pytest.raises(ValueError, match="overlaps"):
        lib.qdepthwise(image, taps, dw_offsets, dw_mults, image,
                       (1, 4, 4, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4, 4, 0, 0, 0, 255))


@pytest.mark.parametrize("layout", ["C", "channels-last", "mixed"])
@pytest.mark.parametrize("shape", [(1, 37, 13, 11), (2, 64, 28, 28)])
def test_add_int8_is_the_reference_bit_for_bit(native, isa, layout, shape):
    """Every product rounded to float32 before the sum, as NumPy does: a fused multiply-add would move some values
    across a rounding tie (100k values with unrelated scales find some). Mixed layouts go to the reference."""
    rng = np.random.default_rng(len(layout) + shape[0])
    a, b = (rng.integers(0, 256, shape).astype(np.uint8) for _ in range(2))
    if layout != "C":
        a = a.transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2)
    if layout == "channels-last":
        b = b.transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2)
    for low, high in ((0, 255), (113, 255), (0, 200)):
        args = (a, 0.0371, 131, b, 0.0219, 97, 0.0613, 121, low, high)
        want, got = reference.add_int8(*args), native.add_int8(*args)
        assert np.array_equal(got, want), f"add_int8 ({isa}, {layout}, {shape}, range [{low}, {high}]): " \
                                          f"{int((got != want).sum())} outputs differ from the reference"
        if layout != "mixed":
            assert got.strides == a.strides, f"add_int8 ({isa}, {layout}) changed the layout"
    inplace = a.copy(order="K")
    assert native.add_int8(inplace, 0.0371, 131, b, 0.0219, 97, 0.0613, 121, out=inplace) is inplace
    assert np.array_equal(inplace, reference.add_int8(a, 0.0371, 131, b, 0.0219, 97, 0.0613, 121)), \
        f"add_int8 ({isa}, {layout}) in place"


@pytest.mark.parametrize("scales", [(0.1, 0.1, 0.2), (0.3, 0.1, 0.2), (0.7, 0.1, 0.4)])
def test_add_int8_rounds_each_product_as_numpy_does(native, isa, scales):
    """Every pair of uint8 values with scales whose real sums sit on rounding ties: a product fused into the
    addition (an FMA, which -ffp-contract=fast would make) moves over a thousand of these 65536 outputs."""
    a, b = (v.reshape(1, 256, 16, 16).astype(np.uint8) for v in np.meshgrid(np.arange(256), np.arange(256)))
    args = (a, scales[0], 128, b, scales[1], 3, scales[2], 0)
    want, got = reference.add_int8(*args), native.add_int8(*args)
    assert np.array_equal(got, want), f"add_int8 ({isa}) with scales {scales}: {int((got != want).sum())} of " \
                                      f"65536 outputs differ from the reference"


@pytest.mark.parametrize("shape", [(1, 3, 31, 29), (2, 5), (2, 16, 9, 9), (2, 4, 5, 33), (1, 2, 4, 40)])
def test_quantize_and_dequantize_are_the_reference_bit_for_bit(native, isa, shape):
    """Quantizing rounds half to even like NumPy (inputs on the ties included) and clamps; a C-contiguous image
    comes back channels-last, the layout a convolution reads, with the same values."""
    rng = np.random.default_rng(shape[-1])
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    x.reshape(-1)[::7] = (np.round(x.reshape(-1)[::7] / 0.05) + 0.5) * np.float32(0.05)  # near ties
    x.reshape(-1)[:4] = [1e9, -1e9, 0.0, -0.0]
    want, got = reference.quantize_per_tensor(x, 0.05, 77), native.quantize_per_tensor(x, 0.05, 77)
    assert got.dtype == np.uint8 and np.array_equal(got, want), \
        f"quantize_per_tensor ({isa}, {shape}): {int((got != want).sum())} values differ from the reference"
    if len(shape) == 4:
        assert got.transpose(0, 2, 3, 1).flags.c_contiguous, "a quantized image is not channels-last"
    back_want, back = reference.dequantize_per_tensor(got, 0.05, 77), native.dequantize_per_tensor(got, 0.05, 77)
    assert back.dtype == np.float32 and np.array_equal(back, back_want) \
        and np.array_equal(np.array(back.strides) // 4, got.strides), \
        f"dequantize_per_tensor ({isa}, {shape}) differs from the reference or changed the layout"
    out = np.empty(shape, np.uint8)
    assert native.quantize_per_tensor(x, 0.05, 77, out=out) is out and np.array_equal(out, want), "out= not written"
    strided = x[..., ::2]  # dense in no order: the reference's
    assert np.array_equal(native.quantize_per_tensor(strided, 0.05, 77),
                          reference.quantize_per_tensor(strided, 0.05, 77))


@pytest.mark.parametrize("shape, kernel, stride, padding, dilation, ceil", [
    ((2, 64, 21, 19), [3, 3], [2, 2], [1, 1], [1, 1], False), ((1, 5, 9, 7), [3, 2], [1, 2], [1, 1], [2, 1], True),
    ((1, 17, 8, 8), [2, 2], [2, 2], [0, 0], [1, 1], False)])
def test_uint8_max_pool2d_is_the_reference(native_kernels, isa, shape, kernel, stride, padding, dilation, ceil):
    """A quantized channels-last image pools in the library (csrc/qpool.c): the same bytes, channels-last, out=."""
    from ptlite.backends.numpy import implementation

    rng = np.random.default_rng(shape[1])
    x = rng.integers(0, 256, shape).astype(np.uint8).transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2)
    args = (kernel, stride, padding, dilation, ceil)
    got, want = native_kernels.max_pool2d(x, *args), implementation("aten::max_pool2d")(x, *args)
    assert got.dtype == np.uint8 and np.array_equal(got, want), \
        f"uint8 max_pool2d ({isa}) {kernel} stride {stride}: {int((got != want).sum())} values differ"
    assert got.transpose(0, 2, 3, 1).flags.c_contiguous, "the result is not channels-last"
    out = np.empty(want.shape[:1] + want.shape[2:] + want.shape[1:2], np.uint8).transpose(0, 3, 1, 2)
    assert native_kernels.max_pool2d(x, *args, out=out) is out and np.array_equal(out, want), "out= not written"


def test_what_the_library_cannot_match_goes_to_the_reference(native):
    """Arguments whose reference results the library's int32 / finite arithmetic cannot give, or that the
    reference refuses, run the reference: a bias rounding past int64 (the reference wraps it), a NaN weight scale,
    a zero point outside uint8, a stride past the library's bound."""
    from ptlite.errors import KernelArgumentError

    rng = np.random.default_rng(12)
    x, _, _, w, scales, bias, so, zo, low, high = _case(rng, 5, 20, 18, False)
    cases = {"a bias past int64 at the product's scale": (x, 1e-5, 0, w, np.full(18, 1e-20, np.float32),
                                                         np.full(18, 1e30, np.float32), 1e-25, zo, low, high),
             "a NaN weight scale": (x, 0.02, 3, w, np.where(np.arange(18) == 4, np.nan, scales).astype(np.float32),
                                    bias, so, zo, low, high)}
    for name, args in cases.items():
        with np.errstate(all="ignore"):
            want, got = reference.linear_int8(*args), native.linear_int8(*args)
        assert np.array_equal(got, want), f"linear_int8 with {name}: {int((got != want).sum())} outputs differ"
    with pytest.raises(KernelArgumentError):
        native.linear_int8(x, 0.02, 300, w, scales, bias, so, zo)
    image = rng.integers(0, 256, (1, 4, 5, 5)).astype(np.uint8)
    taps = rng.integers(-127, 128, (9, 4)).astype(np.int8)
    args = (image, 0.02, 7, taps, np.full(4, 0.01, np.float32), None, [3, 3], [1 << 30, 1 << 30], [0, 0, 0, 0],
            [1, 1], 4, 0.1, 9)
    assert np.array_equal(native.conv2d_int8(*args), reference.conv2d_int8(*args)), "a stride of 2^30"


def test_the_library_refuses_sizes_whose_products_wrap(lib):
    """m x n past 2^64 wrapped to a tiny output length, and kh x kw x c wrapped to k: refused, not written."""
    x, w = np.zeros(16, np.uint8), np.zeros(64, np.int8)
    offsets, mults, y = np.zeros(16, np.int32), np.zeros(16, np.float32), np.zeros(1, np.uint8)
    with pytest.raises(ValueError, match="invalid"):  # m = 2^40 rows, n = 2^24 columns
        lib.qgemm(x, w, offsets, mults, y, (1 << 40, 1, 1 << 24, 1, 0, 0, 255),
                  (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1 << 20, 1 << 20, 0))
    with pytest.raises(ValueError, match="invalid"):  # kh x kw x c = 2^87 + 1 would wrap to 1
        lib.qgemm(x, w, offsets, mults, y, (1, 1, 1, 1, 0, 0, 255),
                  (1, 1, 1, (1 << 29) + 1, 1 << 29, 1 << 29, 1, 1, 1, 1, 0, 0, 1, 1, 0))


def test_repeated_calls_on_read_only_weights_follow_their_arguments(native):
    """A loaded file's weights are read-only, and a repeated call with the same argument objects skips preparing
    its library call again: a call whose input shape, output parameters or clamp differ is prepared anew, and a
    writeable weight changed in place between calls is seen."""
    rng = np.random.default_rng(5)

    def read_only(a):
        return np.frombuffer(a.tobytes(), a.dtype).reshape(a.shape)

    w = rng.integers(-127, 128, (3 * 3 * 8, 16)).astype(np.int8)
    scale, bias = (rng.random(16) / 50).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    geometry = ([3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1)
    for weight in (read_only(w), w.copy()):
        args = [read_only(scale), read_only(bias)]
        for step, (shape, output_scale, low) in enumerate([((1, 8, 9, 9), 0.1, 0), ((1, 8, 9, 9), 0.1, 0),
                                                           ((2, 8, 5, 7), 0.1, 0), ((2, 8, 5, 7), 0.3, 0),
                                                           ((2, 8, 5, 7), 0.3, 40)]):
            if weight.flags.writeable and step == 1:
                weight[0] = -weight[0]  # in place: the next call must use the new values
            x = rng.integers(0, 256, shape).astype(np.uint8)
            call = (x, 0.02, 77, weight, *args, *geometry, output_scale, 50, low, 255)
            got, want = native.conv2d_int8(*call), reference.conv2d_int8(*call)
            kind = "writeable" if weight.flags.writeable else "read-only"
            assert np.array_equal(got, want), f"conv2d_int8 call {step} ({kind} weight, input {shape}, output " \
                f"scale {output_scale}, min {low}): {int((got != want).sum())} outputs differ from the reference"
