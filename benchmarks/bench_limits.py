"""What the run-time limits (ptlite.Limits) cost a call, and what they save on issue 17's hostile GRU.

    python benchmarks/bench_limits.py [--runs 200] [--rounds 7]

1. Call overhead: a small convolutional network (the executor tests' shape: 3 -> 16 -> 48 channels at 20x20, batch
   2) called with the default limits and with Limits.none(), on the native backend and on NumPy; the best round's
   mean per call (each round `--runs` calls), the two settings interleaved. One fresh process per backend.
2. The hostile GRU: the zoo's GRU classifier by torch.jit.script, its hidden-size constant (32) set to 2^28, called
   once in a fresh process with the default limits: how it ends, how long it took and the process's peak RSS.
   (Without limits the same file took 4 GB and 12 s before a MemoryError.)

Prints a Markdown table; docs/reliability.md quotes it. Needs torch (to make the files).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_files(folder: Path) -> tuple[Path, Path]:
    import torch
    from torch import nn

    import ptlite
    from ptlite.tools import zoo

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU6(), nn.Conv2d(16, 48, 1), nn.ReLU6(),
                        nn.Conv2d(48, 48, 3, 1, 1, groups=48), nn.Hardswish(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(48, 10)).eval()
    small = folder / "net.ptlite"
    program = ptlite.capture(net, (torch.randn(2, 3, 20, 20),), method="export")
    ptlite.save(ptlite.optimize_for_mobile(program, backend="native"), small)
    gru = ptlite.capture(zoo.gru_classifier(), (torch.randn(2, 10, 16),), method="script")
    constants = [n for n in gru.methods["forward"].walk() if n.op == "prim::Constant" and n.attrs.get("value") == 32
                 and type(n.attrs.get("value")) is int]
    if not constants:
        raise SystemExit("the GRU program has no hidden-size constant 32")
    for node in constants:
        node.attrs["value"] = 2 ** 28
    hostile = folder / "gru-hostile.ptlite"
    ptlite.save(gru, hostile)
    return small, hostile


def overhead(path: str, backend: str, runs: int, rounds: int) -> dict:
    import time

    import numpy as np

    import ptlite

    x = np.random.default_rng(0).standard_normal((2, 3, 20, 20)).astype(np.float32)
    modules = {name: ptlite.load(path, backends=(backend,), limits=limits)
               for name, limits in (("default", ptlite.Limits()), ("none", ptlite.Limits.none()))}
    best = {name: float("inf") for name in modules}
    for m in modules.values():
        for _ in range(20):
            m(x)
    for _ in range(rounds):
        for name, m in modules.items():
            start = time.perf_counter()
            for _ in range(runs):
                m(x)
            best[name] = min(best[name], (time.perf_counter() - start) / runs)
    return {name: seconds * 1e6 for name, seconds in best.items()}


def hostile(path: str) -> dict:
    import resource
    import time

    import numpy as np

    import ptlite

    module = ptlite.load(path)
    start = time.perf_counter()
    try:
        module(np.zeros((2, 10, 16), np.float32))
        ended = "returned"
    except ptlite.PtliteError as exc:
        ended = f"{type(exc).__name__} at {str(exc).split(' (')[0]}"
    return {"ended": ended, "ms": (time.perf_counter() - start) * 1e3,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def child(*args: str) -> dict:
    # started by a shell that forks it: a process exec'd straight from this one would inherit this one's peak RSS
    # (Linux keeps ru_maxrss across exec, and this one has imported torch)
    done = subprocess.run(["/bin/sh", "-c", '"$@"; exit $?', "sh", sys.executable, __file__, "--child", *args],
                          capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}, timeout=600)
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        kind, *args = sys.argv[2:]
        result = overhead(args[0], args[1], int(args[2]), int(args[3])) if kind == "overhead" else hostile(args[0])
        print(json.dumps(result))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small, bad = make_files(Path(tmp))
        print("| backend | default limits (us a call) | Limits.none() (us a call) | cost |")
        print("|---|---|---|---|")
        for backend in ("native", "numpy"):
            r = child("overhead", str(small), backend, str(args.runs), str(args.rounds))
            print(f"| {backend} | {r['default']:.1f} | {r['none']:.1f} | {r['default'] - r['none']:+.1f} us |")
        r = child("hostile", str(bad))
        print(f"\nhostile GRU (hidden size 2^28), default limits: {r['ended']}, after {r['ms']:.1f} ms, "
              f"peak RSS {r['peak_mb']:.0f} MB")


if __name__ == "__main__":
    main()
