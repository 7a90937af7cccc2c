"""Run-time limits (ptlite.Limits): a call past its memory, loop-iteration or time limit raises LimitError naming the
node, the limit and how to raise it; the memory limit refuses an allocation before it happens, and a memory plan
whose arena is past it is refused at load. The hostile GRU of issue 17 (its hidden-size constant set to 2^28) is
refused at the allocation of its initial state, not after gigabytes."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import assert_close
from test_format import _rewrite_program
from torch import nn

import ptlite
from ptlite.runtime import limits as limits_module
from ptlite.tools import zoo

needs_budget = pytest.mark.skipif(limits_module.Budget is None, reason="ptlite.runtime._budget is not built here")


def _handler() -> str:
    from numpy._core.multiarray import get_handler_name

    return get_handler_name()


@pytest.fixture(scope="module")
def gru_file(tmp_path_factory) -> Path:
    """The zoo's GRU classifier by torch.jit.script: its initial state is aten::zeros of [4, batch, 32], the 32 a
    constant of the file."""
    path = tmp_path_factory.mktemp("limits") / "gru.ptlite"
    ptlite.save(ptlite.capture(zoo.gru_classifier(), (torch.randn(2, 10, 16),), method="script"), path)
    return path


def _with_hidden(path: Path, tmp_path: Path, hidden: int) -> Path:
    out = tmp_path / f"gru-{hidden}.ptlite"
    out.write_bytes(path.read_bytes())

    def edit(body):
        methods = body["methods"] if isinstance(body["methods"], list) else list(body["methods"].values())
        nodes = next(m for m in methods if m["name"] == "forward")["body"]["nodes"]
        found = [n for n in nodes if n["op"] == "prim::Constant" and type(n.get("attrs", {}).get("value")) is int
                 and n["attrs"]["value"] == 32]
        assert found, "the GRU file has no hidden-size constant 32"
        for n in found:
            n["attrs"]["value"] = hidden
    _rewrite_program(out, edit)
    return out


@needs_budget
def test_a_hostile_hidden_size_is_refused_before_allocating(gru_file, tmp_path):
    x = np.random.default_rng(0).standard_normal((2, 10, 16)).astype(np.float32)
    module = ptlite.load(_with_hidden(gru_file, tmp_path, 2 ** 28), limits=ptlite.Limits(max_bytes=1 << 30))
    with pytest.raises(ptlite.LimitError, match=r"aten::zeros .*needed 8\.0 GiB more.*memory limit of 1\.0 GiB "
                                                r"\(Limits\.max_bytes\).*limits=ptlite\.Limits\(max_bytes="):
        module(x)
    assert _handler() == "default_allocator", "the call left its allocator in place"
    torch_model = zoo.gru_classifier()
    with torch.inference_mode():
        want = torch_model(torch.from_numpy(x)).numpy()
    assert_close(ptlite.load(gru_file)(x), want, what="gru_classifier after a refused call", rtol=1e-4)


def test_without_a_memory_limit_the_kernel_refuses_the_state_it_was_given(gru_file, tmp_path):
    """The GRU kernel checks the initial state against its weights before using it (it used to copy it first)."""
    module = ptlite.load(_with_hidden(gru_file, tmp_path, 1 << 16), limits=ptlite.Limits.none())
    with pytest.raises(ptlite.ExecutionError, match=r"aten::gru.input .*initial state h0 has shape \[4, 2, 65536\]; "
                                                    r"the weights and the input need \[4, 2, 32\]"):
        module(np.zeros((2, 10, 16), np.float32))


@needs_budget
def test_the_memory_limit_counts_what_the_call_holds(tmp_path):
    model = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1)).eval()
    x = torch.randn(1, 3, 64, 64)
    path = tmp_path / "convs.ptlite"
    ptlite.save(ptlite.capture(model, (x,), method="trace"), path)  # not optimized: no memory plan
    with torch.inference_mode():
        want = model(x).numpy()
    for backends in (("numpy",), None):
        assert_close(ptlite.load(path, backends=backends)(x.numpy()), want, what="convs under the default limits")
        tight = ptlite.load(path, backends=backends, limits=ptlite.Limits(max_bytes=512 << 10))  # 1 MiB a value
        with pytest.raises(ptlite.LimitError, match=r"memory limit of 512\.0 KiB"):
            tight(x.numpy())
        assert _handler() == "default_allocator"


@needs_budget
def test_threads_have_budgets_of_their_own(tmp_path):
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8)).eval()
    path = tmp_path / "mlp.ptlite"
    ptlite.save(ptlite.capture(model, (torch.randn(4, 64),), method="trace"), path)
    module = ptlite.load(path, backends=("numpy",), limits=ptlite.Limits(max_bytes=64 << 10))
    small, large = np.ones((4, 64), np.float32), np.ones((512, 64), np.float32)  # 4 KiB or 512 KiB of hidden values
    errors: list[BaseException] = []

    def calls(x: np.ndarray) -> None:
        for _ in range(200):
            try:
                module(x)
            except ptlite.LimitError as exc:
                errors.append(exc)

    threads = [threading.Thread(target=calls, args=(a,)) for a in (small, large)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 200, "every large call, and only those, is past the limit"
    assert module(small).shape == (4, 8)


def _loop_file(tmp_path: Path) -> Path:
    class Spin(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            while bool(x.sum() >= 0.0):  # never ends for x >= 0 (capture runs it on -1: no iteration)
                x = x + 1.0
            return x

    path = tmp_path / "spin.ptlite"
    ptlite.save(ptlite.capture(Spin(), (-torch.ones(2),), method="script"), path)
    return path


def test_a_loop_that_never_ends_stops_at_the_iteration_limit(tmp_path):
    module = ptlite.load(_loop_file(tmp_path), limits=ptlite.Limits(max_iterations=1000))
    with pytest.raises(ptlite.LimitError, match=r"prim::Loop .*1,000 loop iterations.*Limits\.max_iterations"):
        module(np.zeros(2, np.float32))


def test_a_call_stops_at_the_time_limit(tmp_path):
    module = ptlite.load(_loop_file(tmp_path), limits=ptlite.Limits(max_iterations=None, max_seconds=0.2))
    with pytest.raises(ptlite.LimitError, match=r"prim::Loop .*time limit of 0\.2 s \(Limits\.max_seconds\)"):
        module(np.zeros(2, np.float32))


def test_an_arena_past_the_memory_limit_is_refused_at_load(tmp_path):
    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.Conv2d(16, 16, 3)).eval()
    path = tmp_path / "planned.ptlite"
    program = ptlite.optimize_for_mobile(ptlite.capture(model, (torch.randn(1, 3, 32, 32),), method="export"))
    ptlite.save(program, path)
    assert ptlite.load(path).memory_plan() is not None
    with pytest.raises(ptlite.LimitError, match=r"method 'forward': its memory plan's arena of .* is past the "
                                                r"memory limit of 1\.0 KiB"):
        ptlite.load(path, limits=ptlite.Limits(max_bytes=1024))


@pytest.mark.parametrize("fields,message", [
    ({"max_bytes": 0}, "max_bytes must be a positive int"),
    ({"max_bytes": 1.5}, "max_bytes must be a positive int"),
    ({"max_iterations": -1}, "max_iterations must be a positive int"),
    ({"max_bytes": 2 ** 63}, r"max_bytes must be a positive int \(at most 2\*\*62\)"),
    ({"max_seconds": float("nan")}, "max_seconds must be a positive, finite number"),
    ({"max_seconds": float("inf")}, "max_seconds must be a positive, finite number"),
    ({"max_seconds": 0}, "max_seconds must be a positive, finite number"),
])
def test_limits_are_checked(fields, message):
    with pytest.raises(ValueError, match=message):
        ptlite.Limits(**fields)


def test_numpy_numbers_are_limits_too():
    limits = ptlite.Limits(max_bytes=np.int64(1 << 20), max_iterations=np.int32(5), max_seconds=np.float64(2))
    assert (limits.max_bytes, limits.max_iterations, limits.max_seconds) == (1 << 20, 5, 2.0)
    assert type(limits.max_bytes) is int and type(limits.max_seconds) is float


def test_limits_must_be_limits(gru_file):
    with pytest.raises(TypeError, match="limits must be a ptlite.Limits, got dict"):
        ptlite.load(gru_file, limits={"max_bytes": 1})


def test_inspect_reports_the_limits(gru_file, capsys):
    from ptlite.tools.cli import main

    assert main(["inspect", str(gru_file)]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("limits:"))
    assert "memory per call 4.0 GiB" in line and "loop iterations per call 10,000,000" in line \
        and "time per call 600 s" in line, line
    assert json.dumps(ptlite.Limits().describe())  # plain rows


@needs_budget
def test_the_budget_refuses_past_its_cap_and_nests_in_order():
    import contextvars

    from ptlite.runtime._budget import Budget

    outer, inner = Budget(1 << 20), Budget(-1)
    with outer:
        kept = np.ones(1000)
        with pytest.raises(MemoryError):
            np.empty(2 ** 63 - 1, np.uint8)  # (live + size would overflow a signed 64-bit sum)
        with pytest.raises(MemoryError):
            np.empty(2 << 20, np.uint8)
        assert (outer.refusals, outer.refused, outer.held) == (2, 2 << 20, 8000)
        with inner:
            big = np.ones(1 << 20)  # counted, not capped
            with pytest.raises(RuntimeError, match="reverse order"):
                outer.__exit__(None, None, None)
        assert inner.live == 8 << 20 and _handler() == "ptlite_budget"
        context = contextvars.copy_context()  # a copy made inside: another thread running in it is charged too
    assert _handler() == "default_allocator"
    del big
    assert inner.live == 0 and outer.live == 8000
    del kept
    assert outer.live == 0

    failures: list[BaseException] = []

    def in_copy() -> None:
        try:
            np.ones(1 << 20)
        except MemoryError as exc:
            failures.append(exc)
    thread = threading.Thread(target=context.run, args=(in_copy,))
    thread.start()
    thread.join()
    assert len(failures) == 1 and outer.refusals == 3


_SANITIZED_RUN = """
import sys, threading
sys.path.insert(0, sys.argv[1])
import numpy as np
from _budget import Budget
for cap in (-1, 1 << 20, 0):
    b = Budget(cap)
    kept = []
    with b:
        for i in range(200):
            try:
                kept.append(np.zeros(i * 100, np.float32))
                grown = np.fromiter((float(j) for j in range(i * 10)), np.float64)  # grows by realloc
                d = np.ones(50)
                d.resize(5000, refcheck=False)
                d.resize(10, refcheck=False)
            except MemoryError:
                pass
    kept = grown = d = None
    with b:
        try:
            np.empty(2 ** 63 - 1, np.uint8)
        except MemoryError:
            pass
    assert b.live == 0 and (cap < 0 or b.peak <= cap) and (b.refusals > 0) == (cap >= 0), (cap, b.live, b.peak)
