"""Every built-in probe against the backend as it is, and against each planted bug (CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probes import ProbeContext, get_probe, run_probe, summarize
from probes.demo_backend import NAMES as DEMO_PROBES
from probes.loader import load_backend
from tracker.core.verdicts import Outcome
from tracker.demo.bugs import BROKEN_IMPORT, BUGS, DECODE_STALE_PAGE, Bug, Edit, apply_edits, read_tree, write_tree
from tracker.targets.templates import SGLANG_PROBES

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PROBE_NAMES = list(DEMO_PROBES)
DETERMINISTIC_BUGS = [b for b in BUGS if b is not DECODE_STALE_PAGE]


def planted(tmp_path: Path, edits: list[Edit]) -> Path:
    write_tree(apply_edits(read_tree(PROJECT_ROOT), edits), tmp_path)
    return tmp_path


def verdict(probe: str, root: Path, seed: int = 0) -> Outcome:
    return summarize(run_probe(get_probe(probe), ProbeContext(root=root, seed=seed))).outcome


@pytest.mark.parametrize("probe", PROBE_NAMES)
def test_every_probe_passes_at_head(probe: str) -> None:
    results = run_probe(get_probe(probe), ProbeContext(root=PROJECT_ROOT))
    assert {r.case.id: r.result.outcome for r in results if r.result.outcome is not Outcome.SKIP} == {
        r.case.id: Outcome.PASS for r in results if r.result.outcome is not Outcome.SKIP
    }
    assert any(r.result.outcome is Outcome.PASS for r in results)


@pytest.mark.parametrize("bug", DETERMINISTIC_BUGS, ids=lambda b: b.name)
def test_each_bug_fails_its_probe_and_only_the_probes_on_its_path(bug: Bug, tmp_path: Path) -> None:
    root = planted(tmp_path, [bug.edit])
    failing = {name for name in PROBE_NAMES if verdict(name, root) is Outcome.FAIL}
    assert failing == set(bug.probes)


def test_overwrite_signature_names_the_fields_and_the_offset(tmp_path: Path) -> None:
    root = planted(tmp_path, [BUGS[0].edit])
    results = {r.case.id: r.result for r in run_probe(get_probe("target_verify_metadata"), ProbeContext(root=root))}
    assert "max_seq_len_q off by +2" in (results["N4-T2-bs4-p16"].signature or "")
    assert "cache_seqlens off by -2" in (results["N3-T5-bs4-p16"].signature or "")


@pytest.mark.slow
def test_flaky_bug_fails_some_executions_and_not_others(tmp_path: Path) -> None:
    root = planted(tmp_path, [DECODE_STALE_PAGE.edit])
    outcomes = [verdict(DECODE_STALE_PAGE.probe, root, seed) for seed in range(30)]
    rate = outcomes.count(Outcome.FAIL) / len(outcomes)
    assert set(outcomes) <= {Outcome.PASS, Outcome.FAIL}
    assert 0.15 <= rate <= 0.65, rate
    assert all(verdict(DECODE_STALE_PAGE.probe, PROJECT_ROOT, seed) is Outcome.PASS for seed in range(10))


def test_a_backend_that_does_not_import_is_an_error_not_a_failure(tmp_path: Path) -> None:
    root = planted(tmp_path, [BROKEN_IMPORT])
    result = summarize(run_probe(get_probe("target_verify_metadata"), ProbeContext(root=root)))
    assert result.outcome is Outcome.ERROR
    assert result.signature == "import error: ModuleNotFoundError"


def test_each_load_reads_the_revision_fresh(tmp_path: Path) -> None:
    buggy = planted(tmp_path / "buggy", [BUGS[0].edit])
    module = load_backend(buggy)
    assert Path(module.__file__).parent == buggy / "backend"
    assert "max_seq_len_q = self.speculative_num_draft_tokens" in Path(module.attention_backend.__file__).read_text()
    assert Path(load_backend(PROJECT_ROOT).__file__).parent == PROJECT_ROOT / "backend"
    assert verdict("target_verify_metadata", PROJECT_ROOT) is Outcome.PASS


def test_cuda_cases_skip_on_a_cpu_context() -> None:
    results = run_probe(get_probe("target_verify_attention"), ProbeContext(root=PROJECT_ROOT))
    skipped = {r.case.id for r in results if r.result.outcome is Outcome.SKIP}
    assert skipped == {c.id for c in get_probe("target_verify_attention").cases if c.cuda_only}


BUILT_IN = [*PROBE_NAMES, *SGLANG_PROBES]
LOOK_UP = f"""
import json, sys
from probes.registry import get_probe
probes = [get_probe(name) for name in {BUILT_IN!r}]
hashes = [probe.code_hash for probe in probes]
checks = [probe.check for probe in probes]
check_modules = {{check.partition(":")[0] for check in checks}}
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "backend") or m in check_modules)
print(json.dumps({{"checks": checks, "requires": [list(p.requires) for p in probes], "loaded": loaded}}))
"""


def test_every_built_in_probe_names_its_check_which_looking_it_up_does_not_import() -> None:
    """One convention: a light declaration that names its check by place; the check, and torch,
    the demo backend or SGLang's code with it, load only where a case runs."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", LOOK_UP], capture_output=True, text=True, check=True, env=env, timeout=120
    )
    found = json.loads(done.stdout)
    assert found["loaded"] == []
    assert found["requires"] == [["torch"]] * len(BUILT_IN)
    for name, check in zip(BUILT_IN, found["checks"]):
        if name in PROBE_NAMES:
            assert check == f"probes.demo_backend.judges.{name}:check"
        else:
            assert check.startswith("probes.sglang.") and check.endswith(":check")


def test_unknown_probe_and_case_are_named_with_the_known_ones() -> None:
    with pytest.raises(KeyError, match="known probes: target_verify_metadata"):
        get_probe("nope")
    with pytest.raises(KeyError, match="its cases: N4-T2-bs4-p16"):
        get_probe("target_verify_metadata").case("nope")
