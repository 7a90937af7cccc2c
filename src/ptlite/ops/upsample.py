"""Upsampling (bilinear and nearest, 2-D) and sampling at a grid of points (grid_sample: 2-D images, 3-D volumes)."""

DECLARATIONS = r"""
aten::upsample_bilinear2d.vec(Tensor input, SymInt[]? output_size, bool align_corners,
    float[]? scale_factors) -> Tensor
aten::upsample_bilinear2d(Tensor self, SymInt[2] output_size, bool align_corners, float? scales_h=None,
    float? scales_w=None) -> Tensor
aten::upsample_nearest2d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor
aten::upsample_nearest2d(Tensor self, SymInt[2] output_size, float? scales_h=None, float? scales_w=None) -> Tensor
aten::grid_sampler(Tensor input, Tensor grid, int interpolation_mode, int padding_mode,
    bool align_corners) -> Tensor  @ranks(4,5)
aten::grid_sampler_2d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode,
    bool align_corners) -> Tensor  @ranks(4)
"""
