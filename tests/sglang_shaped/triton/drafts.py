"""The SGLang-shaped multi-step draft backend of ``triton_backend.py`` (eras T1 and T3) and the
module of the draft-decode kernel it launches, as text templates (``source`` renders them)."""

MULTI_STEP = '''

class TritonMultiStepDraftBackend:
    """Wrap one triton attention backend per draft step, for consecutive draft decoding steps."""

    def __init__(self, model_runner, topk: int, speculative_num_steps: int):
        self.topk = topk
        self.speculative_num_steps = speculative_num_steps
        max_bs = model_runner.req_to_token_pool.size * self.topk
        self.kv_indptr = torch.zeros((speculative_num_steps, max_bs + 1), dtype=torch.int32, device=model_runner.device)
        self.attn_backends: List[TritonAttnBackend] = [
            TritonAttnBackend(model_runner, skip_prefill=True, kv_indptr_buf=self.kv_indptr[i])
            for i in range(speculative_num_steps - 1)
        ]
        self.max_context_len = self.attn_backends[0].max_context_len
        self.device = model_runner.device
        self.req_to_token_pool = model_runner.req_to_token_pool
        self.pool_len = model_runner.req_to_token_pool.req_to_token.shape[1]
        self.page_size = model_runner.page_size

    def common_template(self, forward_batch: ForwardBatch, kv_indices_buffer, call_fn, prefix_lens=None):
        if kv_indices_buffer is None:
            kv_indices_buffer = self.cuda_graph_kv_indices
        num_seqs = forward_batch.batch_size
        bs = self.topk * num_seqs
        generate_draft_decode_kv_indices[(self.speculative_num_steps, num_seqs, self.topk)](
            forward_batch.req_pool_indices,
            self.req_to_token_pool.req_to_token,
            forward_batch.seq_lens if prefix_lens is None else prefix_lens,
            kv_indices_buffer,
            self.kv_indptr,
            forward_batch.positions,
            self.pool_len,
            kv_indices_buffer.shape[1],
            self.kv_indptr.shape[1],
            next_power_of_2(num_seqs),
            next_power_of_2(self.speculative_num_steps),
            next_power_of_2(bs),
            self.page_size,
        )
        if call_fn is None:
            return
        for i in range(self.speculative_num_steps - 1):
            forward_batch.spec_info.kv_indptr = self.kv_indptr[i, : bs + 1]
            seq_lens_sum = forward_batch.seq_lens_sum
            if seq_lens_sum is None:
                seq_lens_sum = num_seqs * self.max_context_len
            used = seq_lens_sum * self.topk + bs * (i + 1)
            forward_batch.spec_info.kv_indices = kv_indices_buffer[i][:used]
            call_fn(i, forward_batch)

    def init_forward_metadata(self, forward_batch: ForwardBatch):
        width = forward_batch.batch_size * self.topk * self.max_context_len
        kv_indices = torch.empty((self.speculative_num_steps, width), dtype=torch.int64, device=self.device)

        def call_fn(i, forward_batch):
            forward_batch.spec_info.kv_indptr = forward_batch.spec_info.kv_indptr.clone()
            forward_batch.spec_info.kv_indices = forward_batch.spec_info.kv_indices.clone()
            self.attn_backends[i].init_forward_metadata(forward_batch)

        self.common_template(forward_batch, kv_indices, call_fn)

    def init_cuda_graph_state(self, max_bs: int, max_num_tokens: int):
        width = max_num_tokens * self.max_context_len
        splits = self.attn_backends[0].max_kv_splits
        shape = (self.speculative_num_steps, width)
        self.cuda_graph_kv_indices = torch.zeros(shape, dtype=torch.int64, device=self.device)
        self.cuda_graph_num_kv_splits = torch.full((max_num_tokens,), splits, dtype=torch.int32, device=self.device)
        for i in range(self.speculative_num_steps - 1):
            self.attn_backends[i].init_cuda_graph_state(
                max_bs,
                max_num_tokens,
                kv_indices_buf=self.cuda_graph_kv_indices[i],
                cuda_graph_num_kv_splits_buf=self.cuda_graph_num_kv_splits,
            )
'''

