"""Probes by name: the built-in ones and any a user registers."""

from __future__ import annotations

from probes.api import Probe

_PROBES: dict[str, Probe] = {}


def register(probe: Probe) -> Probe:
    if probe.name in _PROBES and _PROBES[probe.name] is not probe:
        raise ValueError(f"a probe named {probe.name!r} is already registered")
    _PROBES[probe.name] = probe
    return probe


def get_probe(name: str) -> Probe:
    """The probe registered as ``name``; the built-ins (and torch with them) are imported only
    when they are asked for, or to list what is known."""
    if name not in _PROBES:
        _load_builtins()
    try:
        return _PROBES[name]
    except KeyError:
        known = ", ".join(_PROBES)
        raise KeyError(f"unknown probe {name!r}; known probes: {known}") from None


def all_probes() -> list[Probe]:
    """Every registered probe, in registration order (the built-ins first)."""
    _load_builtins()
    return list(_PROBES.values())


def _load_builtins() -> None:
    from probes.demo_backend import load

    load()
