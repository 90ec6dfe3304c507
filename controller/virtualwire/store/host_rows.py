"""A host's last observed state as rows: one for the host itself and one
per vNIC with typed columns (OVN's Port_Binding is the model), not one
snapshot of the host with every vNIC in it.

A plug or unplug then writes one small row, not the host's whole vNIC
list (a host with 5,000 vNICs rewrote ~1 MB per plug). Pure: `split`
and `join` convert between a `Host` and its rows; `changes` says what a
save writes.
"""
import json
from dataclasses import asdict, replace
from typing import Dict, List, Tuple

from virtualwire.core.model import Host, host_from_json


# A vNIC row's typed columns (schema 1.9.0), as VnicPort names them. Rows
# written before hold the same as one JSON text in `port` instead.
COLUMNS = ('port_name', 'ofport', 'mac', 'vm_id', 'status')
Row = Dict[str, object]


def split(host: Host) -> Tuple[str, Dict[str, Row]]:
    """(the host's text without its vNICs, {vNIC id: its row's columns})."""
    bare = asdict(replace(host, vnics=()))
    ports = {v.vnic_id: {c: getattr(v, c) for c in COLUMNS}
             for v in host.vnics}
    return json.dumps(bare, sort_keys=True), ports


def port_of(vnic_id: str, row: Row) -> dict:
    """A vNIC row as VnicPort's fields: its typed columns, or the JSON
    text of a row written before them."""
    if row.get('port'):
        return json.loads(str(row['port']))
    out = {c: row[c] for c in COLUMNS}
    out['vnic_id'] = vnic_id
    return out


def join(host_text: str, ports: Dict[str, Row]) -> Host:
    """The Host the rows hold. A snapshot written before vNIC rows (its
    vNICs inside) is read as it was when it has no rows of its own."""
    d = json.loads(host_text)
    if ports or not d.get('vnics'):
        d['vnics'] = [port_of(v, ports[v]) for v in sorted(ports)]
    return host_from_json(json.dumps(d))


def _digest(row: Row) -> int:
    return hash(tuple(sorted(row.items())))


def written(rows: Tuple[str, Dict[str, Row]]) -> Tuple[int, Dict[str, int]]:
    """What to remember of rows as written: a digest of each, enough to
    tell a change (in memory only; the texts were 60 MB at 200,000
    vNICs). A row still in the older form digests differently from its
    typed form, so the next save rewrites it typed."""
    host_text, ports = rows
    return hash(host_text), {v: _digest(r) for v, r in ports.items()}


def changes(before: Tuple[int, Dict[str, int]],
            now: Tuple[str, Dict[str, Row]]
            ) -> Tuple[bool, List[Tuple[str, Row]], List[Tuple[str, Row]],
                       List[str]]:
    """(host row changed, vNIC rows to insert, to update, vNICs to
    delete), to go from rows `written` as `before` to `now`."""
    (h0, p0), (h1, p1) = before, now
    insert = [(v, r) for v, r in sorted(p1.items()) if v not in p0]
    update = [(v, r) for v, r in sorted(p1.items())
              if v in p0 and p0[v] != _digest(r)]
    delete = sorted(v for v in p0 if v not in p1)
    return h0 != hash(h1), insert, update, delete
