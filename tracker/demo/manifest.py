"""What the demo history holds where: the story's commits, read back by tests and the walkthrough."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class BugSpan:
    """Where one planted bug appears and disappears on the first-parent line."""

    probe: str
    introduced: str
    fixed: str
    reverted: str | None = None
    relanded: str | None = None
    flaky: bool = False

    def to_dict(self) -> dict[str, object]:
        return {key: value for key, value in asdict(self).items() if value is not None and value is not False}


@dataclass(frozen=True)
class Untestable:
    """The commits whose ``backend`` cannot be imported, and the commit that mends it."""

    first: str
    last: str
    mended: str


@dataclass(frozen=True)
class FlakyStretch:
    """The commits whose bug fails its probe only some of the time."""

    bug: str
    first: str
    last: str
    fixed: str


@dataclass(frozen=True)
class SlowdownSpan:
    """The commit that makes ``probe``'s ``metric`` slower (same results, more work), and its fix."""

    commit: str
    fix: str
    probe: str
    metric: str


@dataclass(frozen=True)
class DemoManifest:
    """What a demo history holds, by SHA: the ground truth that bisects and scans are checked against."""

    commits: int
    head: str
    branch: str
    bugs: dict[str, BugSpan]
    untestable: Untestable
    flaky: FlakyStretch
    merges: tuple[str, ...]
    slowdown: SlowdownSpan | None = None
    """None in a manifest written before the demo planted one."""

    def to_json(self) -> str:
        data = asdict(self)
        data["bugs"] = {name: span.to_dict() for name, span in self.bugs.items()}
        data["merges"] = list(self.merges)
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> DemoManifest:
        data = json.loads(text)
        return cls(
            commits=data["commits"],
            head=data["head"],
            branch=data["branch"],
            bugs={name: BugSpan(**span) for name, span in data["bugs"].items()},
            untestable=Untestable(**data["untestable"]),
            flaky=FlakyStretch(**data["flaky"]),
            merges=tuple(data["merges"]),
            slowdown=SlowdownSpan(**data["slowdown"]) if data.get("slowdown") else None,
        )


def write_manifest(manifest: DemoManifest, file: Path) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(manifest.to_json())


def manifest_path(repo: Path, requested: Path | None = None) -> Path:
    """``requested``, or ``<repo>.manifest.json`` beside the repository.

    A manifest inside the repository would leave its work tree dirty, so that is refused.
    """
    repo = repo.resolve()
    path = requested if requested is not None else repo.with_name(repo.name + ".manifest.json")
    if path.resolve().is_relative_to(repo):
        raise ValueError(f"the manifest {path} must not be inside the demo repository {repo}")
    return path
