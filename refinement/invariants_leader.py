"""Checkers of the steps that change a replica's role, and of what a new leader does (KIP-595
with KIP-996 and KIP-853, as Apache Kafka 4.x implements them), on each step's effects:

- StateChangeAfterItsAction: a step's change to Leader, Candidate, Resigned, or to Prospective
  from another state, comes after the action that makes it (BecomeLeader, BecomeCandidate,
  Resign, ElectionTimeout), with no other state change in between: a driver reading the
  effects in order, and the trace naming a step by its actions, learn of the action before
  its effects.
- BecomeLeaderInOrder: in the step in which a replica becomes leader of an epoch it persists
  the election state naming itself leader of that epoch with no vote before the state change;
  after it, it appends the epoch's first batch, of that epoch at its log's end, whose first
  record is the LeaderChange naming it; and it sends BeginQuorumEpoch of that epoch to every
  other voter of its voter set, none before that batch (Kafka's onBecomeLeader:
  transitionToLeader, appendStartOfEpochControlRecords, then pollLeader's
  maybeSendBeginQuorumEpochRequests).
- StartOfEpochVoters: that first batch restates the voter set (KRaftVersion, Voters) only while
  the replica's log holds no Voters record (Kafka's LeaderState.appendStartOfEpochControlRecords
  writes them while the offset of the voter set is -1: a voter set known only from the
  bootstrap checkpoint is written into the log once).
- RemovedLeaderResignsAtOnce: a leader that is not in its voter set, whose removal committed
  (its HWM passed the Voters record that left it out), resigns on its next tick (Kafka's
  pollLeader acts on isResignRequested before anything else).
- RemovedLeaderResignsNotEarly: nor does it resign for its removal before that: a leader out
  of its voter set that resigns on a tick while the Voters record that left it out is not yet
  below its HWM (Kafka's RemoveVoterHandler.highWatermarkUpdated asks the resignation once
  `highWatermark > lastOffset` of that record) must have resigned for want of fetches
  (check-quorum), which it cannot have done while every voter of that set fetched from it
  within the last check-quorum timeout (1.5 x quorum.fetch.timeout.ms) under that set. Only
  fetches the leader certainly counted are given (in its epoch, by a voter's exact key,
  answered at once with no error, divergence or snapshot), so the checker never cries wolf.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kraft.control_records import (
    KRaftVersionRecord,
    LeaderChangeMessage,
    VotersRecord,
    decode_control_batch,
)
from kraft.core.effects import (
    ActionTaken,
    AppendToLog,
    Effect,
    ElectionState,
    PersistElectionState,
    Send,
    StateChanged,
)
from kraft.core.messages import BeginQuorumEpochRequest
from kraft.core.vocabulary import Action, ReplicaState
from kraft.core.voter_set import VoterSet
from kraft.ids import NodeId, Offset, ReplicaKey
from refinement.invariants import Violation

STATE_CHANGE_AFTER_ITS_ACTION = "StateChangeAfterItsAction"
BECOME_LEADER_IN_ORDER = "BecomeLeaderInOrder"
START_OF_EPOCH_VOTERS = "StartOfEpochVoters"
REMOVED_LEADER_RESIGNS_AT_ONCE = "RemovedLeaderResignsAtOnce"
REMOVED_LEADER_RESIGNS_NOT_EARLY = "RemovedLeaderResignsNotEarly"

LEADER_CHECKERS: tuple[str, ...] = (
    STATE_CHANGE_AFTER_ITS_ACTION,
    BECOME_LEADER_IN_ORDER,
    START_OF_EPOCH_VOTERS,
    REMOVED_LEADER_RESIGNS_AT_ONCE,
    REMOVED_LEADER_RESIGNS_NOT_EARLY,
)

_L = ReplicaState.LEADER
_C = ReplicaState.CANDIDATE
_R = ReplicaState.RESIGNED
_P = ReplicaState.PROSPECTIVE

# The action that makes each of these state changes.
_ACTION_OF: dict[ReplicaState, Action] = {
    _L: Action.BECOME_LEADER,
    _C: Action.BECOME_CANDIDATE,
    _R: Action.RESIGN,
    _P: Action.ELECTION_TIMEOUT,
}

# (offset, voter set) by offset: the bootstrap checkpoint's at -1, then each Voters record's.
VoterHistory = tuple[tuple[Offset, VoterSet], ...]


def state_change_after_its_action(node: NodeId, effects: Sequence[Effect]) -> Violation | None:
    """StateChangeAfterItsAction over one step's effects."""
    since: list[Action] = []
    for e in effects:
        if type(e) is ActionTaken:
            assert isinstance(e, ActionTaken)
            since.append(e.action)
        elif type(e) is StateChanged:
            assert isinstance(e, StateChanged)
            want = _ACTION_OF.get(e.new)
            if want is not None and not (e.new is _P and e.old is _P) and want not in since:
                return Violation(
                    STATE_CHANGE_AFTER_ITS_ACTION,
                    f"node {node} went {e.old.value} -> {e.new.value} in epoch {e.epoch} with no"
                    f" {want.value} before it in the step (actions since the last change:"
                    f" {[a.value for a in since]})",
                )
            since = []
    return None


