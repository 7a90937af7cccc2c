"""How many CPUs this process may use: the default thread count of ptlite's kernels (`ptlite.get_num_threads`).

`os.cpu_count()` is the host's count. A process may use fewer: its affinity mask (`taskset`, `docker --cpuset-cpus`,
a batch scheduler) names the CPUs it may run on, and its cgroup's CPU quota (`docker --cpus=2`, Kubernetes CPU
limits, systemd's CPUQuota) caps the CPU time it gets per period, which more threads than the quota only share while
being descheduled. The count here is the smaller of the two: threads past it would wait for a CPU.
"""

from __future__ import annotations

import os

# Where the cgroup file systems are mounted, and the file naming this process's cgroups (module constants, so that
# tests can point them at a folder of their own).
CGROUP_ROOT = "/sys/fs/cgroup"
PROC_CGROUP = "/proc/self/cgroup"


def default_num_threads() -> int:
    """The CPUs this process may use: those of its affinity mask (`os.process_cpu_count()` on Python 3.13+, which
    also honours `-X cpu_count`; else `os.sched_getaffinity(0)` where the system has it; else `os.cpu_count()`),
    capped by its cgroup CPU quota, rounded up (a quota of 1.5 CPUs: 2); at least 1."""
    quota = cgroup_cpu_quota()
    return max(1, min(affinity_cpus(), quota) if quota is not None else affinity_cpus())


def affinity_cpus() -> int:
    """The CPUs this process may be scheduled on (at least 1)."""
    process_cpu_count = getattr(os, "process_cpu_count", None)  # Python 3.13+
    if process_cpu_count is not None:
        n = process_cpu_count()
    else:
        try:
            n = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # macOS, Windows: no affinity masks
            n = os.cpu_count()
    return max(1, n or 1)


def cgroup_cpu_quota() -> int | None:
    """ceil(quota / period) of the smallest CPU quota on this process's cgroup and the cgroups above it (cgroup v2's
    `cpu.max`, "QUOTA PERIOD" or "max PERIOD"; cgroup v1's `cpu.cfs_quota_us` / `cpu.cfs_period_us`), or None where
    there is none, or none can be read (not Linux, no cgroup file system mounted). A file that cannot be read or
    parsed is ignored."""
    quotas = []
    for controllers, path in _cgroups():
        if controllers == "":  # cgroup v2: the one hierarchy
            quotas += [q for d in _folders(CGROUP_ROOT, path) if (q := _v2_quota(d)) is not None]
        elif "cpu" in controllers.split(","):  # cgroup v1: the hierarchy the cpu controller is mounted on
            mounts = [os.path.join(CGROUP_ROOT, controllers), os.path.join(CGROUP_ROOT, "cpu")]
            mount = next((m for m in mounts if os.path.isdir(m)), None)
            if mount is not None:
                quotas += [q for d in _folders(mount, path) if (q := _v1_quota(d)) is not None]
    return min(quotas) if quotas else None


def _cgroups() -> list[tuple[str, str]]:
    """(controllers, path) of this process's cgroups ("" for cgroup v2's); where the file cannot be read, both
    hierarchies' roots (a container's own cgroup is usually mounted as the root)."""
    text = _read_small(PROC_CGROUP)
    if text is None:
        return [("", "/"), ("cpu", "/")]
    found = []
    for line in text.splitlines():
        parts = line.split(":", 2)  # "0::/user.slice/..." or "4:cpu,cpuacct:/docker/..."
        if len(parts) == 3 and parts[2].startswith("/"):
            found.append((parts[1], parts[2]))
    return found


def _folders(mount: str, path: str) -> list[str]:
    """The cgroup folders of `path` under `mount` and those above it up to the mount, which exist. A path outside
    the mount (a cgroup namespace's "/.."), or one the mount does not show (a container sees its own cgroup as the
    root), leaves the mount's own folder and what is found of the path."""
    root = os.path.normpath(mount)
    folder = os.path.normpath(os.path.join(root, path.lstrip("/")))
    if os.path.commonpath([root, folder]) != root:
        folder = root
    found = []
    while True:
        if os.path.isdir(folder):
            found.append(folder)
        if folder == root:
            return found
        folder = os.path.dirname(folder)


def _v2_quota(folder: str) -> int | None:
    text = _read_small(os.path.join(folder, "cpu.max"))
    parts = text.split() if text is not None else []
    if len(parts) != 2 or parts[0] == "max":
        return None
    return _ceil_ratio(parts[0], parts[1])


def _v1_quota(folder: str) -> int | None:
    quota = _read_small(os.path.join(folder, "cpu.cfs_quota_us"))
    period = _read_small(os.path.join(folder, "cpu.cfs_period_us"))
    if quota is None or period is None:
        return None
    return _ceil_ratio(quota.strip(), period.strip())  # a quota of -1: none (refused below, as negative)


def _ceil_ratio(quota: str, period: str) -> int | None:
    """ceil(quota / period) for two positive decimal integers, else None."""
    if not (quota.isdigit() and period.isdigit()) or int(quota) <= 0 or int(period) <= 0:
        return None
    return max(1, -(-int(quota) // int(period)))  # in integers: exact for any size


def _read_small(path: str) -> str | None:
    """The first few KiB of a text file, or None where it cannot be read."""
    try:
        with open(path, encoding="ascii") as f:
            return f.read(4096)
    except (OSError, ValueError):  # ValueError: UnicodeDecodeError
        return None
