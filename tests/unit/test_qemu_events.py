"""Reading QEMU's migration timeline from qemu-monitor-event output."""
from vwlab.qemu_events import parse, stop_resume_windows

SRC = """2026-11-22 21:23:16.179+0000: event MIGRATION for domain 'g1': {"status":"setup"}
2026-11-22 21:23:16.344+0000: event STOP for domain 'g1': <null>
2026-11-22 21:23:16.490+0000: event MIGRATION for domain 'g1': {"status":"completed"}
2026-11-22 21:23:17.000+0000: event STOP for domain 'other': <null>
"""
DST = """2026-11-22 21:23:16.505+0000: event RESUME for domain 'g1': <null>
2026-11-22 21:23:18.100+0000: event RESUME for domain 'other': <null>
"""


def test_stop_on_source_to_resume_on_destination():
    ev = parse(SRC, 'h1') + parse(DST, 'h2')
    assert len(ev) == 6
    (stop, src, resume, dst), = stop_resume_windows(ev, 'g1')
    assert (src, dst) == ('h1', 'h2')
    assert round((resume - stop) * 1000) == 161


def test_a_resume_on_the_same_host_is_not_a_migration():
    ev = parse(SRC, 'h1') + parse(DST.replace('g1', 'x'), 'h2') + parse(
        "2026-11-22 21:23:16.600+0000: event RESUME for domain 'g1': <null>",
        'h1')
    assert stop_resume_windows(ev, 'g1') == []
