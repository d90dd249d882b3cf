"""The simulator's adversary (see refinement.sim_base for the layers): under a `NAME+adversary`
profile, forged requests and responses reach running replicas, and Fetch answers are
corrupted on the wire; the checkers of refinement.invariants_input say what must happen.

The network of the other layers only loses, duplicates, delays and partitions well-formed
messages. A real node also receives what no correct peer sends: a frame from a peer with a
bug or from something that is not a peer at all, carrying an epoch or offset outside what the
wire and the quorum-state hold, an epoch from the future, the wrong cluster id, a request
claiming to come from the leader itself or naming another replica, a Fetch past the end of
the leader's log or from an epoch the leader never had, a message from a node nobody knows.
Kafka rejects each of these with a protocol error and moves nothing; so must the core.

At the profile's `adversary_rate` a forgery is built against a running replica's state from a
catalogue (`CATALOGUE`, walked in a seeded order so that every kind comes up within a run) and
handed to the replica as one event. The answer of a forged request goes to the forger (it is
captured, never delivered to the node whose id it claimed), and is checked:
RejectionErrorCode (the error code Kafka answers with), OutOfBoundsRefused (the bounds check
refuses exactly the values outside the bounds), RejectedMessageChangesNothing (the replica's
quorum-state, role, log, log start and HWM did not move). Every invariant of the other layers
is checked after the event as after any other.

`corrupt_fetch` flips one byte that a batch's CRC covers in a Fetch answer carrying records: the
follower must not append it (the simulated log refuses a batch whose CRC fails: EffectRejected).
Forged answers in the leader's name carry batches each well formed that cannot extend the
follower's log (an epoch past its own or back before its log's last, a base offset other than
its log end, gaps and overlaps between batches): refused whole, quietly (no timer moves either).
A Fetch answer in the leader's name that names a past epoch (as one delayed across the leader's
re-election would) is dropped as no longer relevant, whatever it carries.
A stranger's vote request of the next epoch reaches leaders, now and then one that just held a
Fetch, so that the answers of a step-down are checked (refinement.invariants_effects).
GrantedVoteIsDurable and GrantedVoteLogUpToDate are checked on every granted vote under
every profile, VoteAnswerPerState on every vote answer (they draw nothing, so traces are
unchanged).
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

from kraft.core.effects import Effect, MessageRefused
from kraft.core.events import Event, Receive
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
    Request,
    VoteRequest,
    VoteResponse,
)
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import (
    MAX_EPOCH,
    MAX_NODE_ID,
    MAX_OFFSET,
    ClusterId,
    DirectoryId,
    Epoch,
    NodeId,
    Offset,
    OffsetAndEpoch,
    ReplicaKey,
)
from kraft.records import encode_records, iter_batches
from refinement import invariants_input as inp
from refinement.invariants_input import Forgery, KeptState
from refinement.invariants_snapshot_transfer import KAFKA_FETCH_SNAPSHOT_MAX_BYTES
from refinement.sim_base import _FAULT, _REQUEST_MESSAGES, _RESPONSE_TYPES, _Node
from refinement.sim_liveness import SimLiveness

if TYPE_CHECKING:
    from refinement.sim_config import ReplicaFactory, SimConfig, SimResult

# The fault kind of refinement.sim_faults' dispatch.
ADVERSARY = "adversary"
ADVERSARY_AIMED = "adversary-aimed"  # a forgery aimed at a replica in a passing state

# How often a leader that just held a Fetch gets a stranger's vote request of the next epoch.
_HOLDING_LEADER_AIM = 0.15

# A node id no replica has: the forger that is nobody's peer.
STRANGER = NodeId(97)
_STRANGER_KEY = ReplicaKey(STRANGER, DirectoryId(uuid.UUID(int=0xBAD)))

U = ReplicaState.UNATTACHED
V = ReplicaState.VOTED
P = ReplicaState.PROSPECTIVE
F = ReplicaState.FOLLOWER
L = ReplicaState.LEADER
R = ReplicaState.RESIGNED

_INVALID = frozenset({ErrorCode.INVALID_REQUEST})
_CLUSTER = frozenset({ErrorCode.INCONSISTENT_CLUSTER_ID})
_FENCED = frozenset({ErrorCode.FENCED_LEADER_EPOCH})

# The largest epoch a message may carry (kraft.core.bounds: one an election can still bump).
_TOP_EPOCH = Epoch(MAX_EPOCH - 1)


@dataclass(frozen=True, slots=True)
class Target:
    """The replica a forgery is aimed at, as the forger sees it."""

    key: ReplicaKey
    state: ReplicaState
    epoch: Epoch
    leader_id: NodeId | None
    end_offset: Offset
    last_epoch: Epoch
    epochs: tuple[Epoch, ...]  # the epochs its log holds records of
    epoch_starts: tuple[tuple[Epoch, Offset], ...]  # (epoch, its first offset), in order
    high_watermark: Offset | None
    log_start: Offset
    cluster_id: ClusterId
    peers: tuple[ReplicaKey, ...]  # the other replicas
    wrong_cluster: ClusterId
    # The epoch of the oldest snapshot it holds (None: none).
    earliest_snapshot_epoch: Epoch | None = None

    @property
    def peer(self) -> ReplicaKey:
        return self.peers[0]


Forger = Callable[[Target, random.Random], Forgery | None]


def _other_dir(key: ReplicaKey) -> ReplicaKey:
    return ReplicaKey(key.id, DirectoryId(uuid.UUID(int=key.directory_id.int ^ 0xF00D)))


# ---------------------------------------------------------------- out of bounds, and at the edge

# (field, value outside the bounds, value at their edge) per field of each message. The edge
# values of a message are all sent together (one forgery at the low edge, one at the high).


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low_bad: int
    high_bad: int | None
    low_edge: int
    high_edge: int | None


def _epoch_field(name: str, *, unknown: bool = False, high: bool = True) -> _Field:
    low = -1 if unknown else 0
    return _Field(name, low - 1, MAX_EPOCH, low, _TOP_EPOCH if high else None)


def _offset_field(name: str, *, unknown: bool = False) -> _Field:
    low = -1 if unknown else 0
    return _Field(name, low - 1, MAX_OFFSET + 1, low, MAX_OFFSET)


def _node_field(name: str, *, none: bool = False) -> _Field:
    low = -1 if none else 0
    return _Field(name, low - 1, MAX_NODE_ID + 1, low, MAX_NODE_ID)


def _size_field(name: str) -> _Field:
    return _Field(name, -1, None, 0, None)


Values = dict[str, int]
Builder = Callable[[Target, Values], Message]


def _vote_request(t: Target, v: Values) -> Message:
    return VoteRequest(
        cluster_id=t.wrong_cluster,
        candidate=ReplicaKey(NodeId(v.get("candidate.id", t.peer.id)), t.peer.directory_id),
        candidate_epoch=Epoch(v.get("candidate_epoch", t.epoch + 1)),
        last_epoch=Epoch(v.get("last_epoch", t.last_epoch)),
        last_end_offset=Offset(v.get("last_end_offset", t.end_offset)),
        voter=ReplicaKey(NodeId(v.get("voter.id", t.key.id)), t.key.directory_id),
    )


def _fetch_request(t: Target, v: Values) -> Message:
    return FetchRequest(
        cluster_id=t.wrong_cluster,
        replica=ReplicaKey(NodeId(v.get("replica.id", t.peer.id)), t.peer.directory_id),
        replica_epoch=Epoch(v.get("replica_epoch", t.epoch)),
        fetch_offset=Offset(v.get("fetch_offset", 0)),
        last_fetched_epoch=Epoch(v.get("last_fetched_epoch", 0)),
        log_start_offset=Offset(v.get("log_start_offset", 0)),
        max_bytes=v.get("max_bytes", 1024),
        max_wait_ms=v.get("max_wait_ms", 0),
    )


def _begin_request(t: Target, v: Values) -> Message:
    return BeginQuorumEpochRequest(
        cluster_id=t.wrong_cluster,
        leader_id=NodeId(v.get("leader_id", t.peer.id)),
        leader_epoch=Epoch(v.get("leader_epoch", t.epoch + 1)),
        voter=ReplicaKey(NodeId(v.get("voter.id", t.key.id)), t.key.directory_id),
    )


def _end_request(t: Target, v: Values) -> Message:
    return EndQuorumEpochRequest(
        cluster_id=t.wrong_cluster,
        leader_id=NodeId(v.get("leader_id", t.peer.id)),
        leader_epoch=Epoch(v.get("leader_epoch", t.epoch + 1)),
        preferred_successors=(NodeId(v.get("preferred_successor", t.key.id)),),
    )


def _fetch_snapshot_request(t: Target, v: Values) -> Message:
    return FetchSnapshotRequest(
        cluster_id=t.wrong_cluster,
        replica=ReplicaKey(NodeId(v.get("replica.id", t.peer.id)), t.peer.directory_id),
        replica_epoch=Epoch(v.get("replica_epoch", t.epoch)),
        snapshot_id=OffsetAndEpoch(
            epoch=Epoch(v.get("snapshot_id.epoch", 1)),
            offset=Offset(v.get("snapshot_id.end_offset", 1)),
        ),
        position=v.get("position", 0),
        max_bytes=KAFKA_FETCH_SNAPSHOT_MAX_BYTES,
    )


# Responses are forged as harmless ones: epoch unknown (-1), so that no handler acts on them
# whatever else they carry; only the bounds check tells them apart.


def _vote_response(_t: Target, v: Values) -> Message:
    return VoteResponse(
        ErrorCode.NONE, NodeId(v.get("leader_id", -1)), Epoch(v.get("leader_epoch", -1)), False
    )


def _begin_response(_t: Target, v: Values) -> Message:
    return BeginQuorumEpochResponse(
        ErrorCode.NONE, NodeId(v.get("leader_id", -1)), Epoch(v.get("leader_epoch", -1))
    )


def _end_response(_t: Target, v: Values) -> Message:
    return EndQuorumEpochResponse(
        ErrorCode.NONE, NodeId(v.get("leader_id", -1)), Epoch(v.get("leader_epoch", -1))
    )


def _fetch_response(_t: Target, v: Values) -> Message:
    return FetchResponse(
        ErrorCode.NONE,
        NodeId(v.get("leader_id", -1)),
        Epoch(v.get("leader_epoch", -1)),
        Offset(v.get("high_watermark", -1)),
        Offset(v.get("log_start_offset", -1)),
        diverging_epoch=OffsetAndEpoch(
            epoch=Epoch(v.get("diverging_epoch.epoch", -1)),
            offset=Offset(v.get("diverging_epoch.end_offset", -1)),
        ),
        snapshot_id=OffsetAndEpoch(
            epoch=Epoch(v.get("snapshot_id.epoch", -1)),
            offset=Offset(v.get("snapshot_id.end_offset", -1)),
        ),
    )


def _fetch_snapshot_response(_t: Target, v: Values) -> Message:
    return FetchSnapshotResponse(
        ErrorCode.NONE,
        NodeId(v.get("leader_id", -1)),
        Epoch(v.get("leader_epoch", -1)),
        OffsetAndEpoch(
            epoch=Epoch(v.get("snapshot_id.epoch", -1)),
            offset=Offset(v.get("snapshot_id.end_offset", -1)),
        ),
        size=v.get("size", 0),
        position=v.get("position", 0),
    )


# The leader and epoch every answer names, with the same bounds in each.
_ANSWER_LEADER: tuple[_Field, ...] = (
    _node_field("leader_id", none=True),
    _epoch_field("leader_epoch", unknown=True, high=False),
)

_BOUNDED: tuple[tuple[str, Builder, bool, tuple[_Field, ...]], ...] = (
    (
        "VoteRequest",
        _vote_request,
        True,
        (
            _node_field("candidate.id"),
            _epoch_field("candidate_epoch"),
            _epoch_field("last_epoch"),
            _offset_field("last_end_offset"),
            _node_field("voter.id"),
        ),
    ),
    (
        "FetchRequest",
        _fetch_request,
        True,
        (
            _node_field("replica.id", none=True),
            _epoch_field("replica_epoch"),
            _offset_field("fetch_offset"),
            _epoch_field("last_fetched_epoch"),
            _offset_field("log_start_offset", unknown=True),
            _size_field("max_bytes"),
            _size_field("max_wait_ms"),
        ),
    ),
    (
        "BeginQuorumEpochRequest",
        _begin_request,
        True,
        (_node_field("leader_id"), _epoch_field("leader_epoch"), _node_field("voter.id")),
    ),
    (
        "EndQuorumEpochRequest",
        _end_request,
        True,
        (
            _node_field("leader_id"),
            _epoch_field("leader_epoch"),
            _node_field("preferred_successor"),
        ),
    ),
    (
        "FetchSnapshotRequest",
        _fetch_snapshot_request,
        True,
        (
            _node_field("replica.id", none=True),
            _epoch_field("replica_epoch"),
            _epoch_field("snapshot_id.epoch"),
            _offset_field("snapshot_id.end_offset"),
            _size_field("position"),
        ),
    ),
    (
        "VoteResponse",
        _vote_response,
        False,
        _ANSWER_LEADER,
    ),
    (
        "BeginQuorumEpochResponse",
        _begin_response,
        False,
        _ANSWER_LEADER,
    ),
    (
        "EndQuorumEpochResponse",
        _end_response,
        False,
        _ANSWER_LEADER,
    ),
    (
        "FetchResponse",
        _fetch_response,
        False,
        (
            *_ANSWER_LEADER,
            _offset_field("high_watermark", unknown=True),
            _offset_field("log_start_offset", unknown=True),
            _epoch_field("diverging_epoch.epoch", unknown=True),
            _offset_field("diverging_epoch.end_offset", unknown=True),
            _epoch_field("snapshot_id.epoch", unknown=True),
            _offset_field("snapshot_id.end_offset", unknown=True),
        ),
    ),
    (
        "FetchSnapshotResponse",
        _fetch_snapshot_response,
        False,
        (
            *_ANSWER_LEADER,
            _epoch_field("snapshot_id.epoch", unknown=True),
            _offset_field("snapshot_id.end_offset", unknown=True),
            _size_field("size"),
            _size_field("position"),
        ),
    ),
)


def _bad(name: str, build: Builder, request: bool, field: str, value: int) -> Forger:
    def forge(t: Target, _rng: random.Random) -> Forgery:
        src = t.peer.id if request else STRANGER
        return Forgery(
            f"{name}.{field}={value}",
            src,
            build(t, {field: value}),
            _INVALID if request else None,
            out_of_bounds=True,
            rejected=True,
        )

    return forge


def _edge(name: str, build: Builder, request: bool, values: Values, which: str) -> Forger:
    def forge(t: Target, _rng: random.Random) -> Forgery:
        # A request at the edge of every bound passes the bounds check and is rejected next,
        # for the wrong cluster id; a response at the edge reaches its handler harmlessly.
        src = t.peer.id if request else STRANGER
        return Forgery(
            f"{name} at the {which} edge",
            src,
            build(t, values),
            _CLUSTER if request else None,
            out_of_bounds=False,
            rejected=True,
        )

    return forge


def _bounds_forgers() -> list[tuple[str, Forger]]:
    out: list[tuple[str, Forger]] = []
    for name, build, request, fields in _BOUNDED:
        for f in fields:
            out.append((f"{name}.{f.name}<", _bad(name, build, request, f.name, f.low_bad)))
            if f.high_bad is not None:
                out.append((f"{name}.{f.name}>", _bad(name, build, request, f.name, f.high_bad)))
        low = {f.name: f.low_edge for f in fields}
        high = {f.name: f.high_edge for f in fields if f.high_edge is not None}
        out.append((f"{name}@low", _edge(name, build, request, low, "low")))
        out.append((f"{name}@high", _edge(name, build, request, high, "high")))
    return out


# ---------------------------------------------------------------- well-formed, and wrong


def _forgery(
    kind: str,
    src: NodeId,
    msg: Message,
    expect: frozenset[ErrorCode] | None,
    *,
    rejected: bool = True,
    diverging: bool = False,
    quiet: bool = False,
) -> Forgery:
    return Forgery(kind, src, msg, expect, False, rejected, diverging, quiet)


def _vote_wrong_cluster(t: Target, rng: random.Random) -> Forgery:
    """A vote request from another cluster, in a later epoch: refused, our epoch stays. The
    cluster id is checked first (Kafka's order), so a request also malformed otherwise (its
    log epoch not below its epoch) gets the same answer."""
    epoch = Epoch(t.epoch + 1)
    last = epoch if rng.random() < 0.5 else t.last_epoch
    msg = VoteRequest(t.wrong_cluster, t.peer, epoch, last, t.end_offset)
    return _forgery("VoteRequest from another cluster", t.peer.id, msg, _CLUSTER)


def _vote_log_epoch_not_below(t: Target, rng: random.Random) -> Forgery:
    """A candidate's last log epoch at or past the epoch it stands in (a real candidate bumped
    its epoch past its log's; a prospective's log epoch is at most its epoch)."""
    epoch = Epoch(t.epoch + 1 + int(rng.random() * 3))
    pre = rng.random() < 0.5
    last = Epoch(epoch + 1 if pre else epoch)
    msg = VoteRequest(
        t.cluster_id, t.peer, epoch, last, Offset(t.end_offset + 1), t.key, pre_vote=pre
    )
    return _forgery("VoteRequest with its log epoch past its epoch", t.peer.id, msg, _INVALID)


def _vote_stale(t: Target, _rng: random.Random) -> Forgery | None:
    if t.epoch < 2:
        return None
    msg = VoteRequest(t.cluster_id, t.peer, Epoch(t.epoch - 1), Epoch(0), t.end_offset, t.key)
    return _forgery("VoteRequest of a past epoch", t.peer.id, msg, _FENCED)


def _vote_other_voter(t: Target, rng: random.Random) -> Forgery | None:
    """KIP-853: a vote request in our epoch meant for another replica key (our id with another
    directory, or another id) gets INVALID_VOTER_KEY and no vote."""
    if t.epoch < 1:
        return None  # a candidate's log epoch is below its epoch: none in epoch 0
    meant = _other_dir(t.key) if rng.random() < 0.5 else t.peer
    msg = VoteRequest(t.cluster_id, _STRANGER_KEY, t.epoch, Epoch(0), Offset(MAX_OFFSET), meant)
    return _forgery(
        "VoteRequest for another voter key",
        STRANGER,
        msg,
        frozenset({ErrorCode.INVALID_VOTER_KEY}),
    )


def _vote_from_stranger(t: Target, _rng: random.Random) -> Forgery | None:
    """A well-formed vote request in our epoch from a node nobody knows, with a log as long as
    ours: any replica may grant it (KIP-853); a vote granted must be persisted first
    (GrantedVoteIsDurable), and nothing else is prescribed."""
    if t.last_epoch >= t.epoch or t.state not in (U, V, P):
        return None
    msg = VoteRequest(t.cluster_id, _STRANGER_KEY, t.epoch, t.last_epoch, t.end_offset, t.key)
    return _forgery(
        "VoteRequest from an unknown node",
        STRANGER,
        msg,
        frozenset({ErrorCode.NONE}),
        rejected=False,
    )


def _vote_to_holding_leader(t: Target, _rng: random.Random) -> Forgery | None:
    """A well-formed vote request in the next epoch from a node nobody knows, to a leader (and
    now and then aimed at one that just held a Fetch, KIP-595's long poll): the leader steps
    down, answers what it holds with the new epoch, and answers the vote request, each answer
    to its own request (refinement.invariants_effects: ResponseAnswersItsRequest,
    RequestAnswered). Any replica may grant such a vote (KIP-853); whether this one does is
    not prescribed."""
    if t.state is not L or t.epoch + 1 > _TOP_EPOCH:
        return None
    msg = VoteRequest(
        t.cluster_id, _STRANGER_KEY, Epoch(t.epoch + 1), t.last_epoch, t.end_offset, t.key
    )
    return _forgery(
        "VoteRequest of the next epoch to a leader",
        STRANGER,
        msg,
        frozenset({ErrorCode.NONE}),
        rejected=False,
    )


def _any_epoch(t: Target, rng: random.Random) -> Epoch:
    """A past, the current or a future epoch: a request from another cluster is refused for
    that before its epoch is looked at (Kafka's order)."""
    return Epoch(max(0, t.epoch + int(rng.random() * 3) - 1))


def _begin_wrong_cluster(t: Target, rng: random.Random) -> Forgery:
    leader = t.key.id if rng.random() < 0.3 else t.peer.id
    msg = BeginQuorumEpochRequest(t.wrong_cluster, leader, _any_epoch(t, rng), t.key)
    return _forgery("BeginQuorumEpochRequest from another cluster", t.peer.id, msg, _CLUSTER)


def _begin_from_myself(t: Target, _rng: random.Random) -> Forgery:
    """A BeginQuorumEpoch naming the receiver itself as the leader of a later epoch."""
    msg = BeginQuorumEpochRequest(t.cluster_id, t.key.id, Epoch(t.epoch + 1), t.key)
    return _forgery("BeginQuorumEpochRequest naming us leader", t.peer.id, msg, _INVALID)


def _begin_stale(t: Target, _rng: random.Random) -> Forgery | None:
    if t.epoch < 2:
        return None
    msg = BeginQuorumEpochRequest(t.cluster_id, t.peer.id, Epoch(t.epoch - 1), t.key)
    return _forgery("BeginQuorumEpochRequest of a past epoch", t.peer.id, msg, _FENCED)


def _begin_second_leader(t: Target, _rng: random.Random) -> Forgery | None:
    """A second leader claimed for our epoch, whose leader we know: a conflict (KIP-595)."""
    known = t.leader_id
    if known is None:
        return None
    other = next((p.id for p in t.peers if p.id != known), None)
    if other is None:
        return None
    msg = BeginQuorumEpochRequest(t.cluster_id, other, t.epoch, t.key)
    return _forgery("BeginQuorumEpochRequest of a second leader", other, msg, _INVALID)


def _begin_other_voter(t: Target, _rng: random.Random) -> Forgery | None:
    """KIP-853: from our epoch's leader, but meant for another directory of our id."""
    if t.leader_id is None or t.leader_id == t.key.id or t.state is not F:
        return None
    msg = BeginQuorumEpochRequest(t.cluster_id, t.leader_id, t.epoch, _other_dir(t.key))
    return _forgery(
        "BeginQuorumEpochRequest for another voter key",
        t.leader_id,
        msg,
        frozenset({ErrorCode.INVALID_VOTER_KEY}),
    )


def _end_wrong_cluster(t: Target, rng: random.Random) -> Forgery:
    successors = (t.key.id,) if rng.random() < 0.7 else (t.peer.id,)
    msg = EndQuorumEpochRequest(t.wrong_cluster, t.peer.id, _any_epoch(t, rng), successors)
    return _forgery("EndQuorumEpochRequest from another cluster", t.peer.id, msg, _CLUSTER)


def _end_stale(t: Target, _rng: random.Random) -> Forgery | None:
    if t.epoch < 2:
        return None
    msg = EndQuorumEpochRequest(t.cluster_id, t.peer.id, Epoch(t.epoch - 1), (t.key.id,))
    return _forgery("EndQuorumEpochRequest of a past epoch", t.peer.id, msg, _FENCED)


def _end_not_successor(t: Target, _rng: random.Random) -> Forgery | None:
    """Our leader resigning in our epoch without naming us among its successors."""
    if t.leader_id is None or t.leader_id == t.key.id or t.state is not F:
        return None
    msg = EndQuorumEpochRequest(t.cluster_id, t.leader_id, t.epoch, (t.leader_id,))
    return _forgery(
        "EndQuorumEpochRequest not naming us",
        t.leader_id,
        msg,
        frozenset({ErrorCode.INCONSISTENT_VOTER_SET}),
    )


def _end_second_leader(t: Target, _rng: random.Random) -> Forgery | None:
    """Another replica resigning as the leader of our epoch, naming us its first successor,
    while we follow the leader we know of that epoch. Only our own leader's resignation
    makes a follower stand early (KIP-595; Kafka 4.3.1's handleEndQuorumEpochRequest
    overrides the fetch timeout only when `FollowerState.leaderId()` is the request's
    leader; its maybeTransition first throws IllegalStateException on the inconsistent
    leader, so Kafka prescribes no answer). Nothing moves, the fetch timer included."""
    known = t.leader_id
    if known is None or known == t.key.id or t.state is not F:
        return None
    other = next((p.id for p in t.peers if p.id not in (known, t.key.id)), None)
    if other is None:
        return None
    msg = EndQuorumEpochRequest(t.cluster_id, other, t.epoch, (t.key.id,))
    return _forgery("EndQuorumEpochRequest of a second leader", other, msg, None, quiet=True)


def _end_of_ourselves(t: Target, _rng: random.Random) -> Forgery | None:
    """Our own resignation, as the leader of our epoch, naming us its successor, sent to us
    while we lead or have resigned. Only a Follower of the resigning leader reacts (Kafka
    4.3.1's handleEndQuorumEpochRequest overrides a FollowerState's fetch timeout, nothing
    else): a leader sets no timer and stands for nothing."""
    if t.state not in (L, R) or t.leader_id != t.key.id:
        return None
    msg = EndQuorumEpochRequest(t.cluster_id, t.key.id, t.epoch, (t.key.id,))
    return _forgery("EndQuorumEpochRequest of ourselves", t.peer.id, msg, None, quiet=True)


def _fetch(t: Target, **kw: int) -> FetchRequest:
    return FetchRequest(
        cluster_id=ClusterId(t.cluster_id),
        replica=t.peer,
        replica_epoch=Epoch(kw.get("epoch", t.epoch)),
        fetch_offset=Offset(kw.get("offset", 0)),
        last_fetched_epoch=Epoch(kw.get("last", 0)),
        log_start_offset=Offset(0),
        max_bytes=1024,
        max_wait_ms=0,
    )


def _fetch_wrong_cluster(t: Target, rng: random.Random) -> Forgery:
    """The cluster id first (Kafka's order): also when its last epoch is past its epoch."""
    last = t.epoch + 1 if rng.random() < 0.5 else 0
    msg = dataclasses.replace(
        _fetch(t, last=last, epoch=_any_epoch(t, rng)), cluster_id=t.wrong_cluster
    )
    return _forgery("FetchRequest from another cluster", t.peer.id, msg, _CLUSTER)


def _fetch_last_epoch_ahead(t: Target, _rng: random.Random) -> Forgery:
    """A fetcher whose last fetched epoch is past the epoch it fetches in."""
    msg = _fetch(t, last=t.epoch + 1, offset=t.end_offset)
    return _forgery("FetchRequest with its last epoch ahead", t.peer.id, msg, _INVALID)


def _fetch_future_epoch(t: Target, _rng: random.Random) -> Forgery:
    msg = _fetch(t, epoch=t.epoch + 1)
    return _forgery(
        "FetchRequest of a future epoch",
        t.peer.id,
        msg,
        frozenset({ErrorCode.UNKNOWN_LEADER_EPOCH}),
    )


def _fetch_stale(t: Target, _rng: random.Random) -> Forgery | None:
    if t.epoch < 2:
        return None
    msg = _fetch(t, epoch=t.epoch - 1)
    return _forgery("FetchRequest of a past epoch", t.peer.id, msg, _FENCED)


def _fetch_not_leader(t: Target, _rng: random.Random) -> Forgery | None:
    if t.state is L:
        return None
    msg = _fetch(t)
    return _forgery(
        "FetchRequest to a non-leader",
        t.peer.id,
        msg,
        frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER}),
    )


