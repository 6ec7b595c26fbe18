"""`regtrack scan` over the whole demo history finds exactly the story's transitions."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from demo_histories import DemoHistories

from tracker.cli.app import main
from tracker.demo.history import DemoManifest

# Every test here rests on a module fixture that measures the demo history with its torch probes.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory, demo_histories: DemoHistories) -> tuple[dict, DemoManifest]:
    home = tmp_path_factory.mktemp("home")
    repo, manifest = demo_histories.shared(150)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REGTRACK_HOME", str(home))
        patch.delenv("REGTRACK_DB_URL", raising=False)
        result = CliRunner().invoke(
            main, ["scan", "--repo", str(repo), "--seed", "0", "--json"], catch_exceptions=False
        )
        again = CliRunner().invoke(main, ["scan", "--repo", str(repo), "--seed", "0", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return {"first": json.loads(result.stdout), "again": json.loads(again.stdout)}, manifest


def by_probe(report: dict, probe: str) -> list[tuple[str, str, str | None]]:
    return [(t["sha"], t["kind"], t["pairs_with"]) for t in report["transitions"] if t["probe"] == probe]


def test_the_overwrite_story_with_its_revert_and_reland(scanned: tuple[dict, DemoManifest]) -> None:
    output, manifest = scanned
    bug = manifest.bugs["target_verify_overwrite"]
    expected = [
        (bug.introduced, "regression", None),
        (bug.fixed, "fix", None),
        (bug.reverted, "regression", bug.fixed),
        (bug.relanded, "fix", bug.fixed),
    ]
    for probe in ("target_verify_metadata", "target_verify_attention"):
        assert by_probe(output["first"], probe) == expected
    story = output["first"]["stories"]["target_verify_metadata"]
    assert story.startswith(f"good since {bug.relanded[:12]} (relands {bug.fixed[:12]}")
    assert f"first broken by {bug.introduced[:12]}" in story


def test_the_swa_bug_and_no_clean_transition_from_untestable_or_flaky_stretches(
    scanned: tuple[dict, DemoManifest],
) -> None:
    output, manifest = scanned
    swa = manifest.bugs["swa_partial_page"]
    assert by_probe(output["first"], "swa_page_table") == [
        (swa.introduced, "regression", None),
        (swa.fixed, "fix", None),
    ]
    assert by_probe(output["first"], "decode_graph_replay") == []
    stretches = output["first"]["stretches"]
    untestable = {(s["first"], s["last"]) for s in stretches if s["kind"] == "untestable"}
    assert untestable == {(manifest.untestable.first, manifest.untestable.last)}
    flaky = [s for s in stretches if s["kind"] == "flaky"]
    assert [(s["probe"], s["first"], s["last"]) for s in flaky] == [
        ("decode_graph_replay", manifest.flaky.first, manifest.flaky.last)
    ]
    every_transition = {t["sha"] for t in output["first"]["transitions"]}
    assert manifest.untestable.first not in every_transition and manifest.flaky.first not in every_transition


def test_a_second_scan_runs_nothing(scanned: tuple[dict, DemoManifest]) -> None:
    output, _ = scanned
    assert output["again"]["executions"] == 0
    assert output["again"]["transitions"] == output["first"]["transitions"]
