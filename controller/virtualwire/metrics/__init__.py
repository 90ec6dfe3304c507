"""Read-only figures for operators (Faucet's Gauge is the model): flow
counters collected off the request path into per-wire and per-host
counters that never go backwards (`counters`, `collector`), and their
Prometheus exposition (`exporter`). Nothing here changes a switch."""
