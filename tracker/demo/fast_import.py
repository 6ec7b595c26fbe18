"""A ``git fast-import`` stream built in memory, with fixed identities, and the git calls that import it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Signature:
    name: str
    email: str
    when: int
    """Seconds since the epoch; written as UTC."""

    def encode(self) -> bytes:
        return f"{self.name} <{self.email}> {self.when} +0000".encode()


def data_block(payload: bytes) -> list[bytes]:
    return [b"data %d\n" % len(payload), payload, b"\n"]


class FastImportStream:
    """A ``git fast-import`` stream built in memory and handed to git in chunks.

    Blobs and commits share one mark counter; marks stay valid from chunk to chunk when the
    importer exports and re-imports them. A blob whose content was written before reuses its mark.
    """

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._blob_marks: dict[bytes, int] = {}
        self._last_mark = 0

    def _new_mark(self) -> int:
        self._last_mark += 1
        return self._last_mark

    def blob(self, content: bytes) -> int:
        mark = self._blob_marks.get(content)
        if mark is None:
            mark = self._blob_marks[content] = self._new_mark()
            self._chunks += [b"blob\nmark :%d\n" % mark, *data_block(content)]
        return mark

    def commit(
        self, ref: str, signature: Signature, message: str, parents: Sequence[int], files: Mapping[str, bytes]
    ) -> int:
        """A commit of ``parents[0]``'s tree with ``files`` written over it; returns its mark."""
        modifies = [b"M 100644 :%d %s\n" % (self.blob(files[path]), path.encode()) for path in sorted(files)]
        mark = self._new_mark()
        who = signature.encode()
        self._chunks += [b"commit %s\nmark :%d\nauthor %s\ncommitter %s\n" % (ref.encode(), mark, who, who)]
        self._chunks += data_block(message.encode())
        if parents:
            self._chunks.append(b"from :%d\n" % parents[0])
            self._chunks += [b"merge :%d\n" % parent for parent in parents[1:]]
        self._chunks += [*modifies, b"\n"]
        return mark

    def reset(self, ref: str) -> None:
        """Forget ``ref``: with no ``from`` the branch has no commit, so it is never written."""
        self._chunks.append(b"reset %s\n\n" % ref.encode())

    def take(self) -> bytes:
        """The commands written since the last call, as a complete stream."""
        body = b"".join(self._chunks)
        self._chunks.clear()
        return b"feature done\n" + body + b"done\n"


# ---------------------------------------------------------------------------- git


def git_env() -> dict[str, str]:
    """The environment without ``GIT_*`` overrides or user and system config, which must not matter."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    return env


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    result = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, env=git_env())
    if result.returncode != 0:
        raise RuntimeError(f"git {args[0]} failed in {repo}: {result.stderr.decode(errors='replace').strip()}")
    return result.stdout.decode()


def fast_import(repo: Path, stream: bytes, marks: Path) -> dict[int, str]:
    """Import ``stream``, carrying marks over from earlier imports; returns every mark's SHA."""
    git(repo, "fast-import", "--quiet", f"--import-marks-if-exists={marks}", f"--export-marks={marks}", stdin=stream)
    shas = {}
    for line in marks.read_text().splitlines():
        mark, sha = line.split()
        shas[int(mark.lstrip(":"))] = sha
    return shas