def _fetch_past_end(t: Target, rng: random.Random) -> Forgery | None:
    """A voter's key claiming a fetch offset past the leader's log end in its last epoch: the
    leader answers with where its log ends for that epoch, and counts nothing (its HWM and
    everything else stay)."""
    if t.state is not L or not t.epochs:
        return None
    last = t.epochs[-1]
    msg = _fetch(t, offset=t.end_offset + 1 + int(rng.random() * 1000), last=last)
    return _forgery("FetchRequest past the log end", t.peer.id, msg, None, diverging=True)


def _fetch_unknown_epoch(t: Target, rng: random.Random) -> Forgery | None:
    """A voter's key claiming to have fetched up to our log end in an epoch our log never
    had: the leader answers with a diverging epoch and counts nothing."""
    if t.state is not L:
        return None
    if not t.epochs:
        return None
    # Below the log's first epoch a fetcher with no records of it is consistent (Kafka's
    # endOffsetFor answers the requested epoch itself there): only gaps above it diverge.
    missing = [e for e in range(t.epochs[0] + 1, t.epoch) if e not in t.epochs]
    if not missing:
        return None
    e = missing[int(rng.random() * len(missing))]
    # At where our log ends for the largest epoch below `e` (there the fetch offset alone does
    # not give it away: only the epoch does), else at our end.
    offset = t.end_offset
    later = [start for epoch, start in t.epoch_starts if epoch > e]
    if later and later[0] >= t.log_start:
        offset = later[0]
    msg = _fetch(t, offset=offset, last=e)
    return _forgery(
        "FetchRequest from an epoch the log never had", t.peer.id, msg, None, diverging=True
    )


