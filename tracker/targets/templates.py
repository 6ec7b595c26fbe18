"""Ready-made target configurations for known repositories, written by ``regtrack init NAME``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from probes.sglang import family
from probes.sglang.gpu import probes as gpu_probes
from tracker.core.errors import UsageError
from tracker.targets.revisions import Repo

CONFIG_NAME = "regtrack.toml"

SGLANG_PROBES = (
    *(probe.name for probe in family.PROBES),
    "sglang_swa_page_table",
    "sglang_target_verify_attention",
    *(probe.name for probe in gpu_probes.PROBES),
)
"""Every probe of SGLang's target, in the order the template lists them."""

SGLANG_GPU_PROBES = ("sglang_target_verify_attention", *(probe.name for probe in gpu_probes.PROBES))
"""Of ``SGLANG_PROBES``, those whose every case needs CUDA: on a CPU they could only say
"untestable" at every commit, so the template lists them only for ``--device cuda``."""

DEVICES = ("cpu", "cuda")


def sglang_probes(device: str = "cpu") -> tuple[str, ...]:
    """The SGLang probes that can judge a revision on ``device``."""
    on_gpu = device.startswith("cuda")
    return tuple(name for name in SGLANG_PROBES if on_gpu or name not in SGLANG_GPU_PROBES)


def _sglang(device: str) -> str:
    probes = sglang_probes(device)
    left_out = [name for name in SGLANG_PROBES if name not in probes]
    gpu_note = (
        f"# GPU-only probes ({', '.join(left_out)}) are listed by `regtrack init sglang --device cuda`.\n"
        if left_out
        else ""
    )
    return f"""\
# regtrack's SGLang target: every attention backend's CUDA-graph metadata in every forward mode,
# probed by running each revision's own python/sglang (GPU libraries stubbed on a CPU machine; a
# stub reached while a probe runs makes the revision untestable, never good or bad).
{gpu_note}[targets.sglang]
repo = "."
paths = ["python/sglang"]
branch = "main"
import_roots = ["python"]
timeout = 600
probes = {list(probes)!r}
"""


TEMPLATES: dict[str, Callable[[str], str]] = {"sglang": _sglang}
"""Each template by name, written for a device: ``cpu`` or ``cuda``."""

NOT_CODE = re.compile(
    r"(?i)(docs?|\.github|\.gitignore|\.gitattributes|\.mailmap|.*\.(md|rst)|licen[cs]e.*|authors.*|changelog.*|notice.*)"
)
"""Top-level entries whose change cannot change a check's result, left out of a starter's paths."""


def starter(repo: Repo) -> str:
    """A commented ``regtrack.toml`` for any repository: its paths guessed from the tree at HEAD, and
    a command probe to fill in. Nothing is probed until the command is written: a starter that ran
    a guessed command would judge revisions by it."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", repo.path.name) or "main"
    entries = repo.top_level_entries("HEAD")
    paths = [entry for entry in entries if not NOT_CODE.fullmatch(entry)] or ["."]
    return f"""\
# regtrack's target for this repository (`regtrack init` wrote it; edit freely).
[targets.{name}]
repo = "."
# The paths whose change can change a probe's result: a commit that touches none of them reuses
# its parent's result. Guessed from the tree, leaving out documentation; a path left out here is
# one whose changes are never tested, so when in doubt keep it (or write ["."]).
paths = {json.dumps(paths)}
branch = {json.dumps(repo.current_branch() or "main")}

# A probe: a command run in a read-only snapshot of each revision, judged like `git bisect run`:
# exit 0 good, 125 untestable, 1-127 bad, a signal or 128+ a crash. Write yours, then uncomment.
# [targets.{name}.probes.check]
# command = "sh check.sh"          # split like a shell would, never run through one
# inputs = ["check.sh"]            # files of your work tree it runs: their content is its version
# reads = ["src"]                  # paths of the revision its result depends on (finer reuse)
"""


def template(name: str, device: str = "cpu") -> str:
    """The template ``name`` with the probes that can judge a revision on ``device``."""
    try:
        written = TEMPLATES[name]
    except KeyError:
        raise UsageError(f"no template called {name!r}; known templates: {', '.join(TEMPLATES)}") from None
    return written(device)


def write_config(text: str, directory: Path, merge_hint: str) -> Path:
    """Write ``text`` as ``regtrack.toml`` in ``directory``, never over an existing one."""
    if not directory.is_dir():
        raise UsageError(f"{directory} is not a directory; give the repository's root")
    config = directory / CONFIG_NAME
    if config.exists():
        raise UsageError(f"{config} exists; remove it or merge {merge_hint} by hand")
    config.write_text(text)
    return config


def write_template(name: str, directory: Path, device: str = "cpu") -> Path:
    """Write the template ``name`` as ``regtrack.toml`` in ``directory``, never over an existing one."""
    hint = f"[targets.{name}] from `regtrack init {name} --print`"
    return write_config(template(name, device), directory, hint)


def config_text(name: str | None, directory: Path, device: str | None = None) -> str:
    """The template ``name`` for ``device``, or without one a starter for the repository at ``directory``."""
    _check_device_of(name, device)
    return template(name, device or "cpu") if name is not None else starter(_repository_at(directory))


def write_init(name: str | None, directory: Path, device: str | None = None) -> Path:
    """``regtrack init``: the template ``name`` for ``device`` into ``directory``, or a starter
    into the root of the repository at ``directory``; never over an existing config."""
    _check_device_of(name, device)
    if name is not None:
        return write_template(name, directory, device or "cpu")
    repo = _repository_at(directory)
    return write_config(starter(repo), repo.path, "the starter from `regtrack init --print`")


def _repository_at(directory: Path) -> Repo:
    if not directory.is_dir():
        raise UsageError(
            f"{directory} is neither a template ({', '.join(TEMPLATES)}) nor a directory; give a repository's root"
        )
    return Repo(directory)


def _check_device_of(name: str | None, device: str | None) -> None:
    """``--device`` picks a template's probes; a starter lists none to pick from."""
    if device is not None and name is None:
        raise UsageError(
            f"--device {device} picks the probes of a template ({', '.join(TEMPLATES)}); "
            "name one, or drop --device for a starter"
        )
