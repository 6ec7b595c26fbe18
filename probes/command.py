"""Command probes: a program run in a revision's snapshot, judged by ``git bisect run``'s exit codes.

0 passes; 125 is untestable (SKIP); 1-127 otherwise fail; a command killed by a signal, or one
that exits with 128 or more (a shell's report of a child killed by a signal), crashes. A SIGKILL
that regtrack did not send, the command's own or one its shell reports as 137, is read as the
product reads a killed worker: out of memory, likely (certain where the kernel counted an OOM kill
in this process's cgroup meanwhile), so untestable. Past its timeout the command is killed: TIMEOUT.

The command runs in a session of its own, stdin from /dev/null, stdout and stderr into one file
whose tail becomes the run's detail. Once it exits or times out, whatever it left running is
killed: its session, and what it detached from that session (``setsid``) where this process is a
child subreaper (a worker is), since those are then reparented here. ``$REGTRACK_METRICS`` names a
file where it may write ``{"metrics": {"name": number, ...}, "samples": {"name": [number, ...]},
"signature": "how it failed"}``; a malformed file is said so in the detail and otherwise ignored.
A command that declares metrics takes ``$REGTRACK_REPEAT`` samples of each, all written.
"""

from __future__ import annotations

import errno
import json
import math
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from probes.api import ProbeContext, ProbeResult
from probes.runner import OomWatch, sigkill_signature
from tracker.core.verdicts import Outcome

METRICS_ENV = "REGTRACK_METRICS"
REPEAT_ENV = "REGTRACK_REPEAT"
UNTESTABLE_EXIT = 125
TAIL_LINES = 40
TAIL_BYTES = 16 << 10
METRICS_MAX_BYTES = 1 << 20
METRICS_KEYS = ("metrics", "samples", "signature")
SHELL_SIGKILL_EXIT = 128 + signal.SIGKILL
CLEANUP_ROUNDS = 50
CLEANUP_PAUSE_S = 0.01


