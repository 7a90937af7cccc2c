"""Pooling (max, average, adaptive; 1-D, 2-D and 3-D)."""

DECLARATIONS = r"""
aten::max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1,
    bool ceil_mode=False) -> Tensor  @out @rank(input)
aten::max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0,
    int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)
aten::max_pool1d(Tensor self, int[1] kernel_size, int[1] stride=[], int[1] padding=[0], int[1] dilation=[1],
    bool ceil_mode=False) -> Tensor
aten::avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False,
    bool count_include_pad=True, int? divisor_override=None) -> Tensor
aten::avg_pool1d(Tensor self, int[1] kernel_size, int[1] stride=[], int[1] padding=[0], bool ceil_mode=False,
    bool count_include_pad=True) -> Tensor
aten::adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor  @out @rank(input)
aten::_adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor  @out
aten::adaptive_avg_pool1d(Tensor self, int[1] output_size) -> Tensor
aten::adaptive_max_pool2d(Tensor self, int[2] output_size) -> (Tensor, Tensor)
aten::adaptive_max_pool1d(Tensor self, int[1] output_size) -> (Tensor, Tensor)
aten::max_pool3d(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, int[3] dilation=1,
    bool ceil_mode=False) -> Tensor  @rank(input)
aten::max_pool3d_with_indices(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0,
    int[3] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)  @rank(input)
aten::avg_pool3d(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, bool ceil_mode=False,
    bool count_include_pad=True, int? divisor_override=None) -> Tensor  @rank(input)
aten::adaptive_avg_pool3d(Tensor self, SymInt[3] output_size) -> Tensor  @rank(input)
aten::_adaptive_avg_pool3d(Tensor self, SymInt[3] output_size) -> Tensor  @rank(input)
aten::adaptive_max_pool3d(Tensor self, int[3] output_size) -> (Tensor, Tensor)  @rank(input)
"""
