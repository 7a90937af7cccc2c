"""The default thread count is the CPUs this process may use (ptlite.backends.cpus): its affinity mask, capped by its
cgroup's CPU quota (v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us, rounded up), at least 1; unreadable or
malformed cgroup files are ignored. ptlite.get_num_threads and the native library start from it; set_num_threads sets
both and BLAS (threadpoolctl, a dependency)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ptlite
from ptlite.backends import cpus

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A fake cgroup root and /proc/self/cgroup, and an affinity mask of 8 CPUs."""
    root = tmp_path / "cgroup"
    root.mkdir()
    proc = tmp_path / "proc_self_cgroup"
    monkeypatch.setattr(cpus, "CGROUP_ROOT", str(root))
    monkeypatch.setattr(cpus, "PROC_CGROUP", str(proc))
    set_affinity(monkeypatch, 8)
    return root, proc


def set_affinity(monkeypatch, n: int) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(n)), raising=False)
    monkeypatch.setattr(os, "process_cpu_count", lambda: n, raising=False)


def write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())


@pytest.mark.parametrize("cpu_max, expected", [
    ("200000 100000\n", 2),
    ("150000 100000\n", 2),  # 1.5 CPUs: rounded up
    ("50000 100000\n", 1),  # half a CPU: at least 1
    ("1600000 100000\n", 8),  # a quota above the affinity: the affinity
    ("max 100000\n", 8),  # no quota
])
def test_cgroup_v2_quota_caps_the_affinity(fake, cpu_max, expected):
    root, proc = fake
    write(proc, "0::/\n")
    write(root / "cpu.max", cpu_max)
    assert cpus.default_num_threads() == expected


def test_cgroup_v2_the_smallest_quota_on_the_way_up_counts(fake):
    root, proc = fake
    write(proc, "0::/kubepods/pod1/container\n")
    write(root / "kubepods/pod1/container/cpu.max", "400000 100000")
    write(root / "kubepods/pod1/cpu.max", "300000 100000")
    write(root / "kubepods/cpu.max", "max 100000")
    assert cpus.cgroup_cpu_quota() == 3 and cpus.default_num_threads() == 3


def test_cgroup_v2_a_container_sees_its_own_cgroup_as_the_root(fake):
    root, proc = fake
    write(proc, "0::/docker/abc123\n")  # a path the container's mount does not show
    write(root / "cpu.max", "100000 100000")
    assert cpus.default_num_threads() == 1


def test_a_path_outside_the_mount_reads_the_mount_only(fake, tmp_path):
    root, proc = fake
    write(proc, "0::/../../outside\n")
    write(tmp_path / "outside" / "cpu.max", "100000 100000")  # never read
    write(root / "cpu.max", "200000 100000")
    assert cpus.default_num_threads() == 2


@pytest.mark.parametrize("quota, period, expected", [
    ("50000\n", "100000\n", 1),
    ("250000\n", "100000\n", 3),
    ("-1\n", "100000\n", 8),  # no quota
])
def test_cgroup_v1_quota_and_period(fake, quota, period, expected):
    root, proc = fake
    write(proc, "5:memory:/x\n3:cpu,cpuacct:/docker/abc\n1:name=systemd:/\n")
    write(root / "cpu,cpuacct/docker/abc/cpu.cfs_quota_us", quota)
    write(root / "cpu,cpuacct/docker/abc/cpu.cfs_period_us", period)
    assert cpus.default_num_threads() == expected


def test_cgroup_v1_mounted_as_cpu(fake):
    root, proc = fake
    write(proc, "3:cpuacct,cpu:/\n")
    write(root / "cpu/cpu.cfs_quota_us", "200000")
    write(root / "cpu/cpu.cfs_period_us", "100000")
    assert cpus.default_num_threads() == 2


def test_without_proc_self_cgroup_the_roots_are_read(fake):
    root, _ = fake  # the proc file does not exist
    write(root / "cpu.max", "300000 100000")
    assert cpus.default_num_threads() == 3


