"""Revisions of a repository: resolving, first-parent ranges, tree hashes of the target paths, commit metadata.

Bulk questions are one git process each (``git log --stdin``, ``git cat-file --batch-check``), so
thousands of commits cost about as much as a handful. Why a path holds no repository is told with
GitPython (``tracker.targets.work_tree``), only once ``git rev-parse`` has found none.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from tracker.core.errors import UsageError
from tracker.core.records import PR_SUFFIX

if TYPE_CHECKING:
    from tracker.core.records import CommitInfo

PR_MERGE = re.compile(r"^Merge pull request #(\d+)\b")
REVERTS = re.compile(r"^This reverts commit ([0-9a-f]{40}(?:[0-9a-f]{24})?)\b", re.MULTILINE)
LOG_FIELDS = ("%H", "%P", "%an", "%ae", "%at", "%s", "%B")
ROOT_PATH = "."
# Settings given on every git command line, so that no user or repository config changes what
# regtrack parses (colour codes, signature checks, quoting and diff prefixes all alter the output)
# or runs a program of the repository's (a core.fsmonitor hook runs on diff-tree).
NEUTRAL_CONFIG = (
    "color.ui=never",
    "log.showSignature=false",
    "core.quotePath=false",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "core.fsmonitor=false",
)
UNSET_ENVIRONMENT = ("GIT_EXTERNAL_DIFF", "GIT_PAGER", "GIT_DIFF_OPTS")
FETCH_MORE = "fetch more history with `git fetch --deepen N` or `git fetch --unshallow`"


def pr_number(subject: str) -> int | None:
    """The pull request of a squash merge ("Title (#123)") or a merge commit ("Merge pull request #123 ...")."""
    match = PR_SUFFIX.search(subject) or PR_MERGE.match(subject)
    return int(match.group(1)) if match else None


def reverted_sha(message: str) -> str | None:
    match = REVERTS.search(message)
    return match.group(1) if match else None


def paths_key(paths: Sequence[str]) -> str:
    """The one string that names a set of target paths (the store's ``paths_key``)."""
    return ",".join(sorted(set(paths)))


def combine_trees(trees: dict[str, str | None]) -> str:
    """The tree hash of several paths (or of one missing path): sha256 over "path tree_id" lines."""
    lines = "".join(f"{path} {tree or '-'}\n" for path, tree in sorted(trees.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


class Repo:
    """A git repository with a work tree, which regtrack reads and never changes."""

    def __init__(self, path: Path) -> None:
        path = Path(path).expanduser()
        top = _work_tree(path)
        if top is None:
            from tracker.targets.work_tree import no_work_tree

            raise UsageError(no_work_tree(path))
        self.path = top
        self._commits: set[str] = set()
        """Full SHAs known to name commits: an object never changes, so each is asked of git once."""
        self._cut: tuple[str, ...] | None = None

    def __repr__(self) -> str:
        return f"Repo({str(self.path)!r})"

    def resolve(self, rev: str) -> str:
        """The full SHA of the commit ``rev`` names."""
        return self._verify_commits([rev])[rev]

    def head_of(self, branch: str) -> str:
        for ref in (f"refs/heads/{branch}", branch):
            found = self._batch_check([f"{ref}^{{commit}}"])[0]
            if found is not None:
                return found[0]
        raise UsageError(f"unknown branch {branch!r} in {self.path}; check `git branch -a` or the target's branch")

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        shas = self._verify_commits([ancestor, descendant])
        result = self._git("merge-base", "--is-ancestor", shas[ancestor], shas[descendant])
        if result.returncode not in (0, 1):
            raise RuntimeError(f"git merge-base --is-ancestor failed in {self.path}: {_stderr(result)}")
        return result.returncode == 0

    def first_parent_range(self, good: str, bad: str) -> list[str]:
        """The commits after ``good`` up to and including ``bad`` on ``bad``'s first-parent line, oldest first."""
        shas = self._verify_commits([good, bad])
        good_sha, bad_sha = shas[good], shas[bad]
        if good_sha == bad_sha:
            raise UsageError(f"good and bad are the same commit {good_sha}; pick a good commit older than bad")
        lines = self._run(
            "rev-list", "--first-parent", "--ancestry-path", "--parents", "--reverse", f"{good_sha}..{bad_sha}"
        ).splitlines()
        oldest = lines[0].split() if lines else []
        if len(oldest) < 2 or oldest[1] != good_sha:
            # asked only now: on a good range the line's oldest commit shows good is an ancestor
            if not self.is_ancestor(good_sha, bad_sha):
                raise UsageError(self._not_an_ancestor(good_sha, bad_sha))
            merged_by = self._merge_bringing(good_sha, bad_sha)
            raise UsageError(
                f"good {good_sha} is not on the first-parent line of bad {bad_sha} (it came in through merge "
                f"{merged_by}); pick a good commit on that line, such as {merged_by}^1"
            )
        return self._listed([line.split(maxsplit=1)[0] for line in lines])

    def _not_an_ancestor(self, good: str, bad: str) -> str:
        if self.is_ancestor(bad, good):
            return f"good {good} is not an ancestor of bad {bad}; swap good and bad"
        if self.shallow_cut():
            return f"good {good} is not an ancestor of bad {bad} here: {cut_at(self.shallow_cut())}; {FETCH_MORE}"
        return f"good {good} is not an ancestor of bad {bad}; pick a good commit from bad's history"

    def _merge_bringing(self, good: str, bad: str) -> str:
        """The merge through which ``good``, an ancestor of ``bad`` off its first-parent line, came into
        that line: the line's oldest commit that has ``good`` in its history."""
        descendants = set(self._run("rev-list", "--ancestry-path", f"{good}..{bad}").split())
        line = self._run("rev-list", "--first-parent", f"{good}..{bad}").split()
        return next(sha for sha in reversed(line) if sha in descendants)

    def shallow_cut(self) -> tuple[str, ...]:
        """The commits where a shallow clone's history is cut (their parents were not fetched); none in a full clone."""
        if self._cut is None:
            shallow, where = self._run("rev-parse", "--is-shallow-repository", "--git-path", "shallow").splitlines()
            self._cut = tuple(sorted((self.path / where).read_text().split())) if shallow == "true" else ()
        return self._cut

    def history_cut(self, line: Sequence[str]) -> list[str]:
        """The commits of ``line`` where a shallow clone's history is cut: what is older is missing."""
        cut = set(self.shallow_cut())
        return [sha for sha in line if sha in cut]

    def first_parent_history(self, rev: str) -> list[str]:
        """Every commit on ``rev``'s first-parent line, oldest first."""
        return self._listed(self._run("rev-list", "--first-parent", "--reverse", self.resolve(rev)).split())

    def line(self, spec: str) -> list[str]:
        """``A..B``: A and the first-parent commits after it up to B; ``B``: B's whole first-parent line."""
        if ".." in spec:
            first, last = spec.split("..", 1)
            good = self.resolve(first)
            return [good, *self.first_parent_range(good, last or "HEAD")]
        return self.first_parent_history(spec)

    def tree_hash(self, sha: str, paths: Sequence[str]) -> str:
        """For one path present at ``sha``, its object id; otherwise ``combine_trees`` of every path's id."""
        return self.tree_hashes([sha], paths)[sha]

    def tree_hashes(self, shas: Sequence[str], paths: Sequence[str]) -> dict[str, str]:
        """``tree_hash`` of each commit, keyed by the revision as given: two git processes for any number."""
        return {sha: tree_hash_of(trees) for sha, trees in self.path_objects(shas, paths).items()}

    def path_objects(self, shas: Sequence[str], paths: Sequence[str]) -> dict[str, dict[str, str | None]]:
        """For each revision, each path's object id at that commit, or None where the path is missing."""
        full = self._verify_commits(shas)
        unique = sorted(set(paths))
        queries = [_path_spec(full[sha], path) for sha in full for path in unique]
        found = iter(self._batch_check(queries))
        objects = {sha: {path: _object_id(next(found)) for path in unique} for sha in full}
        return {sha: objects[sha] for sha in shas}

    def listing(self, sha: str, paths: Sequence[str]) -> list[tuple[str, str, str]]:
        """(mode, object id, path) of every file and directory of ``paths`` at ``sha``, and of the
        directories above them: what a snapshot of ``paths`` holds. One ``git ls-tree``."""
        full = self._verify_commits([sha])[sha]
        out = self._run_raw("ls-tree", "-r", "-t", "-z", "--full-tree", full, "--", *paths)
        rows = []
        for record in out.split(b"\0"):
            if record:
                meta, _, path = record.partition(b"\t")
                mode, _, oid = meta.decode().split(" ")
                rows.append((mode, oid, os.fsdecode(path)))
        return rows

    def commit_info(self, sha: str) -> CommitInfo:
        """Metadata of one revision, read as ``commit_infos`` reads many: GitPython's commit parser
        ignores a commit's ``encoding`` header, where ``git log`` re-encodes the commit to UTF-8."""
        return self.commit_infos([sha])[0]

    def tracked(self, paths: Sequence[Path]) -> set[Path]:
        """Those of ``paths`` (files of the work tree) that git tracks: a checkout changes them with
        the revision, where an untracked file stays as it is."""
        inside = [path for path in paths if path.is_relative_to(self.path)]
        if not inside:
            return set()
        names = (str(path.relative_to(self.path)) for path in inside)
        out = self._run_raw("ls-files", "-z", "--full-name", "--", *names)
        return {self.path / os.fsdecode(name) for name in out.split(b"\0") if name}

    def current_branch(self) -> str | None:
        """The branch checked out in the work tree; None when HEAD is detached."""
        result = self._git("symbolic-ref", "--quiet", "--short", "HEAD")
        return result.stdout.decode().strip() or None if result.returncode == 0 else None

    def remote_url(self, remote: str = "origin") -> str | None:
        """The URL ``remote`` fetches from; None when the repository has no such remote."""
        result = self._git("config", "--get", f"remote.{remote}.url")
        return result.stdout.decode(errors="replace").strip() or None if result.returncode == 0 else None

    def top_level_entries(self, rev: str) -> list[str]:
        """The names of the files and directories at the root of ``rev``'s tree."""
        out = self._run_raw("ls-tree", "-z", "--name-only", self.resolve(rev))
        return [os.fsdecode(name) for name in out.split(b"\0") if name]

    def commit_infos(self, shas: Sequence[str]) -> list[CommitInfo]:
        """Metadata of each revision, in the order given, from one ``git log`` process."""
        full = self._verify_commits(shas)
        wanted = list(dict.fromkeys(full.values()))
        if not wanted:
            return []
        output = self._run(
            "log",
            "--no-walk=unsorted",
            "--stdin",
            "-z",
            "--no-show-signature",
            "--no-color",
            "--no-notes",
            "--encoding=UTF-8",
            "--format=" + "%x00".join(LOG_FIELDS),
            stdin="".join(f"{sha}\n" for sha in wanted),
        )
        fields = output.split("\0")
        records = [fields[start : start + len(LOG_FIELDS)] for start in range(0, len(fields) - 1, len(LOG_FIELDS))]
        by_sha = {record[0]: _commit_info(record) for record in records}
        return [by_sha[full[sha]] for sha in shas]

    def patch_id(self, sha: str, paths: Sequence[str]) -> str | None:
        """``git patch-id --stable`` of the commit's change to ``paths``: equal for a re-land of the
        same change, whatever its parent; None when the commit does not touch them.

        The diff is plumbing's, in full and as bytes: no config, text conversion or external diff
        program shapes it, and contents in any encoding reach patch-id unchanged."""
        options = ("-p", "--no-color", "--no-ext-diff", "--no-textconv", "--full-index")
        diff = self._run_raw("diff-tree", *options, f"{sha}^1", sha, "--", *paths)
        if not diff:
            return None
        return self._run_raw("patch-id", "--stable", stdin=diff).decode().split()[0]

    def _listed(self, shas: list[str]) -> list[str]:
        """Commits git listed (full SHAs of commits, by construction): known without asking again."""
        self._commits.update(shas)
        return shas

    def _verify_commits(self, revs: Iterable[str]) -> dict[str, str]:
        """Each revision's full commit SHA; an unknown one is a UsageError."""
        revs = list(dict.fromkeys(revs))
        for rev in revs:
            if not rev or rev.startswith("-") or "\n" in rev:
                raise UsageError(f"unknown revision {rev!r} in {self.path}; check `git log`")
        asked = [rev for rev in revs if rev not in self._commits]
        results = self._batch_check([f"{rev}^{{commit}}" for rev in asked])
        for rev, found in zip(asked, results):
            if found is None:
                raise UsageError(self._not_a_commit(rev))
            self._commits.add(found[0])
        answers = {rev: found[0] for rev, found in zip(asked, results) if found is not None}
        return {rev: answers.get(rev, rev) for rev in revs}

    def _not_a_commit(self, rev: str) -> str:
        """Why ``rev`` names no commit. cat-file calls a short SHA ambiguous only when it is asked
        without the ``^{commit}`` peel, so the name is asked again, alone."""
        if self._batch_answers([rev]) == [f"{rev} ambiguous"]:
            return f"ambiguous revision {rev!r} in {self.path}: it matches several objects; give more hex digits"
        if self.shallow_cut():
            cut = cut_at(self.shallow_cut())
            return f"unknown revision {rev!r} in {self.path}: {cut}, so it may be older; {FETCH_MORE}"
        return f"unknown revision {rev!r} in {self.path}; check `git log`"

    def _batch_check(self, objects: Sequence[str]) -> list[tuple[str, str] | None]:
        """``git cat-file --batch-check`` of each object name: (id, type), or None where it does not exist."""
        results: list[tuple[str, str] | None] = []
        for line in self._batch_answers(objects):
            parts = line.rsplit(" ", 2)
            if len(parts) == 3 and parts[2].isdigit():
                results.append((parts[0], parts[1]))
            else:
                results.append(None)
        return results

    def _batch_answers(self, objects: Sequence[str]) -> list[str]:
        """cat-file's answer line for each object name: "<id> <type> <size>" or "<name> missing"/"ambiguous"."""
        if not objects:
            return []
        lines = self._run("cat-file", "--batch-check", stdin="".join(f"{name}\n" for name in objects)).splitlines()
        if len(lines) != len(objects):
            raise RuntimeError(f"git cat-file answered {len(lines)} of {len(objects)} objects in {self.path}")
        return lines

    def _run(self, *args: str, stdin: str | None = None) -> str:
        """The output of a git command that must succeed, as text."""
        return self._run_raw(*args, stdin=stdin.encode() if stdin is not None else None).decode(errors="replace")

    def _run_raw(self, *args: str, stdin: bytes | None = None) -> bytes:
        """The output of a git command that must succeed, as bytes."""
        result = self._git(*args, stdin=stdin)
        if result.returncode != 0:
            raise RuntimeError(f"git {args[0]} failed in {self.path}: {_stderr(result)}")
        return result.stdout

    def _git(self, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        """A git command that reads the repository, run to its end."""
        return subprocess.run(
            git_command(*args),
            check=False,
            cwd=self.path,
            env=git_environment(),
            input=stdin if stdin is not None else b"",
            capture_output=True,
        )


def cut_at(commits: Sequence[str]) -> str:
    return f"this shallow clone's history is cut at {', '.join(commits)}"


def git_executable() -> str:
    """``git``, or the program ``$GIT_PYTHON_GIT_EXECUTABLE`` names: the one GitPython runs too."""
    return os.environ.get("GIT_PYTHON_GIT_EXECUTABLE") or "git"


def git_command(*args: str) -> list[str]:
    """The command line of every git command regtrack runs: the user's display and diff settings and
    hooks neutralised (``NEUTRAL_CONFIG``); run it with ``git_environment()``."""
    settings = [part for setting in NEUTRAL_CONFIG for part in ("-c", setting)]
    return [git_executable(), *settings, *args]


def _work_tree(path: Path) -> Path | None:
    """The top of the work tree ``path`` lies in, or None where it lies in none (then
    ``work_tree.no_work_tree`` says why). One ``git rev-parse``: every command opens a repository,
    queries included, and a process costs them less than importing GitPython."""
    command = git_command("rev-parse", "--show-toplevel")
    try:
        found = subprocess.run(command, cwd=path, env=git_environment(), capture_output=True, text=True, check=False)
    except (NotADirectoryError, FileNotFoundError, PermissionError):
        return None
    top = found.stdout.removesuffix("\n")
    return Path(top) if found.returncode == 0 and top else None


def git_environment() -> dict[str, str]:
    """Ours without ``UNSET_ENVIRONMENT``, which reach into git's diff and paging machinery whatever the config says."""
    return {key: value for key, value in os.environ.items() if key not in UNSET_ENVIRONMENT}


def _stderr(result: subprocess.CompletedProcess[bytes]) -> str:
    return result.stderr.decode(errors="replace").strip()


def _path_spec(sha: str, path: str) -> str:
    return f"{sha}^{{tree}}" if path == ROOT_PATH else f"{sha}:{path}"


def _object_id(found: tuple[str, str] | None) -> str | None:
    return found[0] if found is not None else None


def tree_hash_of(trees: dict[str, str | None]) -> str:
    """The tree hash from each path's object id (None where missing): see ``Repo.tree_hash``."""
    if len(trees) == 1:
        (tree,) = trees.values()
        if tree is not None:
            return tree
    return combine_trees(trees)


def _commit_info(record: list[str]) -> CommitInfo:
    from tracker.core.records import CommitInfo

    sha, parents, name, email, timestamp, subject, message = record
    return CommitInfo(
        sha=sha,
        parents=tuple(parents.split()),
        subject=subject,
        author=f"{name} <{email}>",
        authored_at=datetime.fromtimestamp(int(timestamp), tz=UTC),
        pr_number=pr_number(subject),
        reverts_sha=reverted_sha(message),
    )
