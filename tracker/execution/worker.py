"""The probe worker: a long-lived subprocess that imports torch once and runs one probe case per job.

Protocol, one JSON object per line, each line led by a nonce the parent hands the worker (and the
worker hides from probes). The worker first moves the pipes it was started with onto private
descriptors and points fd 0 at /dev/null and fd 1 at its stderr (the log), so nothing a probe prints
or reads can reach the protocol; a line that still arrives without the nonce (a forked child
writing to the pipe) is logged and ignored.

    worker -> parent, once:  {"ready": PID}, or {"error": MESSAGE} and exit 2
    parent -> worker:        {"op": "run", "job": {Job fields}}
                             {"op": "environment", "device": DEVICE}
    worker -> parent:        {"result": {JobResult fields}} | {"environment": {EnvironmentInfo fields}}
                             | {"error": MESSAGE}

The parent ends the worker by closing its stdin. A worker whose parent dies kills itself and its
process group. The parent watches the worker's exit directly (a pidfd), so a worker that dies while
a child of its own keeps the pipe open is a crash at once, not a timeout.

Out of memory means untestable, in both its forms: a ``MemoryError`` (or CUDA out-of-memory) raised
in a probe, and a worker killed by SIGKILL that regtrack did not send (the kernel's OOM killer, or
someone's ``kill -9``). Whether a case fits in memory depends on the machine and on what else runs
there, so neither is evidence against the revision.
"""

from __future__ import annotations

import faulthandler
import importlib
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
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from probes import Outcome, ProbeContext, ProbeResult, all_probes, get_probe, run_case
from tracker.core.errors import UsageError

if TYPE_CHECKING:
    from tracker.core.records import EnvironmentInfo

PROBE_MODULES_ENV = "REGTRACK_PROBE_MODULES"
NONCE_ENV = "REGTRACK_WORKER_NONCE"
STOP_GRACE_S = 5.0
LOG_TAIL_LINES = 30
STACK_DUMP_WAIT_S = 0.2
SNAPSHOT_MODIFIED = "snapshot modified before the case"
"""A case that found its snapshot edited did not run: the parent rebuilds the snapshot and runs it again."""
OOM_KILL_SIGNATURE = "out of memory: worker killed by SIGKILL (the OOM killer, or a kill from outside)"


@dataclass(frozen=True)
class Job:
    probe: str
    case_id: str
    root: str
    device: str
    dtype: str
    seed: int


@dataclass(frozen=True)
class JobResult:
    outcome: Outcome
    metrics: dict[str, float]
    signature: str | None
    detail: str
    duration_s: float


def import_probe_modules() -> None:
    """Import the modules named in $REGTRACK_PROBE_MODULES (comma-separated) so their probes register."""
    for name in filter(None, (n.strip() for n in os.environ.get(PROBE_MODULES_ENV, "").split(","))):
        try:
            importlib.import_module(name)
        except Exception as exc:
            raise UsageError(
                f"cannot import probe module {name!r} named in {PROBE_MODULES_ENV}: "
                f"{type(exc).__name__}: {exc}; fix the name or put its directory on PYTHONPATH"
            ) from exc


class WorkerClient:
    """The parent's handle on one worker process, started on first use and restarted after a crash.

    One thread at a time may call ``start``, ``run``, ``environment`` and ``close``; ``kill`` may be
    called from any thread (e.g. on Ctrl-C) and makes the client unusable.
    """

    def __init__(self, log_path: Path, env: Mapping[str, str] | None = None, start_timeout_s: float = 300.0):
        self.log_path = log_path
        self.start_timeout_s = start_timeout_s
        self.start_s: float | None = None
        """Seconds the last start took, from spawn to the worker's ready message."""
        self._nonce = secrets.token_hex(8)
        self._env = {**_child_env(env or {}), NONCE_ENV: self._nonce}
        self._process: _Process | None = None
        self._closed = False
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def __enter__(self) -> WorkerClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> None:
        if self._process is not None:
            if self._process.alive():
                return
            self._stop(self._process)
        started = time.monotonic()
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker client is closed")
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._process = process = _Process.spawn(self._env, self.log_path, self._nonce)
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
            code = self._stop(process)
            message = hello["error"] if hello else f"probe worker {_death(code)} while starting: {self._log_tail(0, 1)}"
            raise UsageError(f"{message}; see {self.log_path}")
        self.start_s = time.monotonic() - started

    def run(self, job: Job, timeout_s: float) -> JobResult:
        """One job; a worker that dies is a CRASH, one past ``timeout_s`` a TIMEOUT, both restarted lazily."""
        self.start()
        process = self._live()
        offset = _size(self.log_path)
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
            code = self._stop(process)
            elapsed = time.monotonic() - started
            if code == -signal.SIGKILL:
                return JobResult(Outcome.ERROR, {}, OOM_KILL_SIGNATURE, self._log_tail(offset), elapsed)
            return JobResult(Outcome.CRASH, {}, f"worker {_death(code)}", self._log_tail(offset), elapsed)
        if "error" in reply:
            raise UsageError(reply["error"])
        result = reply["result"]
        return JobResult(
            Outcome(result["outcome"]), result["metrics"], result["signature"], result["detail"], result["duration_s"]
        )

    def environment(self, device: str) -> EnvironmentInfo:
        from tracker.core.records import EnvironmentInfo

        self.start()
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

    def _live(self) -> _Process:
        if self._process is None:
            raise RuntimeError("the worker client is closed")
        return self._process

    def _stop(self, process: _Process, grace_s: float = 0.0) -> int:
        """Stop ``process`` (killing it unless it exits within ``grace_s``) and forget it; its exit code."""
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


