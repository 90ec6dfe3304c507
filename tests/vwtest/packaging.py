"""The packaging tests' slow first step, a fresh Debian root and the
packages built (vwlab.packages.prepare: about 90 s), started as the
session begins when the unit tier runs first: the unit tier is
single-threaded, so the step takes the core it leaves idle and is ready
by the time the packaging tests come, instead of adding its 90 s to the
run. Run alone, the packaging tests prepare for themselves."""
import json
import os
import shutil
import subprocess
import sys

from vwlab.shell import LAB_ROOT

PACKAGING_TESTS = 'tests/integration/test_packages.py'
_early = {}


def _workdir():
    return os.path.join(LAB_ROOT, 'packages-%d' % os.getpid())


def start_early(items):
    """From pytest_collection_finish: begin `prepare` in the background if
    the packaging tests will run and unit tests run before them."""
    files = [i.nodeid.split('::')[0] for i in items]
    if PACKAGING_TESTS not in files or not any(
            f.startswith('tests/unit/') for f in files[:files.index(
                PACKAGING_TESTS)]):
        return
    work = _workdir()
    os.makedirs(work, exist_ok=True)
    _early['work'] = work
    _early['log'] = open(os.path.join(work, 'prepare.err'), 'w')
    _early['proc'] = subprocess.Popen(
        ['nice', '-n', '5', sys.executable, '-m', 'vwlab.packages',
         'prepare', work], stdout=subprocess.PIPE, stderr=_early['log'],
        text=True)


def prepared():
    """(work dir, root, .changes path, [.deb paths]): the early step's,
    waited for, or made now."""
    from vwlab import packages
    proc = _early.pop('proc', None)
    if proc is None:
        work = _workdir()
        os.makedirs(work, exist_ok=True)
        return (work,) + packages.prepare(work)
    out, _ = proc.communicate(timeout=1800)
    _early['log'].close()
    if proc.returncode != 0:
        with open(os.path.join(_early['work'], 'prepare.err')) as f:
            raise AssertionError('preparing the packages failed:\n%s'
                                 % f.read()[-3000:])
    made = json.loads(out.strip().splitlines()[-1])
    return _early['work'], made['root'], made['changes'], made['debs']


def stop_early():
    """From pytest_sessionfinish: a session cut short leaves no build."""
    proc = _early.pop('proc', None)
    if proc is not None:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        shutil.rmtree(_early['work'], ignore_errors=True)
