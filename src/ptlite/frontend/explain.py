"""TorchScript compile errors explained: the user's line that causes one, and the fix, with a before/after snippet.

torch.jit.script reports an error as a headline, then a 'File "path", line n' block that prints the source around
the offending expression and underlines it (`~~~~ <--- HERE`), then, for a function compiled because another one
calls it, the caller's block. Three headlines are the common ones the scripting tutorial lists; each gets a cause
in the user's words and a fix: a global sub-model used through an attribute (pass it in the constructor), a global
value (store it as an attribute), an argument without a type annotation given to range() (annotate it). Any other
error keeps torch's headline, with the line it points at.
"""

from __future__ import annotations

import linecache
import os
import re
import sys
from dataclasses import dataclass
from typing import Any

import torch

from .common import MethodFailure, Relevance

_FILE = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)')
_CARET = re.compile(r"^(?P<indent>\s*)(?P<marks>[~^]+)\s*<--- HERE\s*$")
_CALLED_FROM = re.compile(r"^'(?P<callee>[^']+)' is being compiled since it was called from '(?P<caller>[^']+)'")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")

_ATTRIBUTE_LOOKUP = re.compile(r"attribute lookup is not defined on python value of type '(?P<type>[^']+)'")
_PYTHON_VALUE = re.compile(r"python value of type '(?P<type>[^']+)' cannot be used as a value")
_RANGE = re.compile(r"all inputs of range must be '?(?P<want>[\w\[\], ]+?)'?, found (?P<found>\w+)"
                    r"(?: \(inferred\))?(?: in argument (?P<index>\d+))?")

_INDENT = "    "


@dataclass
class Frame:
    """One 'File "path", line n' block of a TorchScript error: the source line it underlines and its function."""

    path: str
    line: int
    code: str = ""  # the underlined source line, stripped
    marked: str = ""  # the underlined part of it
    function: str = ""  # the `def ...:` line of the enclosing function, stripped, when the block shows it
    indent: str = _INDENT  # the code line's indentation relative to that def
    gap: bool = False  # whether lines lie between the def and the code line
    caller: str = ""  # the method whose call made TorchScript compile this function ('Model.forward')

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass
class ScriptErrorReport:
    """What torch.jit.script's message says, parsed: the headline, the frames (innermost first), the call chain."""

    headline: str
    frames: list[Frame]
    called_from: list[str]


@dataclass
class Explanation:
    """A scripting error in the user's terms: `cause` is one line; `fix` a sentence; before/after short snippets."""

    cause: str
    frame: Frame
    fix: str
    before: list[str]
    after: list[str]

    def text(self) -> str:
        """The cause, the fix, then the snippets (indented: they are the user's code, before and after)."""
        lines = [self.cause, f"Fix: {self.fix}",
                 "  before:", *[f"{_INDENT * 2}{ln}" if ln else "" for ln in self.before],
                 "  after:", *[f"{_INDENT * 2}{ln}" if ln else "" for ln in self.after]]
        return "\n".join(lines)


def parse(message: str) -> ScriptErrorReport:
    """Split torch.jit.script's error message into its headline and its source frames."""
    lines = message.strip("\n").splitlines()
    headline = next((ln.strip() for ln in lines if ln.strip()), "").rstrip(":").strip()
    frames: list[Frame] = []
    called_from: list[str] = []
    block: list[str] = []
    current: Frame | None = None
    for ln in lines:
        m = _FILE.match(ln)
        chained = _CALLED_FROM.match(ln.strip())
        if m or chained:
            if current is not None:
                _fill(current, block)
                current, block = None, []
            if chained:
                called_from.append(chained["caller"])
            else:
                current = Frame(m["path"], int(m["line"]))
                frames.append(current)
            continue
        if current is not None:
            block.append(ln)
    if current is not None:
        _fill(current, block)
    return ScriptErrorReport(headline, frames, called_from)


def _fill(frame: Frame, block: list[str]) -> None:
    """The underlined line (the one above the first caret line), its underlined part and the enclosing def."""
    caret = next((i for i, ln in enumerate(block) if _CARET.match(ln)), None)
    if caret is not None and caret > 0:
        source = block[caret - 1]
        m = _CARET.match(block[caret])
        start = len(m["indent"])
        frame.marked = source[start:start + len(m["marks"])].strip()
        above = block[:caret - 1]
    else:  # no underline in the message: read the line from the file itself
        source = linecache.getline(frame.path, frame.line).rstrip("\n")
        above = []
    frame.code = source.strip()
    defs = [i for i, ln in enumerate(above) if ln.lstrip().startswith("def ")]
    if defs:
        head = above[defs[-1]]
        frame.function = head.strip()
        depth = (len(source) - len(source.lstrip())) - (len(head) - len(head.lstrip()))
        frame.indent = " " * max(depth, len(_INDENT))
        frame.gap = defs[-1] != len(above) - 1


