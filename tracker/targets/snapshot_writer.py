"""Writing a commit's target paths into an empty directory exactly as committed, then making it read-only.

Trees are read with ``git cat-file --batch`` rather than listed with ``git ls-tree -r``: a listing joins
names with "/", so a hostile entry named "a/b" would pass for a file b inside a directory a. Blobs come
from the same process as raw bytes, so ``.gitattributes`` (export-ignore, export-subst, smudge and eol
filters) cannot make two snapshots with one key differ.
"""

from __future__ import annotations

import enum
import os
import stat
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tracker.core.errors import UsageError
from tracker.targets.revisions import Repo, git_command, git_environment

CHUNK = 1 << 20
Manifest = dict[str, tuple[int, int, int]]


class EntryKind(enum.Enum):
    TREE = "tree"
    REGULAR = "regular"
    EXECUTABLE = "executable"
    SYMLINK = "symlink"
    SUBMODULE = "submodule"


@dataclass(frozen=True)
class Entry:
    path: str
    kind: EntryKind
    oid: str


@dataclass(frozen=True)
class BaseSnapshot:
    """A sealed snapshot of ``paths`` at ``sha`` whose unchanged files a new snapshot may share:
    a file with the same blob and mode is hard-linked from it instead of written (on a history where
    each commit changes a few files, a snapshot then costs its diff, not its size)."""

    root: Path
    sha: str
    manifest: Manifest


def write_tree(repo: Repo, sha: str, paths: Sequence[str], into: Path, base: BaseSnapshot | None = None) -> Manifest:
    """Write ``paths`` as they are at ``sha`` into the empty directory ``into`` and seal it; each written
    file's, symlink's and directory's (size, mtime_ns, mode). Every name is checked before anything is written."""
    with _Objects(repo) as objects:
        writer = _Writer(repo, sha, objects)
        entries = [entry for path in _targets(paths) for entry in writer.plan(path)]
        if base is not None:
            old = _Writer(repo, base.sha, objects)
            writer.shared = _Shared(base, {e.path: e for path in _targets(paths) for e in old.plan(path)})
        return writer.write(entries, into)


@dataclass(frozen=True)
class _Shared:
    base: BaseSnapshot
    entries: dict[str, Entry]

    def source(self, entry: Entry) -> str | None:
        """The base's copy of ``entry`` when it is the same blob with the same mode and still as sealed."""
        if self.entries.get(entry.path) != entry or entry.path not in self.base.manifest:
            return None
        path = os.path.join(self.base.root, entry.path)
        try:
            row = stat_row(path)
        except OSError:
            return None
        return path if row == tuple(self.base.manifest[entry.path]) else None


def seal_directories(root: Path, directories: Sequence[str]) -> Manifest:
    """Make ``root`` and its ``directories`` (relative paths, parents first) read-only; the manifest
    rows of the directories, so that an entry created or removed in one is seen."""
    for directory in reversed(directories):
        os.chmod(os.path.join(root, directory), 0o555)
    os.chmod(root, 0o555)
    return {directory: stat_row(os.path.join(root, directory)) for directory in directories}


def stat_row(path: str) -> tuple[int, int, int]:
    """The (size, mtime_ns, mode) a manifest records of ``path`` (not followed when a symlink)."""
    info = os.lstat(path)
    return info.st_size, info.st_mtime_ns, info.st_mode


def first_difference(root: Path, manifest: Mapping[str, Sequence[int]]) -> str | None:
    """The first path under ``root`` that differs from ``manifest``; None when none does. A file or
    symlink differs when its size, mtime or mode does, a directory when its mode does; an entry gone
    differs, and so does one the manifest does not hold: a file or directory a case created (its
    ``__pycache__`` too), which no later case may see. A manifest written before directories were
    recorded misses them, so its snapshot differs and is rebuilt once.

    Cheap enough to run before every case: one lstat per entry and one listing per directory, nothing read."""
    listings: dict[str, set[str]] = {"": set()}
    top = os.fspath(root)
    for path, expected in manifest.items():
        if _differs(f"{top}/{path}", expected):
            return path
        parent, _, name = path.rpartition("/")
        listings.setdefault(parent, set()).add(name)
        if stat.S_ISDIR(expected[2]):
            listings.setdefault(path, set())
    return _unrecorded(root, listings)


def _differs(path: str, expected: Sequence[int]) -> bool:
    try:
        row = stat_row(path)
    except OSError:
        return True
    if stat.S_ISDIR(expected[2]):
        return row[2] != expected[2]  # its size and mtime move with its entries, which the listings name
    return row != tuple(expected)


