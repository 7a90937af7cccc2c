"""NumPy kernels, one module per operator family; importing this package registers them all.

Each module registers its kernels in the operator table (`ptlite.ir.registry.kernel`). A new family is a new
module here: it is found by name, nothing else needs editing.
"""

import importlib
import pkgutil

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")
