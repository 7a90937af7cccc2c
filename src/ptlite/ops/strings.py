"""TorchScript's str methods."""

DECLARATIONS = r"""
aten::add.str(str a, str b) -> str
aten::__getitem__.str(str s, int index) -> str
prim::StringIndex(str string, int index) -> str
aten::startswith(str self, str substr, int start=0, int end=-1) -> bool
aten::endswith(str self, str substr, int start=0, int end=-1) -> bool
aten::count(str self, str substr, int start=0, int end=-1) -> int
aten::index.str(str self, str substr, int start=0, int end=-1) -> int
aten::replace(str self, str old, str new, int max=-1) -> str
aten::split.str(str self, str? separator=None, int max=-1) -> str[]
aten::join(str self, str[] values) -> str
aten::strip(str self, str chars=" \n\t\f\v") -> str
aten::lower(str self) -> str
aten::upper(str self) -> str
aten::ord(str string) -> int
aten::chr(int i) -> str
"""
