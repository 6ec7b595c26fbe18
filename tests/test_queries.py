"""Queries over stored runs: filters and verdicts re-derived under another tolerance, nothing run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from demo_histories import DemoHistories

from tracker.cli.app import main
from tracker.demo.history import DemoManifest


@pytest.fixture(scope="module")
def measured(
    tmp_path_factory: pytest.TempPathFactory, demo_histories: DemoHistories
) -> tuple[Path, DemoManifest, pytest.MonkeyPatch]:
    home = tmp_path_factory.mktemp("home")
    repo, manifest = demo_histories.shared(60)
    patch = pytest.MonkeyPatch()
    patch.setenv("REGTRACK_HOME", str(home))
    patch.delenv("REGTRACK_DB_URL", raising=False)
    overwrite = manifest.bugs["target_verify_overwrite"]
    result = CliRunner().invoke(
        main,
        ["run", "--repo", str(repo), "--probe", "target_verify_attention", manifest.head, overwrite.introduced],
        catch_exceptions=False,
    )
    assert result.exit_code == 1, result.output
    yield repo, manifest, patch
    patch.undo()


def history(repo: Path, *args: str) -> list[dict]:
    result = CliRunner().invoke(main, ["history", "--repo", str(repo), "--json", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["runs"]


def test_filters_by_outcome_range_time_and_environment(measured: tuple[Path, DemoManifest, pytest.MonkeyPatch]) -> None:
    repo, manifest, _ = measured
    everything = history(repo)
    assert {r["outcome"] for r in everything} == {"pass", "fail", "skip"}  # fa2 cases skip on the CPU
    assert {r["sha"] for r in history(repo, "--outcome", "fail")} == {
        manifest.bugs["target_verify_overwrite"].introduced
    }
    assert {
        r["sha"]
        for r in history(repo, "--range", f"{manifest.bugs['target_verify_overwrite'].relanded}..{manifest.head}")
    } == {manifest.head}
    assert history(repo, "--since", "2999-01-01") == []
    assert len(history(repo, "--env", "cpu")) == len(everything)
    unknown = CliRunner().invoke(main, ["history", "--repo", str(repo), "--env", "H200"], catch_exceptions=False)
    # no H200 ran here: a usage error, not an empty answer
    assert unknown.exit_code == 2 and "stored: cpu (" in unknown.stderr
    assert len(history(repo, "--limit", "1")) == 1


def test_a_tolerance_rederives_verdicts_from_stored_metrics(
    measured: tuple[Path, DemoManifest, pytest.MonkeyPatch],
) -> None:
    repo, _, _ = measured
    loose = history(repo, "--tolerance", "10")
    assert {r["outcome_at_tolerance"] for r in loose if r["outcome"] != "skip"} == {"pass"}
    strict = history(repo, "--tolerance", "0", "--abs-tolerance", "0")
    judged = [r for r in strict if r["outcome"] in ("pass", "fail")]
    assert judged and all(r["outcome_at_tolerance"] == "fail" for r in judged if r["metrics"]["rel_err"] > 0)
    table = CliRunner().invoke(main, ["history", "--repo", str(repo), "--tolerance", "10"], catch_exceptions=False)
    assert "at tolerance" in table.stdout
