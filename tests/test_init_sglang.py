"""`regtrack init sglang` lists the probes that can judge a revision where they will run: the
GPU-only ones only with `--device cuda`, so a CPU scan does not call them untestable at every
commit."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from cli_in import regtrack

from probes import get_probe
from tracker.targets.templates import SGLANG_GPU_PROBES, SGLANG_PROBES


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)


def listed(tmp_path: Path, *options: str) -> list[str]:
    result = regtrack("init", "sglang", "--print", *options, cwd=tmp_path)
    assert result.exit_code == 0, result.output
    probes: list[str] = tomllib.loads(result.stdout)["targets"]["sglang"]["probes"]
    return probes


def test_the_cpu_template_leaves_the_gpu_only_probes_out_and_says_how_to_list_them(tmp_path: Path) -> None:
    assert listed(tmp_path) == listed(tmp_path, "--device", "cpu")
    assert listed(tmp_path) == [name for name in SGLANG_PROBES if name not in SGLANG_GPU_PROBES]
    text = regtrack("init", "sglang", "--print", cwd=tmp_path).stdout
    assert "`regtrack init sglang --device cuda`" in text and "sglang_target_verify_attention" in text


def test_the_cuda_template_lists_every_probe(tmp_path: Path) -> None:
    assert listed(tmp_path, "--device", "cuda") == list(SGLANG_PROBES)
    written = regtrack("init", "sglang", str(tmp_path), "--device", "cuda", cwd=tmp_path)
    assert written.exit_code == 0, written.output
    config = tomllib.loads((tmp_path / "regtrack.toml").read_text())
    assert config["targets"]["sglang"]["probes"] == list(SGLANG_PROBES)


def test_the_gpu_only_probes_are_those_whose_every_case_needs_cuda() -> None:
    gpu_only = {name for name in SGLANG_PROBES if all(case.cuda_only for case in get_probe(name).cases)}
    assert gpu_only == set(SGLANG_GPU_PROBES)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--device", "cuda"), "regtrack: error: --device cuda picks the probes of a template (sglang);"),
        (("sglang", "--device", "gpu"), "Invalid value for '--device': 'gpu' is not one of 'cpu', 'cuda'."),
    ],
)
def test_a_device_without_a_template_or_unknown_is_refused(args: tuple[str, ...], said: str, tmp_path: Path) -> None:
    result = regtrack("init", *args, "--print", cwd=tmp_path)
    assert result.exit_code == 2 and said in result.stderr, result.output
    assert not (tmp_path / "regtrack.toml").exists()
