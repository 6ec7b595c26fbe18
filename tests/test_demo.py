"""`regtrack demo`: it scans the demo history, the probes' verdicts match the story's intent, the stories
bisect to their culprits and each culprit is confirmed by reverting it, the report is written, and the
commands it suggests next work."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracker.cli.app import main
from tracker.core.json_schema import JSON_SCHEMA_VERSION
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
    return (
        {"first": json.loads(result.stdout), "again": json.loads(again.stdout), "stderr": result.stderr},
        manifest,
        path,
    )


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


def test_the_demos_json_carries_the_schema_version(demo_run: tuple[dict, DemoManifest, Path]) -> None:
    output, _, _ = demo_run
    assert output["first"]["schema"] == output["again"]["schema"] == JSON_SCHEMA_VERSION


def test_the_demo_scans_the_whole_line_and_tells_each_step(demo_run: tuple[dict, DemoManifest, Path]) -> None:
    output, manifest, _ = demo_run
    overwrite = manifest.bugs["target_verify_overwrite"]
    found = {(t["probe"], t["sha"], t["kind"]) for t in output["first"]["scan"]["transitions"]}
    probe = overwrite.probe
    assert {(probe, overwrite.introduced, "regression"), (probe, overwrite.fixed, "fix")} <= found
    assert {(probe, overwrite.reverted, "regression"), (probe, overwrite.relanded, "fix")} <= found
    steps = [line for line in output["stderr"].splitlines() if line.startswith("[")]
    assert len(steps) >= output["first"]["scan"]["executions"]


def test_each_culprit_is_confirmed_by_reverting_it(demo_run: tuple[dict, DemoManifest, Path]) -> None:
    output, manifest, _ = demo_run
    checks = [b["verification"] for b in output["first"]["bisects"]]
    assert [c["status"] for c in checks] == ["confirmed"] * 3
    assert checks[1]["undoes"] == manifest.bugs["target_verify_overwrite"].fixed
    assert [c["status"] for c in (b["verification"] for b in output["again"]["bisects"])] == ["confirmed"] * 3


def test_the_report_has_its_plots_and_the_next_commands_run(demo_run: tuple[dict, DemoManifest, Path]) -> None:
    output, manifest, path = demo_run
    page = Path(output["first"]["report"]).read_text()
    assert 'id="metrics"' in page and "data-value=" in page
    compare, issues = output["first"]["next"]
    assert compare.startswith("regtrack compare ") and issues.startswith("regtrack regressions --markdown")
    home = path.parent
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("REGTRACK_HOME", str(home))
        patch.delenv("REGTRACK_DB_URL", raising=False)
        compared = CliRunner().invoke(main, shlex.split(compare)[1:], catch_exceptions=False)
        written = CliRunner().invoke(main, shlex.split(issues)[1:], catch_exceptions=False)
    assert compared.exit_code == 1, compared.output
    assert manifest.bugs["target_verify_overwrite"].reverted[:12] in written.stdout
