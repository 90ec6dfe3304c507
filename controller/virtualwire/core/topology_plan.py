"""From a topology file to the wire changes that make a deployment match
it (pure): find each node's VM and each NIC's vNIC, then plan.

How a node is found: its `vm` (or, without one, its name) is a libvirt
domain's name or UUID. Names come from the guests the hypervisors' libvirt
hook reports (`PUT /v1/guests/UUID` at each start, arrival and libvirtd
restart, with the domain XML's interfaces); UUIDs also from each vNIC's
`vm-id`, which libvirt writes in the host's OVSDB. A name two running
guests share (libvirt names are per host) must be given as a UUID.

How a NIC is found, the first that applies:
  vnic: ID       the vNIC id itself (libvirt's interfaceid, OVS's iface-id)
  mac: MAC       the vNIC with that MAC (of the node's VM, if it is known)
  alias: ua-X    the interface with that libvirt user alias
  (nothing)      the interface aliased ua-NAME, else ethN: the VM's N-th
                 interface in its domain XML (as the guest numbers them)

What a tenant may name: only its own vNICs and guests (every one of the
guest's vNICs its own); anything else reads as unknown, as everywhere in
the API. Planning never touches a wire outside the topology: a NIC whose
vNIC another wire holds is refused.
"""
import re
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Set, Tuple

from virtualwire.core import errors, ids
from virtualwire.core.topology_file import FileError, TopologyFile

_ETH = re.compile(r'eth(\d+)')


@dataclass(frozen=True)
class GuestNic:
    index: int              # position among the domain's interfaces
    vnic: str = ''          # interfaceid ('' if not on our bridge)
    mac: str = ''
    alias: str = ''


@dataclass(frozen=True)
class Guest:
    """A libvirt domain as its host's hook reported it."""
    uuid: str
    name: str
    host: str
    nics: Tuple[GuestNic, ...] = ()

    def vnics(self):
        return [n.vnic for n in self.nics if n.vnic]


_UUID = re.compile(r'[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}')
_MAC = re.compile(r'[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}')
MAX_GUEST_NICS = 64


def parse_guest(uuid, doc) -> Guest:
    """A `PUT /v1/guests/UUID` body: {"name", "host", "nics": [{"index",
    "vnic", "mac", "alias"}]} (what the hook read from the domain XML)."""
    if not _UUID.fullmatch(uuid or ''):
        raise errors.Invalid('a guest is named by its libvirt UUID, got %r'
                             % (uuid,))
    if set(doc) != {'name', 'host', 'nics'}:
        raise errors.Malformed('body must be {"name", "host", "nics"}')
    name, host, nics = doc['name'], doc['host'], doc['nics']
    if not isinstance(name, str) or not 0 < len(name) <= 128 or \
            not isinstance(host, str) or not host:
        raise errors.Invalid('name and host must be non-empty strings')
    if not isinstance(nics, list) or len(nics) > MAX_GUEST_NICS:
        raise errors.Invalid('nics must be a list of at most %d'
                             % MAX_GUEST_NICS)
    out = []
    for n in nics:
        if not isinstance(n, dict) or not set(n) <= {'index', 'vnic', 'mac',
                                                      'alias'} or \
                not isinstance(n.get('index'), int) or \
                not all(isinstance(n.get(k, ''), str)
                        for k in ('vnic', 'mac', 'alias')):
            raise errors.Invalid('a NIC is {"index": int, "vnic", "mac", '
                                 '"alias": strings}')
        if n.get('vnic'):
            ids.check_vnic_id(n['vnic'])
        if n.get('mac') and not _MAC.fullmatch(n['mac']):
            raise errors.Invalid('not a MAC: %r' % n['mac'])
        out.append(GuestNic(n['index'], n.get('vnic', ''),
                            n.get('mac', '').lower(), n.get('alias', '')))
    return Guest(uuid.lower(), name, host, tuple(out))


def guest_move_refusal(old: Optional[Guest], host: str,
                       migrating_to: Set[str],
                       plugged_on: Dict[str, str]) -> Optional[str]:
    """Why hypervisor `host` may not replace guest record `old` (None if
    it may): a record is its host's to replace, or the host a guest has
    moved to, by a migration announced to it (`migrating_to`: the
    destinations of the guest's migrations) or by every vNIC of the
    record plugged there now (`plugged_on`: vNIC -> host). Else another
    host could swap a guest's NICs in a tenant's topology for its own."""
    if old is None or old.host == host or host in migrating_to:
        return None
    vnics = old.vnics()
    if vnics and all(plugged_on.get(v) == host for v in vnics):
        return None
    return ('guest %s (%s) is on %s, and no migration to %s nor its vNICs '
            'plugged there say it moved: hypervisor %s may not replace its '
            'record' % (old.uuid, old.name, old.host, host, host))


