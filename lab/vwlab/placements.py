"""The cloud's word on placement, as the lab gives it (strict placement,
the product's default, refuses every vNIC nobody placed).

A lab host that plugs a vNIC (a namespace VM, a QEMU guest, a libvirt
guest) first places it on itself with `PUT /v1/vnics/ID/placement`, as an
orchestrator would before starting the guest; the answering instance has
it in force before it answers. Plugging the same vNIC on another host
(the destination of a move the test plays by hand) places it there: the
cloud authorizing the move. Attack tests plug with `place=False`.

While no controller instance runs, words wait here and are given when
one starts (they live in the intent database after that, across
restarts)."""
import time

import requests

from vwlab.shell import LabError

# How long a word waits for an instance that is starting to answer.
READY_WAIT = 60.0


class LabPlacements:
    def __init__(self, lab):
        self.lab = lab
        self.waiting = {}            # vnic -> host, while nothing runs

    def _running(self):
        return any(p.poll() is None for p in self.lab.instances.values())

    def place(self, vnic, host):
        if not self._running():
            self.waiting[vnic] = host
            return
        self._put(vnic, host)

    def flush(self):
        """Give every word that waited (called when an instance starts)."""
        for vnic, host in sorted(self.waiting.items()):
            self._put(vnic, host)
        self.waiting.clear()

    def _put(self, vnic, host):
        with open(self.lab.token_file) as f:
            token = f.read().strip()
        deadline, last = time.time() + READY_WAIT, 'no answer'
        while time.time() < deadline:
            # The leader takes it; a standby answers 307 (to the leader,
            # whose URL is in the list too) and is passed over.
            for url in self.lab.urls:
                try:
                    r = requests.put(
                        '%s/v1/vnics/%s/placement' % (url, vnic),
                        json={'host': host}, timeout=10,
                        headers={'Authorization': 'Bearer ' + token},
                        verify=self.lab.verify, allow_redirects=False)
                except requests.RequestException as e:
                    last = str(e)
                    continue
                if r.status_code == 200:
                    return
                last = '%d %s' % (r.status_code, r.text)
            time.sleep(0.2)
        raise LabError('placing vNIC %s on %s: %s' % (vnic, host, last))
