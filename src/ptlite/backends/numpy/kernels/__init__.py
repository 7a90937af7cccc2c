"""NumPy kernels, one module per operator family, each imported the first time one of its operators is needed.

Importing a family module registers its kernels in the operator table (`ptlite.ir.registry.kernel`); importing
this package registers nothing. The registry finds an operator's family in the generated index `_index.py`, so
that loading a program imports only the families it uses; `load_all()` imports every family. A new family is a
new module here, found by name: after adding, moving or removing kernels, regenerate the index with
`python -m ptlite.backends.numpy.kernels --write-index` (tests/test_kernel_index.py fails, naming that command, until
then). A stale index never breaks a lookup, it only makes it import every family.
"""

from __future__ import annotations

import importlib

INDEX_COMMAND = "python -m ptlite.backends.numpy.kernels --write-index"


def family_names() -> list[str]:
    """Names of the kernel family modules (those in this package not starting with '_'), sorted."""
    import pkgutil  # here, not at the top: loading a program needs only load_family

    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def load_family(name: str) -> None:
    """Import one family module, registering its kernels (and those of the families it imports)."""
    importlib.import_module(f"{__name__}.{name}")


def load_all() -> None:
    """Import every family module, registering every kernel."""
    for name in family_names():
        load_family(name)
