"""What every backend's GPU consequence check shares: when it can run, the scenario, the graph
around the kernel call, and the verdict against the fp32 reference.

A backend's check is a :class:`Kernel`: what the captured call reads (``extract``), the kernel's
arguments built from it on the CPU (``arguments``, which tests can check without a GPU), and the
call under a CUDA graph (``run``): captured with the metadata as it stood at capture, handed the
replayed metadata (buffers rewritten in place, or a wrapper replanned) before ``graph.replay()``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

import torch

from probes.api import ProbeContext, ProbeResult
from probes.sglang.backends.base import Adapter, Mode
from probes.sglang.gpu.reference import Inputs, judged
from probes.sglang.gpu.replayed import Replayed, Snapshot, replay_scenario, scenario_shape
from probes.sglang.session import UNSUPPORTED, Subject, guarded
from tracker.core.verdicts import Outcome


class Kernel(ABC):
    """One backend's attention kernel, fed from that backend's replayed metadata."""

    adapter: Adapter
    library: str
    """The module the kernel comes from; without it the check is a skip."""

    def missing(self) -> str | None:
        """Why the kernel cannot run here (None: it can). The library is imported before the
        revision loads: imported while it is loaded, it would be the revision's stub."""
        try:
            __import__(self.library)
        except ImportError:
            return f"{self.library} is not installed"
        return None

    def prepare(self, ctx: ProbeContext) -> None:  # noqa: B027  (most kernels need nothing first)
        """Before the revision loads for the case (the Triton check loads it with real triton)."""

    @abstractmethod
    def extract(self, baked: Any, backend: Any) -> Snapshot:
        """What the captured call reads, from the adapter's ``bake`` of it and the backend."""

    @abstractmethod
    def arguments(self, replayed: Replayed, snapshot: Snapshot) -> Any:
        """The kernel's arguments (CPU tensors) for ``snapshot``, the metadata at capture or at replay."""

    @abstractmethod
    def run(self, replayed: Replayed, inputs: Inputs, subject: Subject, device: torch.device) -> torch.Tensor:
        """The call under a CUDA graph; returns its output rows."""


def check(ctx: ProbeContext, params: Mapping[str, Any], kernel: Kernel) -> ProbeResult:
    """One case: the revision's replayed metadata for ``params["mode"]`` through ``kernel``."""
    if not (ctx.is_cuda and torch.cuda.is_available()):
        return ProbeResult(Outcome.SKIP, detail="needs a CUDA device")
    missing = kernel.missing()
    if missing:
        return ProbeResult(Outcome.SKIP, detail=missing)
    kernel.prepare(ctx)
    mode = Mode(params["mode"])
    return guarded(ctx, lambda subject: judge(subject, mode, kernel, ctx), kernel.adapter)


def judge(subject: Subject, mode: Mode, kernel: Kernel, ctx: ProbeContext) -> ProbeResult:
    replayed = replayed_for(subject, mode, kernel)
    if isinstance(replayed, ProbeResult):
        return replayed
    return measure(replayed, kernel, subject, torch.device(ctx.device), ctx.seed)


def replayed_for(subject: Subject, mode: Mode, kernel: Kernel) -> Replayed | ProbeResult:
    """The scenario's replayed metadata, or a skip where the revision does not serve the mode."""
    support = subject.adapter.supports(subject.backend_module, subject.era, scenario_shape(mode))
    if not support.ok:
        return ProbeResult(Outcome.SKIP, signature=f"{UNSUPPORTED}: {support.reason}")
    return replay_scenario(subject, mode, kernel.extract)


def measure(replayed: Replayed, kernel: Kernel, subject: Subject, device: torch.device, seed: int) -> ProbeResult:
    """Run the kernel on ``replayed`` and judge its output against the reference."""
    inputs = Inputs.draw(replayed.rows, device, seed)
    found = judged(kernel.run(replayed, inputs, subject, device), replayed, inputs)
    detail = f"era {replayed.era}: {replayed.shape.mode.value}, KV lengths {replayed.batch.kv_lens}"
    return ProbeResult(found.outcome, found.metrics, signature=found.signature, detail=detail)


def in_graph(call: Callable[[], torch.Tensor], before_replay: Callable[[], None], device: torch.device) -> torch.Tensor:
    """``call`` warmed up on a side stream, captured in a CUDA graph, then ``before_replay`` (the
    replayed metadata goes in), then the graph replayed; the output the graph wrote."""
    current = torch.cuda.current_stream(device)
    stream = torch.cuda.Stream(device)
    stream.wait_stream(current)
    with torch.cuda.stream(stream):
        call()
    current.wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = call()
    before_replay()
    out.zero_()
    graph.replay()
    torch.cuda.synchronize(device)
    return out
