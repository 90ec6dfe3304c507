"""Console entry points for the host tools that are shell scripts
(`vw-host-setup`, `vw-pki`): they ship inside the package beside this
module, so a wheel, a Debian package and a checkout run the same file.
Python adds what every command has (`--version`) and hands the rest,
unchanged, to the script."""
import os
import sys

from virtualwire import version

HERE = os.path.dirname(os.path.abspath(__file__))


def script(name):
    return os.path.join(HERE, name)


def _run(name, argv):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ['--version']:
        print('%s %s' % (name, version.version()))
        return 0
    # exec: the script's exit code and signals are the command's own.
    os.execv('/bin/bash', ['bash', script(name)] + argv)
    return 127      # not reached


def host_setup(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ['enroll']:
        from virtualwire.host import enroll
        return enroll.main(argv[1:])
    return _run('vw-host-setup', argv)


def pki(argv=None):
    return _run('vw-pki', argv)
