"""`ptlite compare`: a .ptlite or .ptl file's outputs against PyTorch's on the same inputs."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any

import numpy as np

import ptlite
from ptlite.format.ptl import is_pytorch_mobile
from ptlite.tools import compare, models
from ptlite.tools.bench import SEED, describe_input, describe_inputs
from ptlite.tools.errors import ToolError, require_file
from ptlite.tools.inputs import inputs_from

from .options import EXIT_DIFFERENT, add_input_options, check_blocklist, tolerance

COMPARE_EPILOG = """\
Both sides get the same inputs: random ones (seed 0, as 'ptlite bench' makes them) with the shapes the program
records or --input-shape gives, or --inputs files (.npz, .npy, images, numbers, as 'ptlite bench' takes them).
An output matches when max |ptlite - reference| <= TOLERANCE x max |reference| (1e-4, the criterion ptlite's
own tests hold models to); integer, boolean and string outputs must be equal. Exit status: 0 when every output
matches, 1 when one differs, 2 on an error.

examples:
  ptlite compare mobilenet_v2.ptlite --with ptlite.tools.zoo:mobilenet_v2
  ptlite compare mobilenet_v2.ptlite --with ptlite.tools.zoo:mobilenet_v2 --inputs cat.jpg
  ptlite compare model.ptl --input-shape 1,3,224,224      (against PyTorch's lite interpreter)
  ptlite compare model.ptlite --with model.ptl --inputs cat.jpg"""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "compare", help="check that a .ptlite or .ptl file computes what PyTorch computes (needs torch)",
        description="Run a .ptlite (or PyTorch Mobile .ptl) file with ptlite and the model it came from with "
                    "PyTorch, on the same inputs, and report every output's largest difference.",
        epilog=COMPARE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", metavar="MODEL", help="a .ptlite or .ptl file")
    parser.add_argument("--with", dest="reference", metavar="REFERENCE",
                        help="what PyTorch runs: 'module:function' building the model (run eagerly), a TorchScript "
                             "file, or a .ptl file (run on PyTorch's lite interpreter); for a .ptl MODEL, MODEL "
                             "itself on the lite interpreter by default")
    parser.add_argument("--method", metavar="NAME", default="forward", help="the method to compare (default forward)")
    add_input_options(parser)
    parser.add_argument("--tolerance", metavar="T", type=tolerance, default=None,
                        help="largest difference allowed, relative to max |reference| (default 1e-4)")
    parser.add_argument("--no-optimize", action="store_true",
                        help="a .ptl MODEL: run it as translated, without optimize_for_mobile (ptlite.load(path, "
                             "optimize=False)); a .ptlite file always runs as written")
    parser.add_argument("--blocklist", metavar="PASS", action="append", default=[],
                        help="a .ptl MODEL: optimize it without this pass (repeatable; names as 'ptlite convert "
                             "--blocklist' takes them, e.g. WINOGRAD)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    require_file(args.model)
    if args.inputs and args.input_shape:
        raise ToolError("give --inputs or --input-shape, not both")
    reference = args.reference
    pytorch_mobile = is_pytorch_mobile(args.model)
    if reference is None:
        if not pytorch_mobile:
            # a name recorded in the file is only suggested: importing and calling it would run code a file chose
            source = models.recorded_source(ptlite.load_program(args.model))
            hint = f"; it records that it was converted from {source}: --with {shlex.quote(source)}" if source else ""
            raise ToolError(f"say what to compare {args.model} with: --with 'module:function' (the model it was "
                           f"converted from), a TorchScript file or a .ptl file{hint}")
        reference = args.model
    if (args.no_optimize or args.blocklist) and not pytorch_mobile:
        raise ToolError("--no-optimize and --blocklist are for a .ptl file, optimized at load; a .ptlite file runs "
                       "as it was written (convert it again with 'ptlite convert --blocklist ...' to change that)")
    check_blocklist(args)
    if not os.path.isfile(reference) and ":" not in reference:
        raise ToolError(f"--with {reference}: no such file, and not 'module:function'")
    models.import_torch()  # before running anything: the reference needs it
    if args.blocklist:
        module = ptlite.Module(ptlite.optimize_for_mobile(ptlite.load_program(args.model),
                                                          optimization_blocklist=args.blocklist))
    else:
        module = ptlite.load(args.model, optimize=False if args.no_optimize else None)
    if args.method not in module.method_names:
        raise ToolError(f"{args.model} has no method '{args.method}'; it has {', '.join(module.method_names)}")
    specs = module.program.methods[args.method].input_specs
    inputs = inputs_from(args.inputs, args.input_shape, specs, args.method, module.preprocessing)
    ours = module.run_method(args.method, *[np.array(v) if isinstance(v, np.ndarray) else v for v in inputs])
    theirs, title = compare.run_reference(reference, inputs, args.method)
    tolerance = compare.DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
    differences = compare.compare_outputs(ours, theirs, tolerance)
    source = f"from {', '.join(args.inputs)}" if args.inputs else f"random, seed {SEED}"
    described = ", ".join(map(describe_input, describe_inputs(specs, inputs)))
    how = ", not optimized" if args.no_optimize else ""
    how += f", without {', '.join(args.blocklist)}" if args.blocklist else ""
    print(f"ptlite:    {args.model} ({args.method}{how})")
    print(f"reference: {reference}, {title}")
    print(f"inputs:    {described or 'none'} ({source})")
    print(f"tolerance: {tolerance:g} x max |reference| (integer, boolean and string outputs: equal)")
    if module.program.metadata.get("quantization", {}).get("int8") and args.tolerance is None:
        print("note:      an int8 model: where torch and ptlite round a requantization or an average differently, "
              "an operator's output moves by one step, which later layers can grow; the default tolerance is a "
              "float32 one: --tolerance sets one the model's output steps allow")
    print("\n".join(compare.format_table(differences, "reference")))
    verdict = compare.summary(differences)
    if all(d.ok for d in differences):
        print(verdict)
        return 0
    sys.stdout.flush()
    print(f"ptlite: {verdict}", file=sys.stderr)
    return EXIT_DIFFERENT
