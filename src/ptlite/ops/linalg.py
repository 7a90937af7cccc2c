"""Matrix products (linear, matmul, mm, bmm, addmm, baddbmm, einsum, ...)."""

DECLARATIONS = r"""
aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor
aten::matmul(Tensor self, Tensor other) -> Tensor
aten::mm(Tensor self, Tensor mat2) -> Tensor
aten::bmm(Tensor self, Tensor mat2) -> Tensor
aten::mv(Tensor self, Tensor vec) -> Tensor
aten::dot(Tensor self, Tensor tensor) -> Tensor
aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor
aten::baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor
aten::addmv(Tensor self, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1) -> Tensor
aten::t(Tensor(a) self) -> Tensor(a)
aten::einsum(str equation, Tensor[] tensors, *, int[]? path=None) -> Tensor
"""
