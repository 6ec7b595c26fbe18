"""What the SGLang probes run once a worker has a revision: torch, the revision's code and, on a
GPU, FlashInfer. The probe modules one level up name the cases and import these lazily, so a
command that finds every result stored learns of a probe without importing torch."""
