"""Domain errors. They say what is wrong in the controller's terms; only the
REST layer (`api.errors`) turns them into HTTP status codes, and only the
CLI into exit codes."""


class VwError(Exception):
    """Base of every error a caller can be told about."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class Malformed(VwError):
    """The request itself cannot be read (not JSON, wrong shape)."""


class Invalid(VwError):
    """A value that can never be valid, whatever the state."""


class NotFound(VwError):
    """The thing named does not exist (wire, host, vNIC, migration)."""


class Conflict(VwError):
    """Valid, but contradicts the current state (a vNIC already wired)."""


class TooLarge(VwError):
    """A request body over the limit."""


class Unavailable(VwError):
    """A dependency did not answer in time (a switch, the database)."""


class Refused(VwError):
    """Not allowed for this caller (a join token that is not valid)."""


class TooMany(VwError):
    """A limit on outstanding requests is reached; try again later."""