@pytest.mark.parametrize("content", [
    "", "garbage", "100000", "200000 100000 7", "-5 100000", "0 100000", "200000 0", "1e5 100000", "2.5 1",
    "200000 -100000", "max", b"\xff\xfe 100000", "２００ １００",
])
def test_malformed_cgroup_v2_files_are_ignored(fake, content):
    root, proc = fake
    write(proc, "0::/a\n")
    write(root / "a/cpu.max", content)
    assert cpus.cgroup_cpu_quota() is None
    assert cpus.default_num_threads() == 8


@pytest.mark.parametrize("quota, period", [
    ("", "100000"), ("garbage", "100000"), ("1e5", "100000"), ("2.5", "1"), ("0", "100000"), ("max", "100000"),
    (b"\xff", "100000"), ("200000", ""), ("200000", "0"), ("200000", "-100000"), ("200000", "x"), ("200000", None),
])
def test_malformed_cgroup_v1_files_are_ignored(fake, quota, period):
    root, proc = fake
    write(proc, "3:cpu:/\n")
    write(root / "cpu/cpu.cfs_quota_us", quota)
    if period is not None:  # None: the period file is missing
        write(root / "cpu/cpu.cfs_period_us", period)
    assert cpus.cgroup_cpu_quota() is None
    assert cpus.default_num_threads() == 8


def test_unreadable_cgroup_files_and_a_malformed_proc_file_are_ignored(fake):
    root, proc = fake
    write(proc, "nonsense\n::\n0:cpu\n\x00\n0::relative\n")
    (root / "cpu.max").mkdir()  # a folder where the file should be: open fails
    assert cpus.cgroup_cpu_quota() is None and cpus.default_num_threads() == 8
    write(proc, b"\xff\xff\n")
    assert cpus.default_num_threads() == 8


def test_affinity_without_process_cpu_count(monkeypatch):
    monkeypatch.delattr(os, "process_cpu_count", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 2, 5}, raising=False)
    assert cpus.affinity_cpus() == 3
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)  # macOS
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert cpus.affinity_cpus() == 1
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert cpus.affinity_cpus() == 6


def test_get_num_threads_defaults_to_the_usable_cpus(monkeypatch):
    monkeypatch.setattr(ptlite, "_num_threads", None)
    monkeypatch.setattr(cpus, "default_num_threads", lambda: 3)
    assert ptlite.get_num_threads() == 3


@pytest.fixture
def restore_threads():
    before = ptlite.get_num_threads()
    yield
    ptlite.set_num_threads(before)


def test_set_num_threads_sets_the_native_pool_and_blas(restore_threads):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    ptlite.set_num_threads(1)
    assert ptlite.get_num_threads() == 1
    native = next(info for info in ptlite.backends() if info.name == "native")
    if native.available:
        assert ptlite.backends.native.library().get_num_threads() == 1
    blas = [info["num_threads"] for info in threadpoolctl.threadpool_info() if info.get("user_api") == "blas"]
    assert all(n == 1 for n in blas), blas
    with pytest.raises(ValueError, match="at least 1"):
        ptlite.set_num_threads(0)
    assert ptlite.get_num_threads() == 1


def test_set_num_threads_without_threadpoolctl_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # import fails
    before = ptlite.get_num_threads()
    with pytest.raises(ImportError, match="pip install threadpoolctl"):
        ptlite.set_num_threads(before + 1)
    assert ptlite.get_num_threads() == before  # nothing half-set


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no affinity masks here")
def test_a_process_pinned_to_one_cpu_starts_with_one_thread_everywhere():
    code = ("import os; os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]}); import ptlite; "
            "from ptlite.backends import native; "
            "n = next(i for i in ptlite.backends() if i.name == 'native'); "
            "print(ptlite.get_num_threads(), native.library().get_num_threads() if n.available else 1)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1"], done.stdout


def test_threadpoolctl_is_a_dependency():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(d.split(">")[0].split("=")[0].strip() == "threadpoolctl" for d in project["dependencies"])