def _fetch_impostor(t: Target, _rng: random.Random) -> Forgery | None:
    """A Fetch with a voter's id but another directory id, claiming the leader's whole log: an
    observer to the leader (KIP-853), which must not count it towards the HWM (the safety
    invariants say whether it did: MajorityReachedHighWatermark)."""
    if t.state is not L or not t.epochs:
        return None
    msg = dataclasses.replace(
        _fetch(t, offset=t.end_offset, last=t.epochs[-1]), replica=_other_dir(t.peer)
    )
    return _forgery(
        "FetchRequest from a voter id with another directory",
        t.peer.id,
        msg,
        frozenset({ErrorCode.NONE}),
        rejected=False,
    )


def _fetch_at_log_start(t: Target, rng: random.Random) -> Forgery | None:
    """A Fetch at the leader's log start (a snapshot's end) after an epoch drawn up to the
    leader's, mostly one past the earliest snapshot's, from an observer (a voter's id with another
    directory, so that no HWM counts it): Kafka answers the latest snapshot's id unless the
    epoch is the earliest snapshot's (validateOffsetAndEpoch), which FetchAnswerPosition
    checks. An honest fetcher at the log start has the snapshot's epoch, or an older one."""
    if t.state is not L or t.log_start <= 0 or t.epoch < 1:
        return None
    oldest = t.earliest_snapshot_epoch
    if oldest is not None and oldest < t.epoch and rng.random() < 0.75:
        # Past the earliest snapshot's epoch: only the log start rule names the snapshot.
        last = oldest + 1 + int(rng.random() * (t.epoch - oldest))
    else:
        last = 1 + int(rng.random() * t.epoch)
    msg = dataclasses.replace(_fetch(t, offset=t.log_start, last=last), replica=_other_dir(t.peer))
    return _forgery(
        "FetchRequest at the log start in a drawn epoch", t.peer.id, msg, None, rejected=False
    )


