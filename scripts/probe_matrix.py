"""Every built-in probe at the backend as it is and with each demo bug planted: a verdict table.

    python scripts/probe_matrix.py [--device cuda --dtype bfloat16] [--flaky-seeds 20] [--json FILE]

Prints one row per (variant, probe): outcome, signature, attention error figures and time. For the
flaky bug it also runs its probe over ``--flaky-seeds`` seeds and prints the failure rate.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probes import ProbeContext, all_probes, get_probe, run_probe, summarize  # noqa: E402
from tracker.core.verdicts import Outcome  # noqa: E402
from tracker.demo.bugs import BUGS, DECODE_STALE_PAGE, apply_edits, read_tree, write_tree  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@click.command()
@click.option("--device", default="cpu", show_default=True)
@click.option("--dtype", default="float32", show_default=True)
@click.option("--flaky-seeds", default=20, show_default=True, help="executions of the flaky bug's probe")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), help="also write rows here")
def main(device: str, dtype: str, flaky_seeds: int, json_path: Path | None) -> None:
    source = read_tree(ROOT)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        variants = {"head": ROOT}
        for bug in BUGS:
            variants[bug.name] = Path(tmp) / bug.name
            write_tree(apply_edits(source, [bug.edit]), variants[bug.name])
        for variant, root in variants.items():
            for probe in all_probes():
                start = time.perf_counter()
                summary = summarize(run_probe(probe, ProbeContext(root=root, device=device, dtype=dtype)))
                rows.append(
                    dict(
                        variant=variant,
                        probe=probe.name,
                        outcome=summary.outcome.value,
                        signature=summary.signature or "",
                        rel_err=summary.metrics.get("rel_err"),
                        max_abs_err=summary.metrics.get("max_abs_err"),
                        seconds=round(time.perf_counter() - start, 2),
                    )
                )
        flaky_root = variants[DECODE_STALE_PAGE.name]
        probe = get_probe(DECODE_STALE_PAGE.probe)
        outcomes = [
            summarize(run_probe(probe, ProbeContext(root=flaky_root, device=device, dtype=dtype, seed=s))).outcome
            for s in range(flaky_seeds)
        ]
    table = Table(title=f"probe verdicts on {device} ({dtype})")
    for column in ("variant", "probe", "outcome", "rel_err", "max_abs_err", "s", "signature"):
        table.add_column(column)
    for r in rows:
        fmt = lambda v: "" if v is None else f"{v:.2e}"  # noqa: E731
        table.add_row(
            r["variant"],
            r["probe"],
            r["outcome"],
            fmt(r["rel_err"]),
            fmt(r["max_abs_err"]),
            str(r["seconds"]),
            r["signature"][:90],
        )
    console = Console(width=200)
    console.print(table)
    fails = outcomes.count(Outcome.FAIL)
    console.print(
        f"flaky bug {DECODE_STALE_PAGE.name}: {DECODE_STALE_PAGE.probe} "
        f"failed {fails}/{flaky_seeds} executions ({fails / flaky_seeds:.0%})"
    )
    if json_path:
        json_path.write_text(json.dumps({"rows": rows, "flaky_fail_rate": fails / flaky_seeds}, indent=2))


if __name__ == "__main__":
    main()
