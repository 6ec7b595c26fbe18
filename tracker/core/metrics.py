"""What a metric probe measures: each metric's name, unit and which way is better."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Direction(str, enum.Enum):
    """Which way a metric improves: latency is better lower, throughput higher."""

    LOWER_IS_BETTER = "lower"
    HIGHER_IS_BETTER = "higher"


@dataclass(frozen=True)
class Metric:
    """One metric a probe measures, ``decode_us`` in ``us``, lower is better."""

    name: str
    unit: str
    direction: Direction = Direction.LOWER_IS_BETTER