def _fetch_snapshot_wrong_cluster(t: Target, rng: random.Random) -> Forgery:
    msg = FetchSnapshotRequest(
        t.wrong_cluster,
        t.peer,
        _any_epoch(t, rng),
        OffsetAndEpoch(epoch=Epoch(1), offset=Offset(1)),
        0,
        max_bytes=KAFKA_FETCH_SNAPSHOT_MAX_BYTES,
    )
    return _forgery("FetchSnapshotRequest from another cluster", t.peer.id, msg, _CLUSTER)


def _fetch_snapshot_future(t: Target, _rng: random.Random) -> Forgery:
    msg = FetchSnapshotRequest(
        t.cluster_id,
        t.peer,
        Epoch(t.epoch + 1),
        OffsetAndEpoch(epoch=Epoch(1), offset=Offset(1)),
        0,
        max_bytes=KAFKA_FETCH_SNAPSHOT_MAX_BYTES,
    )
    return _forgery(
        "FetchSnapshotRequest of a future epoch",
        t.peer.id,
        msg,
        frozenset({ErrorCode.UNKNOWN_LEADER_EPOCH}),
    )


def _fetch_answer_from_non_leader(t: Target, rng: random.Random) -> Forgery | None:
    """A Fetch answer in our epoch, naming our leader, but sent by another replica: Kafka
    handles only the answer it expects from the node it fetched from. Moving the HWM to our
    log end, or truncating to our HWM, it must move nothing."""
    if t.state is not F or t.leader_id is None:
        return None
    others = [p.id for p in t.peers if p.id != t.leader_id]
    if not others:
        return None
    src = others[int(rng.random() * len(others))]
    hwm = t.high_watermark if t.high_watermark is not None else Offset(0)
    diverging = None
    if rng.random() < 0.5:
        diverging = OffsetAndEpoch(epoch=t.last_epoch, offset=Offset(max(hwm, t.log_start)))
    msg = FetchResponse(
        ErrorCode.NONE,
        t.leader_id,
        t.epoch,
        high_watermark=t.end_offset,
        log_start_offset=Offset(-1),
        diverging_epoch=diverging,
    )
    return _forgery("FetchResponse from a replica that is not the leader", src, msg, None)


