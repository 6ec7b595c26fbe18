"""The shaped ``flashinfer_backend.py``'s indices updaters and multi-step draft backend."""

from __future__ import annotations

UPDATERS = """

class FlashInferIndicesUpdaterDecode:
    def __init__(self, model_runner: ModelRunner, attn_backend: FlashInferAttnBackend):
        self.num_qo_heads = model_runner.model_config.num_attention_heads
        self.num_kv_heads = model_runner.model_config.get_num_kv_heads(1)
        self.head_dim = model_runner.model_config.head_dim
        self.data_type = model_runner.kv_cache_dtype
        self.q_data_type = model_runner.dtype
        self.attn_backend = attn_backend
        self.kv_indptr = attn_backend.kv_indptr
        self.kv_last_page_len = attn_backend.kv_last_page_len
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.update = self.update_single_wrapper

    def update(self, req_pool_indices, seq_lens, seq_lens_cpu, seq_lens_sum, decode_wrappers, encoder_lens, spec_info):
        # Keep the signature for type checking. It will be assigned during runtime.
        raise NotImplementedError()

    def update_single_wrapper(
        self, req_pool_indices, seq_lens, seq_lens_cpu, seq_lens_sum, decode_wrappers, encoder_lens, spec_info
    ):
        self.call_begin_forward(
            decode_wrappers[0], req_pool_indices, seq_lens, seq_lens_sum, self.kv_indptr[0], None, spec_info,
            seq_lens_cpu,
        )

    def call_begin_forward(
        self, wrapper, req_pool_indices, paged_kernel_lens, paged_kernel_lens_sum, kv_indptr, kv_start_idx,
        spec_info, seq_lens_cpu,
    ):
        if spec_info is None or getattr(spec_info, "kv_indptr", None) is None:
            bs = len(req_pool_indices)
            kv_indptr[1 : bs + 1] = torch.cumsum(paged_kernel_lens, dim=0)
            kv_indptr = kv_indptr[: bs + 1]
            if wrapper.is_cuda_graph_enabled:
                kv_indices = wrapper._paged_kv_indices_buf
            else:
                kv_indices = torch.empty(paged_kernel_lens_sum, dtype=torch.int32, device="cuda")
            create_flashinfer_kv_indices_triton[(bs,)](
                self.req_to_token, req_pool_indices, paged_kernel_lens, kv_indptr, kv_start_idx, kv_indices,
                self.req_to_token.shape[1],
            )
        else:
            kv_indptr, kv_indices = spec_info.kv_indptr, spec_info.kv_indices
            bs = kv_indptr.shape[0] - 1
        wrapper.begin_forward(
            kv_indptr, kv_indices, self.kv_last_page_len[:bs], self.num_qo_heads, self.num_kv_heads,
            self.head_dim, 1, data_type=self.data_type, q_data_type=self.q_data_type, non_blocking=True,
        )


class FlashInferIndicesUpdaterPrefill:
    def __init__(self, model_runner: ModelRunner, attn_backend: FlashInferAttnBackend):
        self.num_qo_heads = model_runner.model_config.num_attention_heads
        self.num_kv_heads = model_runner.model_config.get_num_kv_heads(1)
        self.head_dim = model_runner.model_config.head_dim
        self.data_type = model_runner.kv_cache_dtype
        self.q_data_type = model_runner.dtype
        self.attn_backend = attn_backend
        self.kv_indptr = attn_backend.kv_indptr
        self.kv_last_page_len = attn_backend.kv_last_page_len
        self.qo_indptr = attn_backend.qo_indptr
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.prefill_wrapper_ragged = attn_backend.prefill_wrapper_ragged
        self.update = self.update_single_wrapper

    def update(
        self, req_pool_indices, seq_lens, seq_lens_cpu, seq_lens_sum, prefix_lens, prefill_wrappers, use_ragged,
        encoder_lens, spec_info,
    ):
        # Keep the signature for type checking. It will be assigned during runtime.
        raise NotImplementedError()

    def update_single_wrapper(
        self, req_pool_indices, seq_lens, seq_lens_cpu, seq_lens_sum, prefix_lens, prefill_wrappers, use_ragged,
        encoder_lens, spec_info,
    ):
        if use_ragged:
            paged_kernel_lens = prefix_lens
            paged_kernel_lens_sum = paged_kernel_lens.sum().item()
        else:
            paged_kernel_lens = seq_lens
            paged_kernel_lens_sum = seq_lens_sum
        self.call_begin_forward(
            self.prefill_wrapper_ragged, prefill_wrappers[0], req_pool_indices, paged_kernel_lens,
            paged_kernel_lens_sum, seq_lens, prefix_lens, None, self.kv_indptr[0], self.qo_indptr[0], use_ragged,
            spec_info,
        )

    def call_begin_forward(
        self, wrapper_ragged, wrapper_paged, req_pool_indices, paged_kernel_lens, paged_kernel_lens_sum, seq_lens,
        prefix_lens, kv_start_idx, kv_indptr, qo_indptr, use_ragged, spec_info,
    ):
        bs = len(seq_lens)
        if spec_info is None:
            kv_indptr[1 : bs + 1] = torch.cumsum(paged_kernel_lens, dim=0)
            kv_indptr = kv_indptr[: bs + 1]
            kv_indices = torch.empty(paged_kernel_lens_sum + 256, dtype=torch.int32, device=req_pool_indices.device)
            create_flashinfer_kv_indices_triton[(bs,)](
                self.req_to_token, req_pool_indices, paged_kernel_lens, kv_indptr, kv_start_idx, kv_indices,
                self.req_to_token.shape[1],
            )
            qo_indptr[1 : bs + 1] = torch.cumsum(seq_lens - prefix_lens, dim=0)
            qo_indptr = qo_indptr[: bs + 1]
            custom_mask = None
        else:
            kv_indices, kv_indptr, qo_indptr, custom_mask = spec_info.generate_attn_arg_prefill(
                req_pool_indices, paged_kernel_lens, paged_kernel_lens_sum, self.req_to_token
            )
        if use_ragged:
            wrapper_ragged.begin_forward(
                qo_indptr, qo_indptr, self.num_qo_heads, self.num_kv_heads, self.head_dim, q_data_type=self.q_data_type
            )
        wrapper_paged.begin_forward(
            qo_indptr, kv_indptr, kv_indices, self.kv_last_page_len[:bs], self.num_qo_heads, self.num_kv_heads,
            self.head_dim, 1, q_data_type=self.q_data_type, kv_data_type=self.data_type, custom_mask=custom_mask,
            non_blocking=True,
        )
"""

