"""Where a probe comes from, as a value the parent hands every worker, so both build it the same way.

A probe comes from one of four sources:

* registered, found by name: a built-in (``probes.demo_backend``), an installed distribution's
  ``regtrack.probes`` entry point, or a module named in ``$REGTRACK_PROBE_MODULES``;
* a module named in the config: a Python file of the user's work tree (``ci/probes.py:verify``,
  read as it is in the work tree, whatever revision is probed) or an importable module
  (``mylib.probes:verify``); ATTR names a Probe or a check function; without it the module must
  register a probe of the configured name;
* a command, run in the revision's snapshot (``probes.command``).

A probe's code hash is what its results depend on besides its declared version: the file of a
module probe (for an importable module, with each module of its package it imports, see
``probes.code_hash``), the command line of a command probe, and, for both, the content of each
file the config lists in ``inputs`` (a probe file's helpers belong there). A word of a command
line that names an input is passed as that file's absolute path in the work tree, so the file
hashed is the file run.
"""

from __future__ import annotations

import enum
import hashlib
import importlib
import json
import shlex
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import ModuleType
from typing import Any

from probes.api import Case, Probe
from probes.code_hash import module_closure_hash
from probes.registry import MissingRequirement, ProbeLoadError, get_probe
from probes.requirements import missing_requirement
from tracker.core.metrics import Direction, Metric

COMMAND_CASE = "command"
FUNCTION_CASE = "default"


class Source(str, enum.Enum):
    REGISTERED = "registered"
    MODULE = "module"
    COMMAND = "command"


@dataclass(frozen=True)
class ProbeSpec:
    """How to build one probe. Paths (a module file, inputs) are relative to ``base``, the user's work tree."""

    name: str
    source: Source = Source.REGISTERED
    module: str = ""
    """``FILE.py[:ATTR]`` or ``package.module[:ATTR]``."""
    command: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    """A command's declared paths of the revision: its result holds wherever they are the same."""
    base: str = ""
    version: int | None = None
    """The declared version; None: a module's Probe keeps its own, anything else is version 1."""
    metrics: tuple[Metric, ...] = ()
    """A command's declared metrics, each sampled ``repeat`` times per execution."""
    repeat: int = 1

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source.value,
            "module": self.module,
            "command": list(self.command),
            "inputs": list(self.inputs),
            "reads": list(self.reads),
            "base": self.base,
            "version": self.version,
            "metrics": [[m.name, m.unit, m.direction.value] for m in self.metrics],
            "repeat": self.repeat,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProbeSpec:
        return cls(
            data["name"],
            Source(data["source"]),
            data["module"],
            tuple(data["command"]),
            tuple(data["inputs"]),
            tuple(data["reads"]),
            data["base"],
            data["version"],
            tuple(Metric(name, unit, Direction(direction)) for name, unit, direction in data["metrics"]),
            data["repeat"],
        )

    @property
    def self_timed(self) -> bool:
        """A command keeps its own time: the worker kills it at the timeout and keeps what it printed."""
        return self.source is Source.COMMAND

    def argv(self) -> list[str]:
        """The command line to run: each word that names an input becomes its absolute path."""
        return [str(Path(self.base, word)) if word in self.inputs else word for word in self.command]


@dataclass(frozen=True)
class SourcedProbe(Probe):
    """A probe built from a spec: its code hash is the spec's fingerprint, not its defining module's."""

    spec: ProbeSpec | None = None
    fingerprint: str = field(default="", compare=False)

    @property
    def code_hash(self) -> str:
        return self.fingerprint


def spec_of(probe: Probe) -> ProbeSpec:
    """The spec a worker builds ``probe`` from: its own, or its registered name."""
    if isinstance(probe, SourcedProbe) and probe.spec is not None:
        return probe.spec
    return ProbeSpec(probe.name)


def command_spec(
    name: str, argv: list[str], base: Path, inputs: tuple[str, ...] = (), version: int | None = None
) -> ProbeSpec:
    return ProbeSpec(name, Source.COMMAND, command=tuple(argv), inputs=inputs, base=str(base), version=version)


def split_command(text: str) -> list[str]:
    """A command line split into words as a POSIX shell would, without running one; ValueError for
    unbalanced quotes."""
    return shlex.split(text)


ADHOC_PREFIX = "command:"
"""What the name of every ``--command`` probe starts with."""


def adhoc_command_name(argv: list[str]) -> str:
    """The name of a ``--command`` probe: the same command line, the same name (and stored results)."""
    return f"{ADHOC_PREFIX}{_digest(json.dumps(argv).encode())[:8]}"


def resolve(spec: ProbeSpec) -> Probe:
    """The probe ``spec`` describes, ready to run here; raises KeyError for an unknown registered
    name, ProbeLoadError for a source that cannot be loaded and MissingRequirement for a probe that
    needs a module (torch) this installation lacks."""
    probe = _probe_of(spec)
    missing = missing_requirement(probe.requires)
    if missing is not None:
        raise MissingRequirement(f"probe {spec.name!r} {missing}")
    return probe


