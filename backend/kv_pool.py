"""A paged KV cache with SGLang's ``req_to_token`` indirection."""

from __future__ import annotations

import torch

from .config import BackendConfig, ceil_div


class PagedKVPool:
    """KV slots grouped into pages of ``page_size`` tokens (HND layout per page).

    ``req_to_token[req, pos]`` is the slot of token ``pos`` of request ``req``; a slot is
    ``page * page_size + offset``. Pages are handed out in a shuffled order, so a request's pages
    are scattered and a page table that points at the wrong row reads another request's KV.

    Sliding-window layers keep their KV in a separate, smaller pool; ``full_to_swa_page`` maps a
    full-attention page to the SWA pool page holding the same tokens.
    """

    def __init__(
        self,
        config: BackendConfig,
        num_pages: int,
        max_reqs: int,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
        seed: int = 0,
    ) -> None:
        self.config = config
        self.page_size = config.page_size
        self.num_pages = num_pages
        self.dtype = dtype
        self.device = torch.device(device)
        generator = torch.Generator().manual_seed(seed)
        shape = (num_pages, config.num_kv_heads, config.page_size, config.head_dim)
        self.k_cache = torch.randn(shape, generator=generator).to(dtype=dtype, device=self.device)
        self.v_cache = torch.randn(shape, generator=generator).to(dtype=dtype, device=self.device)
        self.req_to_token = torch.zeros(max_reqs, config.max_context_len, dtype=torch.int32, device=self.device)
        self.full_to_swa_page = torch.randperm(num_pages, generator=generator).to(torch.int32).to(self.device)
        self._free_pages = torch.randperm(num_pages, generator=generator).tolist()
        self._pages_of: dict[int, list[int]] = {}

    def alloc(self, req: int, length: int) -> None:
        """Give request ``req`` enough pages for ``length`` tokens and map its positions to slots."""
        if length > self.config.max_context_len:
            raise ValueError(f"length {length} exceeds max_context_len {self.config.max_context_len}")
        self.free(req)
        needed = ceil_div(length, self.page_size)
        if needed > len(self._free_pages):
            raise RuntimeError(f"KV pool out of pages: request {req} needs {needed}, {len(self._free_pages)} free")
        pages = [self._free_pages.pop() for _ in range(needed)]
        self._pages_of[req] = pages
        offsets = torch.arange(self.page_size, dtype=torch.int32)
        slots = (torch.tensor(pages, dtype=torch.int32)[:, None] * self.page_size + offsets).flatten()
        self.req_to_token[req].zero_()
        self.req_to_token[req, : slots.numel()] = slots.to(self.device)

    def free(self, req: int) -> None:
        self._free_pages.extend(self._pages_of.pop(req, []))

    def token_kv(self, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V of the given slots, ``[len(slots), num_kv_heads, head_dim]`` each."""
        pages, offsets = slots.long() // self.page_size, slots.long() % self.page_size
        return self.k_cache[pages, :, offsets], self.v_cache[pages, :, offsets]
