"""Quiet capture attempts: what torch prints while it fails (graph dumps, log lines) is kept back, not shown.

torch.export prints a failing graph straight to sys.stderr (once per nested wrapper), and its loggers' handlers
(`torch.*`, which do not propagate) write to sys.stderr as it is when they emit. A capture attempt runs inside
`quiet_torch()`, which captures sys.stderr: when the attempt fails, what torch wrote goes to the "ptlite.frontend"
logger at DEBUG and the attempt's error says, concisely, why it failed; when it succeeds, it is written out as
torch wrote it.
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
from collections.abc import Iterator

log = logging.getLogger("ptlite.frontend")


@contextlib.contextmanager
def quiet_torch(what: str) -> Iterator[None]:
    """Capture sys.stderr for the duration: logged at DEBUG if the body raises, written out if it does not."""
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stderr(buffer):
            yield
    except BaseException:
        text = buffer.getvalue().strip()
        if text:
            log.debug("%s failed; what it wrote to stderr:\n%s", what, text)
        raise
    text = buffer.getvalue()
    if text:
        sys.stderr.write(text)