def _fetch_answer_past_epoch(t: Target, rng: random.Random) -> Forgery | None:
    """A Fetch answer from our leader naming an epoch below ours (an answer delayed across
    its re-election): Kafka's maybeHandleCommonResponse drops it as no longer relevant.
    Carrying records that would extend our log with a HWM past them, or a snapshot id, or a
    diverging epoch at our HWM, it must move nothing."""
    if t.state is not F or t.leader_id is None or t.leader_id == t.key.id or t.epoch < 1:
        return None
    end = int(t.end_offset)
    hwm = t.high_watermark if t.high_watermark is not None else Offset(0)
    records = b""
    diverging = snapshot = None
    draw = rng.random()
    if draw < 0.5:
        records = _batch(end, t.last_epoch, 1 + int(rng.random() * 2))
    elif draw < 0.75:
        snapshot = OffsetAndEpoch(epoch=Epoch(t.epoch - 1), offset=Offset(max(end, 1)))
    else:
        diverging = OffsetAndEpoch(epoch=t.last_epoch, offset=Offset(max(hwm, t.log_start)))
    msg = FetchResponse(
        ErrorCode.NONE,
        t.leader_id,
        Epoch(t.epoch - 1),
        high_watermark=Offset(end + 3),
        log_start_offset=Offset(-1),
        diverging_epoch=diverging,
        snapshot_id=snapshot,
        records=records,
    )
    return _forgery("FetchResponse of a past epoch from our leader", t.leader_id, msg, None)


