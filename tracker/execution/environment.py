"""What identifies a worker's stack (GPU, driver, CUDA, torch, FlashInfer, Python), and whether
it can run on the device asked for.

torch is imported only for a CUDA device (where the GPU is torch's to describe): versions come
from the installed distributions, the CUDA torch was built with from its ``version.py``, so a
worker that runs no torch probe never loads it. Without torch a CUDA device is described by
nvidia-smi.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import platform
import socket
import subprocess
import sys
import warnings
from dataclasses import replace
from pathlib import Path

from probes.requirements import installed
from tracker.core.records import EnvironmentInfo

# What torch built without numpy warns on import; no probe of ours needs numpy.
TORCH_WITHOUT_NUMPY = "Failed to initialize NumPy"


def quiet_torch_import() -> None:
    """Silence torch's one warning about a missing numpy, and nothing else: call before importing
    torch. It imports nothing, so it costs nothing where torch is not installed."""
    warnings.filterwarnings("ignore", message=TORCH_WITHOUT_NUMPY, category=UserWarning)


def environment(device: str) -> EnvironmentInfo:
    """What identifies this worker's stack; None where it has no such thing (no GPU, no flashinfer)."""
    cuda = device.startswith("cuda")
    gpu_name, capability = _gpu(device) if cuda else (None, None)
    return EnvironmentInfo(
        device=device,
        gpu_name=gpu_name,
        compute_capability=capability,
        driver=_nvidia_driver() if cuda else None,
        cuda=_torch_cuda(),
        torch=_distribution_version("torch"),
        flashinfer=_distribution_version("flashinfer-python", "flashinfer"),
        python=platform.python_version(),
        host=socket.gethostname(),
    )


def environment_told_by_nvidia_smi(device: str, visible_devices: str | None) -> EnvironmentInfo | None:
    """What a worker started with ``CUDA_VISIBLE_DEVICES=visible_devices`` (None: this process's)
    would report for a CUDA ``device``, told in this process by one nvidia-smi call instead of a
    worker that imports torch and opens the GPU. Name and compute capability are the driver's
    answer either way. A GPU in MIG mode is not told: nvidia-smi names the whole GPU where torch
    names the slice, and results of the whole GPU must not answer for a slice. None then, and
    when nvidia-smi cannot describe that GPU."""
    fields = nvidia_smi("name,compute_cap,driver_version,mig.mode.current", smi_index(device, visible_devices))
    if len(fields) != 4 or fields[3] == "Enabled":
        return None
    name, capability, driver, _ = fields
    return replace(environment("cpu"), device=device, gpu_name=name, compute_capability=capability, driver=driver)


def _torch_installed() -> bool:
    return installed("torch")


def _gpu(device: str) -> tuple[str | None, str | None]:
    """The GPU's name and compute capability: torch's answer where torch is installed, else nvidia-smi's."""
    if not _torch_installed():
        fields = nvidia_smi("name,compute_cap", smi_index(device))
        return (fields[0], fields[1]) if len(fields) == 2 else (None, None)
    quiet_torch_import()
    import torch

    if not torch.cuda.is_available():
        return None, None
    index = torch.device(device).index
    return torch.cuda.get_device_name(index), "{}.{}".format(*torch.cuda.get_device_capability(index))


def _torch_cuda() -> str | None:
    """The CUDA version torch was built with (``torch.version.cuda``), without importing torch."""
    if "torch" in sys.modules:
        return sys.modules["torch"].version.cuda
    if not installed("torch"):
        return None
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return None
    try:
        return built_cuda(Path(spec.origin).with_name("version.py").read_text())
    except OSError:
        return None


def built_cuda(version_file: str) -> str | None:
    """The ``cuda = "12.8"`` of torch's ``version.py`` source (None when it says None or cannot be read)."""
    try:
        tree = ast.parse(version_file)
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        targets: list[ast.expr]
        if isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        elif isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "cuda" for t in targets) and isinstance(value, ast.Constant):
            return value.value if isinstance(value.value, str) else None
    return None


def _nvidia_driver() -> str | None:
    fields = nvidia_smi("driver_version")
    return fields[0] if fields else None


def nvidia_smi(query: str, gpu: str | None = None) -> list[str]:
    """The comma-separated fields nvidia-smi reports for ``query`` on its first (or the given) GPU;
    empty when there is no nvidia-smi or no GPU."""
    selected = ["-i", gpu] if gpu is not None else []
    try:
        out = subprocess.run(
            ["nvidia-smi", *selected, f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    lines = out.strip().splitlines()
    return [field.strip() for field in lines[0].split(",")] if lines else []


def smi_index(device: str, visible_devices: str | None = None) -> str:
    """nvidia-smi's name for ``device`` (cuda or cuda:N), which counts the GPUs CUDA_VISIBLE_DEVICES
    (``visible_devices``, else this process's) shows."""
    index = int(device.partition(":")[2] or 0)
    listed = os.environ.get("CUDA_VISIBLE_DEVICES", "") if visible_devices is None else visible_devices
    visible = [gpu.strip() for gpu in listed.split(",") if gpu.strip()]
    return visible[index] if index < len(visible) else str(index)


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
    if not device.startswith("cuda"):
        return None
    if not _torch_installed():
        if not nvidia_smi("name", smi_index(device)):
            return (
                f"--device {device}: nvidia-smi sees no such GPU and torch is not installed; "
                "run on a GPU machine or pass --device cpu"
            )
        return None
    quiet_torch_import()
    import torch

    if not torch.cuda.is_available():
        return (
            f"--device {device}: no CUDA device is visible to the probe worker (torch {torch.__version__}, "
            f"CUDA {torch.version.cuda or 'none'}); run on a GPU machine or pass --device cpu"
        )
    index = torch.device(device).index
    if index is not None and index >= torch.cuda.device_count():
        return (
            f"--device {device}: the probe worker sees {torch.cuda.device_count()} CUDA device(s); "
            "pass --device cuda:0 or cuda"
        )
    return None
