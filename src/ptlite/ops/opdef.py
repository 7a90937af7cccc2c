"""One row of the operator table: an operator's schema, its traits, and what its alias annotations say."""

from __future__ import annotations

import re
from functools import cache, cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .schema import Schema

# The traits a declaration may carry (`@name` after its schema), and what each one promises.
TRAITS: dict[str, str] = {
    "structural": "the interpreter runs it itself (constants, control flow, the module's state): no backend kernel",
    "out": "has an out variant: its one tensor result is new memory, which a kernel may write into a buffer it is "
           "given (a memory plan's) instead of allocating",
    "effects": "running it can be noticed other than through its results (it raises, warns or changes global "
               "state): never removed, folded or reordered",
    "random": "its results may differ between runs on the same inputs (random numbers, uninitialized memory, "
              "hashes): never folded",
    "aliases": "a result may share memory with an argument although the schema does not annotate it (PyTorch's "
               "unsafe views, dropout at inference)",
    "unpacks": "returns its results as one sequence, an item per output, even when there is one output",
    "dtypes": "`@dtypes(float16,float32)`: the tensor dtypes it is defined for; without it, every dtype of the IR",
    "rank": "`@rank(input)` or `@rank(broadcast)`: its (first) tensor result, when it returns, has as many dimensions "
            "as its first argument, or as the most of its tensor arguments (broadcasting): what the passes' static "
            "facts read to answer a rank check where no shape was recorded",
    "ranks": "`@ranks(3,4)`: the ranks of its first tensor argument that ptlite's kernels run (PyTorch may take more): "
             "a node whose argument is known to have another rank is refused at capture and at load, with the "
             "model's line, instead of failing when it runs",
    "since": "`@since(0.2.0)`: the first ptlite version that runs it (without it, the first release, FIRST_VERSION); "
             "a file records the newest of its operators' as the ptlite version it needs",
}

FIRST_VERSION = "0.1.0"  # the version every operator declared without @since has run since

RANK_RULES = frozenset({"input", "broadcast"})  # what `@rank(...)` may say

# The tensor dtypes of the IR (ptlite.ir.dtypes), which a `@dtypes(...)` trait names.
DTYPES = frozenset({"bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"})

# Patterns compiled when first used (what a load reads needs none of them: `import ptlite` should not pay for them).
# An alias annotation on a type: "Tensor(a)", "Tensor(a!)", "t[](a)", "t(c -> *)", "t(*)", "Tensor(b|a)".
_ANNOTATION = r"[\w\]]\([a-z*]"
_LETTER = r"\(([a-z*](?:!)?)(?:\s*->\s*[a-z*]+)?\)"


@cache
def _pattern(text: str) -> re.Pattern[str]:
    return re.compile(text)


