"""What the demo history holds outside ``backend/``: a small serving engine's files, the routine
changes that make up most of its commits, the large spec-v2 change, and two side branches."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tracker.demo.bugs import Edit


@dataclass(frozen=True)
class SideBranch:
    """A pull request of a few commits, started two commits before its merge and deleted after it."""

    name: str
    title: str
    commits: tuple[tuple[str, Mapping[str, str]], ...]


@dataclass(frozen=True)
class UnrelatedChange:
    """Sets the line of ``path`` that starts like ``line`` to ``line`` with ``{n}`` = ``base`` + position."""

    subject: str
    path: str
    line: str
    base: int


OTHER_FILES = {
    "README.md": """\
# minisrv

A small LLM serving engine: a continuous-batching scheduler, an HTTP server, speculative
decoding (EAGLE, NGRAM) and a paged-KV attention backend with CUDA-graph metadata.

    python -m engine.server --model PATH --speculative-algorithm EAGLE

`backend/` is self-contained: it imports nothing from `engine/` and is tested on its own.
""",
    ".github/workflows/ci.yml": """\
name: ci
on: [pull_request]
jobs:
  unit:
    runs-on: ubuntu-latest
    env:
      RUNNER_IMAGE_TAG: "1"
    steps:
      - uses: actions/checkout@v4
      - run: python -m pytest -q
""",
    "docs/changelog.md": """\
# Changelog

Changes land through pull requests; this file is cut at each release.
Last cut at build 1.

## 0.4.0

- Paged-KV attention backend with CUDA-graph metadata for decode and target verify.
- EAGLE and NGRAM speculative decoding.
""",
    "docs/server_args.md": """\
# Server arguments

| flag | meaning |
|---|---|
| `--model` | model path (required) |
| `--port` | HTTP port |
| `--speculative-algorithm` | EAGLE or NGRAM; off by default |
| `--speculative-num-draft-tokens` | draft tokens per request for target verify |
| `--attention-backend` | attention backend; `trtllm_mha` by default |

Reviewed against build 1.
""",
    "engine/__init__.py": '"""The serving engine around the attention backend."""\n',
    "engine/scheduler.py": '''\
"""Continuous batching: admit waiting requests while the KV pool has room for them."""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

MAX_RUNNING_REQUESTS = 256
CHUNKED_PREFILL_SIZE = 8192
LOG_EVERY_N_STEPS = 40


@dataclass
class Request:
    rid: str
    prompt_len: int
    max_new_tokens: int


@dataclass
class Scheduler:
    free_tokens: int
    waiting: deque[Request] = field(default_factory=deque)
    running: list[Request] = field(default_factory=list)
    steps: int = 0

    def admit(self) -> list[Request]:
        admitted = []
        while self.waiting and len(self.running) < MAX_RUNNING_REQUESTS:
            request = self.waiting[0]
            need = min(request.prompt_len, CHUNKED_PREFILL_SIZE) + request.max_new_tokens
            if need > self.free_tokens:
                break
            self.waiting.popleft()
            self.free_tokens -= need
            self.running.append(request)
            admitted.append(request)
        return admitted

    def step(self) -> None:
        self.steps += 1
        if self.steps % LOG_EVERY_N_STEPS == 0:
            logger.info("running=%d waiting=%d free=%d", len(self.running), len(self.waiting), self.free_tokens)
''',
    "engine/server.py": '''\
"""HTTP front end: parse the launch flags, start the scheduler and the detokenizer."""

from __future__ import annotations

import argparse

DEFAULT_PORT = 30000
HEALTH_CHECK_TIMEOUT_S = 20
DETOKENIZER_START_RETRIES = 3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="engine.server")
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--speculative-algorithm", choices=["EAGLE", "NGRAM"], default=None)
    parser.add_argument("--speculative-num-draft-tokens", type=int, default=4)
    parser.add_argument("--attention-backend", default="trtllm_mha")
    return parser.parse_args(argv)
''',
    "engine/spec_decode.py": '''\
"""Speculative decoding: draft a few tokens, then score them with one target-verify forward."""

from __future__ import annotations

from dataclasses import dataclass

DRAFT_TOKEN_POOL_SIZE = 4096
ACCEPT_RATE_LOG_INTERVAL = 100


@dataclass(frozen=True)
class SpecConfig:
    algorithm: str
    num_steps: int
    num_draft_tokens: int

    @property
    def verify_tokens_per_request(self) -> int:
        """Tokens each request carries into target verify with topk = 1."""
        return self.num_steps + 1


def accept_length(draft: list[int], target: list[int]) -> int:
    """How many leading draft tokens the target model agrees with."""
    accepted = 0
    for drafted, verified in zip(draft, target):
        if drafted != verified:
            break
        accepted += 1
    return accepted
''',
}

UNRELATED = (
    UnrelatedChange("Tidy scheduler logging", "engine/scheduler.py", "LOG_EVERY_N_STEPS = {n}", 40),
    UnrelatedChange("Raise the running-request cap", "engine/scheduler.py", "MAX_RUNNING_REQUESTS = {n}", 256),
    UnrelatedChange("Tune the chunked prefill size", "engine/scheduler.py", "CHUNKED_PREFILL_SIZE = {n}", 8192),
    UnrelatedChange("Give the health check more time", "engine/server.py", "HEALTH_CHECK_TIMEOUT_S = {n}", 20),
    UnrelatedChange("Move the default server port", "engine/server.py", "DEFAULT_PORT = {n}", 30000),
    UnrelatedChange("Retry detokenizer startup", "engine/server.py", "DETOKENIZER_START_RETRIES = {n}", 3),
    UnrelatedChange("Resize the draft token pool", "engine/spec_decode.py", "DRAFT_TOKEN_POOL_SIZE = {n}", 4096),
    UnrelatedChange("Log acceptance rates less often", "engine/spec_decode.py", "ACCEPT_RATE_LOG_INTERVAL = {n}", 100),
    UnrelatedChange("Bump docs for the server launch flags", "docs/server_args.md", "Reviewed against build {n}.", 1),
    UnrelatedChange("Cut the changelog", "docs/changelog.md", "Last cut at build {n}.", 1),
    UnrelatedChange("Pin the CI runner image", ".github/workflows/ci.yml", '      RUNNER_IMAGE_TAG: "{n}"', 1),
)

SPEC_V2_FILES = {
    "engine/spec_v2/__init__.py": '"""Speculative decoding v2: overlapped drafting, draft extend in CUDA graphs."""\n',
    "engine/spec_v2/draft_extend_graph.py": '''\
"""CUDA graphs for the EAGLE draft-extend step, one per captured batch size."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from backend import ForwardMode, PagedAttentionBackend


