"""The command line's argument types and the options several commands share."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import ptlite
from ptlite.tools.errors import ToolError, require_file

EXIT_ERROR = 2
EXIT_DIFFERENT = 1  # check, compare, bench --compare: the outputs differ

log = logging.getLogger("ptlite")  # what ptlite says besides a command's results: progress, notes, warnings


class _Lines(logging.Formatter):
    """'ptlite: message' for progress and notes, 'ptlite: warning: message' for warnings."""

    def format(self, record: logging.LogRecord) -> str:
        kind = {logging.WARNING: "warning: ", logging.DEBUG: "debug: "}.get(record.levelno, "")
        return f"ptlite: {kind}{record.getMessage()}"


class _Stderr(logging.StreamHandler):
    """A handler writing to whatever sys.stderr is when a record comes (it may be replaced after setup)."""

    @property  # type: ignore[override]
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass


@contextmanager
def logging_to_stderr(quiet: bool, verbose: int) -> Iterator[None]:
    """While a command runs, show ptlite's log on standard error: progress and notes (INFO) by default, only
    warnings and errors with -q, debugging detail too with -v. The logger is left as it was found afterwards (a
    program or a test calling `main()` keeps its own logging setup)."""
    level = logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
    handler = _Stderr()
    handler.setFormatter(_Lines())
    saved = log.level, log.propagate
    log.addHandler(handler)
    log.setLevel(level)
    log.propagate = False  # shown once, here, not again by handlers of the root logger
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(saved[0])
        log.propagate = saved[1]


def add_verbosity(parser: argparse.ArgumentParser, top: bool = False) -> None:
    """-q and -v, on the main parser and on each command's (before or after the command name)."""
    default = {} if top else {"default": argparse.SUPPRESS}
    parser.add_argument("-q", "--quiet", action="store_true", help="print only results, warnings and errors "
                        "(no progress lines or notes)", **({"default": False} if top else default))
    parser.add_argument("-v", "--verbose", action="count", help="print more detail (what each step does)",
                        **({"default": 0} if top else default))


def load_program(path: str) -> ptlite.Program:
    """The program of a .ptlite or .ptl file named on the command line."""
    return ptlite.load_program(require_file(path))


def backends(text: str) -> list[str]:
    """--backends: comma-separated backend names, checked against those ptlite has."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    known = [info.name for info in ptlite.backends()]
    unknown = [name for name in names if name not in known]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"unknown backend(s) {', '.join(unknown) or repr(text)}; ptlite has "
                                         f"{', '.join(known)} (see 'ptlite inspect MODEL')")
    return names


def add_backend_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backends", metavar="NAMES", type=backends, default=None,
                        help="the backends to run on, in the order they are asked for each node, e.g. numpy "
                             "(default: every backend available here; the NumPy reference always runs what the "
                             "others decline)")


def input_shape(text: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.replace("x", ",").split(",")]
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid shape {text!r}: expected comma-separated sizes such as "
                                         "1,3,224,224") from None
    if any(d < 0 for d in shape):
        raise argparse.ArgumentTypeError(f"invalid shape {text!r}: sizes must not be negative")
    return shape


def _int_at_least(minimum: int, what: str):
    """An argparse type: an integer >= minimum, or a one-line error naming what was expected."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value
    return parse


positive_int = _int_at_least(1, "a positive integer")
non_negative_int = _int_at_least(0, "a non-negative integer")


def image_size(text: str) -> tuple[int, int]:
    try:
        parts = [int(p) for p in text.replace("x", ",").split(",")]
    except ValueError:
        parts = []
    if len(parts) not in (1, 2) or min(parts) <= 0:
        raise argparse.ArgumentTypeError(f"invalid image size {text!r}: expected SIZE or HEIGHT,WIDTH")
    return (parts[0], parts[-1])


def tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number such as 1e-4, got {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a non-negative number such as 1e-4, got {text!r}")
    return value


def add_input_options(parser: argparse.ArgumentParser) -> None:
    """--input-shape and --inputs, as bench and compare take them (read by inputs_from)."""
    parser.add_argument("--input-shape", metavar="SHAPE", type=input_shape, action="append", default=[],
                        help="shape of each tensor input, e.g. 1,3,224,224; repeat for each input, in order "
                             "(default: the shapes the program records)")
    parser.add_argument("--inputs", metavar="FILE", action="append", default=[],
                        help="inputs instead of random data: one .npz file with every input (saved under the "
                             "inputs' names or in order), or, repeated, one .npy file, image or number per input "
                             "as 'ptlite run' takes them")


def human_bytes(n: int | float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def check_blocklist(args: argparse.Namespace) -> None:
    """--blocklist's names (convert, compare), checked before anything is captured or run."""
    if args.blocklist and args.no_optimize:
        raise ToolError("--blocklist skips some optimizations, --no-optimize all of them: give one or the other")
    from ptlite.backends import get, lowering_passes
    from ptlite.passes import blocklist_names

    try:
        target = get(getattr(args, "backend", "cpu"))
    except ValueError as exc:
        raise ToolError(f"--backend: {exc}") from None
    try:
        blocklist_names(args.blocklist, lowering_passes(target))
    except ValueError as exc:
        raise ToolError(f"--blocklist: {exc}") from None