def explain(message: str) -> Explanation | None:
    """The cause and fix of one of the three common scripting errors, or None for any other message."""
    report = parse(message)
    if not report.frames:
        return None
    frame = report.frames[0]
    frame.caller = report.called_from[0] if report.called_from else ""
    for pattern, explainer in ((_ATTRIBUTE_LOOKUP, _global_submodule), (_PYTHON_VALUE, _global_value),
                               (_RANGE, _unannotated_range)):
        m = pattern.search(report.headline)
        if m:
            return explainer(m, frame)
    return None


def script_failure(exc: BaseException) -> MethodFailure:
    """torch.jit.script's exception as a CaptureError that leads with the cause and the fix; torch's message
    follows (and the exception stays the __cause__)."""
    message = str(exc).strip("\n")
    original = "\n".join(f"  {ln}" for ln in message.strip().splitlines()[:60])
    explanation = explain(message)
    if explanation is not None:
        return MethodFailure(f"torch.jit.script could not compile the model: {explanation.text()}\n"
                             f"torch.jit.script's message:\n{original}",
                             reason=explanation.cause, relevance=Relevance.EXPLAINED)
    reason = f"{type(exc).__name__}: {summary(message)}"
    return MethodFailure(f"torch.jit.script could not compile the model: {reason}\ntorch.jit.script's message:\n"
                         f"{original}", reason=reason)


def summary(message: str) -> str:
    """One line for any TorchScript compile error: the explained cause, or torch's headline and the line."""
    explanation = explain(message)
    if explanation is not None:
        return explanation.cause
    report = parse(message)
    if report.frames:
        frame = report.frames[0]
        return f"{report.headline} (at {frame.where}: `{frame.code}`)"
    return report.headline


def _body_with(frame: Frame, code: str) -> list[str]:
    """The frame's code line, replaced by `code`, under its def (with '...' where lines lie between them)."""
    if not frame.function:
        return [code]
    return [frame.function, *([f"{_INDENT}..."] if frame.gap else []), f"{frame.indent}{code}"]


def _global_name(frame: Frame) -> str:
    m = _IDENTIFIER.match(frame.marked) or _IDENTIFIER.search(frame.code)
    return m.group(0) if m else "GLOBAL"


def _attribute_name(global_name: str) -> str:
    name = global_name.lower().strip("_") or "sub"
    return name if name != "self" else "sub"


def _replace_name(code: str, name: str, replacement: str) -> str:
    return re.sub(rf"(?<![\w.]){re.escape(name)}\b", replacement, code)


def _takes_self(frame: Frame) -> bool:
    m = re.match(r"def\s+\w+\s*\(\s*(\w+)", frame.function)
    return bool(m) and m.group(1) == "self"


def _lookup_global(path: str, name: str) -> tuple[bool, Any]:
    """The object a global name holds in the (imported) module of file `path`: (found, value)."""
    try:
        real = os.path.realpath(path)
        for module in list(sys.modules.values()):
            file = getattr(module, "__file__", None)
            if file and os.path.realpath(file) == real and hasattr(module, name):
                return True, getattr(module, name)
    except (OSError, ValueError):
        pass
    return False, None


def _global_submodule(m: re.Match, frame: Frame) -> Explanation:
    name, kind = _global_name(frame), m["type"]
    found, value = _lookup_global(frame.path, name)
    if found and not isinstance(value, torch.nn.Module):
        return _global_object(kind, name, frame)
    attr = _attribute_name(name)
    cause = (f"{frame.where} `{frame.code}` uses {name}, a global {kind}: TorchScript compiles only the modules "
             f"a model holds as attributes, and cannot look up attributes of a Python global")
    fix = (f"pass the sub-model in the constructor and keep it as an attribute (create the model with {name} as "
           f"an argument), then use self.{attr}")
    after = [f"def __init__(self, {attr}: {kind}):", f"{_INDENT}super().__init__()", f"{_INDENT}self.{attr} = {attr}",
             "", *_body_with(frame, _replace_name(frame.code, name, f"self.{attr}"))]
    return Explanation(cause, frame, fix, _body_with(frame, frame.code), after)


def _global_object(kind: str, name: str, frame: Frame) -> Explanation:
    """An attribute of a global that is no module (a config object, say): its value is read in the constructor."""
    cause = (f"{frame.where} `{frame.code}` uses {name}, a global {kind}: TorchScript cannot look up attributes of "
             f"a Python global")
    member = frame.marked if re.fullmatch(rf"{re.escape(name)}(\.\w+)+", frame.marked) else ""
    following = frame.code.partition(member)[2].lstrip() if member else ""
    if following.startswith("()"):  # a call without arguments: its result, computed once
        member += "()"
    elif following.startswith("("):  # a call with arguments: they may be the inputs, so nothing to hoist
        member = ""
    if member:
        attr = _attribute_name(member.rsplit(".", 1)[-1].rstrip("()"))
        fix = (f"read the value once in the constructor and store it as an attribute (self.{attr} = {member}); "
               f"use self.{attr}")
        after = ["def __init__(self):", f"{_INDENT}super().__init__()", f"{_INDENT}self.{attr} = {member}", "",
                 *_body_with(frame, frame.code.replace(member, f"self.{attr}"))]
    else:
        attr = _attribute_name(name)
        fix = f"store what forward needs from {name} as attributes in the constructor, or pass a module instead"
        after = ["def __init__(self):", f"{_INDENT}super().__init__()", f"{_INDENT}self.{attr} = {name}", "",
                 *_body_with(frame, _replace_name(frame.code, name, f"self.{attr}"))]
    return Explanation(cause, frame, fix, _body_with(frame, frame.code), after)