def _batch(base: int, epoch: int, count: int) -> bytes:
    """A well-formed data batch (its CRC right) of `count` records at `base` in `epoch`."""
    values = [(None, b"forged-%d" % k) for k in range(count)]
    return encode_records(base, epoch, values, timestamp_ms=0)


# Fetch answers whose batches cannot extend the follower's log, each well formed (its CRC
# right): a batch of an epoch after ours (Kafka: an epoch past the leader's) or before our
# log's last (epochs never decrease along a log); a first batch past our log end, or back
# inside our log; a gap or an overlap between two batches.
_BAD_BATCHES = (
    "epoch-ahead",
    "epoch-back",
    "gap-first",
    "overlap-first",
    "gap-between",
    "overlap-between",
)


def _bad_batches(variant: str, t: Target, rng: random.Random) -> bytes | None:
    """The records of a variant of `_BAD_BATCHES` against `t` (None: it does not apply)."""
    end, ep = int(t.end_offset), int(t.epoch)
    if variant == "epoch-ahead":
        return _batch(end, ep + 1, 1 + int(rng.random() * 2))
    if variant == "epoch-back":
        return _batch(end, t.last_epoch - 1, 1) if t.last_epoch >= 1 else None
    if variant == "gap-first":
        return _batch(end + 1 + int(rng.random() * 3), ep, 1)
    if variant == "overlap-first":
        return _batch(end - 1, ep, 2) if end > t.log_start else None
    if variant == "gap-between":
        return _batch(end, ep, 2) + _batch(end + 3, ep, 1)
    return _batch(end, ep, 2) + _batch(end + 1, ep, 2)


def _fetch_answer_bad_batches(variant: str) -> Forger:
    """A Fetch answer from our leader in our epoch, naming our log end as its HWM, whose
    batches cannot extend our log (`_BAD_BATCHES`). Kafka's follower refuses such records
    (appendAsFollower: offsets out of order, an epoch past the leader's); the whole answer is
    refused, as a corrupt one: nothing appended, its HWM not taken, and no timer moved (no
    fetch timer restarted, no Fetch sent early: the follower waits for the answer to its own
    Fetch, or its timeout)."""

    def forge(t: Target, rng: random.Random) -> Forgery | None:
        if t.state is not F or t.leader_id is None or t.leader_id == t.key.id:
            return None
        data = _bad_batches(variant, t, rng)
        if data is None:
            return None
        msg = FetchResponse(
            ErrorCode.NONE,
            t.leader_id,
            t.epoch,
            high_watermark=t.end_offset,
            log_start_offset=Offset(-1),
            records=data,
        )
        return _forgery(
            f"FetchResponse with batches that cannot extend the log ({variant})",
            t.leader_id,
            msg,
            None,
            quiet=True,
        )

    return forge


_SEMANTIC: tuple[tuple[str, Forger], ...] = (
    ("fetch-answer-from-non-leader", _fetch_answer_from_non_leader),
    *((f"fetch-answer-{v}", _fetch_answer_bad_batches(v)) for v in _BAD_BATCHES),
    ("vote-wrong-cluster", _vote_wrong_cluster),
    ("vote-log-epoch-not-below", _vote_log_epoch_not_below),
    ("vote-stale", _vote_stale),
    ("vote-other-voter", _vote_other_voter),
    ("vote-from-stranger", _vote_from_stranger),
    ("vote-to-holding-leader", _vote_to_holding_leader),
    ("begin-wrong-cluster", _begin_wrong_cluster),
    ("begin-from-myself", _begin_from_myself),
    ("begin-stale", _begin_stale),
    ("begin-second-leader", _begin_second_leader),
    ("begin-other-voter", _begin_other_voter),
    ("end-wrong-cluster", _end_wrong_cluster),
    ("end-stale", _end_stale),
    ("end-not-successor", _end_not_successor),
    ("end-second-leader", _end_second_leader),
    ("end-of-ourselves", _end_of_ourselves),
    ("fetch-wrong-cluster", _fetch_wrong_cluster),
    ("fetch-last-epoch-ahead", _fetch_last_epoch_ahead),
    ("fetch-future-epoch", _fetch_future_epoch),
    ("fetch-stale", _fetch_stale),
    ("fetch-not-leader", _fetch_not_leader),
    ("fetch-past-end", _fetch_past_end),
    ("fetch-unknown-epoch", _fetch_unknown_epoch),
    ("fetch-impostor", _fetch_impostor),
    ("fetch-snapshot-wrong-cluster", _fetch_snapshot_wrong_cluster),
    ("fetch-snapshot-future", _fetch_snapshot_future),
    ("fetch-answer-past-epoch", _fetch_answer_past_epoch),
)

