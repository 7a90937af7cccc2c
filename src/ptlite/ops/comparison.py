"""Comparison, logic and selection: eq/ne/lt/le/gt/ge, logical and bitwise operators, where."""

DECLARATIONS = r"""
aten::eq.Tensor(Tensor self, Tensor other) -> Tensor
aten::eq.Scalar(Tensor self, Scalar other) -> Tensor
aten::ne.Tensor(Tensor self, Tensor other) -> Tensor
aten::ne.Scalar(Tensor self, Scalar other) -> Tensor
aten::lt.Tensor(Tensor self, Tensor other) -> Tensor
aten::lt.Scalar(Tensor self, Scalar other) -> Tensor
aten::le.Tensor(Tensor self, Tensor other) -> Tensor
aten::le.Scalar(Tensor self, Scalar other) -> Tensor
aten::gt.Tensor(Tensor self, Tensor other) -> Tensor
aten::gt.Scalar(Tensor self, Scalar other) -> Tensor
aten::ge.Tensor(Tensor self, Tensor other) -> Tensor
aten::ge.Scalar(Tensor self, Scalar other) -> Tensor
aten::equal(Tensor self, Tensor other) -> bool
aten::logical_and(Tensor self, Tensor other) -> Tensor
aten::logical_or(Tensor self, Tensor other) -> Tensor
aten::logical_xor(Tensor self, Tensor other) -> Tensor
aten::logical_not(Tensor self) -> Tensor
aten::bitwise_not(Tensor self) -> Tensor
aten::bitwise_and.Tensor(Tensor self, Tensor other) -> Tensor
aten::bitwise_and.Scalar(Tensor self, Scalar other) -> Tensor
aten::bitwise_and.Scalar_Tensor(Scalar self, Tensor other) -> Tensor
aten::__and__.Tensor(Tensor self, Tensor other) -> Tensor
aten::__and__.Scalar(Tensor self, Scalar other) -> Tensor
aten::bitwise_or.Tensor(Tensor self, Tensor other) -> Tensor
aten::bitwise_or.Scalar(Tensor self, Scalar other) -> Tensor
aten::bitwise_or.Scalar_Tensor(Scalar self, Tensor other) -> Tensor
aten::__or__.Tensor(Tensor self, Tensor other) -> Tensor
aten::__or__.Scalar(Tensor self, Scalar other) -> Tensor
aten::bitwise_xor.Tensor(Tensor self, Tensor other) -> Tensor
aten::bitwise_xor.Scalar(Tensor self, Scalar other) -> Tensor
aten::bitwise_xor.Scalar_Tensor(Scalar self, Tensor other) -> Tensor
aten::__xor__.Tensor(Tensor self, Tensor other) -> Tensor
aten::__xor__.Scalar(Tensor self, Scalar other) -> Tensor
aten::where.self(Tensor condition, Tensor self, Tensor other) -> Tensor
aten::where.ScalarOther(Tensor condition, Tensor self, Scalar other) -> Tensor
aten::where.ScalarSelf(Tensor condition, Scalar self, Tensor other) -> Tensor
aten::where.Scalar(Tensor condition, Scalar self, Scalar other) -> Tensor
aten::where(Tensor condition) -> Tensor[]
aten::masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor
aten::masked_fill.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor
aten::masked_fill_.Scalar(Tensor(a!) self, Tensor mask, Scalar value) -> Tensor(a!)
aten::masked_fill_.Tensor(Tensor(a!) self, Tensor mask, Tensor value) -> Tensor(a!)
"""
