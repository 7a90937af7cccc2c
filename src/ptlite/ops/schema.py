"""Parse ATen-style operator schemas ("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

# Identifiers that appear as defaults in ATen schemas, with the values TorchScript passes for them.
_NAMED_DEFAULTS: dict[str, Any] = {
    "None": None,
    "True": True,
    "False": False,
    "contiguous_format": 0,
    "preserve_format": 1,
    "channels_last": 2,
    "Mean": 1,
    "Sum": 2,
    "long": 4,
    "float": 6,
    "inf": float("inf"),
    "-inf": float("-inf"),
}

NO_DEFAULT = object()


@dataclass(frozen=True)
class Argument:
    """One formal argument of an operator."""

    name: str
    type: str
    default: Any = NO_DEFAULT
    kwarg_only: bool = False

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT

    def __str__(self) -> str:
        text = f"{self.type} {self.name}"
        if self.has_default:
            text += f"={self.default!r}"
        return text


@dataclass(frozen=True)
class Schema:
    """An operator's signature: qualified name, overload, arguments and return types."""

    name: str  # "aten::add"
    overload: str  # "Tensor", or "" for the default overload
    arguments: tuple[Argument, ...] = ()
    returns: tuple[str, ...] = ()
    variadic: bool = False  # takes any number of inputs and/or produces any number of outputs

    @property
    def key(self) -> str:
        """The operator's table key: 'aten::add.Tensor' (or 'aten::relu' without overload)."""
        return f"{self.name}.{self.overload}" if self.overload else self.name

    def fill_defaults(self, args: list[Any]) -> list[Any]:
        """Append default values for trailing arguments not given (as PyTorch's lite interpreter does)."""
        if self.variadic or len(args) >= len(self.arguments):
            return list(args)
        out = list(args)
        for arg in self.arguments[len(args):]:
            if not arg.has_default:
                raise TypeError(f"{self.key}: missing required argument '{arg.name}'")
            out.append(arg.default)
        return out

    def __str__(self) -> str:
        args = ", ".join(str(a) for a in self.arguments) if not self.variadic else "..."
        rets = ", ".join(self.returns)
        if len(self.returns) != 1:
            rets = f"({rets})"
        return f"{self.key}({args}) -> {rets}"


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split on sep at nesting depth 0 (brackets, parentheses, quotes), stripping each part."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch == sep:
            if depth == 0:
                parts.append(text[start:i].strip())
                start = i + 1
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch in "'\"":
            quote = ch
    last = text[start:].strip()
    if last:
        parts.append(last)
    return parts


def _parse_default(text: str) -> Any:
    text = text.strip()
    if text in _NAMED_DEFAULTS:
        return _NAMED_DEFAULTS[text]
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        return [_parse_default(p) for p in _split_top(inner)] if inner else []
    digits = text[1:] if text[:1] == "-" else text
    if digits.isdecimal() and digits.isascii() and (digits == "0" or digits[0] != "0"):  # the usual case: an int
        return int(text)
    quote = text[:1]
    if quote in ("'", '"') and len(text) > 1 and text[-1] == quote and quote not in text[1:-1] and "\\" not in text:
        return text[1:-1]  # a string without escapes
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError) as exc:
        raise ValueError(f"cannot parse schema default {text!r}") from exc


def _strip_alias(type_text: str) -> str:
    """'Tensor(a!)' -> 'Tensor', 'Tensor(a)[]' -> 'Tensor[]' (alias annotations are not needed)."""
    if "(" not in type_text:
        return type_text
    out, depth = [], 0
    i = 0
    while i < len(type_text):
        ch = type_text[i]
        if ch == "(" and type_text[:i].endswith("Tensor"):
            depth = 1
            i += 1
            while i < len(type_text) and depth:
                inner = type_text[i]
                depth += (inner == "(") - (inner == ")")
                i += 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _closing_parenthesis(text: str) -> int:
    """Index of the ")" closing a "(" just before `text` (-1 if none), visiting only the parentheses."""
    depth, i = 1, -1
    while True:
        close = text.find(")", i + 1)
        if close < 0:
            return -1
        depth += text.count("(", i + 1, close) - 1
        if depth == 0:
            return close
        i = close


def parse_schema(text: str) -> Schema:
    """Parse one schema string; '...' as the argument list marks a variadic operator."""
    text = text.strip()
    head, _, rest = text.partition("(")
    if "::" not in head:
        raise ValueError(f"schema {text!r} lacks a namespace (e.g. 'aten::')")
    name, _, overload = head.partition(".")
    close = _closing_parenthesis(rest)
    if close < 0:
        raise ValueError(f"unbalanced parentheses in schema {text!r}")
    arg_text, ret_text = rest[:close], rest[close + 1:].strip()
    if not ret_text.startswith("->"):
        raise ValueError(f"schema {text!r} lacks '-> returns'")
    ret_text = ret_text[2:].strip()
    if ret_text.startswith("(") and ret_text.endswith(")"):
        returns = tuple(_strip_alias(r.split()[0]) for r in _split_top(ret_text[1:-1]))
    elif ret_text == "...":
        returns = ("...",)
    else:
        returns = (_strip_alias(ret_text.split()[0]),) if ret_text else ()
    variadic = arg_text.strip() == "..." or returns == ("...",)
    arguments: list[Argument] = []
    kwarg_only = False
    if arg_text.strip() != "...":
        for part in _split_top(arg_text):
            if part == "*":
                kwarg_only = True
                continue
            decl, eq, default = part.partition("=")
            type_text, _, arg_name = decl.strip().rpartition(" ")
            value = _parse_default(default) if eq else NO_DEFAULT
            arguments.append(Argument(arg_name, _strip_alias(type_text.strip()), value, kwarg_only))
    return Schema(name, overload, tuple(arguments), returns, variadic)
