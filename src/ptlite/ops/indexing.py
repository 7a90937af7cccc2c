"""Indexing: advanced indexing, index_put, index_select, gather/scatter, embedding, masks, copy_."""

DECLARATIONS = r"""
aten::index.Tensor(Tensor self, Tensor?[] indices) -> Tensor
aten::index.Tensor_hacked_twin(Tensor self, Tensor[] indices) -> Tensor
aten::index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor(a!)
aten::index_put_.hacked_twin(Tensor(a!) self, Tensor[] indices, Tensor values, bool accumulate=False) -> Tensor(a!)
aten::_index_put_impl_(Tensor(a!) self, Tensor?[] indices, Tensor values, bool accumulate=False,
    bool unsafe=False) -> Tensor(a!)
aten::index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor
aten::index_put.hacked_twin(Tensor self, Tensor[] indices, Tensor values, bool accumulate=False) -> Tensor
aten::index_select(Tensor self, int dim, Tensor index) -> Tensor
aten::embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False,
    bool sparse=False) -> Tensor
aten::take(Tensor self, Tensor index) -> Tensor
aten::gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor
aten::scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor
aten::scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor
aten::scatter.reduce(Tensor self, int dim, Tensor index, Tensor src, *, str reduce) -> Tensor
aten::scatter.value_reduce(Tensor self, int dim, Tensor index, Scalar value, *, str reduce) -> Tensor
aten::scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor
aten::scatter_.src(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)
aten::scatter_.value(Tensor(a!) self, int dim, Tensor index, Scalar value) -> Tensor(a!)
aten::scatter_add_(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)
aten::index_fill.int_Scalar(Tensor self, int dim, Tensor index, Scalar value) -> Tensor
aten::index_fill.int_Tensor(Tensor self, int dim, Tensor index, Tensor value) -> Tensor
aten::masked_select(Tensor self, Tensor mask) -> Tensor
aten::masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor
aten::nonzero(Tensor self) -> Tensor
aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)
aten::copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor
"""
