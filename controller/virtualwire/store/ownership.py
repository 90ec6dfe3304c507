"""Which tenant owns which vNIC (`core.tenancy`), in the intent
database's Ownership table: one row per vNIC (a unique index), set by the
operator. Read from the IDL's replica, as credentials are."""
import datetime

from virtualwire.core import ids, tenancy
from virtualwire.store import txn as store_txn
from virtualwire.store.switches import rows as switch_rows


class OwnershipStore:
    def __init__(self, client):
        self.client = client          # the intent store's IdlClient

    def assign(self, vnic_id, tenant):
        """vnic_id now belongs to tenant (whoever had it before)."""
        ids.check_vnic_id(vnic_id)
        tenancy.check_name(tenant)
        at = datetime.datetime.now(datetime.timezone.utc) \
            .isoformat(timespec='seconds')

        def build(txn, idl):
            for r in list(idl.tables['Ownership'].rows.values()):
                if r.vnic == vnic_id:
                    r.delete()
            row = txn.insert(idl.tables['Ownership'])
            row.vnic, row.tenant, row.assigned_at = vnic_id, tenant, at

        store_txn.commit(self.client, build, 'assigning a vNIC to a tenant')
        return at

    def release(self, vnic_id):
        """True if the vNIC had a tenant."""
        ids.check_vnic_id(vnic_id)
        return store_txn.delete_rows(self.client, 'Ownership',
                                     lambda r: r.vnic == vnic_id,
                                     "releasing a vNIC's tenant")

    def owners(self):
        """{vNIC id: tenant}."""
        with self.client.lock:
            return {r.vnic: r.tenant for r in
                    self.client.idl.tables['Ownership'].rows.values()}

    def end_owners(self):
        """{wire end: tenant}: the vNICs, and each provider switch's ports
        as its tenant's (`sw:NAME/PORT`), for a tenant's scope."""
        out = self.owners()
        with self.client.lock:
            for r in switch_rows(self.client.idl):
                for port in r.ports:
                    out['%s%s/%s' % (ids.SWITCH_END_PREFIX, r.name,
                                     port)] = r.tenant
        return out