@dataclass
class Inventory:
    """What the deployment knows: reported guests, plugged vNICs
    ({id: {'host', 'mac', 'vm_id'}}), and what the caller may see."""
    guests: List[Guest] = field(default_factory=list)
    vnics: Dict[str, dict] = field(default_factory=dict)
    visible: Callable[[str], bool] = lambda vnic: True

    def guest_visible(self, g: Guest) -> bool:
        return bool(g.vnics()) and all(self.visible(v) for v in g.vnics())

    def trusted(self, g: Guest, vnic: str) -> bool:
        """A hook's word that `vnic` is guest g's NIC is taken only if the
        vNIC is plugged on g's host or that host's OVSDB (libvirt's
        vm-id) says it is g's: a compromised hypervisor cannot claim
        another host's vNICs for a guest of its own naming."""
        v = self.vnics.get(vnic)
        return v is not None and (v.get('host') == g.host or
                                  v.get('vm_id', '').lower() == g.uuid)

    def known(self, vnic: str) -> bool:
        return self.visible(vnic) and (
            vnic in self.vnics or any(vnic in g.vnics()
                                      for g in self.guests))


@dataclass(frozen=True)
class Resolved:
    """The file with every NIC's vNIC (`ends`: "node:nic" -> vNIC id) and
    each node's VM (uuid, or '' when found by vNICs alone)."""
    file: TopologyFile
    ends: Dict[str, str]
    vms: Dict[str, str]

    def mapping(self) -> Dict[str, str]:
        """What is kept of it: node -> VM uuid, "node:nic" -> vNIC."""
        out = {n: v for n, v in self.vms.items() if v}
        out.update(self.ends)
        return out

    def switches(self) -> Dict[str, str]:
        """{node: switch name} of its provider switches."""
        return {n.name: n.switch for n in self.file.nodes.values()
                if n.provided and n.switch}

    def links(self) -> Dict[str, Tuple[str, str, int]]:
        return {k.key: (self.ends[k.a], self.ends[k.b], k.line)
                for k in self.file.links}


def _find_vm(node, inv: Inventory) -> Optional[Guest]:
    want = node.vm or node.name
    seen = [g for g in inv.guests if inv.guest_visible(g)]
    by_uuid = [g for g in seen if g.uuid.lower() == want.lower()]
    if by_uuid:
        return by_uuid[0]
    named = [g for g in seen if g.name == want]
    if len({g.uuid for g in named}) > 1:
        raise FileError('node %s: VM name %r is on %s: give its UUID as vm'
                        % (node.name, want, ', '.join(sorted(
                            '%s (%s)' % (g.host, g.uuid) for g in named))),
                        node.line)
    return named[0] if named else None


def _uuid_known(uuid, inv: Inventory) -> bool:
    return any(v.get('vm_id', '').lower() == uuid.lower()
               for vid, v in inv.vnics.items() if inv.visible(vid))


def _find_nic(node, nic, guest, inv: Inventory) -> str:
    where = 'node %s, NIC %s' % (node.name, nic.name)
    if nic.vnic is not None:
        try:
            ids.check_vnic_id(nic.vnic)
        except errors.VwError as e:
            raise FileError('%s: %s' % (where, e.message), nic.line)
        if not inv.known(nic.vnic):
            raise FileError('%s: no vNIC %s is plugged or reported on any '
                            'host' % (where, nic.vnic), nic.line)
        return nic.vnic
    if nic.mac is not None:
        pool = guest.vnics() if guest else [
            v for v in inv.vnics if inv.visible(v)]
        hits = [v for v in pool if inv.vnics.get(v, {}).get('mac', '')
                .lower() == nic.mac] + ([n.vnic for n in guest.nics
                                         if n.vnic and n.mac.lower() ==
                                         nic.mac and inv.trusted(guest,
                                                                 n.vnic)]
                                        if guest else [])
        hits = sorted(set(hits))
        if len(hits) != 1:
            raise FileError('%s: %s vNIC has MAC %s%s' % (
                where, 'no' if not hits else 'more than one', nic.mac,
                ' on VM %s' % guest.name if guest else ''), nic.line)
        return hits[0]
    if guest is None:
        raise FileError('%s: VM %r is not known by name (no hook report): '
                        'find the NIC by vnic or mac' % (
                            where, node.vm or node.name), nic.line)
    alias = nic.alias or 'ua-' + nic.name
    hit = next((n for n in guest.nics if n.alias == alias), None)
    m = _ETH.fullmatch(nic.name)
    if hit is None and nic.alias is None and m:
        hit = next((n for n in guest.nics if n.index == int(m.group(1))),
                   None)
    if hit is None:
        raise FileError('%s: VM %s has no interface %s' % (
            where, guest.name, 'aliased %s' % alias if nic.alias or not m
            else 'aliased %s nor a %s' % (alias, nic.name)), nic.line)
    if not hit.vnic:
        raise FileError('%s: interface %d of VM %s is not on VirtualWire\'s '
                        'bridge' % (where, hit.index, guest.name), nic.line)
    if not inv.trusted(guest, hit.vnic):
        raise FileError('%s: vNIC %s of VM %s is not plugged on its host %s'
                        % (where, hit.vnic, guest.name, guest.host),
                        nic.line)
    return hit.vnic


