"""REST handlers of moves the cloud's two hypervisors agree on (a part of
`RestApi`): the source's agent reports a guest leaving; the destination's
hook has announced it arriving (`announce_migration`). When both have
spoken, the words the pair authorizes (`core.departures`) are written to
the intent database as the cloud's placement, by the two hosts, and are in
force on this instance before the answer."""
import time
from typing import Any

from virtualwire.api.controller_port import ControllerPort
from virtualwire.api.render import json_response, read_json_object
from virtualwire.core import errors, ids, tenancy


def parse_reads(reads):
    """{vNIC: tap read count} of a STOP, or Invalid."""
    if not isinstance(reads, dict) or len(reads) > 64:
        raise errors.Invalid('reads must map at most 64 vNICs to counts')
    for v, n in reads.items():
        ids.check_vnic_id(v)
        if isinstance(n, bool) or not isinstance(n, int) or \
                not 0 <= n < 1 << 63:
            raise errors.Invalid('reads: the count of %s must be an '
                                 'integer from 0' % v)
    return reads


def parse_stop_time(at):
    """QEMU's STOP (Unix time, the source host's clock), or Invalid. Not
    compared with ours: only the source's copy log reads it, against
    that host's own clock."""
    if at is None:
        return None
    if isinstance(at, bool) or not isinstance(at, (int, float)) or \
            not 0 < at < 1e11:
        raise errors.Invalid('stopped_at must be a Unix time in seconds')
    return float(at)


class DepartureHandlers:
    intent: Any
    ctl: ControllerPort

    def _call(self, fn, *args):
        raise NotImplementedError

    def report_departure(self, req):
        doc = read_json_object(req, 16 << 10)
        who = req.environ.get('virtualwire.principal')
        # The hypervisor's own name (its credential names it); the
        # operator's token may report for any host it names.
        host = who[1] if isinstance(who, tuple) and who[0] == 'hypervisor' \
            else doc.get('host') if isinstance(doc.get('host'), str) else ''
        words = self._call(self.ctl.cloud_word.report_departure, host, doc)
        moved = self._write_words(words)
        # settled: the agent may stop saying it (else it says it again
        # until it is, within the pairing window).
        return json_response(200, {
            'vm_uuid': doc['vm_uuid'], 'moved': sorted(moved),
            'settled': bool(moved) or self._call(
                self.ctl.cloud_word.departure_settled, doc['vm_uuid'], host)})

    def migration_stopped(self, req, vm_uuid):
        """The source's agent: libvirt paused the guest there for the last
        copy (control.migrating.source_stopped). Answered with what a hook
        is told of a migration: not where its vNICs were, nor its timeline."""
        doc = read_json_object(req)
        if not {'host'} <= set(doc) <= {'host', 'reads', 'stopped_at'} or \
                not isinstance(doc['host'], str):
            raise errors.Malformed('body must be {"host": host name, '
                                   '"reads": {vNIC: count}, "stopped_at": '
                                   'Unix time}')
        reads = parse_reads(doc.get('reads', {}))
        view = self._call(self.ctl.source_stopped, vm_uuid,
                          doc['host'], reads,
                          parse_stop_time(doc.get('stopped_at')))
        return json_response(200, {'migration': {
            k: view[k] for k in tenancy.MIGRATION_VIEW if k in view}})

    def _write_words(self, words):
        """Write each authorized Word (the source's report and the
        destination's announcement agree), then apply them here."""
        written = {}
        for vnic, word in sorted(words.items()):
            written[vnic] = self.intent.placements.place(
                vnic, word.host, 'hypervisors %s -> %s' % (word.previous,
                                                            word.host),
                time.time())
        if written:
            self._call(self.ctl.on_words, written)
        return written
