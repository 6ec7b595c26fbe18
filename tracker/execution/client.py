"""The parent's side of a probe worker (protocol: ``tracker.execution.worker``): start it, send it
jobs, tell a result from a crash, a timeout or an out-of-memory kill (a SIGKILL regtrack did not send)."""

from __future__ import annotations

import json
import os
import secrets
import select
import selectors
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from probes.runner import OomWatch, sigkill_signature
from tracker.core.errors import UsageError
from tracker.core.verdicts import Outcome
from tracker.targets.inputs import Reads

if TYPE_CHECKING:
    from tracker.core.records import EnvironmentInfo

from tracker.execution.protocol import (
    LOG_TAIL_LINES,
    NONCE_ENV,
    STACK_DUMP_WAIT_S,
    STOP_GRACE_S,
    Job,
    JobResult,
)


class WorkerClient:
    """The parent's handle on one worker process, started on first use and restarted after a crash.

    One thread at a time calls ``start``, ``run``, ``environment`` and ``close``; ``kill`` may come from
    any thread (Ctrl-C). A job whose variables (a target's ``env``) differ from the worker's gets a new one.
    """

    def __init__(self, log_path: Path, env: Mapping[str, str] | None = None, start_timeout_s: float = 300.0):
        self.log_path = log_path
        self.start_timeout_s = start_timeout_s
        self.start_s: float | None = None
        """Seconds the last start took, from spawn to the worker's ready message."""
        self._nonce = secrets.token_hex(8)
        self._env = dict(env or {})
        self._job_env: dict[str, str] = {}
        """The job variables the running worker (or the next one) is started with."""
        self._process: _WorkerProcess | None = None
        self._closed = False
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def __enter__(self) -> WorkerClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self, env: Mapping[str, str] | None = None) -> None:
        """Start a worker unless one is running with ``env`` (None: whatever it runs with)."""
        if env is not None and dict(env) != self._job_env:
            if self._process is not None:
                self._stop(self._process, STOP_GRACE_S)
            self._job_env = dict(env)
        if self._process is not None:
            if self._process.alive():
                return
            self._stop(self._process)
        started = time.monotonic()
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker client is closed")
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            env = {**_child_env({**self._env, **self._job_env}), NONCE_ENV: self._nonce}
            self._process = process = _WorkerProcess.spawn(env, self.log_path, self._nonce)
        try:
            hello = process.receive(self.start_timeout_s)
        except TimeoutError:
            self._stop(process)
            raise UsageError(
                f"probe worker did not start within {self.start_timeout_s:g}s; see {self.log_path}"
            ) from None
        except BaseException:
            self._stop(process)
            raise
        if hello is None or "ready" not in hello:
            ended = self._stop(process, STOP_GRACE_S)
            message = (
                hello["error"] if hello else f"probe worker {ended.death()} while starting: {self._log_tail(0, 1)}"
            )
            raise UsageError(f"{message}; see {self.log_path}")
        self.start_s = time.monotonic() - started

    def run(self, job: Job, timeout_s: float) -> JobResult:
        """One job; a worker that dies is a CRASH, one past ``timeout_s`` a TIMEOUT, both restarted lazily."""
        self.start(job.env)
        process = self._live()
        offset = _size(self.log_path)
        oom = OomWatch(process.pid)
        started = time.monotonic()
        try:
            process.send({"op": "run", "job": asdict(job)})
            reply = process.receive(timeout_s)
        except TimeoutError:
            process.dump_stacks()
            self._stop(process)
            elapsed = time.monotonic() - started
            return JobResult(Outcome.TIMEOUT, {}, f"timed out after {timeout_s:g}s", self._log_tail(offset), elapsed)
        except BrokenPipeError:
            reply = None
        except BaseException:
            self._stop(process)
            raise
        if reply is None:
            ended = self._stop(process, STOP_GRACE_S)
            return self._death_result(ended, oom, self._log_tail(offset), time.monotonic() - started)
        if "error" in reply:
            raise UsageError(reply["error"])
        result = reply["result"]
        reads = Reads.from_json(result["reads"]) if result.get("reads") is not None else None
        judged = (Outcome(result["outcome"]), result["metrics"], result["signature"], result["detail"])
        measured_in = result.get("conditions") or {}
        return JobResult(*judged, result["duration_s"], reads, result.get("samples") or {}, measured_in)

    def environment(self, device: str, env: Mapping[str, str] | None = None) -> EnvironmentInfo:
        """The stack of a worker started with ``env`` (the variables its jobs will carry)."""
        from tracker.core.records import EnvironmentInfo

        self.start(env)
        process = self._live()
        try:
            process.send({"op": "environment", "device": device})
            reply = process.receive(self.start_timeout_s)
        except (TimeoutError, BrokenPipeError):
            reply = None
        except BaseException:
            self._stop(process)
            raise
        if reply is None or "environment" not in reply:
            self._stop(process)
            raise UsageError(f"probe worker failed to report its environment; see {self.log_path}")
        if reply.get("device_error"):
            raise UsageError(reply["device_error"])
        return EnvironmentInfo(**reply["environment"])

    def kill(self) -> None:
        with self._lock:
            self._closed = True
            if self._process is not None:
                self._process.kill()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        if self._process is not None:
            self._stop(self._process, STOP_GRACE_S)

    def _death_result(self, ended: _Exit, oom: OomWatch, log_tail: str, elapsed: float) -> JobResult:
        """What a worker that died during a job says: a SIGKILL from outside, the OOM killer's
        likely, is untestable; any other death is a crash; a kill of the client (``kill``) says nothing."""
        if ended.killed_here and self._closed:
            raise RuntimeError("the probe worker was killed: the worker client is closed")
        if ended.code == -signal.SIGKILL and not ended.killed_here:
            return JobResult(Outcome.ERROR, {}, sigkill_signature("worker", oom.rose()), log_tail, elapsed)
        return JobResult(Outcome.CRASH, {}, f"worker {ended.death()}", log_tail, elapsed)

    def _live(self) -> _WorkerProcess:
        if self._process is None:
            raise RuntimeError("the worker client is closed")
        return self._process

    def _stop(self, process: _WorkerProcess, grace_s: float = 0.0) -> _Exit:
        """Stop ``process`` (killing it unless it exits within ``grace_s``) and forget it; how it ended."""
        if self._process is process:
            self._process = None
        return process.stop(grace_s)

    def _log_tail(self, offset: int, lines: int = LOG_TAIL_LINES) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(offset)
                text = log.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])