MULTI_STEP = '''

class FlashInferMultiStepDraftBackend:
    """
    Wrap multiple flashinfer attention backends as one for multiple consecutive
    draft decoding steps.
    """

    def __init__(self, model_runner: ModelRunner, topk: int, speculative_num_steps: int):
        self.topk = topk
        self.speculative_num_steps = speculative_num_steps
        self.generate_draft_decode_kv_indices = generate_draft_decode_kv_indices
        self.page_size = model_runner.page_size
        max_bs = model_runner.req_to_token_pool.size * self.topk
        self.kv_indptr = torch.zeros((self.speculative_num_steps, max_bs + 1), dtype=torch.int32, device="cuda")
        self.kv_last_page_len = torch.ones((max_bs,), dtype=torch.int32, device="cuda")
        self.attn_backends: List[FlashInferAttnBackend] = [
            FlashInferAttnBackend(
                model_runner, skip_prefill=True, kv_indptr_buf=self.kv_indptr[i],
                kv_last_page_len_buf=self.kv_last_page_len,
            )
            for i in range(self.speculative_num_steps - 1)
        ]
        self.max_context_len = self.attn_backends[0].max_context_len
        self.pool_len = model_runner.req_to_token_pool.req_to_token.shape[1]
        self.req_to_token_pool = model_runner.req_to_token_pool

    def common_template(self, forward_batch: ForwardBatch, kv_indices_buffer: torch.Tensor, call_fn: Callable):
        num_seqs = forward_batch.batch_size
        bs = self.topk * num_seqs
        seq_lens_sum = forward_batch.seq_lens_sum
        self.generate_draft_decode_kv_indices[(self.speculative_num_steps, num_seqs, self.topk)](
            forward_batch.req_pool_indices, self.req_to_token_pool.req_to_token, forward_batch.seq_lens,
            kv_indices_buffer, self.kv_indptr, forward_batch.positions, self.pool_len, kv_indices_buffer.shape[1],
            self.kv_indptr.shape[1], next_power_of_2(num_seqs), next_power_of_2(self.speculative_num_steps),
            next_power_of_2(bs), self.page_size,
        )
        assert forward_batch.spec_info is not None
        assert forward_batch.spec_info.is_draft_input()
        global global_override_indptr_cpu
        indptr_cpu_whole = self.kv_indptr[:, : bs + 1].cpu()
        for i in range(self.speculative_num_steps - 1):
            forward_batch.spec_info.kv_indptr = self.kv_indptr[i, : ${indptr_rows} + 1]
            forward_batch.spec_info.kv_indices = kv_indices_buffer[i][: seq_lens_sum * self.topk + bs * (i + 1)]
            global_override_indptr_cpu = indptr_cpu_whole[i]
            call_fn(i, forward_batch)
        global_override_indptr_cpu = None

    def init_forward_metadata(self, forward_batch: ForwardBatch):
        kv_indices = torch.empty(
            (self.speculative_num_steps, forward_batch.batch_size * self.topk * self.max_context_len),
            dtype=torch.int32,
            device="cuda",
        )

        def call_fn(i, forward_batch):
            forward_batch.spec_info.kv_indptr = forward_batch.spec_info.kv_indptr.clone()
            forward_batch.spec_info.kv_indices = forward_batch.spec_info.kv_indices.clone()
            self.attn_backends[i].init_forward_metadata(forward_batch)

        self.common_template(forward_batch, kv_indices, call_fn)

    def init_cuda_graph_state(self, max_bs: int, max_num_tokens: int):
        self.cuda_graph_kv_indices = torch.zeros(
            (self.speculative_num_steps, max_bs * self.topk * self.max_context_len), dtype=torch.int32, device="cuda"
        )
        for i in range(self.speculative_num_steps - 1):
            self.attn_backends[i].init_cuda_graph_state(
                max_bs, max_num_tokens, kv_indices_buf=self.cuda_graph_kv_indices[i]${indices_copy}
            )
'''

