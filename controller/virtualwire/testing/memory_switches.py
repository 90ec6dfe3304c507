"""store.switches.SwitchStore's interface, in memory: each change is
handed to on_change(all switches), as the watch
(control.provider_switches.SwitchWatch) hands the database's."""
import dataclasses
from typing import Callable, Dict

from virtualwire.core.switches import (IDLE_TIMEOUT, MAC_LIMIT, NUMBER_MAX,
                                       ProviderSwitch)
from virtualwire.core import errors
from virtualwire.store.switches import SwitchExists


class MemorySwitches:
    def __init__(self):
        self.rows: Dict[str, ProviderSwitch] = {}
        self.on_change: Callable = lambda switches: None

    def switches(self):
        return dict(self.rows)

    def get(self, name):
        return self.rows.get(name)

    def create(self, name, tenant, host, ports, mac_limit=MAC_LIMIT,
               idle_timeout=IDLE_TIMEOUT):
        ProviderSwitch(name, tenant, 1, host, tuple(ports), mac_limit,
                       idle_timeout)
        if name in self.rows:
            raise SwitchExists('a switch named %s exists' % name)
        used = {s.number for s in self.rows.values()}
        number = next((n for n in range(1, NUMBER_MAX + 1)
                       if n not in used), None)
        if number is None:
            raise errors.Conflict('every switch number is in use')
        sw = ProviderSwitch(name, tenant, number, host, tuple(ports),
                            mac_limit, idle_timeout)
        self.rows[name] = sw
        self.on_change(self.switches())
        return sw

    def place(self, name, host):
        return self._change(name, host=host)

    def split(self, name, parts):
        return self._change(name, parts=tuple(sorted(parts.items())))

    def _change(self, name, **fields):
        sw = self.rows.get(name)
        if sw is None:
            return False
        self.rows[name] = dataclasses.replace(sw, **fields)
        self.on_change(self.switches())
        return True

    def delete(self, name):
        found = self.rows.pop(name, None) is not None
        if found:
            self.on_change(self.switches())
        return found

    def end_owners(self):
        return {sw.end(p): sw.tenant for sw in self.rows.values()
                for p in sw.ports}
