"""Run-time type checks of TorchScript values (ptlite's isinstance)."""

DECLARATIONS = r"""
ptlite::isinstance(Any value, str[] types) -> bool
"""
