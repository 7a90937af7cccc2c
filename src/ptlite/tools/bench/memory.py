"""A process's peak resident memory, as the system reports it."""

from __future__ import annotations

import importlib.util
import os
import sys


def peak_rss_bytes() -> int | None:
    """The process's peak resident set size so far, in bytes; None where the system does not say.

    Linux: VmHWM of /proc/self/status, because getrusage's ru_maxrss there also counts the peak of the parent when
    a process was started by fork and exec (as `compare`'s measuring processes are). Elsewhere: ru_maxrss, which is
    in bytes on macOS and in KiB on the BSDs. Windows has neither: None.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # "VmHWM:   13632 kB"
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def rss_source() -> str | None:
    """Where `peak_rss_bytes` reads from here."""
    if os.path.exists("/proc/self/status"):
        return "VmHWM of /proc/self/status (peak so far)"
    return "getrusage ru_maxrss (peak so far)" if importlib.util.find_spec("resource") else None