# Every kind of forgery, by name. A Fetch from an epoch the leader's log never had needs a
# leader whose log skips an epoch (one whose election appended nothing): it comes up four times
# a round so that it finds one; a Fetch past the leader's log end twice (it needs a leader).
CATALOGUE: tuple[tuple[str, Forger], ...] = (
    *_bounds_forgers(),
    *_SEMANTIC,
    *(("fetch-unknown-epoch", _fetch_unknown_epoch),) * 3,
    *(("fetch-answer-epoch-ahead", _fetch_answer_bad_batches("epoch-ahead")),) * 2,
    *(("fetch-answer-gap-first", _fetch_answer_bad_batches("gap-first")),) * 2,
    ("fetch-past-end", _fetch_past_end),
    # Only where logs start at snapshots (a `+snapshots` adversary profile): twice a round.
    *(("fetch-at-log-start", _fetch_at_log_start),) * 2,
)
# Kinds aimed at a state that only some replicas are in at a time: the forger picks such a
# replica when there is one.
_WANTS: dict[str, frozenset[ReplicaState]] = {
    "vote-from-stranger": frozenset({P, U, V}),
    "begin-second-leader": frozenset({F, L}),
    "begin-other-voter": frozenset({F}),
    "end-not-successor": frozenset({F}),
    "end-second-leader": frozenset({F}),
    "end-of-ourselves": frozenset({L, R}),
    "fetch-past-end": frozenset({L}),
    "fetch-unknown-epoch": frozenset({L}),
    "fetch-impostor": frozenset({L}),
    "fetch-at-log-start": frozenset({L}),
    "fetch-answer-from-non-leader": frozenset({F}),
    "fetch-answer-past-epoch": frozenset({F}),
    **{f"fetch-answer-{v}": frozenset({F}) for v in _BAD_BATCHES},
    "vote-to-holding-leader": frozenset({L}),
}


