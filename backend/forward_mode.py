"""The forward passes the backend prepares metadata for."""

from __future__ import annotations

import enum


class ForwardMode(enum.Enum):
    """What one forward pass computes, as SGLang's ``ForwardMode`` names it.

    The modes differ in how many query tokens a request carries and in what ``seq_lens`` counts:

    - ``DECODE``: one query token per request; ``seq_lens`` already counts it.
    - ``TARGET_VERIFY``: T draft tokens per request (speculative decoding, topk = 1) scored by the
      target model; ``seq_lens`` is the KV prefix *without* the draft tokens.
    - ``DRAFT_EXTEND``: the draft model extends over T accepted tokens per request; ``seq_lens``
      already counts them.
    """

    DECODE = "decode"
    TARGET_VERIFY = "target_verify"
    DRAFT_EXTEND = "draft_extend"

    def kv_tokens_added(self, tokens_per_req: int) -> int:
        """How many tokens the KV length of a request exceeds ``seq_lens`` by in this mode."""
        return tokens_per_req if self is ForwardMode.TARGET_VERIFY else 0