def become_leader_in_order(
    node: NodeId,
    effects: Sequence[Effect],
    *,
    end_before: Offset,
    voters: Sequence[NodeId],
    history: VoterHistory,
) -> Violation | None:
    """BecomeLeaderInOrder and StartOfEpochVoters over the step's effects, if it made the
    replica leader. `end_before`: its log's end before the step; `voters`: its voter set after
    the step; `history`: the voter sets its log states after the step (empty: static)."""
    became = -1
    for k, e in enumerate(effects):
        if type(e) is StateChanged:
            assert isinstance(e, StateChanged)
            if e.new is _L:
                became = k
    if became < 0:
        return None
    changed = effects[became]
    assert isinstance(changed, StateChanged)
    epoch = changed.epoch
    persisted = PersistElectionState(ElectionState(epoch, node))
    if persisted not in effects[:became]:
        return _order(node, epoch, f"it did not persist {persisted.state} before becoming leader")
    first: AppendToLog | None = None
    asked: set[NodeId] = set()
    for e in effects[became + 1 :]:
        if type(e) is AppendToLog and first is None:
            assert isinstance(e, AppendToLog)
            first = e
        elif type(e) is Send:
            assert isinstance(e, Send)
            msg = e.message
            if type(msg) is BeginQuorumEpochRequest:
                assert isinstance(msg, BeginQuorumEpochRequest)
                if first is None:
                    return _order(node, epoch, f"it sent BeginQuorumEpoch to {e.dst} first")
                if msg.leader_epoch == epoch:
                    asked.add(e.dst)
    if first is None or not first.leader_encoded:
        return _order(node, epoch, "it appended no batch of its own after becoming leader")
    if first.epoch != epoch or first.first_offset != end_before:
        return _order(
            node,
            epoch,
            f"its first batch is of epoch {first.epoch} at {first.first_offset}, not of its"
            f" epoch at its log end {end_before}",
        )
    _header, records = decode_control_batch(first.data, 0, verify=False)
    head = records[0] if records else None
    if not isinstance(head, LeaderChangeMessage) or head.leader_id != node:
        return _order(node, epoch, f"its first record is {head}, not its LeaderChange")
    missing = sorted(set(voters) - asked - {node})
    if missing:
        return _order(node, epoch, f"it sent no BeginQuorumEpoch of its epoch to {missing}")
    restated = any(isinstance(r, KRaftVersionRecord | VotersRecord) for r in records)
    earlier = [o for o, _ in history if 0 <= o < first.first_offset]
    if restated and earlier:
        return Violation(
            START_OF_EPOCH_VOTERS,
            f"node {node} restated the voter set in the first batch of epoch {epoch} at"
            f" {first.first_offset} although its log holds Voters records at {earlier}",
        )
    return None


def _order(node: NodeId, epoch: int, what: str) -> Violation:
    return Violation(BECOME_LEADER_IN_ORDER, f"node {node} became leader of epoch {epoch}: {what}")


def removed_leader_resigns_at_once(
    node: NodeId,
    key: ReplicaKey,
    *,
    leading: bool,
    voter: bool,
    high_watermark: Offset | None,
    history: VoterHistory,
    resigned: bool,
) -> Violation | None:
    """RemovedLeaderResignsAtOnce for one Tick of a replica that was `leading` before it, with
    that `high_watermark`, a `voter` or not by its own voter set; `history`: the voter sets its
    log states; `resigned`: the tick made it resign."""
    if not leading or voter or resigned or high_watermark is None or not history:
        return None
    offset, voters = history[-1]
    if offset < 0 or offset >= high_watermark or voters.contains(key):
        return None
    return Violation(
        REMOVED_LEADER_RESIGNS_AT_ONCE,
        f"leader {node} is out of the voter set its Voters record at {offset} states, committed"
        f" (HWM {high_watermark}), and took a tick without resigning",
    )


def removed_leader_resigns_not_early(
    node: NodeId,
    key: ReplicaKey,
    *,
    now: int,
    high_watermark: Offset | None,
    history: VoterHistory,
    fetched_at: Mapping[NodeId, int],
    check_quorum_ms: int,
) -> Violation | None:
    """RemovedLeaderResignsNotEarly for one Tick in which a leader out of its voter set
    resigned (not shutting down), with that `high_watermark` before the tick; `history`: the
    voter sets its log states; `fetched_at`: when each voter last made a Fetch the leader
    counted, under the latest voter set of `history`."""
    if not history:
        return None
    offset, voters = history[-1]
    if offset < 0 or voters.contains(key):
        return None
    if high_watermark is not None and offset < high_watermark:
        return None  # committed: it had to resign
    others = [v for v in voters.ids if v != key.id]
    if len(others) < voters.majority or any(
        now - fetched_at.get(v, -(1 << 62)) >= check_quorum_ms for v in others
    ):
        return None  # check-quorum may have run out
    return Violation(
        REMOVED_LEADER_RESIGNS_NOT_EARLY,
        f"leader {node} resigned at t={now}ms, out of the voter set its Voters record at"
        f" {offset} states, which is not committed (HWM {high_watermark}), although every"
        f" voter of that set fetched from it within the check-quorum timeout"
        f" ({check_quorum_ms}ms): {dict(sorted((v, fetched_at[v]) for v in others))}",
    )
