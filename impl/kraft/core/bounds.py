"""What a received message may carry: the bounds every epoch, offset and id must respect.

Everything a replica adopts from a message is later persisted (quorum-state), encoded (the
wire, record batches) and, for epochs, incremented by the next election. A value outside these
bounds would be accepted now and fail later, at a point where the node cannot recover (an
epoch of 2^31 - 1 adopted from one frame becomes an unencodable 2^31 at the next election).
So the core refuses such a message up front, before it touches any state.
"""

from __future__ import annotations

from kraft.core.messages import (
    AddVoterRequest,
    AddVoterResponse,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    Message,
    RemoveVoterRequest,
    RemoveVoterResponse,
    UpdateVoterRequest,
    UpdateVoterResponse,
    VoteRequest,
    VoteResponse,
)
from kraft.ids import MAX_EPOCH, MAX_NODE_ID, MAX_OFFSET, OffsetAndEpoch

# The largest epoch a message may carry: one that a following election can still increment.
MAX_RECEIVED_EPOCH = MAX_EPOCH - 1


def _epoch(name: str, value: int, *, allow_unknown: bool = False) -> str | None:
    low = -1 if allow_unknown else 0
    if low <= value <= MAX_RECEIVED_EPOCH:
        return None
    return f"{name} {value} is outside [{low}, {MAX_RECEIVED_EPOCH}]"


def _offset(name: str, value: int, *, allow_unknown: bool = False) -> str | None:
    low = -1 if allow_unknown else 0
    if low <= value <= MAX_OFFSET:
        return None
    return f"{name} {value} is outside [{low}, {MAX_OFFSET}]"


def _node(name: str, value: int, *, allow_none: bool = False) -> str | None:
    low = -1 if allow_none else 0
    if low <= value <= MAX_NODE_ID:
        return None
    return f"{name} {value} is outside [{low}, {MAX_NODE_ID}]"


def _position(name: str, pos: OffsetAndEpoch | None, *, allow_unknown: bool = False) -> str | None:
    if pos is None:
        return None
    return _epoch(f"{name}.epoch", pos.epoch, allow_unknown=allow_unknown) or _offset(
        f"{name}.end_offset", pos.offset, allow_unknown=allow_unknown
    )


def _first(*problems: str | None) -> str | None:
    for p in problems:
        if p is not None:
            return p
    return None


def out_of_bounds(msg: Message) -> str | None:
    """Why `msg` carries a value this replica must not adopt, or None when it is within bounds.

    Requests carry the sender's own state, so unknown (-1) values are refused; responses may
    carry -1 for an unknown leader, epoch or high watermark, as Kafka sends them with errors.
    """
    if isinstance(msg, VoteRequest):
        return _first(
            _node("candidate id", msg.candidate.id),
            _epoch("candidate epoch", msg.candidate_epoch),
            _epoch("last epoch", msg.last_epoch),
            _offset("last end offset", msg.last_end_offset),
            None if msg.voter is None else _node("voter id", msg.voter.id),
        )
    if isinstance(msg, FetchRequest):
        return _first(
            # Replica -1 is a reader (Kafka's consumer id), not a replica.
            _node("replica id", msg.replica.id, allow_none=True),
            _epoch("replica epoch", msg.replica_epoch),
            _offset("fetch offset", msg.fetch_offset),
            _epoch("last fetched epoch", msg.last_fetched_epoch),
            _offset("log start offset", msg.log_start_offset, allow_unknown=True),
            None if msg.max_bytes >= 0 else f"max bytes {msg.max_bytes} is negative",
            None if msg.max_wait_ms >= 0 else f"max wait {msg.max_wait_ms} ms is negative",
        )
    if isinstance(msg, BeginQuorumEpochRequest):
        return _first(
            _node("leader id", msg.leader_id),
            _epoch("leader epoch", msg.leader_epoch),
            None if msg.voter is None else _node("voter id", msg.voter.id),
        )
    if isinstance(msg, EndQuorumEpochRequest):
        return _first(
            _node("leader id", msg.leader_id),
            _epoch("leader epoch", msg.leader_epoch),
            *(_node("preferred successor", s) for s in msg.preferred_successors),
        )
    if isinstance(msg, FetchSnapshotRequest):
        return _first(
            _node("replica id", msg.replica.id, allow_none=True),
            _epoch("replica epoch", msg.replica_epoch),
            _position("snapshot id", msg.snapshot_id),
            None if msg.position >= 0 else f"position {msg.position} is negative",
        )
    if isinstance(msg, VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse):
        return _first(
            _node("leader id", msg.leader_id, allow_none=True),
            _epoch("leader epoch", msg.leader_epoch, allow_unknown=True),
        )
    if isinstance(msg, FetchResponse):
        return _first(
            _node("leader id", msg.leader_id, allow_none=True),
            _epoch("leader epoch", msg.leader_epoch, allow_unknown=True),
            _offset("high watermark", msg.high_watermark, allow_unknown=True),
            _offset("log start offset", msg.log_start_offset, allow_unknown=True),
            _position("diverging epoch", msg.diverging_epoch, allow_unknown=True),
            _position("snapshot id", msg.snapshot_id, allow_unknown=True),
        )
    if isinstance(
        msg,
        AddVoterRequest
        | AddVoterResponse
        | RemoveVoterRequest
        | RemoveVoterResponse
        | UpdateVoterRequest
        | UpdateVoterResponse,
    ):
        return None  # kraft.core.reconfig answers bad voter keys with Kafka's own errors
    # The only kind left: FetchSnapshotResponse.
    return _first(
        _node("leader id", msg.leader_id, allow_none=True),
        _epoch("leader epoch", msg.leader_epoch, allow_unknown=True),
        _position("snapshot id", msg.snapshot_id, allow_unknown=True),
        None if msg.size >= 0 else f"size {msg.size} is negative",
        None if msg.position >= 0 else f"position {msg.position} is negative",
    )
