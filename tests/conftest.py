from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from chromium import browser  # noqa: F401  (the fixture of the report tests)
from demo_histories import DemoHistories
from postgres_server import Server, missing, running_server

from tracker.execution.environment import quiet_torch_import


@pytest.fixture(scope="session")
def postgres() -> Iterator[Server]:
    """A throwaway PostgreSQL server for the whole session. Skipped where none can be started,
    except in CI, which installs one: a store test that silently skipped there would be a green
    run that tested nothing."""
    if (why := missing()) is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the PostgreSQL tests, but {why}")
        pytest.skip(why)
    with running_server() as server:
        yield server


@pytest.fixture(scope="session")
def demo_histories(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoHistories]:
    """Each demo history built once per session and shared; ``copy`` gives a test one to write to.
    A shared one written to would let one test's leftovers decide another's result: that fails the run."""
    histories = DemoHistories(tmp_path_factory.mktemp("demo-histories"))
    yield histories
    assert not histories.written_to(), "a test wrote to a shared demo history; give it demo_histories.copy"


def cuda_available() -> bool:
    """Whether torch sees a CUDA device: imports torch, so it is asked only when a GPU test was collected."""
    quiet_torch_import()
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items or cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in gpu_items:
        item.add_marker(skip_gpu)
