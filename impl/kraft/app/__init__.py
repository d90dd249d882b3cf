"""The application side of the replicated log: the port a state machine implements (port.py),
the embedded default state machine, a replicated key-value store (kv.py), the metadata state
machine of a quorum shared with Kafka controllers (metadata.py), and the choice between them
(machines.py)."""
