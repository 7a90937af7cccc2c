"""The C kernels outside Python: csrc/selftest.c (every instruction set the CPU supports against naive float64
loops, and the parameter checks on hostile values) built three ways, plus the Python binding under the sanitizers:
- with AddressSanitizer and UndefinedBehaviorSanitizer, the AVX-512 table included (built for AVX2 at its own
  width when the CPU has no AVX-512: the same code, another instruction selection);
- with ThreadSanitizer (the thread pool's runs, back to back and after its workers have gone to sleep);
- for aarch64 (Debian's gcc-aarch64-linux-gnu) and run under qemu-aarch64 (qemu-user): the NEON build;
- the extension itself with the sanitizers, running the native kernel, validation, executor and packed-operator
  tests and the fuzz test on a native-lowered CNN (hostile plans reaching C).
CI installs the cross compiler and qemu (.ci/run); elsewhere those tests are skipped, saying what is missing."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CSRC = ROOT / "src" / "ptlite" / "backends" / "native" / "csrc"
KERNELS = ["conv.c", "winograd.c", "rows.c", "attention.c", "copy.c", "broadcast.c", "matmul.c", "qgemm.c",
           "qdepthwise.c", "qelementwise.c", "qpool.c", "recurrent.c", "params.c", "threads.c", "isa.c",
           "isa_generic.c", "isa_avx2.c", "isa_avx512.c"]
FLAGS = ["-std=c11", "-ffp-contract=fast", "-fno-math-errno", "-pthread", "-Wall", "-Wno-psabi", f"-I{CSRC}"]
# -O0: the sanitizers check every access the source makes (an optimizer may remove some), and the build is 4-7x
# faster than at -O1 (isa_avx512.c alone: 46 s against 185 s under ASan and UBSan), the run still seconds
SANITIZE = ["-O0", "-g", "-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"]
X86 = platform.machine() in ("x86_64", "AMD64")


def _need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (Debian: gcc-aarch64-linux-gnu, qemu-user; .ci/run installs "
                    "them)")


def _build(compiler: str, out: Path, flags: list[str], sources: list[str], link: list[str] = ()) -> None:
    """Compile each source on its own (as many at once as there are cores), then link them into `out`."""
    objects = out.parent / f"{out.name}.objects"
    objects.mkdir(exist_ok=True)

    def compile_one(source: str) -> str:
        obj = objects / (Path(source).stem + ".o")
        done = subprocess.run([compiler, *flags, "-c", str(CSRC / source), "-o", str(obj)], capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return str(obj)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        built = list(pool.map(compile_one, sources))
    done = subprocess.run([compiler, *flags, *link, *built, "-lm", "-o", str(out)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr


def _run(command: list[str], **env: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env={**os.environ, **env})
    assert done.returncode == 0, f"{' '.join(command[:3])}: exit {done.returncode}\n{done.stdout[-3000:]}" \
                                 f"\n{done.stderr[-3000:]}"
    return done.stdout


def test_selftest_under_address_and_undefined_behaviour_sanitizers(tmp_path):
    _need("gcc")
    exe = tmp_path / "selftest"
    _build("gcc", exe, [*SANITIZE, *FLAGS, *(["-DPL_AVX512_AS_AVX2"] if X86 else [])], ["selftest.c", *KERNELS])
    out = _run([str(exe)], ASAN_OPTIONS="detect_leaks=1")
    assert out.strip().splitlines()[-1].startswith("ok: 3 instruction set(s)" if X86 else "ok:"), out


def test_selftest_under_thread_sanitizer(tmp_path):
    _need("gcc")
    exe = tmp_path / "selftest-tsan"
    _build("gcc", exe, ["-O0", "-g", "-fsanitize=thread", *FLAGS, *(["-DPL_AVX512_AS_AVX2"] if X86 else [])],
           ["selftest.c", *KERNELS])
    out = _run([str(exe)], TSAN_OPTIONS="halt_on_error=1")
    assert out.strip().splitlines()[-1].startswith("ok:"), out


def test_selftest_of_the_neon_build_under_qemu(tmp_path):
    _need("aarch64-linux-gnu-gcc", "qemu-aarch64")
    exe = tmp_path / "selftest-aarch64"
    _build("aarch64-linux-gnu-gcc", exe, ["-O2", "-static", *FLAGS], ["selftest.c", *KERNELS])
    out = _run(["qemu-aarch64", str(exe)])
    assert out.strip().splitlines()[-1].startswith("ok: 1 instruction set(s)"), out


@pytest.mark.slow
def test_the_binding_under_the_sanitizers(tmp_path):
    """The extension built with the sanitizers (the AVX-512 table at its width on AVX2), loaded by Python with the
    sanitizer runtimes preloaded, runs the native tests: a bad offset anywhere in C fails them."""
    _need("gcc")
    package = tmp_path / "site" / "ptlite"
    shutil.copytree(ROOT / "src" / "ptlite", package, ignore=shutil.ignore_patterns("*.so", "__pycache__", "csrc"))
    extension = package / "backends" / "native" / ("_native" + sysconfig.get_config_var("EXT_SUFFIX"))
    _build("gcc", extension, [*SANITIZE, *FLAGS, "-fPIC", f"-I{sysconfig.get_paths()['include']}",
                              *(["-DPL_AVX512_AS_AVX2"] if X86 else [])], ["module.c", "plan.c", *KERNELS],
           link=["-shared"])
    runtimes = " ".join(subprocess.run(["gcc", f"-print-file-name={lib}"], capture_output=True, text=True,
                                       check=True).stdout.strip() for lib in ("libasan.so", "libubsan.so"))
    tests = [str(ROOT / "tests" / p) for p in ("backends/native/test_kernels.py", "backends/native/test_validation.py",
                                                "backends/native/test_math.py", "backends/native/test_executor.py",
                                                "backends/native/test_recurrent.py",
                                                "backends/native/test_quantized.py", "kernels/test_packed.py")]
    fuzz = [str(ROOT / "tests" / "test_format.py") + f"::test_mutated_programs_fail_with_ptlite_errors_only[{which}]"
            for which in ("cnn", "sequence")]
    out = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests, *fuzz],
               LD_PRELOAD=runtimes, ASAN_OPTIONS="detect_leaks=0", UBSAN_OPTIONS="print_stacktrace=1",
               PYTHONPATH=str(package.parent))
    assert " passed" in out and "failed" not in out, out[-2000:]
