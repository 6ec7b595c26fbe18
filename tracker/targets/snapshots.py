"""Revisions materialised outside the user's checkout, cached by the tree hash of their target paths.

A snapshot is written into a temporary directory inside the cache (``.tmp-<pid>-<random>``), made
read-only, and renamed into place beside a manifest of its files and directories, so a reader only
ever sees complete snapshots. Root ignores permission bits, so every use checks the snapshot against
its manifest and rebuilds one that a revision changed (a file edited, created or removed). A lock
file orders installing and removing snapshots against readers: nobody sees a snapshot without its
manifest, or loses one between checking it and using it.

A target's setup command (``tracker.targets.setup``) runs in the scratch directory before it is
sealed; such a snapshot is named by its tree, paths and setup command, and is built by one process
at a time (a lock per snapshot in ``.setup/``), so concurrent commands run a tree's setup once. The
setup's log is kept beside the lock, ``.setup/<snapshot>.log``.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from tracker.core.errors import UsageError
from tracker.targets.revisions import Repo, paths_key, tree_hash_of
from tracker.targets.setup import Setup, run_setup, seal, unseal
from tracker.targets.snapshot_writer import BaseSnapshot, Manifest, first_difference, write_tree

TEMP_PREFIX = ".tmp-"
MANIFEST_SUFFIX = ".manifest"
LOCK_NAME = ".lock"
SETUP_DIR = ".setup"
GC_STAMP = ".gc-stamp"
STALE_TEMP_S = 3600.0
AUTO_GC_EVERY_S = 3600.0
DEFAULT_MAX_BYTES = 10 << 30
DEFAULT_MAX_AGE_S = 30 * 24 * 3600.0


def default_root() -> Path:
    from db.paths import cache_dir

    return cache_dir() / "snapshots"


@dataclass(frozen=True)
class GcReport:
    """What one ``gc`` did; ``dataclasses.asdict`` gives its JSON form."""

    removed_snapshots: int = 0
    freed_bytes: int = 0
    removed_temporaries: int = 0
    kept_snapshots: int = 0
    kept_bytes: int = 0

    def __str__(self) -> str:
        return (
            f"removed {self.removed_snapshots} snapshots ({_mib(self.freed_bytes)}) and "
            f"{self.removed_temporaries} temporaries; kept {self.kept_snapshots} snapshots ({_mib(self.kept_bytes)})"
        )


class _Use(NamedTuple):
    snapshot: Path
    used_at: float
    size: int


class SnapshotCache:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else default_root()
        self._swept = False
        self._recent: dict[tuple[str, ...], tuple[str, Path]] = {}
        """The last snapshot handed out per set of paths: the base the next one shares files with."""

    def materialise(self, repo: Repo, sha: str, paths: Sequence[str], setup: Setup | None = None) -> Path:
        """A read-only directory holding ``paths`` as committed at ``sha`` (and built by ``setup``); commits
        with the same target tree share it. Marks it used now, for ``gc``. Raises SetupFailed."""
        sha = repo.resolve(sha)
        objects = repo.path_objects([sha], paths)[sha]
        target = self.root / snapshot_name(tree_hash_of(objects), paths, setup.command if setup else None)
        self._make_root()
        if not self._swept:
            self._swept = True
            self._remove_stale_temporaries()
        with self._disk_errors(sha):
            with self._locked(shared=True):
                if self._reuse(target):
                    self._recent[tuple(paths)] = (sha, target)
                    return target
            if setup is None:
                self._build(repo, sha, paths, target, None, self._base(paths, sha, target))
                self._recent[tuple(paths)] = (sha, target)
            else:
                with self._building(target):
                    with self._locked(shared=True):
                        if self._reuse(target):
                            return target
                    self._build(repo, sha, paths, target, setup)
        return target

    def setup_log(self, snapshot: Path) -> Path:
        """Where the setup of ``snapshot`` (a path ``materialise`` returns or would) logs."""
        return self.root / SETUP_DIR / f"{snapshot.name}.log"

    def _base(self, paths: Sequence[str], sha: str, target: Path) -> BaseSnapshot | None:
        """A snapshot whose unchanged files the new ``target`` shares: ``target`` itself when a case changed
        it (the same tree, so all but what the case changed), else the one of ``paths`` handed out last."""
        recent = (sha, target) if target.is_dir() else self._recent.get(tuple(paths))
        if recent is None:
            return None
        sha, snapshot = recent
        try:
            manifest = json.loads(manifest_path(snapshot).read_text())
        except (OSError, ValueError):
            return None
        return BaseSnapshot(snapshot, sha, manifest)

    def _build(
        self,
        repo: Repo,
        sha: str,
        paths: Sequence[str],
        target: Path,
        setup: Setup | None,
        base: BaseSnapshot | None = None,
    ) -> None:
        scratch = _new_temporary(self.root)
        try:
            manifest = write_tree(repo, sha, paths, scratch, base)
            if setup is not None:
                unseal(scratch)
                run_setup(setup, scratch, self.setup_log(target))
                manifest = seal(scratch)
            with self._locked():
                if not self._reuse(target):
                    self._install(scratch, manifest, target)
        finally:
            remove_tree(scratch)

    def snapshots(self) -> list[Path]:
        """The complete snapshots, most recently used first."""
        return [snapshot for snapshot, _ in self._used()]

    def gc(self, max_bytes: int | None, max_age_s: float | None, min_idle_s: float = 3600.0) -> GcReport:
        """Remove snapshots unused for over ``max_age_s``, then the least recently used until the rest take at most
        ``max_bytes``, but none used within ``min_idle_s`` (a probe may be running in it); also stale temporaries
        and manifests without a snapshot. None leaves that bound out."""
        if not self.root.is_dir():
            return GcReport()
        temporaries = self._remove_stale_temporaries()
        sizes = {snapshot: _size(snapshot) for snapshot in self.snapshots()}
        with self._locked():
            uses = [_Use(path, at, sizes[path] if path in sizes else _size(path)) for path, at in self._used()]
            doomed = _doomed(uses, time.time(), max_bytes, max_age_s, min_idle_s)
            evicted = [self._evict(use.snapshot) for use in doomed]
            self._remove_orphan_manifests()
        for path in evicted:
            remove_tree(path)
        kept = [use for use in uses if use not in doomed]
        return GcReport(
            removed_snapshots=len(doomed),
            freed_bytes=sum(use.size for use in doomed),
            removed_temporaries=temporaries,
            kept_snapshots=len(kept),
            kept_bytes=sum(use.size for use in kept),
        )

    def auto_gc(self) -> GcReport | None:
        """``gc`` with the default bounds, at most once an hour per cache: for commands to call as they finish.
        A cache this process cannot write to is left as it is: the command's own work is done."""
        stamp = self.root / GC_STAMP
        if not self.root.is_dir() or (stamp.exists() and time.time() - stamp.stat().st_mtime < AUTO_GC_EVERY_S):
            return None
        try:
            stamp.touch()
            return self.gc(DEFAULT_MAX_BYTES, DEFAULT_MAX_AGE_S)
        except OSError:
            return None

    def _reuse(self, target: Path) -> bool:
        if not target.is_dir() or modified_file(target) is not None:
            return False
        os.utime(target)
        return True

    def _install(self, scratch: Path, manifest: Manifest, target: Path) -> None:
        """Under the exclusive lock: replace a modified copy, manifest first, so a crash leaves only an orphan."""
        if os.path.lexists(target):
            remove_tree(self._evict(target))
        descriptor, written = tempfile.mkstemp(prefix=_temporary_prefix(), suffix=MANIFEST_SUFFIX, dir=self.root)
        with open(descriptor, "w") as file:
            json.dump(dict(sorted(manifest.items())), file)
        os.replace(written, manifest_path(target))
        os.rename(scratch, target)
        os.utime(target)

    def _evict(self, snapshot: Path) -> Path:
        """Under the exclusive lock: rename the snapshot to a temporary and drop its manifest; the temporary."""
        doomed = _new_temporary(self.root)
        try:
            os.rename(snapshot, doomed)
        except FileNotFoundError:
            pass
        manifest_path(snapshot).unlink(missing_ok=True)
        return doomed

    def _used(self) -> list[tuple[Path, float]]:
        """Each snapshot with when it was last used, most recent first."""
        used = []
        for entry in _entries(self.root):
            if entry.is_dir(follow_symlinks=False) and not entry.name.startswith("."):
                used_at = _mtime(entry)
                if used_at is not None:
                    used.append((Path(entry.path), used_at))
        return sorted(used, key=lambda pair: pair[1], reverse=True)

    def _remove_stale_temporaries(self) -> int:
        """Remove temporaries whose process is gone or that are older than STALE_TEMP_S; how many went."""
        cutoff = time.time() - STALE_TEMP_S
        stale = [entry for entry in _entries(self.root) if entry.name.startswith(TEMP_PREFIX) and _stale(entry, cutoff)]
        for entry in stale:
            remove_tree(Path(entry.path))
        return len(stale)

    def _remove_orphan_manifests(self) -> None:
        for entry in _entries(self.root):
            if entry.name.endswith(MANIFEST_SUFFIX) and not entry.name.startswith("."):
                if not os.path.isdir(entry.path[: -len(MANIFEST_SUFFIX)]):
                    Path(entry.path).unlink(missing_ok=True)

    @contextmanager
    def _locked(self, shared: bool = False) -> Iterator[None]:
        descriptor = os.open(self.root / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)

    @contextmanager
    def _building(self, target: Path) -> Iterator[None]:
        """Held while one process builds ``target`` with a setup: the others wait, then reuse it."""
        locks = self.root / SETUP_DIR
        locks.mkdir(exist_ok=True)
        descriptor = os.open(locks / f"{target.name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)

    @contextmanager
    def _disk_errors(self, sha: str) -> Iterator[None]:
        """Any OSError while writing is the disk's (git's own failures are RuntimeErrors): one line with a way out."""
        try:
            yield
        except OSError as error:
            reason = os.strerror(error.errno or errno.EIO)
            raise UsageError(
                f"{reason[:1].lower()}{reason[1:]} while materialising {sha[:12]} into {self.root}; "
                "free space, run `regtrack gc`, or set REGTRACK_HOME to another disk"
            ) from None

    def _make_root(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UsageError(
                f"cannot create the snapshot cache {self.root}: {error.strerror}; "
                "set REGTRACK_HOME to a writable directory"
            ) from None


def snapshot_name(tree_hash: str, paths: Sequence[str], setup: Sequence[str] | None = None) -> str:
    """The tree hash plus a digest of the paths (the same tree under another path is laid out differently)
    and of the setup command, if any (another setup builds another snapshot)."""
    layout = paths_key(paths) if setup is None else "\0".join([paths_key(paths), "setup", *setup])
    return f"{tree_hash}-{hashlib.sha256(layout.encode()).hexdigest()[:12]}"


def manifest_path(snapshot: Path) -> Path:
    return snapshot.with_name(snapshot.name + MANIFEST_SUFFIX)


def modified_file(snapshot: Path) -> str | None:
    """The first path of ``snapshot`` that differs from its manifest (``first_difference``: a file edited,
    created or removed), or "." when the manifest is missing or unreadable; None when intact."""
    try:
        recorded = json.loads(manifest_path(snapshot).read_text())
    except (OSError, ValueError):
        return "."
    return first_difference(snapshot, recorded)


def remove_tree(path: Path) -> None:
    """Remove a file or directory tree, making its read-only directories writable first."""
    if not os.path.isdir(path) or os.path.islink(path):
        if os.path.lexists(path):
            path.unlink(missing_ok=True)
        return
    for directory, _, _ in os.walk(path):
        try:
            os.chmod(directory, 0o755)
        except OSError:
            pass
    shutil.rmtree(path, ignore_errors=True)


def _doomed(
    uses: list[_Use], now: float, max_bytes: int | None, max_age_s: float | None, min_idle_s: float
) -> list[_Use]:
    """``uses``, newest first, that ``gc`` removes: the too old, then the least recent over ``max_bytes``."""
    idle = [use for use in uses if now - use.used_at >= min_idle_s]
    doomed = [use for use in idle if max_age_s is not None and now - use.used_at > max_age_s]
    total = sum(use.size for use in uses if use not in doomed)
    for use in reversed(idle):
        if max_bytes is None or total <= max_bytes:
            break
        if use not in doomed:
            doomed.append(use)
            total -= use.size
    return doomed


def _temporary_prefix() -> str:
    return f"{TEMP_PREFIX}{os.getpid()}-"


def _new_temporary(root: Path) -> Path:
    return Path(tempfile.mkdtemp(prefix=_temporary_prefix(), dir=root))


def _stale(entry: os.DirEntry[str], cutoff: float) -> bool:
    """Made by a process no longer alive on this host, or older than the cutoff (its pid may be reused)."""
    owner = entry.name[len(TEMP_PREFIX) :].split("-", 1)[0]
    if owner.isdigit() and not _alive(int(owner)):
        return True
    used_at = _mtime(entry)
    return used_at is not None and used_at < cutoff


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _entries(root: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(root) as entries:
            return list(entries)
    except FileNotFoundError:
        return []


def _mtime(entry: os.DirEntry[str]) -> float | None:
    """None when the entry went away meanwhile."""
    try:
        return entry.stat(follow_symlinks=False).st_mtime
    except FileNotFoundError:
        return None


def _size(snapshot: Path) -> int:
    """The bytes of every file under ``snapshot``, the caches that probes wrote included."""
    total = 0
    for directory, _, files in os.walk(snapshot):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_size
            except FileNotFoundError:
                pass
    return total


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"
