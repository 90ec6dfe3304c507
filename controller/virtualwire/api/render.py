"""JSON in and out of the REST edge: answers, errors, request bodies
(bounded, checked, saying what is wrong)."""
import json

import webob

from virtualwire.api.errors import LengthRequired
from virtualwire.core import errors

MAX_BODY = 64 * 1024


def json_response(status, doc):
    return webob.Response(status=status, charset='utf-8',
                          content_type='application/json',
                          body=(json.dumps(doc, indent=1) + '\n').encode())


def error(status, message):
    return json_response(status, {'error': {'status': status,
                                            'message': message}})


def peek_json(req):
    """The body as JSON for an access check that depends on it (the
    handler reads it again): a body that is not JSON is refused here,
    saying why, before any access decision is made on it."""
    if not req.content_length:
        return None
    if req.content_length > MAX_BODY:
        raise errors.TooLarge('request body over %d bytes' % MAX_BODY)
    try:
        return json.loads(req.body)
    except RecursionError:
        raise errors.Malformed('body is not valid JSON: nested too deeply') \
            from None
    except (ValueError, UnicodeDecodeError) as e:
        raise errors.Malformed('body is not valid JSON: %s' % e) from None


def read_json_object(req, limit=MAX_BODY):
    """The request body as a JSON object, or a domain error saying why not
    (too large, undelimited, not JSON, nested too deeply, not an object)."""
    if req.content_length is not None and req.content_length > limit:
        raise errors.TooLarge('request body over %d bytes' % limit)
    chunked = 'chunked' in req.headers.get('Transfer-Encoding', '').lower()
    if chunked:
        raw_in = req.body_file_raw
        if not getattr(raw_in, 'chunked_input', False):
            raise LengthRequired('chunked request bodies are not supported '
                                 'by this server; send Content-Length')
        raw = raw_in.read(limit + 1)
    else:
        raw = req.body_file.read(limit + 1)
    if len(raw) > limit:
        raise errors.TooLarge('request body over %d bytes' % limit)
    try:
        doc = json.loads(raw or b'null')
    except RecursionError:
        raise errors.Malformed('body is not valid JSON: nested too deeply') \
            from None
    except (ValueError, UnicodeDecodeError) as e:
        raise errors.Malformed('body is not valid JSON: %s' % e) from None
    if not isinstance(doc, dict):
        raise errors.Malformed('body must be a JSON object')
    return doc
