"""`virsh migrate` options for a migration profile, given as an operator
on the hook path gives them (README): the profile's downtime limit set on
the domain first, and on a libvirt older than 9.4 the source QEMU told to
compress over QMP and the destination's QEMU told by the XML it starts
from (controller/virtualwire/cli/migration_profile.py)."""
from virtualwire.cli import migration_profile as mp


def virsh_options(host, guest, profile):
    """Prepare guest (running on host) for a move with `profile` (a name
    or a Profile) and return the `virsh migrate --live` options."""
    import libvirt
    if isinstance(profile, str):
        profile = mp.PROFILES[profile]
    conn = host.libvirt.conn()
    dom = conn.lookupByName(guest.name)
    p = mp.plan(profile, int(dom.info()[1]) * 1024,
                libvirt_version=conn.getLibVersion())
    if p['max_downtime_ms']:
        host.libvirt.virsh('migrate-setmaxdowntime', guest.name,
                           str(p['max_downtime_ms']))
    if not mp.asks_qemu(p):
        return mp.virsh_args(p)
    host.libvirt.virsh('qemu-monitor-command', guest.name, mp.source_qmp(p))
    path = guest.xml + '.dest'
    with open(path, 'w') as f:
        f.write(mp.destination_xml(dom.XMLDesc(
            libvirt.VIR_DOMAIN_XML_MIGRATABLE)))
    return mp.virsh_args(p, path)
