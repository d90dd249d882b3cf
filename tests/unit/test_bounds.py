"""Hostile values in received messages: a replica refuses what it could not store, encode or
increment, before it touches any state (issue: one Vote with epoch 2^31-1 killed a cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest
from replica_harness import CLUSTER, Harness, key, of, sent

from kraft.core.bounds import MAX_RECEIVED_EPOCH, out_of_bounds
from kraft.core.effects import (
    ElectionsExhausted,
    ElectionState,
    MessageRefused,
    PersistElectionState,
    StateChanged,
)
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    VoteRequest,
    VoteResponse,
)
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import (
    MAX_EPOCH,
    MAX_OFFSET,
    Epoch,
    NodeId,
    Offset,
    OffsetAndEpoch,
    ReplicaKey,
)
from kraft.storage.quorum_state import (
    QuorumStateError,
    decode_quorum_state,
    encode_quorum_state,
    read_quorum_state,
    write_quorum_state,
)

TOO_LARGE = Epoch(MAX_EPOCH)  # 2^31 - 1: representable, but the next election could not be


def _vote(epoch: int, cand: int = 2, last_epoch: int = 0, end: int = 0) -> VoteRequest:
    candidate = key(cand) if cand >= 0 else ReplicaKey(NodeId(cand))
    return VoteRequest(CLUSTER, candidate, Epoch(epoch), Epoch(last_epoch), Offset(end))


def _fetch(**kw: int) -> FetchRequest:
    fields = {
        "replica_epoch": 1,
        "fetch_offset": 0,
        "last_fetched_epoch": 0,
        "log_start_offset": 0,
        "max_wait_ms": 0,
    }
    fields.update(kw)
    return FetchRequest(
        CLUSTER,
        key(2),
        Epoch(fields["replica_epoch"]),
        Offset(fields["fetch_offset"]),
        Epoch(fields["last_fetched_epoch"]),
        Offset(fields["log_start_offset"]),
        max_wait_ms=fields["max_wait_ms"],
    )


HOSTILE_REQUESTS: list[tuple[str, Message, type]] = [
    ("vote epoch 2^31-1", _vote(MAX_EPOCH), VoteResponse),
    ("vote last end offset 2^63-1", _vote(5, end=2**63 - 1), VoteResponse),
    ("vote candidate id -7", _vote(5, cand=-7), VoteResponse),
    (
        "begin epoch 2^31-1",
        BeginQuorumEpochRequest(CLUSTER, NodeId(2), TOO_LARGE),
        BeginQuorumEpochResponse,
    ),
    (
        "end epoch 2^31-1",
        EndQuorumEpochRequest(CLUSTER, NodeId(2), TOO_LARGE, (NodeId(1),)),
        EndQuorumEpochResponse,
    ),
    ("end successor -5", EndQuorumEpochRequest(CLUSTER, NodeId(2), Epoch(3), (NodeId(-5),)), None),
    ("fetch epoch 2^31-1", _fetch(replica_epoch=MAX_EPOCH), FetchResponse),
    ("fetch offset 2^63-1", _fetch(fetch_offset=2**63 - 1), FetchResponse),
    ("fetch negative wait", _fetch(max_wait_ms=-1), FetchResponse),
    (
        "fetch snapshot negative position",
        FetchSnapshotRequest(
            CLUSTER,
            key(2),
            Epoch(1),
            OffsetAndEpoch(Epoch(0), Offset(0)),
            position=-1,
            max_bytes=1 << 20,
        ),
        FetchSnapshotResponse,
    ),
]


@pytest.mark.parametrize(
    ("name", "msg", "reply"), HOSTILE_REQUESTS, ids=[n for n, _, _ in HOSTILE_REQUESTS]
)
def test_a_request_out_of_bounds_is_refused_before_it_touches_state(
    name: str, msg: Message, reply: type | None
) -> None:
    h = Harness(election=ElectionState(Epoch(3), leader_id=NodeId(3)))
    before = h.view
    effects = h.recv(2, msg)
    assert of(effects, PersistElectionState) == []
    assert of(effects, StateChanged) == []
    assert h.view == before  # no epoch adopted, no vote, no leader change
    [refused] = of(effects, MessageRefused)
    assert refused.src == 2 and refused.reason
    replies = [m for _, m in sent(effects, object)]
    assert len(replies) == 1
    assert replies[0].error is ErrorCode.INVALID_REQUEST  # type: ignore[attr-defined]
    if reply is not None:
        assert isinstance(replies[0], reply)


@pytest.mark.parametrize(
    "msg",
    [
        VoteResponse(ErrorCode.NONE, NodeId(2), TOO_LARGE, True),
        BeginQuorumEpochResponse(ErrorCode.NONE, NodeId(2), TOO_LARGE),
        FetchResponse(ErrorCode.NONE, NodeId(2), TOO_LARGE, Offset(0), Offset(0)),
        FetchResponse(ErrorCode.NONE, NodeId(2), Epoch(3), Offset(2**63 - 1), Offset(0)),
    ],
)
def test_a_response_out_of_bounds_is_dropped(msg: Message) -> None:
    h = Harness(election=ElectionState(Epoch(3), leader_id=NodeId(2)))
    before = h.view
    effects = h.recv(2, msg)
    assert h.view == before
    assert of(effects, PersistElectionState) == []
    assert [m for _, m in sent(effects, object)] == []
    assert len(of(effects, MessageRefused)) == 1


def test_the_largest_incrementable_epoch_is_still_adopted() -> None:
    h = Harness(election=ElectionState(Epoch(3)))
    effects = h.recv(2, _vote(MAX_RECEIVED_EPOCH))
    assert of(effects, MessageRefused) == []
    assert h.view.epoch == MAX_RECEIVED_EPOCH
    assert h.view.state is ReplicaState.VOTED


def test_the_replica_at_the_largest_epoch_stops_standing_but_keeps_serving() -> None:
    """From MAX_EPOCH no election can start (MAX_EPOCH + 1 is not an int32): the replica says
    so, persists nothing unencodable, and still answers requests."""
    h = Harness(election=ElectionState(Epoch(MAX_EPOCH)))
    effects = h.tick()
    assert of(effects, ElectionsExhausted) == [ElectionsExhausted(Epoch(MAX_EPOCH))]
    assert all(p.state.epoch <= MAX_EPOCH for p in of(effects, PersistElectionState))
    assert h.view.epoch == MAX_EPOCH
    resp = [m for _, m in sent(h.recv(2, _vote(MAX_EPOCH - 5)), VoteResponse)]
    assert resp and resp[0].error is ErrorCode.FENCED_LEADER_EPOCH


def test_the_hostile_vote_of_the_issue_no_longer_kills_a_cluster() -> None:
    """Vote, epoch 2^31-1, from a non-voter: refused; the replica later elects normally."""
    h = Harness(election=ElectionState(Epoch(1)))
    h.recv(99, _vote(MAX_EPOCH, cand=99))
    for _ in range(5):
        for p in of(h.tick(), PersistElectionState):
            encode_quorum_state(p.state)  # everything persisted stays encodable
    assert h.view.epoch < 10


def test_out_of_bounds_is_none_for_ordinary_messages() -> None:
    assert out_of_bounds(_vote(5, last_epoch=4, end=100)) is None
    assert out_of_bounds(_fetch()) is None
    reader = FetchRequest(
        CLUSTER, ReplicaKey(NodeId(-1)), Epoch(1), Offset(0), Epoch(0), Offset(-1)
    )
    assert out_of_bounds(reader) is None
    unknown = FetchResponse(
        ErrorCode.NOT_LEADER_OR_FOLLOWER, NodeId(-1), Epoch(-1), Offset(-1), Offset(-1)
    )
    assert out_of_bounds(unknown) is None
    assert out_of_bounds(_fetch(fetch_offset=MAX_OFFSET)) is None


def test_quorum_state_refuses_to_store_what_it_could_not_read_back(tmp_path: Path) -> None:
    path = tmp_path / "quorum-state"
    with pytest.raises(QuorumStateError):
        write_quorum_state(path, ElectionState(Epoch(MAX_EPOCH + 1)))
    assert not path.exists()
    with pytest.raises(QuorumStateError):
        encode_quorum_state(ElectionState(Epoch(1), leader_id=NodeId(2**31)))
    with pytest.raises(QuorumStateError):
        decode_quorum_state(
            '{"leaderId":-1,"leaderEpoch":2147483648,"votedId":-1,'
            '"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}'
        )


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize(
    "state",
    [
        ElectionState(Epoch(MAX_EPOCH)),
        ElectionState(Epoch(MAX_EPOCH), leader_id=NodeId(3)),
        ElectionState(Epoch(MAX_EPOCH), voted_for=ReplicaKey(NodeId(2))),
        ElectionState(Epoch(0)),
    ],
)
def test_a_node_starts_from_any_quorum_state_it_wrote(
    tmp_path: Path, version: int, state: ElectionState
) -> None:
    path = tmp_path / "quorum-state"
    write_quorum_state(path, state, version=version)
    stored = read_quorum_state(path)
    assert stored == state
    h = Harness(election=stored)
    assert h.view.epoch == state.epoch
    for _ in range(3):
        for p in of(h.tick(), PersistElectionState):
            write_quorum_state(path, p.state, version=version)
