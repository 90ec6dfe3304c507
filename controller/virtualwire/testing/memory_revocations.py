"""store.revocations.RevocationStore's interface, in memory (the harness's
intent store): the same entries, validated the same way."""
import threading

from virtualwire.store.revocations import certificate_entry, host_entry


class MemoryRevocations:
    def __init__(self):
        self.rows: list = []
        self._lock = threading.Lock()

    def revoke_host(self, name, reason, now=None):
        return self._add(host_entry(name, reason, now))

    def revoke_certificate(self, name, fingerprint, reason, now=None):
        return self._add(certificate_entry(name, fingerprint, reason, now))

    def _add(self, e):
        with self._lock:
            if all(r['digest'] != e['digest'] for r in self.rows):
                self.rows.append(e)
        return e

    def entries(self):
        with self._lock:
            return sorted((dict(r) for r in self.rows),
                          key=lambda e: e['revoked_at'])
