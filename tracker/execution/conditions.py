"""What moves timings on the machine a metric probe runs on, read as it ran: the CPU's frequency
governor, and for a GPU its clocks (and their maximum), power limit, temperature and the reasons
its clocks are held down.

They are stored with each run of a metric probe (``runs.conditions``), not in the environment's
fingerprint: they change from run to run on one machine, and a result measured at other clocks
is still a result of the same stack. They explain a series' noise; they key no reuse.
"""

from __future__ import annotations

from pathlib import Path

from tracker.execution.environment import nvidia_smi, smi_index

GOVERNOR = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
GPU_FIELDS = {
    "gpu_sm_clock_mhz": "clocks.sm",
    "gpu_memory_clock_mhz": "clocks.mem",
    "gpu_max_sm_clock_mhz": "clocks.max.sm",
    "gpu_power_limit_w": "power.limit",
    "gpu_temperature_c": "temperature.gpu",
    "gpu_throttle_reasons": "clocks_throttle_reasons.active",
}


def conditions(device: str) -> dict[str, str]:
    """What is readable here now: nothing for a field the OS or nvidia-smi does not tell."""
    found: dict[str, str] = {}
    try:
        found["cpu_governor"] = GOVERNOR.read_text().strip()
    except OSError:
        pass
    if device.startswith("cuda"):
        values = nvidia_smi(",".join(GPU_FIELDS.values()), smi_index(device, None))
        found |= {name: value for name, value in zip(GPU_FIELDS, values) if value and "N/A" not in value}
    return found
