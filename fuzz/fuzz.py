"""The fuzz targets: a file of one kind loaded and run as a user would (harness.py), for atheris (libFuzzer).

    python fuzz/fuzz.py TARGET CORPUS_DIR [libFuzzer options]      (docs/reliability.md)

TARGET: `ptlite` (a .ptlite file on the NumPy reference), `native` (a .ptlite file lowered for the native backend,
run on it: its plans are checked in C before any kernel runs) or `ptl` (a PyTorch Mobile file, zip or flatbuffer,
read, translated and run on NumPy).
"""

import sys

import atheris

TARGETS = {"ptlite": (".ptlite", ("numpy",)), "native": (".ptlite", ("native",)), "ptl": (".ptl", ("numpy",))}

if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
    sys.exit(f"usage: python fuzz/fuzz.py {{{','.join(TARGETS)}}} CORPUS_DIR [libFuzzer options]")
SUFFIX, BACKENDS = TARGETS[sys.argv.pop(1)]

with atheris.instrument_imports(include=["ptlite"]):
    from harness import run_one, warm

    warm(next((a for a in sys.argv[1:] if not a.startswith("-")), None), SUFFIX, BACKENDS)


def test_one_input(data: bytes) -> None:
    run_one(data, SUFFIX, BACKENDS)


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
