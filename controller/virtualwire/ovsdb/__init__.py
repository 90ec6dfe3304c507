"""The bottom layer for OVSDB, under both the intent store (store/) and
the hosts' switches (southbound/): the `ovs` IDL client, monitor sessions
on one connection, raw JSON-RPC transactions and a fast JSON parser.
Nothing here knows our schema's meaning; nothing here imports above it."""
