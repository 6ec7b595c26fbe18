"""A small real repository with runs stored directly in its real SQLite store: what the report's
series and JSON tests read back, without running a probe."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from gitrepo import GitRepo

from tracker.core.records import EnvironmentInfo, RunRecord, RunRow
from tracker.core.verdicts import Outcome
from tracker.report.model import ReportData
from tracker.reporting import build_report
from tracker.workspace import Workspace

T0 = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
CPU = EnvironmentInfo(device="cpu", torch="2.13.0", python="3.11.7", host="ci")
H200 = EnvironmentInfo(device="cuda", gpu_name="NVIDIA H200", compute_capability="9.0", torch="2.13.0", host="gpu")
PROBE = "attention"
CONTENTS = ["one", "two", None, "three", None, "one"]
"""The target file at each commit (None: unchanged), so trees repeat: c2 = c1, c4 = c3, c5 = c0."""


@dataclass
class Stored:
    """The repository, its workspace, and what a test needs to store runs in it."""

    repo: Path
    ws: Workspace
    repo_id: int
    line: list[str]
    trees: dict[str, str]
    probe_id: int
    env_ids: dict[str, int]
    clock: int = 0

    def add(self, at: int, metrics: dict[str, Any], env: str = "cpu", **fields: Any) -> int:
        """One run at commit ``at`` of the line, started after every run stored before it."""
        self.clock += 1
        sha = self.line[at]
        record = RunRecord(
            repo_id=self.repo_id,
            sha=sha,
            tree_hash=self.trees[sha],
            environment_id=self.env_ids[env],
            probe_id=self.probe_id,
            case_id="bs4_T2_N4",
            settings_key="settings-a",
            dtype="float32",
            outcome=Outcome.PASS,
            metrics=metrics,
            signature=None,
            detail="",
            duration_s=0.5 + at,
            started_at=T0 + timedelta(minutes=self.clock),
            attempt=1,
            seed=0,
            trigger="run",
        )
        run_id = self.ws.store.add_run(replace(record, **fields))
        assert run_id is not None
        return run_id

    def report(self) -> ReportData:
        return build_report(self.ws, None, (PROBE,), None)

    def stored_runs(self) -> list[RunRow]:
        return self.ws.store.runs(repo_id=self.repo_id)


@contextmanager
def stored_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stored]:
    """Six commits on ``main`` (see ``CONTENTS``) and a store under ``tmp_path/home``, which
    ``REGTRACK_HOME`` names while it is open, so the CLI finds the same store."""
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    repo = GitRepo(tmp_path / "repo")
    for n, text in enumerate(CONTENTS):
        repo.commit(f"Change {n} (#{10 + n})", {"attention.py": text} if text else None)
    ws = Workspace.open(repo.path)
    try:
        line = ws.repo.line("main")
        repo_id = ws.store.repository(ws.repo.path)
        ws.store.record_commits(repo_id, ws.repo.commit_infos(line))
        env_ids = {"cpu": ws.store.environment(CPU), "h200": ws.store.environment(H200)}
        trees = ws.repo.tree_hashes(line, ws.target.paths)
        yield Stored(repo.path, ws, repo_id, line, trees, ws.store.probe_version(PROBE, 1, "c0de"), env_ids)
    finally:
        ws.close()
