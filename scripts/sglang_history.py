"""Scan a range of a real SGLang clone with regtrack's SGLang probes and print what it found.

    python scripts/sglang_history.py --repo PATH RANGE [--probe P ...] [--home DIR] [--max-samples N]
                                     [--workers K] [--baseline] [--git-bisect GOOD BAD]

Runs ``regtrack scan RANGE --max-samples <commits>`` (every distinct target tree of the range is
measured or reused; ``--max-samples N`` samples N trees and bisects between disagreeing ones
instead, for ranges of thousands of commits) on the SGLang target (``regtrack init sglang``'s config, written into a
directory of its own, so the clone stays untouched), in a subprocess with ``REGTRACK_HOME`` the
given or a fresh directory. Prints every transition per probe with its kind and its revert or
re-land pair, the untestable and flaky stretches, the API eras the probes met (from the stored
runs' details), the executions that ran (the scan's, and the executed and copied attempts in the
store) apart from the results reused, the distinct sets of files the probes read, and the wall time.

``--baseline`` also runs the same probes on every commit of the range in a plain loop (one
``regtrack run`` per commit, its own fresh home each time, so nothing is reused) and prints the
ratio of the scan's wall time to the loop's (target <= 0.25). ``--git-bisect GOOD BAD`` runs
``git bisect run`` with the first probe over GOOD..BAD in a clone of its own, for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from probes.sglang import family  # noqa: E402
from tracker.targets.templates import sglang_probes, template  # noqa: E402

ERA = re.compile(r"\bera (\w+)")


def regtrack(home: Path, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REGTRACK_HOME": str(home)}
    env.pop("REGTRACK_DB_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "tracker.cli", *args], cwd=config, env=env, capture_output=True, text=True, check=False
    )


def config_dir(repo: Path, where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    (where / "regtrack.toml").write_text(template("sglang").replace('repo = "."', f"repo = {str(repo)!r}"))
    return where


def line_of(repo: Path, spec: str) -> list[str]:
    first, _, last = spec.partition("..")
    shas = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--first-parent", "--reverse", f"{first}..{last or 'HEAD'}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    base = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", first], check=True, capture_output=True, text=True
    ).stdout.strip()
    return [base, *shas]


def dated_range(repo: Path, spec: str) -> str:
    """``A..B`` as given; ``YYYY-MM-DD..[B]`` from the parent of the first first-parent commit of
    that day on."""
    first, _, last = spec.partition("..")
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", first):
        return spec
    since = git(repo, "rev-list", "--first-parent", "--reverse", f"--since={first}T00:00:00", last or "HEAD")
    return f"{since.split()[0]}^..{last}"


def scan(
    spec: str, probes: list[str], home: Path, config: Path, samples: int, workers: int
) -> tuple[dict[str, Any], float]:
    options = [option for probe in probes for option in ("--probe", probe)] + ["--workers", str(workers)]
    started = time.perf_counter()
    result = regtrack(home, config, "scan", spec, *options, "--max-samples", str(max(samples, 2)), "--json")
    wall = time.perf_counter() - started
    if result.returncode not in (0, 1):
        sys.exit(f"regtrack scan failed ({result.returncode}): {result.stderr.strip()[-2000:]}")
    return json.loads(result.stdout), wall


def stored_facts(home: Path, probes: list[str]) -> tuple[Counter[str], dict[str, int], Counter[str]]:
    """The eras named in the runs' details, the distinct input sets per probe, and why runs were
    untestable: the stored runs of ``probes`` (a home may hold others')."""
    with sqlite3.connect(home / "data" / "regtrack.db") as db:
        rows = db.execute(
            "SELECT probe_versions.name, runs.detail, runs.input_set_id, runs.outcome, runs.signature FROM runs "
            "JOIN probe_versions ON runs.probe_id = probe_versions.id "
            f"WHERE probe_versions.name IN ({', '.join('?' * len(probes))})",
            probes,
        ).fetchall()
    eras: Counter[str] = Counter()
    inputs: dict[str, set[int]] = {}
    untestable: Counter[str] = Counter()
    for probe, detail, input_set, outcome, signature in rows:
        eras.update(ERA.findall(detail or ""))
        if input_set is not None:
            inputs.setdefault(probe, set()).add(input_set)
        if outcome in ("error", "skip"):
            untestable[f"{probe}: {(signature or outcome)[:100]}"] += 1
    return eras, {probe: len(sets) for probe, sets in inputs.items()}, untestable


def stored_attempts(home: Path) -> dict[tuple[str, bool], int]:
    """The attempts in the store per probe, by whether they were copied (True) or executed (False)."""
    with sqlite3.connect(home / "data" / "regtrack.db") as db:
        rows = db.execute(
            "SELECT probe_versions.name, runs.reused_from_id IS NOT NULL, "
            "COUNT(DISTINCT runs.tree_hash || ':' || runs.attempt) FROM runs "
            "JOIN probe_versions ON runs.probe_id = probe_versions.id GROUP BY 1, 2"
        ).fetchall()
    return {(probe, bool(copied)): count for probe, copied, count in rows}


def baseline(repo: Path, line: list[str], probes: list[str], config: Path, work: Path) -> float:
    """Every commit measured in a plain loop, nothing reused: the cost the scan is compared with."""
    options = [option for probe in probes for option in ("--probe", probe)]
    started = time.perf_counter()
    for index, sha in enumerate(line):
        home = work / f"baseline-{index}"
        result = regtrack(home, config, "run", sha, *options, "--json")
        if result.returncode not in (0, 1, 3):
            sys.exit(f"regtrack run {sha[:12]} failed ({result.returncode}): {result.stderr.strip()[-500:]}")
        subprocess.run(["rm", "-rf", str(home)], check=False)
    return time.perf_counter() - started


GIT_STEP = """
import sys
from pathlib import Path
from probes import ProbeContext, get_probe, run_probe, summarize
from tracker.core.verdicts import Outcome
result = summarize(run_probe(get_probe({probe!r}), ProbeContext(root=Path.cwd(), import_roots=("python",))))
sys.exit(1 if result.outcome in {{Outcome.FAIL, Outcome.CRASH, Outcome.TIMEOUT}} else 0 \
if result.outcome is Outcome.PASS else 125)
"""


def git_bisect(repo: Path, good: str, bad: str, probe: str, work: Path) -> tuple[str | None, int, float]:
    clone = work / "git-bisect"
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(repo), str(clone)], check=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    subprocess.run(
        ["git", "-C", str(clone), "bisect", "start", "--first-parent", bad, good],
        check=True,
        capture_output=True,
        env=env,
    )
    run = subprocess.run(
        ["git", "-C", str(clone), "bisect", "run", sys.executable, "-P", "-c", GIT_STEP.format(probe=probe)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    wall = time.perf_counter() - started
    found = re.search(r"^([0-9a-f]{40}) is the first bad commit", run.stdout, re.M)
    steps = run.stdout.count("running ")
    return (found.group(1) if found else None), steps, wall


METADATA_WORDS = re.compile(
    r"(?i)cuda[ -_]?graph|metadata|seq_?lens|page[ _]table|kv_ind|indptr|draft[ _]extend|target[ _]verify|"
    r"draft[ _]decode|topk|custom[ _]mask|replay|capture|spec(ulative)?|eagle|attention|attn"
)
FIXES = re.compile(r"(?i)\b(fix(es|ed)?|bug|wrong|correct|revert|reland|re-land|regression|broke)\b")


def explain(repo: Path, transition: dict[str, Any]) -> str:
    """The commit's subject, and whether its message says it fixes (or breaks) attention metadata,
    only touches it, or says nothing of it: a transition no message explains is flagged."""
    sha = transition["sha"]
    message = git(repo, "log", "-1", "--format=%s%n%b", sha)
    files = git(repo, "show", "--format=", "--name-only", sha).split()
    subject = message.splitlines()[0] if message else "?"
    backend = backend_file(transition["probe"])
    touches = f"touches {backend}" if backend and backend in files else f"does not touch {backend or 'the backend'}"
    if METADATA_WORDS.search(message) and FIXES.search(message):
        says = "says it fixes or reverts attention metadata"
    elif METADATA_WORDS.search(message):
        says = "speaks of attention metadata"
    else:
        says = "UNEXPLAINED: its message says nothing of attention metadata"
    return f"{subject[:110]}  [{says}; {touches}]"


def backend_file(probe: str) -> str | None:
    """``python/sglang/.../<backend>.py`` of a family probe (``sglang_<backend>_<mode>``)."""
    for name in family.BACKENDS:
        if probe.startswith(f"sglang_{name}_"):
            return "python/" + family.revision_module(name).replace(".", "/") + ".py"
    return None


def by_probe(data: dict[str, Any], attempts: dict[tuple[str, bool], int], inputs: dict[str, int]) -> None:
    """One row per backend and mode: transitions, pairs, stretches, executions, distinct read sets."""
    print(f"  {'probe':<34} {'trans':>5} {'pairs':>5} {'stretches':>9} {'executed':>8} {'copied':>6} {'read sets':>9}")
    for probe in sorted(data["stories"]):
        transitions = [t for t in data["transitions"] if t["probe"] == probe]
        pairs = sum(bool(t.get("pairs_with")) for t in transitions)
        stretches = sum(s["probe"] == probe for s in data["stretches"])
        ran, copied, read = attempts.get((probe, False), 0), attempts.get((probe, True), 0), inputs.get(probe, 0)
        print(f"  {probe:<34} {len(transitions):>5} {pairs:>5} {stretches:>9} {ran:>8} {copied:>6} {read:>9}")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def report(data: dict[str, Any], line: list[str], wall: float, home: Path, repo: Path, probes: list[str]) -> None:
    eras, inputs, untestable = stored_facts(home, probes)
    print(f"range {line[0][:12]}..{line[-1][:12]}: {len(line)} first-parent commits, scan wall {wall:.1f} s")
    print(
        f"executions that ran: {data['executions']}; results reused: {data['reused']} "
        "(stored before, or copied from a tree where the probe read the same files)"
    )
    by_probe(data, stored_attempts(home), inputs)
    print("transitions (each with its commit, and whether its message speaks of attention metadata):")
    for t in sorted(data["transitions"], key=lambda t: (t["probe"], line.index(t["sha"]) if t["sha"] in line else -1)):
        pair = f"  {t['pair_kind']} {t['pairs_with'][:12]}" if t.get("pairs_with") else ""
        print(f"  {t['probe']:<34} {t['kind']:<10} {t['sha'][:12]}{pair}")
        print(f"      {explain(repo, t)}")
    for s in data["stretches"]:
        print(f"  {s['probe']:<34} {s['kind']:<10} {s['first'][:12]}..{s['last'][:12]}  {s.get('signature') or ''}")
    print("eras met (runs): " + (", ".join(f"{era} {count}" for era, count in sorted(eras.items())) or "none recorded"))
    if untestable:
        print("untestable or skipped runs:")
        for why, count in untestable.most_common(40):
            print(f"  {count:>5}  {why}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="an SGLang clone")
    parser.add_argument("range", help="A..B (first-parent), or SINCE.. with a date: 2026-01-01..")
    parser.add_argument("--probe", action="append", help="(default: every SGLang probe that runs on a CPU)")
    parser.add_argument("--home", type=Path, help="REGTRACK_HOME to use (default: a fresh temporary one)")
    parser.add_argument(
        "--max-samples", type=int, help="trees to sample before bisecting (default: every tree of the range)"
    )
    parser.add_argument("--workers", type=int, default=1, help="probe worker processes (default: 1)")
    parser.add_argument(
        "--baseline", action="store_true", help="also run every commit in a plain loop and print the wall ratio"
    )
    parser.add_argument("--git-bisect", nargs=2, metavar=("GOOD", "BAD"), help="also run git bisect run over GOOD..BAD")
    args = parser.parse_args(argv)
    repo = args.repo.resolve()
    probes = args.probe or list(sglang_probes("cpu"))
    args.range = dated_range(repo, args.range)
    with tempfile.TemporaryDirectory(prefix="sglang-history-") as scratch:
        work = Path(scratch)
        home = args.home.resolve() if args.home else work / "home"
        config = config_dir(repo, work / "config")
        line = line_of(repo, args.range)
        data, wall = scan(args.range, probes, home, config, args.max_samples or len(line), args.workers)
        report(data, line, wall, home, repo, probes)
        if args.baseline:
            loop = baseline(repo, line, probes, config, work)
            print(f"plain loop over every commit: {loop:.1f} s; scan/loop = {wall / loop:.2f} (target <= 0.25)")
        if args.git_bisect:
            culprit, steps, bisect_wall = git_bisect(repo, *args.git_bisect, probes[0], work)
            print(
                f"git bisect run ({probes[0]}): {steps} steps, {bisect_wall:.1f} s, "
                f"first bad {culprit[:12] if culprit else 'none'}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
