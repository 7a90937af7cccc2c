"""TorchScript-level operators on Python values: text conversions, exceptions, None checks, tuples."""

DECLARATIONS = r"""
aten::format(...) -> str
aten::str(t elem) -> str
prim::RaiseException(str msg, str? cls=None) -> ()  @effects
aten::warn(str message, int stacklevel=2) -> ()  @effects
aten::is_grad_enabled() -> bool
aten::is_autocast_enabled() -> bool
aten::is_autocast_cpu_enabled() -> bool
aten::set_grad_enabled(bool val) -> ()  @effects
aten::__is__(t1 self, t2 obj) -> bool
aten::__isnot__(t1 self, t2 obj) -> bool
aten::__not__(bool self) -> bool
prim::unchecked_cast(t x) -> t
aten::_unwrap_optional(t(a)? optional) -> t(a)
prim::unchecked_unwrap_optional(t(a)? optional) -> t(a)
prim::Uninitialized() -> Any  @random
prim::IfThenElse(bool cond, Any(a) x, Any(b) y) -> Any(b|a)
prim::TupleConstruct(...) -> ...
prim::TupleUnpack(Any tup) -> ...  @unpacks
prim::ListUnpack(...) -> ...  @unpacks
prim::TupleIndex(Any tup, int i) -> Any
prim::TupleSlice(...) -> ...
"""
