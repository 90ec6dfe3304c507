"""The extender agent: runs on an extender host, keeps one encrypted link
per peer extender (OpenVPN, TLS with pinned peer certificates, a tap on
the link bridge br-xl) and reports each link's state to the host's OVSDB,
where the controller reads it (`southbound.host_ovsdb`)."""
