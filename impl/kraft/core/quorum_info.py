"""What a leader reports about its quorum (DescribeQuorum, KIP-595): voters and observers."""

from __future__ import annotations

from dataclasses import dataclass

from kraft.ids import Epoch, NodeId, Offset, ReplicaKey

UNKNOWN = -1
"""Kafka's value for an offset or timestamp the leader has not learned yet."""


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    replica: ReplicaKey
    log_end_offset: int  # UNKNOWN until the replica fetched in this epoch
    last_fetch_timestamp_ms: int
    last_caught_up_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    leader_id: NodeId
    leader_epoch: Epoch
    high_watermark: Offset | None
    voters: tuple[ReplicaDescription, ...]
    observers: tuple[ReplicaDescription, ...]
