"""What the controller holds, declared once: the parts of `Controller`
(`migrating`, `views`) are written against this, so each knows the
state it may read and write, and the type checker does too."""
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from virtualwire.control.loop import Loop
from virtualwire.control.migrations import Migration, MigrationBook
from virtualwire.core.model import Host, Wire
from virtualwire.pipeline.incremental import IncrementalTables
from virtualwire.southbound.session import SwitchSession


class ControllerState:
    loop: Loop
    intent: Any                       # store.intent.IntentStore
    runtime: Any                      # store.runtime.RuntimeStore
    clock: Callable[[], float]
    move_timeout: float
    activation_settle: float          # seconds the sync waits after one
    sync_held_until: Optional[float]  # clock() until which it waits
    tables: IncrementalTables         # intent + hosts + placement -> flows
    cloud_word: Any                   # control.cloud_word.CloudWord
    migrations: MigrationBook
    sessions: Dict[int, SwitchSession]   # dpid -> connected switch
    require_identity: bool            # TLS: certificates name hosts
    refusals: Any                     # deque of recent refusals
    switch_takeovers: Any             # control.takeover.Takeovers
    host_dbs: Any                     # southbound.host_ovsdb.HostDbs
    known_wires: Set[int]             # connector ids seen in intent
    host_owner: Dict[str, str]        # host name -> OVSDB remote
    started_from: Tuple[Dict[str, Host], List[str]]  # what start() read
    remembered: Dict[str, Host]       # name -> Host, as last persisted
    move_seen: Dict[str, float]       # vnic -> clock() when first seen
    announced_at: Dict[str, float]    # vm_uuid -> clock() at announcement
    changed_records: Dict[str, Migration]   # to persist after the sync
    # vNIC -> (destination, {host: barrier xid} or None before the sync
    # that moves the other switches, clock() at activation)
    sisters_pending: Dict[str, Tuple[str, Optional[Dict[str, int]], float]]
    sister_hosts: Dict[str, List[str]]      # vNIC -> hosts moved for it
    stats: Dict[str, int]
    active: bool                      # leading (control.roles)
    leader: Any                       # store.leadership.Leader or None
    collector: Any                    # metrics.collector.Collector
    instruments: Any                  # metrics.instruments.Instruments

    def wire(self, cid: int) -> Wire:
        raise NotImplementedError

    def on_switch_up(self, dp, identity=None, cert_expires=None) -> None:
        raise NotImplementedError

    def host_of_dpid(self, dpid: int):
        raise NotImplementedError

    def _refuse(self, counter: str, kind: str, peer: str, why: str) -> None:
        raise NotImplementedError

    def role_view(self) -> dict:
        raise NotImplementedError

    def safe_start_view(self) -> dict:
        raise NotImplementedError

    def extender_link_views(self) -> list:
        raise NotImplementedError

    def relays_on(self, path) -> list:
        raise NotImplementedError

    def check_gateway_ends(self, *ends) -> None:
        raise NotImplementedError

    # control.holding
    def hold_packet_in(self, host, msg) -> bool:
        raise NotImplementedError

    def held_activation(self, vnic, host) -> None:
        raise NotImplementedError

    def awaiting_source(self) -> bool:
        raise NotImplementedError

    def packet_outs_for(self, host) -> list:
        raise NotImplementedError
