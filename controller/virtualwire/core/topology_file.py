"""A topology file, read (pure): YAML (or JSON) checked against the
published schema (`topology.schema.json`), then the rules a schema cannot
say (an endpoint names a node's NIC, a NIC is on one link). Every refusal
names the line it is about, so a user with a long file finds it:

    name: three-tier
    nodes:
      client:   {vm: client-vm, nics: {eth0: {mac: "52:54:00:00:00:01"}}}
      firewall: {kind: firewall, nics: {eth0: null, eth1: null}}
    links:
      - endpoints: ["client:eth0", "firewall:eth0"]

How a node and its NICs are found on a running deployment is
`core.topology_plan`'s.
"""
import json
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple, Union

import jsonschema
import yaml

from virtualwire.core import errors, ids

SCHEMA_PATH = os.path.join(os.path.dirname(__file__),
                           'topology.schema.json')
MAX_SOURCE = 1 << 20           # a file of 1 MiB holds thousands of links
KINDS = ('server', 'switch', 'router', 'firewall', 'provider-switch')
PROVIDER_SWITCH = 'provider-switch'     # no VM: `core.switches`


def schema():
    with open(SCHEMA_PATH) as f:
        return json.load(f)


_VALIDATOR = jsonschema.Draft202012Validator(schema())


class FileError(errors.Invalid):
    """A topology file that cannot be applied: `line` (1-based, or None)
    is where."""

    def __init__(self, message, line=None, source='topology'):
        self.line, self.reason, self.source = line, message, source
        super().__init__('%s%s: %s' % (source, ':%d' % line if line else '',
                                       message))

    def __reduce__(self):       # as it was made (parsed in another process)
        return FileError, (self.reason, self.line, self.source)


@dataclass(frozen=True)
class Nic:
    name: str
    line: int
    vnic: Optional[str] = None      # how to find it: one of vnic, mac,
    mac: Optional[str] = None       # alias, or none (by its name)
    alias: Optional[str] = None
    ip: Optional[str] = None        # drawn; the lab configures it


@dataclass(frozen=True)
class Node:
    name: str
    line: int
    vm: Optional[str]               # None: the node's name
    kind: str
    host: Optional[str]
    nics: Dict[str, Nic]
    switch: Optional[str] = None    # a provider switch's name
    mac_limit: Optional[int] = None
    idle_timeout: Optional[int] = None
    # True: a part where each linked VM runs; {part: (port, ...)}: the
    # ports of each named part together, where most of their VMs run.
    split: Union[bool, Dict[str, Tuple[str, ...]]] = False

    @property
    def provided(self) -> bool:
        """A switch the provider runs (no VM): its NICs are its ports."""
        return self.kind == PROVIDER_SWITCH


@dataclass(frozen=True)
class Link:
    a: str                          # "node:nic"
    b: str
    line: int

    @property
    def key(self) -> str:
        """The link's name in the topology (its ends, sorted): a link
        whose ends stay the same is the same link."""
        return '%s|%s' % tuple(sorted((self.a, self.b)))


@dataclass(frozen=True)
class TopologyFile:
    name: str
    nodes: Dict[str, Node]
    links: Tuple[Link, ...]
    description: str = ''
    source: str = field(default='', repr=False, compare=False)

    def nic(self, endpoint: str) -> Nic:
        node, nic = endpoint.split(':', 1)
        return self.nodes[node].nics[nic]


# -- YAML with the line of every key and item -------------------------------
class _Lined(dict):
    line = 0
    lines: Dict[str, int] = {}


class _LinedList(list):
    line = 0
    lines: List[int] = []


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    pass


def _mapping(loader, node):
    out = _Lined()
    out.line, out.lines = node.start_mark.line + 1, {}
    for k_node, v_node in node.value:
        key = loader.construct_object(k_node, deep=True)
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            raise FileError('a key must be a name, not %s'
                            % type(key).__name__, k_node.start_mark.line + 1)
        key = str(key) if not isinstance(key, str) else key
        if key in out:
            raise FileError('%r is given twice (also on line %d)'
                            % (key, out.lines[key]),
                            k_node.start_mark.line + 1)
        out[key] = loader.construct_object(v_node, deep=True)
        out.lines[key] = k_node.start_mark.line + 1
    return out