def _unrecorded(root: Path, listings: dict[str, set[str]]) -> str | None:
    """The first entry of a recorded directory that the manifest does not hold."""
    for directory, names in listings.items():
        try:
            present = os.listdir(os.path.join(root, directory))
        except OSError:
            return directory or "."
        extra = sorted(set(present) - names)
        if extra:
            return f"{directory}/{extra[0]}" if directory else extra[0]
    return None


def _targets(paths: Sequence[str]) -> list[tuple[str, ...]]:
    """Each target path as components ("" and "." dropped), without those inside another target."""
    split = sorted({tuple(part for part in path.split("/") if part not in ("", ".")) for path in paths})
    return [parts for parts in split if not any(parts[: len(other)] == other for other in split if other != parts)]


def _kind(mode: int) -> EntryKind | None:
    if stat.S_ISREG(mode):
        return EntryKind.EXECUTABLE if mode & stat.S_IXUSR else EntryKind.REGULAR
    return {0o40000: EntryKind.TREE, 0o120000: EntryKind.SYMLINK, 0o160000: EntryKind.SUBMODULE}.get(mode)


def _name_problem(name: bytes) -> str | None:
    if name in (b"", b".", b".."):
        return "a name cannot be empty, '.' or '..'"
    if b"/" in name:
        return "a name cannot hold '/'"
    if name.lower() == b".git":
        return "a '.git' entry would make the snapshot pass for a repository"
    return None


class _Writer:
    def __init__(self, repo: Repo, sha: str, objects: _Objects) -> None:
        self.repo, self.sha, self.objects = repo, sha, objects
        self.oid_bytes = len(sha) // 2
        self.shared: _Shared | None = None

    def plan(self, parts: tuple[str, ...]) -> list[Entry]:
        """The entries of one target path, parents first; none when the path is missing at the commit."""
        parents: list[Entry] = []
        current = Entry("", EntryKind.TREE, f"{self.sha}^{{tree}}")
        for part in parts:
            if current.kind is not EntryKind.TREE:
                return []
            if current.path:
                parents.append(current)
            found = [raw for raw in self._tree(current) if raw[0] == os.fsencode(part)]
            if not found:
                return []
            current = self._entry(current, *found[0], problem="the name appears twice" if len(found) > 1 else None)
        return parents + self._expand(current)

    def write(self, entries: list[Entry], into: Path) -> Manifest:
        """Directories and files first, then symlinks (so no write goes through one), then seal."""
        written: Manifest = {}
        directories, links = [], []
        for entry in dict.fromkeys(entries):
            target = os.path.join(into, entry.path)
            if entry.kind in (EntryKind.TREE, EntryKind.SUBMODULE):
                if entry.path:
                    os.mkdir(target, 0o755)
                    directories.append(entry.path)
            elif entry.kind is EntryKind.SYMLINK:
                links.append(entry)
            else:
                written[entry.path] = self._write_file(entry, target)
        for entry in links:
            written[entry.path] = self._write_link(entry, into)
        for entry in links:
            self._check_link(entry, into)
        return {**written, **seal_directories(into, directories)}

    def _expand(self, top: Entry) -> list[Entry]:
        """``top`` and everything below it, each directory before its contents (the root itself left out)."""
        entries, stack = [], [top]
        while stack:
            entry = stack.pop()
            entries.append(entry)
            if entry.kind is EntryKind.TREE:
                stack.extend(reversed(self._children(entry)))
        return entries if top.path else entries[1:]

    def _children(self, tree: Entry) -> list[Entry]:
        children, seen = [], set()
        for name, mode, oid in self._tree(tree):
            children.append(self._entry(tree, name, mode, oid, "the name appears twice" if name in seen else None))
            seen.add(name)
        return children

    def _entry(self, parent: Entry, name: bytes, mode: int, oid: str, problem: str | None) -> Entry:
        """The entry ``name`` of ``parent``, or a UsageError when writing it could escape or mislead."""
        path = f"{parent.path}/{os.fsdecode(name)}" if parent.path else os.fsdecode(name)
        kind = _kind(mode)
        problem = _name_problem(name) or problem
        if kind is None:
            problem = problem or f"its mode {mode:o} is not a file, directory, symlink or submodule"
        if problem is not None or kind is None:
            raise self._unsafe(path, problem or "")
        return Entry(path, kind, oid)

    def _tree(self, tree: Entry) -> list[tuple[bytes, int, str]]:
        """The (name, mode, object id) of each entry of a tree object, unchecked."""
        data = self.objects.read(tree.oid, "tree")
        entries, position = [], 0
        try:
            while position < len(data):
                space = data.index(b" ", position)
                end = data.index(b"\0", space)
                oid = data[end + 1 : end + 1 + self.oid_bytes]
                if len(oid) != self.oid_bytes:
                    raise ValueError("truncated object id")
                entries.append((data[space + 1 : end], int(data[position:space], 8), oid.hex()))
                position = end + 1 + self.oid_bytes
        except ValueError:
            raise RuntimeError(f"tree {tree.oid} of {self.sha} is malformed in {self.repo.path}") from None
        return entries

    def _write_file(self, entry: Entry, target: str) -> tuple[int, int, int]:
        source = self.shared.source(entry) if self.shared is not None else None
        if source is not None:
            try:
                os.link(source, target, follow_symlinks=False)
                return stat_row(target)
            except OSError:
                pass  # another filesystem, or the link count is full: write it
        executable = entry.kind is EntryKind.EXECUTABLE
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        descriptor = os.open(target, flags, 0o755 if executable else 0o644)
        try:
            self.objects.copy_blob(entry.oid, descriptor)
            os.fchmod(descriptor, 0o555 if executable else 0o444)
            info = os.fstat(descriptor)
        finally:
            os.close(descriptor)
        return info.st_size, info.st_mtime_ns, info.st_mode

    def _write_link(self, entry: Entry, into: Path) -> tuple[int, int, int]:
        pointee = self.objects.read(entry.oid, "blob")
        if not pointee or pointee.startswith(b"/") or b"\0" in pointee:
            raise self._unsafe(entry.path, f"it is a symlink to {os.fsdecode(pointee)!r}, outside the snapshot")
        link = os.path.join(into, entry.path)
        os.symlink(os.fsdecode(pointee), link)
        return stat_row(link)

    def _check_link(self, entry: Entry, into: Path) -> None:
        """Once every symlink exists, so that a chain of them cannot climb out unseen."""
        link = os.path.join(into, entry.path)
        inside, resolved = os.path.realpath(into), os.path.realpath(link)
        if resolved != inside and not resolved.startswith(inside + os.sep):
            raise self._unsafe(entry.path, f"it is a symlink to {os.readlink(link)!r}, outside the snapshot")

    def _unsafe(self, path: str, problem: str) -> UsageError:
        return UsageError(
            f"cannot materialise {self.sha[:12]} of {self.repo.path}: tree entry {path!r} is unsafe; {problem}; "
            "leave this commit out of the range or its path out of the target's paths"
        )


