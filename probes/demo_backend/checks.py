"""Comparisons that turn a probe's observations into metrics, verdicts and failure signatures.

Pure functions over tensors and numbers: verdicts can be recomputed from stored metrics under
another tolerance without running anything.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tracker.core.verdicts import Outcome


def field_difference(name: str, got: int | torch.Tensor, want: int | torch.Tensor) -> str | None:
    """None when equal; ``"<name> off by +k"`` when every entry is off by the same k; else how many differ."""
    got_t, want_t = torch.as_tensor(got).cpu().long(), torch.as_tensor(want).cpu().long()
    if got_t.shape != want_t.shape:
        return f"{name} shape {tuple(got_t.shape)} != {tuple(want_t.shape)}"
    delta = got_t - want_t
    if not delta.any():
        return None
    if (delta == delta.flatten()[0]).all():
        return f"{name} off by {int(delta.flatten()[0]):+d}"
    return f"{name} differs"


@dataclass(frozen=True)
class Tolerance:
    """Bounds on attention error against a higher-precision reference."""

    rel_err: float
    max_abs_err: float


TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(rel_err=1e-9, max_abs_err=1e-8),
    "float32": Tolerance(rel_err=1e-5, max_abs_err=1e-4),
    "float16": Tolerance(rel_err=5e-3, max_abs_err=2e-2),
    "bfloat16": Tolerance(rel_err=2e-2, max_abs_err=6e-2),
}


def tolerance_for(dtype: str) -> Tolerance:
    try:
        return TOLERANCES[dtype]
    except KeyError:
        raise KeyError(f"no attention tolerance for dtype {dtype!r}; known: {', '.join(TOLERANCES)}") from None


def attention_metrics(out: torch.Tensor, ref: torch.Tensor, tolerance: Tolerance) -> dict[str, float]:
    """max abs error, relative error ||out-ref||/||ref||, fraction of rows off by more than the
    absolute tolerance, and the count of NaN/Inf entries in ``out``; with the limits the errors are
    judged against as ``<metric>_tol``, so the report draws them beside the errors."""
    out64, ref64 = out.detach().to(torch.float64).cpu(), ref.detach().to(torch.float64).cpu()
    nonfinite = int((~torch.isfinite(out64)).sum())
    diff = (torch.nan_to_num(out64, nan=0.0, posinf=0.0, neginf=0.0) - ref64).abs()
    row_err = diff.flatten(1).amax(1) if diff.dim() > 1 else diff
    return {
        "max_abs_err": float(diff.max()) if diff.numel() else 0.0,
        "rel_err": float(diff.norm() / ref64.norm().clamp_min(1e-30)),
        "mismatch_frac": float((row_err > tolerance.max_abs_err).double().mean()) if row_err.numel() else 0.0,
        "nonfinite": float(nonfinite),
        "rel_err_tol": tolerance.rel_err,
        "max_abs_err_tol": tolerance.max_abs_err,
    }


def attention_verdict(metrics: dict[str, float], tolerance: Tolerance) -> Outcome:
    """Pass when the output is finite and both error measures are inside the tolerance."""
    if metrics["nonfinite"] > 0:
        return Outcome.FAIL
    if metrics["rel_err"] > tolerance.rel_err or metrics["max_abs_err"] > tolerance.max_abs_err:
        return Outcome.FAIL
    return Outcome.PASS


def attention_signature(metrics: dict[str, float], tolerance: Tolerance) -> str | None:
    if attention_verdict(metrics, tolerance) is Outcome.PASS:
        return None
    if metrics["nonfinite"] > 0:
        return "attention output has NaN/Inf"
    return "attention output off reference"


def metadata_differences(
    metadata: object, *, q_len: int, kv_lens: list[int], page_rows: list[torch.Tensor]
) -> list[str]:
    """How target-verify/decode metadata differs from its closed form.

    ``kv_lens`` are the true KV lengths (draft tokens included); ``page_rows[b]`` the page ids
    request b's tokens occupy. Only the pages a request uses are compared: the rest of a row is
    never read.
    """
    kv = torch.tensor(kv_lens, dtype=torch.long)
    expected_cu = torch.nn.functional.pad(torch.cumsum(kv, 0), (1, 0))
    differences = [
        field_difference("max_seq_len_q", metadata.max_seq_len_q, q_len),  # type: ignore[attr-defined]
        field_difference("cache_seqlens", metadata.cache_seqlens, kv),  # type: ignore[attr-defined]
        field_difference("max_seq_len_k", metadata.max_seq_len_k, int(kv.max())),  # type: ignore[attr-defined]
        field_difference("cu_seqlens_k", metadata.cu_seqlens_k, expected_cu),  # type: ignore[attr-defined]
        page_table_difference("page_table", metadata.page_table, page_rows),  # type: ignore[attr-defined]
    ]
    return [d for d in differences if d is not None]


def page_table_difference(name: str, table: torch.Tensor, expected_rows: list[torch.Tensor]) -> str | None:
    """Compare each row's used pages; say whether only the last page of a row is wrong."""
    table = table.cpu().long()
    wrong_last_only, wrong_elsewhere = 0, 0
    for b, want in enumerate(expected_rows):
        got = table[b, : want.numel()] if want.numel() <= table.shape[1] else table[b]
        if got.numel() != want.numel():
            wrong_elsewhere += 1
            continue
        bad = (got != want).nonzero().flatten().tolist()
        if bad == [want.numel() - 1]:
            wrong_last_only += 1
        elif bad:
            wrong_elsewhere += 1
    if wrong_elsewhere:
        return f"{name} wrong"
    if wrong_last_only:
        return f"{name} stale in last page"
    return None


def swa_table_difference(
    label: str, swa_page_table: torch.Tensor, firsts: list[int], rows: list[torch.Tensor]
) -> str | None:
    table = swa_page_table.cpu().long()
    shifted = torch.zeros(table.shape, dtype=torch.long)
    for b, first in enumerate(firsts):
        width = table.shape[1] - first
        shifted[b, :width] = table[b, first:]
    return page_table_difference(f"{label} swa_page_table", shifted, rows)
