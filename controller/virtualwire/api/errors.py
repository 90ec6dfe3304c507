"""Domain errors -> HTTP status codes: the only place that knows both."""
from virtualwire.core import errors

STATUS = (
    (errors.Malformed, 400),
    (errors.Refused, 403),
    (errors.NotFound, 404),
    (errors.Conflict, 409),
    (errors.TooLarge, 413),
    (errors.Invalid, 422),
    (errors.TooMany, 429),
    (errors.Unavailable, 503),
)


class LengthRequired(errors.VwError):
    """A body the server cannot delimit (chunked, where unsupported)."""


def status_of(exc: errors.VwError) -> int:
    if isinstance(exc, LengthRequired):
        return 411
    # A batch refused item by item answers with its first item's status.
    kind = getattr(exc, 'kind', type(exc))
    for cls, status in STATUS:
        if issubclass(kind, cls):
            return status
    return 400
