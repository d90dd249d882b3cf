"""Checkers of the answers a leader gives the operator's voter changes (KIP-853's
AddRaftVoter and RemoveRaftVoter, kraft.core.reconfig), over a replica's voter history (the
voter sets its log states, by offset: `NodeState.voter_history`).

- VoterChangeAnswered: a replica answers a voter change in the step that receives it, unless
  it accepts it (an AddRaftVoter starts probing the new voter, a RemoveRaftVoter appends its
  Voters record); and what it answers agrees with its log: NONE only once a Voters record
  making that change is committed (below its HWM; an AddRaftVoter that asks for no commit,
  KIP-1186's ack_when_committed false, is answered in the step that appends the record,
  before it commits), DUPLICATE_VOTER only when the voter id is
  in its voter set, VOTER_NOT_FOUND only when the voter is not (or is the last one), and
  REQUEST_TIMED_OUT to a change it accepted only while the change is not committed (a
  committed change is answered NONE, kraft.core.commits' rule). Each request is answered
  once, and an AddRaftVoter still probing its new voter is settled in the step that hears the
  probe's answer: its Voters record appended, or the request answered. A leader that steps
  down answers, in that very step, every change it accepted and has not answered
  NOT_LEADER_OR_FOLLOWER, whether it still probes its new voter or its Voters record is
  appended (Kafka's LeaderState.close resets the AddVoter and RemoveVoter handler states
  with that error; the commit rule never answers it later).
  The operator's own changes carry this cluster's id or none (Kafka accepts a null one), so
  INCONSISTENT_CLUSTER_ID is never right for them. The one-shot requests (UpdateRaftVoter,
  malformed AddRaftVoter, another cluster's id; refinement.sim_reconfig) are answered exactly
  once, in the step that receives them, with the error Kafka's checks give in their order
  from what the operator sees of the replica (`Receiver`): another cluster's id, then (Update)
  the epoch, then not the leader, then a leader shutting down (BROKER_NOT_AVAILABLE, Kafka's
  validateLeaderOnlyRequest), then a malformed request (a voter key without a directory id,
  no endpoint on the default listener, max < min kraft.version) is INVALID_REQUEST even
  while a change is pending. At kraft.version 0 (a static quorum, whose
  voters Kafka 4's controllers still send UpdateRaftVoter) a well-formed update to a leader
  whose HWM is known is INVALID_REQUEST when its range leaves out kraft.version 0,
  VOTER_NOT_FOUND when no voter has its id, else NONE, and nothing is written.
- UpdateVoterLeaderHint: every UpdateRaftVoter answer names, as Kafka's
  `quorum.leaderAndEpoch()`, the leader the answering replica knows (itself when it leads or
  resigned, -1 when it knows none) and its epoch, whatever the error.
- UpdateVoterApplied: an UpdateRaftVoter answered NONE appended one Voters record that gives
  exactly that voter its new endpoints and kraft.version range, the other voters unchanged; a
  refused one changed nothing.
- VoterAddedWithProbedVersions: a Voters record that adds a voter states the kraft.version
  range the new voter's ApiVersions answer gave (Kafka's AddVoterHandler).
- ControlRecordsInKafkaFormat: every control record a leader writes carries the key version
  and the record version Apache Kafka writes (0 for LeaderChange, KRaftVersion and Voters).
- SnapshotVotersMatchLog: a snapshot ending at E carries the Voters record of the voter set
  the replica's log states in force at E - 1, not a later one (KIP-853).
- VoterChangeEventuallyAcknowledged (a liveness property, checked by the simulator's
  liveness phase): in a healed cluster whose settled leader committed its latest change, a
  change the operator then asks (adding a caught-up observer, else removing a follower) is
  acknowledged with NONE within the bound.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass

from kraft.control_records import ControlRecordType, VoterEntry, VotersRecord
from kraft.core.messages import (
    AddVoterRequest,
    Message,
    RemoveVoterRequest,
    UpdateVoterRequest,
)
from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_set import VoterSet
from kraft.errors import ErrorCode
from kraft.ids import (
    NO_DIRECTORY,
    NO_NODE,
    ClusterId,
    DirectoryId,
    Epoch,
    NodeId,
    Offset,
    ReplicaKey,
)
from kraft.records import decode_records, iter_batches
from refinement.invariants import Violation

VOTER_CHANGE_ANSWERED = "VoterChangeAnswered"
VOTER_CHANGE_EVENTUALLY_ACKNOWLEDGED = "VoterChangeEventuallyAcknowledged"

VoterHistory = tuple[tuple[Offset, VoterSet], ...]


def _verb(add: bool) -> str:
    return "AddRaftVoter" if add else "RemoveRaftVoter"


def _history_text(history: VoterHistory) -> str:
    return ", ".join(f"{o}:{sorted(v.ids)}" for o, v in history)


def change_offsets(history: VoterHistory, voter: ReplicaKey, add: bool) -> list[Offset]:
    """The offsets of the Voters records that add (remove) `voter`: each one's set holds
    (lacks) the voter and the set before it did not (did)."""
    return [
        offset
        for (_, before), (offset, after) in itertools.pairwise(history)
        if (voter in after.voters) is add and (voter in before.voters) is not add
    ]


def unanswered(node: NodeId, voter: ReplicaKey, add: bool) -> Violation:
    return Violation(
        VOTER_CHANGE_ANSWERED,
        f"node {node} neither answered nor accepted {_verb(add)} of {voter}",
    )


def voter_change_answered(
    node: NodeId,
    voter: ReplicaKey,
    add: bool,
    error: ErrorCode,
    *,
    history: VoterHistory,
    hwm: Offset | None,
    accepted: bool,
    ack_when_committed: bool = True,
) -> Violation | None:
    """Node's answer `error` to a change of `voter`, given its voter history and HWM as it
    answers; `accepted`: the node accepted this very request earlier."""
    latest = history[-1][1] if history else None
    problem: str | None = None
    made = change_offsets(history, voter, add)
    if error is ErrorCode.NONE:
        if ack_when_committed and not (made and hwm is not None and made[0] < hwm):
            problem = "no committed Voters record makes that change"
        elif not ack_when_committed and not (made and (hwm is None or made[-1] >= hwm)):
            problem = (
                "it was asked to answer once the change is appended, and no Voters record"
                " making it waits for its commit"
            )
    elif error is ErrorCode.DUPLICATE_VOTER:
        if add and latest is not None and not latest.contains_id(voter.id):
            problem = f"the voter id {voter.id} is not in its voter set {sorted(latest.ids)}"
    elif error is ErrorCode.VOTER_NOT_FOUND:
        if not add and latest is not None and voter in latest.voters and len(latest) > 1:
            problem = f"the voter is in its voter set {sorted(latest.ids)}"
    elif error is ErrorCode.INCONSISTENT_CLUSTER_ID:
        # The operator sends this cluster's id, or none (Kafka accepts a null cluster id).
        problem = "the request carried this cluster's id or none"
    elif error is ErrorCode.REQUEST_TIMED_OUT and accepted and hwm is not None:
        stated = [v for o, v in history if o < hwm]
        if stated and (voter in stated[-1].voters) is add:
            problem = "it accepted the change, which is committed (answered NONE at its commit)"
    if problem is None:
        return None
    return Violation(
        VOTER_CHANGE_ANSWERED,
        f"node {node} answered {_verb(add)} of {voter} with {error.name}, but {problem}"
        f" (HWM {hwm}; voter sets {_history_text(history)})",
    )


def step_down_answers(
    node: NodeId, pending: list[int], answers: dict[int, ErrorCode]
) -> Violation | None:
    """Node left leadership in a step; `pending`: the changes (reply tokens) it had accepted
    and not answered as it began the step; `answers`: what the step answered, by token."""
    nlf = ErrorCode.NOT_LEADER_OR_FOLLOWER
    wrong = [(t, answers.get(t)) for t in pending if answers.get(t) is not nlf]
    if not wrong:
        return None
    said = ", ".join(f"{t}: {'nothing' if e is None else e.name}" for t, e in wrong)
    return Violation(
        VOTER_CHANGE_ANSWERED,
        f"node {node} stepped down with voter changes pending and did not answer them"
        f" NOT_LEADER_OR_FOLLOWER in that step, as Kafka's LeaderState.close does ({said})",
    )


def answered_twice(node: NodeId, token: int, msg: Message) -> Violation:
    """A voter change is answered once: a second answer to the same request (reply token),
    such as a NONE at the commit of an AddRaftVoter already answered when appended
    (KIP-1186's ack_when_committed false), is one the operator cannot match to anything."""
    error = getattr(msg, "error", None)
    return Violation(
        VOTER_CHANGE_ANSWERED,
        f"node {node} answered request {token} a second time: {type(msg).__name__}"
        f" {error.name if isinstance(error, ErrorCode) else error}",
    )


def eventually_acknowledged(
    voter: ReplicaKey, add: bool, bound_ms: int, answers: list[str]
) -> Violation:
    return Violation(
        VOTER_CHANGE_EVENTUALLY_ACKNOWLEDGED,
        f"within {bound_ms}ms of healing, the settled leader did not acknowledge"
        f" {_verb(add)} of {voter} (answers: {', '.join(answers) or 'none'})",
    )


VOTER_ADDED_WITH_PROBED_VERSIONS = "VoterAddedWithProbedVersions"


def voter_added_with_probed_versions(
    node: NodeId, offset: Offset, before: VoterSet, after: VoterSet, span: dict[NodeId, range]
) -> Violation | None:
    """A Voters record at `offset` of node's log that adds a voter (a key `before` lacks)
    states for it the kraft.version range its ApiVersions answer gave (`span`: per voter id,
    min..max as a range), as Kafka's AddVoterHandler writes it: the range the record states
    is what later UpdateRaftVoter and kraft.version upgrades are checked against."""
    record = after.record
    if record is None:
        return None
    for v in record.voters:
        key = ReplicaKey(NodeId(v.voter_id), DirectoryId(v.voter_directory_id))
        want = span.get(key.id)
        if want is None or before.contains(key):
            continue
        got = range(v.min_supported_version, v.max_supported_version + 1)
        if got != want:
            return Violation(
                VOTER_ADDED_WITH_PROBED_VERSIONS,
                f"node {node}'s Voters record at {offset} adds {key} with kraft.version"
                f" {v.min_supported_version}..{v.max_supported_version}, but its ApiVersions"
                f" answer gave {want.start}..{want.stop - 1}",
            )
    return None


# --------------------------------------------------------------------------- one-shot requests

UPDATE_VOTER_APPLIED = "UpdateVoterApplied"
CONTROL_RECORDS_IN_KAFKA_FORMAT = "ControlRecordsInKafkaFormat"
SNAPSHOT_VOTERS_MATCH_LOG = "SnapshotVotersMatchLog"

# The version Kafka writes of each control record the core writes (ControlRecordUtils'
# LEADER_CHANGE_CURRENT_VERSION, KRAFT_VERSION_CURRENT_VERSION, KRAFT_VOTERS_CURRENT_VERSION),
# and of every control record key (ControlRecordType.CURRENT_CONTROL_RECORD_KEY_VERSION).
KAFKA_CONTROL_VERSIONS: dict[ControlRecordType, int] = {
    ControlRecordType.LEADER_CHANGE: 0,
    ControlRecordType.KRAFT_VERSION: 0,
    ControlRecordType.VOTERS: 0,
}
_KEY = struct.Struct(">hh")
_VERSION = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class Receiver:
    """What the operator can see of the replica a one-shot request reaches, as it arrives
    (before the replica steps it)."""

    node: NodeId
    state: ReplicaState
    epoch: Epoch
    shutting_down: bool
    cluster_id: ClusterId
    listener: str
    # The voter sets its log states (refinement.invariants_reconfig), and its HWM.
    history: VoterHistory
    hwm: Offset | None
    # The offset where its current epoch starts in its log (None: no record of it).
    epoch_start: Offset | None
    # A voter change this leader accepted in this epoch is still unanswered (certain), or
    # may still be pending (answered when appended, KIP-1186, and not known to be decided).
    pending: bool
    maybe_pending: bool
    # The leader it knows (view.leader_id: itself when it leads or resigned), the finalized
    # kraft.version (0: a static quorum, no Voters record; `history` is then empty), and the
    # ids of its voters (what a kraft.version 0 update is checked against).
    leader: NodeId | None = None
    kraft_version: int = 1
    voter_ids: frozenset[NodeId] = frozenset()


OneShot = AddVoterRequest | RemoveVoterRequest | UpdateVoterRequest


def _foreign(req: OneShot, r: Receiver) -> bool:
    return req.cluster_id is not None and req.cluster_id != r.cluster_id


def _expected(req: OneShot, r: Receiver) -> tuple[frozenset[ErrorCode], str]:
    """The answers Kafka's checks allow (KafkaRaftClient's request checks, then the voter
    change handlers, in their order), and why."""
    nlf = ErrorCode.NOT_LEADER_OR_FOLLOWER
    if _foreign(req, r):
        return frozenset({ErrorCode.INCONSISTENT_CLUSTER_ID}), "another cluster's id"
    if isinstance(req, UpdateVoterRequest):
        if req.leader_epoch < r.epoch:
            return frozenset({ErrorCode.FENCED_LEADER_EPOCH}), f"epoch {req.leader_epoch} stale"
        if req.leader_epoch > r.epoch:
            return frozenset({ErrorCode.UNKNOWN_LEADER_EPOCH}), f"epoch {req.leader_epoch} ahead"
    if r.state is not ReplicaState.LEADER:
        return frozenset({nlf}), "not the leader"
    if r.shutting_down:  # Kafka's validateLeaderOnlyRequest
        return frozenset({ErrorCode.BROKER_NOT_AVAILABLE}), "a leader shutting down"
    if not _valid_key(req.voter):
        return frozenset({ErrorCode.INVALID_REQUEST}), f"no valid voter key {req.voter}"
    if isinstance(req, RemoveVoterRequest):
        raise ValueError("RemoveRaftVoter one-shots carry another cluster's id or no valid key")
    default = any(e.name == r.listener for e in req.endpoints)
    if isinstance(req, AddVoterRequest):
        if not default:
            return frozenset({ErrorCode.INVALID_REQUEST}), f"no endpoint on {r.listener}"
        raise ValueError("only malformed AddRaftVoter requests are one-shots")
    lo, hi = req.min_kraft_version, req.max_kraft_version
    if not default or lo < 0 or hi < 0 or hi < lo:
        return frozenset({ErrorCode.INVALID_REQUEST}), f"malformed (range {lo}..{hi})"
    timeout = frozenset({ErrorCode.REQUEST_TIMED_OUT})
    hwm_known = r.hwm is not None and r.epoch_start is not None and r.hwm > r.epoch_start
    if r.pending or not hwm_known:
        return timeout, "a change pending, or the leader's HWM not known"
    if r.kraft_version < 1:
        # Kafka keeps a static quorum's update in memory; its answer: the range must hold the
        # finalized kraft.version 0, and the id must be a voter's (a static voter has no
        # directory id to compare).
        if not lo <= 0 <= hi:
            return frozenset({ErrorCode.INVALID_REQUEST}), f"kraft.version 0 outside {lo}..{hi}"
        if req.voter.id not in r.voter_ids:
            return frozenset({ErrorCode.VOTER_NOT_FOUND}), f"no static voter {req.voter.id}"
        return frozenset({ErrorCode.NONE}), "a valid update of a static voter"
    voters_at = r.history[-1][0] if r.history else Offset(-1)
    if r.hwm is not None and voters_at >= r.hwm:
        return timeout, f"its latest Voters record at {voters_at} is not committed"
    allowed = timeout if r.maybe_pending else frozenset()
    latest = r.history[-1][1] if r.history else None
    if not lo <= 1 <= hi:
        return allowed | {ErrorCode.INVALID_REQUEST}, f"kraft.version 1 outside {lo}..{hi}"
    if latest is None or req.voter not in latest.voters:
        return allowed | {ErrorCode.VOTER_NOT_FOUND}, "the voter is not in its voter set"
    return allowed | {ErrorCode.NONE}, "a valid update of one of its voters"


def _valid_key(voter: ReplicaKey) -> bool:
    """Kafka's check of the voter named by AddRaftVoter and RemoveRaftVoter: an id and a
    directory id (a voter of a dynamic quorum always has one, KIP-853)."""
    return voter.id >= 0 and voter.directory_id != NO_DIRECTORY


def _describe(req: OneShot) -> str:
    name = type(req).__name__.removesuffix("Request")
    return f"{name}(cluster {req.cluster_id!r}, voter {req.voter})"


def one_shot_answered(
    req: OneShot,
    r: Receiver,
    answers: list[ErrorCode],
    after: VoterHistory,
) -> Violation | None:
    """A one-shot request the operator knows the answer to (VoterChangeAnswered): answered
    exactly once, in the step that receives it, with the error Kafka's checks give; and an
    UpdateRaftVoter answered NONE appended, in that step, one Voters record that changes
    exactly that voter's endpoints and kraft.version range (UpdateVoterApplied)."""
    allowed, why = _expected(req, r)
    if len(answers) != 1 or answers[0] not in allowed:
        got = ", ".join(a.name for a in answers) or "no answer"
        return Violation(
            VOTER_CHANGE_ANSWERED,
            f"node {r.node} ({r.state.value}, epoch {r.epoch}) answered {_describe(req)}"
            f" with {got}; expected {' or '.join(sorted(a.name for a in allowed))} ({why})",
        )
    if answers[0] is ErrorCode.NONE and isinstance(req, UpdateVoterRequest) and r.kraft_version:
        return update_voter_applied(req, r, after)
    if after != r.history and (answers[0] is not ErrorCode.NONE or not r.kraft_version):
        return Violation(
            UPDATE_VOTER_APPLIED,
            f"node {r.node} refused {_describe(req)} with {answers[0].name} but its voter sets"
            f" changed: {_history_text(r.history)} -> {_history_text(after)}",
        )
    return None


UPDATE_VOTER_LEADER_HINT = "UpdateVoterLeaderHint"


def update_voter_leader_hint(
    req: UpdateVoterRequest, r: Receiver, leader_id: NodeId, epoch: Epoch
) -> Violation | None:
    """An UpdateRaftVoter answer carries Kafka's `quorum.leaderAndEpoch()` of the answering
    replica as the request found it: the leader it knows (NO_NODE for none) and its epoch."""
    want = NO_NODE if r.leader is None else r.leader
    if leader_id == want and epoch == r.epoch:
        return None
    return Violation(
        UPDATE_VOTER_LEADER_HINT,
        f"node {r.node} ({r.state.value}, epoch {r.epoch}, leader {want}) answered"
        f" {_describe(req)} naming leader {leader_id} in epoch {epoch}",
    )


def update_voter_applied(
    req: UpdateVoterRequest, r: Receiver, after: VoterHistory
) -> Violation | None:
    before = r.history[-1][1].record if r.history else None
    added = after[len(r.history) :]
    problem: str | None = None
    if after[: len(r.history)] != r.history or len(added) != 1 or before is None:
        problem = f"its voter sets went {_history_text(r.history)} -> {_history_text(after)}"
    else:
        # Kafka's VoterSet.updateVoter puts the request's key: a voter known by its id
        # alone gains the directory id the request names.
        want = tuple(
            VoterEntry(
                v.voter_id,
                req.voter.directory_id,
                req.endpoints,
                req.min_kraft_version,
                req.max_kraft_version,
            )
            if v.voter_id == req.voter.id
            else v
            for v in before.voters
        )
        got = added[0][1].record
        if got is None or tuple(sorted(got.voters, key=lambda v: v.voter_id)) != tuple(
            sorted(want, key=lambda v: v.voter_id)
        ):
            problem = f"its new Voters record holds {got} instead of {want}"
    if problem is None:
        return None
    return Violation(
        UPDATE_VOTER_APPLIED,
        f"node {r.node} answered NONE to {_describe(req)} ({req.endpoints},"
        f" {req.min_kraft_version}..{req.max_kraft_version}), but {problem}",
    )


def control_records_in_kafka_format(node: NodeId, data: bytes | memoryview) -> Violation | None:
    """Every control record a leader writes (LeaderChange, KRaftVersion, Voters) carries the
    key version and the record version Apache Kafka writes: what it does not know it cannot
    read (a VotersRecord of version 1 is outside Kafka 4's schema, versions 0-0)."""
    for position, header in iter_batches(data, verify=False):
        if not header.is_control:
            continue
        for record in decode_records(data, position, header):
            key = record.key
            if key is None or len(key) < _KEY.size:
                continue
            key_version, kind_code = _KEY.unpack_from(key)
            try:
                kind = ControlRecordType(kind_code)
            except ValueError:
                kind = None
            want = KAFKA_CONTROL_VERSIONS.get(kind) if kind is not None else None
            value = record.value
            version = None if value is None or len(value) < 2 else _VERSION.unpack_from(value)[0]
            if key_version != 0 or (want is not None and version != want):
                return Violation(
                    CONTROL_RECORDS_IN_KAFKA_FORMAT,
                    f"node {node} wrote a control record of type {kind_code} at offset"
                    f" {record.offset} with key version {key_version} and version {version}"
                    f" (Kafka writes 0 and {want})",
                )
    return None


def snapshot_voters_match_log(
    node: NodeId, end_offset: Offset, written: VotersRecord | None, history: VoterHistory
) -> Violation | None:
    """A snapshot ending at `end_offset` carries the Voters record of the voter set in force
    at end_offset - 1 by the replica's log (KIP-853), never a later one."""
    stated = [v for o, v in history if o <= end_offset - 1]
    want = stated[-1].record if stated else None
    if written == want:
        return None
    return Violation(
        SNAPSHOT_VOTERS_MATCH_LOG,
        f"node {node}'s snapshot ending at {end_offset} carries voters"
        f" {None if written is None else [v.voter_id for v in written.voters]} ({written}),"
        f" but its log states {want} before {end_offset} (voter sets {_history_text(history)})",
    )
