"""`regtrack report --json`: the report's content as one object that validates against the schema
shipped beside it, read back against the stored runs; a real demo history scanned, and a small
repository with runs stored directly for the shapes a scan does not make."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from demo_histories import DemoHistories
from gitrepo import git
from jsonschema import Draft202012Validator
from stored_runs import H200, PROBE, Stored, stored_repository

from tracker.cli.app import main
from tracker.core.json_schema import JSON_SCHEMA_VERSION
from tracker.core.verdicts import Outcome, Verdict
from tracker.core.verification import Verification, VerificationStatus
from tracker.report.json_report import schema_text
from tracker.workspace import Workspace

SCHEMA = json.loads(schema_text())
DEMO_PROBES = ("target_verify_attention", "target_verify_metadata")


def regtrack(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_the_schema_is_a_valid_draft_2020_12_schema_of_this_version() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["schema"] == {**SCHEMA["properties"]["schema"], "const": JSON_SCHEMA_VERSION}


def valid(document: Any) -> Any:
    """``document``, after checking it against the report's schema (formats included)."""
    Draft202012Validator(SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER).validate(document)
    return document


def point_values(report: dict[str, Any]) -> dict[tuple[str, str, str, str, str | None, str], tuple[float, bool]]:
    """Each point keyed by probe, case, metric, environment, dtype and the commit's SHA."""
    shas = [c["sha"] for c in report["commits"]]
    return {
        (s["probe"], s["case"], s["metric"], s["environment"], s["dtype"], shas[index]): (value, measured)
        for s in report["series"]
        for index, value, measured in s["points"]
    }


def expanded_cells(report: dict[str, Any], probe: str) -> list[str]:
    """The probe's state at each commit, from its runs of equal cells."""
    states: list[str] = []
    for first, count, state, _runs, _signature in report["cells"][probe]:
        assert first == len(states)
        states.extend([state] * count)
    return states


@pytest.fixture
def stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stored]:
    with stored_repository(tmp_path, monkeypatch) as found:
        found.add(0, {"rel_err": 1e-6, "rel_err_tol": 1e-5})
        found.add(1, {"rel_err": 0.5, "rel_err_tol": 1e-5}, outcome=Outcome.FAIL, signature="off reference")
        found.add(3, {"rel_err": 2e-3}, env="h200", dtype="bfloat16")
        yield found


def test_the_json_validates_and_carries_the_reports_content(stored: Stored) -> None:
    printed = regtrack("report", "--repo", str(stored.repo), "--json")
    assert printed.exit_code == 0, printed.output
    report = valid(json.loads(printed.stdout))
    assert report["schema"] == JSON_SCHEMA_VERSION
    assert [c["sha"] for c in report["commits"]] == stored.line
    assert report["range"] == {"first": stored.line[0], "last": stored.line[-1]}
    assert report["commits"][1]["pr_number"] == 11 and report["commits"][1]["subject"] == "Change 1 (#11)"
    assert expanded_cells(report, PROBE) == ["pass", "fail", "fail", "pass", "pass", "pass"]
    assert report["cells"][PROBE][1] == [1, 2, "fail", 1, "off reference"]
    assert report["measured"] == [0, 1, 3]
    data = stored.report()
    assert point_values(report) == {
        (s.probe, s.case, s.metric, s.environment, s.dtype, p.sha): (p.value, p.measured)
        for s in data.series
        for p in s.points
    }
    assert {(s["device"], s["dtype"], s["metric"], s["tolerance"]) for s in report["series"]} == {
        ("cpu", "float32", "rel_err", 1e-5),
        ("cpu", "float32", "duration_s", None),
        ("NVIDIA H200", "bfloat16", "rel_err", None),
        ("NVIDIA H200", "bfloat16", "duration_s", None),
    }
    assert {e["device"] for e in report["environments"]} == {"cpu", H200.device}
    assert {e["fingerprint"] for e in report["environments"]} == {s["environment"] for s in report["series"]}


