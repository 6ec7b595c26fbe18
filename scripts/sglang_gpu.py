"""The SGLang target's GPU checks on real revisions: the consequence of each revision's metadata on
the attention output, and the CPU metadata kernels against the revision's real ones.

    python scripts/sglang_gpu.py ROOT [ROOT ...] [--json FILE]

Each ROOT is a checkout (or a ``git archive`` of ``python/sglang``) of one SGLang revision. For
each it prints: the CPU metadata probe's verdict (``sglang_trtllm_mha_target_verify``); the GPU
probe (``sglang_target_verify_attention``: FlashInfer XQA under a CUDA graph with the metadata the
revision's backend produced after replay, against an fp32 reference), its error figures and the
baked ``max_seq_len_q``; and, for the known metadata kernels the revision's backends define
(TRTLLM MHA's, FA3's, the Triton and FlashInfer backends' KV-index kernels), how many trials the CPU
versions matched exactly. Last, FlashInfer's CUDA-graph wrappers against the CPU stand-ins the
FlashInfer probes use, plan by plan. Needs a CUDA device, FlashInfer and triton.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probes import ProbeContext, get_probe, run_probe, summarize  # noqa: E402
from probes.sglang import target_verify_attention  # noqa: E402
from probes.sglang.kernel_check import check_flashinfer_wrappers, check_kernels  # noqa: E402

IMPORT_ROOTS = ("python",)
METADATA_PROBE = "sglang_trtllm_mha_target_verify"


@click.command()
@click.argument("roots", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), help="Also write the rows as JSON."
)
def main(roots: tuple[Path, ...], json_path: Path | None) -> None:
    import torch

    if not torch.cuda.is_available():
        raise click.UsageError("no CUDA device: run this on the GPU machine")
    for root in roots:
        if not (root / "python" / "sglang").is_dir():
            raise click.UsageError(f"{root} holds no python/sglang; give a checkout of an SGLang revision")
    rows = [_measure(root) for root in roots]
    Console(width=200).print(_table(rows))
    wrappers = check_flashinfer_wrappers()
    wrong = [f"{c.kernel} {c.trial}: {', '.join(c.mismatched)}" for c in wrappers if c.mismatched]
    exact = len(wrappers) - len(wrong)
    print(f"FlashInfer CUDA-graph wrappers against their CPU stand-ins: {exact}/{len(wrappers)} plans exact")
    for line in wrong:
        print(f"  differs: {line}")
    if json_path is not None:
        json_path.write_text(json.dumps({"revisions": rows, "flashinfer_wrappers_differing": wrong}, indent=2))


def _measure(root: Path) -> dict[str, Any]:
    row: dict[str, Any] = {"revision": root.name}
    metadata = get_probe(METADATA_PROBE)
    cpu = summarize(run_probe(metadata, ProbeContext(root=root, import_roots=IMPORT_ROOTS)))
    row["metadata"] = cpu.outcome.value
    row["metadata_signature"] = cpu.signature
    started = time.perf_counter()
    ctx = ProbeContext(root=root, device="cuda", dtype="bfloat16", import_roots=IMPORT_ROOTS)
    [attention] = run_probe(target_verify_attention.PROBE, ctx)
    row["attention"] = attention.result.outcome.value
    row["attention_s"] = round(time.perf_counter() - started, 2)
    row["attention_signature"] = attention.result.signature
    row.update(
        {key: attention.result.metrics.get(key) for key in ("rel_err", "max_abs_err", "mismatch_frac", "baked_q_len")}
    )
    row["attention_detail"] = attention.result.detail
    comparisons = check_kernels(ProbeContext(root=root, device="cuda", import_roots=IMPORT_ROOTS))
    row["kernels"] = sorted({c.kernel for c in comparisons})
    row["kernel_trials"] = len(comparisons)
    row["kernel_mismatches"] = [f"{c.kernel} {c.trial}: {', '.join(c.mismatched)}" for c in comparisons if c.mismatched]
    return row


def _table(rows: list[dict[str, Any]]) -> Table:
    table = Table(
        "revision",
        "metadata (CPU)",
        "attention (XQA, graph)",
        "rel_err",
        "max_abs_err",
        "baked q_len",
        "kernels",
        "trials exact",
    )
    for row in rows:
        kernels = ", ".join(name.rpartition(".")[2] for name in row["kernels"]) or "none defined"
        exact = f"{row['kernel_trials'] - len(row['kernel_mismatches'])}/{row['kernel_trials']}"
        table.add_row(
            row["revision"],
            row["metadata"],
            row["attention"],
            _figure(row["rel_err"]),
            _figure(row["max_abs_err"]),
            _figure(row["baked_q_len"]),
            kernels,
            exact,
        )
    return table


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


if __name__ == "__main__":
    main()
