"""PyTorch Mobile .ptl files (legacy `_save_for_lite_interpreter` output), read without torch into ptlite's IR.

See docs/legacy-ptl.md for what is supported.
"""

from .reader import is_pytorch_mobile, read_ptl, sniff_file

__all__ = ["is_pytorch_mobile", "read_ptl", "sniff_file"]
