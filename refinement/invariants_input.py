"""Checkers of what a replica does with input it must not trust: forged or corrupted messages
(refinement.sim_adversary injects them under a `NAME+adversary` profile) and the vote it grants.

Each checker is a pure function returning a `Violation` or None:

- `RejectionErrorCode`: a forged request that must be rejected is answered, at once, with the
  error code Kafka answers it with (INVALID_REQUEST for a malformed request,
  INCONSISTENT_CLUSTER_ID, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER,
  INVALID_VOTER_KEY, INCONSISTENT_VOTER_SET), or, for a Fetch beyond the leader's log, with
  the diverging epoch that sends the fetcher back to the leader's log.
- `OutOfBoundsRefused`: a message carrying an epoch, offset, id or size outside what the wire
  and the quorum-state can hold is refused before any handler sees it (the core says so with
  MessageRefused), and a message at the very edge of those bounds is not.
- `RejectedMessageChangesNothing`: a message that must be rejected moves nothing the replica
  keeps: its quorum-state (epoch, leader, vote), its role, its log, its log start and its HWM;
  one rejected quietly (a Fetch answer from the leader whose batches cannot extend the log) no
  timer either: the replica's next deadline stays where it was (when nothing was due).
- `GrantedVoteIsDurable`: a replica that grants a (real, not pre-) vote has persisted that
  vote, for that candidate in that epoch, before the answer leaves (KIP-595: "the voter
  persists its vote before granting it"); a Prospective, Unattached or Voted replica alike.
- `VoteRecordedOnlyWhenGranted`: handling a vote request records a vote only by granting it:
  a pre-vote (KIP-996) binds nothing, and a real vote refused leaves no vote behind.
- `GrantedVoteLogUpToDate`: a vote or a pre-vote is granted only to a candidate whose log
  (last epoch, end offset) is at least as up-to-date as the granting replica's at that step
  (KIP-595; Kafka's `canGrantVote` in every state that grants), except a real vote granted
  again to the candidate the replica already voted for in that epoch.
- `VoteAnswerPerState`: the converse, for every answer: a vote request answered without error
  is granted exactly when Kafka 4.3.1's `canGrantVote` of the replica's state grants it, and
  one answered with an error is refused (see `kafka_grants`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from kraft.core.effects import ElectionState
from kraft.core.messages import FetchResponse, Message, VoteRequest, VoteResponse
from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_set import VoterSet
from kraft.errors import ErrorCode
from kraft.ids import NO_DIRECTORY, Epoch, NodeId, Offset, ReplicaKey
from refinement.invariants import EpochCache, Violation

REJECTION_ERROR_CODE = "RejectionErrorCode"
OUT_OF_BOUNDS_REFUSED = "OutOfBoundsRefused"
REJECTED_MESSAGE_CHANGES_NOTHING = "RejectedMessageChangesNothing"
GRANTED_VOTE_IS_DURABLE = "GrantedVoteIsDurable"
VOTE_RECORDED_ONLY_WHEN_GRANTED = "VoteRecordedOnlyWhenGranted"
GRANTED_VOTE_LOG_UP_TO_DATE = "GrantedVoteLogUpToDate"
VOTE_ANSWER_PER_STATE = "VoteAnswerPerState"


@dataclass(frozen=True, slots=True)
class Forgery:
    """One forged message and what the replica must make of it.

    `expect` is the set of error codes the answer to a request may carry (None: a response,
    or a request whose answer is not prescribed); `diverging` asks for an answer without error
    that names a diverging epoch instead (a Fetch past the leader's log). `out_of_bounds` says
    whether the bounds check must refuse the message; `rejected` whether nothing the replica
    keeps may move."""

    kind: str
    src: NodeId
    message: Message
    expect: frozenset[ErrorCode] | None
    out_of_bounds: bool
    rejected: bool
    diverging: bool = False
    # Rejected without touching a timer (not even the fetch timer a real answer restarts).
    quiet: bool = False


@dataclass(frozen=True, slots=True)
class KeptState:
    """What a replica keeps across a message: quorum-state, role, log, log start and HWM;
    and when its next timer fires (compared only for a quiet rejection)."""

    persisted: ElectionState | None
    state: ReplicaState | None
    epoch: Epoch
    leader_id: NodeId | None
    voted_for: ReplicaKey | None
    log_end_offset: Offset
    epochs: EpochCache
    log_start_offset: Offset
    high_watermark: Offset | None
    next_deadline_ms: int = -1


def rejection_error_code(node: NodeId, f: Forgery, reply: Message | None) -> Violation | None:
    """RejectionErrorCode: the forged request got its answer with the prescribed error."""
    if f.expect is None and not f.diverging:
        return None
    if reply is None:
        return Violation(
            REJECTION_ERROR_CODE, f"node {node} did not answer the forged {f.kind} from {f.src}"
        )
    error = getattr(reply, "error", None)
    if f.diverging:
        ok = (
            isinstance(reply, FetchResponse)
            and reply.error is ErrorCode.NONE
            and reply.diverging_epoch is not None
        )
        want = "NONE with a diverging epoch"
    else:
        assert f.expect is not None
        ok = error in f.expect
        want = " or ".join(sorted(e.name for e in f.expect))
    if ok:
        return None
    return Violation(
        REJECTION_ERROR_CODE,
        f"node {node} answered the forged {f.kind} from {f.src} with {reply}, not {want}",
    )


def out_of_bounds_refused(node: NodeId, f: Forgery, refused: bool) -> Violation | None:
    """OutOfBoundsRefused: refused exactly when a value is outside the bounds."""
    if refused == f.out_of_bounds:
        return None
    what = "accepted" if f.out_of_bounds else "refused"
    return Violation(
        OUT_OF_BOUNDS_REFUSED,
        f"node {node} {what} the forged {f.kind} from {f.src}: {f.message}",
    )


def rejected_message_changes_nothing(
    node: NodeId, f: Forgery, before: KeptState, after: KeptState, now: int
) -> Violation | None:
    """RejectedMessageChangesNothing: a message that must be rejected moved nothing kept (a
    quiet rejection no timer either, unless one was due at once: that one may fire in the
    step)."""
    if not f.rejected:
        return None
    if not f.quiet or before.next_deadline_ms <= now:
        after = replace(after, next_deadline_ms=before.next_deadline_ms)
    if before == after:
        return None
    changed = [
        f.name for f in fields(KeptState) if getattr(before, f.name) != getattr(after, f.name)
    ]
    detail = ", ".join(f"{n} {getattr(before, n)} -> {getattr(after, n)}" for n in changed)
    return Violation(
        REJECTED_MESSAGE_CHANGES_NOTHING,
        f"node {node} changed {detail} on the forged {f.kind} from {f.src}",
    )


def granted_vote_is_durable(
    node: NodeId, persisted: ElectionState | None, req: VoteRequest, resp: VoteResponse
) -> Violation | None:
    """GrantedVoteIsDurable: a granted real vote is in the voter's quorum-state as it leaves."""
    if not resp.vote_granted or req.pre_vote:
        return None
    if (
        persisted is not None
        and persisted.epoch == req.candidate_epoch
        and persisted.voted_for is not None
        and VoterSet((persisted.voted_for,)).contains(req.candidate)
    ):
        return None
    return Violation(
        GRANTED_VOTE_IS_DURABLE,
        f"node {node} granted its vote in epoch {req.candidate_epoch} to {req.candidate} with"
        f" quorum-state {persisted}",
    )


def vote_recorded_only_when_granted(
    node: NodeId,
    before: ElectionState | None,
    after: ElectionState | None,
    req: VoteRequest,
    resp: VoteResponse | None,
) -> Violation | None:
    """VoteRecordedOnlyWhenGranted: a vote in the quorum-state after a vote request is the one
    before it, or the real vote this answer granted."""
    if after is None or after.voted_for is None:
        return None
    if before is not None and (before.epoch, before.voted_for) == (after.epoch, after.voted_for):
        return None
    if (
        resp is not None
        and resp.vote_granted
        and not req.pre_vote
        and VoterSet((after.voted_for,)).contains(req.candidate)
    ):
        return None
    answer = "no answer" if resp is None else f"answered {resp}"
    return Violation(
        VOTE_RECORDED_ONLY_WHEN_GRANTED,
        f"node {node} recorded a vote for {after.voted_for} in epoch {after.epoch} (was"
        f" {before}) on {'a pre-vote' if req.pre_vote else 'a vote'} request of"
        f" {req.candidate} and {answer}",
    )


@dataclass(frozen=True, slots=True)
class Granter:
    """What GrantedVoteLogUpToDate reads of a replica as a vote request reaches it."""

    state: ReplicaState
    epoch: Epoch
    voted_for: ReplicaKey | None
    last_epoch: Epoch
    end_offset: Offset
    leader_id: NodeId | None = None
    # A Follower's Kafka `hasFetchedFromLeader` as the replica says it (None: not said).
    has_fetched: bool | None = None


def granted_vote_log_up_to_date(
    node: NodeId, before: Granter, req: VoteRequest, resp: VoteResponse | None
) -> Violation | None:
    """GrantedVoteLogUpToDate: a granted answer, to a vote or a pre-vote, went to a candidate
    whose log is at least as up-to-date as the granting replica's (`before`: the replica as
    the request reached it; handling a vote request moves no log): a larger last epoch, or
    the same and an end offset at least as large (KIP-595 "Vote"). Kafka 4.3.1 checks it in
    every state that grants (`canGrantVote` of UnattachedState, with or without a vote (our
    Voted), and ProspectiveState through `QuorumState.unattachedOrProspectiveCanGrantVote`;
    of FollowerState, CandidateState and ResignedState for a pre-vote, KIP-996). The one
    grant without it is a real vote granted again to the candidate this replica already
    voted for in this epoch (the log was compared when the vote was cast). Compared as
    tuples here, not with the core's `log_up_to_date`."""
    if resp is None or not resp.vote_granted:
        return None
    if (
        not req.pre_vote
        and before.epoch == req.candidate_epoch
        and before.voted_for is not None
        and VoterSet((before.voted_for,)).contains(req.candidate)
    ):
        return None
    theirs = (int(req.last_epoch), int(req.last_end_offset))
    mine = (int(before.last_epoch), int(before.end_offset))
    if theirs >= mine:
        return None
    kind = "pre-vote" if req.pre_vote else "vote"
    return Violation(
        GRANTED_VOTE_LOG_UP_TO_DATE,
        f"node {node} ({before.state.value}, epoch {before.epoch}, log (last epoch, end"
        f" offset) {mine}) granted its {kind} in epoch {req.candidate_epoch} to"
        f" {req.candidate}, whose log is {theirs}",
    )


_PROSPECTIVE_OR_UNATTACHED = frozenset(
    (ReplicaState.UNATTACHED, ReplicaState.VOTED, ReplicaState.PROSPECTIVE)
)


def kafka_grants(before: Granter, req: VoteRequest) -> bool | None:
    """Whether Kafka 4.3.1 grants this vote request, one it answers without error, to a
    replica that was `before` as it arrived; None where the answer depends on what the
    Granter does not hold (a Follower's `hasFetchedFromLeader`, when not given). Written
    from the byte code, not from the core:

    - a request of a larger epoch first moves the replica to Unattached in that epoch, with
      no vote and no leader (KafkaRaftClient.handleVoteRequest: `transitionToUnattached`);
    - Unattached, with a vote or not, and Prospective
      (`QuorumState.unattachedOrProspectiveCanGrantVote`): a pre-vote iff the log is up to
      date; a vote, when one was cast in the epoch, iff it is the same replica (same id, and
      the same directory id unless the vote has none); when a leader is known, never;
      otherwise iff the log is up to date;
    - Follower: a pre-vote iff the log is up to date and no Fetch was answered by the leader
      yet (`hasFetchedFromLeader`); never a vote;
    - Candidate and Resigned: a pre-vote iff the log is up to date; never a vote;
    - Leader: never.

    No voter membership is asked of either side (`QuorumState.canGrantVote` delegates to the
    state). "Up to date" compares (last epoch, end offset) as OffsetAndEpoch does."""
    state, voted, leader = before.state, before.voted_for, before.leader_id
    if req.candidate_epoch < before.epoch:
        return False
    if req.candidate_epoch > before.epoch:
        state, voted, leader = ReplicaState.UNATTACHED, None, None
    theirs = (int(req.last_epoch), int(req.last_end_offset))
    up_to_date = theirs >= (int(before.last_epoch), int(before.end_offset))
    if state in _PROSPECTIVE_OR_UNATTACHED:
        if req.pre_vote:
            return up_to_date
        if voted is not None:
            them = req.candidate
            return voted.id == them.id and voted.directory_id in (NO_DIRECTORY, them.directory_id)
        if leader is not None:
            return False
        return up_to_date
    if state is ReplicaState.FOLLOWER:
        if not (req.pre_vote and up_to_date):
            return False
        return None if before.has_fetched is None else not before.has_fetched
    if state is ReplicaState.CANDIDATE or state is ReplicaState.RESIGNED:
        return req.pre_vote and up_to_date
    return False


def vote_answer_per_state(
    node: NodeId, before: Granter, req: VoteRequest, resp: VoteResponse | None
) -> Violation | None:
    """VoteAnswerPerState: the answer to a vote or pre-vote request grants exactly what
    Kafka's `canGrantVote` of the replica's state grants (`kafka_grants`; a Follower's
    pre-vote to an up-to-date log, when the replica does not say whether its leader
    answered a Fetch yet, may go either way here), and an answer with an error
    grants nothing (Kafka's `buildVoteResponse` with an error sets voteGranted false)."""
    if resp is None:
        return None
    if resp.error is not ErrorCode.NONE:
        want: bool | None = False
    else:
        want = kafka_grants(before, req)
    if want is None or want == resp.vote_granted:
        return None
    kind = "pre-vote" if req.pre_vote else "vote"
    verb = "granted" if resp.vote_granted else "refused"
    return Violation(
        VOTE_ANSWER_PER_STATE,
        f"node {node} ({before.state.value}, epoch {before.epoch}, leader {before.leader_id},"
        f" voted for {before.voted_for}, log {(int(before.last_epoch), int(before.end_offset))})"
        f" {verb} the {kind} of {req.candidate} in epoch {req.candidate_epoch} with log"
        f" {(int(req.last_epoch), int(req.last_end_offset))} (error {resp.error.name});"
        f" Kafka's canGrantVote says {'grant' if want else 'refuse'}",
    )
