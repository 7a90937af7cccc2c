"""Convolution and linear layers on weights packed in panels of 16 output channels (ptlite's; the native backend's
lowering makes them). Weight layout: (ceil(O / 16), K, 16), K = kh * kw * C with rows ordered (kh, kw, C) (linear:
K = in_features), output channels past O zero: each panel is the K x 16 block of the matrix product a GEMM
micro-kernel reads, contiguous. conv2d_packed_gated convolves `input * gate` (gate: (N, C, 1, 1) factors per image
and input channel, a squeeze-and-excitation block's), without making the product."""

DECLARATIONS = r"""
ptlite::conv2d_packed(Tensor input, Tensor weight, Tensor? bias, int[2] kernel_size, int[2] stride, int[4] padding,
    int[2] dilation, int out_channels, str activation="none", float[] activation_args=[]) -> Tensor
    @out @dtypes(float32)
ptlite::conv2d_packed_gated(Tensor input, Tensor gate, Tensor weight, Tensor? bias, int[2] kernel_size, int[2] stride,
    int[4] padding, int[2] dilation, int out_channels, str activation="none", float[] activation_args=[]) -> Tensor
    @out @dtypes(float32)
ptlite::linear_packed(Tensor input, Tensor weight, Tensor? bias, int out_features, str activation="none",
    float[] activation_args=[]) -> Tensor  @out @dtypes(float32)
"""
