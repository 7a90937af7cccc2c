"""The NumPy backend's lowering passes."""

import ptlite.passes  # noqa: F401  (imports these passes: importing one of them first must not cycle)