@dataclass(frozen=True)
class _Exit:
    """How a worker ended: its exit status (negative: the signal that ended it) and whether
    regtrack killed it before it ended on its own."""

    code: int
    killed_here: bool

    def death(self) -> str:
        if self.killed_here:
            return f"closed its pipe and was killed {STOP_GRACE_S:g}s later"
        if self.code >= 0:
            return f"exited with code {self.code}"
        try:
            return f"died ({signal.Signals(-self.code).name})"
        except ValueError:
            return f"died (signal {-self.code})"


class _WorkerProcess:
    """A running worker: its Popen, the protocol pipes and a read buffer."""

    def __init__(self, popen: subprocess.Popen[bytes], nonce: str, log_path: Path):
        self.popen = popen
        self.pid = popen.pid
        self._stdin: IO[bytes] = popen.stdin  # type: ignore[assignment]
        self._stdout = popen.stdout.fileno()  # type: ignore[union-attr]
        self._prefix = nonce.encode() + b" "
        self._log_path = log_path
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._stdout, selectors.EVENT_READ)
        self._exit_fd = _pidfd(popen.pid)
        if self._exit_fd is not None:
            self._selector.register(self._exit_fd, selectors.EVENT_READ)
        self._buffer = b""
        self._killed = False

    @classmethod
    def spawn(cls, env: Mapping[str, str], log_path: Path, nonce: str) -> _WorkerProcess:
        with open(log_path, "wb") as log:
            popen = subprocess.Popen(
                [sys.executable, "-m", "tracker.execution.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=dict(env),
                start_new_session=True,
                bufsize=0,
            )
        return cls(popen, nonce, log_path)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def send(self, message: Mapping[str, Any]) -> None:
        self._stdin.write(json.dumps(message).encode() + b"\n")

    def receive(self, timeout_s: float) -> dict[str, Any] | None:
        """The next message; None once the worker has exited (or closed the pipe) without sending
        one; TimeoutError when none came within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            line = self._next_line()
            if line is not None:
                message = self._parse(line)
                if message is not None:
                    return message
                continue
            remaining = deadline - time.monotonic()
            ready = self._selector.select(remaining) if remaining > 0 else []
            if not ready:
                raise TimeoutError
            if any(key.fd == self._exit_fd for key, _ in ready) and not self._readable():
                return None
            if any(key.fd == self._stdout for key, _ in ready) and not self._read_chunk():
                return None

    def _next_line(self) -> bytes | None:
        if b"\n" not in self._buffer:
            return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _parse(self, line: bytes) -> dict[str, Any] | None:
        """A protocol message, or None for a stray line (logged); a damaged message is an error."""
        if not line.startswith(self._prefix):
            with open(self._log_path, "ab") as log:
                log.write(b"regtrack: ignored stray output on the protocol pipe: " + line[:200] + b"\n")
            return None
        try:
            return json.loads(line[len(self._prefix) :])
        except ValueError:
            raise UsageError(
                f"the probe worker {self.pid} sent a damaged protocol message ({line[:80]!r}); see {self._log_path}"
            ) from None

    def _readable(self) -> bool:
        """Whether the pipe holds data now (the worker's last words after it exited)."""
        if not select.select([self._stdout], [], [], 0)[0]:
            return False
        return self._read_chunk()

    def _read_chunk(self) -> bool:
        chunk = os.read(self._stdout, 1 << 16)
        self._buffer += chunk
        return bool(chunk)

    def dump_stacks(self) -> None:
        """Ask the worker to write every thread's stack to its log (faulthandler on SIGUSR1)."""
        try:
            os.kill(self.pid, signal.SIGUSR1)
        except ProcessLookupError:
            return
        time.sleep(STACK_DUMP_WAIT_S)

    def kill(self) -> None:
        """Kill the worker and its process group; remembered, so its death is not read as another's SIGKILL."""
        self._killed = True
        self._kill_group()

    def stop(self, grace_s: float) -> _Exit:
        try:
            self._stdin.close()
        except BrokenPipeError:
            pass
        try:
            code = self.popen.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.popen.wait()
        ended = _Exit(code, self._killed)
        self._kill_group()
        self._selector.close()
        if self._exit_fd is not None:
            os.close(self._exit_fd)
        self.popen.stdout.close()  # type: ignore[union-attr]
        return ended

    def _kill_group(self) -> None:
        """What the worker left in its process group; the worker too, while it runs."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` exits (Linux 5.3+); None elsewhere."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _child_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The worker's environment: ours plus ``extra``, with this checkout importable and the cwd not."""
    from db.paths import cache_dir

    env = {**os.environ, **extra}
    paths = [_import_root(), extra.get("PYTHONPATH"), os.environ.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env["PYTHONSAFEPATH"] = "1"
    # bytecode of the revisions' modules goes to the cache, never into their read-only snapshots
    env.setdefault("PYTHONPYCACHEPREFIX", str(cache_dir() / "pycache"))
    return env


def command_environment(env: Mapping[str, str]) -> dict[str, str]:
    """What a worker's command probes run with: the worker's environment (``env``) without what
    ``_child_env`` set for the worker itself, so a command sees the user's environment (and the
    target's). A bytecode prefix in particular would make every command recompile what it imports."""
    from db.paths import cache_dir

    command = dict(env)
    paths = command.pop("PYTHONPATH", "").split(os.pathsep)
    if paths[0] and paths[0] == _import_root():
        paths = paths[1:]
    if any(paths):
        command["PYTHONPATH"] = os.pathsep.join(paths)
    if command.get("PYTHONPYCACHEPREFIX") == str(cache_dir() / "pycache"):
        del command["PYTHONPYCACHEPREFIX"]
    command.pop("PYTHONSAFEPATH", None)
    return command


def _import_root() -> str | None:
    """The directory holding the ``tracker`` package, unless it is a site directory already on the path."""
    root = Path(__file__).resolve().parent.parent
    site_dirs = {Path(sysconfig.get_path(name)).resolve() for name in ("purelib", "platlib")}
    return None if root in site_dirs else str(root)
