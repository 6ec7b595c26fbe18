"""What a probe needs besides regtrack's own dependencies, and how to install what is missing.

regtrack runs without torch (a ``--command`` bisect needs none); a probe that uses it says so in
``Probe.requires``, and asking for it where torch is not installed is a usage error that tells
how to install it, rather than a run that every revision would fail alike.
"""

from __future__ import annotations

import importlib.util
import sys

INSTALL_HINTS = {"torch": "pip install torch (CPU: pip install torch==2.13.0)"}


def installed(module: str) -> bool:
    """Whether ``module`` can be imported here, found without importing it. A finder that refuses
    the name (raises ImportError) counts as not installed."""
    if module in sys.modules:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_requirement(requires: tuple[str, ...]) -> str | None:
    """Why a probe that needs ``requires`` cannot run here, with how to install the first missing
    module; None when everything is installed."""
    for module in requires:
        if not installed(module):
            return f"needs {module}, which is not installed; {INSTALL_HINTS.get(module, f'pip install {module}')}"
    return None
