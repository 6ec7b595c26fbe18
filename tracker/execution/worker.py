"""The probe worker: a long-lived subprocess that runs one probe case per job. It imports what the
probes it runs import (torch for the built-in ones) once, when the first of them is asked for, and
nothing for a probe that needs none.

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
there, so neither is evidence against the revision. A probe that calls ``sys.exit`` or raises
``KeyboardInterrupt`` crashes its case and the worker carries on.

The worker is a child subreaper (Linux): what a command probe detaches (``setsid``) is reparented
here when its parent exits, so the command's cleanup finds and kills it.
"""

from __future__ import annotations

import ctypes
import faulthandler
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from probes import Case, Probe, ProbeContext, ProbeResult, get_probe, run_case
from probes.command import CommandCheck
from probes.registry import ProbeLoadError
from probes.runner import ended_case, with_samples
from probes.sources import ProbeSpec, resolve
from tracker.core.errors import UsageError
from tracker.core.verdicts import Outcome
from tracker.execution.client import command_environment
from tracker.execution.conditions import conditions
from tracker.execution.environment import device_error, environment, quiet_torch_import
from tracker.execution.protocol import (
    NONCE_ENV,
    SNAPSHOT_MODIFIED,
    Job,
    import_probe_modules,
)
from tracker.execution.reads import recording
from tracker.targets.inputs import Reads

PR_SET_CHILD_SUBREAPER = 36


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


def _adopt_orphans() -> None:
    """Become a child subreaper where Linux offers it (prctl); elsewhere stay as before."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _run(job: Job) -> dict[str, Any]:
    try:
        probe = _probe(job)
        case = probe.case(job.case_id)
    except KeyError as exc:
        return {"error": exc.args[0]}
    except ProbeLoadError as exc:
        return {"error": str(exc)}
    if job.code_hash and probe.code_hash != job.code_hash:
        return {
            "error": f"probe {probe.name!r} changed while this command ran (code hash {probe.code_hash}, "
            f"results are stored under {job.code_hash}); run the command again"
        }
    started = time.perf_counter()
    reads: Reads | None = None
    if changed := _snapshot_changed(Path(job.root)):
        result = ProbeResult(Outcome.ERROR, signature=f"{SNAPSHOT_MODIFIED}: {changed}")
    elif isinstance(probe.check, CommandCheck):
        result = with_samples(probe, probe.check.run(Path(job.root), job.timeout_s, command_environment(os.environ)))
    else:
        ctx = ProbeContext(Path(job.root), job.device, job.dtype, job.seed, tuple(job.import_roots))
        with recording(ctx.root) as recorded:
            result = _run_in_process(probe, case, ctx)
        [reads] = recorded
    duration = time.perf_counter() - started
    measured_in = conditions(job.device) if probe.metrics else {}
    sys.stdout.flush()
    sys.stderr.flush()
    return {
        "result": {
            "outcome": result.outcome.value,
            "metrics": result.metrics,
            "samples": result.samples,
            "conditions": measured_in,
            "signature": result.signature,
            "detail": result.detail,
            "duration_s": duration,
            "reads": reads.to_json() if reads is not None else None,
        }
    }


def _run_in_process(probe: Probe, case: Case, ctx: ProbeContext) -> ProbeResult:
    """The case's result; a probe that tries to end the worker ends only its case."""
    try:
        return run_case(probe, case, ctx)
    except (SystemExit, KeyboardInterrupt) as exc:
        return ended_case(exc)


def _probe(job: Job) -> Probe:
    """The job's probe, built from its source as the parent built it."""
    return resolve(ProbeSpec.from_json(dict(job.source))) if job.source else get_probe(job.probe)


def _snapshot_changed(root: Path) -> str | None:
    """A file of the snapshot an earlier case edited, created or removed (root ignores read-only
    bits); None when intact or when ``root`` is not a snapshot of the cache."""
    from tracker.targets.snapshots import manifest_path, modified_file

    return modified_file(root) if manifest_path(root).is_file() else None


def _serve(channel: _Channel) -> None:
    for request in channel:
        if request["op"] == "run":
            channel.send(_run(Job(**request["job"])))
        elif error := device_error(request["device"]):
            channel.send({"environment": {}, "device_error": error})
        else:
            channel.send({"environment": asdict(environment(request["device"]))})


def main() -> int:
    channel = _Channel()
    os.environ.pop("PYTHONSAFEPATH", None)
    faulthandler.enable()
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    _exit_with_parent(os.getppid())
    _adopt_orphans()
    quiet_torch_import()
    try:
        import_probe_modules()
    except UsageError as exc:
        channel.send({"error": str(exc)})
        return 2
    # the log's first line: which GPUs this worker was given (one per slot on a machine of several)
    print(
        f"probe worker {os.getpid()} CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')}",
        file=sys.stderr,
        flush=True,
    )
    channel.send({"ready": os.getpid()})
    _serve(channel)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # nothing to tear down; the interpreter's teardown of torch, when loaded, alone takes about a second


if __name__ == "__main__":
    sys.exit(main())
