"""The extender agent: runs on an extender host, keeps one encrypted link
per peer extender (a userspace WireGuard device, the peer pinned by its public
key, with a VXLAN device over it on the link bridge br-xl) and reports
each link's state to the host's OVSDB, where the controller reads it
(`southbound.host_ovsdb`)."""
