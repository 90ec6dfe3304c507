"""A host's last observed state as rows: one for the host itself and one
per vNIC (OVN's Port_Binding is the model), not one snapshot of the
host with every vNIC in it.

A plug or unplug then writes one small row, not the host's whole vNIC
list (a host with 5,000 vNICs rewrote ~1 MB per plug). Pure: `split`
and `join` convert between a `Host` and its texts; `changes` says what a
save writes.
"""
import json
from dataclasses import asdict, replace
from typing import Dict, List, Tuple

from virtualwire.core.model import Host, host_from_json


def split(host: Host) -> Tuple[str, Dict[str, str]]:
    """(the host's text without its vNICs, {vNIC id: its port's text})."""
    bare = asdict(replace(host, vnics=()))
    ports = {v.vnic_id: json.dumps(asdict(v), sort_keys=True)
             for v in host.vnics}
    return json.dumps(bare, sort_keys=True), ports


def join(host_text: str, ports: Dict[str, str]) -> Host:
    """The Host the rows hold. A snapshot written before vNIC rows (its
    vNICs inside) is read as it was when it has no rows of its own."""
    d = json.loads(host_text)
    if ports or not d.get('vnics'):
        d['vnics'] = [json.loads(ports[v]) for v in sorted(ports)]
    return host_from_json(json.dumps(d))


def written(rows: Tuple[str, Dict[str, str]]) -> Tuple[int, Dict[str, int]]:
    """What to remember of rows as written: a digest of each text, enough
    to tell a change (in memory only; the texts were 60 MB at 200,000
    vNICs)."""
    host_text, ports = rows
    return hash(host_text), {v: hash(t) for v, t in ports.items()}


def changes(before: Tuple[int, Dict[str, int]],
            now: Tuple[str, Dict[str, str]]
            ) -> Tuple[bool, List[Tuple[str, str]], List[Tuple[str, str]],
                       List[str]]:
    """(host row changed, vNIC rows to insert, to update, vNICs to
    delete), to go from rows `written` as `before` to `now`."""
    (h0, p0), (h1, p1) = before, now
    insert = [(v, t) for v, t in sorted(p1.items()) if v not in p0]
    update = [(v, t) for v, t in sorted(p1.items())
              if v in p0 and p0[v] != hash(t)]
    delete = sorted(v for v in p0 if v not in p1)
    return h0 != hash(h1), insert, update, delete
