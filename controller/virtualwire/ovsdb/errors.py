"""What an OVSDB server can do to a caller: not answer, or not take a
write. The stores re-export it as their StoreError."""
from virtualwire.core import errors


class DatabaseUnavailable(errors.Unavailable):
    """The database did not take a write (or did not answer)."""
