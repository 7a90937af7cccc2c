"""Convolution and linear layers on prepacked weights (ptlite's; lowering makes them)."""

DECLARATIONS = r"""
ptlite::conv2d_prepacked(Tensor input, Tensor weight, Tensor? bias, int[2] kernel_size, int[2] stride,
    int[4] padding, int[2] dilation, int groups, str activation="none", float[] activation_args=[]) -> Tensor
    @out @dtypes(float16,float32,float64)
ptlite::linear_prepacked(Tensor input, Tensor weight, Tensor? bias, str activation="none",
    float[] activation_args=[]) -> Tensor  @out @dtypes(float16,float32,float64)
"""
