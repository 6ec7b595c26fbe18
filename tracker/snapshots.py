"""Revisions materialised outside the user's checkout, cached by the tree hash of their target paths.

A snapshot is extracted from ``git archive`` into a temporary directory inside the cache and renamed
into place, so a reader only ever sees complete snapshots; when two processes build the same one,
the second rename fails and its copy is thrown away.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tracker.errors import UsageError
from tracker.revisions import Repo, paths_key, tree_hash_of

TEMP_PREFIX = ".tmp-"
STALE_TEMP_S = 3600.0
EXTRACT_OPTIONS: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}


def default_root() -> Path:
    from db.paths import cache_dir

    return cache_dir() / "snapshots"


class SnapshotCache:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else default_root()

    def materialise(self, repo: Repo, sha: str, paths: Sequence[str]) -> Path:
        """A directory holding ``paths`` as they are at ``sha``; commits with the same target tree share it."""
        sha = repo.resolve(sha)
        objects = repo.path_objects([sha], paths)[sha]
        target = self.root / snapshot_name(tree_hash_of(objects), paths)
        if target.is_dir():
            os.utime(target)
            return target
        present = [path for path, found in sorted(objects.items()) if found is not None]
        self._make_root()
        scratch = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=self.root))
        installed = False
        try:
            _extract(repo, sha, present, scratch)
            installed = _install(scratch, target)
        finally:
            if not installed:
                shutil.rmtree(scratch, ignore_errors=True)
        os.utime(target)
        return target

    def snapshots(self) -> list[Path]:
        """The complete snapshots, most recently used first."""
        if not self.root.is_dir():
            return []
        found = [entry for entry in self.root.iterdir() if entry.is_dir() and not entry.name.startswith(".")]
        return sorted(found, key=lambda entry: entry.stat().st_mtime, reverse=True)

    def gc(self, keep: int = 64) -> int:
        """Remove all but the ``keep`` most recently used snapshots, and stale temporaries; how many snapshots went."""
        doomed = self.snapshots()[max(keep, 0) :]
        for snapshot in doomed:
            _remove(snapshot, self.root)
        if self.root.is_dir():
            cutoff = time.time() - STALE_TEMP_S
            for entry in self.root.iterdir():
                if entry.name.startswith(TEMP_PREFIX) and entry.stat().st_mtime < cutoff:
                    shutil.rmtree(entry, ignore_errors=True)
        return len(doomed)

    def _make_root(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UsageError(
                f"cannot create the snapshot cache {self.root}: {error.strerror}; "
                "set REGTRACK_HOME to a writable directory"
            ) from None


def snapshot_name(tree_hash: str, paths: Sequence[str]) -> str:
    """The tree hash plus a digest of the paths: the same tree under another path is laid out differently."""
    return f"{tree_hash}-{hashlib.sha256(paths_key(paths).encode()).hexdigest()[:12]}"


def _extract(repo: Repo, sha: str, paths: list[str], into: Path) -> None:
    if not paths:
        return
    process = subprocess.Popen(
        ["git", "archive", "--format=tar", sha, "--", *paths],
        cwd=repo.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    unsafe: tarfile.TarError | None = None
    try:
        with tarfile.open(fileobj=process.stdout, mode="r|") as archive:
            archive.extractall(into, **EXTRACT_OPTIONS)
    except tarfile.TarError as error:
        unsafe = error
    finally:
        process.stdout.close()
        errors = process.stderr.read().decode(errors="replace").strip()
        status = process.wait()
    if status != 0:
        raise RuntimeError(f"git archive {sha} failed in {repo.path}: {errors}")
    if unsafe is not None:
        raise UsageError(f"cannot materialise {sha} of {repo.path}: {unsafe}; the target paths hold an unsafe entry")


def _install(scratch: Path, target: Path) -> bool:
    """Rename into place; False when another process built the same snapshot first."""
    try:
        os.rename(scratch, target)
    except OSError:
        if not target.is_dir():
            raise
        return False
    return True


def _remove(snapshot: Path, root: Path) -> None:
    """Rename first, so the snapshot disappears at once rather than file by file."""
    doomed = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=root)) / snapshot.name
    try:
        os.rename(snapshot, doomed)
    except FileNotFoundError:
        pass
    shutil.rmtree(doomed.parent, ignore_errors=True)
