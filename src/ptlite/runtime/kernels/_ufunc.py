"""NumPy ufuncs called directly where NumPy's public function is a Python wrapper around one.

`np.clip` checks and forwards its arguments in Python before it reaches the `clip` ufunc, ~2.5 us a call on the
benchmark machine; the fused activations of a MobileNetV2 run call it about a hundred times. Callers pass both
bounds, as scalars of the array's dtype.
"""

from __future__ import annotations

import numpy as np

try:
    from numpy._core.umath import clip  # NumPy 2
except ImportError:  # pragma: no cover - NumPy 1.x keeps it in numpy.core; anything else gets the wrapper
    try:
        from numpy.core.umath import clip
    except ImportError:
        clip = np.clip

__all__ = ["clip"]
