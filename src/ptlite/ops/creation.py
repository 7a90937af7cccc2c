"""Tensor creation and conversion: zeros/full/arange/linspace/eye, *_like, new_*, to/_to_copy, fill."""

DECLARATIONS = r"""
aten::zeros(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None) -> Tensor
aten::empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor  @random
aten::empty_strided(SymInt[] size, SymInt[] stride, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None) -> Tensor  @random
aten::empty_permuted(SymInt[] size, int[] physical_layout, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None) -> Tensor  @random
aten::ones(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None) -> Tensor
aten::full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None) -> Tensor
aten::scalar_tensor(Scalar s, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None) -> Tensor
aten::arange(Scalar end, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None) -> Tensor
aten::arange.start(Scalar start, Scalar end, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None) -> Tensor
aten::arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None) -> Tensor
aten::linspace(Scalar start, Scalar end, int steps, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None) -> Tensor
aten::linspace.Tensor_Tensor(Tensor start, Tensor end, int steps, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None) -> Tensor
aten::linspace.Tensor_Scalar(Tensor start, Scalar end, int steps, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None) -> Tensor
aten::linspace.Scalar_Tensor(Scalar start, Tensor end, int steps, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None) -> Tensor
aten::logspace(Scalar start, Scalar end, int steps, float base=10.0, *, ScalarType? dtype=None,
    Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor
aten::logspace.Tensor_Tensor(Tensor start, Tensor end, int steps, float base=10.0, *, ScalarType? dtype=None,
    Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor
aten::logspace.Tensor_Scalar(Tensor start, Scalar end, int steps, float base=10.0, *, ScalarType? dtype=None,
    Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor
aten::logspace.Scalar_Tensor(Scalar start, Tensor end, int steps, float base=10.0, *, ScalarType? dtype=None,
    Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor
aten::eye(SymInt n, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None) -> Tensor
aten::eye.m(SymInt n, SymInt m, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None) -> Tensor
aten::tensor(t[] data, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor
aten::as_tensor.list(t[] data, *, ScalarType? dtype=None, Device? device=None) -> Tensor
aten::tensor.float(float t, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor
aten::tensor.int(int t, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor
aten::tensor.bool(bool t, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor
aten::as_tensor.float(float t, *, ScalarType? dtype=None, Device? device=None) -> Tensor
aten::as_tensor.int(int t, *, ScalarType? dtype=None, Device? device=None) -> Tensor
aten::as_tensor.bool(bool t, *, ScalarType? dtype=None, Device? device=None) -> Tensor
aten::as_tensor(Tensor(a) data, *, ScalarType? dtype=None, Device? device=None) -> Tensor(b|a)
aten::zeros_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor
aten::empty_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor  @random
aten::ones_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor
aten::full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor
aten::new_zeros(Tensor self, SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None) -> Tensor
aten::new_empty(Tensor self, SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None) -> Tensor  @random
aten::new_ones(Tensor self, SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None) -> Tensor
aten::new_full(Tensor self, SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None,
    Device? device=None, bool? pin_memory=None) -> Tensor
aten::to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False,
    MemoryFormat? memory_format=None) -> Tensor(a)
aten::to.device(Tensor(a) self, Device device, ScalarType dtype, bool non_blocking=False, bool copy=False,
    MemoryFormat? memory_format=None) -> Tensor(a)
aten::to.other(Tensor(a) self, Tensor other, bool non_blocking=False, bool copy=False,
    MemoryFormat? memory_format=None) -> Tensor(a)
aten::to.dtype_layout(Tensor(a) self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None, bool non_blocking=False, bool copy=False, MemoryFormat? memory_format=None) -> Tensor(a)
aten::to.prim_Device(Tensor(a) self, Device? device, int? dtype=None, bool non_blocking=False,
    bool copy=False) -> Tensor(b|a)
aten::to.prim_dtype(Tensor(a) self, int? dtype=None, bool non_blocking=False, bool copy=False) -> Tensor(b|a)
aten::to.prim_other(Tensor(a) self, bool non_blocking=False, bool copy=False) -> Tensor(b|a)
aten::_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None,
    bool? pin_memory=None, bool non_blocking=False, MemoryFormat? memory_format=None) -> Tensor
aten::type_as(Tensor self, Tensor other) -> Tensor  @aliases
aten::tril(Tensor self, SymInt diagonal=0) -> Tensor
aten::triu(Tensor self, SymInt diagonal=0) -> Tensor
aten::fill.Scalar(Tensor self, Scalar value) -> Tensor
aten::fill.Tensor(Tensor self, Tensor value) -> Tensor
aten::fill_.Scalar(Tensor(a!) self, Scalar value) -> Tensor(a!)
aten::fill_.Tensor(Tensor(a!) self, Tensor value) -> Tensor(a!)
aten::zero_(Tensor(a!) self) -> Tensor(a!)
"""