MULTI_A = """
    def init_forward_metadata_capture_cuda_graph(self, forward_batch: ForwardBatch):
        def call_fn(i, forward_batch):
            self.attn_backends[i].init_forward_metadata_capture_cuda_graph(
                forward_batch.batch_size, forward_batch.batch_size * self.topk, forward_batch.req_pool_indices,
                forward_batch.seq_lens, encoder_lens=None, forward_mode=ForwardMode.DECODE,
                spec_info=forward_batch.spec_info,
            )

        self.common_template(forward_batch, self.cuda_graph_kv_indices, call_fn)

    def init_forward_metadata_replay_cuda_graph(self, forward_batch: ForwardBatch, bs: int):
        def call_fn(i, forward_batch):
            self.attn_backends[i].init_forward_metadata_replay_cuda_graph(
                bs, forward_batch.req_pool_indices, forward_batch.seq_lens, seq_lens_sum=-1, encoder_lens=None,
                forward_mode=ForwardMode.DECODE, spec_info=${draft_spec},
                seq_lens_cpu=forward_batch.seq_lens_cpu,
            )

        self.common_template(forward_batch, self.cuda_graph_kv_indices, call_fn)
"""

MULTI_B = """
    def init_forward_metadata_out_graph(self, forward_batch: ForwardBatch, in_capture: bool = False):
        bs = forward_batch.batch_size

        def call_fn(i, fb):
            inner_fb = SimpleNamespace(
                batch_size=bs, forward_mode=ForwardMode.DECODE, positions=fb.positions,
                req_pool_indices=fb.req_pool_indices, seq_lens=fb.seq_lens, seq_lens_sum=fb.seq_lens_sum,
                seq_lens_cpu=fb.seq_lens_cpu, encoder_lens=None, spec_info=${draft_spec},
            )
            self.attn_backends[i].init_forward_metadata_out_graph(inner_fb, in_capture=in_capture)

        self.common_template(forward_batch, self.cuda_graph_kv_indices, call_fn)

    def init_forward_metadata_in_graph(self, forward_batch: ForwardBatch) -> None:
        for attn_backend in self.attn_backends:
            attn_backend.init_forward_metadata_in_graph(forward_batch)
"""


def multi_step_graph(era: str) -> str:
    """The multi-step draft backend's graph entry points in ``era``."""
    return MULTI_A if era == "A" else MULTI_B