class OpDef:
    """An operator as the table declares it: `key` ("aten::add.Tensor"), the schema text, its traits and the
    family it is declared in (`ptlite/ops/<family>.py`). The schema is parsed when first needed."""

    __slots__ = ("key", "schema_text", "traits", "family", "dtypes", "rank", "ranks", "since", "__dict__")

    def __init__(self, schema_text: str, traits: frozenset[str] = frozenset(), family: str = "",
                 dtypes: frozenset[str] | None = None, rank: str | None = None, since: str = FIRST_VERSION,
                 ranks: frozenset[int] | None = None) -> None:
        self.key = key_of(schema_text)
        self.schema_text = schema_text
        self.traits = traits
        self.family = family
        self.dtypes = dtypes  # the tensor dtypes it is defined for, None: any
        self.rank = rank  # its result's rank rule (RANK_RULES), None: not declared
        self.since = since  # the first ptlite version that runs it
        self.ranks = ranks  # the ranks of its first tensor argument the kernels run, None: any

    @classmethod
    def parse(cls, line: str, family: str = "") -> OpDef:
        """A declaration line: the schema, then traits ("aten::relu(Tensor self) -> Tensor  @out")."""
        schema_text, _, trait_text = line.partition(" @")
        words = trait_text.replace("@", " ").split()
        dtypes = rank = None
        since = FIRST_VERSION
        ranks = None
        traits = []
        for word in words:
            if word.startswith("ranks(") and word.endswith(")"):
                try:
                    ranks = frozenset(int(r) for r in word[6:-1].split(","))
                except ValueError:
                    raise ValueError(f"declaration of {schema_text.partition('(')[0]}: @ranks needs ranks such as "
                                     f"3,4, not {word[6:-1]!r}") from None
                word = "ranks"
            if word.startswith("since(") and word.endswith(")"):
                since = word[6:-1]
                if not all(part.isdigit() for part in since.split(".")):
                    raise ValueError(f"declaration of {schema_text.partition('(')[0]}: @since needs a version such "
                                     f"as 0.2.0, not {since!r}")
                word = "since"
            if word.startswith("rank(") and word.endswith(")"):
                rank = word[5:-1]
                if rank not in RANK_RULES:
                    raise ValueError(f"declaration of {schema_text.partition('(')[0]}: unknown rule {rank} in @rank; "
                                     f"rules are {', '.join(sorted(RANK_RULES))}")
                word = "rank"
            if word.startswith("dtypes(") and word.endswith(")"):  # no regular expression: a load parses these
                dtypes = frozenset(filter(None, word[7:-1].split(",")))
                if not dtypes <= DTYPES:
                    raise ValueError(f"declaration of {schema_text.partition('(')[0]}: unknown dtype(s) "
                                     f"{', '.join(sorted(dtypes - DTYPES))} in @dtypes; dtypes are "
                                     f"{', '.join(sorted(DTYPES))}")
                word = "dtypes"
            if word not in TRAITS:
                raise ValueError(f"declaration of {schema_text.partition('(')[0]}: unknown trait @{word}; "
                                 f"traits are {', '.join(TRAITS)}")
            traits.append(word)
        return cls(schema_text.strip(), frozenset(traits), family, dtypes, rank, since, ranks)

    # ------------------------------------------------------------------------------------------------ traits

    @property
    def structural(self) -> bool:
        return "structural" in self.traits

    @property
    def out(self) -> bool:
        """Has an out variant (see TRAITS)."""
        return "out" in self.traits

    @property
    def effects(self) -> bool:
        return "effects" in self.traits

    @property
    def random(self) -> bool:
        return "random" in self.traits

    @property
    def unpacks(self) -> bool:
        return "unpacks" in self.traits

    @property
    def pure(self) -> bool:
        """Its results depend only on its arguments and running it does nothing else: no effects, no randomness,
        no in-place writes, not run by the interpreter itself."""
        return not (self.traits & {"effects", "random", "structural"}) and not self.writes

    # ------------------------------------------------------------------------------------------------ schema

    @cached_property
    def schema(self) -> Schema:
        from .schema import parse_schema  # here: a load checks argument counts without parsing schemas

        return parse_schema(self.schema_text)

    @cached_property
    def variadic(self) -> bool:
        """Takes any number of arguments, or returns any number of results (`(...)`, `-> ...`), as Schema says."""
        head, _, returns = self.schema_text.rpartition("->")
        return head[head.index("(") + 1:head.rindex(")")].strip() == "..." or returns.strip() == "..."

    @cached_property
    def argument_texts(self) -> tuple[str, ...]:
        """The positional declarations of the arguments ("Tensor(a!) self", ...), without the `*` marker."""
        head = self.schema_text.rpartition("->")[0]
        return tuple(_split(head[head.index("(") + 1:head.rindex(")")]))

    @cached_property
    def return_texts(self) -> tuple[str, ...]:
        returns = self.schema_text.rpartition("->")[2].strip()
        if returns.startswith("(") and returns.endswith(")"):
            returns = returns[1:-1]
        return tuple(_split(returns))

    @cached_property
    def writes(self) -> tuple[int, ...]:
        """Positions of the arguments it writes in place (annotated `(a!)`)."""
        return tuple(i for i, text in enumerate(self.argument_texts) if (_annotation(text) or "").endswith("!"))

    @cached_property
    def result_aliases(self) -> bool:
        """Whether a result may share memory with an argument: its schema annotates a result (`-> Tensor(a)`), or
        it has the `aliases` trait."""
        return "aliases" in self.traits or any(_pattern(_ANNOTATION).search(text) for text in self.return_texts)

    @cached_property
    def annotated_arguments(self) -> tuple[int, ...]:
        """Positions of the arguments that carry an alias annotation (what an annotated result may be)."""
        return tuple(i for i, text in enumerate(self.argument_texts) if _pattern(_ANNOTATION).search(text))

    @cached_property
    def result_sources(self) -> tuple[tuple[int, ...], ...]:
        """For each result, the positions of the arguments it may be (part of), by the annotations' letters
        (`Tensor(a) self` ... `-> Tensor(a)`; a result `t(*)` may be any annotated argument)."""
        letters = [_letter(text) for text in self.argument_texts]
        sources = []
        for text in self.return_texts:
            letter = _letter(text)
            if letter is None:
                sources.append(())
            elif letter == "*":
                sources.append(tuple(i for i, mine in enumerate(letters) if mine is not None))
            else:
                sources.append(tuple(i for i, mine in enumerate(letters) if mine == letter))
        return tuple(sources)

    def __repr__(self) -> str:
        traits = "".join(f" @{t}" for t in sorted(self.traits))
        return f"OpDef({self.schema_text!r}{traits})"


def key_of(schema_text: str) -> str:
    """The table key of a schema: its qualified name and overload ('aten::add.Tensor')."""
    head = schema_text.partition("(")[0].strip()
    if not head.partition("::")[2]:
        raise ValueError(f"schema {schema_text!r} lacks a qualified operator name (e.g. 'aten::relu')")
    return head


def _split(text: str) -> list[str]:
    """Top-level comma-separated parts (the keyword-only marker '*' and a variadic '...' dropped): commas inside
    brackets, parentheses and quoted defaults do not split."""
    parts, depth, quote, current = [], 0, "", ""
    for ch in text + ",":
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        else:
            depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0 and not quote:
            if current.strip() not in ("", "*", "..."):
                parts.append(current.strip())
            current = ""
        else:
            current += ch
    return parts


def _annotation(part: str) -> str | None:
    """'a!' of 'Tensor(a!) self', 'a' of 'Tensor(a -> *) self' or of the return 'Tensor(a)[]', else None."""
    kind = part.split("=", 1)[0].strip()
    if kind.count(" ") and not kind.endswith(")") and not kind.endswith("]"):
        kind = kind.rsplit(" ", 1)[0]  # drop the argument's name
    match = _pattern(_LETTER).search(kind)
    return match.group(1) if match else None


def _letter(part: str) -> str | None:
    annotation = _annotation(part)
    return annotation.rstrip("!") if annotation else None
