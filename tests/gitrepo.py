"""Small real git repositories for tests: fixed identities and dates, so SHAs are reproducible."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
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