def _global_value(m: re.Match, frame: Frame) -> Explanation:
    name, kind = _global_name(frame), m["type"]
    attr = _attribute_name(name)
    cause = (f"{frame.where} `{frame.code}` reads {name}, a global {kind}: TorchScript cannot use a Python global "
             f"variable as a value")
    if _takes_self(frame) or not frame.function:
        store = f'self.register_buffer("{attr}", {name})' if kind == "Tensor" else f"self.{attr} = {name}"
        fix = (f"store the global as an attribute of the module in its constructor ({store}) and read "
               f"self.{attr} instead")
        after = ["def __init__(self):", f"{_INDENT}super().__init__()", f"{_INDENT}{store}", "",
                 *_body_with(frame, _replace_name(frame.code, name, f"self.{attr}"))]
    else:  # a free function: it has no self, so the value comes in as an argument from the module that stores it
        annotation = "torch.Tensor" if kind == "Tensor" else kind
        head = re.sub(r"\)(\s*->[^:]*)?\s*:\s*$", lambda t: f", {attr}: {annotation}){t.group(1) or ''}:",
                      frame.function)
        caller = f" ({frame.caller})" if frame.caller else ""
        fix = (f"store the global as an attribute of the module that calls this function{caller} and pass it in "
               f"as an argument ({attr}=self.{attr})")
        after = [head, *_body_with(frame, _replace_name(frame.code, name, attr))[1:]]
    return Explanation(cause, frame, fix, _body_with(frame, frame.code), after)


def _split_arguments(text: str) -> list[str]:
    """'a, f(b, c), d' -> ['a', 'f(b, c)', 'd']: commas at bracket depth 0."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _range_arguments(code: str) -> list[str]:
    m = re.search(r"\brange\s*\(", code)
    if not m:
        return []
    depth, end = 1, m.end()
    while end < len(code) and depth:
        depth += {"(": 1, ")": -1}.get(code[end], 0)
        end += 1
    return _split_arguments(code[m.end(): end - 1])


def _converted_in_range(code: str, arg: str) -> str:
    """The line with `arg`, inside its range(...) call, wrapped in int()."""
    m = re.search(r"\brange\s*\(", code)
    if not m:
        return code
    inside = re.sub(rf"(?<![\w.]){re.escape(arg)}(?!\w)", f"int({arg})", code[m.end():], count=1)
    return code[: m.end()] + inside


def _annotated(function: str, name: str, want: str) -> str | None:
    """The def line with parameter `name` annotated as `want`, or None when it is not an unannotated parameter."""
    start, end = function.find("("), function.rfind(")")
    if start < 0 or end < start:
        return None
    params = _split_arguments(function[start + 1: end])
    for i, param in enumerate(params):
        pname, _, default = param.partition("=")
        if pname.strip() == name and ":" not in pname:
            params[i] = f"{name}: {want}" + (f" = {default.strip()}" if default else "")
            return f"{function[: start + 1]}{', '.join(params)}{function[end:]}"
    return None


def _unannotated_range(m: re.Match, frame: Frame) -> Explanation:
    want = {"ints": "int"}.get(m["want"], m["want"].rstrip("s"))
    args = _range_arguments(frame.code)
    index = int(m["index"]) if m["index"] else 0
    arg = args[index] if index < len(args) else (args[0] if args else "the argument")
    head = _annotated(frame.function, arg, want) if frame.function else None
    if head is not None:
        cause = (f"{frame.where} `{frame.code}` passes {arg} to range(): {arg} is an argument without a type "
                 f"annotation, so TorchScript takes it for a {m['found']}")
        fix = f"annotate the argument's type ({arg}: {want}) in the function's signature"
        after = [head, *_body_with(frame, frame.code)[1:]]
    else:
        cause = (f"{frame.where} `{frame.code}` passes {arg}, a {m['found']}, to range(), which TorchScript accepts "
                 f"only with {m['want']}")
        fix = (f"annotate {arg}'s type as {want} where it is defined (an argument: `{arg}: {want}`), or convert it: "
               f"int({arg})")
        after = _body_with(frame, _converted_in_range(frame.code, arg))
    return Explanation(cause, frame, fix, _body_with(frame, frame.code), after)