def resolve(tf: TopologyFile, inv: Inventory) -> Resolved:
    ends: Dict[str, str] = {}
    vms: Dict[str, str] = {}
    first: Dict[str, Tuple[str, int]] = {}
    for node in tf.nodes.values():
        if node.provided:
            # The provider's switch: its ports are ends of their own
            # (`store.topology_switches` makes it if it is not there).
            vms[node.name] = 'sw:%s' % node.switch
            for nic in node.nics.values():
                ends['%s:%s' % (node.name, nic.name)] = 'sw:%s/%s' % (
                    node.switch, nic.name)
            continue
        guest = _find_vm(node, inv)
        if guest is None and node.vm is not None and \
                not _uuid_known(node.vm, inv):
            raise FileError('node %s: no VM %r is known (a running guest\'s '
                            'name or UUID)' % (node.name, node.vm),
                            node.line)
        vms[node.name] = guest.uuid if guest else (node.vm or '')
        for nic in node.nics.values():
            vnic = _find_nic(node, nic, guest, inv)
            ep = '%s:%s' % (node.name, nic.name)
            if vnic in first:
                raise FileError('%s is vNIC %s, as %s on line %d: a vNIC '
                                'is one NIC' % (ep, vnic, *first[vnic]),
                                nic.line)
            vm_id = inv.vnics.get(vnic, {}).get('vm_id')
            if node.vm and vm_id and guest is None and \
                    vm_id.lower() != node.vm.lower():
                raise FileError('%s: vNIC %s belongs to VM %s, not %s'
                                % (ep, vnic, vm_id, node.vm), nic.line)
            first[vnic] = (ep, nic.line)
            ends[ep] = vnic
    return Resolved(tf, ends, vms)


@dataclass(frozen=True)
class Plan:
    """What applying changes: `create` [(link key, a, b)], `delete`
    [(link key or '', connector id, a, b)], `keep` [(link key, connector
    id)]; `record` is the topology's links after it ({key: cid}, the new
    wires' ids still to draw)."""
    create: Tuple[Tuple[str, str, str], ...]
    delete: Tuple[Tuple[str, int, str, str], ...]
    keep: Tuple[Tuple[str, int], ...]

    @property
    def changes(self) -> int:
        return len(self.create) + len(self.delete)

    def view(self):
        return {'create': [{'link': k, 'a': a, 'b': b}
                           for k, a, b in self.create],
                'delete': [{'link': k or None,
                            'connector_id': ids.fmt_connector(c),
                            'a': a, 'b': b} for k, c, a, b in self.delete],
                'keep': [{'link': k, 'connector_id': ids.fmt_connector(c)}
                         for k, c in self.keep]}


def plan(resolved: Resolved, record: Dict[str, int],
         wires: Dict[int, Tuple[str, str]], by_vnic: Dict[str, int],
         taken: Callable[[str, int], errors.VwError]) -> Plan:
    """Against the topology's links as last applied (`record`, {key:
    cid}), the wires that exist ({cid: (a, b)}) and which wire holds each
    vNIC. `taken(vnic, cid)` is the refusal for a vNIC another wire holds
    (the caller words it for what the caller may see)."""
    want = resolved.links()
    # A wire is kept if it joins what a link of the file joins, whatever
    # the link is called now (a node renamed in the file is not a change).
    by_ends = {frozenset(v[:2]): k for k, v in want.items()}
    create, delete, keep = [], [], []
    for key, cid in sorted(record.items()):
        ends = wires.get(cid)
        if ends is None:
            continue                 # deleted outside: made again below
        now = by_ends.pop(frozenset(ends), None)
        if now is not None:
            keep.append((now, cid))
        else:
            delete.append((key, cid, ends[0], ends[1]))
    kept = {k for k, _ in keep}
    going = {c for _, c, _, _ in delete}
    for key, (a, b, line) in sorted(want.items(), key=lambda kv: kv[1][2]):
        if key in kept:
            continue
        for v in (a, b):
            holder = by_vnic.get(v)
            if holder is not None and holder not in going:
                e = taken(v, holder)
                raise FileError('link %s: %s; it is not this topology\'s '
                                'wire, and apply never touches another'
                                % (key.replace('|', ' - '), e.message), line)
        create.append((key, a, b))
    return Plan(tuple(create), tuple(delete), tuple(keep))
