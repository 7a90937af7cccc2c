"""Attention kernels against PyTorch: scaled dot-product attention, the native multi-head attention, the fused
encoder layer, and the nested-tensor round trip of nn.TransformerEncoder's fast path."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kernel_backend import kernel as op  # noqa: E402
from oracle import compare, to_numpy  # noqa: E402

from ptlite.backends.numpy.attention import NestedArray  # noqa: E402


def _mha_weights(embed: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3 * embed, embed, generator=g) * 0.3, torch.randn(3 * embed, generator=g) * 0.1,
            torch.randn(embed, embed, generator=g) * 0.3, torch.randn(embed, generator=g) * 0.1)


B, L, E, H = 3, 5, 16, 4
KPM = torch.tensor([[False] * 5, [False, False, True, False, True], [True] * 5])  # last row: all masked
CAUSAL = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)


def _mask_cases():
    merged = CAUSAL.view(1, 1, L, L).expand(B, H, L, L) | KPM.view(B, 1, 1, L)
    return {
        "none": (None, None),
        "kpm_bool": (KPM, 1),
        "kpm_float": (torch.zeros(B, L).masked_fill(KPM, float("-inf")), 1),
        "kpm_half": (torch.zeros(B, L).masked_fill(KPM, 0.5), 1),  # any non-zero masks in the fast path
        "attn_bool": (CAUSAL, 0),
        "attn_float": (torch.zeros(L, L).masked_fill(CAUSAL, float("-inf")), 0),
        "merged": (merged, 2),
    }


@pytest.mark.parametrize("need_weights,average", [(False, True), (True, True), (True, False)],
                         ids=["no_weights", "avg_weights", "head_weights"])
@pytest.mark.parametrize("mask_name", list(_mask_cases()))
@pytest.mark.parametrize("self_attention", [True, False], ids=["self", "cross"])
def test_native_multi_head_attention_matches_torch(mask_name, need_weights, average, self_attention):
    mask, mask_type = _mask_cases()[mask_name]
    x = torch.randn(B, L, E, generator=torch.Generator().manual_seed(1))
    kv = x if self_attention else torch.randn(B, L, E, generator=torch.Generator().manual_seed(2))
    w = _mha_weights(E)
    with torch.no_grad():
        want = torch._native_multi_head_attention(x, kv, kv, E, H, *w, mask, need_weights, average, mask_type)
    xn = x.numpy()
    kvn = xn if self_attention else kv.numpy()
    got = op("aten::_native_multi_head_attention")(xn, kvn, kvn, E, H, *to_numpy(w), to_numpy(mask),
                                                          need_weights, average, mask_type)
    key = "aten::_native_multi_head_attention"
    compare(f"{key} output ({mask_name})", got[0], want[0])
    if need_weights:
        compare(f"{key} weights ({mask_name})", got[1], want[1])
    else:
        assert got[1] is None and want[1] is None, f"{key}: weights without need_weights"


def test_native_multi_head_attention_needs_mask_type():
    w = to_numpy(_mha_weights(E))
    x = np.zeros((B, L, E), np.float32)
    with pytest.raises(ValueError, match="Mask Type"):
        op("aten::_native_multi_head_attention")(x, x, x, E, H, *w, KPM.numpy(), True, True, None)


def _layer(norm_first: bool, activation: str, seed: int = 0) -> torch.nn.TransformerEncoderLayer:
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(E, H, 32, batch_first=True, norm_first=norm_first,
                                             activation=activation).eval()
    with torch.no_grad():  # make the norms non-trivial
        for norm in (layer.norm1, layer.norm2):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    return layer


def _layer_args(layer):
    sa = layer.self_attn
    return [E, H, sa.in_proj_weight, sa.in_proj_bias, sa.out_proj.weight, sa.out_proj.bias,
            layer.activation_relu_or_gelu == 2, layer.norm_first, layer.norm1.eps, layer.norm1.weight,
            layer.norm1.bias, layer.norm2.weight, layer.norm2.bias, layer.linear1.weight, layer.linear1.bias,
            layer.linear2.weight, layer.linear2.bias]


def _ours(args):
    return [to_numpy(a) if isinstance(a, torch.Tensor) else a for a in args]


@pytest.mark.parametrize("mask_name", ["none", "kpm_bool", "kpm_float", "attn_bool", "merged"])
@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu"), (False, "gelu")],
                         ids=["post_relu", "pre_gelu", "post_gelu"])
def test_encoder_layer_dense_matches_torch(norm_first, activation, mask_name):
    layer = _layer(norm_first, activation)
    mask, mask_type = _mask_cases()[mask_name]
    x = torch.randn(B, L, E, generator=torch.Generator().manual_seed(3))
    args = _layer_args(layer)
    with torch.no_grad():
        want = torch._transformer_encoder_layer_fwd(x, *args, mask, mask_type)
    got = op("aten::_transformer_encoder_layer_fwd")(x.numpy(), *_ours(args), to_numpy(mask), mask_type)
    compare(f"aten::_transformer_encoder_layer_fwd dense, mask {mask_name}", got, want)


VALID = torch.tensor([[True] * 6, [True] * 4 + [False] * 2, [True] + [False] * 5, [False] * 6])


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu")],
                         ids=["post_relu", "pre_gelu"])
def test_nested_round_trip_matches_torch(norm_first, activation):
    """_nested_tensor_from_mask -> two fused layers -> to_padded_tensor, as nn.TransformerEncoder does."""
    layers = [_layer(norm_first, activation, seed) for seed in (0, 1)]
    x = torch.randn(4, 6, E, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        nested = torch._nested_tensor_from_mask(x, VALID, mask_check=False)
        for layer in layers:
            nested = torch._transformer_encoder_layer_fwd(nested, *_layer_args(layer), None, None)
        want = nested.to_padded_tensor(0.0, x.size())
        want_trimmed = nested.to_padded_tensor(-1.0)
    ours = op("aten::_nested_tensor_from_mask")(x.numpy(), VALID.numpy(), False)
    assert op("prim::is_nested")(ours), "_nested_tensor_from_mask must give a nested array"
    for layer in layers:
        ours = op("aten::_transformer_encoder_layer_fwd")(ours, *_ours(_layer_args(layer)), None, None)
        assert isinstance(ours, NestedArray), "the fused layer must keep a nested input nested"
    got = op("aten::to_padded_tensor")(ours, 0.0, list(x.size()))
    compare("aten::to_padded_tensor after two nested layers", got, want)
    got = op("aten::to_padded_tensor")(ours, -1.0, None)
    compare("aten::to_padded_tensor padding -1, no output size", got, want_trimmed)


MASKS = {
    "left_aligned": VALID,
    "hole": torch.tensor([[True, False, True]]),
    "all_false": torch.zeros(2, 3, dtype=torch.bool),
    "all_true": torch.ones(2, 3, dtype=torch.bool),
    "starts_false": torch.tensor([[False, True, True]]),
}


@pytest.mark.parametrize("name", list(MASKS))
def test_left_aligned_check_matches_torch(name):
    mask = MASKS[name]
    x = torch.zeros(*mask.shape, 4)
    want = torch._nested_tensor_from_mask_left_aligned(x, mask)
    got = op("aten::_nested_tensor_from_mask_left_aligned")(x.numpy(), mask.numpy())
    assert got == want, f"aten::_nested_tensor_from_mask_left_aligned({name}): ptlite {got}, torch {want}"


def test_nested_from_mask_checks_alignment():
    mask = MASKS["hole"].numpy()
    with pytest.raises(ValueError, match="left-aligned"):
        op("aten::_nested_tensor_from_mask")(np.zeros((1, 3, 2), np.float32), mask, True)


def test_transformer_encoder_fast_path_matches_torch():
    """The kernels nn.TransformerEncoder's scripted graph runs in inference, padded positions included."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(E, H, 32, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2).eval()
    x = torch.randn(4, 6, E)
    padding = ~VALID
    with torch.no_grad():
        want = encoder(x, src_key_padding_mask=padding)
    keep = ~padding.numpy()
    assert op("aten::_nested_tensor_from_mask_left_aligned")(x.numpy(), keep)
    out = op("aten::_nested_tensor_from_mask")(x.numpy(), keep, False)
    for mod in encoder.layers:
        out = op("aten::_transformer_encoder_layer_fwd")(out, *_ours(_layer_args(mod)), None, None)
    got = op("aten::to_padded_tensor")(out, 0.0, list(x.shape))
    compare("nn.TransformerEncoder fast path encoder output", got, want)
    assert not np.any(got[~keep]), "padded positions must be zero, as torch's to_padded_tensor(0.0) makes"


