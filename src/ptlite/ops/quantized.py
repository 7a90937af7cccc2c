"""Quantized arithmetic on 8-bit tensors (ptlite's; `ptlite.quantize` makes them). A quantized tensor is a plain
uint8 array q standing for the real numbers scale * (q - zero_point) (affine, per tensor): its scale and zero point
are constant arguments of the operators reading and writing it, not part of the tensor. Weights are int8, symmetric
(zero point 0), with a float32 scale per output channel (a per-tensor scale repeated), stored in the prepacked
layouts (ops/prepacked.py: (kh * kw * C, O) for groups == 1, (kh * kw, C) depthwise, (groups, kh * kw * C/groups,
O/groups) otherwise; linear (in_features, out_features)). Biases stay float32 and are rounded to int32 at the
product's scale (input_scale * weight_scale) when added.

The integer products are exact (int32 accumulation); an output is requantized as PyTorch's quantized kernels do:
round-half-even(float32(accumulator) * float32(input_scale * weight_scale / output_scale)) + output_zero_point,
clamped to [output_min, output_max], which is how a fused relu (output_min = zero point) or relu6 is expressed.
linear_dynamic_int8 quantizes its float input at each call, each row (a token's features) on its own range (uint8,
zero included), and returns float32: accumulator * row scale * weight_scale + bias. Per row, a sentence's result
does not depend on what else is in the batch, and an outlier token coarsens only its own row.

lstm_dynamic_int8 and gru_dynamic_int8 are aten::lstm / aten::gru (inference: no dropout) whose weight matrices are
int8: `params` holds, per layer and direction, w_ih (in, gates x hidden) int8, its scales, w_hh (hidden, gates x
hidden) int8, its scales, then the float biases b_ih and b_hh where has_biases. Every matrix product is
linear_dynamic_int8's (the input projection of all steps at once, then the recurrent one per step); the gates'
arithmetic is float32, PyTorch's.

embedding_int8 is aten::embedding on an int8 table with a float32 scale per row: the rows picked, times their
scales, float32.

dequantize_per_channel makes a symmetric int8 weight float32 (q times its channel's scale along `axis`): a
PT2E-quantized model's weights as captured, which the QDQ folding (passes/fold_qdq.py) takes into int8 operators."""

DECLARATIONS = r"""
ptlite::quantize_per_tensor(Tensor input, float scale, int zero_point) -> Tensor  @out @rank(input)
ptlite::dequantize_per_tensor(Tensor input, float scale, int zero_point) -> Tensor  @out @rank(input)
ptlite::dequantize_per_channel(Tensor input, Tensor scales, int axis) -> Tensor
ptlite::conv2d_int8(Tensor input, float input_scale, int input_zero_point, Tensor weight, Tensor weight_scale,
    Tensor? bias, int[2] kernel_size, int[2] stride, int[4] padding, int[2] dilation, int groups, float output_scale,
    int output_zero_point, int output_min=0, int output_max=255) -> Tensor  @out @rank(input)
ptlite::linear_int8(Tensor input, float input_scale, int input_zero_point, Tensor weight, Tensor weight_scale,
    Tensor? bias, float output_scale, int output_zero_point, int output_min=0, int output_max=255) -> Tensor  @out
    @rank(input)
ptlite::add_int8(Tensor self, float self_scale, int self_zero_point, Tensor other, float other_scale,
    int other_zero_point, float output_scale, int output_zero_point, int output_min=0, int output_max=255) -> Tensor
    @out @rank(broadcast)
ptlite::linear_dynamic_int8(Tensor input, Tensor weight, Tensor weight_scale, Tensor? bias) -> Tensor  @out
ptlite::embedding_int8(Tensor weight, Tensor scales, Tensor indices) -> Tensor
ptlite::lstm_dynamic_int8(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers,
    bool bidirectional, bool batch_first) -> (Tensor, Tensor, Tensor)
ptlite::gru_dynamic_int8(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers,
    bool bidirectional, bool batch_first) -> (Tensor, Tensor)
"""
