"""Build the lab guest reproducibly from Debian packages: the distribution's
cloud kernel and a busybox-static initramfs whose /init loads virtio-net,
sets addresses from the kernel command line and runs vw-responder (a UDP
echo with the guest's own receive counter) and, if asked, vw-dirty (a
working set that keeps writing memory) and BIRD (the guest routes: OSPF,
BGP). No downloads beyond apt.

    python -m vwlab.guest_image [--out DIR] [--json]

The result (vmlinuz, vmlinux, initrd.img, manifest.json) is cached under
DIR and rebuilt only when a package version or one of our sources changes.
The manifest's kernel is vmlinux, the bzImage's own uncompressed kernel,
when it carries a PVH entry note: QEMU then jumps straight into it, which
skips the decompressor, about 1 s of every TCG boot (measured 5.1-5.8 s
against 6.0-7.1 s).
"""
import argparse
import glob
import gzip
import hashlib
import json
import lzma
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'guest')
DEFAULT_OUT = os.environ.get('VW_GUEST_DIR', '/var/cache/virtualwire/guest')
KERNEL_META = 'linux-image-cloud-amd64'
BUSYBOX = 'busybox-static'
# The router guest's daemon: the host's BIRD (bird2, installed by
# scripts/install-deps; the guest is the same Debian) with the shared
# libraries it loads.
ROUTER_BINARIES = ('/usr/sbin/bird', '/usr/sbin/birdcl')
ROUTER_PACKAGE = 'bird2'
MODULES = ('virtio_ring', 'virtio', 'virtio_pci_modern_dev',
           'virtio_pci_legacy_dev', 'virtio_pci', 'failover', 'net_failover',
           'virtio_net')


class GuestBuildError(Exception):
    pass


def _run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise GuestBuildError('%s failed: %s' % (' '.join(cmd),
                                                (p.stderr or p.stdout).strip()))
    return p.stdout


def kernel_package():
    """The versioned kernel package the cloud metapackage points at."""
    for line in _run(['apt-cache', 'depends', KERNEL_META]).splitlines():
        line = line.strip()
        if line.startswith('Depends:') and 'linux-image-' in line:
            return line.split()[1]
    raise GuestBuildError('cannot resolve %s (apt-get update?)' % KERNEL_META)


def candidate(pkg):
    out = _run(['apt-cache', 'policy', pkg])
    for line in out.splitlines():
        if line.strip().startswith('Candidate:'):
            return line.split()[1]
    raise GuestBuildError('no candidate version for %s' % pkg)


def _sources_digest():
    h = hashlib.sha256()
    for path in (os.path.join(HERE, 'init'),
                 os.path.join(HERE, 'vw-responder.c'),
                 os.path.join(HERE, 'vw-dirty.c'), __file__):
        with open(path, 'rb') as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def installed(pkg):
    p = subprocess.run(['dpkg-query', '-W', '-f', '${Version}', pkg],
                       capture_output=True, text=True)
    if p.returncode != 0 or not p.stdout.strip():
        raise GuestBuildError('%s is not installed (scripts/install-deps)'
                              % pkg)
    return p.stdout.strip()


def wanted_manifest():
    kpkg = kernel_package()
    return {'kernel_package': kpkg, 'kernel_version': candidate(kpkg),
            'busybox_version': candidate(BUSYBOX),
            'bird_version': installed(ROUTER_PACKAGE),
            'sources': _sources_digest()}


def shared_libraries(binaries):
    """The libraries (and the loader) the binaries load, as ldd finds them
    on this host."""
    out = set()
    for b in binaries:
        for line in _run(['ldd', b]).splitlines():
            parts = line.split()
            path = parts[2] if '=>' in parts and len(parts) > 2 else parts[0]
            if path.startswith('/'):
                out.add(path)
    return sorted(out)


