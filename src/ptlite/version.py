"""The version of ptlite (the files it writes record it)."""

__version__ = "0.1.0"