def _probe_of(spec: ProbeSpec) -> Probe:
    if spec.source is Source.REGISTERED:
        return get_probe(spec.name)
    if spec.source is Source.COMMAND:
        return _command_probe(spec)
    return _module_probe(spec)


def _command_probe(spec: ProbeSpec) -> Probe:
    from probes.command import CommandCheck

    parts: dict[str, Any] = {"command": list(spec.command), "inputs": _input_digests(spec)}
    if spec.reads:  # what a result claims to depend on; without reads, the hash results were stored under
        parts["reads"] = sorted(spec.reads)
    if spec.metrics:  # what its samples mean and how many there are
        parts["metrics"] = spec.to_json()["metrics"]
        parts["repeat"] = spec.repeat
    fingerprint = _fingerprint(parts)
    return SourcedProbe(
        spec.name,
        spec.version or 1,
        " ".join(spec.command),
        (Case(COMMAND_CASE, {}),),
        CommandCheck(tuple(spec.argv()), spec.repeat),
        metrics=spec.metrics,
        repeat=spec.repeat,
        spec=spec,
        fingerprint=fingerprint,
    )


def _module_probe(spec: ProbeSpec) -> Probe:
    where, _, attr = spec.module.partition(":")
    module, source = _load_module(spec, where)
    code = _digest(source) if where.endswith(".py") else module_closure_hash(module)
    found = getattr(module, attr, None) if attr else _registered(spec, where)
    parts: dict[str, Any] = {"module": code, "inputs": _input_digests(spec)}
    if isinstance(found, Probe) and isinstance(found.check, str):  # named by place: ``module`` does not import it
        parts["check"] = found.code_hash
    fingerprint = _fingerprint(parts)
    if isinstance(found, Probe):
        copied = {f.name: getattr(found, f.name) for f in fields(Probe)}
        copied.update(name=spec.name, version=spec.version or found.version)
        return SourcedProbe(**copied, spec=spec, fingerprint=fingerprint)
    if callable(found):
        description = (found.__doc__ or spec.module).strip().splitlines()[0]
        return SourcedProbe(
            spec.name,
            spec.version or 1,
            description,
            (Case(FUNCTION_CASE, {}),),
            found,
            spec=spec,
            fingerprint=fingerprint,
        )
    what = "nothing" if found is None else type(found).__name__
    raise ProbeLoadError(f"{spec.module} names {what}, not a Probe or a check function; point it at one")


def _registered(spec: ProbeSpec, where: str) -> Probe:
    try:
        return get_probe(spec.name)
    except KeyError:
        raise ProbeLoadError(
            f"{where} registers no probe called {spec.name!r}; register one or name it {where}:ATTR"
        ) from None


def _load_module(spec: ProbeSpec, where: str) -> tuple[ModuleType, bytes]:
    """The module and the source it ran; a file is run from the bytes read, so what is hashed is what ran."""
    if where.endswith(".py"):
        return _load_file(Path(spec.base, where))
    try:
        module = importlib.import_module(where)
        source = _source_of(module)
        if _IMPORTED.setdefault(where, source) != source:  # edited since this process imported it
            module = importlib.reload(module)
            _IMPORTED[where] = source
    except Exception as exc:
        raise ProbeLoadError(f"cannot import probe module {where!r}: {type(exc).__name__}: {exc}") from exc
    return module, source


_IMPORTED: dict[str, bytes] = {}
"""The source of each importable probe module when this process first resolved it."""


def _source_of(module: ModuleType) -> bytes:
    origin = getattr(module, "__file__", None)
    return Path(origin).read_bytes() if origin else module.__name__.encode()


_FILES: dict[Path, tuple[ModuleType, bytes]] = {}
"""Each probe file loaded, with the source it ran: run again only when the file changed."""


def _load_file(path: Path) -> tuple[ModuleType, bytes]:
    try:
        source = path.read_bytes()
    except OSError as exc:
        raise ProbeLoadError(f"cannot read probe file {path}: {exc.strerror}") from None
    if path in _FILES and _FILES[path][1] == source:
        return _FILES[path]
    name = f"regtrack_probe_{_digest(str(path).encode())[:12]}"
    module = ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)
    except Exception as exc:
        del sys.modules[name]
        raise ProbeLoadError(f"probe file {path} does not load: {type(exc).__name__}: {exc}") from exc
    _FILES[path] = (module, source)
    return module, source


def _input_digests(spec: ProbeSpec) -> dict[str, str]:
    digests = {}
    for name in spec.inputs:
        try:
            digests[name] = _digest(Path(spec.base, name).read_bytes())
        except OSError as exc:
            raise ProbeLoadError(
                f"cannot read input {name!r} of probe {spec.name!r} in {spec.base}: {exc.strerror}"
            ) from None
    return digests


def _fingerprint(parts: dict[str, Any]) -> str:
    return _digest(json.dumps(parts, sort_keys=True).encode())[:16]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
