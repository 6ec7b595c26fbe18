"""Probes by name: the built-in ones, those of installed distributions, and any a user registers.

A distribution offers probes through the ``regtrack.probes`` entry-point group: an entry point names
a Probe (``name = "mylib.probes:attention"``, the entry point called like the probe) or a module
whose import registers probes (``mylib = "mylib.probes"``).
"""

from __future__ import annotations

import importlib
import os
from importlib.metadata import EntryPoint, entry_points

from probes.api import Probe
from probes.demo_backend import NAMES as BUILTIN_NAMES

ENTRY_POINT_GROUP = "regtrack.probes"
PROBE_MODULES_ENV = "REGTRACK_PROBE_MODULES"

_PROBES: dict[str, Probe] = {}


class ProbeLoadError(Exception):
    """A probe's source exists but cannot be loaded: one line saying why."""


class MissingRequirement(ProbeLoadError):
    """A probe needs a module (torch) that is not installed here: one line naming it and how to install it."""


def register(probe: Probe) -> Probe:
    """Register ``probe`` under its name. A module run again (a probe file edited since it was
    loaded) replaces what it registered; another module's probe of the same name is an error."""
    known = _PROBES.get(probe.name)
    if known is not None and known is not probe and _defined_in(known) != _defined_in(probe):
        raise ValueError(f"a probe named {probe.name!r} is already registered")
    _PROBES[probe.name] = probe
    return probe


def get_probe(name: str) -> Probe:
    """The probe registered as ``name``. Only what it takes to find it is imported: the built-ins
    for a built-in name, else the modules of ``$REGTRACK_PROBE_MODULES``,
    the entry point of that name, or else every entry point that names a module."""
    if name not in _PROBES:
        _find(name)
    try:
        return _PROBES[name]
    except KeyError:
        raise KeyError(f"unknown probe {name!r}; known probes: {', '.join(known_names())}") from None


def all_probes() -> list[Probe]:
    """Every registered probe, in registration order (the built-ins first)."""
    _load_builtins()
    return list(_PROBES.values())


def known_names() -> list[str]:
    """The names of the built-in, registered and entry-point probes, importing no probe's check:
    an entry point that names a probe gives its name; one that names a module is imported, since
    its names are those it registers (such a module registers probes and imports no checks)."""
    points = probe_entry_points()
    for point in points:
        if not point.attr:
            _load_entry_point(point)
    named = (point.name for point in points if point.attr)
    return list(dict.fromkeys([*BUILTIN_NAMES, *_PROBES, *named]))


def probe_entry_points() -> list[EntryPoint]:
    return list(entry_points(group=ENTRY_POINT_GROUP))


def import_probe_modules() -> None:
    """Import the modules named in $REGTRACK_PROBE_MODULES (comma-separated) so their probes register."""
    for name in filter(None, (n.strip() for n in os.environ.get(PROBE_MODULES_ENV, "").split(","))):
        try:
            importlib.import_module(name)
        except Exception as exc:
            raise ProbeLoadError(
                f"cannot import probe module {name!r} named in {PROBE_MODULES_ENV}: "
                f"{type(exc).__name__}: {exc}; fix the name or put its directory on PYTHONPATH"
            ) from exc


def _find(name: str) -> None:
    if name in BUILTIN_NAMES:
        _load_builtins()
        return
    import_probe_modules()
    if name in _PROBES:
        return
    points = probe_entry_points()
    named = [point for point in points if point.name == name]
    for point in named or [point for point in points if not point.attr]:
        _load_entry_point(point)


def _load_entry_point(point: EntryPoint) -> None:
    where = f"entry point {point.name!r} ({point.value}) of group {ENTRY_POINT_GROUP}"
    try:
        loaded = point.load()
    except Exception as exc:
        raise ProbeLoadError(
            f"cannot load {where}: {type(exc).__name__}: {exc}; fix or uninstall its distribution"
        ) from exc
    if isinstance(loaded, Probe):
        if loaded.name != point.name:
            raise ProbeLoadError(f"{where} names a probe called {loaded.name!r}; give the entry point the probe's name")
        try:
            register(loaded)
        except ValueError as exc:
            raise ProbeLoadError(f"{where}: {exc}; rename one of them") from None
    elif point.attr:
        raise ProbeLoadError(f"{where} names a {type(loaded).__name__}, not a Probe; point it at a Probe or a module")


def _defined_in(probe: Probe) -> str | None:
    return probe.check_module


def _load_builtins() -> None:
    from probes.demo_backend import load

    load()