def test_html_and_json_together(stored: Stored, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    both = CliRunner().invoke(main, ["report", "--repo", str(stored.repo), "--html", str(page), "--json"])
    assert both.exit_code == 0, both.output
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert len(valid(json.loads(both.stdout))["commits"]) == len(stored.line)  # stdout is the JSON alone
    assert both.stderr.startswith(f"wrote {page}: 6 commits, 1 probes")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "nothing to write; pass --html FILE for the page, --json for JSON on stdout, or both"),
        (("--json", "--probe", "nope"), "--probe nope: no run of it is stored for this repository"),
        (("--json", "--env", "B200"), "--env B200"),
        (("--json", "--html", "."), "is a directory; name a file"),
    ],
)
def test_bad_inputs_are_exit_2_with_one_line(stored: Stored, args: tuple[str, ...], said: str) -> None:
    refused = CliRunner().invoke(main, ["report", "--repo", str(stored.repo), *args])
    assert refused.exit_code == 2, refused.output
    assert said in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    error = refused.stderr.strip().removeprefix("regtrack: error: ")
    if "--json" in args:  # a program reading stdout gets the error as JSON
        assert json.loads(refused.stdout) == {"schema": JSON_SCHEMA_VERSION, "error": error, "exit_code": 2}
    else:
        assert refused.stdout == ""


def test_a_culprits_verification_fits_the_schema() -> None:
    check = Verification(
        VerificationStatus.NOT_CONFIRMED,
        PROBE,
        "a" * 40,
        "b" * 40,
        "still fails without the culprit",
        checked="c" * 40,
        verdict=Verdict.BAD,
        next_steps=("regtrack run aaaa bbbb",),
    )
    verification = Draft202012Validator({"$defs": SCHEMA["$defs"], "$ref": "#/$defs/verification"})
    verification.validate(check.to_json())
    assert not verification.is_valid({**check.to_json(), "status": "maybe"})


@pytest.mark.slow
def test_the_demo_historys_report_validates_and_its_points_are_the_stored_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, demo_histories: DemoHistories
) -> None:
    repo, manifest = demo_histories.shared(60)
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    probes = [option for probe in DEMO_PROBES for option in ("--probe", probe)]
    overwrite = manifest.bugs["target_verify_overwrite"]
    first = git(repo, "rev-list", "--first-parent", "--reverse", "HEAD").split()[0]
    bisected = regtrack(
        "bisect", "--repo", str(repo), "--probe", DEMO_PROBES[1], "--good", first, "--bad", f"{overwrite.fixed}~1"
    )
    assert bisected.exit_code == 1, bisected.output
    scanned = regtrack("scan", "--repo", str(repo), *probes, "--seed", "0", "--workers", "2")
    assert scanned.exit_code == 0, scanned.output
    printed = regtrack("report", "--repo", str(repo), *probes, "--json")
    assert printed.exit_code == 0, printed.output
    report = valid(json.loads(printed.stdout))
    [bisect] = report["bisects"]
    assert (bisect["probe"], bisect["culprit"], bisect["status"]) == (DEMO_PROBES[1], overwrite.introduced, "done")
    assert bisect["verification"] is None or bisect["verification"]["culprit"] == overwrite.introduced
    assert bisect["steps"] and all(step["sha"] in [c["sha"] for c in report["commits"]] for step in bisect["steps"])
    shas = [c["sha"] for c in report["commits"]]
    assert {(t["sha"], t["kind"]) for t in report["transitions"] if t["probe"] == DEMO_PROBES[1]} >= {
        (overwrite.introduced, "regression"),
        (overwrite.fixed, "fix"),
    }
    states = expanded_cells(report, DEMO_PROBES[1])
    assert states[shas.index(overwrite.introduced)] == "fail" and len(states) == len(shas)
    with Workspace.open(repo) as ws:
        runs = ws.store.runs(repo_id=ws.store.repository(ws.repo.path))
    newest_last = sorted((r for r in runs if r.outcome is not Outcome.SKIP), key=lambda r: (r.started_at, r.id))
    stored = {
        (r.probe_name, r.case_id, metric, r.fingerprint, r.dtype, r.sha): value
        for r in newest_last
        for metric, value in {**r.metrics, "duration_s": r.duration_s}.items()
        if not metric.endswith("_tol")
    }
    measured = {key: value for key, (value, was_measured) in point_values(report).items() if was_measured}
    assert measured and measured.items() <= stored.items()
    rel_err = [s for s in report["series"] if s["probe"] == DEMO_PROBES[0] and s["metric"] == "rel_err"]
    assert rel_err and {s["tolerance"] for s in rel_err} == {1e-5}  # float32 on the CPU
    assert any(not measured for s in rel_err for _, _, measured in s["points"])  # commits that reuse a tree
