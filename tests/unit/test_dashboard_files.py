"""The dashboard's files as the controller serves them: without the token
(they hold no data; the API they call asks for it), only its own files,
with headers that keep other sites' and injected scripts out. The page
itself runs in a real browser in tests/integration/test_dashboard.py."""
import re

import pytest
import webob

from virtualwire.api import dashboard
from virtualwire.api.rest import RestApi
from virtualwire.testing.harness import Harness


@pytest.fixture
def api():
    h = Harness()
    return RestApi(h.loop, h.ctl, h.intent, h.runtime, 'secret')


def get(api, path, method='GET'):
    return webob.Request.blank(path, method=method).get_response(api)


def test_the_root_leads_to_the_dashboard(api):
    for path in ('/', '/ui'):
        r = get(api, path)
        assert r.status_int == 302
        assert r.headers['Location'].endswith('/ui/')


def test_the_page_and_every_file_it_loads_are_served_without_the_token(api):
    page = get(api, '/ui/')
    assert page.status_int == 200
    assert page.content_type == 'text/html'
    html = page.body.decode()
    assert 'id="token"' in html and 'type="password"' in html
    wanted = set(re.findall(r'(?:src|href)="([\w.]+\.(?:js|css))"', html))
    for name in dashboard.FILES:
        if name.endswith('.js'):
            wanted |= set(re.findall(r"from '\./([\w.]+\.js)'", open(
                dashboard.HERE + '/' + name).read()))
    assert {'app.js', 'dashboard.css', 'draw.js', 'topology.js',
            'timeline.js'} <= wanted
    for name in wanted:
        r = get(api, '/ui/' + name)
        assert r.status_int == 200, name
        assert r.content_type == {'js': 'text/javascript',
                                  'css': 'text/css'}[name.rsplit('.', 1)[1]]


def test_headers_keep_other_sites_and_injected_scripts_out(api):
    r = get(api, '/ui/')
    csp = r.headers['Content-Security-Policy']
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "connect-src 'self'" in csp and 'unsafe' not in csp
    assert r.headers['X-Content-Type-Options'] == 'nosniff'
    # No inline script (the policy would block it), and no markup built
    # from strings: names from the API are set as text.
    html = r.body.decode()
    assert all('src=' in tag for tag in re.findall(r'<script[^>]*>', html))
    for name in dashboard.FILES:
        if name.endswith('.js'):
            src = open(dashboard.HERE + '/' + name).read()
            assert not re.search(r'innerHTML|outerHTML|insertAdjacentHTML|'
                                 r'document\.write|eval\(', src), name


@pytest.mark.parametrize('path', [
    '/ui/nope.js', '/ui/../rest.py', '/ui/%2e%2e%2frest.py',
    '/ui/..%2fdashboard.py', '/ui/dashboard'])
def test_only_the_dashboards_own_files(api, path):
    r = get(api, path)
    assert r.status_int == 404
    assert 'no such' in r.json['error']['message']


def test_the_data_behind_the_page_still_needs_the_token(api):
    assert get(api, '/v1/hosts').status_int == 401
    assert get(api, '/ui/', method='POST').status_int == 405
