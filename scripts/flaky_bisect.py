"""`regtrack bisect` on the demo history's flaky stretch, run again and again with fresh databases.

    python scripts/flaky_bisect.py [--runs 20] [--strategy auto] [--workers 1] [--device cpu] [--out DIR]

The demo's decode bug (``decode_stale_page``) fails its probe in about a third of the runs. Each
run bisects from the commit that mends the untestable stretch (good) to the last commit of the
flaky stretch (bad) with the real ``decode_graph_replay`` probe, in a fresh database (no stored
result, no flake history) and with its own seed, through the command line a user types. A run is
right when it names the commit that introduced the bug. Prints one row per run and a summary;
exits 1 when fewer than ``--need`` runs are right.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tracker.demo.history import DemoManifest, build_demo_history  # noqa: E402


def bisect(
    repo: Path, manifest: DemoManifest, database: Path, seed: int, args: argparse.Namespace
) -> tuple[dict, float]:
    command = [
        sys.executable,
        "-m",
        "tracker.cli",
        "bisect",
        "--repo",
        str(repo),
        "--probe",
        "decode_graph_replay",
        "--good",
        manifest.untestable.mended,
        "--bad",
        manifest.flaky.last,
        "--strategy",
        args.strategy,
        "--workers",
        str(args.workers),
        "--device",
        args.device,
        "--seed",
        str(seed),
        "--json",
    ]
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "REGTRACK_DB_URL": f"sqlite:///{database}"}
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1) or not done.stdout.strip():  # a crash exits 1 too, printing nothing
        raise SystemExit(f"bisect failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout), elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--need", type=int, default=19, help="right answers needed for exit code 0")
    parser.add_argument("--strategy", default="auto")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument(
        "--out", type=Path, help="where the demo history and databases go (default: a temporary folder)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="regtrack-flaky-") as scratch:
        base = args.out or Path(scratch)
        base.mkdir(parents=True, exist_ok=True)
        repo = base / "demo"
        manifest = build_demo_history(repo, 150)
        truth = manifest.flaky.first
        print(
            f"# Flaky-stretch bisect: {args.runs} runs, strategy {args.strategy}, "
            f"{args.workers} worker(s), {args.device}"
        )
        print()
        print(f"good {manifest.untestable.mended[:12]}, bad {manifest.flaky.last[:12]}, culprit {truth[:12]}")
        print()
        print(
            "| run | seed | answer | right | confidence | executions | rounds "
            "| switched because | fails before / after | seconds |"
        )
        print("|---:|---:|---|---|---:|---:|---:|---|---|---:|")
        rows = []
        for run in range(args.runs):
            seed = args.first_seed + 1000 * run
            report, elapsed = bisect(repo, manifest, base / f"run-{run}.sqlite", seed, args)
            answer = "no culprit" if report["no_culprit"] else (report["culprit"] or "?")[:12]
            right = report["culprit"] == truth
            rates = f"{_rate(report['fail_rate_before'])} / {_rate(report['fail_rate_after'])}"
            print(
                f"| {run + 1} | {seed} | {answer} | {'yes' if right else 'NO'} | {report['confidence']:.3f} | "
                f"{report['executions']} | {report['rounds']} | "
                f"{report['switch_reason'] or '-'} | {rates} | {elapsed:.0f} |",
                flush=True,
            )
            rows.append((right, report["executions"], elapsed))
    right = sum(r for r, _, _ in rows)
    executions = sorted(e for _, e, _ in rows)
    print()
    print(
        f"right: {right}/{len(rows)}; executions mean {sum(executions) / len(rows):.1f}, "
        f"p95 {executions[max(0, math.ceil(0.95 * len(rows)) - 1)]}, max {executions[-1]}; "
        f"wall time mean {sum(t for _, _, t in rows) / len(rows):.0f} s"
    )
    return 0 if right >= args.need else 1


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


if __name__ == "__main__":
    raise SystemExit(main())
