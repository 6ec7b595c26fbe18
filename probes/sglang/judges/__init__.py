"""The checks of the SGLang probes: each imports torch, the revision's code and, on a GPU,
FlashInfer, and is imported by name (``Probe.check``) only when a worker runs one of its cases."""
