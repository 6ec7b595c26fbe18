"""The setup step: a target's build command, run once per snapshot tree, before the snapshot is sealed.

A snapshot with a setup is written into a private, writable scratch directory of the cache; the
command runs there (its working directory is the snapshot, stdin is /dev/null, stdout and stderr
go to a log kept in the cache), never through a shell, with regtrack's environment plus the
target's ``env``. Only then is the tree sealed read-only, its manifest taken (the setup's outputs
and directories included, so a probe that edits or adds to them is caught too) and the snapshot
moved into place. Because it moves, a build must not depend on the absolute path it ran in: build
in place (``make``, ``python setup.py build_ext --inplace``) rather than install elsewhere
something that points back at the tree (``pip install -e``).

A setup that fails (a status other than 0, or a program that cannot start) makes the revision
untestable: each case of the tree is stored as an error signed ``setup failed: <last line of its
output>``. No snapshot is kept, so an explicit rerun tries the setup again.
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tracker.targets.snapshot_writer import Manifest, seal_directories, stat_row

SETUP_FAILED = "setup failed"
SIGNATURE_CHARS = 200
DETAIL_LINES = 30


@dataclass(frozen=True)
class Setup:
    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)


class SetupFailed(Exception):
    """The setup of a tree failed: the signature and detail each case of it is stored with."""

    def __init__(self, signature: str, detail: str, duration_s: float) -> None:
        super().__init__(signature)
        self.signature, self.detail, self.duration_s = signature, detail, duration_s


def run_setup(setup: Setup, tree: Path, log: Path) -> float:
    """Run ``setup`` in the writable ``tree``, its output into ``log``; the seconds it took.
    Raises SetupFailed."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log, "wb") as output:
        try:
            code = subprocess.run(
                list(setup.command),
                cwd=tree,
                env={**os.environ, **setup.env},
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                check=False,
            ).returncode
        except OSError as error:
            output.write(f"cannot run {setup.command[0]!r}: {error.strerror}\n".encode())
            code = None
    duration = time.monotonic() - started
    if code == 0:
        return duration
    lines = log.read_bytes().decode(errors="replace").strip().splitlines()
    last = lines[-1].strip() if lines else _status(code)
    detail = "\n".join(lines[-DETAIL_LINES:] + [f"({_status(code)}; the whole log is {log})"])
    raise SetupFailed(f"{SETUP_FAILED}: {last[:SIGNATURE_CHARS]}", detail, duration)


def unseal(tree: Path) -> None:
    """Make a freshly written (sealed) tree writable by its owner, for the setup to build in."""
    os.chmod(tree, 0o755)
    for directory, subdirectories, files in os.walk(tree):
        for name in subdirectories + files:
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) | stat.S_IWUSR)


def seal(tree: Path) -> Manifest:
    """Make ``tree`` read-only as the writer leaves a snapshot; the (size, mtime_ns, mode) of each of
    its files, symlinks and directories, whatever wrote them."""
    manifest: Manifest = {}
    directories = []
    for directory, subdirectories, files in os.walk(tree):
        for name in subdirectories + files:
            path = os.path.join(directory, name)
            if os.path.isdir(path) and not os.path.islink(path):
                directories.append(os.path.relpath(path, tree))
                continue
            if not os.path.islink(path):
                os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) & ~0o222)
            manifest[os.path.relpath(path, tree)] = stat_row(path)
    return {**manifest, **seal_directories(tree, directories)}


def _status(code: int | None) -> str:
    if code is None:
        return "the program could not start"
    if code < 0:
        return f"killed by signal {-code}"
    return f"exited with code {code}"
