"""Winograd F(4x4, 3x3) and F(2x2, 3x3) convolutions on transformed weights (ptlite's; lowering makes them)."""

DECLARATIONS = r"""
ptlite::conv2d_winograd_v2(Tensor input, Tensor weight, Tensor? bias, int[4] padding, str activation="none",
    float[] activation_args=[]) -> Tensor  @out @dtypes(float32,float64)
ptlite::conv2d_winograd_2x2(Tensor input, Tensor weight, Tensor? bias, int[4] padding, str activation="none",
    float[] activation_args=[]) -> Tensor  @out @dtypes(float32,float64)
ptlite::conv2d_winograd(Tensor input, Tensor weight, Tensor? bias, int[4] padding, str activation="none",
    float[] activation_args=[]) -> Tensor  @out @dtypes(float32,float64)
"""
