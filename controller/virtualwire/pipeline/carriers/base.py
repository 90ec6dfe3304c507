"""What every carrier provides (see the package's docstring)."""
from typing import Dict, List, Tuple

from virtualwire.core.model import Encap


class Carrier:
    type = ''
    overhead = 0            # bytes added to each frame on the underlay

    def key(self, connector_id: int) -> int:
        raise NotImplementedError

    def send(self, here: Encap, peer: Encap, connector_id: int
             ) -> List[Tuple]:
        raise NotImplementedError

    def ingress(self, here: Encap, peer: Encap, connector_id: int
                ) -> Dict[str, object]:
        raise NotImplementedError
