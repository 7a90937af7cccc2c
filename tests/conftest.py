"""Shared test fixtures and helpers."""

from __future__ import annotations

import os

import numpy as np
import pytest
from kernel_backend import names as kernel_backends
from kernel_backend import select as select_kernel_backend

from ptlite.backends import BackendUnavailable
from ptlite.backends.numpy import _parallel

# ptlite's own kernel threads are off by default (see _parallel); the tests run them on 2 threads so that the
# multi-threaded code paths are checked too.
_parallel.set_num_threads(2)


def assert_close(actual, expected, *, what: str, rtol: float = 1e-4) -> None:
    """max |actual - expected| <= rtol * max(|expected|), with a message naming what was compared."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != reference {expected.shape}"
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    diff = float(np.max(np.abs(actual.astype(np.float64) - expected.astype(np.float64)))) if expected.size else 0.0
    assert diff <= rtol * max(scale, 1e-30), (
        f"{what}: max |diff| = {diff:.3g}, max |reference| = {scale:.3g}, ratio {diff / max(scale, 1e-30):.3g} "
        f"> tolerance {rtol:g}")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture(autouse=True)
def kernel_backend(request: pytest.FixtureRequest):
    """The backend the kernel tests (tests/kernels) run on; each of them runs once per backend (see
    pytest_generate_tests). Other tests run on whatever they load."""
    name = getattr(request, "param", None)
    if name is None:
        yield None
        return
    previous = select_kernel_backend(name)
    try:
        yield name
    finally:
        select_kernel_backend(previous)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kernel_backend" in metafunc.fixturenames and metafunc.definition.path.parent.name == "kernels":
        metafunc.parametrize("kernel_backend", kernel_backends(), indirect=True)


# ------------------------------------------------------------------------------------------------ native backend
# Its tests run only where its library was built (skipped, saying why, elsewhere), once per instruction set this
# CPU supports (the `isa` fixture).

def _library():
    from ptlite.backends.native import library

    try:
        return library()
    except BackendUnavailable as exc:
        pytest.skip(f"the native backend is not available: {exc}")


@pytest.fixture
def lib():
    return _library()


def _supported() -> list[str]:
    try:
        from ptlite.backends.native import library

        return [name for name, ok, *_ in library().isas() if ok]
    except BackendUnavailable:
        return ["unavailable"]


@pytest.fixture(params=_supported())
def isa(request: pytest.FixtureRequest, lib):
    """Each instruction set's kernels in turn (the best one restored after)."""
    best = lib.isa()
    lib.select_isa(request.param)
    try:
        yield request.param
    finally:
        lib.select_isa(best)

# ------------------------------------------------------------------------------------------------ GPU backend
# tests/backends/gpu: the backend in fp32 and fp16 storage, skipped (saying why) where no usable WebGPU adapter
# exists here, or failing instead where PTLITE_REQUIRE_GPU=1 says one must (.ci/run). (Here, not in a conftest of
# their own: a second conftest module would shadow this one's `from conftest import ...`.)

def _gpu_backend():
    _load_torch_llvm_first()
    from ptlite.backends import BackendUnavailable
    from ptlite.backends.gpu import create

    try:
        return create("fp32")
    except BackendUnavailable as exc:
        if os.environ.get("PTLITE_REQUIRE_GPU") == "1":
            pytest.fail(f"PTLITE_REQUIRE_GPU=1 but the GPU backend is unavailable: {exc}")
        pytest.skip(f"the GPU backend is unavailable here: {exc}")


def _load_torch_llvm_first() -> None:
    """Import triton (torch's compiler, which bundles its own LLVM and which torch.export imports while capturing)
    before the Vulkan driver loads Mesa's LLVM: the other order crashes the process (a segmentation fault in
    triton's import of triton._C.libtriton) the first time a later test captures a model."""
    try:
        import triton  # noqa: F401
    except ImportError:
        pass


@pytest.fixture(scope="session")
def gpu():
    """The GPU backend, fp32 storage."""
    return _gpu_backend()


@pytest.fixture(scope="session")
def gpu16(gpu):
    """The GPU backend with f16 storage (f32 arithmetic); skipped where the adapter has no shader-f16."""
    from ptlite.backends.gpu import GpuBackend

    if not gpu.device.f16:
        pytest.skip(f"{gpu.device.adapter_name} has no shader-f16")
    return GpuBackend(gpu.device, "fp16")


@pytest.fixture(params=["fp32", "fp16"])
def any_gpu(request):
    """Each storage precision in turn: (backend, precision)."""
    backend = request.getfixturevalue("gpu" if request.param == "fp32" else "gpu16")
    return backend, request.param
