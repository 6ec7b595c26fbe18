"""One adapter per SGLang attention backend (``base.Adapter``): how the invariant probes make it
on the CPU and read what its attention call reads. ``probes.sglang.family`` lists the backends."""
