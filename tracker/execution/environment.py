"""What identifies a worker's stack (GPU, driver, CUDA, torch, FlashInfer, Python), and whether
it can run on the device asked for."""

from __future__ import annotations

import subprocess
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

# What torch built without numpy warns on import; no probe of ours needs numpy.
TORCH_WITHOUT_NUMPY = "Failed to initialize NumPy"


def quiet_torch_import() -> None:
    """Silence torch's one warning about a missing numpy, and nothing else: call before importing torch."""
    warnings.filterwarnings("ignore", message=TORCH_WITHOUT_NUMPY, category=UserWarning)


def environment(device: str) -> dict[str, str | None]:
    """What identifies this worker's stack; None where it has no such thing (no GPU, no flashinfer)."""
    import platform
    import socket

    quiet_torch_import()
    import torch

    cuda = device.startswith("cuda") and torch.cuda.is_available()
    index = torch.device(device).index if cuda else None
    return {
        "device": device,
        "gpu_name": torch.cuda.get_device_name(index) if cuda else None,
        "compute_capability": "{}.{}".format(*torch.cuda.get_device_capability(index)) if cuda else None,
        "driver": _nvidia_driver() if cuda else None,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "flashinfer": _distribution_version("flashinfer-python", "flashinfer"),
        "python": platform.python_version(),
        "host": socket.gethostname(),
    }


def _nvidia_driver() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[0] if out.strip() else None


def _distribution_version(*names: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    for name in names:
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return None


def device_error(device: str) -> str | None:
    """Why this worker cannot run on ``device``, checked before anything runs or is stored."""
    quiet_torch_import()
    import torch

    if not device.startswith("cuda"):
        return None
    if not torch.cuda.is_available():
        return (
            f"--device {device}: no CUDA device is visible to the probe worker (torch {torch.__version__}, "
            f"CUDA {torch.version.cuda or 'none'}); run on a GPU machine or pass --device cpu"
        )
    index = torch.device(device).index
    if index is not None and index >= torch.cuda.device_count():
        return f"--device {device}: the probe worker sees {torch.cuda.device_count()} CUDA device(s); pass --device cuda:0 or cuda"
    return None


