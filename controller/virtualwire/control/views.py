"""Read-only views of the controller's parts for the API (on the control
loop): plain JSON-ready values, and the checks a write is refused by
before it is stored. Nothing here changes state; it reads the parts
through their own attributes and views."""
import time

from virtualwire.control.gateways import check_gateway_ends
from virtualwire.control.provider_switches import check_switch_ends
from virtualwire.core import batch, errors, ids, tenancy
from virtualwire.metrics.switch_ports import port_counters
from virtualwire.pipeline import carriers
from virtualwire.pipeline.wire import wire_path, wire_state

# A 1500-byte guest frame, its Ethernet header and one 802.1Q tag.
GUEST_FRAME = 1500 + 14 + 4
# s: a host certificate this close to its expiry is a warning (`vwctl
# hosts`; the alert in ops/prometheus says so too).
CERT_WARN = 30 * 86400


class Views:
    def __init__(self, ctl):
        self.ctl = ctl                  # control.controller.Controller
        self.shared = ctl.shared
        self.loop = ctl.shared.loop

    @property
    def tables(self):
        return self.shared.tables

    @property
    def sessions(self):
        return self.shared.sessions

    @property
    def collector(self):
        return self.ctl.collector

    def wire(self, cid):
        self.loop.assert_owner()
        w = self.tables.wires.get(cid)
        if w is None:
            raise tenancy.no_wire(cid)
        return w

    def check_gateway_ends(self, *ends):
        self.loop.assert_owner()
        check_gateway_ends(self.tables, *ends)

    def check_switch_ends(self, owners, *ends):
        """`owners`: vNIC id -> tenant (the intent database's)."""
        self.loop.assert_owner()
        check_switch_ends(self.tables.switches, owners, *ends)

    def batch_refusals(self, pairs, cids, scope=None, owners=None) -> list:
        """Items of a parsed batch the state refuses: another tenant's or
        unknown ends and wires (as nonexistent), a vNIC already wired, a
        gateway end that cannot be one."""
        self.loop.assert_owner()
        bad = []
        freed = set(cids)              # a batch may rewire what it removes
        for i, (a, b) in enumerate(pairs):
            try:
                if scope is not None:
                    scope.check_ends(a, b)
                check_gateway_ends(self.tables, a, b)
                check_switch_ends(self.tables.switches, owners or {}, a, b)
                for v in (a, b):
                    cid = self.tables.by_vnic.get(v)
                    w = self.tables.wires.get(cid) if cid else None
                    if w is not None and cid not in freed:
                        raise scope.taken(v, (cid, w.end_a, w.end_b)) \
                            if scope is not None else errors.Conflict(
                                'vNIC %s is already wired (connector %s)'
                                % (v, ids.fmt_connector(cid)))
            except errors.VwError as e:
                bad.append(batch.item_error('create', i, e))
        for i, cid in enumerate(cids):
            w = self.tables.wires.get(cid)
            if w is None or (scope is not None and
                             not scope.sees_wire(w.end_a, w.end_b)):
                bad.append(batch.item_error('delete', i,
                                            tenancy.no_wire(cid)))
        return bad

    def _ends(self, wire):
        loc = {v: x for v in wire.ends()
               for x in [self.tables.location(v)] if x is not None}
        moves = {v: self.tables.placement.moves[v] for v in wire.ends()
                 if v in self.tables.placement.moves}
        return loc, wire_state(wire, self.tables.hosts, loc), moves

    def wire_view(self, cid):
        self.loop.assert_owner()
        wire = self.wire(cid)
        loc, state, moves = self._ends(wire)
        la, lb = loc.get(wire.end_a), loc.get(wire.end_b)
        path = wire_path(wire, self.tables.hosts, loc)
        return {
            'id': wire.connector_id,
            'connector_id': ids.fmt_connector(wire.connector_id),
            'a': wire.end_a, 'b': wire.end_b,
            'state': state,
            'host_a': la.host if la else None,
            'host_b': lb.host if lb else None,
            'created_at': wire.created_at,
            # Hosts its frames cross from a to b (extenders between sites).
            'path': list(path or ()),
            # Extender links on it whose ciphertext a relay forwards.
            'relayed': bool(self.ctl.extenders.relays_on(path)),
            # Ends being live-migrated: both hosts receive the wire until
            # the guest's first frame there activates the destination.
            'moving': {v: {'source': m.source, 'destination': m.destination,
                           'activated': m.activated}
                       for v, m in moves.items()},
        }

    def wire_views(self):
        self.loop.assert_owner()
        return [self.wire_view(cid) for cid in sorted(self.tables.wires)]

    def wire_page(self, after=None, limit=None, visible=None):
        """(views of up to `limit` wires after connector id `after` that
        `visible(a, b)` lets through, the cursor of the next page or
        None): only the page's views are built."""
        self.loop.assert_owner()
        out: list = []
        last = None
        for cid in sorted(self.tables.wires):
            if after is not None and cid <= after:
                continue
            w = self.tables.wires[cid]
            if visible is not None and not visible(w.end_a, w.end_b):
                continue
            if limit is not None and len(out) == limit:
                return out, last
            out.append(self.wire_view(cid))
            last = cid
        return out, None

    def host_view(self, name):
        self.loop.assert_owner()
        h = self.tables.hosts.get(name)
        if h is None:
            raise errors.NotFound('no host named %s' % name)
        s = self.sessions.get(h.dpid)
        warnings = []
        overhead = max((c.overhead for c in carriers.CARRIERS), default=0)
        if h.underlay_mtu and h.underlay_mtu < GUEST_FRAME + overhead:
            warnings.append('underlay MTU %d is below %d: full-size guest '
                            'frames cannot cross wires'
                            % (h.underlay_mtu, GUEST_FRAME + overhead))
        if not any(e.usable for e in h.encaps):
            warnings.append('no tunnel port on the integration bridge')
        expires = s.cert_expires if s is not None else None
        if expires is not None and expires - time.time() < CERT_WARN:
            left = (expires - time.time()) / 86400
            warnings.append(
                'certificate %s %s: renew it (vw-host-setup enroll)' % (
                    'expires in %d days,' % left if left >= 0 else
                    'expired', time.strftime('%Y-%m-%d',
                                             time.gmtime(expires))))
        return {'name': h.name, 'dpid': '%016x' % h.dpid,
                'tunnel_ip': h.tunnel_ip, 'site': h.site, 'role': h.role,
                'ports': [p.name for p in h.ports],
                'links': [{'peer': k.peer, 'up': k.up} for k in h.links],
                'encaps': [{'type': e.type, 'ip': e.ip, 'ofport': e.ofport}
                           for e in h.encaps],
                # When the switch last confirmed (barrier reply) every flow
                # change we sent it: the moment they were all in place.
                'flows_confirmed_at': s.confirmed_at if s else None,
                'datapath_type': h.datapath_type,
                'underlay_mtu': h.underlay_mtu,
                'hold_port': h.hold_port,     # vw-host-setup --hold-frames
                'vnics': len(h.vnics), 'warnings': warnings,
                **self._health(h)}

    def _health(self, h):
        """A host's switch as operators watch it (views and /metrics)."""
        s = self.sessions.get(h.dpid)
        addr = s.dp.address if s is not None else None
        return {'connected': s is not None, 'synced': bool(s and s.synced),
                # Where its switch connected from, and as whom (TLS).
                'switch_address': addr[0] if isinstance(addr, tuple) else None,
                'certificate': sorted(s.identity) if s and s.identity
                else None,
                'certificate_expires_at': s.cert_expires if s else None,
                # What `vwctl hosts revoke NAME --certificate` names.
                'certificate_sha256': getattr(s.identity, 'fingerprint',
                                              None) if s else None,
                # Since when, and when its whole table was last read (a
                # reconnect: dumped, diffed, only what differs sent).
                'connected_at': s.connected_at if s else None,
                'dumped_at': s.dumped_at if s else None,
                'flows': len(self.tables.table_map(h.name)),
                # Frames the switch dropped, by why (collector's counters).
                'drops': self.collector.host(h.name)}

    def host_views(self):
        self.loop.assert_owner()
        return [self.host_view(n) for n in sorted(self.tables.hosts)]

    def vnic_views(self):
        """Every plugged vNIC, once, on the host its traffic goes to (the
        incumbent, while a migration has it plugged on two)."""
        self.loop.assert_owner()
        out = {}
        for vid in sorted(self.tables.placement.claims):
            v = self._vnic_view(vid)
            if v is not None:
                out[vid] = v
        return out

    def _vnic_view(self, vid):
        loc = self.tables.location(vid)
        host = self.tables.hosts.get(loc.host) if loc else None
        v = host.vnic_map().get(vid) if host else None
        if v is None:
            return None
        cid = self.tables.by_vnic.get(vid)
        word = self.tables.placement.words.get(vid)
        return {'id': vid, 'host': loc.host, 'port': v.port_name,
                'ofport': v.ofport, 'mac': v.mac, 'vm_id': v.vm_id,
                'wire': ids.fmt_connector(cid) if cid else None,
                # The cloud's word (control.cloud_word), None if unsaid.
                'placed_on': word.host if word else None,
                'refused_on': sorted(self.tables.placement.refused.get(
                    vid, {}))}

    def vnic_view(self, vnic_id):
        self.loop.assert_owner()
        ids.check_vnic_id(vnic_id)
        v = self._vnic_view(vnic_id) if vnic_id in \
            self.tables.placement.claims else self._refused_view(vnic_id)
        if v is None:
            raise tenancy.no_vnic(vnic_id)
        return v

    def _refused_view(self, vid):
        """A vNIC plugged only where it is refused: nobody's traffic."""
        p = self.tables.placement
        refused = p.refused.get(vid)
        if not refused:
            return None
        cid = self.tables.by_vnic.get(vid)
        word = p.words.get(vid)
        return {'id': vid, 'host': None, 'port': None, 'ofport': None,
                'mac': None, 'vm_id': None,
                'wire': ids.fmt_connector(cid) if cid else None,
                'placed_on': word.host if word else None,
                'refused_on': sorted(refused)}

    def wire_of_vnic(self, vnic_id):
        """(connector id, end a, end b) of the wire holding a vNIC, or
        None."""
        self.loop.assert_owner()
        cid = self.tables.by_vnic.get(vnic_id)
        w = self.tables.wires.get(cid) if cid is not None else None
        return (cid, w.end_a, w.end_b) if w is not None else None

    def migration_views(self):
        self.loop.assert_owner()
        return [m.view() for m in self.shared.migrations.all()]

    def status(self):
        self.loop.assert_owner()
        return {'switches_connected': len(self.sessions),
                'hosts': len(self.tables.hosts),
                'wires': len(self.tables.wires),
                'counters': dict(self.shared.stats, **self.loop.figures(),
                                 **self.ctl.quiet.figures()),
                'collector': self.collector.status(),
                # What each kind of change recomputed (pipeline.incremental).
                'incremental': dict(self.tables.stats),
                # Flows of wires the intent database lacks (safe_start).
                'safe_start': self.ctl.safe_start.view(),
                # Connections and reports turned away (control.admission).
                'admission': {'certificates_required':
                              self.ctl.admission.require_identity,
                              'recent_refusals': list(
                                  self.ctl.refusals.recent)},
                # Hosts that plugged a vNIC the cloud placed elsewhere.
                'refused_claims': self.ctl.cloud_word.refused(),
                # Moves a source's report could not authorize
                # (core.departures), the latest.
                'departures_refused': list(
                    self.ctl.cloud_word.recent_departure_refusals),
                # Active or standby (control.roles, store.leadership).
                'role': self.ctl.roles.view()}

    def readiness(self):
        """The checks /readyz fails on, by name: none means this instance
        serves its role. Hosts: it has a session with every host it knows
        of, or knows of none yet (a new deployment)."""
        self.loop.assert_owner()
        failing = []
        if not self.ctl.roles.active and self.ctl.roles.leader is None:
            failing.append('role')          # neither leading nor following
        known = len(self.tables.hosts)
        if known and len(self.sessions) < known:
            failing.append('hosts')
        return failing

    def wire_stats(self, cid):
        """A wire's counters each way (entered at one end, delivered at the
        other, lost between), rates and loss over the collector's window,
        from the collector's memory: no switch is asked."""
        self.loop.assert_owner()
        wire = self.wire(cid)
        _loc, state, _moves = self._ends(wire)
        return dict(self.collector.wire(cid), id=cid, connector_id=ids.fmt_connector(cid),
                    state=state, read_every_s=self.collector.interval)

    def metrics_view(self, wires=True):
        """Everything /metrics shows, in one pass on the loop (`wires`
        False: all but the wires, which /metrics reads a page at a time:
        `wire_ids`, `wire_metrics`)."""
        self.loop.assert_owner()
        rows = self.wire_metrics(self.tables.wires) if wires else []
        hosts = [dict(self._health(h), name=h.name, site=h.site, role=h.role)
                 for h in self.tables.hosts.values()]
        states: dict = {}
        for m in self.shared.migrations.all():
            states[m.state] = states.get(m.state, 0) + 1
        return {'wires': rows, 'hosts': hosts, 'migrations': states,
                'links': self.ctl.extenders.link_views(),
                'switches': self.switch_views(),
                'collector': self.collector.status(),
                'claims_refused': dict(self.ctl.cloud_word.refused_total),
                'departures_refused': dict(
                    self.ctl.cloud_word.departures_refused),
                'takeovers_refused': dict(
                    self.ctl.admission.switch_takeovers.refused_total),
                'active': bool(self.ctl.roles.active)}

    def wire_ids(self):
        self.loop.assert_owner()
        return sorted(self.tables.wires)

    def wire_metrics(self, cids):
        """The metrics of the wires `cids` that still exist."""
        self.loop.assert_owner()
        out = []
        for cid in cids:
            wire = self.tables.wires.get(cid)
            if wire is None:
                continue
            loc, state, _moves = self._ends(wire)
            sites = [self.tables.hosts[x.host].site
                     if x is not None and x.host in self.tables.hosts
                     else None for x in (loc.get(wire.end_a),
                                         loc.get(wire.end_b))]
            out.append({'connector_id': ids.fmt_connector(cid),
                        'end_a': wire.end_a, 'end_b': wire.end_b,
                        'state': state, 'site_a': sites[0],
                        'site_b': sites[1],
                        'counters': self.collector.totals(cid)})
        return out

    def switch_views(self, name=None):
        """Provider switches (one: `name`) as wired, each port with its
        counters (`metrics.switch_ports`)."""
        self.loop.assert_owner()
        part = self.ctl.provider_switches
        out = [part.view(name)] if name is not None else part.views()
        for v in out:
            port_counters(v, self.collector.switch_counts(v['host'],
                                                          v['number'])
                          if v['placed'] else None, self._sent_by)
        return out

    def _sent_by(self, cid, end):
        totals = self.collector.totals(cid)
        w = self.tables.wires.get(cid)
        if totals is None or w is None:
            return None
        return totals['a_to_b' if w.end_a == end else 'b_to_a'][
            'entered_packets']

    def all_wire_stats(self):
        """Every wire's figures (as `wire_stats`), from memory: what
        `vwctl top` and the dashboard poll."""
        self.loop.assert_owner()
        self.collector.check_ready()
        out = []
        for cid, wire in sorted(self.tables.wires.items()):
            figures = self.collector.wire(cid)
            _loc, state, _moves = self._ends(wire)
            out.append(dict(figures, id=cid, a=wire.end_a, b=wire.end_b,
                            connector_id=ids.fmt_connector(cid),
                            state=state))
        return {'wires': out, 'read_every_s': self.collector.interval}

    def wires_with_rates(self, cids):
        """{cid: wire view with `bits_per_second` and `packets_per_second`
        (both ways, over the collector's window; None before its first
        readings)} of those of `cids` that exist: a topology's wires."""
        self.loop.assert_owner()
        out = {}
        for cid in cids:
            if cid not in self.tables.wires:
                continue
            view = self.wire_view(cid)
            try:
                figures = self.collector.wire(cid)
                windows = [d.get('window') for d in figures.values()]
            except errors.VwError:
                windows = [None]
            if all(windows):
                view['bits_per_second'] = sum(w['bits_per_second']
                                              for w in windows)
                view['packets_per_second'] = sum(w['packets_per_second']
                                                 for w in windows)
            else:
                view['bits_per_second'] = view['packets_per_second'] = None
            out[cid] = view
        return out
