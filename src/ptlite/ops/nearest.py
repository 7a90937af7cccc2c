"""Nearest-neighbour upsampling of 1-D and 3-D signals (2-D is in upsample.py): the branches of a scripted
F.interpolate(mode="nearest") for inputs of rank 3 and 5, which detection models reach."""

DECLARATIONS = r"""
aten::upsample_nearest1d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor
aten::upsample_nearest1d(Tensor self, SymInt[1] output_size, float? scales=None) -> Tensor
aten::upsample_nearest3d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor
aten::upsample_nearest3d(Tensor self, SymInt[3] output_size, float? scales_d=None, float? scales_h=None,
    float? scales_w=None) -> Tensor
"""