def test_inputs_are_not_modified():
    layer = _layer(False, "relu")
    x = np.random.default_rng(0).standard_normal((2, 4, E)).astype(np.float32)
    x.flags.writeable = False
    args = _ours(_layer_args(layer))
    for a in args:
        if isinstance(a, np.ndarray):
            a.flags.writeable = False
    op("aten::_transformer_encoder_layer_fwd")(x, *args, None, None)
    op("aten::_native_multi_head_attention")(x, x, x, *args[:6], None, True, True, None)
    op("aten::scaled_dot_product_attention")(x, x, x, None, 0.0, False, None, False)


# (query shape, key shape, value shape, mask, is_causal, scale, enable_gqa)
SDPA_CASES = {
    "plain": ((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 4), None, False, None, False),
    "3d": ((4, 5, 8), (4, 5, 8), (4, 5, 8), None, False, None, False),
    "scale": ((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 8), None, False, 0.7, False),
    "bool_mask": ((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 8), "bool", False, None, False),
    "float_mask": ((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 8), "float", False, None, False),
    "padding_mask": ((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 8), "padding", False, None, False),
    "masked_row_bool": ((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 8), "dead_bool", False, None, False),
    "masked_row_float": ((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 8), "dead_float", False, None, False),
    "causal_short_q": ((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 8), None, True, None, False),
    "causal_long_q": ((2, 3, 7, 8), (2, 3, 5, 8), (2, 3, 5, 8), None, True, None, False),
    "gqa": ((2, 4, 5, 8), (2, 2, 7, 8), (2, 2, 7, 8), None, False, None, True),
}


