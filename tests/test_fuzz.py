"""The fuzz targets (fuzz/) run for a bounded time from fresh seed corpora, each in a process of its own: libFuzzer
stops with a non-zero status on a crash, an exception escaping other than ptlite's own, a hang past -timeout or
memory past -rss_limit_mb, and writes the input that did it next to the test's files. PTLITE_FUZZ_SECONDS sets the
time per target (default 60, CI's). The mutations follow a fixed seed (PTLITE_FUZZ_SEED, default 1) and the
.ptlite seeds are the same bytes on every machine (make_corpus.py cuts the folders from their sources), so that a
failure of the `ptlite` or `native` target in CI is found again here by the same command run as long or longer (the
.ptl seeds differ from run to run: TorchScript orders their code by hash); finding new inputs is the long runs' job
(docs/reliability.md has the command and what ran)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("atheris", reason="atheris (x86-64, Python 3.11-3.13 wheels) is not installed")

ROOT = Path(__file__).resolve().parents[1]
SECONDS = int(os.environ.get("PTLITE_FUZZ_SECONDS", "60"))
SEED = int(os.environ.get("PTLITE_FUZZ_SEED", "1"))
TARGETS = ["ptlite", "ptl", "native"]  # fuzz/fuzz.py's, each seeded from the folder of its name


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("seeds")
    subprocess.run([sys.executable, str(ROOT / "fuzz" / "make_corpus.py"), str(out)], check=True,
                   capture_output=True, timeout=600)
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_fuzz_target_finds_nothing(seeds, tmp_path, target):
    if target == "native":
        import ptlite

        if not ptlite.backends()[0].available:
            pytest.skip("the native backend is not built here")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for seed in (seeds / target).iterdir():
        (corpus / seed.name).write_bytes(seed.read_bytes())
    command = [sys.executable, str(ROOT / "fuzz" / "fuzz.py"), target, str(corpus), f"-max_total_time={SECONDS}",
               f"-seed={SEED}", "-rss_limit_mb=2048", "-timeout=20", "-print_final_stats=1",
               f"-artifact_prefix={tmp_path}/"]
    # Started by a shell that forks it: a process exec'd straight from this one would inherit the test process's
    # peak RSS (Linux keeps it across exec), which libFuzzer reads as its own and calls out-of-memory.
    done = subprocess.run(["/bin/sh", "-c", '"$@"; exit $?', "sh", *command], capture_output=True, text=True,
                          timeout=SECONDS + 300, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    runs = re.search(r"stat::number_of_executed_units:\s+(\d+)", done.stderr)
    found = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "timeout-", "oom-")))
    # atheris prints an escaping exception's traceback on stdout, libFuzzer its report on stderr
    assert done.returncode == 0 and not found, \
        f"fuzz.py {target} (-seed={SEED}): exit {done.returncode}, inputs written: {found} (in {tmp_path})\n" \
        f"{done.stdout[-4000:]}\n{done.stderr[-2000:]}"
    assert runs and int(runs.group(1)) >= 100, f"fuzz.py {target} ran too few inputs:\n{done.stderr[-2000:]}"
    print(f"fuzz.py {target}: {runs.group(1)} executions in {SECONDS} s")
