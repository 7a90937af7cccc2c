"""Elementwise arithmetic (add, sub, mul, div, pow, remainder, minimum/maximum, ...)."""

DECLARATIONS = r"""
aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor  @out
aten::add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor  @out
aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)
aten::add_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> Tensor(a!)
aten::sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
aten::sub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor
aten::sub_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)
aten::sub_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> Tensor(a!)
aten::rsub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
aten::rsub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor
aten::mul.Tensor(Tensor self, Tensor other) -> Tensor  @out
aten::mul.Scalar(Tensor self, Scalar other) -> Tensor  @out
aten::mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)
aten::mul_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)
aten::div.Tensor(Tensor self, Tensor other) -> Tensor
aten::div.Scalar(Tensor self, Scalar other) -> Tensor
aten::true_divide.Tensor(Tensor self, Tensor other) -> Tensor
aten::true_divide.Scalar(Tensor self, Scalar other) -> Tensor
aten::div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor
aten::div.Scalar_mode(Tensor self, Scalar other, *, str? rounding_mode) -> Tensor
aten::div_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)
aten::div_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)
aten::div_.Tensor_mode(Tensor(a!) self, Tensor other, *, str? rounding_mode) -> Tensor(a!)
aten::div_.Scalar_mode(Tensor(a!) self, Scalar other, *, str? rounding_mode) -> Tensor(a!)
aten::floor_divide(Tensor self, Tensor other) -> Tensor
aten::floor_divide.Scalar(Tensor self, Scalar other) -> Tensor
aten::remainder.Tensor(Tensor self, Tensor other) -> Tensor
aten::remainder.Scalar(Tensor self, Scalar other) -> Tensor
aten::remainder.Scalar_Tensor(Scalar self, Tensor other) -> Tensor
aten::fmod.Tensor(Tensor self, Tensor other) -> Tensor
aten::fmod.Scalar(Tensor self, Scalar other) -> Tensor
aten::pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor
aten::pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor
aten::pow.Scalar(Scalar self, Tensor exponent) -> Tensor
aten::pow_.Scalar(Tensor(a!) self, Scalar exponent) -> Tensor(a!)
aten::pow_.Tensor(Tensor(a!) self, Tensor exponent) -> Tensor(a!)
aten::minimum(Tensor self, Tensor other) -> Tensor
aten::maximum(Tensor self, Tensor other) -> Tensor
aten::fmin(Tensor self, Tensor other) -> Tensor
aten::fmax(Tensor self, Tensor other) -> Tensor
"""
