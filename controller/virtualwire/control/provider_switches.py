"""Switches the provider implements in Open vSwitch flows (issue 41), a
part of the controller: a skeleton, to show where the next kind of
component plugs in without touching the other parts.

It will own the switches of the intent database (name, tenant, ports as
wire ends, and for a split switch its parts per host), their learned
MACs as the switch reports them, and each switch's moves. Like every
part it will read `shared` (tables, sessions), take the events it needs
from the controller (intent, hosts, packet-ins) and return changes; its
flows will come from a pipeline piece of its own, merged into each
host's desired table.
Today the intent database has no switch rows, so it holds none.
"""
from typing import Dict

from virtualwire.control.shared import Shared


class ProviderSwitches:
    def __init__(self, shared: Shared):
        self.shared = shared
        self.switches: Dict[str, dict] = {}   # name -> its intent

    def views(self):
        """What `vwctl switch show` will list."""
        return [dict(row, name=name)
                for name, row in sorted(self.switches.items())]
