"""The pure comparison functions behind every probe verdict."""

from __future__ import annotations

import math

import torch
from hypothesis import given
from hypothesis import strategies as st

from probes.demo_backend.checks import (
    Tolerance,
    attention_metrics,
    attention_verdict,
    field_difference,
    page_table_difference,
    tolerance_for,
)
from probes.demo_backend.reference import reference_attention
from tracker.core.verdicts import Outcome

ints = st.lists(st.integers(-1000, 1000), min_size=1, max_size=16)


@given(ints, st.integers(-50, 50).filter(lambda k: k != 0))
def test_constant_offset_is_named_with_its_sign(values: list[int], offset: int) -> None:
    got = torch.tensor(values) + offset
    assert field_difference("cache_seqlens", got, torch.tensor(values)) == f"cache_seqlens off by {offset:+d}"


@given(ints)
def test_equal_fields_have_no_difference(values: list[int]) -> None:
    assert field_difference("x", torch.tensor(values), torch.tensor(values)) is None


def test_scalar_and_irregular_differences() -> None:
    assert field_difference("max_seq_len_q", 4, 2) == "max_seq_len_q off by +2"
    assert field_difference("cu_seqlens_k", torch.tensor([0, 3, 9]), torch.tensor([0, 3, 7])) == "cu_seqlens_k differs"
    assert "shape" in field_difference("t", torch.zeros(2), torch.zeros(3))


def test_page_table_difference_tells_a_stale_last_page_from_other_damage() -> None:
    rows = [torch.tensor([5, 6, 7]), torch.tensor([1, 2])]
    good = torch.tensor([[5, 6, 7, 0], [1, 2, 9, 9]])
    assert page_table_difference("page_table", good, rows) is None
    stale_last = torch.tensor([[5, 6, 3, 0], [1, 2, 9, 9]])
    assert page_table_difference("page_table", stale_last, rows) == "page_table stale in last page"
    wrong_first = torch.tensor([[4, 6, 7, 0], [1, 2, 9, 9]])
    assert page_table_difference("page_table", wrong_first, rows) == "page_table wrong"


@given(st.floats(0, 1e-3), st.floats(0, 1e-3))
def test_verdict_is_a_pure_function_of_metrics_and_tolerance(rel: float, abs_: float) -> None:
    metrics = {"rel_err": rel, "max_abs_err": abs_, "mismatch_frac": 0.0, "nonfinite": 0.0}
    loose, tight = Tolerance(rel_err=1e-2, max_abs_err=1e-2), Tolerance(rel_err=rel / 2, max_abs_err=1.0)
    assert attention_verdict(metrics, loose) is Outcome.PASS
    assert attention_verdict(metrics, tight) is (Outcome.FAIL if rel > 0 else Outcome.PASS)


def test_nan_output_fails_and_is_counted() -> None:
    ref = torch.ones(4, 2, 8)
    out = ref.clone()
    out[1, 0, 3] = math.nan
    metrics = attention_metrics(out, ref, tolerance_for("float32"))
    assert metrics["nonfinite"] == 1
    assert attention_verdict(metrics, tolerance_for("float32")) is Outcome.FAIL


def _two_requests(max_len: int, page: int = 16, heads: int = 2, dim: int = 32) -> tuple[torch.Tensor, ...]:
    """A paged KV cache holding two requests of up to ``max_len`` tokens on shuffled pages."""
    generator = torch.Generator().manual_seed(0)
    pages_per_req = -(-max_len // page)
    k = torch.randn(2 * pages_per_req, heads, page, dim, generator=generator, dtype=torch.float64)
    v = torch.randn(2 * pages_per_req, heads, page, dim, generator=generator, dtype=torch.float64)
    pages = torch.randperm(2 * pages_per_req, generator=generator).view(2, pages_per_req)
    req_to_token = (pages[:, :, None] * page + torch.arange(page)).flatten(1).int()
    return req_to_token, k, v


def test_known_wrong_attention_outputs_fail() -> None:
    """A non-causal output, and one whose query rows were grouped by N instead of T, both fail."""
    prefixes, T, N = [40, 23], 2, 4
    req_to_token, k, v = _two_requests(max(prefixes) + N)
    q = torch.randn(2 * T, 4, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    tolerance = tolerance_for("float32")
    kv_lens = [p + T for p in prefixes]
    reference = reference_attention(req_to_token, k, v, [0, 1], kv_lens, q, T, torch.float64)
    assert attention_verdict(attention_metrics(reference.float(), reference, tolerance), tolerance) is Outcome.PASS

    non_causal = torch.cat(
        [
            reference_attention(req_to_token, k, v, [b], [kv_lens[b]], q[i : i + 1], 1, torch.float64)
            for i, b in enumerate([0, 0, 1, 1])
        ]
    )
    assert attention_verdict(attention_metrics(non_causal, reference, tolerance), tolerance) is Outcome.FAIL

    grouped_by_n = reference_attention(req_to_token, k, v, [0], [prefixes[0] + N], q, N, torch.float64)
    assert attention_verdict(attention_metrics(grouped_by_n, reference, tolerance), tolerance) is Outcome.FAIL
