"""Enrolment requests and join tokens in the intent database, so every
controller of a cluster sees and answers them (`core.enrolment` signs).
Only SHA-256 digests of join tokens and poll secrets are kept: a copy of
the database (a backup) holds nothing that enrols a host.

A join token is single use by the database's word: its row is verified
and deleted in the transaction that records the approval, so two hosts
presenting it at once to two controllers cannot both be signed."""
from virtualwire.core import enrolment, errors
from virtualwire.store import revocations
from virtualwire.store import txn as store_txn

MAX_PENDING = 64          # requests awaiting an operator, all hosts
APPROVED_KEPT = 24 * 3600  # an approved certificate waits this long


class EnrolmentStore:
    def __init__(self, client):
        self.client = client

    def _rows(self, table):
        self._need()
        return list(self.client.idl.tables[table].rows.values())

    def _need(self):
        """A controller newer than its database (during an upgrade) says
        what to do rather than fail: the tables came with schema 1.11.0."""
        if 'Enrolment' not in self.client.idl.tables or \
                'JoinToken' not in self.client.idl.tables:
            raise errors.Unavailable(
                'the intent database predates enrolment (schema 1.11.0): '
                'upgrade it with `virtualwire-intent-db upgrade`')

    # -- the operator --------------------------------------------------
    def issue_token(self, name, ttl, now):
        """A join token for host `name`, valid `ttl` seconds (replacing
        any it had): (token, expires_at). It exists nowhere else."""
        self._need()
        enrolment.check_name(name)
        if not 0 < ttl <= enrolment.TOKEN_TTL_MAX:
            raise errors.Invalid('ttl must be 1 to %d seconds'
                                 % enrolment.TOKEN_TTL_MAX)
        token = enrolment.new_secret()

        def build(txn, idl):
            revocations.prune(idl, now)
            for r in list(idl.tables['JoinToken'].rows.values()):
                if r.name == name and r.expires_at > now:
                    _spend(txn, idl, r, now, 'replaced')
                elif r.expires_at <= now:
                    r.delete()
            row = txn.insert(idl.tables['JoinToken'])
            row.name, row.digest = name, enrolment.digest(token)
            row.expires_at = now + ttl

        store_txn.commit(self.client, build, 'issuing a join token')
        return token, now + ttl

    def pending(self):
        with self.client.lock:
            return sorted(({'name': r.name, 'fingerprint': r.fingerprint,
                            'peer': r.peer, 'requested_at': r.requested_at,
                            'state': r.state}
                           for r in self._rows('Enrolment')),
                          key=lambda v: v['requested_at'])

    def approve(self, name, sign):
        """Sign the pending request of `name` (sign(csr) -> PEM)."""
        self._need()
        def build(txn, idl):
            rows = [r for r in idl.tables['Enrolment'].rows.values()
                    if r.name == name and r.state == 'pending']
            if not rows:
                raise errors.NotFound('no pending enrolment of %s' % name)
            r = rows[0]
            r.verify('csr')
            r.certificate = sign(enrolment.load_csr(r.csr))
            r.state = 'approved'

        store_txn.commit(self.client, build, 'approving an enrolment')

    def refuse(self, name):
        if not store_txn.delete_rows(self.client, 'Enrolment',
                                     lambda r: r.name == name,
                                     'refusing an enrolment'):
            raise errors.NotFound('no enrolment of %s' % name)

    # -- the host ------------------------------------------------------
    def request(self, name, csr_pem, peer, now, sign, join_token=None):
        """A host's request: ('approved', certificate, None) with a valid
        join token, else ('pending', None, poll secret). Refused, Conflict
        or TooMany say why not."""
        self._need()
        enrolment.check_name(name)
        csr = enrolment.load_csr(csr_pem)
        fp = enrolment.fingerprint(csr)
        secret = enrolment.new_secret()
        out: dict = {}

        def build(txn, idl):
            out.clear()
            table = idl.tables['Enrolment']
            mine = [r for r in table.rows.values() if r.name == name]
            if join_token is not None:
                d = enrolment.digest(join_token)
                tokens = [t for t in idl.tables['JoinToken'].rows.values()
                          if t.digest == d and t.name == name and
                          t.expires_at > now]
                if not tokens or revocations.is_revoked(idl, d):
                    raise errors.Refused(
                        'the join token is not valid for %s (unknown, used, '
                        'expired or issued for another host)' % name)
                tokens[0].verify('digest')
                # Single use, in this commit; listed, so a restored
                # backup that still has the row cannot make it new.
                _spend(txn, idl, tokens[0], now, 'used')
                state, cert = 'approved', sign(csr)
            else:
                for r in mine:
                    if r.state == 'pending':
                        raise errors.Conflict(
                            'an enrolment of %s is already pending (key %s):'
                            ' the operator approves or refuses it first'
                            % (name, r.fingerprint))
                waiting = sum(1 for r in table.rows.values()
                              if r.state == 'pending')
                if waiting >= MAX_PENDING:
                    raise errors.TooMany(
                        '%d enrolments await an operator already; try '
                        'later' % waiting)
                state, cert = 'pending', ''
            for r in mine:
                r.delete()
            for r in list(table.rows.values()):     # old approvals go
                if r.state == 'approved' and \
                        r.requested_at < now - APPROVED_KEPT:
                    r.delete()
            row = txn.insert(table)
            row.name, row.csr, row.fingerprint = name, csr_pem, fp
            row.peer, row.requested_at = peer, now
            row.poll_digest = enrolment.digest(secret)
            row.state, row.certificate = state, cert
            out.update(state=state, cert=cert)

        store_txn.commit(self.client, build, 'recording an enrolment')
        if out['state'] == 'approved':
            return 'approved', out['cert'], None
        return 'pending', None, secret

    def poll(self, name, secret):
        """(state, certificate or None) of `name`'s request, to the holder
        of its poll secret only."""
        d = enrolment.digest(secret or '')
        with self.client.lock:
            for r in self._rows('Enrolment'):
                if r.name == name and r.poll_digest == d:
                    st = r.state
                    return st, (r.certificate or None)
        raise errors.NotFound('no enrolment of %s for this poll secret '
                              '(refused, replaced or never made)' % name)


def _spend(txn, idl, row, now, reason):
    revocations.record(txn, idl, 'join-token', row.name, row.digest, now,
                       reason, expires_at=row.expires_at)
    row.delete()
