"""The error a tool raises for a user's mistake in what it was given (a file, a model name, an option): the command
line prints it as one line and exits with status 2."""


class ToolError(Exception):
    """A user-facing error of a tool: printed as one line, exit status 2."""


def require_file(path: str) -> str:
    """`path`, if it names an existing file; else a ToolError saying what it is instead."""
    import os

    if not os.path.exists(path):
        raise ToolError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ToolError(f"{path}: is a directory, not a file")
    return path