def _sdpa_mask(kind, q_len, k_len):
    g = torch.Generator().manual_seed(5)
    if kind is None:
        return None
    if kind == "bool":
        return torch.rand(q_len, k_len, generator=g) > 0.3
    if kind == "float":
        return torch.randn(2, 1, q_len, k_len, generator=g)
    if kind == "padding":
        return torch.zeros(2, 1, 1, k_len).masked_fill(torch.tensor([False] * (k_len - 2) + [True] * 2),
                                                       float("-inf"))
    mask = torch.ones(q_len, k_len, dtype=torch.bool)
    mask[1] = False
    return mask if kind == "dead_bool" else torch.zeros(q_len, k_len).masked_fill(~mask, float("-inf"))


@pytest.mark.parametrize("name", list(SDPA_CASES))
def test_scaled_dot_product_attention_matches_torch(name):
    q_shape, k_shape, v_shape, mask_kind, causal, scale, gqa = SDPA_CASES[name]
    g = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(*s, generator=g) for s in (q_shape, k_shape, v_shape))
    mask = _sdpa_mask(mask_kind, q_shape[-2], k_shape[-2])
    with torch.no_grad():
        want = torch.ops.aten.scaled_dot_product_attention(q, k, v, mask, 0.0, causal, scale=scale,
                                                            enable_gqa=gqa)
    got = op("aten::scaled_dot_product_attention")(*to_numpy((q, k, v, mask)), 0.0, causal,
                                                          scale, gqa)
    compare(f"aten::scaled_dot_product_attention {name}", got, want)


def test_softmax_of_scores_with_infinities_and_nan():
    """The attention softmax takes four ufunc calls when every row has a finite top score, and its careful path
    otherwise: a row of -inf (every key masked: 0, or NaN when not `safe`), +inf and NaN scores give what
    PyTorch's softmax gives, without warnings; rows without them are unaffected."""
    import warnings

    from ptlite.backends.numpy.attention import _softmax_

    rng = np.random.default_rng(0)
    scores = rng.standard_normal((2, 5, 6)).astype(np.float32)
    scores[0, 1, 2] = np.inf
    scores[0, 2, 4] = np.nan
    scores[1, 3, :] = -np.inf
    scores[1, 4, :2] = -np.inf
    want = torch.softmax(torch.from_numpy(scores), dim=-1).numpy()
    for safe in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = _softmax_(scores.copy(), safe=safe)
        expected = want.copy()
        if safe:
            expected[1, 3] = 0.0  # a row with every key masked gives 0 (scaled_dot_product_attention's semantics)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected), err_msg=f"safe={safe}: NaN pattern")
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7, err_msg=f"safe={safe}")
    finite = rng.standard_normal((3, 4, 7)).astype(np.float32)
    np.testing.assert_allclose(_softmax_(finite.copy(), safe=True),
                               torch.softmax(torch.from_numpy(finite), dim=-1).numpy(), rtol=1e-6, atol=1e-7)
    # large finite top scores in many rows (their sum would overflow float16) and float32 masks of finfo.min:
    # the check between the two paths must not warn either
    big = np.full((7000, 3), 11.0, np.float16)
    low = np.full((4, 3), np.finfo(np.float32).min, np.float32)
    low[:, 0] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(_softmax_(big.copy(), safe=True).astype(np.float32), 1 / 3, rtol=1e-3)
        np.testing.assert_array_equal(_softmax_(low.copy(), safe=True)[:, 0], 1.0)
