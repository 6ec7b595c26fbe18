"""The checks of the demo backend's probes: each imports torch and its helpers at the top and is
imported by name (``Probe.check``) only when a worker runs one of its cases."""
