"""A model file changed on disk while a process has it loaded: truncated, overwritten in place, copied over with cp,
replaced or deleted. Each case runs in a fresh process (a crash is a signal, which the test names); a mapped file
(the default) makes the next call raise FileChangedError where its bytes changed and keeps working where the old file
stays (os.replace, deletion); a file loaded with in_memory=True keeps working whatever happens. A call never returns
results that differ from the first call's."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from torch import nn

import ptlite

SCRIPT = textwrap.dedent("""
    import os, shutil, sys, time
    import numpy as np
    import ptlite
    path, other, action, backend, in_memory, inputs = sys.argv[1:7]
    module = ptlite.load(path, backends=(backend,), in_memory=in_memory == "1")
    x = np.load(inputs)
    first = module(x)
    time.sleep(0.05)  # past the file system's timestamp granularity: an overwrite in place changes the file's time
    if action == "truncate":
        os.truncate(path, 0)
    elif action == "truncate_half":
        os.truncate(path, os.path.getsize(path) // 2)
    elif action == "cp":
        shutil.copyfile(other, path)
    elif action == "rewrite":  # the last 4 KiB in place, same size
        with open(path, "r+b") as f:
            f.seek(-4096, 2)
            f.write(bytes(range(256)) * 16)
    elif action == "replace":
        shutil.copyfile(other, path + ".new")
        os.replace(path + ".new", path)
    elif action == "delete":
        os.remove(path)
    for _ in range(2):
        try:
            again = module(x)
        except ptlite.FileChangedError as exc:
            print("CHANGED", exc)
            continue
        print("SAME" if np.array_equal(first, again) else "DIFFERENT")
""")

ACTIONS = ["truncate", "truncate_half", "cp", "rewrite", "replace", "delete"]
CHANGES_BYTES = {"truncate", "truncate_half", "cp", "rewrite"}


class Small(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 8 * 8, 300)  # a weight of ~300 KB: pages past any truncation are read

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).flatten(1))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("changes")
    torch.manual_seed(0)
    model = Small().eval()
    x = torch.randn(1, 3, 8, 8)
    np.save(root / "x.npy", x.numpy())
    made = {}
    for backend in ("numpy", "native"):
        made[backend] = root / f"small.{backend}.ptlite"
        ptlite.save(ptlite.optimize_for_mobile(ptlite.capture(model, (x,)), backend=backend), made[backend])
    torch.manual_seed(1)
    other = Small().eval()
    made["other"] = root / "other.ptlite"
    ptlite.save(ptlite.optimize_for_mobile(ptlite.capture(other, (x,)), backend="numpy"), made["other"])
    made["ptl"] = root / "small.ptl"
    torch.jit.script(model)._save_for_lite_interpreter(str(made["ptl"]))
    made["other_ptl"] = root / "other.ptl"
    torch.jit.script(other)._save_for_lite_interpreter(str(made["other_ptl"]))
    made["x"] = root / "x.npy"
    return made


def _run(files, tmp_path, kind: str, action: str, backend: str, in_memory: bool) -> list[str]:
    source = files["ptl"] if kind == "ptl" else files[backend]
    path = tmp_path / source.name
    shutil.copyfile(source, path)
    other = files["other_ptl"] if kind == "ptl" else files["other"]
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(path), str(other), action, backend,
                           "1" if in_memory else "0", str(files["x"])], capture_output=True, text=True, timeout=120)
    what = f"{kind} file, {action}, {backend} backend, in_memory={in_memory}"
    assert done.returncode >= 0, f"{what}: the process died of signal {-done.returncode}\n{done.stderr[-2000:]}"
    assert done.returncode == 0, f"{what}: exit {done.returncode}\n{done.stderr[-2000:]}"
    lines = [line.split(" ", 1)[0] for line in done.stdout.splitlines()]
    assert "DIFFERENT" not in lines, f"{what}: a call returned results from the changed file: {done.stdout}"
    return done.stdout.splitlines()


@pytest.mark.parametrize("backend", ["numpy", "native"])
@pytest.mark.parametrize("action", ACTIONS)
def test_a_mapped_ptlite_file_that_changes_raises_and_never_crashes(files, tmp_path, action, backend):
    if backend == "native" and "native" not in [b.name for b in ptlite.backends() if b.available]:
        pytest.skip("the native backend is not built here")
    lines = _run(files, tmp_path, "ptlite", action, backend, in_memory=False)
    if ptlite.format.source.map_file is None:
        assert all(line == "SAME" for line in lines), lines  # read into memory: nothing changes
    elif action in CHANGES_BYTES:
        assert all(line.startswith("CHANGED") for line in lines), \
            f"{action}: every later call raises FileChangedError: {lines}"
        assert "os.replace" in lines[0] and "in_memory=True" in lines[0], lines[0]
    else:
        assert lines == ["SAME", "SAME"], f"{action}: the loaded module keeps the old file: {lines}"


@pytest.mark.parametrize("action", ACTIONS)
def test_a_file_read_into_memory_is_not_affected(files, tmp_path, action):
    assert _run(files, tmp_path, "ptlite", action, "numpy", in_memory=True) == ["SAME", "SAME"]


@pytest.mark.parametrize("action", ["truncate", "truncate_half", "cp", "rewrite"])
def test_a_ptl_file_that_changes_never_crashes_nor_gives_changed_results(files, tmp_path, action):
    """A .ptl file's weights are translated and packed at load; those still read from the file are guarded."""
    lines = _run(files, tmp_path, "ptl", action, "numpy", in_memory=False)
    assert all(line == "SAME" or line.startswith("CHANGED") for line in lines), lines


def test_an_empty_file_is_a_format_error_either_way(tmp_path):
    path = tmp_path / "empty.ptlite"
    path.write_bytes(b"")
    for in_memory in (False, True):
        with pytest.raises(ptlite.FormatError, match="empty"):
            ptlite.load(path, in_memory=in_memory)


def test_a_fault_in_a_map_that_is_not_ptlite_s_still_ends_the_process(files, tmp_path):
    """The guard takes only the faults inside its own maps: a SIGBUS in another mapping (here Python's mmap of a
    truncated file, after a guarded model was loaded) goes to the disposition before it, the default's end."""
    if ptlite.format.source.map_file is None:
        pytest.skip("no guarded maps here")
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"x" * 65536)
    code = textwrap.dedent(f"""
        import mmap, os
        import ptlite
        module = ptlite.load({str(files['numpy'])!r})
        with open({str(victim)!r}, "rb") as f:
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        os.truncate({str(victim)!r}, 0)
        print(m[60000])
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == -7, f"expected death by SIGBUS, got exit {done.returncode}: {done.stderr[-500:]}"


@pytest.mark.parametrize("in_memory", [False, True])
def test_weights_are_frozen_and_aligned_either_way(files, in_memory):
    """Kernels keep values derived from frozen weights without comparing them at each call (ptlite.ir.weights);
    a copy in memory starts on a cache line as a map does."""
    from ptlite.ir.weights import frozen

    program = ptlite.load_program(files["native"], in_memory=in_memory)
    assert program.weights and all(frozen(w) for w in program.weights.values())
    assert all(w.ctypes.data % 64 == 0 for w in program.weights.values())


def test_a_sigbus_sent_to_the_process_still_ends_it(files):
    """kill -BUS is not a read past a file's end: the guard passes it on, and the default action ends the process
    (it is not swallowed)."""
    if ptlite.format.source.map_file is None:
        pytest.skip("no guarded maps here")
    code = f"import os, signal, ptlite; m = ptlite.load({str(files['numpy'])!r}); os.kill(os.getpid(), signal.SIGBUS)"
    done = subprocess.run([sys.executable, "-c", code + "; print('survived')"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == -7 and "survived" not in done.stdout, (done.returncode, done.stdout, done.stderr[-300:])


def test_sources_are_found_through_memoryviews(files):
    """A weight sealed from a map's view (a read-only memoryview between them) still names the map."""
    from ptlite.format.source import sources_of

    if ptlite.format.source.map_file is None:
        pytest.skip("no guarded maps here")
    program = ptlite.load_program(files["numpy"])
    weight = next(iter(program.weights.values()))
    sealed = np.asarray(memoryview(weight).toreadonly())
    assert len(sources_of([weight])) == 1 and sources_of([sealed]) == sources_of([weight])
