"""Reductions: sum, mean, max/min (and indices), argmax, all/any, prod, var/std, norm, cumsum; sorting, topk, unique."""

DECLARATIONS = r"""
aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor
aten::mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
aten::mean(Tensor self, *, ScalarType? dtype=None) -> Tensor
aten::prod(Tensor self, *, ScalarType? dtype=None) -> Tensor
aten::prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
aten::max(Tensor self) -> Tensor
aten::min(Tensor self) -> Tensor
aten::max.other(Tensor self, Tensor other) -> Tensor
aten::min.other(Tensor self, Tensor other) -> Tensor
aten::max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)
aten::min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)
aten::amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor
aten::amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor
aten::argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor
aten::argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor
aten::all(Tensor self) -> Tensor
aten::all.dim(Tensor self, int dim, bool keepdim=False) -> Tensor
aten::all.dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor
aten::any(Tensor self) -> Tensor
aten::any.dim(Tensor self, int dim, bool keepdim=False) -> Tensor
aten::any.dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor
aten::var(Tensor self, bool unbiased=True) -> Tensor
aten::var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor
aten::var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor
aten::std(Tensor self, bool unbiased=True) -> Tensor
aten::std.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor
aten::std.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor
aten::var_mean(Tensor self, bool unbiased=True) -> (Tensor, Tensor)
aten::var_mean.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> (Tensor, Tensor)
aten::var_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None,
    bool keepdim=False) -> (Tensor, Tensor)
aten::std_mean(Tensor self, bool unbiased=True) -> (Tensor, Tensor)
aten::std_mean.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> (Tensor, Tensor)
aten::std_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None,
    bool keepdim=False) -> (Tensor, Tensor)
aten::norm.Scalar(Tensor self, Scalar p=2) -> Tensor
aten::norm.ScalarOpt_dim(Tensor self, Scalar? p, int[1] dim, bool keepdim=False) -> Tensor
aten::norm.ScalarOpt_dim_dtype(Tensor self, Scalar? p, int[1] dim, bool keepdim, *, ScalarType dtype) -> Tensor
aten::norm.ScalarOpt_dtype(Tensor self, Scalar? p, *, ScalarType dtype) -> Tensor
aten::linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *,
    ScalarType? dtype=None) -> Tensor
aten::logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor
aten::cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor
aten::cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor
aten::sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)
aten::sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)
aten::argsort(Tensor self, int dim=-1, bool descending=False) -> Tensor
aten::argsort.stable(Tensor self, *, bool stable, int dim=-1, bool descending=False) -> Tensor
aten::topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)
aten::_unique2(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False)
    -> (Tensor, Tensor, Tensor)
"""
