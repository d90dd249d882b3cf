"""kraft: a reference implementation of Kafka's Raft metadata quorum (KIP-595, KIP-630, KIP-856)."""

__version__ = "0.1.0"