class _Process:
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

    @classmethod
    def spawn(cls, env: Mapping[str, str], log_path: Path, nonce: str) -> _Process:
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
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, grace_s: float) -> int:
        try:
            self._stdin.close()
        except BrokenPipeError:
            pass
        try:
            code = self.popen.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.popen.wait()
        self.kill()
        self._selector.close()
        if self._exit_fd is not None:
            os.close(self._exit_fd)
        self.popen.stdout.close()  # type: ignore[union-attr]
        return code


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` exits (Linux 5.3+); None elsewhere."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _death(code: int) -> str:
    if code >= 0:
        return f"exited with code {code}"
    try:
        return f"died ({signal.Signals(-code).name})"
    except ValueError:
        return f"died (signal {-code})"


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


def _import_root() -> str | None:
    """The directory holding the ``tracker`` package, unless it is a site directory already on the path."""
    root = Path(__file__).resolve().parent.parent
    site_dirs = {Path(sysconfig.get_path(name)).resolve() for name in ("purelib", "platlib")}
    return None if root in site_dirs else str(root)


class _Channel:
    """The worker's end of the protocol, on descriptors no probe knows about."""

    def __init__(self) -> None:
        self._prefix = os.environ.pop(NONCE_ENV, "").encode() + b" "
        self._in = os.fdopen(os.dup(0), "rb")
        self._out = os.fdopen(os.dup(1), "wb", buffering=0)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(2, 1)

    def send(self, message: Mapping[str, Any]) -> None:
        self._out.write(self._prefix + json.dumps(message).encode() + b"\n")

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for line in self._in:
            yield json.loads(line)


def _exit_with_parent(parent: int) -> None:
    """Kill this worker (and its process group, when it leads one) once ``parent`` is gone."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        if os.getpgrp() == os.getpid():
            os.killpg(0, signal.SIGKILL)
        os._exit(1)

    threading.Thread(target=watch, name="regtrack-parent-watch", daemon=True).start()


def _run(job: Job) -> dict[str, Any]:
    try:
        probe = get_probe(job.probe)
        case = probe.case(job.case_id)
    except KeyError as exc:
        return {"error": exc.args[0]}
    started = time.perf_counter()
    if changed := _snapshot_changed(Path(job.root)):
        result = ProbeResult(Outcome.ERROR, signature=f"{SNAPSHOT_MODIFIED}: {changed}")
    else:
        result = run_case(probe, case, ProbeContext(Path(job.root), job.device, job.dtype, job.seed))
    duration = time.perf_counter() - started
    sys.stdout.flush()
    sys.stderr.flush()
    return {
        "result": {
            "outcome": result.outcome.value,
            "metrics": result.metrics,
            "signature": result.signature,
            "detail": result.detail,
            "duration_s": duration,
        }
    }


def _snapshot_changed(root: Path) -> str | None:
    """A file of the snapshot an earlier case edited (root ignores read-only bits); None when
    intact or when ``root`` is not a snapshot of the cache."""
    from tracker.targets.snapshots import manifest_path, modified_file

    return modified_file(root) if manifest_path(root).is_file() else None


def _environment(device: str) -> dict[str, str | None]:
    """What identifies this worker's stack; None where it has no such thing (no GPU, no flashinfer)."""
    import platform
    import socket

    import torch

    cuda = device.startswith("cuda") and torch.cuda.is_available()
    index = torch.device(device).index if cuda else None
    return {
        "device": device,
        "gpu_name": torch.cuda.get_device_name(index) if cuda else None,
        "compute_capability": "{}.{}".format(*torch.cuda.get_device_capability(index)) if cuda else None,
        "driver": _nvidia_driver() if cuda else None,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "flashinfer": _distribution_version("flashinfer-python", "flashinfer"),
        "python": platform.python_version(),
        "host": socket.gethostname(),
    }


def _nvidia_driver() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[0] if out.strip() else None


def _distribution_version(*names: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    for name in names:
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return None


def _device_error(device: str) -> str | None:
    """Why this worker cannot run on ``device``, checked before anything runs or is stored."""
    import torch

    if not device.startswith("cuda"):
        return None
    if not torch.cuda.is_available():
        return (
            f"--device {device}: no CUDA device is visible to the probe worker (torch {torch.__version__}, "
            f"CUDA {torch.version.cuda or 'none'}); run on a GPU machine or pass --device cpu"
        )
    index = torch.device(device).index
    if index is not None and index >= torch.cuda.device_count():
        return f"--device {device}: the probe worker sees {torch.cuda.device_count()} CUDA device(s); pass --device cuda:0 or cuda"
    return None


def _serve(channel: _Channel) -> None:
    for request in channel:
        if request["op"] == "run":
            channel.send(_run(Job(**request["job"])))
        elif error := _device_error(request["device"]):
            channel.send({"environment": {}, "device_error": error})
        else:
            channel.send({"environment": _environment(request["device"])})


def main() -> int:
    channel = _Channel()
    os.environ.pop("PYTHONSAFEPATH", None)
    faulthandler.enable()
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    _exit_with_parent(os.getppid())
    try:
        import_probe_modules()
    except UsageError as exc:
        channel.send({"error": str(exc)})
        return 2
    import torch  # noqa: F401  (once, here, not per job)

    all_probes()
    channel.send({"ready": os.getpid()})
    _serve(channel)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # nothing to tear down; the interpreter's teardown of torch alone takes about a second


if __name__ == "__main__":
    sys.exit(main())
