"""The built-in probes; importing this package registers them."""

from . import decode_graph_replay, swa_page_table, target_verify_attention, target_verify_metadata  # noqa: F401
