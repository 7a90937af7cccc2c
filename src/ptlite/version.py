"""The version of ptlite (the files it writes record it)."""

__version__ = "0.1.0"


def version_key(text: str) -> tuple[int, ...]:
    """A release version ("0.2.0") as a tuple that compares as versions do; ValueError for anything else."""
    parts = text.split(".") if isinstance(text, str) and len(text) <= 32 else []
    if not parts or not all(p.isascii() and p.isdigit() for p in parts):
        raise ValueError(f"{str(text)[:40]!r} is not a version such as 0.2.0")
    return tuple(int(p) for p in parts)
