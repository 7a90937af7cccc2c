"""Questions about a tensor (size, dim, dtype, device, ...) and tensor/scalar conversions."""

DECLARATIONS = r"""
aten::size(Tensor self) -> int[]
aten::sym_size(Tensor self) -> SymInt[]
aten::size.int(Tensor self, int dim) -> int
aten::sym_size.int(Tensor self, int dim) -> SymInt
aten::dim(Tensor self) -> int
aten::numel(Tensor self) -> int
aten::_shape_as_tensor(Tensor self) -> Tensor
aten::sym_numel(Tensor self) -> SymInt
aten::len.Tensor(Tensor t) -> int
aten::stride(Tensor self) -> int[]
aten::sym_stride(Tensor self) -> SymInt[]
aten::stride.int(Tensor self, int dim) -> int
aten::sym_stride.int(Tensor self, int dim) -> SymInt
aten::sym_storage_offset(Tensor self) -> SymInt
aten::is_contiguous(Tensor self) -> bool
aten::is_contiguous.memory_format(Tensor self, MemoryFormat memory_format) -> bool
aten::sym_is_contiguous(Tensor self, MemoryFormat memory_format=0) -> SymBool
aten::element_size(Tensor self) -> int
prim::dtype(Tensor a) -> int
aten::is_floating_point(Tensor self) -> bool
aten::is_complex(Tensor self) -> bool
prim::device(Tensor a) -> Device
aten::get_device(Tensor self) -> int
prim::type(Device self) -> str
prim::index(Device self) -> int?
aten::device(str a) -> Device
aten::device.with_index(str type, int index) -> Device
aten::eq.device(Device a, Device b) -> bool
aten::ne.device(Device a, Device b) -> bool
prim::layout(Tensor a) -> Layout
prim::is_nested(Tensor a) -> bool
prim::is_cuda(Tensor a) -> bool
prim::is_sparse(Tensor a) -> bool
prim::is_quantized(Tensor a) -> bool
prim::is_mkldnn(Tensor a) -> bool
prim::is_meta(Tensor a) -> bool
prim::is_xpu(Tensor a) -> bool
prim::is_mps(Tensor a) -> bool
prim::is_vulkan(Tensor a) -> bool
prim::is_ipu(Tensor a) -> bool
prim::requires_grad(Tensor a) -> bool
prim::name(Tensor a) -> str?
prim::data(Tensor(a) a) -> Tensor(a)
aten::data(Tensor self) -> Tensor
aten::item(Tensor self) -> Scalar
aten::ScalarImplicit(Tensor a) -> Scalar
aten::_local_scalar_dense(Tensor self) -> Scalar
aten::Int.Tensor(Tensor a) -> int
aten::IntImplicit(Tensor a) -> int
aten::Float.Tensor(Tensor a) -> float
aten::Bool.Tensor(Tensor a) -> bool
prim::NumToTensor.Scalar(Scalar a) -> Tensor
prim::NumToTensor.bool(bool a) -> Tensor
prim::tolist(...) -> ...
"""
