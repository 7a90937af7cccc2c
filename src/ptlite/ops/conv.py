"""Convolutions (1-D, 2-D and 3-D, grouped, depthwise, transposed) as capture writes them."""

DECLARATIONS = r"""
aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=[1, 1], SymInt[2] padding=[0, 0],
    SymInt[2] dilation=[1, 1], SymInt groups=1) -> Tensor
aten::conv2d.padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=[1, 1], str padding="valid",
    SymInt[2] dilation=[1, 1], SymInt groups=1) -> Tensor
aten::conv1d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[1] stride=[1], SymInt[1] padding=[0],
    SymInt[1] dilation=[1], SymInt groups=1) -> Tensor
aten::conv1d.padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[1] stride=[1], str padding="valid",
    SymInt[1] dilation=[1], SymInt groups=1) -> Tensor
aten::conv3d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[3] stride=[1, 1, 1],
    SymInt[3] padding=[0, 0, 0], SymInt[3] dilation=[1, 1, 1], SymInt groups=1) -> Tensor
aten::conv3d.padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[3] stride=[1, 1, 1],
    str padding="valid", SymInt[3] dilation=[1, 1, 1], SymInt groups=1) -> Tensor
aten::_convolution_mode(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, str padding, SymInt[] dilation,
    SymInt groups) -> Tensor
aten::conv_transpose2d.input(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=[1, 1],
    SymInt[2] padding=[0, 0], SymInt[2] output_padding=[0, 0], SymInt groups=1, SymInt[2] dilation=[1, 1]) -> Tensor
aten::conv_transpose1d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[1] stride=[1], SymInt[1] padding=[0],
    SymInt[1] output_padding=[0], SymInt groups=1, SymInt[1] dilation=[1]) -> Tensor
aten::conv_transpose3d.input(Tensor input, Tensor weight, Tensor? bias=None, SymInt[3] stride=[1, 1, 1],
    SymInt[3] padding=[0, 0, 0], SymInt[3] output_padding=[0, 0, 0], SymInt groups=1,
    SymInt[3] dilation=[1, 1, 1]) -> Tensor
aten::convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation,
    bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor
aten::_convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation,
    bool transposed, SymInt[] output_padding, SymInt groups, bool benchmark, bool deterministic,
    bool cudnn_enabled, bool allow_tf32) -> Tensor
aten::_convolution.deprecated(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding,
    SymInt[] dilation, bool transposed, int[] output_padding, SymInt groups, bool benchmark, bool deterministic,
    bool cudnn_enabled) -> Tensor
"""
