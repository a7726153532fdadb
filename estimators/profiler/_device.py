"""The device the profiler runs on: which one, what it is called, what it can do."""

from __future__ import annotations

import platform
import subprocess
from dataclasses import dataclass
from typing import Any

__all__ = ["DeviceInfo", "ProfilerError", "describe_device", "import_torch", "sku_for_gpu_name"]


class ProfilerError(ValueError):
    """The profiler cannot run as asked (no torch, no such device, no fp8); one clear line."""


def import_torch() -> Any:
    """torch, or ProfilerError saying how to install it (the optional extra)."""
    try:
        import torch
    except ImportError:
        raise ProfilerError(
            "llmcap profile run needs torch: pip install 'llmcap[profile]' (or a torch build "
            "for your CUDA version from pytorch.org)"
        ) from None
    return torch


# (substrings of the lower-cased GPU name, catalog SKU id); the first match wins
_GPU_NAME_SKUS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("h200",), "h200"),
    (("h100", "pcie"), "h100-pcie"),
    (("h100",), "h100-sxm"),
    (("gb200",), "gb200"),  # before b200: "NVIDIA GB200" holds "b200"
    (("b300",), "b300"),
    (("b200",), "b200"),
    (("a100", "40gb"), "a100-40gb"),
    (("a100",), "a100-80gb"),
    (("l40s",), "l40s"),
    (("a10g",), "a10g"),
    (("a40",), "a40"),
    (("l4",), "l4"),
)


def sku_for_gpu_name(name: str) -> str | None:
    """The catalog SKU id of a GPU as the driver names it ("NVIDIA H100 80GB HBM3" ->
    "h100-sxm"), or None when the catalog has no such GPU."""
    low = name.lower()
    for parts, sku in _GPU_NAME_SKUS:
        if all(p in low for p in parts):
            return sku
    return None


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """Where the measurements were taken (becomes the tables' meta)."""

    device: str  # "cuda" or "cpu"
    name: str
    driver: str | None
    cuda: str | None
    torch: str
    num_gpus: int
    fp8_gemm: bool


def _nvidia_driver() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def describe_device(torch: Any, device: str | None) -> DeviceInfo:
    """The device to profile on: `device` ("cuda", "cpu") or None for CUDA when present."""
    has_cuda = bool(torch.cuda.is_available())
    if device is None:
        device = "cuda" if has_cuda else "cpu"
    if device == "cuda" and not has_cuda:
        raise ProfilerError(
            "--device cuda: torch sees no CUDA device (a CPU-only torch build, or no GPU); "
            "use --device cpu for a (slow) CPU run"
        )
    if device == "cpu":
        return DeviceInfo("cpu", _cpu_name(), None, None, torch.__version__, 0, False)
    major, minor = torch.cuda.get_device_capability(0)
    fp8 = (major, minor) >= (8, 9) and hasattr(torch, "_scaled_mm")
    return DeviceInfo(
        "cuda",
        torch.cuda.get_device_name(0),
        _nvidia_driver(),
        torch.version.cuda,
        torch.__version__,
        torch.cuda.device_count(),
        fp8,
    )
