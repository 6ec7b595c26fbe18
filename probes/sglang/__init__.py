"""Probes of a real SGLang checkout's TRTLLM MHA backend: its CUDA-graph metadata judged on the
CPU (the revision's code imported from its snapshot, GPU libraries stubbed, metadata kernels run
by CPU versions), and target-verify attention under a real CUDA graph on a GPU.

The probes register through the ``regtrack.probes`` entry points (pyproject.toml); importing a
probe module registers its probe."""
