from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tracker.execution.environment import quiet_torch_import

quiet_torch_import()
import torch  # noqa: E402
from chromium import browser  # noqa: F401  (the fixture of the report tests)
from postgres_server import Server, missing, running_server  # noqa: E402


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
