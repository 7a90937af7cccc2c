"""TorchScript's str methods."""

from __future__ import annotations

from ptlite.backends.numpy import kernel

# ---------------------------------------------------------------------------------------------------------
# Strings
# ---------------------------------------------------------------------------------------------------------

@kernel("aten::add.str")
def str_add(a: str, b: str) -> str:
    return a + b


@kernel("aten::__getitem__.str",
        "prim::StringIndex")
def str_getitem(s: str, index: int) -> str:
    if index < -len(s) or index >= len(s):
        raise IndexError("string index out of range")
    return s[index]


def _span(s: str, start: int, end: int) -> tuple[int, int]:
    """TorchScript's (start, end=-1) string window: negative values count from the end, -1 means the end."""
    n = len(s)
    start = start + n if start < 0 else start
    end = end + n + 1 if end < 0 else end
    return max(0, min(start, n)), max(0, min(end, n))


@kernel("aten::startswith")
def startswith(self: str, substr: str, start: int = 0, end: int = -1) -> bool:
    lo, hi = _span(self, start, end)
    return self[lo:hi].startswith(substr)


@kernel("aten::endswith")
def endswith(self: str, substr: str, start: int = 0, end: int = -1) -> bool:
    lo, hi = _span(self, start, end)
    return self[lo:hi].endswith(substr)


@kernel("aten::count")
def str_count(self: str, substr: str, start: int = 0, end: int = -1) -> int:
    lo, hi = _span(self, start, end)
    return self[lo:hi].count(substr)


@kernel("aten::index.str")
def str_index(self: str, substr: str, start: int = 0, end: int = -1) -> int:
    lo, hi = _span(self, start, end)
    return self.index(substr, lo, hi)


@kernel("aten::replace")
def replace(self: str, old: str, new: str, max: int = -1) -> str:  # noqa: A002  (schema name)
    return self.replace(old, new, max)


@kernel("aten::split.str")
def str_split(self: str, separator: str | None = None, max: int = -1) -> list:  # noqa: A002
    return self.split(separator, max)


@kernel("aten::join")
def join(self: str, values: list) -> str:
    return self.join(values)


@kernel("aten::strip")
def strip(self: str, chars: str = " \n\t\f\v") -> str:
    return self.strip(chars)


@kernel("aten::lower")
def lower(self: str) -> str:
    return self.lower()


@kernel("aten::upper")
def upper(self: str) -> str:
    return self.upper()


@kernel("aten::ord")
def ord_(string: str) -> int:
    return ord(string)


@kernel("aten::chr")
def chr_(i: int) -> str:
    return chr(i)
