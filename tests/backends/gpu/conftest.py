"""Fixtures of the GPU backend's tests: the backend in fp32 and fp16 storage, skipped (saying why) where no usable
WebGPU adapter exists here, or failing instead where PTLITE_REQUIRE_GPU=1 says one must."""

from __future__ import annotations

import os

import pytest


def _backend():
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
    return _backend()


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
