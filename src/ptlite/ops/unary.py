"""Unary math: exp, log, sqrt, rsqrt, erf, trigonometry, rounding, neg/abs/sign, ..."""

DECLARATIONS = r"""
aten::exp(Tensor self) -> Tensor
aten::exp_(Tensor(a!) self) -> Tensor(a!)
aten::log(Tensor self) -> Tensor
aten::log_(Tensor(a!) self) -> Tensor(a!)
aten::sqrt(Tensor self) -> Tensor
aten::sqrt_(Tensor(a!) self) -> Tensor(a!)
aten::rsqrt(Tensor self) -> Tensor
aten::rsqrt_(Tensor(a!) self) -> Tensor(a!)
aten::reciprocal(Tensor self) -> Tensor
aten::reciprocal_(Tensor(a!) self) -> Tensor(a!)
aten::erf(Tensor self) -> Tensor
aten::erf_(Tensor(a!) self) -> Tensor(a!)
aten::sin(Tensor self) -> Tensor
aten::sin_(Tensor(a!) self) -> Tensor(a!)
aten::cos(Tensor self) -> Tensor
aten::cos_(Tensor(a!) self) -> Tensor(a!)
aten::log2(Tensor self) -> Tensor
aten::log2_(Tensor(a!) self) -> Tensor(a!)
aten::log10(Tensor self) -> Tensor
aten::log10_(Tensor(a!) self) -> Tensor(a!)
aten::log1p(Tensor self) -> Tensor
aten::log1p_(Tensor(a!) self) -> Tensor(a!)
aten::expm1(Tensor self) -> Tensor
aten::expm1_(Tensor(a!) self) -> Tensor(a!)
aten::neg(Tensor self) -> Tensor
aten::neg_(Tensor(a!) self) -> Tensor(a!)
aten::abs(Tensor self) -> Tensor
aten::abs_(Tensor(a!) self) -> Tensor(a!)
aten::sign(Tensor self) -> Tensor
aten::sign_(Tensor(a!) self) -> Tensor(a!)
aten::floor(Tensor self) -> Tensor
aten::floor_(Tensor(a!) self) -> Tensor(a!)
aten::ceil(Tensor self) -> Tensor
aten::ceil_(Tensor(a!) self) -> Tensor(a!)
aten::round(Tensor self) -> Tensor
aten::round_(Tensor(a!) self) -> Tensor(a!)
aten::trunc(Tensor self) -> Tensor
aten::trunc_(Tensor(a!) self) -> Tensor(a!)
aten::round.decimals(Tensor self, *, int decimals) -> Tensor
aten::square(Tensor self) -> Tensor
aten::isnan(Tensor self) -> Tensor
aten::isinf(Tensor self) -> Tensor
aten::isfinite(Tensor self) -> Tensor
"""
