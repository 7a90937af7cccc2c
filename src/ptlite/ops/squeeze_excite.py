"""A squeeze-and-excitation block as one operator (ptlite's; lowering makes it)."""

DECLARATIONS = r"""
ptlite::squeeze_excite(Tensor input, Tensor w1, Tensor? b1, str act1, float[] act1_args, Tensor w2, Tensor? b2,
    str act2, float[] act2_args, str gate) -> Tensor  @out @dtypes(float16,float32,float64)
"""
