"""The web dashboard's files, served by the controller at /ui/: a static
page that signs in with the API's bearer token and polls the API (no build
step, no third-party script).

The files hold no data and are served without the token; every figure the
page shows comes from the API, which asks for it. What the headers protect
against: a script injected through a name we show (the page writes text,
never HTML, and the Content-Security-Policy runs only our own files), the
page framed by another site (frame-ancestors), a browser guessing a
type. What they do not: anyone who can read the token (it lives in the
tab's sessionStorage until the tab closes or "sign out"), or traffic read
on the way: put the API behind TLS where the network is not trusted."""
import os

import webob

HERE = os.path.join(os.path.dirname(__file__), 'dashboard')
TYPES = {'.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css',
         '.svg': 'image/svg+xml'}
FILES = frozenset(f for f in os.listdir(HERE)
                  if os.path.splitext(f)[1] in TYPES)
POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; "
          "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
          "base-uri 'none'; form-action 'none'")


def serve(name):
    """The response for /ui/<name> ('' is the page), or None if no such
    file (only the dashboard's own files, never a path)."""
    name = name or 'index.html'
    if name not in FILES:
        return None
    with open(os.path.join(HERE, name), 'rb') as f:
        body = f.read()
    resp = webob.Response(status=200, body=body)
    resp.headers['Content-Type'] = TYPES[os.path.splitext(name)[1]] + \
        '; charset=utf-8'
    resp.headers['Content-Security-Policy'] = POLICY
    resp.headers['X-Content-Type-Options'] = 'nosniff'
    resp.headers['Referrer-Policy'] = 'no-referrer'
    resp.headers['Cache-Control'] = 'no-cache'
    return resp
