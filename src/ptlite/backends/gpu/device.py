"""The WebGPU device the GPU backend runs on: one per process, found once, with its pipelines and a submit counter.

`wgpu` is imported here only, and only when a device is first asked for (`import ptlite` never loads it). The adapter
must be a real compute backend (Vulkan, Metal or D3D12): wgpu falls back silently to an OpenGL adapter, which has
no shader-f16 and is refused here with what was found. The device gets the adapter's own limits (one storage binding
is 128 MiB on Mesa's lavapipe) and shader-f16 where the adapter has it.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

ACCEPTED_BACKENDS = ("Vulkan", "Metal", "D3D12")
# Limits the kernels depend on, asked for at the adapter's values (the spec's defaults are far lower).
LIMITS = ("max-storage-buffer-binding-size", "max-buffer-size", "max-compute-workgroup-storage-size",
          "max-compute-invocations-per-workgroup", "max-compute-workgroup-size-x", "max-compute-workgroup-size-y",
          "max-storage-buffers-per-shader-stage", "max-compute-workgroups-per-dimension",
          "max-uniform-buffer-binding-size")
_PREFERENCE = {"DiscreteGPU": 0, "IntegratedGPU": 1, "VirtualGPU": 2, "CPU": 3}


class DeviceUnavailable(Exception):  # noqa: N818  (a reason: the backend is unavailable)
    """No usable WebGPU device here; the message says why (wgpu missing, no adapter, only an OpenGL one)."""


class GpuDevice:
    """A wgpu device and what the kernels need of it: whether f16 storage works, its limits, cached pipelines
    (by WGSL source), and the number of queue submits so far (`submits`: a forward is one)."""

    def __init__(self, wgpu: Any, adapter: Any, device: Any) -> None:
        self.wgpu = wgpu
        self.adapter = adapter
        self.device = device
        self.queue = device.queue
        self.backend_type: str = adapter.info.get("backend_type", "?")
        self.adapter_name: str = adapter.summary
        self.f16: bool = "shader-f16" in device.features
        self.limits: dict[str, int] = dict(device.limits)
        self.submits = 0
        self._pipelines: dict[str, Any] = {}
        self.lock = threading.RLock()  # one command stream at a time (staging buffers are shared per region)

    # ------------------------------------------------------------------------------------------------ buffers

    def storage_buffer(self, nbytes: int) -> Any:
        """A storage buffer of at least `nbytes` (rounded up to 4, never 0) that can be written and copied from."""
        usage = self.wgpu.BufferUsage
        return self.device.create_buffer(size=max(4, (nbytes + 3) & ~3),
                                         usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST)

    def uniform_buffer(self, data: np.ndarray) -> Any:
        """A uniform buffer holding `data` (its bytes, a multiple of 16)."""
        usage = self.wgpu.BufferUsage
        return self.device.create_buffer_with_data(data=np.ascontiguousarray(data), usage=usage.UNIFORM)

    def staging_buffer(self, nbytes: int) -> Any:
        """A buffer the host maps to read results back from (copied into by the command encoder)."""
        usage = self.wgpu.BufferUsage
        return self.device.create_buffer(size=max(4, (nbytes + 3) & ~3), usage=usage.MAP_READ | usage.COPY_DST)

    def write(self, buffer: Any, data: np.ndarray) -> None:
        """Write an array's bytes at the start of a buffer (padded to the 4-byte copy alignment)."""
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        if raw.nbytes % 4:
            raw = np.concatenate([raw, np.zeros(4 - raw.nbytes % 4, np.uint8)])
        if raw.nbytes:
            self.queue.write_buffer(buffer, 0, raw)

    # ------------------------------------------------------------------------------------------------ pipelines

    def pipeline(self, source: str) -> Any:
        """The compute pipeline of a WGSL module (entry point `main`, auto layout), compiled once per source."""
        found = self._pipelines.get(source)
        if found is None:
            module = self.device.create_shader_module(code=source)
            found = self.device.create_compute_pipeline(layout="auto", compute={"module": module,
                                                                                 "entry_point": "main"})
            self._pipelines[source] = found
        return found

    @property
    def pipelines(self) -> int:
        """How many pipelines have been compiled."""
        return len(self._pipelines)

    def submit(self, command_buffer: Any) -> None:
        """Submit one command buffer (every submit of the backend goes through here: `submits` counts them)."""
        self.submits += 1
        self.queue.submit([command_buffer])

    def describe(self) -> str:
        """One line: the adapter, its backend type, and whether f16 storage is available."""
        f16 = "shader-f16" if self.f16 else "no shader-f16 (fp32 storage only)"
        binding = self.limits.get("max-storage-buffer-binding-size", 0) >> 20
        return f"WebGPU on {self.adapter_name} [{self.backend_type}], {f16}, {binding} MiB per binding"


_DEVICE: GpuDevice | DeviceUnavailable | None = None
_LOCK = threading.Lock()


def get_device() -> GpuDevice:
    """The process's device, made at the first call (later calls return the same one, or raise the same reason)."""
    global _DEVICE
    with _LOCK:
        if _DEVICE is None:
            try:
                _DEVICE = _make_device()
            except DeviceUnavailable as exc:
                _DEVICE = exc
        if isinstance(_DEVICE, DeviceUnavailable):
            raise _DEVICE
        return _DEVICE


def _make_device() -> GpuDevice:
    try:
        import wgpu
    except ImportError as exc:
        raise DeviceUnavailable(f"the wgpu package is not installed ({exc}): pip install wgpu (or ptlite[gpu])") \
            from None
    try:
        adapters = list(wgpu.gpu.enumerate_adapters_sync())
    except Exception as exc:  # noqa: BLE001  (wgpu raises RuntimeError and others when no driver loads)
        raise DeviceUnavailable(f"wgpu found no adapter ({str(exc).splitlines()[0]})") from None
    if not adapters:
        raise DeviceUnavailable("wgpu found no adapter (no Vulkan, Metal or D3D12 driver: on Linux without a GPU, "
                                "install Mesa's lavapipe, e.g. apt-get install mesa-vulkan-drivers)")
    usable = [a for a in adapters if a.info.get("backend_type") in ACCEPTED_BACKENDS]
    if not usable:
        found = "; ".join(a.summary for a in adapters)
        raise DeviceUnavailable(f"wgpu found only adapters it cannot use for compute ({found}): ptlite needs a "
                                "Vulkan, Metal or D3D12 adapter (an OpenGL one has no shader-f16); on Linux "
                                "without a GPU install mesa-vulkan-drivers")
    usable.sort(key=lambda a: ("shader-f16" not in a.features, _PREFERENCE.get(a.info.get("adapter_type"), 9)))
    adapter = usable[0]
    features = ["shader-f16"] if "shader-f16" in adapter.features else []
    limits = {key: adapter.limits[key] for key in LIMITS if key in adapter.limits}
    try:
        device = adapter.request_device_sync(required_features=features, required_limits=limits)
    except Exception as exc:  # noqa: BLE001
        raise DeviceUnavailable(f"the adapter {adapter.summary} gave no device ({str(exc).splitlines()[0]})") \
            from None
    return GpuDevice(wgpu, adapter, device)
