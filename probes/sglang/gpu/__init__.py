"""GPU consequence checks of SGLang's attention backends: each backend's real attention kernel,
under a CUDA graph, handed the metadata the revision's own code computed for a graph replay (on
the CPU), against an fp32 reference built from the batch's true shapes."""
