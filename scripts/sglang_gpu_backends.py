"""The GPU consequence probes of SGLang's FA3, Triton and FlashInfer backends on real revisions.

    python scripts/sglang_gpu_backends.py ROOT [ROOT ...] --backend fa3 [--json FILE]

Each ROOT holds one SGLang revision's ``python/sglang`` (a checkout or a ``git archive``); for each,
``sglang_<backend>_attention`` runs every case (the backend's attention kernel under a CUDA graph
with the revision's replayed metadata, against an fp32 reference) and one row per case is printed:
the outcome, rel_err, max_abs_err, mismatch_frac and the signature. Needs a CUDA device.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probes import ProbeContext, run_probe  # noqa: E402
from probes.sglang.gpu.probes import MODES, PROBES, probe_name  # noqa: E402

METRICS = ("rel_err", "max_abs_err", "mismatch_frac")


@click.command()
@click.argument("roots", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--backend", "backends", multiple=True, type=click.Choice(list(MODES)), help="Default: every backend.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), help="Also write the rows.")
def main(roots: tuple[Path, ...], backends: tuple[str, ...], json_path: Path | None) -> None:
    for root in roots:
        if not (root / "python" / "sglang").is_dir():
            raise click.UsageError(f"{root} holds no python/sglang; give a checkout of an SGLang revision")
    rows = [row for root in roots for backend in backends or tuple(MODES) for row in _measure(root, backend)]
    for row in rows:
        figures = " ".join(f"{key}={_figure(row.get(key))}" for key in METRICS)
        where = f"{row['revision']:<16} {row['probe']:<28} {row['case']:<14} {row['outcome']:<6}"
        print(f"{where} {figures} {row['seconds']:>6.1f}s {row['signature'] or ''}")
    if json_path is not None:
        json_path.write_text(json.dumps(rows, indent=2))


def _measure(root: Path, backend: str) -> list[dict[str, Any]]:
    [probe] = [p for p in PROBES if p.name == probe_name(backend)]
    ctx = ProbeContext(root=root, device="cuda", dtype="bfloat16", import_roots=("python",))
    rows = []
    for case in probe.cases:
        started = time.perf_counter()
        [result] = run_probe(probe, ctx, [case.id])
        rows.append(
            {
                "revision": root.name,
                "probe": probe.name,
                "case": case.id,
                "outcome": result.result.outcome.value,
                "seconds": round(time.perf_counter() - started, 1),
                "signature": result.result.signature,
                "detail": result.result.detail,
                **{key: result.result.metrics.get(key) for key in METRICS},
            }
        )
        print(f"{root.name} {probe.name} {case.id}: {result.result.outcome.value}", file=sys.stderr)
        print(result.result.detail, file=sys.stderr)
    return rows


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


if __name__ == "__main__":
    main()