@dataclass
class DraftExtendGraphs:
    """Captures draft extend once per batch size and replays it for live batches."""

    backend: PagedAttentionBackend
    num_tokens_per_request: int
    batch_sizes: tuple[int, ...]
    graphs: dict[int, torch.cuda.CUDAGraph] = field(default_factory=dict)

    def capture(self, run_draft_extend, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor) -> None:
        for bs in self.batch_sizes:
            num_tokens = bs * self.num_tokens_per_request
            self.backend.init_forward_metadata_capture_cuda_graph(
                bs, num_tokens, req_pool_indices[:bs], seq_lens[:bs], ForwardMode.DRAFT_EXTEND
            )
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                run_draft_extend(bs)
            self.graphs[bs] = graph

    def can_run(self, bs: int) -> bool:
        return bs in self.graphs

    def replay(self, bs: int, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor) -> None:
        self.backend.init_forward_metadata_replay_cuda_graph(
            bs, req_pool_indices, seq_lens, ForwardMode.DRAFT_EXTEND
        )
        self.graphs[bs].replay()
''',
}

SPEC_V2_EDITS = (
    Edit(
        "engine/spec_decode.py",
        "DRAFT_TOKEN_POOL_SIZE = ",
        "SPEC_V2_DRAFT_EXTEND_GRAPHS = True\nDRAFT_TOKEN_POOL_SIZE = ",
    ),
    Edit(
        "engine/server.py",
        '    parser.add_argument("--attention-backend", default="trtllm_mha")\n',
        '    parser.add_argument("--attention-backend", default="trtllm_mha")\n'
        '    parser.add_argument("--enable-spec-v2", action="store_true")\n'
        '    parser.add_argument("--disable-draft-extend-cuda-graph", action="store_true")\n',
    ),
    Edit(
        "docs/server_args.md",
        "| `--attention-backend` | attention backend; `trtllm_mha` by default |\n",
        "| `--attention-backend` | attention backend; `trtllm_mha` by default |\n"
        "| `--enable-spec-v2` | overlapped speculative decoding with draft-extend CUDA graphs |\n"
        "| `--disable-draft-extend-cuda-graph` | run draft extend eagerly under spec v2 |\n",
    ),
)

DOCS_BRANCH = SideBranch(
    name="dev/docs-attention-guide",
    title="Attention backend guide",
    commits=(
        (
            "Document the paged KV layout",
            {"docs/attention.md": "# Attention backend\n\nKV lives in pages of `page_size` slots.\n"},
        ),
        (
            "Explain target verify in the attention guide",
            {
                "docs/attention.md": (
                    "# Attention backend\n\nKV lives in pages of `page_size` slots.\n\n"
                    "## Target verify\n\nEach request carries T query tokens that attend to its whole KV prefix\n"
                    "and, causally, to the draft tokens before them.\n"
                )
            },
        ),
    ),
)

FAQ_BRANCH = SideBranch(
    name="dev/docs-spec-decode-faq",
    title="Speculative decoding FAQ",
    commits=(
        (
            "Start a speculative decoding FAQ",
            {"docs/spec_decode_faq.md": "# Speculative decoding FAQ\n\n## Why is my acceptance rate low?\n"},
        ),
        (
            "Answer the CUDA graph question in the FAQ",
            {
                "docs/spec_decode_faq.md": (
                    "# Speculative decoding FAQ\n\n## Why is my acceptance rate low?\n\n"
                    "## Are verify steps captured in CUDA graphs?\n\n"
                    "Yes, one graph per batch size; replay rewrites the metadata in place.\n"
                )
            },
        ),
    ),
)
