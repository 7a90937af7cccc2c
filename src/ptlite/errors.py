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


class KernelArgumentError(ValueError):
    """A kernel cannot take an argument it was given (its rank, a size, a dtype), checked before it computes. The
    interpreter turns it into an InputError naming the input where the node reads one of the method's inputs, and
    into an ExecutionError naming the node otherwise."""


class FileChangedError(ExecutionError):
    """The model file a loaded module reads its weights from was truncated or overwritten in place after it was
    loaded: the call's results are discarded. Load the file again; replace files in use with os.replace."""


class LimitError(ExecutionError):
    """A call went past one of the module's run-time limits (`ptlite.Limits`: memory, loop iterations, wall time):
    says which node, which limit and how to raise it."""


class ScriptError(PtliteError, RuntimeError):
    """An exception the model raised itself (`raise ValueError(...)` in TorchScript); the message is the model's.

    `qualified_class` is TorchScript's name of the exception class ('builtins.ValueError').
    """

    def __init__(self, message: str, qualified_class: str | None = None) -> None:
        self.message = message
        self.qualified_class = qualified_class or "builtins.Exception"
        self.class_name = self.qualified_class.rsplit(".", 1)[-1]
        super().__init__(f"{self.class_name}: {message}" if message else self.class_name)
