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
from virtualwire.core import errors, tenancy


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
        if set(doc) != {'host'} or not isinstance(doc['host'], str):
            raise errors.Malformed('body must be {"host": host name}')
        view = self._call(self.ctl.moves.source_stopped, vm_uuid,
                          doc['host'])
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
