"""Lab forensics: where each lost or doubled datagram of a migration died
and why (loss_audit, duplicate_audit), what the guest's own kernel dropped
(guest_drops), and what every switch did around a hole (hole_context).

They explain a measurement; they do not judge the product. The benchmarks
and the soak tier (bench/soak) use them; CI's integration tests judge a
move by what a user checks (tests/vwtest/switchover.py) and never import
them.
"""
