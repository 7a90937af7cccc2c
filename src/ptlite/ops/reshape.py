"""Reshaping and views: view, reshape, flatten, unflatten, squeeze, unsqueeze, permute, transpose, ..."""

DECLARATIONS = r"""
aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)
aten::reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)
aten::_unsafe_view(Tensor self, SymInt[] size) -> Tensor  @aliases
aten::_reshape_alias(Tensor(a) self, SymInt[] size, SymInt[] stride) -> Tensor(a)
aten::view.dtype(Tensor(a) self, ScalarType dtype) -> Tensor(a)
aten::view_as(Tensor(a) self, Tensor other) -> Tensor(a)
aten::reshape_as(Tensor(a) self, Tensor other) -> Tensor(a)
aten::flatten.using_ints(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)
aten::unflatten.int(Tensor(a) self, int dim, SymInt[] sizes) -> Tensor(a)
aten::squeeze(Tensor(a) self) -> Tensor(a)
aten::squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)
aten::squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)
aten::unsqueeze(Tensor(a) self, int dim) -> Tensor(a)
aten::permute(Tensor(a) self, int[] dims) -> Tensor(a)
aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)
aten::swapaxes(Tensor(a) self, int axis0, int axis1) -> Tensor(a)
aten::numpy_T(Tensor(a) self) -> Tensor(a)
aten::movedim.int(Tensor(a) self, int source, int destination) -> Tensor(a)
aten::movedim.intlist(Tensor(a) self, int[] source, int[] destination) -> Tensor(a)
aten::contiguous(Tensor(a) self, *, MemoryFormat memory_format=0) -> Tensor(a)
aten::clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor
aten::lift_fresh_copy(Tensor self) -> Tensor
aten::detach(Tensor(a) self) -> Tensor(a)
aten::detach_(Tensor(a!) self) -> Tensor(a!)
aten::alias(Tensor(a) self) -> Tensor(a)
aten::lift_fresh(Tensor(a) self) -> Tensor(a)
"""
