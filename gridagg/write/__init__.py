"""Writes: the one write protocol every writer follows (protocol: lock, recovery, intent,
rows, aggregates, switch, end), Algorithm 2's split on arrays (split) and in place
(leafsplit), and the named fault points the crash tests arm (faults)."""
