"""Command probes: a program run in a revision's snapshot, judged by ``git bisect run``'s exit codes.

0 passes; 125 is untestable (ERROR); 1-127 otherwise fail; a command killed by a signal, or one
that exits with 128 or more (a shell's report of a child killed by a signal), crashes. A SIGKILL
that regtrack did not send is read as the product reads a killed worker: out of memory, untestable.
Past its timeout the command's process group is killed: TIMEOUT.

The command runs with its own process group, stdin from /dev/null, stdout and stderr into one file
whose tail becomes the run's detail. ``$REGTRACK_METRICS`` names a file where it may write
``{"metrics": {"name": number, ...}, "signature": "how it failed"}``; a malformed file is said so
in the detail and otherwise ignored.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probes.api import ProbeContext, ProbeResult
from probes.runner import sigkill_signature
from tracker.core.verdicts import Outcome

METRICS_ENV = "REGTRACK_METRICS"
UNTESTABLE_EXIT = 125
TAIL_LINES = 40
TAIL_BYTES = 16 << 10
METRICS_MAX_BYTES = 1 << 20
METRICS_KEYS = ("metrics", "signature")
OOM_SIGNATURE = sigkill_signature("command")


@dataclass(frozen=True)
class CommandCheck:
    """A command probe's check: ``argv`` run in the revision's snapshot."""

    argv: tuple[str, ...]

    def __call__(self, ctx: ProbeContext, params: Mapping[str, Any]) -> ProbeResult:
        return self.run(ctx.root)

    def run(self, root: Path, timeout_s: float | None = None, env: Mapping[str, str] | None = None) -> ProbeResult:
        return run_command(self.argv, root, timeout_s, env)


def outcome_of_exit(code: int) -> Outcome:
    """``git bisect run``'s reading of an exit status (negative: killed by that signal)."""
    if code == 0:
        return Outcome.PASS
    if code == UNTESTABLE_EXIT:
        return Outcome.ERROR
    if 0 < code < 128:
        return Outcome.FAIL
    if code == -signal.SIGKILL:
        return Outcome.ERROR
    return Outcome.CRASH


def exit_signature(code: int) -> str:
    if code == UNTESTABLE_EXIT:
        return "exit 125 (untestable)"
    if code == -signal.SIGKILL:
        return OOM_SIGNATURE
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
        with open(output, "wb") as sink:
            try:
                process = subprocess.Popen(
                    list(argv), cwd=cwd, env=child_env, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip
            except OSError as exc:
                return ProbeResult(Outcome.FAIL, signature=f"cannot run {argv[0]!r}: {exc.strerror}")
            code, timed_out = _wait(process, timeout_s)
        tail = _tail(output)
        metrics, signature, problem = read_metrics(metrics_file)
    detail = "\n".join(part for part in (problem and f"{METRICS_ENV} file ignored: {problem}", tail) if part)
    if timed_out:
        return ProbeResult(Outcome.TIMEOUT, metrics, f"timed out after {timeout_s:g}s", detail)
    outcome = outcome_of_exit(code)
    if outcome is Outcome.PASS:
        return ProbeResult(outcome, metrics, None, detail)
    return ProbeResult(outcome, metrics, signature or exit_signature(code), detail)


def _wait(process: subprocess.Popen[bytes], timeout_s: float | None) -> tuple[int, bool]:
    """The exit status and whether the timeout killed it; whatever the command left running in its
    process group is killed either way."""
    try:
        code, timed_out = process.wait(timeout_s), False
    except subprocess.TimeoutExpired:
        _kill_group(process.pid)
        code, timed_out = process.wait(), True
    except BaseException:
        _kill_group(process.pid)
        process.wait()
        raise
    _kill_group(process.pid)
    return code, timed_out


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def read_metrics(path: Path) -> tuple[dict[str, float], str | None, str | None]:
    """The metrics and signature a command wrote to ``path``, and what is wrong with the file if it is
    malformed (then neither is taken). A missing or empty file is no metrics, not a problem."""
    try:
        with open(path, "rb") as file:
            raw = file.read(METRICS_MAX_BYTES + 1)
    except FileNotFoundError:
        return {}, None, None
    except OSError as exc:
        return {}, None, f"cannot read it: {exc.strerror}"
    if not raw.strip():
        return {}, None, None
    if len(raw) > METRICS_MAX_BYTES:
        return {}, None, f"it is over {METRICS_MAX_BYTES} bytes"
    try:
        data = json.loads(raw.decode(), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        return {}, None, f"not JSON ({exc})"
    problem = metrics_problem(data)
    if problem:
        return {}, None, problem
    return {k: float(v) for k, v in data.get("metrics", {}).items()}, data.get("signature"), None


def metrics_problem(data: object) -> str | None:
    """Why ``data`` is not ``{"metrics": {name: finite number}, "signature": string or null}``; None when it is."""
    if not isinstance(data, dict):
        return f"expected a JSON object with keys {', '.join(METRICS_KEYS)}, got {type(data).__name__}"
    unknown = [key for key in data if key not in METRICS_KEYS]
    if unknown:
        return f"unknown key {unknown[0]!r}; known keys: {', '.join(METRICS_KEYS)}"
    metrics = data.get("metrics", {})
    if not isinstance(metrics, dict):
        return "metrics must be an object of names to numbers"
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"metric {name!r} is {value!r}, not a finite number"
    signature = data.get("signature")
    if signature is not None and not isinstance(signature, str):
        return f"signature must be a string, not {type(signature).__name__}"
    return None


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
