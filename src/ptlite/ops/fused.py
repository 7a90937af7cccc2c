"""Operators that fusion makes of two others (add + relu), as PyTorch's own fused operators."""

DECLARATIONS = r"""
aten::_add_relu.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor  @out
aten::_add_relu_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)
"""
