"""A progress bar on standard error for long CLI steps (calibration): redrawn in place on a terminal, one line at
the end otherwise (logs stay readable)."""

from __future__ import annotations

import logging
import sys
import time
from typing import TextIO

WIDTH = 30


class ProgressBar:
    """Call with (done, total) as work advances; `label` names the work. Silent where ptlite's log does not show
    progress (`ptlite -q`)."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.start = time.perf_counter()
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.shown = -1
        self.quiet = not logging.getLogger("ptlite").isEnabledFor(logging.INFO)  # the command line's -q

    def __call__(self, done: int, total: int) -> None:
        if self.quiet:
            return
        total = max(total, 1)
        filled = WIDTH * done // total
        if self.live and (filled != self.shown or done == total):
            self.shown = filled
            bar = "#" * filled + "." * (WIDTH - filled)
            self.stream.write(f"\r{self.label} [{bar}] {done}/{total}")
            self.stream.flush()
        if done >= total:
            seconds = time.perf_counter() - self.start
            self.stream.write(("\r" if self.live else "") + f"{self.label}: {total}/{total} in {seconds:.1f} s"
                              + " " * (WIDTH // 2) + "\n")
            self.stream.flush()
