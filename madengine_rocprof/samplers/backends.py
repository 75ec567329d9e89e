"""GPU telemetry backends: NVML (NVIDIA) and amdsmi (AMD). Each reads watts and VRAM bytes per device."""
from __future__ import annotations

import importlib
from typing import Protocol

MIB = 1024 * 1024


class NoBackend(Exception):
    """No telemetry library or no GPU: the sampler reports it and writes no rows."""


class Backend(Protocol):
    name: str

    def device_count(self) -> int: ...

    def power_watts(self, index: int) -> float: ...

    def vram_bytes(self, index: int) -> tuple[int, int]:
        """(used, total) in bytes."""

    def close(self) -> None: ...


class NvmlBackend:
    name = "nvml"

    def __init__(self) -> None:
        self._nvml = importlib.import_module("pynvml")
        self._nvml.nvmlInit()
        self._handles = [self._nvml.nvmlDeviceGetHandleByIndex(i) for i in range(self._nvml.nvmlDeviceGetCount())]

    def device_count(self) -> int:
        return len(self._handles)

    def power_watts(self, index: int) -> float:
        # NVML reports milliwatts.
        return self._nvml.nvmlDeviceGetPowerUsage(self._handles[index]) / 1000.0

    def vram_bytes(self, index: int) -> tuple[int, int]:
        info = self._nvml.nvmlDeviceGetMemoryInfo(self._handles[index])
        return int(info.used), int(info.total)

    def close(self) -> None:
        self._nvml.nvmlShutdown()


class AmdSmiBackend:
    name = "amdsmi"

    def __init__(self) -> None:
        self._smi = importlib.import_module("amdsmi")
        self._smi.amdsmi_init()
        self._handles = list(self._smi.amdsmi_get_processor_handles())

    def device_count(self) -> int:
        return len(self._handles)

    def power_watts(self, index: int) -> float:
        # amdsmi already reports watts (madengine's upstream sampler wrongly divides by 1000).
        info = self._smi.amdsmi_get_power_info(self._handles[index])
        for key in ("current_socket_power", "average_socket_power", "socket_power"):
            value = info.get(key)
            if isinstance(value, (int, float)):
                return float(value)
        raise NoBackend(f"amdsmi_get_power_info gave no power reading: {sorted(info)}")

    def vram_bytes(self, index: int) -> tuple[int, int]:
        # amdsmi_get_gpu_vram_usage reports MiB.
        usage = self._smi.amdsmi_get_gpu_vram_usage(self._handles[index])
        return int(usage["vram_used"]) * MIB, int(usage["vram_total"]) * MIB

    def close(self) -> None:
        self._smi.amdsmi_shut_down()


def open_backend(prefer: str = "auto") -> Backend:
    """The first backend that imports and sees at least one GPU. `prefer`: auto, nvml or amdsmi."""
    orders: dict[str, list[type[Backend]]] = {
        "auto": [AmdSmiBackend, NvmlBackend], "amdsmi": [AmdSmiBackend], "nvml": [NvmlBackend]
    }
    order = orders.get(prefer)
    if order is None:
        raise NoBackend(f"unknown backend '{prefer}' (known: auto, nvml, amdsmi)")
    reasons = []
    for cls in order:
        try:
            backend = cls()
        except Exception as err:  # ImportError, library init failures (no driver)
            reasons.append(f"{cls.name}: {type(err).__name__}: {err}")
            continue
        if backend.device_count() > 0:
            return backend
        reasons.append(f"{cls.name}: no GPU found")
        backend.close()
    raise NoBackend("no GPU telemetry: " + "; ".join(reasons))