def _copy_with_libraries(binaries, tree):
    for path in list(binaries) + shared_libraries(binaries):
        dest = os.path.join(tree, path.lstrip('/'))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy(os.path.realpath(path), dest)


def _download(pkgs, where):
    _run(['apt-get', 'download'] + list(pkgs), cwd=where)
    debs = glob.glob(os.path.join(where, '*.deb'))
    if len(debs) != len(pkgs):
        raise GuestBuildError('apt-get download gave %s' % debs)
    root = os.path.join(where, 'root')
    for deb in debs:
        _run(['dpkg-deb', '-x', deb, root])
    return root


def _module(root, name):
    hits = [p for pat in ('%s.ko' % name, '%s.ko.xz' % name)
            for p in glob.glob(os.path.join(root, 'lib/modules/*/kernel/**',
                                            pat), recursive=True)]
    if not hits:
        return None
    path = hits[0]
    with open(path, 'rb') as f:
        data = f.read()
    return lzma.decompress(data) if path.endswith('.xz') else data


# The Xen ELF note whose presence lets QEMU boot an ELF kernel via PVH.
XEN_ELFNOTE_PHYS32_ENTRY = 0x12
LZ4_LEGACY_MAGIC = b'\x02\x21\x4c\x18'


def _has_pvh_note(elf):
    """True if the ELF image has a PT_NOTE entry Xen/PHYS32_ENTRY."""
    if elf[:4] != b'\x7fELF' or elf[4] != 2:       # 64-bit ELF only
        return False
    phoff, = struct.unpack_from('<Q', elf, 0x20)
    phentsize, phnum = struct.unpack_from('<HH', elf, 0x36)
    for i in range(phnum):
        p_type, _fl, off, _va, _pa, size = struct.unpack_from(
            '<IIQQQQ', elf, phoff + i * phentsize)
        if p_type != 4:                                 # PT_NOTE
            continue
        pos, end = off, off + size
        while pos + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from('<III', elf, pos)
            name = elf[pos + 12:pos + 12 + namesz].rstrip(b'\0')
            if name == b'Xen' and ntype == XEN_ELFNOTE_PHYS32_ENTRY:
                return True
            pos += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
    return False


def extract_pvh_kernel(bzimage, dest):
    """Writes the bzImage's uncompressed ELF kernel to dest if it is lz4
    and has a PVH entry; returns whether it did. The x86 boot protocol
    puts the payload's offset and length at 0x248 (relative to the
    protected-mode code, which starts after the setup sectors)."""
    with open(bzimage, 'rb') as f:
        img = f.read()
    if img[0x202:0x206] != b'HdrS':
        return False
    setup = (img[0x1f1] or 4) + 1
    off, length = struct.unpack_from('<II', img, 0x248)
    start = setup * 512 + off
    payload = img[start:start + length]
    if payload[:4] != LZ4_LEGACY_MAGIC:
        return False
    # The kernel appends the uncompressed size, which lz4 would read as
    # a truncated block.
    p = subprocess.run(['lz4', '-dc'], input=payload[:-4],
                       capture_output=True)
    if p.returncode != 0 or not _has_pvh_note(p.stdout):
        return False
    with open(dest + '.tmp', 'wb') as f:
        f.write(p.stdout)
    os.replace(dest + '.tmp', dest)
    return True


def _cpio_gz(tree, dest):
    """A newc cpio of `tree`, gzipped, with fixed owners and times so the
    same inputs give the same bytes."""
    files = _run(['find', '.', '-mindepth', '1'], cwd=tree).split('\n')
    names = '\n'.join(sorted(f for f in files if f)) + '\n'
    raw = subprocess.run(['cpio', '-o', '-H', 'newc', '-R', '0:0',
                          '--reproducible', '--quiet'],
                         input=names.encode(), capture_output=True, cwd=tree)
    if raw.returncode != 0:
        raise GuestBuildError('cpio failed: %s' % raw.stderr.decode())
    with open(dest, 'wb') as f:
        with gzip.GzipFile(fileobj=f, mode='wb', mtime=0) as g:
            g.write(raw.stdout)


