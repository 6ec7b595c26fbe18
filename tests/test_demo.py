"""`regtrack demo`: the probes' verdicts on the demo history match the story's intent, found by
running the probes, and both stories bisect to their culprits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracker.cli.app import main
from tracker.demo.manifest import DemoManifest, manifest_path

# Every test here rests on a module fixture that measures the demo history with its torch probes.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, DemoManifest, Path]:
    home = tmp_path_factory.mktemp("home")
    path = home / "demo"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REGTRACK_HOME", str(home))
        patch.delenv("REGTRACK_DB_URL", raising=False)
        result = CliRunner().invoke(main, ["demo", str(path), "--commits", "60", "--json"], catch_exceptions=False)
        again = CliRunner().invoke(main, ["demo", str(path), "--commits", "60", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert again.exit_code == 0, again.output
    manifest = DemoManifest.from_json(manifest_path(path).read_text())
    return {"first": json.loads(result.stdout), "again": json.loads(again.stdout)}, manifest, path


def test_every_key_commit_gets_the_verdict_the_story_intends(demo_run: tuple[dict, DemoManifest, Path]) -> None:
    output, _, _ = demo_run
    rows = output["first"]["verdicts"]
    assert len(rows) == 12
    for row in rows:
        for probe, expected in row["expected"].items():
            seen = row["verdicts"][probe]
            if expected == "flaky":
                assert seen in {"good", "bad"}, (row["event"], probe)
            else:
                assert seen == expected, (row["event"], probe, seen, expected)
    head = rows[-1]
    assert set(head["verdicts"].values()) == {"good"}


def test_the_stories_bisect_to_their_culprits(demo_run: tuple[dict, DemoManifest, Path]) -> None:
    output, manifest, _ = demo_run
    overwrite, swa = manifest.bugs["target_verify_overwrite"], manifest.bugs["swa_partial_page"]
    culprits = [b["culprit"] for b in output["first"]["bisects"]]
    assert culprits == [overwrite.introduced, overwrite.reverted, swa.introduced]
    assert output["first"]["bisects"][1]["subject"].startswith('Revert "')


def test_a_second_demo_reuses_the_history_and_every_result(demo_run: tuple[dict, DemoManifest, Path]) -> None:
    output, _, _ = demo_run
    assert [b["executions"] for b in output["again"]["bisects"]] == [0, 0, 0]
    assert [b["culprit"] for b in output["again"]["bisects"]] == [b["culprit"] for b in output["first"]["bisects"]]
