"""How far sim_bisect's hard-breakage and intermittent targets can be met together (seeded).

    python scripts/sim_frontier.py [--seed 1] [--trials 100] [--quick] [--jobs 2]

sim_bisect.py asks a flake-aware search for two things on the same runs: few executions on a hard
breakage (1.5 ceil(log2 n) + 4 up to 10 % flakes, 1.3 x the information bound above), and on an
intermittent bug (fails 50-80 % after the culprit) the accuracy of git-bayesect with fewer runs.
A search does not know which of the two it faces: lucky passes after an intermittent culprit
look like the passes before a hard one, so each run spent telling them apart is a run a hard
breakage pays for.

This script measures that trade with a search no real one can beat on knowledge of the model.
ExactModelSearch is told the oracle itself: the row's flake rate, and that the after-culprit
failure rate is 1.0, 0.8 or 0.5 (the rates the rows use), with prior weights. It keeps the exact
posterior over (culprit, rate), runs the index whose outcome tells most about it (expected
information), and stops when one culprit holds the confidence. It is a yardstick, not a strategy
(a real probe's rates are not told), run on sim_bisect's oracles and seeds, next to git-bayesect.

For each setting of weights and confidence it prints the target lines met, as sim_bisect counts
them for auto and bayes: 10 hard-breakage lines (n = 128 and 1,024, flakes 1-30 %) and 24
intermittent ones (rates 0.8 and 0.5, flakes 0-30 %). Where every setting that meets the hard
lines misses the intermittent ones, and the reverse, the targets pull apart even for a search
told the model; a real search, which must learn the rates from the same runs, has less to go on.
(The yardstick's choice of index is greedy and its stop one threshold, so this is a measurement,
not a proof.)
"""

from __future__ import annotations

import time
from multiprocessing import Pool

import numpy as np
import sim_bisect as sim
from sim_bisect import ANCHOR, Scenario

# (prior weights of the after-culprit rates 1.0 : 0.8 : 0.5, confidence): from leaning on a hard
# breakage to treating the three alike.
SETTINGS = (
    ((8.0, 1.0, 1.0), 0.95),
    ((4.0, 1.0, 1.0), 0.95),
    ((1.0, 1.0, 1.0), 0.95),
    ((8.0, 1.0, 1.0), 0.99),
    ((1.0, 1.0, 1.0), 0.99),
)
EXACT = "exact-model"


