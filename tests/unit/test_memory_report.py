"""memory_report reads a tracemalloc snapshot as `process` writes it on
SIGUSR2, and names the line that holds the most first."""
import tracemalloc

from virtualwire import memory_report


def hold_a_lot():
    return [bytes(1000) + bytes([i % 256]) for i in range(5000)]


def test_the_line_holding_most_comes_first(tmp_path):
    tracemalloc.start(4)
    try:
        held = hold_a_lot()
        snap = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    path = tmp_path / 'x.tracemalloc'
    snap.dump(str(path))
    out = memory_report.report(str(path), top=3, per=5000).splitlines()
    assert out[0].startswith('total ')
    assert 'test_memory_report.py' in out[1], out
    mib = float(out[1].split()[0])
    assert 4.5 <= mib <= 6.0, out[1]          # 5,000 x ~1 KB
    assert ' B each of 5000' in out[1]
    assert len(held) == 5000
