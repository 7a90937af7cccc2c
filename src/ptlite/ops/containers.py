"""TorchScript lists and dicts."""

DECLARATIONS = r"""
prim::ListConstruct(...) -> ...
aten::__getitem__.t(t[](a) list, int idx) -> t(*)
aten::_set_item.t(t[](a!) l, int idx, t(b -> *) el) -> t[](a!)
aten::append.t(t[](a!) self, t(c -> *) el) -> t[](a!)
aten::len.t(t[] a) -> int
aten::len.any(Any[] a) -> int
aten::len.str(str s) -> int
aten::len.Dict_str(Dict(str, t) self) -> int
aten::len.Dict_int(Dict(int, t) self) -> int
aten::len.Dict_bool(Dict(bool, t) self) -> int
aten::len.Dict_float(Dict(float, t) self) -> int
aten::list.t(t[] l) -> t[]
aten::copy.t(t[](a) self) -> t[]
aten::list(str t) -> str[]
aten::add.t(t[] a, t[] b) -> t[]
aten::mul.left_t(t[] l, int n) -> t[]
aten::mul.right_(int n, t[] l) -> t[]
aten::slice.t(t[] l, int? start=None, int? end=None, int step=1) -> t[]
aten::slice.str(str string, int? start=None, int? end=None, int step=1) -> str
aten::extend.t(t[](a!) self, t[] other) -> ()
aten::insert.t(t[](a!) self, int idx, t(b -> *) el) -> ()
aten::pop.t(t[](a!) self, int idx=-1) -> t(*)
aten::clear.t(t[](a!) self) -> ()
aten::clear.str(Dict(str, t)(a!) self) -> ()
aten::clear.int(Dict(int, t)(a!) self) -> ()
aten::clear.bool(Dict(bool, t)(a!) self) -> ()
aten::clear.float(Dict(float, t)(a!) self) -> ()
aten::reverse.t(t[](a!) self) -> ()
aten::sort.int(int[](a!) self, bool reverse=False) -> ()
aten::sort.float(float[](a!) self, bool reverse=False) -> ()
aten::sort.bool(bool[](a!) self, bool reverse=False) -> ()
aten::sort.str(str[](a!) self, bool reverse=False) -> ()
aten::sort.any(t[](a!) self, bool reverse=False) -> ()
aten::sorted.int(int[](a) input) -> int[]
aten::sorted.float(float[](a) input) -> float[]
aten::sorted.bool(bool[](a) input) -> bool[]
aten::sorted.str(str[](a) input) -> str[]
aten::sorted.any(t[](a) self) -> t[]
aten::__contains__.int_list(int[] l, int item) -> bool
aten::__contains__.str_list(str[] l, str item) -> bool
aten::__contains__.float_list(float[] l, float item) -> bool
aten::__contains__.str(Dict(str, t) dict, str key) -> bool
aten::__contains__.int(Dict(int, t) dict, int key) -> bool
aten::__contains__.bool(Dict(bool, t) dict, bool key) -> bool
aten::__contains__.float(Dict(float, t) dict, float key) -> bool
aten::index.list_int(int[] self, int el) -> int
aten::index.list_float(float[] self, float el) -> int
aten::index.list_bool(bool[] self, bool el) -> int
aten::index.list_str(str[] self, str el) -> int
aten::count.int(int[] self, int el) -> int
aten::count.float(float[] self, float el) -> int
aten::count.bool(bool[] self, bool el) -> int
aten::count.str(str[] self, str el) -> int
aten::sum.int(int[] self) -> int
aten::sum.bool(bool[] self) -> int
aten::sum.float(float[] self) -> float
aten::any.int(int[] self) -> bool
aten::any.float(float[] self) -> bool
aten::any.bool(bool[] self) -> bool
aten::any.str(str[] self) -> bool
aten::all.int(int[] self) -> bool
aten::all.float(float[] self) -> bool
aten::all.bool(bool[] self) -> bool
aten::__range_length(int lo, int hi, int step) -> int
aten::__derive_index(int index, int start, int step) -> int
prim::DictConstruct(...) -> ...
aten::dict() -> Dict(str, Tensor)
aten::dict.str((str, tVal)[] inputs) -> Dict(str, tVal)
aten::dict.int((int, tVal)[] inputs) -> Dict(int, tVal)
aten::dict.bool((bool, tVal)[] inputs) -> Dict(bool, tVal)
aten::dict.float((float, tVal)[] inputs) -> Dict(float, tVal)
aten::dict.Dict_str(Dict(str, t)(a) self) -> Dict(str, t)
aten::dict.Dict_int(Dict(int, t)(a) self) -> Dict(int, t)
aten::dict.Dict_bool(Dict(bool, t)(a) self) -> Dict(bool, t)
aten::dict.Dict_float(Dict(float, t)(a) self) -> Dict(float, t)
aten::copy.Dict_str(Dict(str, t)(a) self) -> Dict(str, t)
aten::copy.Dict_int(Dict(int, t)(a) self) -> Dict(int, t)
aten::copy.Dict_bool(Dict(bool, t)(a) self) -> Dict(bool, t)
aten::copy.Dict_float(Dict(float, t)(a) self) -> Dict(float, t)
aten::__getitem__.Dict_str(Dict(str, t) self, str key) -> t(*)
aten::__getitem__.Dict_int(Dict(int, t) self, int key) -> t(*)
aten::__getitem__.Dict_bool(Dict(bool, t) self, bool key) -> t(*)
aten::__getitem__.Dict_float(Dict(float, t) self, float key) -> t(*)
aten::_set_item.str(Dict(str, t)(a!) l, str(b -> *) idx, t(c -> *) v) -> ()
aten::_set_item.int(Dict(int, t)(a!) l, int(b -> *) idx, t(c -> *) v) -> ()
aten::_set_item.bool(Dict(bool, t)(a!) l, bool(b -> *) idx, t(c -> *) v) -> ()
aten::_set_item.float(Dict(float, t)(a!) l, float(b -> *) idx, t(c -> *) v) -> ()
aten::keys.str(Dict(str, t) self) -> str[](*)
aten::keys.int(Dict(int, t) self) -> int[](*)
aten::keys.bool(Dict(bool, t) self) -> bool[](*)
aten::keys.float(Dict(float, t) self) -> float[](*)
aten::values.str(Dict(str, t) self) -> t[](*)
aten::values.int(Dict(int, t) self) -> t[](*)
aten::values.bool(Dict(bool, t) self) -> t[](*)
aten::values.float(Dict(float, t) self) -> t[](*)
aten::items.str(Dict(str, t) self) -> ((str, t)[])
aten::items.int(Dict(int, t) self) -> ((int, t)[])
aten::items.bool(Dict(bool, t) self) -> ((bool, t)[])
aten::items.float(Dict(float, t) self) -> ((float, t)[])
aten::get.str(Dict(str, t) self, str key) -> t(*)?
aten::get.int(Dict(int, t) self, int key) -> t(*)?
aten::get.bool(Dict(bool, t) self, bool key) -> t(*)?
aten::get.float(Dict(float, t) self, float key) -> t(*)?
aten::get.default_str(Dict(str, t) self, str key, t default_value) -> t(*)
aten::get.default_int(Dict(int, t) self, int key, t default_value) -> t(*)
aten::get.default_bool(Dict(bool, t) self, bool key, t default_value) -> t(*)
aten::get.default_float(Dict(float, t) self, float key, t default_value) -> t(*)
aten::setdefault.str(Dict(str, t)(a!) self, str(b -> *) key, t(c -> *) default_value) -> t(*)
aten::setdefault.int(Dict(int, t)(a!) self, int(b -> *) key, t(c -> *) default_value) -> t(*)
aten::setdefault.bool(Dict(bool, t)(a!) self, bool(b -> *) key, t(c -> *) default_value) -> t(*)
aten::setdefault.float(Dict(float, t)(a!) self, float(b -> *) key, t(c -> *) default_value) -> t(*)
aten::pop.Dict_str(Dict(str, t)(a!) self, str key) -> t(*)
aten::pop.Dict_int(Dict(int, t)(a!) self, int key) -> t(*)
aten::pop.Dict_bool(Dict(bool, t)(a!) self, bool key) -> t(*)
aten::pop.Dict_float(Dict(float, t)(a!) self, float key) -> t(*)
aten::pop.Dict_default_str(Dict(str, t)(a!) self, str key, t default_value) -> t(*)
aten::pop.Dict_default_int(Dict(int, t)(a!) self, int key, t default_value) -> t(*)
aten::pop.Dict_default_bool(Dict(bool, t)(a!) self, bool key, t default_value) -> t(*)
aten::pop.Dict_default_float(Dict(float, t)(a!) self, float key, t default_value) -> t(*)
aten::update.str(Dict(str, t)(a!) self, Dict(str, t)(a!) to_add) -> ()
aten::update.int(Dict(int, t)(a!) self, Dict(int, t)(a!) to_add) -> ()
aten::update.bool(Dict(bool, t)(a!) self, Dict(bool, t)(a!) to_add) -> ()
aten::update.float(Dict(float, t)(a!) self, Dict(float, t)(a!) to_add) -> ()
"""
