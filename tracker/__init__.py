"""regtrack: regression tracking and bisect automation for GPU attention backends."""
