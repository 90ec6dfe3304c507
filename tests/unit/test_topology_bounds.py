"""A tenant's topology files cost the controller bounded work (issue 39,
point 7): parsed off the control loop, at most PARALLEL at once, each
stored file parsed once (not again on every list), and per tenant at
most MAX_TOPOLOGIES files and MAX_TENANT_SOURCE bytes of them."""
import threading

import pytest

from virtualwire.api import topology_parsing
from virtualwire.api.topology_parsing import TopologyParser
from virtualwire.core import errors

SMALL = 'name: %s\nnodes:\n  a: {}\nlinks: []\n'


def test_a_parse_goes_through_the_offloader_once_per_text():
    ran = []

    def offload(fn, *args):
        ran.append(threading.get_ident())
        return fn(*args)
    p = TopologyParser(offload)
    first = p.parse(SMALL % 'one', 'one')
    assert p.parse(SMALL % 'one', 'one') is first
    assert len(ran) == 1
    p.parse(SMALL % 'two', 'two')
    assert len(ran) == 2
    with pytest.raises(errors.VwError):
        p.parse('name: [', 'bad')       # errors are not kept


def test_parses_beyond_the_parallel_ones_wait_then_are_refused(monkeypatch):
    monkeypatch.setattr(topology_parsing, 'WAIT', 0.05)
    release, inside = threading.Event(), threading.Semaphore(0)

    def slow(fn, *args):
        inside.release()
        release.wait(5)
        return fn(*args)
    p = TopologyParser(slow)
    threads = [threading.Thread(target=p.parse, args=(SMALL % n, n))
               for n in ('a', 'b')]
    for t in threads:
        t.start()
    for _ in threads:
        assert inside.acquire(timeout=5)
    with pytest.raises(errors.TooMany, match='too many topology files'):
        p.parse(SMALL % 'c', 'c')
    release.set()
    for t in threads:
        t.join(5)
    assert p.parse(SMALL % 'c', 'c').name == 'c'


class Rec:
    def __init__(self, name, source):
        self.name, self.source = name, source


def test_a_tenants_topologies_are_bounded_in_number_and_size(monkeypatch):
    recs = [Rec('t%d' % i, 'x' * 10) for i in range(64)]
    with pytest.raises(errors.TooMany, match='acme holds 64 topologies: '
                       'at most 64'):
        topology_parsing.check_quota(recs, 'acme', 'new', 'y')
    topology_parsing.check_quota(recs, 'acme', 't3', 'y')   # a replacement
    monkeypatch.setattr(topology_parsing, 'MAX_TENANT_SOURCE', 100)
    with pytest.raises(errors.TooLarge, match="acme's topology files would "
                       'total 101 bytes: at most 100'):
        topology_parsing.check_quota([Rec('a', 'x' * 60)], 'acme', 'b',
                                     'y' * 41)


def test_the_cache_is_bounded_by_the_text_it_holds(monkeypatch):
    monkeypatch.setattr(topology_parsing, 'CACHE_BYTES', 100)
    ran = []
    p = TopologyParser(lambda fn, *a: ran.append(a[1]) or fn(*a))
    p.parse(SMALL % 'one', 'one')           # 39 bytes each
    p.parse(SMALL % 'two', 'two')
    p.parse(SMALL % 'three', 'three')       # over 100: 'one' goes
    p.parse(SMALL % 'two', 'two')
    p.parse(SMALL % 'one', 'one')
    assert ran == ['one', 'two', 'three', 'one']
