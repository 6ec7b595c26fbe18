"""Correctness probes run against one checked-out revision of an attention backend."""

from probes.api import Case, Probe, ProbeContext, ProbeResult
from probes.registry import all_probes, get_probe, register
from probes.runner import CaseResult, run_case, run_probe, summarize

__all__ = [
    "Case",
    "CaseResult",
    "Probe",
    "ProbeContext",
    "ProbeResult",
    "all_probes",
    "get_probe",
    "register",
    "run_case",
    "run_probe",
    "summarize",
]
