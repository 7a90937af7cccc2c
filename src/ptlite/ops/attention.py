"""Attention: scaled dot-product attention and PyTorch's fused Transformer fast path."""

DECLARATIONS = r"""
aten::_native_multi_head_attention(Tensor query, Tensor key, Tensor value, int embed_dim, int num_head,
    Tensor qkv_weight, Tensor qkv_bias, Tensor proj_weight, Tensor proj_bias, Tensor? mask=None,
    bool need_weights=True, bool average_attn_weights=True, int? mask_type=None) -> (Tensor, Tensor)
aten::_transformer_encoder_layer_fwd(Tensor src, int embed_dim, int num_heads, Tensor qkv_weight, Tensor qkv_bias,
    Tensor proj_weight, Tensor proj_bias, bool use_gelu, bool norm_first, float eps, Tensor norm_weight_1,
    Tensor norm_bias_1, Tensor norm_weight_2, Tensor norm_bias_2, Tensor ffn_weight_1, Tensor ffn_bias_1,
    Tensor ffn_weight_2, Tensor ffn_bias_2, Tensor? mask=None, int? mask_type=None) -> Tensor
aten::_nested_tensor_from_mask_left_aligned(Tensor t, Tensor mask) -> bool
aten::_nested_tensor_from_mask(Tensor t, Tensor mask, bool mask_check=True) -> Tensor
aten::to_padded_tensor(Tensor self, float padding, SymInt[]? output_size=None) -> Tensor
aten::scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None,
    float dropout_p=0., bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor
"""
