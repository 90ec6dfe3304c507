"""What the stores can refuse, as domain errors."""
from virtualwire.core import errors


class StoreError(errors.Unavailable):
    """The database did not take a write (or did not answer)."""


class VnicTaken(errors.Conflict):
    """The database refused a second wire on a vNIC."""


class LinkExists(errors.Conflict):
    """The two extenders are already linked."""
