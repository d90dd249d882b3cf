"""The application side of the replicated log: the port a state machine implements (port.py)
and the embedded default state machine, a replicated key-value store (kv.py)."""