class _Objects:
    """One ``git cat-file --batch`` process, asked for one object at a time."""

    def __init__(self, repo: Repo) -> None:
        self.repo = repo
        try:
            self.process = subprocess.Popen(
                git_command("cat-file", "--batch"),
                cwd=repo.path,
                env=git_environment(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError as error:
            raise self._failed(f"could not start ({error.strerror})") from None

    def __enter__(self) -> _Objects:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate()

    def read(self, name: str, expected: str) -> bytes:
        size = self._header(name, expected)
        data = self._take(size + 1)
        return data[:-1]

    def copy_blob(self, oid: str, descriptor: int) -> None:
        left = self._header(oid, "blob")
        while left:
            chunk = self._take(min(left, CHUNK))
            left -= len(chunk)
            view = memoryview(chunk)
            while view:
                view = view[os.write(descriptor, view) :]
        self._take(1)

    def _header(self, name: str, expected: str) -> int:
        """Ask for ``name``; the size of its content, which follows on stdout."""
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(f"{name}\n".encode())
            self.process.stdin.flush()
        except BrokenPipeError:
            raise self._failed(f"stopped before {name}") from None
        fields = self.process.stdout.readline().split()
        if len(fields) != 3 or fields[1].decode() != expected:
            raise self._failed(f"answered {b' '.join(fields).decode(errors='replace')!r} for {expected} {name}")
        return int(fields[2])

    def _take(self, size: int) -> bytes:
        assert self.process.stdout is not None
        data = self.process.stdout.read(size)
        if len(data) != size:
            raise self._failed("ended in the middle of an object")
        return data

    def _failed(self, what: str) -> RuntimeError:
        return RuntimeError(f"git cat-file --batch {what} in {self.repo.path}")
