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


def changes(written: Tuple[str, Dict[str, str]],
            now: Tuple[str, Dict[str, str]]
            ) -> Tuple[bool, List[Tuple[str, str]], List[Tuple[str, str]],
                       List[str]]:
    """(host row changed, vNIC rows to insert, to update, vNICs to
    delete), to go from `written` to `now`."""
    (h0, p0), (h1, p1) = written, now
    insert = [(v, t) for v, t in sorted(p1.items()) if v not in p0]
    update = [(v, t) for v, t in sorted(p1.items())
              if v in p0 and p0[v] != t]
    delete = sorted(v for v in p0 if v not in p1)
    return h0 != h1, insert, update, delete
