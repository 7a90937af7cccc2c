"""The build of ptlite's C extensions, as part of `pip install`: the native kernels (src/ptlite/backends/native/csrc),
the guarded map of model files (src/ptlite/format/csrc/mapped.c) and the memory budget of a call
(src/ptlite/runtime/csrc/budget.c).

All are optional: when the machine has no C compiler, or a build fails, the install still succeeds without it; the
reason is kept in the package (`_build_failure.txt` next to where the extension would be). Without the kernels ptlite
runs on its NumPy backend, and `ptlite.backends()` says why; without the guarded map it reads model files into memory
instead of mapping them; without the budget a call's memory is not capped (docs/reliability.md). Everything else
about the package is in pyproject.toml.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NATIVE = "ptlite.backends.native._native"
CSRC = os.path.join("src", "ptlite", "backends", "native", "csrc")
MAPPED = "ptlite.format._mapped"
BUDGET = "ptlite.runtime._budget"
FAILURE_FILE = "_build_failure.txt"


class OptionalBuildExt(build_ext):
    """build_ext that records a failed build of the native kernels instead of failing the install."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler at all (distutils raises before build_extension)
            for ext in self.extensions:
                self._record(ext, exc)

    def build_extension(self, ext: Extension) -> None:
        serial = self.compiler.compile
        self.compiler.compile = lambda sources, *args, **kwargs: _in_parallel(serial, sources, *args, **kwargs)
        try:
            super().build_extension(ext)
        except Exception as exc:
            self._record(ext, exc)
        else:
            stale = self._failure_path(ext)
            if os.path.exists(stale):
                os.remove(stale)
        finally:
            self.compiler.compile = serial

    def _failure_path(self, ext: Extension) -> str:
        return os.path.join(os.path.dirname(self.get_ext_fullpath(ext.name)), FAILURE_FILE)

    def _record(self, ext: Extension, exc: BaseException) -> None:
        reason = f"{type(exc).__name__}: {exc}".strip()
        what = "the native kernels were not built" if ext.name == NATIVE else f"{ext.name} was not built"
        then = {NATIVE: "ptlite will run on NumPy", MAPPED: "ptlite will read model files into memory",
                BUDGET: "ptlite will not cap the memory of a call"}.get(ext.name, "")
        print(f"ptlite: {what} ({reason}); {then}", file=sys.stderr)
        path = self._failure_path(ext)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(reason.splitlines()[0][:500] + "\n")


def _in_parallel(compile, sources: list[str], *args, **kwargs) -> list[str]:  # noqa: ANN001
    """The compiler's compile, one source per call, as many at once as there are cores (the instruction-set files
    take most of the time, one each); the object files in the order of the sources."""
    if len(sources) < 2:
        return compile(sources, *args, **kwargs)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        objects = pool.map(lambda source: compile([source], *args, **kwargs), sources)
        return [obj for objs in objects for obj in objs]


def _compile_args() -> list[str]:
    if os.name == "nt" and "gcc" not in os.environ.get("CC", ""):
        return ["/O2"]  # MSVC: the GNU vector extensions will not build; the failure is recorded
    return ["-O3", "-std=c11", "-ffp-contract=fast", "-fno-math-errno", "-pthread", "-Wall",
            *os.environ.get("PTLITE_NATIVE_CFLAGS", "").split()]


def _link_args() -> list[str]:
    return [] if os.name == "nt" else ["-pthread", *os.environ.get("PTLITE_NATIVE_LDFLAGS", "").split()]


SOURCES = ["module.c", "plan.c", "conv.c", "winograd.c", "rows.c", "attention.c", "copy.c", "broadcast.c",
           "matmul.c", "qgemm.c", "qdepthwise.c", "qelementwise.c", "qpool.c", "recurrent.c", "params.c", "threads.c",
           "isa.c", "isa_generic.c", "isa_avx2.c", "isa_avx512.c"]

setup(
    ext_modules=[Extension(NATIVE, sources=[os.path.join(CSRC, s) for s in SOURCES],
                           depends=[os.path.join(CSRC, h) for h in ("native.h", "plan.h", "kernels.inc")],
                           extra_compile_args=_compile_args(), extra_link_args=_link_args()),
                 Extension(MAPPED, sources=[os.path.join("src", "ptlite", "format", "csrc", "mapped.c")],
                           extra_compile_args=_compile_args()),
                 Extension(BUDGET, sources=[os.path.join("src", "ptlite", "runtime", "csrc", "budget.c")],
                           extra_compile_args=_compile_args())],
    cmdclass={"build_ext": OptionalBuildExt},
)
