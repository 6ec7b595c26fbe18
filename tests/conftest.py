from __future__ import annotations

import pytest

from tracker.execution.environment import quiet_torch_import

quiet_torch_import()
import torch  # noqa: E402
from chromium import browser  # noqa: F401  (the fixture of the report tests)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
