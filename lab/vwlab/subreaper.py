"""Run a command as a child subreaper: every orphaned descendant (QEMU
processes libvirtd leaves behind) is reaped at once. This sandbox's PID 1
reaps orphans only every ~1.5 s, which libvirt sees as a slow QEMU exit.

    python -m vwlab.subreaper -- COMMAND...
"""
import ctypes
import os
import signal
import subprocess
import sys

PR_SET_CHILD_SUBREAPER = 36


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ['--']:
        argv = argv[1:]
    if not argv:
        print('usage: python -m vwlab.subreaper -- COMMAND...',
              file=sys.stderr)
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print('subreaper: prctl failed: %s' % os.strerror(ctypes.get_errno()),
              file=sys.stderr)
        return 1
    child = subprocess.Popen(argv)

    def forward(sig, _frame):
        try:
            child.send_signal(sig)
        except ProcessLookupError:
            pass
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    code = None
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return code if code is not None else 0
        except InterruptedError:
            continue
        if pid == child.pid:
            child.returncode = code = os.waitstatus_to_exitcode(status)


if __name__ == '__main__':
    sys.exit(main())
