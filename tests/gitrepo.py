"""Small real git repositories for tests: fixed identities and dates, so SHAs are reproducible."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

START = 1767603600


def git_env(when: int | None = None) -> dict[str, str]:
    """The environment without ``GIT_*`` overrides or user config, with a fixed author and date."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    if when is not None:
        stamp = f"{when} +0000"
        env.update(
            GIT_AUTHOR_NAME="Test Author",
            GIT_AUTHOR_EMAIL="author@example.com",
            GIT_AUTHOR_DATE=stamp,
            GIT_COMMITTER_NAME="Test Author",
            GIT_COMMITTER_EMAIL="author@example.com",
            GIT_COMMITTER_DATE=stamp,
        )
    return env


def git(repo: Path, *args: str, when: int | None = None) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo), *args], check=False, capture_output=True, text=True, env=git_env(when)
    )
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {repo}: {result.stderr.strip()}")
    return result.stdout


class GitRepo:
    """A repository with a work tree on branch ``main``; ``commit`` writes files and commits them all."""

    def __init__(self, path: Path, *, bare: bool = False) -> None:
        self.path = path
        self._clock = START
        path.mkdir(parents=True, exist_ok=True)
        git(path, "init", "--quiet", "-b", "main", *(["--bare"] if bare else []))

    def git(self, *args: str) -> str:
        self._clock += 60
        return git(self.path, *args, when=self._clock)

    def write(self, files: Mapping[str, str | None]) -> None:
        """Write each file; ``None`` deletes it."""
        for name, text in files.items():
            file = self.path / name
            if text is None:
                file.unlink()
            else:
                file.parent.mkdir(parents=True, exist_ok=True)
                file.write_text(text)

    def commit(self, message: str, files: Mapping[str, str | None] | None = None) -> str:
        self.write(files or {})
        self.git("add", "--all")
        self.git("commit", "--quiet", "--allow-empty", "-m", message)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def checkout(self, *args: str) -> None:
        self.git("checkout", "--quiet", *args)

    def merge(self, branch: str, message: str) -> str:
        self.git("merge", "--quiet", "--no-ff", "-m", message, branch)
        return self.head()


def linear_history(path: Path, count: int, files_of: Callable[[int], Mapping[str, str]]) -> list[str]:
    """A repository of ``count`` commits on ``main``, commit i (from 0) setting ``files_of(i)``,
    written by one ``git fast-import``: tens of thousands of commits in seconds. Returns the SHAs,
    oldest first."""
    path.mkdir(parents=True)
    git(path, "init", "--quiet", "-b", "main")
    stream = bytearray()
    for i in range(count):
        message = f"Commit {i}\n".encode()
        stream += f"commit refs/heads/main\nmark :{i + 1}\n".encode()
        stream += f"committer Test Author <author@example.com> {START + 60 * i} +0000\n".encode()
        stream += f"data {len(message)}\n".encode() + message
        for name, text in files_of(i).items():
            data = text.encode()
            stream += f"M 100644 inline {name}\ndata {len(data)}\n".encode() + data + b"\n"
    subprocess.run(["git", "-C", str(path), "fast-import", "--quiet"], input=bytes(stream), check=True, env=git_env())
    git(path, "checkout", "--quiet", "--force", "main")
    return git(path, "rev-list", "--reverse", "main").split()
