"""The `ptlite` command line: convert a PyTorch model, run, benchmark, inspect and list the operators of a .ptlite
file, and compare its outputs with PyTorch's; one module per command.

Only `convert` (except of a PyTorch Mobile .ptl file), `compare`, `demo` and `bench --compare` need torch; `run`,
`check`, `bench`, `ops` and `inspect` work with NumPy alone.
Every error is reported as `ptlite: error: ...` with exit status 2, never a traceback
(set PTLITE_DEBUG=1 to see one)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import ptlite
from ptlite.errors import PtliteError
from ptlite.tools.errors import ToolError

from . import bench, check, compare, convert, demo, inspect, run
from .options import EXIT_ERROR, add_verbosity, logging_to_stderr

# The commands in the order --help lists them: each module adds its parser (add_parser), whose handler runs it.
COMMANDS = (convert, run, check, bench, compare, inspect, demo)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors that point at --help instead of printing the whole usage."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ptlite",
        description="Capture PyTorch models into .ptlite files and run them (and PyTorch Mobile .ptl files) "
                    "without torch.",
        epilog="Start with 'ptlite demo' to see the whole round trip on a small model. "
               "'ptlite COMMAND --help' describes each command.")
    parser.add_argument("--version", action="version", version=f"ptlite {ptlite.__version__}")
    add_verbosity(parser, top=True)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for command in COMMANDS:
        command.add_parser(commands)
    for sub in set(commands.choices.values()):
        add_verbosity(sub)
    return parser


def _error_text(exc: BaseException) -> str:
    """The error as one headline line; further lines (e.g. lists of operators) are indented under it."""
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"{exc.filename}: no such file"
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.filename}: {exc.strerror or exc}"
    text = str(exc).strip() or type(exc).__name__
    if not isinstance(exc, (ToolError, PtliteError, ImportError)):
        text = f"{type(exc).__name__}: {text}"
    lines = text.splitlines()
    return "\n".join([lines[0]] + [f"  {line}" for line in lines[1:21]]
                     + ([f"  ... ({len(lines) - 21} more lines)"] if len(lines) > 21 else []))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 outputs differ (check, compare, bench --compare),
    2 error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already printed by argparse
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    if args.command is None:
        parser.print_help()
        return EXIT_ERROR
    try:
        with logging_to_stderr(args.quiet, args.verbose):
            return args.handler(args)
    except KeyboardInterrupt:
        print("ptlite: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `ptlite ops model.ptlite | head`
        return 0
    except Exception as exc:
        if os.environ.get("PTLITE_DEBUG"):
            raise
        sys.stdout.flush()
        print(f"ptlite: error: {_error_text(exc)}", file=sys.stderr)
        return EXIT_ERROR
