"""Simulation benchmark of the bisection strategies on synthetic flaky oracles (seeded).

    python scripts/sim_bisect.py [--seed 1] [--trials 100] [--quick] [--jobs 2] [--max-runs 3000] [model options]

A range holds n candidate commits (n = 128 and 1,024; indices 1..n, index 0 the good end). In a
culprit scenario, runs before the culprit fail at the flake rate (false failures) and runs from
the culprit on fail with the after-culprit probability (1.0: hard breakage; 0.8, 0.5:
intermittent bug). In a no-culprit scenario every index fails at the flake rate and the caller
called the bad end bad because one run failed. In every scenario the search is told that one
failure of the bad end (recorded, not counted); the good end is assumed good. Executions count
the runs a strategy asked for. auto and bayes get flake_rate_prior = the true flake rate, as if
learned from the probe's history, and confidence 0.95; binary strategies name a culprit always.

Strategies: auto, bayes, binary (one run per commit), binary with k = 3 or 5 runs per commit and
the any-fail rule (bad if any run fails) or the majority rule (bad if most runs fail), and the
anchor, git-bayesect (the ``git-bayesect`` distribution from the package registry: ``pip install
-e '.[bench]'``), driven through its own ``Bisector`` exactly as ``git bayesect run`` drives it:
``select()`` the commit to test, ``record()`` the result, stop once the top of ``distribution``
reaches the confidence (0.95, its default), here also at the run budget. It is told what the others
are told: the bad end's one failure is recorded, and the good end gets prior weight 0 (``git
bayesect prior --commit GOOD --weight 0``), its own way of saying the good end is not the culprit.
It knows no flake rate (Jeffreys priors, its defaults) and always names a culprit.

Accuracy is the exact culprit, or "no culprit" answered for no-culprit rows. Prints one markdown
table (accuracy, mean and p95 executions per strategy and row) and each target, met or missed.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import random
import sys
import time
from collections.abc import Callable
from multiprocessing import Pool
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tracker.core.verdicts import Verdict  # noqa: E402
from tracker.search.strategies import AutoSearch, BayesianSearch, BinarySearch  # noqa: E402

SIZES = (128, 1024)
FLAKES = (0.0, 0.01, 0.05, 0.1, 0.2, 0.3)
HARD_LOW_FLAKES, HARD_HIGH_FLAKES = FLAKES[1:4], FLAKES[4:]
HARD_ACCURACY = 0.97
AFTERS = (1.0, 0.8, 0.5)
STRATEGIES = ("auto", "bayes", "git-bayesect", "binary", "bin3-any", "bin3-maj", "bin5-any", "bin5-maj")
ANCHOR = "git-bayesect"
CONFIDENCE = 0.95

Scenario = tuple[int, float, float | None]  # n, flake rate, after-culprit failure probability (None: no culprit)


def scenarios() -> list[Scenario]:
    out: list[Scenario] = []
    for n in SIZES:
        out += [(n, q, a) for q in FLAKES for a in AFTERS]
        out += [(n, q, None) for q in FLAKES if q > 0]
    return out


def oracle(seed: int, scenario: Scenario, index: int, strategy: str) -> tuple[int | None, Callable[[int], bool]]:
    """Trial ``index`` of ``scenario``: its culprit (None: no culprit), the same for every strategy,
    and its runs, one execution at index j returning True when it fails, seeded per strategy."""
    n, flake, after = scenario
    culprit = random.Random(f"culprit:{seed}:{n}:{flake}:{after}:{index}").randint(1, n) if after is not None else None
    rng = random.Random(f"runs:{seed}:{n}:{flake}:{after}:{index}:{strategy}")

    def run(j: int) -> bool:
        rate = after if culprit is not None and j >= culprit else flake
        return rng.random() < rate  # type: ignore[operator]

    return culprit, run


def trial(args: tuple[int, Scenario, str, int, int, dict[str, object]]) -> tuple[Scenario, str, bool, int]:
    seed, scenario, strategy, index, max_runs, model = args
    n, flake, after = scenario
    size = n + 1
    culprit, run = oracle(seed, scenario, index, strategy)
    executions = 0
    if strategy == ANCHOR:
        found, executions = _git_bayesect(n, run, max_runs)
        right = culprit is not None and found == culprit
        return scenario, strategy, right, executions
    if strategy in ("auto", "bayes"):
        search: AutoSearch | BayesianSearch = (
            AutoSearch(size, CONFIDENCE, flake, max_runs, **model)
            if strategy == "auto"
            else BayesianSearch(size, flake, CONFIDENCE, max_runs, **model)  # type: ignore[arg-type]
        )
        search.record(size - 1, Verdict.BAD)  # the failure the caller saw
        while not search.done():
            batch = search.next_indices(1)
            if not batch:
                break
            executions += 1
            search.record(batch[0], Verdict.BAD if run(batch[0]) else Verdict.GOOD)
        answer = search.answer()
        right = answer.no_culprit if culprit is None else (not answer.no_culprit and answer.culprit == culprit)
        return scenario, strategy, right, executions
    k = 1 if strategy == "binary" else int(strategy[3])
    rule: Callable[[int], bool] = (
        (lambda fails: fails > 0) if strategy.endswith("any") or k == 1 else (lambda fails: 2 * fails > k)
    )
    binary = BinarySearch(size)
    while (j := binary.next_index()) is not None:
        fails = sum(run(j) for _ in range(k))
        executions += k
        binary.record(j, Verdict.BAD if rule(fails) else Verdict.GOOD)
    right = culprit is not None and binary.answer().culprit == culprit
    return scenario, strategy, right, executions


def _git_bayesect(n: int, run: Callable[[int], bool], max_runs: int) -> tuple[int, int]:
    """git-bayesect's culprit and its executions. Its index r counts back from the bad end
    (r = n - j): r = 0 is the bad end, r = n the good end."""
    import numpy as np
    from git_bayesect import Bisector

    prior = np.ones(n + 1)
    prior[n] = 0.0  # the good end is not the culprit
    bisector = Bisector(prior)
    bisector.record(0, True)  # the failure the caller saw at the bad end
    executions = 0
    with np.errstate(divide="ignore", invalid="ignore"):  # its log of the zero prior, which it masks
        while bisector.distribution.max() < CONFIDENCE and executions < max_runs:
            r = bisector.select()
            executions += 1
            bisector.record(r, run(n - r))
        return n - int(np.argmax(bisector.distribution)), executions


def p95(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def z_capacity(q: float) -> float:
    """Capacity (bits/run) of a run under hard breakage: passes are sure, failures false at rate q."""
    if q <= 0:
        return 1.0
    return math.log2(1 + (1 - q) * q ** (q / (1 - q)))


def lower_bound(n: int, q: float, accuracy: float) -> float:
    """Fano + capacity: no strategy reaches `accuracy` over n uniform culprits in fewer mean runs."""
    pe = 1 - accuracy
    h = 0.0 if pe <= 0 else -pe * math.log2(pe) - (1 - pe) * math.log2(1 - pe)
    return max(0.0, math.log2(n) - h - pe * math.log2(n - 1)) / z_capacity(q)


def hard_limit(n: int, q: float, accuracy: float) -> tuple[float, str]:
    """The most mean executions a hard-breakage row at flake rate q may take, and how it is derived:
    1.5 ceil(log2 n) + 4 up to 10 % flakes, 1.3 x the information bound above."""
    if q in HARD_LOW_FLAKES:
        limit = 1.5 * math.ceil(math.log2(n)) + 4
        return limit, f"1.5 ceil(log2 n) + 4 = {limit:g}"
    bound = lower_bound(n, q, accuracy)
    return 1.3 * bound, f"1.3 x {bound:.1f}, the information bound at this accuracy, = {1.3 * bound:.1f}"


def hard_met(n: int, q: float, accuracy: float, mean: float) -> bool:
    """A hard-breakage row's target: accuracy at least HARD_ACCURACY within :func:`hard_limit`."""
    return accuracy >= HARD_ACCURACY and mean <= hard_limit(n, q, accuracy)[0]


