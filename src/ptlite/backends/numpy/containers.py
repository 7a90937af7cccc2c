"""TorchScript lists and dicts (Python lists and insertion-ordered dicts, mutable and shared, as prim.py says)."""

from __future__ import annotations

from typing import Any

from ptlite.backends.numpy import kernel
from ptlite.errors import KernelArgumentError

from .prim import script_str

# ---------------------------------------------------------------------------------------------------------
# Lists
# ---------------------------------------------------------------------------------------------------------

@kernel("prim::ListConstruct")
def list_construct(*items: Any) -> list:
    return list(items)


def _check_index(length: int, idx: int) -> int:
    if idx < -length or idx >= length:
        raise IndexError("list index out of range")
    return idx


@kernel("aten::__getitem__.t")
def list_getitem(lst: list, idx: int) -> Any:
    return lst[_check_index(len(lst), idx)]


@kernel("aten::_set_item.t")
def list_setitem(lst: list, idx: int, el: Any) -> list:
    lst[_check_index(len(lst), idx)] = el
    return lst


@kernel("aten::append.t")
def append(self: list, el: Any) -> list:
    self.append(el)
    return self


@kernel("aten::len.t",
        "aten::len.any",
        "aten::len.str",
        "aten::len.Dict_str",
        "aten::len.Dict_int",
        "aten::len.Dict_bool",
        "aten::len.Dict_float")
def len_(a: Any) -> int:
    return len(a)


@kernel("aten::list.t",
        "aten::copy.t",
        "aten::list")
def list_copy(items: Any) -> list:
    return list(items)


@kernel("aten::add.t")
def list_add(a: list, b: list) -> list:
    return a + b


MAX_LIST_ITEMS = 1 << 26  # 512 MiB of item pointers: far past any model's lists, and not NumPy memory (Limits)


@kernel("aten::mul.left_t")
def list_repeat(lst: list, n: int) -> list:
    if len(lst) * max(n, 0) > MAX_LIST_ITEMS:  # a count from the file, and Python memory the budget does not see
        raise KernelArgumentError(f"repeating a list of {len(lst):,} items {n:,} times would make "
                                  f"{len(lst) * n:,} items; ptlite's lists hold at most {MAX_LIST_ITEMS:,}")
    return lst * max(n, 0)


@kernel("aten::mul.right_")
def list_repeat_right(n: int, lst: list) -> list:
    return list_repeat(lst, n)


@kernel("aten::slice.t",
        "aten::slice.str")
def slice_(seq: Any, start: int | None = None, end: int | None = None, step: int = 1) -> Any:
    if step == 0:
        raise ValueError("slice step cannot be zero")
    return seq[start:end:step]


@kernel("aten::extend.t")
def extend(self: list, other: list) -> None:
    self.extend(list(other))


@kernel("aten::insert.t")
def insert(self: list, idx: int, el: Any) -> None:
    self.insert(idx, el)


@kernel("aten::pop.t")
def list_pop(self: list, idx: int = -1) -> Any:
    if not self:
        raise IndexError("pop from empty list")
    return self.pop(_check_index(len(self), idx))


@kernel("aten::clear.t",
        "aten::clear.str",
        "aten::clear.int",
        "aten::clear.bool",
        "aten::clear.float")
def clear(self: Any) -> None:
    self.clear()


@kernel("aten::reverse.t")
def reverse(self: list) -> None:
    self.reverse()


@kernel("aten::sort.int",
        "aten::sort.float",
        "aten::sort.bool",
        "aten::sort.str",
        "aten::sort.any")
def sort(self: list, reverse: bool = False) -> None:
    self.sort(reverse=reverse)


@kernel("aten::sorted.int",
        "aten::sorted.float",
        "aten::sorted.bool",
        "aten::sorted.str",
        "aten::sorted.any")
def sorted_(items: list) -> list:
    return sorted(items)


@kernel("aten::__contains__.int_list",
        "aten::__contains__.str_list",
        "aten::__contains__.float_list",
        "aten::__contains__.str",
        "aten::__contains__.int",
        "aten::__contains__.bool",
        "aten::__contains__.float")
def contains(container: Any, item: Any) -> bool:
    return item in container


@kernel("aten::index.list_int",
        "aten::index.list_float",
        "aten::index.list_bool",
        "aten::index.list_str")
def list_index(self: list, el: Any) -> int:
    return self.index(el)


