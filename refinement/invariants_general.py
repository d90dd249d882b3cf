"""General checkers of one replica step, over the effects it returned and what the simulator
delivered to it (kraft.core.effects, kraft.core.vocabulary's Action):

- LeaderElectedByVotes: a replica that becomes Leader in epoch e holds real votes of a
  majority of its voter set, counted from the VoteResponses the simulator delivered to it:
  granted, with no error, in epoch e, answering a VoteRequest of epoch e that was not a
  pre-vote (its own vote counts, being a candidate). A pre-vote grant never counts (KIP-996:
  a pre-vote records no vote, so two leaders of one epoch could follow from counting it).
  The voter set is the one the replica held just before the step it won in (the set it
  counts against); a grant is a fact of its epoch, so grants are kept across restarts.
- CandidateByPreVotes: likewise a Prospective that becomes Candidate (with pre-vote on)
  holds pre-vote grants of a majority of its voter set in its epoch: granted answers with
  no error to its pre-vote VoteRequests of that epoch (its own counts). A late grant of a
  real vote of an earlier candidacy in the same epoch is not a pre-vote (the voter granted
  a vote it may since have given up by moving on, and KIP-996 counts answers per round).
  A Prospective told UNSUPPORTED_VERSION stands at once (Kafka), so that step is exempt.
- ActionTakenForEveryHandledMessage: every message a replica handles (one it did not refuse
  as out of bounds, MessageRefused) yields the spec action that handles it, once: a trace
  with a handled message and no Handle... action, or with two, does not refine the spec. A
  Fetch may yield more than one HandleFetchRequest (a raised high watermark completes the
  Fetches a leader holds in the same step); a FetchSnapshotResponse yields none in a replica
  with no snapshot support (it ignores them). The step's first effect is that action:
  what handling the message does (a move to the epoch it names) comes after it.
- CommitAfterHighWatermark: an AppendCommitted comes after, in the step's effects, the
  HighWatermarkMoved that passed its last offset (or the step began with the high watermark
  already past it): a driver reading the effects in order never learns of a commit before
  the high watermark that decides it.
- FollowerHighWatermarkFollowsAnswer: a Follower that takes its leader's Fetch answer ends
  the step with its high watermark at min(h, its log end), h being the answer's, or where it
  already was if that is higher: Kafka's KafkaRaftClient.handleFetchResponse and
  updateFollowerHighWatermark, exactly. "Takes" as the simulator can tell it: the replica was
  already that leader's Follower in the answer's epoch, the answer has no error, no snapshot
  id and h >= 0, its records (if any) grew the log, and the replica fetches from that leader
  again in the step (a stale answer, or records it could not append, leaves the Fetch in
  flight and sends nothing).
- FollowerAppendsWholeBatches: a Follower given its leader's Fetch answer in its epoch (no
  error, snapshot id or diverging epoch; to a Fetch from its log end; not while it fetches a
  snapshot, when Fetch answers are late ones) whose records continue its log with whole batches
  that it may append (CRC valid, contiguous from its log end, epochs not decreasing from its
  last and not past its epoch; no control batch, whose contents the replica checks further)
  ends the step with its log end at the end of the last whole batch, even when the answer
  ends inside a further batch: a Kafka leader cuts its answers at the Fetch's max bytes, and
  Kafka's follower appends what comes before the cut.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kraft.core.effects import (
    ActionTaken,
    AppendCommitted,
    Effect,
    HighWatermarkMoved,
    MessageRefused,
    Send,
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
    Request,
    VoteRequest,
    VoteResponse,
)
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset
from kraft.records import CorruptRecordError, TruncatedBatchError, iter_batches
from refinement.invariants import Violation

LEADER_ELECTED_BY_VOTES = "LeaderElectedByVotes"
CANDIDATE_BY_PRE_VOTES = "CandidateByPreVotes"
ACTION_TAKEN_FOR_EVERY_HANDLED_MESSAGE = "ActionTakenForEveryHandledMessage"
COMMIT_AFTER_HIGH_WATERMARK = "CommitAfterHighWatermark"
FOLLOWER_HIGH_WATERMARK_FOLLOWS_ANSWER = "FollowerHighWatermarkFollowsAnswer"
FOLLOWER_APPENDS_WHOLE_BATCHES = "FollowerAppendsWholeBatches"

GENERAL_CHECKERS = (
    LEADER_ELECTED_BY_VOTES,
    CANDIDATE_BY_PRE_VOTES,
    ACTION_TAKEN_FOR_EVERY_HANDLED_MESSAGE,
    COMMIT_AFTER_HIGH_WATERMARK,
    FOLLOWER_HIGH_WATERMARK_FOLLOWS_ANSWER,
    FOLLOWER_APPENDS_WHOLE_BATCHES,
)

_HANDLE_ACTION: dict[type, Action] = {
    VoteRequest: Action.HANDLE_VOTE_REQUEST,
    VoteResponse: Action.HANDLE_VOTE_RESPONSE,
    BeginQuorumEpochRequest: Action.HANDLE_BEGIN_QUORUM_EPOCH_REQUEST,
    BeginQuorumEpochResponse: Action.HANDLE_BEGIN_QUORUM_EPOCH_RESPONSE,
    EndQuorumEpochRequest: Action.HANDLE_END_QUORUM_EPOCH_REQUEST,
    EndQuorumEpochResponse: Action.HANDLE_END_QUORUM_EPOCH_RESPONSE,
    FetchRequest: Action.HANDLE_FETCH_REQUEST,
    FetchResponse: Action.HANDLE_FETCH_RESPONSE,
    FetchSnapshotRequest: Action.HANDLE_FETCH_SNAPSHOT_REQUEST,
    FetchSnapshotResponse: Action.HANDLE_FETCH_SNAPSHOT_RESPONSE,
}


def granted_epoch(
    msg: VoteResponse, in_reply_to: Request | None, *, pre_vote: bool
) -> Epoch | None:
    """The epoch in which `msg` grants its receiver a real vote (`pre_vote` False) or a
    pre-vote (True), or None: a granted answer with no error to a VoteRequest of that epoch of
    that kind. An answer whose request is unknown is taken as either (the checkers stay silent
    rather than guess)."""
    if not msg.vote_granted or msg.error is not ErrorCode.NONE:
        return None
    if in_reply_to is None:
        return msg.leader_epoch
    if not isinstance(in_reply_to, VoteRequest) or in_reply_to.pre_vote is not pre_vote:
        return None
    if in_reply_to.candidate_epoch != msg.leader_epoch:
        return None
    return msg.leader_epoch


def _short_of_majority(
    node: NodeId, voters: Collection[NodeId], grants: set[NodeId]
) -> list[NodeId] | None:
    """The voters that granted (the node's own vote counting), sorted, when they are no
    majority of `voters`; None when they are."""
    votes = (grants | {node}) & set(voters)
    return sorted(votes) if 2 * len(votes) <= len(voters) else None


def candidate_by_pre_votes(
    node: NodeId,
    effects: Sequence[Effect],
    *,
    epoch: Epoch,
    voters: Collection[NodeId],
    granted: dict[Epoch, set[NodeId]],
) -> Violation | None:
    """CandidateByPreVotes over one step's effects (pre-vote on, no UNSUPPORTED_VERSION
    answer in the step); `epoch` and `voters` are the replica's before the step, `granted`
    the pre-votes it was delivered, by epoch."""
    if not voters:
        return None
    for e in effects:
        if type(e) is not StateChanged:
            continue
        assert isinstance(e, StateChanged)
        if e.old is not ReplicaState.PROSPECTIVE or e.new is not ReplicaState.CANDIDATE:
            continue
        short = _short_of_majority(node, voters, granted.get(epoch, set()))
        if short is not None:
            return Violation(
                CANDIDATE_BY_PRE_VOTES,
                f"node {node} went Prospective -> Candidate from epoch {epoch} with pre-votes"
                f" of {short} only, not a majority of its voters {sorted(voters)}",
            )
    return None


def leader_elected_by_votes(
    node: NodeId,
    effects: Sequence[Effect],
    *,
    voters: Collection[NodeId],
    granted: dict[Epoch, set[NodeId]],
) -> Violation | None:
    """LeaderElectedByVotes over one step's effects; `voters` is the replica's voter set
    before the step, `granted` the real votes it was delivered, by epoch."""
    if not voters:
        return None
    for e in effects:
        if type(e) is not StateChanged:
            continue
        assert isinstance(e, StateChanged)
        if e.new is not ReplicaState.LEADER or e.old is ReplicaState.LEADER:
            continue
        short = _short_of_majority(node, voters, granted.get(e.epoch, set()))
        if short is not None:
            return Violation(
                LEADER_ELECTED_BY_VOTES,
                f"node {node} became Leader in epoch {e.epoch} with real votes of"
                f" {short} only, not a majority of its voters {sorted(voters)}",
            )
    return None


def action_taken_for_handled_message(
    node: NodeId, msg: Message, effects: Sequence[Effect], *, snapshots: bool
) -> Violation | None:
    """ActionTakenForEveryHandledMessage over the effects of the step that received `msg`."""
    want = _HANDLE_ACTION.get(type(msg))
    if want is None:
        return None
    if any(type(e) is MessageRefused for e in effects):
        return None
    count = sum(1 for e in effects if isinstance(e, ActionTaken) and e.action is want)
    first = effects[0] if effects else None
    if count >= 1 and not (isinstance(first, ActionTaken) and first.action is want):
        # The trace names the action before what it does (a state change it causes, such as
        # moving to the epoch a response names, belongs to that action in the spec).
        return Violation(
            ACTION_TAKEN_FOR_EVERY_HANDLED_MESSAGE,
            f"node {node} handled a {type(msg).__name__} with {type(first).__name__}"
            f" before its {want.value} action",
        )
    if count == 1:
        return None
    if count > 1 and type(msg) is FetchRequest:
        return None
    if count == 0 and type(msg) is FetchSnapshotResponse and not snapshots:
        return None
    return Violation(
        ACTION_TAKEN_FOR_EVERY_HANDLED_MESSAGE,
        f"node {node} handled a {type(msg).__name__} with {count} {want.value} actions"
        f" (want exactly one)",
    )


def commit_after_high_watermark(
    node: NodeId, effects: Sequence[Effect], *, high_watermark: Offset | None
) -> Violation | None:
    """CommitAfterHighWatermark over one step's effects; `high_watermark` is the replica's
    before the step (None: unknown)."""
    hwm = high_watermark
    for e in effects:
        if type(e) is HighWatermarkMoved:
            assert isinstance(e, HighWatermarkMoved)
            if hwm is None or e.high_watermark > hwm:
                hwm = e.high_watermark
        elif type(e) is AppendCommitted:
            assert isinstance(e, AppendCommitted)
            if hwm is None or hwm <= e.last_offset:
                return Violation(
                    COMMIT_AFTER_HIGH_WATERMARK,
                    f"node {node} said AppendCommitted(request {e.request_id},"
                    f" [{e.first_offset}, {e.last_offset}]) with its high watermark at {hwm}"
                    f" so far in the step (no HighWatermarkMoved past {e.last_offset} before it)",
                )
    return None


def _leader_answer(
    message: Message,
    src: NodeId,
    was_following: bool,
    state: ReplicaState,
    leader: NodeId | None,
) -> FetchResponse | None:
    """`message` if it is a Fetch answer from the leader the replica followed before the step
    and still follows after it, else None."""
    if (
        type(message) is not FetchResponse
        or not was_following
        or state is not ReplicaState.FOLLOWER
        or leader != src
    ):
        return None
    assert isinstance(message, FetchResponse)
    return message


def follower_high_watermark_follows_answer(
    node: NodeId,
    src: NodeId,
    message: Message,
    effects: Sequence[Effect],
    *,
    was_following: bool,
    end_before: Offset,
    before: Offset | None,
    state: ReplicaState,
    epoch: Epoch,
    leader: NodeId | None,
    end_offset: Offset,
    after: Offset | None,
) -> Violation | None:
    """FollowerHighWatermarkFollowsAnswer for one step that handled `message` from `src`;
    `was_following`: the replica was `src`'s Follower in `epoch` before the step; `before`
    and `end_before` its high watermark and log end then, the rest its view after."""
    answer = _leader_answer(message, src, was_following, state, leader)
    if answer is None:
        return None
    if (
        answer.error is not ErrorCode.NONE
        or answer.snapshot_id is not None
        or answer.high_watermark < 0
        or answer.leader_epoch != epoch
        or (len(answer.records) > 0 and end_offset <= end_before)
    ):
        return None
    if not any(
        type(e) is Send and e.dst == src and type(e.message) is FetchRequest for e in effects
    ):
        return None  # an answer it did not take (stale, or records it could not append)
    want = Offset(min(answer.high_watermark, end_offset))
    if before is not None and before > want:
        want = before
    if after == want:
        return None
    return Violation(
        FOLLOWER_HIGH_WATERMARK_FOLLOWS_ANSWER,
        f"node {node}, Follower of {src} in epoch {epoch}, took a Fetch answer with high"
        f" watermark {answer.high_watermark} at log end {end_offset} (its own was {before})"
        f" and ended the step at {after}, not {want}",
    )


def follower_appends_whole_batches(
    node: NodeId,
    src: NodeId,
    message: Message,
    in_reply_to: Request | None,
    *,
    was_following: bool,
    end_before: Offset,
    last_epoch_before: Epoch,
    fetching_snapshot: bool,
    state: ReplicaState,
    epoch: Epoch,
    leader: NodeId | None,
    end_offset: Offset,
) -> Violation | None:
    """FollowerAppendsWholeBatches for one step that handled `message` from `src`;
    `was_following`: the replica was `src`'s Follower in `epoch` before the step, with log end
    `end_before` and last epoch `last_epoch_before`, fetching a snapshot or not; the rest its
    view after."""
    answer = _leader_answer(message, src, was_following, state, leader)
    if answer is None or fetching_snapshot:
        return None
    if (
        answer.error is not ErrorCode.NONE
        or answer.snapshot_id is not None
        or answer.diverging_epoch is not None
        or answer.leader_epoch != epoch
        or not answer.records
    ):
        return None
    if isinstance(in_reply_to, FetchRequest) and (
        in_reply_to.fetch_offset != end_before
        or in_reply_to.last_fetched_epoch != last_epoch_before
    ):
        return None  # it answers a Fetch from a log position the replica has left
    want, last = end_before, last_epoch_before
    whole = 0
    cut = False
    try:
        # Headers only: the CRCs are checked below, only when the step looks wrong (the
        # simulator runs this on every Fetch answer).
        for pos, h in iter_batches(answer.records, verify=False):
            if h.base_offset != want or h.is_control:
                return None
            if not last <= h.partition_leader_epoch <= epoch:
                return None
            want, last = Offset(h.next_offset), Epoch(h.partition_leader_epoch)
            whole = pos + h.size_in_bytes
    except TruncatedBatchError:
        cut = True
    except (CorruptRecordError, ValueError):
        return None
    if want in (end_before, end_offset):
        return None
    try:
        for _ in iter_batches(answer.records[:whole]):
            pass
    except (CorruptRecordError, ValueError):
        return None  # a damaged batch: the replica rightly refused the answer
    return Violation(
        FOLLOWER_APPENDS_WHOLE_BATCHES,
        f"node {node}, Follower of {src} in epoch {epoch} at log end {end_before}, took a Fetch"
        f" answer whose whole batches end at {want}{' (then cut inside a batch)' if cut else ''}"
        f" and ended the step at log end {end_offset}",
    )