def intermittent_met(accuracy: float, mean: float, anchor_accuracy: float, anchor_mean: float) -> bool:
    """An intermittent row's target: as accurate as the anchor, with fewer mean executions."""
    return accuracy >= anchor_accuracy and mean < anchor_mean


def label(scenario: Scenario) -> str:
    n, q, a = scenario
    return f"| {n} | {q:.0%} | {'no culprit' if a is None else f'{a:g}'} |"


def simulation_options(description: str | None) -> argparse.ArgumentParser:
    """The options of every simulation on these oracles: seed, trials per row, quick, processes."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--trials", type=int, default=None, help="trials per row (default 100, quick 12)")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    parser.add_argument("--jobs", type=int, default=2)
    return parser


def anchor_installed(script: str) -> bool:
    """Whether git-bayesect can be imported; if not, says how to install it."""
    if importlib.util.find_spec("git_bayesect") is None:
        print(
            f"{script}: the anchor git-bayesect is not installed; "
            "pip install -e '.[bench]' (or pip install git-bayesect)",
            file=sys.stderr,
        )
        return False
    return True


def main() -> int:
    parser = simulation_options(__doc__)
    parser.add_argument(
        "--max-runs",
        type=int,
        default=None,
        help="budget of auto/bayes (default 3000, quick 200: the slowest rows need more than 1,000)",
    )
    parser.add_argument("--hard-weight", type=float, default=None, help="BayesianSearch hard_weight (default: its own)")
    parser.add_argument("--after-prior", type=float, nargs=2, default=None, help="BayesianSearch after_prior a b")
    parser.add_argument("--intermittent-margin", type=float, default=None, help="BayesianSearch intermittent_margin")
    parser.add_argument(
        "--guard-after-prior",
        type=float,
        nargs=2,
        default=None,
        help="BayesianSearch guard_after_prior a b (2 1: the search's own)",
    )
    args = parser.parse_args()
    if not anchor_installed("sim_bisect"):
        return 2
    model: dict[str, object] = {}
    if args.hard_weight is not None:
        model["hard_weight"] = args.hard_weight
    if args.after_prior is not None:
        model["after_prior"] = tuple(args.after_prior)
    if args.intermittent_margin is not None:
        model["intermittent_margin"] = args.intermittent_margin
    if args.guard_after_prior is not None:
        model["guard_after_prior"] = tuple(args.guard_after_prior)
    trials = args.trials or (12 if args.quick else 100)
    max_runs = args.max_runs or (200 if args.quick else 3000)
    rows = scenarios()
    work = [
        (args.seed, s, strategy, i, max_runs, model) for s in rows for strategy in STRATEGIES for i in range(trials)
    ]
    # Longest first (Bayesian runs on intermittent and no-culprit rows) so the pool ends together.
    work.sort(
        key=lambda w: -(w[2] in ("auto", "bayes", ANCHOR)) * (1 + w[1][1] * 10) * (2 if w[1][2] != 1.0 else 1) * w[1][0]
    )
    started = time.time()
    results: dict[tuple[Scenario, str], list[tuple[bool, int]]] = {}
    with Pool(args.jobs) as pool:
        for scenario, strategy, right, executions in pool.imap_unordered(trial, work, chunksize=4):
            results.setdefault((scenario, strategy), []).append((right, executions))
    elapsed = time.time() - started

    def stats(scenario: Scenario, strategy: str) -> tuple[float, float, int]:
        got = results[(scenario, strategy)]
        return sum(r for r, _ in got) / len(got), sum(e for _, e in got) / len(got), p95([e for _, e in got])

    print(
        f"# Bisect strategies on synthetic oracles: seed {args.seed}, {trials} trials per row, "
        f"auto/bayes confidence {CONFIDENCE}, max_runs {max_runs}, {elapsed:.0f} s on {args.jobs} processes"
        + (f", model {model}" if model else "")
    )
    print()
    print("auto and bayes are given flake_rate_prior = the true flake rate (as if learned from history).")
    print("Each cell: accuracy / mean executions / p95 executions. Executions exclude the bad end's given failure.")
    print()
    print("| n | flake | after | " + " | ".join(STRATEGIES) + " |")
    print("|---:|---:|---:|" + "---|" * len(STRATEGIES))
    for scenario in rows:
        cells = []
        for strategy in STRATEGIES:
            acc, mean, top = stats(scenario, strategy)
            cells.append(f"{acc:.2f} / {mean:.1f} / {top}")
        print(label(scenario) + " " + " | ".join(cells) + " |")

    print()
    print("## Targets")
    print()
    failures = 0

    def check(ok: bool, text: str) -> None:
        nonlocal failures
        failures += not ok
        print(f"- {'met' if ok else 'MISSED'}: {text}")

    for n in SIZES:
        bound = math.ceil(math.log2(n)) + 1
        every = [_deterministic_auto(n, c) for c in range(1, n + 1)]
        worst = (all(right for right, _ in every), max(e for _, e in every))
        acc, mean, _ = stats((n, 0.0, 1.0), "auto")
        check(
            worst[0] and worst[1] <= bound and acc == 1.0,
            f"deterministic, n={n}: auto exact for every one of the {n} culprit positions, "
            f"at most {worst[1]} executions (bound ceil(log2 n)+1 = {bound}); sampled rows {acc:.2f} / {mean:.1f}",
        )
    for strategy in ("auto", "bayes"):
        for n in SIZES:
            for q in HARD_LOW_FLAKES + HARD_HIGH_FLAKES:
                acc, mean, _ = stats((n, q, 1.0), strategy)
                check(
                    hard_met(n, q, acc, mean),
                    f"hard breakage, {strategy}, n={n}, flake {q:.0%}: accuracy {acc:.2f} (>= {HARD_ACCURACY}), "
                    f"mean executions {mean:.1f} (<= {hard_limit(n, q, acc)[1]})",
                )
    for strategy in ("auto", "bayes"):
        for n in SIZES:
            for a in AFTERS[1:]:
                for q in FLAKES:
                    acc, mean, _ = stats((n, q, a), strategy)
                    anchor_acc, anchor_mean, _ = stats((n, q, a), ANCHOR)
                    check(
                        intermittent_met(acc, mean, anchor_acc, anchor_mean),
                        f"intermittent {a:g}, {strategy}, n={n}, flake {q:.0%}: accuracy {acc:.2f} / mean {mean:.1f} "
                        f"against {ANCHOR} {anchor_acc:.2f} / {anchor_mean:.1f} (target: as accurate, fewer runs)",
                    )
    for strategy in ("auto", "bayes"):
        for n in SIZES:
            for q in FLAKES[1:]:
                acc, mean, _ = stats((n, q, None), strategy)
                check(
                    acc >= 0.95,
                    f"no culprit, {strategy}, n={n}, flake {q:.0%}: "
                    f"answered no culprit {acc:.2f} (>= 0.95), mean {mean:.1f}",
                )
    print()
    print(f"{failures} target line(s) missed.")
    return 0


def _deterministic_auto(n: int, culprit: int) -> tuple[bool, int]:
    search = AutoSearch(n + 1, CONFIDENCE, 0.0)
    search.record(n, Verdict.BAD)
    executions = 0
    while batch := search.next_indices(1):
        executions += 1
        search.record(batch[0], Verdict.BAD if batch[0] >= culprit else Verdict.GOOD)
    return search.answer().culprit == culprit, executions


if __name__ == "__main__":
    raise SystemExit(main())
