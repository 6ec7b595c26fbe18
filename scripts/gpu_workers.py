"""k-ary bisection with W probe workers, one per GPU (round-robin when there are fewer GPUs).

    python scripts/gpu_workers.py [--workers 1 2 4] [--device cuda] [--executor local] [--commits 1024]

Builds the demo history and bisects the target-verify overwrite bug (good: the commit that mends
the untestable stretch; bad: the parent of the fix) with ``--strategy kary --workers W`` for each
W, each in a fresh database, through the command line a user types. Prints one row per W: rounds,
executions, wall time, the culprit, and the ``CUDA_VISIBLE_DEVICES`` each worker was given (from
its log). Exits 1 when a W names another culprit than the others or than the planted one.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tracker.demo.history import build_demo_history  # noqa: E402

PROBE = "target_verify_attention"
BUG = "target_verify_overwrite"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--executor", choices=("local", "ray"), default="local")
    parser.add_argument("--commits", type=int, default=1024)
    parser.add_argument("--probe", default=PROBE)
    args = parser.parse_args(argv)
    if min(args.workers) < 1:
        print("gpu_workers: --workers takes counts of at least 1", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="regtrack-gpu-workers-"))
    manifest = build_demo_history(work / "demo", args.commits)
    good, bad, planted = manifest.untestable.mended, f"{manifest.bugs[BUG].fixed}^1", manifest.bugs[BUG].introduced
    print(
        f"demo: {args.commits} commits; bisect {args.probe} {good[:12]}..{bad}, planted culprit {planted[:12]}; "
        f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'all')} GPUs visible",
        flush=True,
    )
    print("| W | rounds | executions | wall s | culprit | right | worker GPUs |")
    print("|---:|---:|---:|---:|---|---|---|")
    culprits = set()
    for workers in args.workers:
        home = work / f"home-{workers}"
        command = [
            sys.executable,
            "-m",
            "tracker.cli",
            "bisect",
            "--repo",
            str(work / "demo"),
            "--probe",
            args.probe,
            "--good",
            good,
            "--bad",
            bad,
            "--strategy",
            "kary",
            "--workers",
            str(workers),
            "--device",
            args.device,
            "--executor",
            args.executor,
            "--json",
        ]
        env = {
            **os.environ,
            "REGTRACK_HOME": str(home),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        env.pop("REGTRACK_DB_URL", None)
        started = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        (work / f"bisect-{workers}.log").write_text(done.stdout + done.stderr)
        try:
            report = json.loads(done.stdout)
        except json.JSONDecodeError:
            print(
                f"| {workers} | - | - | {wall:.1f} | "
                f"exit {done.returncode}: {(done.stderr.strip().splitlines() or ['?'])[-1]} | no | |"
            )
            culprits.add(None)
            continue
        culprit = report["culprit"]
        culprits.add(culprit)
        print(
            f"| {workers} | {report['rounds']} | {report['executions']} | {wall:.1f} | {(culprit or '-')[:12]} | "
            f"{'yes' if culprit == planted else 'no'} | {worker_gpus(home)} |",
            flush=True,
        )
    print(f"\nwork directory: {work}")
    return 0 if culprits == {planted} else 1


def worker_gpus(home: Path) -> str:
    """The CUDA_VISIBLE_DEVICES each worker logged at its start, by slot."""
    seen = {}
    for log in sorted(home.rglob("worker-*.log")):
        found = re.search(r"CUDA_VISIBLE_DEVICES=(\S*)", log.read_text(errors="replace"))
        seen[log.stem] = found.group(1) if found else "?"
    return ", ".join(f"{name.rsplit('-', 1)[-1]}:{gpu}" for name, gpu in seen.items()) or "none logged"


if __name__ == "__main__":
    sys.exit(main())
