"""What the store raises for its callers to act on; importing it loads no SQLAlchemy."""


class NotStored(Exception):
    """A read-only store was asked for something it does not hold, or to write: the caller asks
    again over a store opened to write."""
