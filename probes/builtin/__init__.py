"""The built-in probes; importing this package registers them."""

from . import target_verify_metadata  # noqa: F401  (registration order is the default probe order)
from . import target_verify_attention  # noqa: F401
from . import decode_graph_replay  # noqa: F401
from . import swa_page_table  # noqa: F401
