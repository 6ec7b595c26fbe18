"""The example GitHub Actions workflow installs regtrack from a source that exists and reads as YAML."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

WORKFLOW = Path(__file__).resolve().parent.parent / "scripts" / "regtrack-nightly.yml"
# A requirement that names the distribution alone (with extras, maybe): pip asks the registry for it.
REGISTRY_REQUIREMENT = re.compile(r"regtrack(\[[^\]]*\])?")


def pip_installs(text: str) -> list[list[str]]:
    """The arguments of every ``pip install`` command line in the workflow's shell steps."""
    found = []
    for line in text.splitlines():
        command = line.split("#", 1)[0] if line.lstrip().startswith("#") else line
        if "pip install" in command:
            words = shlex.split(command.strip().removeprefix("run:").strip())
            found.append(words[words.index("install") + 1 :])
    return found


def test_the_install_step_takes_regtrack_from_its_repository_not_the_registry() -> None:
    text = WORKFLOW.read_text()
    installs = pip_installs(text)
    assert installs, "the workflow installs regtrack"
    arguments = [word for words in installs for word in words]
    assert not [word for word in arguments if REGISTRY_REQUIREMENT.fullmatch(word)], arguments
    assert any(word.startswith("regtrack[gpu] @ ") and "${REGTRACK_SOURCE}" in word for word in arguments), arguments
    source = re.search(r'^\s*REGTRACK_SOURCE:\s*"([^"]+)"', text, re.MULTILINE)
    assert source is not None and source.group(1).startswith("git+https://"), "a pip-installable git URL"
    assert "SET ME" in text, "the placeholder is marked for the user to set"
    assert "torch==2.13.0" in text, "the CPU-torch pin note"


def test_the_workflow_has_no_tabs_and_exits_with_the_jobs_status() -> None:
    text = WORKFLOW.read_text()
    assert "\t" not in text, "YAML forbids tabs in indentation"
    assert "regtrack track" in text and "exit ${{ steps.track.outputs.status }}" in text


def test_the_workflow_parses_as_yaml() -> None:
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
    workflow = yaml.safe_load(WORKFLOW.read_text())
    steps = workflow["jobs"]["track"]["steps"]
    install = next(step for step in steps if step.get("name") == "Install regtrack")
    assert "${REGTRACK_SOURCE}" in install["run"]
    assert workflow["jobs"]["track"]["env"]["REGTRACK_SOURCE"].startswith("git+https://")
