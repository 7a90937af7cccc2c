"""Joining, splitting, slicing, expanding, repeating, flipping, rolling and padding tensors."""

DECLARATIONS = r"""
aten::cat(Tensor[] tensors, int dim=0) -> Tensor
aten::concat(Tensor[] tensors, int dim=0) -> Tensor
aten::stack(Tensor[] tensors, int dim=0) -> Tensor
aten::hstack(Tensor[] tensors) -> Tensor
aten::vstack(Tensor[] tensors) -> Tensor
aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]
aten::unsafe_split.Tensor(Tensor self, SymInt split_size, int dim=0) -> Tensor[]  @aliases
aten::split.sizes(Tensor(a -> *) self, SymInt[] split_size, int dim=0) -> Tensor(a)[]
aten::split(Tensor(a -> *) self, int[] split_sizes, int dim=0) -> Tensor(a)[]
aten::split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]
aten::chunk(Tensor(a -> *) self, int chunks, int dim=0) -> Tensor(a)[]
aten::unsafe_chunk(Tensor self, int chunks, int dim=0) -> Tensor[]  @aliases
aten::tensor_split.sections(Tensor(a -> *) self, SymInt sections, int dim=0) -> Tensor(a)[]
aten::tensor_split.indices(Tensor(a -> *) self, SymInt[] indices, int dim=0) -> Tensor(a)[]
aten::tensor_split.tensor_indices_or_sections(Tensor(a -> *) self, Tensor tensor_indices_or_sections,
    int dim=0) -> Tensor(a)[]
aten::unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]
aten::select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)
aten::slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)
aten::narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)
aten::narrow.Tensor(Tensor(a) self, int dim, Tensor start, SymInt length) -> Tensor(a)
aten::expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)
aten::broadcast_to(Tensor(a) self, SymInt[] size) -> Tensor(a)
aten::expand_as(Tensor(a) self, Tensor other) -> Tensor(a)
aten::broadcast_tensors(Tensor[] tensors) -> Tensor[]
aten::meshgrid(Tensor[] tensors) -> Tensor[]
aten::meshgrid.indexing(Tensor[] tensors, *, str indexing) -> Tensor[]
aten::repeat(Tensor self, SymInt[] repeats) -> Tensor
aten::tile(Tensor self, SymInt[] dims) -> Tensor
aten::repeat_interleave.self_int(Tensor self, SymInt repeats, int? dim=None, *, SymInt? output_size=None) -> Tensor
aten::repeat_interleave.self_Tensor(Tensor self, Tensor repeats, int? dim=None, *,
    SymInt? output_size=None) -> Tensor
aten::repeat_interleave.Tensor(Tensor repeats, *, SymInt? output_size=None) -> Tensor
aten::flip(Tensor self, int[] dims) -> Tensor
aten::roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor
aten::channel_shuffle(Tensor self, SymInt groups) -> Tensor
aten::native_channel_shuffle(Tensor self, SymInt groups) -> Tensor
aten::pixel_shuffle(Tensor self, int upscale_factor) -> Tensor
aten::pixel_unshuffle(Tensor self, int downscale_factor) -> Tensor
aten::constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor
aten::pad(Tensor self, SymInt[] pad, str mode="constant", float? value=None) -> Tensor
"""
