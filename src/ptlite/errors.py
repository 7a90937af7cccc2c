"""Exceptions that ptlite raises on purpose, each naming the problem and the fix."""


class PtliteError(Exception):
    """Base class of ptlite's own errors."""


class FormatError(PtliteError, ValueError):
    """A file is not a valid ptlite (or PyTorch Mobile) file: truncated, corrupt, or from a newer version."""


class CaptureError(PtliteError, RuntimeError):
    """A model could not be captured (e.g. it uses operators ptlite cannot run); lists every cause."""


class InputError(PtliteError, ValueError):
    """Arguments passed to a method do not match what the method expects."""


class UnsupportedOperatorError(PtliteError, RuntimeError):
    """A program needs operators that ptlite's operator table lacks; lists them all."""


class ExecutionError(PtliteError, RuntimeError):
    """A kernel failed while running a node; says which node and where it came from in the model."""


class ScriptError(PtliteError, RuntimeError):
    """The model itself raised an exception (TorchScript `raise`); the message is the model's."""