def worker():
    b = Budget(1 << 16)
    with b:
        for _ in range(1000):
            try:
                np.ones(1000) + np.ones(1000)
            except MemoryError:
                pass
    assert b.live == 0, b.live
threads = [threading.Thread(target=worker) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("ok")
"""


def test_the_budget_under_address_and_undefined_behaviour_sanitizers(tmp_path):
    """budget.c built with -fsanitize=address,undefined, driven through NumPy: allocations, reallocations that grow
    and shrink, refusals, frees after the budget's call, threads; every block's bytes come back."""
    import shutil
    import subprocess
    import sys
    import sysconfig

    gcc = shutil.which("gcc")
    libs = [subprocess.run([gcc, f"-print-file-name={lib}"], capture_output=True, text=True).stdout.strip()
            for lib in ("libasan.so", "libubsan.so")] if gcc else []
    if not gcc or not all(Path(lib).is_absolute() and Path(lib).exists() for lib in libs):
        pytest.skip("gcc with AddressSanitizer and UndefinedBehaviorSanitizer is not here")
    source = Path(__file__).resolve().parents[1] / "src" / "ptlite" / "runtime" / "csrc" / "budget.c"
    module = tmp_path / f"_budget{sysconfig.get_config_var('EXT_SUFFIX')}"
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-g", "-std=c11", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=undefined", f"-I{sysconfig.get_paths()['include']}", str(source), "-o",
                    str(module)], check=True, capture_output=True)
    env = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": ":".join(libs),
           "ASAN_OPTIONS": "detect_leaks=0:allocator_may_return_null=1"}  # (malloc of 2**63 bytes: NULL, as libc's)
    done = subprocess.run([sys.executable, "-c", _SANITIZED_RUN, str(tmp_path)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_a_list_repeated_past_any_model_is_refused():
    """`[x] * n` with n from the file makes Python objects, which the budget does not see: the kernel bounds it."""
    from ptlite.backends.numpy.containers import MAX_LIST_ITEMS, list_repeat, list_repeat_right
    from ptlite.errors import KernelArgumentError

    assert list_repeat([1, 2], 2) == [1, 2, 1, 2] and list_repeat_right(3, [0]) == [0, 0, 0]
    assert list_repeat([1], -1) == []
    with pytest.raises(KernelArgumentError, match="would make 2,199,023,255,552 items"):
        list_repeat([1, 2], 1 << 40)
    with pytest.raises(KernelArgumentError, match=f"at most {MAX_LIST_ITEMS:,}"):
        list_repeat_right(MAX_LIST_ITEMS + 1, [0])


@needs_budget
def test_ptlite_run_says_how_to_lift_the_limits_and_can(gru_file, tmp_path, capsys):
    from ptlite.tools.cli import main

    hostile = _with_hidden(gru_file, tmp_path, 2 ** 28)
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((2, 10, 16), np.float32))
    assert main(["run", str(hostile), str(x)]) != 0
    err = capsys.readouterr().err
    assert "Limits.max_bytes" in err and "--no-limits" in err, err
    assert main(["run", str(hostile), str(x), "--no-limits"]) != 0  # then the kernel's own check (or the machine)
    err = capsys.readouterr().err
    assert "aten::" in err and "Limits." not in err, err
