"""The family probes of FlashAttention (FA3) (``probes.sglang.family``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.api import ProbeContext, ProbeResult
from probes.sglang.backends.fa3 import ADAPTER
from probes.sglang.family import checked


def check(ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
    return checked(ctx, params, ADAPTER)
