"""A metric probe's history along a scan: each metric's series per case over the revisions the
scan measured, its steps and its noise.

Each measured revision first gets the sampling rule's first executions (6), so that a point of
the series is the median of six processes' values: on a loaded CPU machine one process's value
alone moves by up to 2x, and PELT then proposes no step where a scan of one execution a revision
had shown the demo's planted slowdown. A step is a candidate of ruptures' PELT
(``tracker.perf.changepoints``) confirmed as a bisect step is judged: the first revision of the
new level against the last of the old, by the rank test on their executions' values
(``tracker.metric_samples``), with more executions drawn at both while the answer is unclear, up
to the sampling rule's bound. Only a change beyond the threshold at the confidence, either way,
is kept: a change within the noise is never a step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tracker.core.metrics import Metric
from tracker.core.results import ChangePoint, SeriesNoise
from tracker.measure import Prober
from tracker.metric_samples import NoSamples, Sampler
from tracker.perf.changepoints import candidates, noise
from tracker.perf.rank import Call, compare
from tracker.perf.sampling import SamplingRule

THRESHOLD = 0.05
CONFIDENCE = 0.99

Revision = tuple[str, str]
"""(sha, tree) of a measured revision."""


def metric_history(
    prober: Prober, measured: Sequence[Revision], rule: SamplingRule | None = None
) -> tuple[list[ChangePoint], list[SeriesNoise]]:
    """The steps and the noise of each metric of ``prober``'s probe, case by case, along
    ``measured``, oldest first. A revision whose probe did not pass is left out of the series."""
    rule = rule or SamplingRule()
    changes, noises = [], []
    every_metric = Sampler(prober, prober.probe.metrics[0].name)
    for sha, tree in measured:
        every_metric.draw(sha, tree, rule.first)
    for metric in prober.probe.metrics:
        sampler = Sampler(prober, metric.name)
        stored = {r: sampler.stored(r[1]) for r in measured}
        passed = {r: values for r, values in stored.items() if not isinstance(values, NoSamples)}
        for case in prober.case_ids:
            series = [r for r in measured if r in passed and passed[r][case]]
            points = [list(passed[r][case]) for r in series]
            if len(points) >= 3 and not math.isnan(sigma := noise(points)):
                noises.append(SeriesNoise(prober.probe.name, metric.name, case, sigma, len(points)))
            for index in candidates(points):
                found = _confirmed(sampler, metric, case, series[index - 1], series[index], rule)
                if found is not None:
                    changes.append(found)
    return changes, noises


def _confirmed(
    sampler: Sampler, metric: Metric, case: str, before: Revision, after: Revision, rule: SamplingRule
) -> ChangePoint | None:
    """The step from ``before`` to ``after``, where the rank test shows one either way."""
    wanted = rule.first
    while True:
        old, new = sampler.draw(*before, wanted), sampler.draw(*after, wanted)
        if isinstance(old, NoSamples) or isinstance(new, NoSamples):
            return None
        a, b = list(old[case]), list(new[case])
        options = dict(threshold=THRESHOLD, confidence=CONFIDENCE, direction=metric.direction)
        slower, faster = compare(a, b, **options), compare(b, a, **options)
        if Call.SLOWER in (slower.call, faster.call):
            way = "slower" if slower.call is Call.SLOWER else "faster"
            e = slower.effect
            return ChangePoint(
                sampler.prober.probe.name,
                metric.name,
                case,
                after[0],
                before[0],
                way,
                e.estimate,
                e.low,
                e.high,
                len(a),
                len(b),
            )
        have = min(len(a), len(b))
        call = Call.UNCLEAR if Call.UNCLEAR in (slower.call, faster.call) else Call.NOT_SLOWER
        more = rule.more(have, call)
        if more is None or have < wanted:
            return None
        wanted = more