MULTI_CAPTURE_REPLAY = """
    def init_forward_metadata_capture_cuda_graph(self, forward_batch: ForwardBatch):
        def call_fn(i, forward_batch):
            self.attn_backends[i].init_forward_metadata_capture_cuda_graph(
                forward_batch.batch_size, forward_batch.batch_size * self.topk, forward_batch.req_pool_indices,
                forward_batch.seq_lens,
                encoder_lens=None,
                forward_mode=ForwardMode.DECODE,
                spec_info=forward_batch.spec_info,
            )

        self.common_template(forward_batch, None, call_fn)

    def init_forward_metadata_replay_cuda_graph(self, forward_batch: ForwardBatch, bs: int):
        self.common_template(forward_batch, None, None, $draft_replay_prefix)
"""

MULTI_OUT_OF_GRAPH = """
    def init_forward_metadata_out_graph(self, forward_batch: ForwardBatch, in_capture: bool = False):
        if not in_capture:
            self.common_template(forward_batch, None, None, $draft_replay_prefix)
            return
        inner = SimpleNamespace(**{**vars(forward_batch), "forward_mode": ForwardMode.DECODE})

        def call_fn(i, _forward_batch):
            self.attn_backends[i].init_forward_metadata_out_graph(inner, in_capture=True)

        self.common_template(forward_batch, None, call_fn)

    def init_forward_metadata_in_graph(self, forward_batch: ForwardBatch) -> None:
        for backend in self.attn_backends:
            backend.init_forward_metadata_in_graph(forward_batch)
"""

SPEC_UTILS = '''\
"""Speculative decoding helpers shared by the attention backends."""

import triton
import triton.language as tl


@triton.jit
def generate_draft_decode_kv_indices(
    req_pool_indices,
    req_to_token,
    paged_kernel_lens,
    kv_indices,
    kv_indptr,
    positions,
    pool_len: tl.constexpr,
    kv_indices_stride: tl.constexpr,
    kv_indptr_stride: tl.constexpr,
    bs_upper: tl.constexpr,
    iter_upper: tl.constexpr,
    num_tokens_upper: tl.constexpr,
    page_size: tl.constexpr,
):
    """Every draft step's KV indices and indptr: one program per (step, request, branch)."""
    step = tl.program_id(axis=0)
    seq = tl.program_id(axis=1)
    branch = tl.program_id(axis=2)
    topk = tl.num_programs(axis=2)
    done = step + 1
    earlier = tl.arange(0, bs_upper)
    prefix = tl.sum(tl.load(paged_kernel_lens + earlier, mask=earlier < seq, other=0))
    length = tl.load(paged_kernel_lens + seq)
    row = kv_indices + step * kv_indices_stride + prefix * topk + seq * done * topk + branch * (length + done)
    pool = req_to_token + tl.load(req_pool_indices + seq) * pool_len
    for start in range(0, length, 128):
        offset = start + tl.arange(0, 128)
        tl.store(row + offset, tl.load(pool + offset, mask=offset < length), mask=offset < length)
    drafted = tl.arange(0, iter_upper)
    first = length + branch * tl.num_programs(axis=0)
    tl.store(row + length + drafted, tl.load(pool + first + drafted, mask=drafted < done), mask=drafted < done)
    flat = seq * topk + branch
    entry = tl.where(flat == 0, tl.num_programs(axis=1) * topk, flat)
    counted = tl.arange(0, num_tokens_upper)
    total = tl.sum(tl.load(positions + counted, mask=counted < entry, other=0))
    tl.store(kv_indptr + step * kv_indptr_stride + entry, total + entry * done)
'''
