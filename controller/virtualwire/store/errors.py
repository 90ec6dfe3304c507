"""What the stores can refuse, as domain errors."""
from virtualwire.core import errors
from virtualwire.ovsdb.errors import DatabaseUnavailable

# The bottom layer's error, under the name the stores' callers know.
StoreError = DatabaseUnavailable


class VnicTaken(errors.Conflict):
    """The database refused a second wire on a vNIC."""


class LinkExists(errors.Conflict):
    """The two extenders are already linked."""
