"""The KRaft RPCs as the core sees them: one frozen dataclass per request and response.

These carry the fields KIP-595/630/856 define, flattened to the single partition KRaft uses.
The voter changes (KIP-853: AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter) are requests to
the leader from an admin client or a voter; kraft.core.reconfig answers them.
The wire layer (kraft.protocol) translates them to and from Kafka's wire messages; the
simulator passes them as they are. Record data stays encoded (record batch v2 bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kraft.control_records import Endpoint
from kraft.errors import ErrorCode
from kraft.ids import (
    NO_NODE,
    ClusterId,
    Epoch,
    NodeId,
    Offset,
    OffsetAndEpoch,
    ReplicaKey,
)

Records = bytes | memoryview


@dataclass(frozen=True, slots=True)
class VoteRequest:
    cluster_id: ClusterId
    candidate: ReplicaKey
    candidate_epoch: Epoch
    # The candidate's log position: epoch of its last record and its end offset (KIP-595).
    last_epoch: Epoch
    last_end_offset: Offset
    # KIP-853: the replica the candidate believes it is asking; a mismatch is rejected.
    voter: ReplicaKey | None = None
    # KIP-996: a pre-vote asks "would you vote for me?" and changes no epoch or vote anywhere.
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error: ErrorCode
    leader_id: NodeId
    leader_epoch: Epoch
    vote_granted: bool


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    cluster_id: ClusterId
    leader_id: NodeId
    leader_epoch: Epoch
    voter: ReplicaKey | None = None


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error: ErrorCode
    leader_id: NodeId
    leader_epoch: Epoch


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    cluster_id: ClusterId
    leader_id: NodeId
    leader_epoch: Epoch
    # Sorted by replicated offset, most caught-up first (KIP-595).
    preferred_successors: tuple[NodeId, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error: ErrorCode
    leader_id: NodeId
    leader_epoch: Epoch


@dataclass(frozen=True, slots=True)
class FetchRequest:
    cluster_id: ClusterId
    replica: ReplicaKey
    # The epoch the fetcher believes is current (Kafka's CurrentLeaderEpoch).
    replica_epoch: Epoch
    fetch_offset: Offset
    last_fetched_epoch: Epoch
    log_start_offset: Offset
    max_bytes: int = 1 << 20
    max_wait_ms: int = 0


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error: ErrorCode
    leader_id: NodeId
    leader_epoch: Epoch
    high_watermark: Offset
    log_start_offset: Offset
    # Set when the fetcher's log diverges: truncate to this (end offset, epoch) (KIP-595).
    diverging_epoch: OffsetAndEpoch | None = None
    # Set when the fetch offset is below the log start: fetch this snapshot (KIP-630).
    snapshot_id: OffsetAndEpoch | None = None
    records: Records = field(default=b"", compare=False)


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    cluster_id: ClusterId
    replica: ReplicaKey
    replica_epoch: Epoch
    snapshot_id: OffsetAndEpoch
    position: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error: ErrorCode
    leader_id: NodeId
    leader_epoch: Epoch
    snapshot_id: OffsetAndEpoch
    size: int
    position: int
    # The snapshot bytes at `position` (a view of the file on the node: never copied there).
    chunk: Records = field(default=b"", compare=False)


@dataclass(frozen=True, slots=True)
class AddVoterRequest:
    """AddRaftVoter (API 80): add `voter`, reachable at `endpoints`, to the voter set."""

    cluster_id: ClusterId | None
    voter: ReplicaKey
    endpoints: tuple[Endpoint, ...]
    timeout_ms: int = 30_000
    # v1 (KIP-1186): False asks for the answer once the change is appended, not committed.
    ack_when_committed: bool = True


@dataclass(frozen=True, slots=True)
class AddVoterResponse:
    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class RemoveVoterRequest:
    """RemoveRaftVoter (API 81): remove exactly `voter` (id and directory id)."""

    cluster_id: ClusterId | None
    voter: ReplicaKey


@dataclass(frozen=True, slots=True)
class RemoveVoterResponse:
    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class UpdateVoterRequest:
    """UpdateRaftVoter (API 82): a voter publishes its endpoints and the kraft.version range
    it supports."""

    cluster_id: ClusterId | None
    leader_epoch: Epoch
    voter: ReplicaKey
    endpoints: tuple[Endpoint, ...]
    min_kraft_version: int
    max_kraft_version: int


@dataclass(frozen=True, slots=True)
class UpdateVoterResponse:
    error: ErrorCode
    leader_id: NodeId
    leader_epoch: Epoch


Request = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | FetchSnapshotRequest
    | AddVoterRequest
    | RemoveVoterRequest
    | UpdateVoterRequest
)
Response = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | FetchSnapshotResponse
    | AddVoterResponse
    | RemoveVoterResponse
    | UpdateVoterResponse
)
Message = Request | Response

__all__ = [
    "NO_NODE",
    "AddVoterRequest",
    "AddVoterResponse",
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "FetchRequest",
    "FetchResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "Message",
    "Records",
    "RemoveVoterRequest",
    "RemoveVoterResponse",
    "Request",
    "Response",
    "UpdateVoterRequest",
    "UpdateVoterResponse",
    "VoteRequest",
    "VoteResponse",
]