class SimAdversary(SimLiveness):
    """Forged and corrupted messages injected as the profile says, and their checkers."""

    def __init__(
        self,
        config: SimConfig,
        result: SimResult,
        replica_factory: ReplicaFactory,
        trace: IO[str] | None,
    ) -> None:
        super().__init__(config, result, replica_factory, trace)
        # The forger draws from its own generator: the other faults' draws stay as they were.
        self._adv_rng = random.Random(f"{config.seed}/adversary")
        order = list(range(len(CATALOGUE)))
        self._adv_rng.shuffle(order)
        self._adv_order = order
        self._adv_next = 0
        self._forging: Forgery | None = None
        self._forged_reply: Message | None = None
        self._forged_refused = False
        # The answer a replica gave to the VoteRequest being handled (VoteRecordedOnlyWhenGranted).
        self._vote_answer: VoteResponse | None = None
        # Replicas (and their incarnation) a forgery is aimed at, with the forger, in order.
        self._adv_aimed: list[tuple[_Node, int, Forger]] = []

    # ------------------------------------------------------------------ injection

    def _start_adversary(self) -> None:
        rate = self._profile.adversary_rate
        if rate > 0:
            self._push(self._exp_ms(rate), _FAULT, ADVERSARY)

    def _fault(self, kind: str) -> None:
        if kind == ADVERSARY:
            self._adversary_fault()
        elif kind == ADVERSARY_AIMED:
            self._forge_aimed()
        else:
            super()._fault(kind)

    def _adversary_fault(self) -> None:
        self._forge_one()
        self._push(self.now + self._exp_ms(self._profile.adversary_rate), _FAULT, ADVERSARY)

    def _targets(self) -> list[_Node]:
        return [n for n in self._nodes.values() if n.replica is not None and not n.shutting_down]

    def _forge_one(self) -> None:
        up = self._targets()
        if not up:
            return
        rng = self._adv_rng
        for _ in range(len(CATALOGUE)):
            name, forger = CATALOGUE[self._adv_order[self._adv_next]]
            self._adv_next = (self._adv_next + 1) % len(CATALOGUE)
            wants = _WANTS.get(name)
            pool = list(up)
            if wants is not None:
                pool = [n for n in up if n.replica is not None and n.replica.view().state in wants]
            rng.shuffle(pool)
            for victim in pool:
                forgery = forger(self._target(victim), rng)
                if forgery is not None:
                    self._inject(victim, forgery)
                    return

    def _after_step(
        self, node: _Node, event: Event | None, src_id: int | None, msg: Message | None
    ) -> None:
        was = node.snap.state
        start_was = node.snap.log_start_offset
        super()._after_step(node, event, src_id, msg)
        # A replica just became Prospective: now and then a stranger asks it for its vote in
        # that epoch at once (the state lasts one pre-vote round, too short to be hit at
        # random), so that what it does with a vote it may grant is checked.
        if (
            self._profile.adversary_rate > 0
            and not self._liveness
            and node.snap.state is P
            and was is not P
            and self._adv_rng.random() < 0.5
        ):
            self._adv_aimed.append((node, node.inc, _vote_from_stranger))
            self._push(self.now, _FAULT, ADVERSARY_AIMED)
        # A leader just held a Fetch: now and then a stranger's vote request of the next epoch
        # makes it step down at once, with the Fetch held (a leader rarely steps down then
        # otherwise: a higher epoch reaches it when it is cut off from its followers).
        elif (
            self._profile.adversary_rate > 0
            and not self._liveness
            and isinstance(msg, FetchRequest)
            and node.snap.state is L
            and self._ledger.holds_request(node.id)
            and self._adv_rng.random() < _HOLDING_LEADER_AIM
        ):
            self._adv_aimed.append((node, node.inc, _vote_to_holding_leader))
            self._push(self.now, _FAULT, ADVERSARY_AIMED)
        # A leader whose log starts at a snapshot just took office or moved its log start:
        # now and then a Fetch at its log start in a later epoch than the earliest snapshot's
        # (no honest fetcher has one; only KIP-630's log start rule answers it with the
        # snapshot: FetchAnswerPosition).
        elif (
            self._profile.adversary_rate > 0
            and not self._liveness
            and node.snap.state is L
            and node.snap.log_start_offset > 0
            and (was is not L or node.snap.log_start_offset != start_was)
            and self._adv_rng.random() < 0.5
        ):
            self._adv_aimed.append((node, node.inc, _fetch_at_log_start))
            self._push(self.now, _FAULT, ADVERSARY_AIMED)

    def _forge_aimed(self) -> None:
        node, inc, forger = self._adv_aimed.pop(0)
        if node.replica is None or node.inc != inc or node.shutting_down:
            return
        forgery = forger(self._target(node), self._adv_rng)
        if forgery is not None:
            self._inject(node, forgery)

    def _target(self, node: _Node) -> Target:
        assert node.replica is not None
        v = node.replica.view()
        peers = tuple(n.key for n in self._nodes.values() if n.id != node.id)
        if not peers:
            peers = (_STRANGER_KEY,)
        entries = tuple(node.log.epoch_entries())
        epochs = tuple(e for e, _ in entries)
        held = self._held_snapshots(node)
        return Target(
            key=node.key,
            state=v.state,
            epoch=v.epoch,
            leader_id=v.leader_id,
            end_offset=v.end_offset,
            last_epoch=v.last_epoch,
            epochs=epochs,
            epoch_starts=entries,
            high_watermark=v.high_watermark,
            log_start=v.log_start_offset,
            cluster_id=ClusterId(self.config.cluster_id),
            peers=peers,
            wrong_cluster=ClusterId(self.config.cluster_id + "-forged"),
            earliest_snapshot_epoch=held[0].epoch if held else None,
        )

    def _kept(self, node: _Node) -> KeptState:
        assert node.replica is not None
        v = node.replica.view()
        log = node.log
        return KeptState(
            persisted=node.persisted,
            state=v.state,
            epoch=v.epoch,
            leader_id=v.leader_id,
            voted_for=v.voted_for,
            log_end_offset=log.end_offset,
            epochs=log.epoch_entries(),
            log_start_offset=v.log_start_offset,
            high_watermark=v.high_watermark,
            next_deadline_ms=node.replica.next_deadline_ms(),
        )

    def _inject(self, victim: _Node, f: Forgery) -> None:
        self.result.forged += 1
        before = self._kept(victim)
        inc = victim.inc
        msg = f.message
        answering = msg if isinstance(msg, _REQUEST_MESSAGES) else None
        self._forging = f
        self._forged_reply = None
        self._forged_refused = False
        try:
            token = None
            if answering is not None and self._check:
                token = self._request_token(victim, f.src, answering)
            event = Receive(self.now, f.src, msg, None, token)
            self._step(victim, event, answering, int(f.src), msg)
        finally:
            self._forging = None
        if victim.replica is None or victim.inc != inc:
            return  # it stopped (a graceful shutdown completed meanwhile)
        found = (
            inp.out_of_bounds_refused(victim.id, f, self._forged_refused)
            or inp.rejection_error_code(victim.id, f, self._last_forged_reply())
            or inp.rejected_message_changes_nothing(
                victim.id, f, before, self._kept(victim), self.now
            )
        )
        if found is not None:
            self._violation(found.name, found.detail)

    # ------------------------------------------------------------------ the wire

    def _step(
        self,
        node: _Node,
        event: Event,
        answering: Request | None,
        src_id: int | None,
        msg: Message | None,
        *,
        is_tick: bool = False,
    ) -> None:
        if not isinstance(answering, VoteRequest) or not self._check:
            super()._step(node, event, answering, src_id, msg, is_tick=is_tick)
            return
        before = node.persisted
        seen = None
        if node.replica is not None:
            v = node.replica.view()
            fetched = getattr(node.replica, "has_fetched_from_leader", None)
            seen = inp.Granter(
                v.state,
                v.epoch,
                v.voted_for,
                v.last_epoch,
                v.end_offset,
                v.leader_id,
                fetched if isinstance(fetched, bool) else None,
            )
        self._vote_answer = None
        super()._step(node, event, answering, src_id, msg, is_tick=is_tick)
        answer = self._last_vote_answer()
        found = inp.vote_recorded_only_when_granted(
            node.id, before, node.persisted, answering, answer
        )
        if found is None and seen is not None:
            found = inp.granted_vote_log_up_to_date(
                node.id, seen, answering, answer
            ) or inp.vote_answer_per_state(node.id, seen, answering, answer)
        if found is not None:
            self._violation(found.name, found.detail)

    def _last_forged_reply(self) -> Message | None:
        # Through a call, as _last_vote_answer: reset to None before the step that sets it.
        return self._forged_reply

    def _last_vote_answer(self) -> VoteResponse | None:
        # Read through a call: mypy keeps `self._vote_answer` narrowed to None across the step
        # that sets it, and mypyc would enforce that narrowing at run time.
        return self._vote_answer

    def _apply(
        self,
        node: _Node,
        effects: list[Effect],
        answering: Request | None,
        src_id: int | None,
        event: Event | None = None,
    ) -> None:
        if self._forging is not None and any(type(e) is MessageRefused for e in effects):
            self._forged_refused = True
        super()._apply(node, effects, answering, src_id, event)

    def _send(
        self,
        src: _Node,
        dst_id: NodeId,
        msg: Message,
        answering: Request | None,
        answering_src: int | None,
    ) -> None:
        mtype = type(msg)
        if (
            mtype is VoteResponse
            and isinstance(answering, VoteRequest)
            and answering_src == dst_id
            and self._check
        ):
            assert isinstance(msg, VoteResponse)
            self._vote_answer = msg
            found = inp.granted_vote_is_durable(src.id, src.persisted, answering, msg)
            if found is not None:
                self._violation(found.name, found.detail)
        f = self._forging
        if f is not None and dst_id == f.src and mtype in _RESPONSE_TYPES:
            if self._forged_reply is None:
                self._forged_reply = msg  # the forger's, never the node it claimed to be
            return
        if (
            mtype is FetchResponse
            and self._profile.corrupt_fetch
            and self._adv_rng.random() < self._profile.corrupt_fetch
        ):
            assert isinstance(msg, FetchResponse)
            msg = self._corrupted_fetch(msg)
        super()._send(src, dst_id, msg, answering, answering_src)

    def _corrupted_fetch(self, msg: FetchResponse) -> FetchResponse:
        """The answer with one byte flipped where the batch CRC catches it: the CRC itself or
        what it covers (from the attributes to the batch's end)."""
        data = bytes(msg.records)
        if not data:
            return msg
        spans = [(pos + 17, pos + h.size_in_bytes) for pos, h in iter_batches(data, verify=False)]
        spans = [(a, b) for a, b in spans if a < b]
        if not spans:
            return msg
        rng = self._adv_rng
        a, b = spans[int(rng.random() * len(spans))]
        at = a + int(rng.random() * (b - a))
        flipped = bytearray(data)
        flipped[at] ^= 1 + int(rng.random() * 255)
        self.result.fetches_corrupted += 1
        return dataclasses.replace(msg, records=bytes(flipped))