def binary_entropy(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return -(p * np.log(p) + (1 - p) * np.log1p(-p))


class ExactModelSearch:
    """The posterior over (culprit c in 1..n, after-culprit rate) given the true flake rate and
    the rows' after-culprit rates; index 0 is the good end, n the bad end."""

    def __init__(self, n: int, flake: float, weights: tuple[float, ...], confidence: float, max_runs: int) -> None:
        self.n, self.flake, self.confidence, self.max_runs = n, flake, confidence, max_runs
        self.rates = np.array(sim.AFTERS)
        prior = np.array(weights) / sum(weights) / n
        self.log_posterior = np.tile(np.log(prior), (n, 1))  # row c - 1, column: the rate
        self.posterior = np.tile(prior, (n, 1))
        self.runs = 0

    def record(self, j: int, failed: bool) -> None:
        self.runs += 1
        culprit_at_or_before = np.arange(1, self.n + 1)[:, None] <= j
        rate = np.clip(np.where(culprit_at_or_before, self.rates[None, :], self.flake), 1e-15, 1 - 1e-15)
        self.log_posterior += np.log(rate if failed else 1 - rate)
        self.log_posterior -= self.log_posterior.max()
        p = np.exp(self.log_posterior)
        self.posterior = p / p.sum()

    def done(self) -> bool:
        return self.runs >= self.max_runs or self.posterior.sum(axis=1).max() >= self.confidence

    def next_index(self) -> int:
        """The index j in 0..n whose run has the most expected information about (culprit, rate)."""
        p = self.posterior
        # Mass of culprits c <= j, per rate, for j = 0..n (none at or before the good end).
        at_or_before = np.vstack([np.zeros((1, len(self.rates))), np.cumsum(p, axis=0)])
        before_mass = 1 - at_or_before.sum(axis=1)
        fail = at_or_before @ self.rates + before_mass * self.flake
        expected = at_or_before @ binary_entropy(self.rates) + before_mass * binary_entropy(np.array(self.flake))
        return int(np.argmax(binary_entropy(fail) - expected))

    def culprit(self) -> int:
        return int(self.posterior.sum(axis=1).argmax()) + 1


def exact_trial(
    args: tuple[int, Scenario, int, int, tuple[float, ...], float],
) -> tuple[Scenario, tuple[float, ...], float, bool, int]:
    seed, scenario, index, max_runs, weights, confidence = args
    n, flake, _ = scenario
    culprit, run = sim.oracle(seed, scenario, index, EXACT)
    search = ExactModelSearch(n, flake, weights, confidence, max_runs)
    search.record(n, True)  # the failure the caller saw, as the others are told
    executions = 0
    while not search.done():
        j = search.next_index()
        executions += 1
        search.record(j, run(j))
    return scenario, weights, confidence, search.culprit() == culprit, executions


def anchor_trial(args: tuple[int, Scenario, int, int]) -> tuple[Scenario, bool, int]:
    seed, scenario, index, max_runs = args
    _, _, right, executions = sim.trial((seed, scenario, ANCHOR, index, max_runs, {}))
    return scenario, right, executions


def main() -> int:
    args = sim.simulation_options(__doc__).parse_args()
    if not sim.anchor_installed("sim_frontier"):
        return 2
    trials = args.trials or (12 if args.quick else 100)
    max_runs = 200 if args.quick else 3000
    hard = [(n, q, 1.0) for n in sim.SIZES for q in sim.HARD_LOW_FLAKES + sim.HARD_HIGH_FLAKES]
    intermittent = [(n, q, a) for n in sim.SIZES for a in sim.AFTERS[1:] for q in sim.FLAKES]
    started = time.time()
    exact: dict[tuple[Scenario, tuple[float, ...], float], list[tuple[bool, int]]] = {}
    anchor: dict[Scenario, list[tuple[bool, int]]] = {}
    work = [(args.seed, s, i, max_runs, w, c) for w, c in SETTINGS for s in hard + intermittent for i in range(trials)]
    with Pool(args.jobs) as pool:
        anchored = pool.imap_unordered(
            anchor_trial, [(args.seed, s, i, max_runs) for s in intermittent for i in range(trials)], chunksize=4
        )
        for scenario, weights, confidence, right, executions in pool.imap_unordered(exact_trial, work, chunksize=8):
            exact.setdefault((scenario, weights, confidence), []).append((right, executions))
        for scenario, right, executions in anchored:
            anchor.setdefault(scenario, []).append((right, executions))
    elapsed = time.time() - started

    def stats(got: list[tuple[bool, int]]) -> tuple[float, float]:
        return sum(r for r, _ in got) / len(got), sum(e for _, e in got) / len(got)

    print(
        f"# The targets' frontier: {EXACT} (told the oracle's rates) against sim_bisect's targets; "
        f"seed {args.seed}, {trials} trials per row, {elapsed:.0f} s on {args.jobs} processes"
    )
    print()
    print("Weights: prior of the after-culprit rates 1.0 : 0.8 : 0.5. Cells: accuracy / mean executions.")
    print()
    heads = [f"{':'.join(f'{x:g}' for x in w)} @ {c:g}" for w, c in SETTINGS]
    print("| n | flake | after | " + " | ".join(heads) + f" | {ANCHOR} |")
    print("|---:|---:|---:|" + "---|" * (len(SETTINGS) + 1))
    for scenario in hard + intermittent:
        cells = [stats(exact[(scenario, w, c)]) for w, c in SETTINGS]
        anchor_cell = "{:.2f} / {:.1f}".format(*stats(anchor[scenario])) if scenario in anchor else ""
        print(sim.label(scenario) + " " + " | ".join(f"{a:.2f} / {m:.1f}" for a, m in cells) + f" | {anchor_cell} |")
    print()
    print("| weights @ confidence | hard-breakage lines met | intermittent lines met |")
    print("|---|---:|---:|")
    for (w, c), head in zip(SETTINGS, heads):
        hard_met = sum(sim.hard_met(n, q, *stats(exact[((n, q, a), w, c)])) for n, q, a in hard)
        intermittent_met = sum(sim.intermittent_met(*stats(exact[(s, w, c)]), *stats(anchor[s])) for s in intermittent)
        print(f"| {head} | {hard_met} of {len(hard)} | {intermittent_met} of {len(intermittent)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