@kernel("aten::count.int",
        "aten::count.float",
        "aten::count.bool",
        "aten::count.str")
def list_count(self: list, el: Any) -> int:
    return self.count(el)


@kernel("aten::sum.int", "aten::sum.bool")
def list_sum_int(self: list) -> int:
    return int(sum(self))


@kernel("aten::sum.float")
def list_sum_float(self: list) -> float:
    return float(sum(self))


@kernel("aten::any.int",
        "aten::any.float",
        "aten::any.bool",
        "aten::any.str")
def list_any(self: list) -> bool:
    return any(self)


@kernel("aten::all.int",
        "aten::all.float",
        "aten::all.bool")
def list_all(self: list) -> bool:
    return all(self)


@kernel("aten::__range_length")
def range_length(lo: int, hi: int, step: int) -> int:
    if step == 0:
        raise ValueError("range() arg 3 must not be zero")
    return len(range(lo, hi, step))


@kernel("aten::__derive_index")
def derive_index(index: int, start: int, step: int) -> int:
    return start + index * step


# ---------------------------------------------------------------------------------------------------------
# Dicts
# ---------------------------------------------------------------------------------------------------------

@kernel("prim::DictConstruct")
def dict_construct(*keys_and_values: Any) -> dict:
    return dict(zip(keys_and_values[0::2], keys_and_values[1::2], strict=True))


@kernel("aten::dict")
def dict_empty() -> dict:
    return {}


@kernel("aten::dict.str",
        "aten::dict.int",
        "aten::dict.bool",
        "aten::dict.float",
        "aten::dict.Dict_str",
        "aten::dict.Dict_int",
        "aten::dict.Dict_bool",
        "aten::dict.Dict_float",
        "aten::copy.Dict_str",
        "aten::copy.Dict_int",
        "aten::copy.Dict_bool",
        "aten::copy.Dict_float")
def dict_copy(items: Any) -> dict:
    return dict(items)


@kernel("aten::__getitem__.Dict_str",
        "aten::__getitem__.Dict_int",
        "aten::__getitem__.Dict_bool",
        "aten::__getitem__.Dict_float")
def dict_getitem(self: dict, key: Any) -> Any:
    try:
        return self[key]
    except KeyError:
        raise KeyError(script_str(key)) from None


@kernel("aten::_set_item.str",
        "aten::_set_item.int",
        "aten::_set_item.bool",
        "aten::_set_item.float")
def dict_setitem(d: dict, key: Any, value: Any) -> None:
    d[key] = value


@kernel("aten::update.str",
        "aten::update.int",
        "aten::update.bool",
        "aten::update.float")
def dict_update(self: dict, to_add: dict) -> None:
    self.update(to_add)


@kernel("aten::keys.str",
        "aten::keys.int",
        "aten::keys.bool",
        "aten::keys.float")
def dict_keys(self: dict) -> list:
    return list(self.keys())


@kernel("aten::values.str",
        "aten::values.int",
        "aten::values.bool",
        "aten::values.float")
def dict_values(self: dict) -> list:
    return list(self.values())


@kernel("aten::items.str",
        "aten::items.int",
        "aten::items.bool",
        "aten::items.float")
def dict_items(self: dict) -> list:
    return list(self.items())


@kernel("aten::get.str",
        "aten::get.int",
        "aten::get.bool",
        "aten::get.float",
        "aten::get.default_str",
        "aten::get.default_int",
        "aten::get.default_bool",
        "aten::get.default_float")
def dict_get(self: dict, key: Any, default_value: Any = None) -> Any:
    return self.get(key, default_value)


@kernel("aten::setdefault.str",
        "aten::setdefault.int",
        "aten::setdefault.bool",
        "aten::setdefault.float")
def dict_setdefault(self: dict, key: Any, default_value: Any) -> Any:
    return self.setdefault(key, default_value)


@kernel("aten::pop.Dict_str",
        "aten::pop.Dict_int",
        "aten::pop.Dict_bool",
        "aten::pop.Dict_float")
def dict_pop(self: dict, key: Any) -> Any:
    try:
        return self.pop(key)
    except KeyError:
        raise KeyError(script_str(key)) from None


@kernel("aten::pop.Dict_default_str",
        "aten::pop.Dict_default_int",
        "aten::pop.Dict_default_bool",
        "aten::pop.Dict_default_float")
def dict_pop_default(self: dict, key: Any, default_value: Any) -> Any:
    return self.pop(key, default_value)