def build(out=DEFAULT_OUT, progress=lambda m: None):
    """Returns the manifest (paths included) of an up-to-date guest."""
    want = wanted_manifest()
    mpath = os.path.join(out, 'manifest.json')
    try:
        with open(mpath) as f:
            have = json.load(f)
        if {k: have.get(k) for k in want} == want and all(
                os.path.exists(have[k]) for k in ('kernel', 'initrd')):
            return have
    except (OSError, ValueError, KeyError):
        pass
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix='vwguest')
    try:
        progress('downloading %s %s and %s %s' % (
            want['kernel_package'], want['kernel_version'], BUSYBOX,
            want['busybox_version']))
        root = _download([want['kernel_package'], BUSYBOX], work)
        tree = os.path.join(work, 'initramfs')
        for d in ('bin', 'dev', 'proc', 'sys', 'lib/modules', 'tmp', 'etc',
                  'run'):
            os.makedirs(os.path.join(tree, d))
        shutil.copy(os.path.join(root, 'bin/busybox'),
                    os.path.join(tree, 'bin/busybox'))
        shutil.copy(os.path.join(HERE, 'init'), os.path.join(tree, 'init'))
        os.chmod(os.path.join(tree, 'init'), 0o755)
        progress('compiling vw-responder')
        _run(['gcc', '-static', '-Os', '-s', '-o',
              os.path.join(tree, 'bin/vw-responder'),
              os.path.join(HERE, 'vw-responder.c')])
        _run(['gcc', '-static', '-Os', '-s', '-o',
              os.path.join(tree, 'bin/vw-dirty'),
              os.path.join(HERE, 'vw-dirty.c')])
        progress('adding BIRD %s' % want['bird_version'])
        _copy_with_libraries(ROUTER_BINARIES, tree)
        included = []
        for m in MODULES:
            data = _module(root, m)
            if data is None:
                continue            # built into this kernel
            with open(os.path.join(tree, 'lib/modules', m + '.ko'),
                      'wb') as f:
                f.write(data)
            included.append(m)
        if 'virtio_net' not in included and not glob.glob(
                os.path.join(root, 'boot/config-*')):
            raise GuestBuildError('virtio_net module not found')
        progress('packing initramfs (%d modules)' % len(included))
        kernel = os.path.join(out, 'vmlinuz')
        initrd = os.path.join(out, 'initrd.img')
        shutil.copy(glob.glob(os.path.join(root, 'boot/vmlinuz-*'))[0],
                    kernel)
        vmlinux = os.path.join(out, 'vmlinux')
        if extract_pvh_kernel(kernel, vmlinux):
            progress('kernel has a PVH entry: booting vmlinux directly')
            kernel = vmlinux
        _cpio_gz(tree, initrd + '.tmp')
        os.replace(initrd + '.tmp', initrd)
        have = dict(want, kernel=kernel, initrd=initrd, modules=included)
        with open(mpath, 'w') as f:
            json.dump(have, f, indent=2)
        return have
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None):
    ap = argparse.ArgumentParser(prog='vwlab.guest_image',
                                 description=__doc__.split('\n\n')[0])
    ap.add_argument('--out', default=DEFAULT_OUT)
    ap.add_argument('--json', action='store_true')
    args = ap.parse_args(argv)
    try:
        m = build(args.out, progress=lambda s: print('guest: ' + s,
                                                     file=sys.stderr))
    except GuestBuildError as e:
        print('guest: error: %s' % e, file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(m, indent=2))
    else:
        for k in ('kernel', 'initrd', 'kernel_package', 'kernel_version',
                  'busybox_version'):
            print('%-16s %s' % (k, m[k]))
    return 0


if __name__ == '__main__':
    sys.exit(main())
