"""The built-in probes; importing this package registers them."""

from . import target_verify_metadata  # noqa: F401