@dataclass(frozen=True)
class CommandCheck:
    """A command probe's check: ``argv`` run in the revision's snapshot."""

    argv: tuple[str, ...]
    repeat: int = 1
    """Samples of each declared metric the command takes, told it in ``$REGTRACK_REPEAT``."""

    def __call__(self, ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
        return self.run(ctx.root)

    def run(self, root: Path, timeout_s: float | None = None, env: Mapping[str, str] | None = None) -> ProbeResult:
        told = {**(os.environ if env is None else env), REPEAT_ENV: str(self.repeat)}
        return run_command(self.argv, root, timeout_s, told)


def outcome_of_exit(code: int) -> Outcome:
    """``git bisect run``'s reading of an exit status (negative: killed by that signal), but for a
    SIGKILL, which regtrack reads as out of memory."""
    if code == 0:
        return Outcome.PASS
    if code == UNTESTABLE_EXIT:
        return Outcome.SKIP
    if code in (-signal.SIGKILL, SHELL_SIGKILL_EXIT):
        return Outcome.ERROR
    if 0 < code < 128:
        return Outcome.FAIL
    return Outcome.CRASH


def exit_signature(code: int, oom_counted: bool = False) -> str:
    """How the command ended; ``oom_counted``: the kernel counted an OOM kill while it ran."""
    if code == UNTESTABLE_EXIT:
        return "exit 125 (untestable)"
    if code == -signal.SIGKILL:
        return sigkill_signature("command", oom_counted)
    if code == SHELL_SIGKILL_EXIT:
        return sigkill_signature(f"a process of the command (exit {code})", oom_counted)
    if code < 0:
        return f"killed by {_signal_name(-code)}"
    if 128 < code < 128 + signal.NSIG:
        return f"exit {code} (128 + {_signal_name(code - 128)})"
    return f"exit {code}"


def run_command(
    argv: Sequence[str], cwd: Path, timeout_s: float | None = None, env: Mapping[str, str] | None = None
) -> ProbeResult:
    """Run ``argv`` in ``cwd`` (never through a shell) with environment ``env`` (default: ours) and
    judge it by its exit status."""
    with tempfile.TemporaryDirectory(prefix="regtrack-command-") as scratch:
        output, metrics_file = Path(scratch) / "output", Path(scratch) / "metrics.json"
        child_env = {**(os.environ if env is None else env), METRICS_ENV: str(metrics_file)}
        ours_before = frozenset(p.pid for p in _processes() if p.ppid == os.getpid())
        oom = OomWatch()
        with open(output, "wb") as sink:
            try:
                process = _start(argv, cwd, child_env, sink)
            except OSError as exc:
                return ProbeResult(Outcome.FAIL, signature=f"cannot run {argv[0]!r}: {exc.strerror}")
            code, timed_out = _wait(process, timeout_s, ours_before)
        tail = _tail(output)
        written = read_metrics(metrics_file)
    problem = written.problem
    detail = "\n".join(part for part in (problem and f"{METRICS_ENV} file ignored: {problem}", tail) if part)
    metrics, samples = written.metrics, written.samples
    if timed_out:
        return ProbeResult(Outcome.TIMEOUT, metrics, f"timed out after {timeout_s:g}s", detail)
    outcome = outcome_of_exit(code)
    if outcome is Outcome.PASS:
        return ProbeResult(outcome, metrics, None, detail, samples)
    return ProbeResult(outcome, metrics, written.signature or exit_signature(code, oom.rose()), detail, samples)


def _wait(process: subprocess.Popen[bytes], timeout_s: float | None, ours_before: frozenset[int]) -> tuple[int, bool]:
    """The exit status and whether the timeout killed it; whatever the command left running is
    killed either way (``ours_before``: this process's children before the command started)."""
    try:
        code, timed_out = process.wait(timeout_s), False
    except subprocess.TimeoutExpired:
        _end_left_behind(process.pid, ours_before)
        code, timed_out = process.wait(), True
    except BaseException:
        _end_left_behind(process.pid, ours_before)
        process.wait()
        raise
    _end_left_behind(process.pid, ours_before)
    return code, timed_out


@dataclass(frozen=True)
class _Process:
    pid: int
    ppid: int
    group: int
    session: int
    zombie: bool


def _end_left_behind(command: int, ours_before: frozenset[int]) -> None:
    """Kill what the command (pid ``command``) left running, and reap what of it is this process's
    child, until /proc shows none; its process group alone where there is no /proc."""
    _kill_group(command)
    for _ in range(CLEANUP_ROUNDS):
        left = list(_left_behind(_processes(), command, ours_before))
        if not left:
            return
        for process in left:
            _kill(process.pid)
        for process in left:
            if process.ppid == os.getpid() and process.pid != command:
                _reap(process.pid)
        time.sleep(CLEANUP_PAUSE_S)


def _left_behind(processes: list[_Process], command: int, ours_before: frozenset[int]) -> Iterator[_Process]:
    """What the command left: its process group and session, the children this process gained
    since it started (what it detached, reparented to this subreaper), and their descendants.
    A zombie counts only where this process must reap it; the command's own is reaped by its Popen."""
    me = os.getpid()
    children: dict[int, list[_Process]] = {}
    for process in processes:
        children.setdefault(process.ppid, []).append(process)
    adopted = [p for p in children.get(me, []) if p.pid not in ours_before]
    pending = [p for p in processes if command in (p.group, p.session)] + adopted
    seen: set[int] = {me}
    while pending:
        process = pending.pop()
        if process.pid in seen:
            continue
        seen.add(process.pid)
        pending.extend(children.get(process.pid, []))
        if not process.zombie or (process.ppid == me and process.pid != command):
            yield process


def _processes() -> list[_Process]:
    """Every process /proc shows; none where there is no /proc."""
    try:
        entries = [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:
        return []
    found = []
    for pid in entries:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        state, ppid, group, session = fields[0], int(fields[1]), int(fields[2]), int(fields[3])
        found.append(_Process(int(pid), ppid, group, session, state in (b"Z", b"X")))
    return found


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _start(argv: Sequence[str], cwd: Path, env: Mapping[str, str], sink: IO[bytes]) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a session of its own, as ``execvp`` would: a script without a ``#!`` line,
    which the kernel will not run (ENOEXEC), runs under ``/bin/sh``, as under ``git bisect run``."""

    def popen(words: list[str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            words,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    try:
        return popen(list(argv))
    except OSError as exc:
        if exc.errno != errno.ENOEXEC:
            raise
        return popen(["/bin/sh", *argv])


@dataclass(frozen=True)
class Written:
    """What a command wrote to its ``$REGTRACK_METRICS`` file, or why none of it is taken."""

    metrics: dict[str, float] = field(default_factory=dict)
    samples: dict[str, list[float]] = field(default_factory=dict)
    signature: str | None = None
    problem: str | None = None


def read_metrics(path: Path) -> Written:
    """The metrics, samples and signature a command wrote to ``path``, or what is wrong with the
    file if it is malformed (then none is taken). A missing or empty file is nothing, not a problem."""
    try:
        with open(path, "rb") as file:
            raw = file.read(METRICS_MAX_BYTES + 1)
    except FileNotFoundError:
        return Written()
    except OSError as exc:
        return Written(problem=f"cannot read it: {exc.strerror}")
    if not raw.strip():
        return Written()
    if len(raw) > METRICS_MAX_BYTES:
        return Written(problem=f"it is over {METRICS_MAX_BYTES} bytes")
    try:
        data = json.loads(raw.decode(), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        return Written(problem=f"not JSON ({exc})")
    problem = metrics_problem(data)
    if problem:
        return Written(problem=problem)
    metrics = {k: float(v) for k, v in data.get("metrics", {}).items()}
    samples = {k: [float(v) for v in values] for k, values in data.get("samples", {}).items()}
    return Written(metrics, samples, data.get("signature"))


def metrics_problem(data: object) -> str | None:
    """Why ``data`` is not ``{"metrics": {name: finite number}, "samples": {name: [finite number]},
    "signature": string or null}``; None when it is."""
    if not isinstance(data, dict):
        return f"expected a JSON object with keys {', '.join(METRICS_KEYS)}, got {type(data).__name__}"
    unknown = [key for key in data if key not in METRICS_KEYS]
    if unknown:
        return f"unknown key {unknown[0]!r}; known keys: {', '.join(METRICS_KEYS)}"
    metrics = data.get("metrics", {})
    if not isinstance(metrics, dict):
        return "metrics must be an object of names to numbers"
    for name, value in metrics.items():
        if not _finite(value):
            return f"metric {name!r} is {value!r}, not a finite number"
    samples = data.get("samples", {})
    if not isinstance(samples, dict):
        return "samples must be an object of names to lists of numbers"
    for name, values in samples.items():
        if not isinstance(values, list) or not all(_finite(value) for value in values):
            return f"samples of {name!r} must be a list of finite numbers"
    signature = data.get("signature")
    if signature is not None and not isinstance(signature, str):
        return f"signature must be a string, not {type(signature).__name__}"
    return None


def _finite(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _tail(output: Path) -> str:
    """The last lines the command printed (stdout and stderr interleaved as written)."""
    with open(output, "rb") as file:
        file.seek(max(0, output.stat().st_size - TAIL_BYTES))
        text = file.read().decode(errors="replace")
    return "\n".join(text.strip().splitlines()[-TAIL_LINES:])


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