def _sequence(loader, node):
    out = _LinedList(loader.construct_object(n, deep=True)
                     for n in node.value)
    out.line = node.start_mark.line + 1
    out.lines = [n.start_mark.line + 1 for n in node.value]
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                        _mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG,
                        _sequence)


def _line_of(doc, path) -> Optional[int]:
    """The line of the deepest element of `path` in `doc`."""
    line, here = getattr(doc, 'line', None), doc
    for step in path:
        if isinstance(here, _Lined) and step in here:
            line, here = here.lines.get(step, line), here[step]
        elif isinstance(here, _LinedList) and isinstance(step, int) and \
                step < len(here):
            line, here = here.lines[step], here[step]
        else:
            break
    return line


def _where(path) -> str:
    return '.'.join(str(p) for p in path) or 'the file'


def parse(text, source='topology') -> TopologyFile:
    if not isinstance(text, str):
        raise errors.Malformed('the topology source must be text (YAML or '
                               'JSON)')
    if len(text) > MAX_SOURCE:
        raise errors.TooLarge('a topology file of %d bytes: at most %d'
                              % (len(text), MAX_SOURCE))
    try:
        doc = yaml.load(text, Loader=_Loader)
    except FileError as e:
        raise FileError(e.reason, e.line, source) \
            from None
    except yaml.YAMLError as e:
        mark = getattr(e, 'problem_mark', None)
        raise FileError('not valid YAML: %s' % (getattr(e, 'problem', None)
                                                or e),
                        mark.line + 1 if mark else None, source) from None
    if not isinstance(doc, dict):
        raise FileError('expected a mapping with name, nodes and links',
                        getattr(doc, 'line', 1) or 1, source)
    found = sorted(_VALIDATOR.iter_errors(doc),
                   key=lambda e: (_line_of(doc, e.absolute_path) or 0,
                                  len(e.absolute_path)))
    if found:
        first = found[0]
        raise FileError('%s: %s' % (_where(first.absolute_path), _say(first)),
                        _line_of(doc, first.absolute_path), source)
    return _build(doc, source, text)


def _say(e) -> str:
    """jsonschema's message, made for a person reading a file."""
    if e.validator == 'additionalProperties':
        return e.message.replace('Additional properties are not allowed',
                                 'unknown field(s)')
    if e.validator == 'oneOf' and isinstance(e.instance, dict):
        return ('a NIC is null, an address, or {vnic | mac | alias, ip}: '
                '%s' % (e.context[-1].message if e.context else e.message))
    return e.message


def _nic(name, spec, line, where) -> Nic:
    if spec is None:
        return Nic(name, line)
    if isinstance(spec, str):
        return Nic(name, line, ip=spec)
    found = [k for k in ('vnic', 'mac', 'alias') if k in spec]
    if len(found) > 1:
        raise FileError('%s: give one of vnic, mac or alias, not %s'
                        % (where, ' and '.join(found)), line)
    return Nic(name, line, spec.get('vnic'), spec.get('mac', '').lower()
               or None, spec.get('alias'), spec.get('ip'))


_SWITCH_ONLY = ('switch', 'mac_limit', 'idle_timeout', 'split')


