"""A pointwise convolution feeding a depthwise one, as one operator (ptlite's; lowering makes it)."""

DECLARATIONS = r"""
ptlite::conv2d_pointwise_depthwise(Tensor input, Tensor pw_weight, Tensor? pw_bias, str pw_activation,
    float[] pw_activation_args, Tensor dw_weight, Tensor? dw_bias, int[2] kernel_size, int[2] stride,
    int[4] padding, int[2] dilation, str activation="none", float[] activation_args=[]) -> Tensor
    @out @dtypes(float16,float32,float64)
"""