def _node(name, line, spec, nics) -> Node:
    kind = spec.get('kind', 'server')
    if kind != PROVIDER_SWITCH:
        given = [k for k in _SWITCH_ONLY if k in spec]
        if given:
            raise FileError('node %s: %s only for kind provider-switch'
                            % (name, ', '.join(given)), line)
        return Node(name, line, spec.get('vm'), kind, spec.get('host'), nics)
    if 'vm' in spec:
        raise FileError('node %s: a provider-switch is no VM: leave out vm'
                        % name, line)
    if not spec.get('nics'):
        raise FileError('node %s: a provider-switch names its ports as its '
                        'nics ({p1: null, p2: null})' % name, line)
    switch = spec.get('switch', name)
    if not ids.SWITCH_NAME_RE.fullmatch(switch):
        raise FileError('node %s: a provider switch\'s name is lower-case '
                        'letters, digits and _.- (at most 32): give it as '
                        'switch: NAME' % name, line)
    for nic in nics.values():
        if (nic.vnic, nic.mac, nic.alias, nic.ip) != (None,) * 4:
            raise FileError('node %s, NIC %s: a provider switch\'s NIC is a '
                            'port: null' % (name, nic.name), nic.line)
        if not ids.SWITCH_PORT_RE.fullmatch(nic.name):
            raise FileError('node %s, NIC %s: a port name is letters, '
                            'digits and _.- (at most 15)' % (name, nic.name),
                            nic.line)
    return Node(name, line, None, kind, spec.get('host'), nics, switch,
                spec.get('mac_limit'), spec.get('idle_timeout'),
                _split(name, spec.get('split', False), nics, line))


def _split(name, given, nics, line):
    """A provider switch's `split`: true, false, or {part: [ports]}
    (each port of the switch, in one part at most)."""
    if isinstance(given, bool):
        return given
    where = 'node %s, split' % name
    if not isinstance(given, dict) or not given:
        raise FileError('%s: true, or parts by name: {east: [p1, p2], '
                        'west: [p3]}' % where, line)
    seen: Dict[str, str] = {}
    out = {}
    for part, ports in given.items():
        at = getattr(given, 'lines', {}).get(part, line)
        if not isinstance(ports, list) or not ports:
            raise FileError('%s, part %s: a list of its ports' % (where, part),
                            at)
        for port in ports:
            if port not in nics:
                raise FileError('%s, part %s: no port %s (its ports: %s)' % (
                    where, part, port, ', '.join(nics)), at)
            if port in seen:
                raise FileError('%s, part %s: port %s is already in part %s'
                                % (where, part, port, seen[port]), at)
            seen[port] = part
        out[str(part)] = tuple(ports)
    return out


def _build(doc, source, text) -> TopologyFile:
    try:
        nodes = {}
        for nname, spec in doc['nodes'].items():
            spec = spec or _Lined()
            nics_doc = spec.get('nics')
            if nics_doc is None:
                nics_doc, nic_lines = {'eth0': None}, {}
            else:
                nic_lines = nics_doc.lines
            nline = doc['nodes'].lines[nname]
            nics = {str(k): _nic(str(k), v, nic_lines.get(k, nline),
                                 'node %s, NIC %s' % (nname, k))
                    for k, v in nics_doc.items()}
            nodes[nname] = _node(nname, nline, spec, nics)
        named: Dict[str, str] = {}
        for node in (n for n in nodes.values() if n.provided):
            if node.switch in named:
                raise FileError('nodes %s and %s are both switch %s'
                                % (named[node.switch], node.name,
                                   node.switch), node.line)
            named[node.switch or ''] = node.name
        links: List[Link] = []
        used: Dict[str, int] = {}
        raw = doc.get('links') or _LinedList()
        for i, item in enumerate(raw):
            line = raw.lines[i]
            a, b = item['endpoints']
            for ep in (a, b):
                node, _, nic = ep.partition(':')
                if node not in nodes:
                    raise FileError('link %d: no node %r (nodes: %s)' % (
                        i + 1, node, ', '.join(sorted(nodes))), line)
                if nic not in nodes[node].nics:
                    raise FileError('link %d: node %s has no NIC %r (its '
                                    'NICs: %s)' % (i + 1, node, nic, ', '.join(
                                        sorted(nodes[node].nics))), line)
                if ep in used:
                    raise FileError('link %d: %s is also on the link of '
                                    'line %d: a NIC holds one wire'
                                    % (i + 1, ep, used[ep]), line)
                used[ep] = line
            if a == b:
                raise FileError('link %d joins %s to itself' % (i + 1, a),
                                line)
            links.append(Link(a, b, line))
    except FileError as e:
        raise FileError(e.reason, e.line, source) \
            from None
    return TopologyFile(doc['name'], nodes, tuple(links),
                        doc.get('description', ''), text)
