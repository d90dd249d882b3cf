"""Timing checkers: the contract the quorum's timing configuration promises (KIP-595, Kafka's
QuorumConfig), checked on what the simulator sees of each replica: the events it is given, the
effects it emits and the simulator's virtual clock. The safety checkers of
refinement.invariants cannot see time; these state when things must happen.

Every bound is derived from the configured `QuorumTiming` (the one the replicas run with), with
Kafka's semantics written down here, not taken from the core:

- ElectionTimeoutNotEarly / ElectionTimeoutNotLate: a voter that hears of no leader
  (Unattached, Voted, Prospective, Candidate, Resigned) stands (ElectionTimeout) a random time
  in [T, 2T) after its election timer started, T = quorum.election.timeout.ms. The timer starts
  on entering the state, except that moving to Unattached or Voted from Unattached, Voted,
  Candidate or Resigned keeps it running (Kafka's transitionToUnattached; granting a vote
  restarts it), and so may a Prospective whose pre-vote a majority did not reject. The only
  voter of its voter set stands as it starts (Kafka's KafkaRaftClient.initialize).
- FetchTimeoutNotEarly / FetchTimeoutNotLate: a voter following a leader stands
  quorum.fetch.timeout.ms after it last heard from the leader (this project's deviation: plus a
  jitter below T/2), sooner only when the leader resigned naming it a successor (KIP-595: at once
  for the first, after MIN(quorum.election.backoff.max.ms, quorum.retry.backoff.ms * 2^(N-1))
  for the N-th) or when its connection to the leader broke (within T/4).
- CheckQuorumNotEarly / CheckQuorumNotLate: a leader resigns for want of fetches only once
  1.5 x quorum.fetch.timeout.ms passed without a majority of voters (itself included) fetching
  (Kafka's LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR), and does resign then.
- VoteRetryNotEarly, FetchRetryNotEarly (and ...NotLate): a request is sent again to the
  same replica in the same state only after quorum.request.timeout.ms without an answer, or
  quorum.retry.backoff.ms after a failed one (an error answer, a failed send); a Fetch at once
  after a successful answer. Unanswered, it is sent again when the request timeout runs out. A
  voter whose answer to the Vote request in flight a Prospective or Candidate counted is not
  asked again in that state (Kafka asks only its unrecordedVoters).
- VoteRetryExact (within VoteRetryNotLate): an error answer to the request in flight that
  Kafka counts as a failure (INVALID_REQUEST, INVALID_VOTER_KEY, BROKER_NOT_AVAILABLE,
  INCONSISTENT_CLUSTER_ID, ...; not FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER or
  UNKNOWN_LEADER_EPOCH, nor one naming a newer epoch or a leader of its epoch) backs that
  destination off: the request is sent to it again quorum.retry.backoff.ms after the answer
  (Kafka's RequestManager), neither before nor at the answered request's timeout.
- BeginQuorumEpochRetryNotEarly / BeginQuorumEpochRetryNotLate (Kafka's
  maybeSendBeginQuorumEpochRequests over LeaderState's beginQuorumEpochTimer): a leader sends
  BeginQuorumEpoch only at a round of its timer, which starts expired when it becomes leader
  and restarts for quorum.fetch.timeout.ms / 2 at each round, a round being the leader's first
  step at or after its expiry (and the leader takes a step then). A round asks every other
  voter whose last accepted Fetch of the epoch is at least fetch timeout / 2 old (or that
  never fetched), answered BeginQuorumEpoch or not, unless that voter's connection is not
  ready (Kafka's RequestManager.isReady): a BeginQuorumEpoch to it in flight for less than
  quorum.request.timeout.ms, or a backoff of quorum.retry.backoff.ms after a failed answer to
  it (Kafka's handleBeginQuorumEpochResponse false: an error with no partition data,
  BROKER_NOT_AVAILABLE, INVALID_REQUEST or another error of the leader's epoch; not NONE,
  INVALID_VOTER_KEY, FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH, nor
  one naming another epoch) or a failed send; a successful answer makes it ready at once. Any
  answer of the epoch completes the request in flight (this project's convention: no
  correlation ids). It asks no one else. The voters are the static quorum's; in a dynamic one
  only that requests go out at rounds to ready voters is checked.
- FetchRetryExact (within FetchRetryNotEarly / FetchRetryNotLate): the first answer to the
  Fetch (or FetchSnapshot) in flight ends its request timeout (Kafka's RequestManager
  completes the request whose correlation id the answer carries). A failed one (an error
  from the leader of the epoch, a discovery answer that names no new leader, a failed send)
  is followed by the next Fetch exactly quorum.retry.backoff.ms later, never at the expired
  deadline of the answered request. After SnapshotRequired (a replica built without
  snapshots told to fetch one; this project's rule, kraft.core.follower) the next Fetch comes
  exactly MIN(SNAPSHOT_REFETCH_RETRIES x retry backoff, fetch timeout / 2) later, in the same
  step when that is 0. A successful answer to the FetchSnapshot in flight whose chunk cannot
  belong to the snapshot (no bytes, or ending past its size) is a failed one too (this
  project's rule, kraft.core.snapshot_transfer): the next Fetch comes exactly the retry
  backoff later, not in the same step. So does the driver's answer that the snapshot the
  Follower fetched and asked it to validate is not valid (SnapshotValidated, valid false;
  this project's rule: Kafka validates nothing before it installs a fetched snapshot).
- DiscoveryFetchDoesNotWait: a Fetch to a replica that is not the sender's known leader (an
  observer looking for the leader, a Follower whose leader went silent) asks no long poll,
  max_wait_ms 0 (README's deviations: Kafka sends fetchMaxWaitMs there, which a non-leader
  ignores); a Fetch to the leader asks quorum.fetch.max.wait.ms, or 0 while it is silent.
- FetchAnsweredWithinMaxWait: a leader holds a Fetch it has nothing new for at most the
  max wait the Fetch asks (quorum.fetch.max.wait.ms for a follower), then answers it.
- AppendLingerNotEarly / AppendLingerNotLate: with quorum.append.linger.ms L, a leader writes
  the client appends it gathers as one batch L after the first of them arrived (at once with no
  linger), earlier only when a plain append does not fit beside them in one batch (Kafka's
  MAX_BATCH_SIZE_BYTES, 8 MiB with the batch header) or another write needs them out first (an
  idempotent append, a control record).
- AppendAtReportedOffsets: an accepted client append's records are in the accepting leader's
  log at the offsets its answer reports, in order (several appends gathered in one batch each
  get their own offsets).
- VoterChangeTimeoutNotLate: an AddRaftVoter or RemoveRaftVoter a replica was given is
  answered by quorum.request.timeout.ms after it arrived, REQUEST_TIMED_OUT if nothing else
  (Kafka's LeaderState.maybeExpirePendingOperation, whose time left bounds pollLeader's), while
  the replica runs and is not shutting down.
- QuorumDefaultsAsDocumented: the configuration the simulator runs, the node's defaults, is the
  one documented for the properties (Kafka's QuorumConfig defaults; quorum.append.linger.ms 0,
  this project's documented deviation).

A timer's firing time is known to the checkers as a window [earliest, latest]: where the core's
choice is not visible (a timer kept or restarted, an answer that did or did not reset it), the
window covers both, so that a checker never cries wolf: "not early" fails only when the action
came before the earliest possible time, "not late" only when the latest possible time passed by
more than the simulator's tick granularity.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields

from kraft.core.effects import (
    ActionTaken,
    AppendResult,
    AppendToLog,
    Effect,
    Send,
    SnapshotRequired,
    StateChanged,
    ValidateSnapshot,
)
from kraft.core.events import (
    ClientAppend,
    Event,
    Receive,
    SendFailed,
    Shutdown,
    SnapshotValidated,
    Tick,
)
from kraft.core.messages import (
    AddVoterRequest,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    RemoveVoterRequest,
    VoteRequest,
    VoteResponse,
)
from kraft.core.replica import Replica
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import NO_PRODUCER, NodeId, OffsetAndEpoch
from kraft.records import KeyValue
from refinement.invariants import Violation

ELECTION_TIMEOUT_NOT_EARLY = "ElectionTimeoutNotEarly"
ELECTION_TIMEOUT_NOT_LATE = "ElectionTimeoutNotLate"
FETCH_TIMEOUT_NOT_EARLY = "FetchTimeoutNotEarly"
FETCH_TIMEOUT_NOT_LATE = "FetchTimeoutNotLate"
CHECK_QUORUM_NOT_EARLY = "CheckQuorumNotEarly"
CHECK_QUORUM_NOT_LATE = "CheckQuorumNotLate"
VOTE_RETRY_NOT_EARLY = "VoteRetryNotEarly"
VOTE_RETRY_NOT_LATE = "VoteRetryNotLate"
BEGIN_RETRY_NOT_EARLY = "BeginQuorumEpochRetryNotEarly"
BEGIN_RETRY_NOT_LATE = "BeginQuorumEpochRetryNotLate"
FETCH_RETRY_NOT_EARLY = "FetchRetryNotEarly"
FETCH_RETRY_NOT_LATE = "FetchRetryNotLate"
FETCH_ANSWERED_WITHIN_MAX_WAIT = "FetchAnsweredWithinMaxWait"
DISCOVERY_FETCH_DOES_NOT_WAIT = "DiscoveryFetchDoesNotWait"
APPEND_AT_REPORTED_OFFSETS = "AppendAtReportedOffsets"
APPEND_LINGER_NOT_EARLY = "AppendLingerNotEarly"
APPEND_LINGER_NOT_LATE = "AppendLingerNotLate"
QUORUM_DEFAULTS_AS_DOCUMENTED = "QuorumDefaultsAsDocumented"
VOTER_CHANGE_TIMEOUT_NOT_LATE = "VoterChangeTimeoutNotLate"

TIMING_CHECKERS: tuple[str, ...] = (
    ELECTION_TIMEOUT_NOT_EARLY,
    ELECTION_TIMEOUT_NOT_LATE,
    FETCH_TIMEOUT_NOT_EARLY,
    FETCH_TIMEOUT_NOT_LATE,
    CHECK_QUORUM_NOT_EARLY,
    CHECK_QUORUM_NOT_LATE,
    VOTE_RETRY_NOT_EARLY,
    VOTE_RETRY_NOT_LATE,
    BEGIN_RETRY_NOT_EARLY,
    BEGIN_RETRY_NOT_LATE,
    FETCH_RETRY_NOT_EARLY,
    FETCH_RETRY_NOT_LATE,
    FETCH_ANSWERED_WITHIN_MAX_WAIT,
    APPEND_AT_REPORTED_OFFSETS,
    APPEND_LINGER_NOT_EARLY,
    APPEND_LINGER_NOT_LATE,
    QUORUM_DEFAULTS_AS_DOCUMENTED,
    DISCOVERY_FETCH_DOES_NOT_WAIT,
    VOTER_CHANGE_TIMEOUT_NOT_LATE,
)

# Kafka's LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR.
CHECK_QUORUM_FACTOR = 1.5
# This project's rule for a replica built without snapshots that is told to fetch one
# (SnapshotRequired): it fetches again only after this many retry backoffs, at most half a
# fetch timeout later.
SNAPSHOT_REFETCH_RETRIES = 50
# Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES: the accumulator's batch limit, its 61-byte
# batch header (Kafka's RECORD_BATCH_OVERHEAD) included.
BATCH_LIMIT_BYTES = 8 * 1024 * 1024
BATCH_HEADER_BYTES = 61
# A generous bound on a record's framing in a batch (varint lengths, deltas, attributes): an
# early flush is excused once an append may not fit beside what waits by any reasonable measure.
RECORD_FRAMING_BOUND = 64
# How late (virtual ms) a due timer may fire: the simulator ticks at a replica's next deadline,
# and once more 1 ms later if a timer is still due after a tick.
SLACK_MS = 2

# The documented defaults of the quorum's properties, by QuorumTiming field: Kafka's
# QuorumConfig (quorum.election.timeout.ms, quorum.fetch.timeout.ms,
# quorum.election.backoff.max.ms, quorum.retry.backoff.ms, quorum.request.timeout.ms),
# KafkaRaftClient's fetch limits (MAX_FETCH_SIZE_BYTES, MAX_FETCH_WAIT_MS), KIP-630's
# metadata.start.offset.lag.time.max.ms (7 days), and quorum.append.linger.ms 0 (README:
# this project's default; Kafka's is 25).
DOCUMENTED_DEFAULTS: Mapping[str, int] = {
    "election_timeout_ms": 1000,
    "fetch_timeout_ms": 2000,
    "election_backoff_max_ms": 1000,
    "retry_backoff_ms": 20,
    "request_timeout_ms": 2000,
    "fetch_max_bytes": 1024 * 1024,
    "append_linger_ms": 0,
    "fetch_max_wait_ms": 500,
    "start_offset_lag_time_max_ms": 7 * 24 * 60 * 60 * 1000,
}

U = ReplicaState.UNATTACHED
V = ReplicaState.VOTED
C = ReplicaState.CANDIDATE
L = ReplicaState.LEADER
F = ReplicaState.FOLLOWER
R = ReplicaState.RESIGNED
P = ReplicaState.PROSPECTIVE
_ELECTION_STATES = frozenset({U, V, C, P, R})
_KEEPS_TIMER = frozenset({U, V, C, R})
_FOREVER = 1 << 62


def quorum_defaults_as_documented(defaults: QuorumTiming) -> Violation | None:
    """QuorumDefaultsAsDocumented: every property the configuration leaves unset takes its
    documented default."""
    wrong = [
        f"{f.name}={getattr(defaults, f.name)} (documented {DOCUMENTED_DEFAULTS[f.name]})"
        for f in fields(defaults)
        if f.name in DOCUMENTED_DEFAULTS
        and getattr(defaults, f.name) != DOCUMENTED_DEFAULTS[f.name]
    ]
    missing = sorted(set(DOCUMENTED_DEFAULTS) - {f.name for f in fields(defaults)})
    if wrong or missing:
        return Violation(
            QUORUM_DEFAULTS_AS_DOCUMENTED,
            f"the quorum's defaults differ from the documented ones: {', '.join(wrong)}"
            + (f"; not configurable: {missing}" if missing else ""),
        )
    return None


def successor_delay_ms(position: int, timing: QuorumTiming) -> int:
    """KIP-595 EndQuorumEpoch: the N-th preferred successor (N from 0) stands after
    MIN(quorum.election.backoff.max.ms, quorum.retry.backoff.ms * 2^(N-1)); the first at once."""
    if position <= 0:
        return 0
    delay: int = timing.retry_backoff_ms << (position - 1)
    return min(timing.election_backoff_max_ms, delay)


@dataclass(slots=True)
class _Request:
    """One kind of request to one destination, in one state of the sender: when it was last
    sent, from when a resend is allowed, and by when it is due again (None: maybe answered)."""

    sent: int
    allowed: int
    due: int | None
    # The request itself and where it went; whether an answer to it came back yet.
    message: Message | None = None
    dst: NodeId | None = None
    answered: bool = False


@dataclass(slots=True)
class _Ghost:
    """What the checkers track of one running replica."""

    state: ReplicaState | None = None
    epoch: int = 0
    leader: NodeId | None = None
    shutting_down: bool = False
    # The window of the running election timer (Unattached, Voted, Prospective, Candidate,
    # Resigned) or fetch timer (Follower): (earliest, latest) firing time.
    timer: tuple[int, int] | None = None
    # Requests of the current state: (kind, destination) -> _Request.
    requests: dict[tuple[str, NodeId | None], _Request] = field(default_factory=dict)
    # A FetchSnapshot was sent in this state (a snapshot transfer may be running, during
    # which a Fetch answer from the leader is put aside).
    transferring: bool = False
    # The step being checked answers the Fetch in flight for the first time, or fails it.
    settled: bool = False
    # Follower: the snapshot it asked the driver to validate (ValidateSnapshot), until the
    # answer; the step being checked is the driver's answer that it is not valid.
    validating: OffsetAndEpoch | None = None
    invalidated: bool = False
    # Leader: when it became leader, each voter's last Fetch it certainly accepted, and the
    # last Fetch (or FetchSnapshot) from any voter it may have accepted.
    became: int = 0
    accepted: dict[NodeId, int] = field(default_factory=dict)
    # The size of its voter set after its last step, whether it was in it, and when that set
    # last grew from one voter (a leader's check-quorum timer starts then: Kafka's
    # LeaderState.timeUntilCheckQuorumExpires runs no timer for a single voter).
    voters_n: int | None = None
    in_voters: bool = True
    regrown: int = -1
    maybe_accepted: int = -1
    # Leader: when its BeginQuorumEpoch timer runs out (a round is due), and by voter when
    # its connection is ready again (a BeginQuorumEpoch in flight or a backoff; absent:
    # ready); the voters a Fetch of the epoch may have reached the leader from, and when.
    begin_at: int = 1 << 62  # _FOREVER
    begin_ready: dict[NodeId, int] = field(default_factory=dict)
    maybe_fetched: dict[NodeId, int] = field(default_factory=dict)
    # Leader: the Fetches it received and has not answered, by sender: by when each must be.
    held: dict[NodeId, list[int]] = field(default_factory=dict)
    # Leader: the plain client appends waiting in its accumulator (request id -> arrival,
    # bytes), in arrival order.
    lingering: dict[int, tuple[int, int]] = field(default_factory=dict)
    # Per step: the oldest waiting append's arrival and what waits, before the step; when the
    # step last wrote gathered appends.
    oldest: int | None = None
    waiting_bytes: int = 0
    flushed_at: int = -1
    # The voter changes it was given and has not answered: reply token -> by when (kept
    # across state changes: a change outlives its leader's term until it is answered).
    changes: dict[int, int] = field(default_factory=dict)


class TimingMonitor:
    """The timing checkers over one simulation: told of every step of every replica, in
    virtual time order (`step`), of starts and stops, and asked before each event whether a
    due action is overdue (`overdue`). Voter-dependent checks (the election and fetch timers,
    check-quorum) run only for a static voter set (`voters` given)."""

    def __init__(self, timing: QuorumTiming, voters: Sequence[NodeId] | None) -> None:
        self.timing = timing
        self.voters: frozenset[NodeId] = frozenset(voters or ())
        self.static = voters is not None
        t = timing
        self._et = t.election_timeout_ms
        jitter = t.election_timeout_ms // 2
        self._fetch_span = (t.fetch_timeout_ms, t.fetch_timeout_ms + max(jitter - 1, 0))
        self._check_quorum_ms = int(t.fetch_timeout_ms * CHECK_QUORUM_FACTOR)
        majority = len(self.voters) // 2 + 1
        self._needed = majority - 1  # besides the leader itself
        self._ghosts: dict[NodeId, _Ghost] = {}

    # ------------------------------------------------------------------ lifecycle

    def started(self, node: NodeId, now: int, effects: Sequence[Effect]) -> Violation | None:
        """A replica (re)started: every timer starts afresh."""
        g = self._ghosts[node] = _Ghost()
        found = self._effects(node, g, now, None, effects, starting=True)
        # The only voter leads as it starts: its first BeginQuorumEpoch round is this step.
        return found if found is not None else self._begin_round(node, g, now, effects)

    def stopped(self, node: NodeId) -> None:
        self._ghosts.pop(node, None)

    # ------------------------------------------------------------------ overdue actions

    def overdue(self, now: int) -> Violation | None:
        """Something due by now that a running replica did not do."""
        for node, g in self._ghosts.items():
            if g.shutting_down or g.state is None:
                continue
            late = now - SLACK_MS
            if g.timer is not None and g.timer[1] < late and node in self.voters:
                name = FETCH_TIMEOUT_NOT_LATE if g.state is F else ELECTION_TIMEOUT_NOT_LATE
                return Violation(
                    name,
                    f"node {node} ({g.state.value}, epoch {g.epoch}) should have stood by"
                    f" t={g.timer[1]}ms (timer window {g.timer[0]}..{g.timer[1]}ms)",
                )
            if g.state is L and self.static and len(self.voters) > 1:
                heard = max(g.became, g.maybe_accepted)
                if heard + self._check_quorum_ms < late:
                    return Violation(
                        CHECK_QUORUM_NOT_LATE,
                        f"leader {node} (epoch {g.epoch}) heard no Fetch from a voter since"
                        f" t={heard}ms but still leads {now - heard}ms later (check-quorum"
                        f" {self._check_quorum_ms}ms)",
                    )
            if g.state is L and self.static and g.begin_at < late:
                return Violation(
                    BEGIN_RETRY_NOT_LATE,
                    f"leader {node} (epoch {g.epoch}) took no step since its BeginQuorumEpoch"
                    f" timer ran out at t={g.begin_at}ms",
                )
            if g.state is L:
                for src, dues in g.held.items():
                    if dues and min(dues) < late:
                        return Violation(
                            FETCH_ANSWERED_WITHIN_MAX_WAIT,
                            f"leader {node} (epoch {g.epoch}) still holds a Fetch from {src}"
                            f" it had to answer by t={min(dues)}ms",
                        )
            if g.state is L and g.lingering:
                oldest = min(a for a, _ in g.lingering.values())
                linger = max(self.timing.append_linger_ms, 0)
                if oldest + linger < late:
                    return Violation(
                        APPEND_LINGER_NOT_LATE,
                        f"leader {node} (epoch {g.epoch}) still holds client appends that"
                        f" arrived at t={oldest}ms (linger {linger}ms)",
                    )
            for token, due in g.changes.items():
                if due < late:
                    return Violation(
                        VOTER_CHANGE_TIMEOUT_NOT_LATE,
                        f"node {node} ({g.state.value}, epoch {g.epoch}) has not answered the"
                        f" voter change (reply token {token}) it had to answer by t={due}ms"
                        f" (request timeout {self.timing.request_timeout_ms}ms)",
                    )
            for (kind, dst), req in g.requests.items():
                if req.due is not None and req.due < late:
                    return Violation(
                        _LATE[kind],
                        f"node {node} ({g.state.value}, epoch {g.epoch}) sent its {kind}"
                        f" request to {dst} at t={req.sent}ms, unanswered or refused, and did"
                        f" not send it again by t={req.due}ms",
                    )
        return None

    # ------------------------------------------------------------------ steps

    def step(
        self,
        node: NodeId,
        now: int,
        event: Event,
        effects: Sequence[Effect],
        leader: NodeId | None,
        *,
        voters: Sequence[NodeId] | None = None,
    ) -> Violation | None:
        """One step of a running replica: `event` in, `effects` out; `leader` the leader it
        knows after the step, `voters` its voter set after the step (if known)."""
        g = self._ghosts.get(node)
        if g is None:
            return None
        if voters is not None:
            n = len(voters)
            if g.voters_n == 1 and n > 1:
                g.regrown = now
            g.voters_n = n
            g.in_voters = node in voters
        if type(event) is Shutdown:
            g.shutting_down = True
        g.settled = False
        g.invalidated = False
        if type(event) is SnapshotValidated:
            assert isinstance(event, SnapshotValidated)
            g.invalidated = not event.valid and g.state is F and g.validating == event.snapshot_id
            g.validating = None
        if g.lingering:
            g.oldest = min(a for a, _ in g.lingering.values())
            g.waiting_bytes = sum(b for _, b in g.lingering.values())
        else:
            g.oldest, g.waiting_bytes = None, 0
        if type(event) is Receive:
            assert isinstance(event, Receive)
            self._received(node, g, now, event)
            token = event.reply_to
            if token is not None and type(event.message) in _VOTER_CHANGES:
                g.changes[token] = now + self.timing.request_timeout_ms
        elif type(event) is SendFailed:
            self._send_failed(g, now, event)
        found = self._effects(node, g, now, event, effects, starting=False)
        if g.changes:
            for e in effects:
                if type(e) is Send:
                    assert isinstance(e, Send)
                    if e.reply_to is not None:
                        g.changes.pop(e.reply_to, None)
        g.leader = leader
        if found is None:
            # The step's Fetches went out in the state and to the leader it ended with.
            for e in effects:
                if type(e) is Send and type(e.message) is FetchRequest:
                    assert isinstance(e, Send) and isinstance(e.message, FetchRequest)
                    found = self._fetch_wait(node, g, now, e.dst, e.message)
                    if found is not None:
                        return found
            found = self._after(node, g, now, event, effects)
        return found

    def _received(self, node: NodeId, g: _Ghost, now: int, ev: Receive) -> None:
        msg = ev.message
        src = ev.src
        t = type(msg)
        rb = self.timing.retry_backoff_ms
        if t is VoteResponse:
            assert isinstance(msg, VoteResponse)
            req = g.requests.get(("Vote", src))
            if msg.error in (ErrorCode.NONE, ErrorCode.FENCED_LEADER_EPOCH):
                if msg.error is ErrorCode.NONE and not msg.vote_granted:
                    # A rejection may end the round for every destination.
                    for (kind, _), r in g.requests.items():
                        if kind == "Vote":
                            r.due = None
                if req is not None:
                    req.due = None
                    if (
                        msg.error is ErrorCode.NONE
                        and self.static
                        and g.state in (P, C)
                        and msg.leader_epoch == g.epoch
                        and ev.in_reply_to is not None
                        and ev.in_reply_to == req.message
                    ):
                        # Counted (Kafka's EpochElection.recordVote): no longer one of the
                        # unrecordedVoters that maybeSendVoteRequests asks, in this state.
                        req.allowed = _FOREVER
            elif req is not None:
                req.allowed = min(req.allowed, now + rb)
                # A voter that knows no leader of our epoch refused the request in flight:
                # asked again once the backoff ran out (VoteRetryExact).
                backs_off = msg.leader_epoch < g.epoch or (
                    msg.leader_epoch == g.epoch and msg.leader_id < 0
                )
                req.due = self._retried(req, ev, msg.error, now) if backs_off else None
        elif t is BeginQuorumEpochResponse:
            assert isinstance(msg, BeginQuorumEpochResponse)
            of = ev.in_reply_to
            current = not isinstance(of, BeginQuorumEpochRequest) or of.leader_epoch == g.epoch
            if g.state is L and src in g.begin_ready and current:
                # The answer completes the request in flight: ready at once, or backed off.
                if _begin_answer_handled(msg, g.epoch):
                    del g.begin_ready[src]
                else:
                    g.begin_ready[src] = now + rb
        elif t is FetchResponse or t is FetchSnapshotResponse:
            assert isinstance(msg, FetchResponse | FetchSnapshotResponse)
            req = g.requests.get(("Fetch", None))
            if req is not None:
                # A snapshot the leader no longer has, or a position past its end, is an
                # answer (Kafka handles it and fetches again at once), not a failure; a chunk
                # that cannot belong to the snapshot is one (this project's rule).
                ok = msg.error in _ANSWERED and not (
                    t is FetchSnapshotResponse
                    and not req.answered
                    and _chunk_not_of_snapshot(g, ev, req)
                )
                req.allowed = min(req.allowed, now if ok else now + rb)
                req.due = None
                if not req.answered:
                    # The first answer since the Fetch went out, to it or to an earlier one.
                    req.answered = True
                    g.settled = True
        elif t is FetchRequest and g.state is L:
            assert isinstance(msg, FetchRequest)
            g.held.setdefault(src, []).append(now + max(msg.max_wait_ms, 0))
        if (t is FetchRequest or t is FetchSnapshotRequest) and g.state is L and src in self.voters:
            g.maybe_accepted = now
            if t is FetchRequest:
                g.maybe_fetched[src] = now

    def _retried(self, req: _Request, ev: Receive, error: ErrorCode, now: int) -> int | None:
        """VoteRetryExact: an error answer to the Vote request in flight that Kafka counts as a
        failure (its maybeHandleCommonResponse: BROKER_NOT_AVAILABLE, INVALID_VOTER_KEY,
        INVALID_REQUEST; handleUnexpectedError: any other but the ones that move the replica to
        another epoch or leader) backs the destination off (RequestManager.onResponseResult), and
        the request, still wanted, is sent again when the backoff runs out: by then, not at
        the answered request's timeout. Due only where the request was (a static quorum, no
        answer or endorsement came since it was sent)."""
        if (
            error in _NO_BACKOFF
            or req.due is None
            or not self.static
            or ev.in_reply_to is None
            or ev.in_reply_to != req.message
        ):
            return None
        return now + self.timing.retry_backoff_ms

    def _send_failed(self, g: _Ghost, now: int, ev: SendFailed) -> None:
        """A failed send backs off every request to that destination (Kafka's request manager
        keeps one connection state per destination), whatever request failed; a request of
        this state that failed unanswered is sent again once the backoff ran out."""
        kind = _KIND.get(type(ev.request))
        until = now + self.timing.retry_backoff_ms
        fetch = g.requests.get(("Fetch", None))
        if fetch is not None and not fetch.answered and kind == "Fetch":
            # Any failed Fetch ends the one in flight; a failed FetchSnapshot ends the
            # transfer's request in flight, and may be a late one of a transfer that is over.
            fetch.answered = True
            g.settled = type(ev.request) is FetchRequest or type(fetch.message) is (
                FetchSnapshotRequest
            )
        current = _request_epoch(ev.request) in (None, g.epoch)
        if kind == "BeginQuorumEpoch" and g.state is L and current and ev.dst in g.begin_ready:
            g.begin_ready[ev.dst] = until
        for (k, dst), req in g.requests.items():
            if dst == ev.dst or (k == "Fetch" and kind == "Fetch"):
                req.allowed = min(req.allowed, until)
                # The Fetch stream's resend is pinned by FetchRetryExact once the step is
                # seen (a late failure of another kind of request fails nothing in flight).
                if k == kind and k != "Fetch" and current and req.due is not None and self.static:
                    req.due = until
                else:
                    req.due = None

    def _effects(
        self,
        node: NodeId,
        g: _Ghost,
        now: int,
        event: Event | None,
        effects: Sequence[Effect],
        *,
        starting: bool,
    ) -> Violation | None:
        is_voter = node in self.voters
        for e in effects:
            t = type(e)
            if t is Send:
                assert isinstance(e, Send)
                found = self._sent(node, g, now, e.dst, e.message)
                if found is not None:
                    return found
            elif t is StateChanged:
                assert isinstance(e, StateChanged)
                self._state_changed(g, now, e, is_voter, starting=starting)
            elif t is ActionTaken:
                assert isinstance(e, ActionTaken)
                found = self._action(
                    node, g, now, event, e.action, is_voter=is_voter, starting=starting
                )
                if found is not None:
                    return found
            elif t is AppendResult:
                assert isinstance(e, AppendResult)
                found = self._append_result(node, g, now, event, e)
                if found is not None:
                    return found
            elif t is ValidateSnapshot and g.state is F:
                assert isinstance(e, ValidateSnapshot)
                g.validating = e.snapshot_id
                if g.timer is not None:
                    # The fetch timer stops while the driver validates a fetched snapshot.
                    g.timer = (g.timer[0], _FOREVER)
            elif t is AppendToLog:
                pass
        return None

    def _state_changed(
        self, g: _Ghost, now: int, e: StateChanged, is_voter: bool, *, starting: bool
    ) -> None:
        old, new = g.state, e.new
        et = self._et
        fresh = (now + et, now + 2 * et - 1) if et > 0 else (now, now)
        if not is_voter or not self.static:
            g.timer = None
        elif new in (P, C, R):
            g.timer = fresh
        elif new in (U, V):
            if starting or old is None or g.timer is None:
                g.timer = fresh
            elif old in _KEEPS_TIMER and not (old is U and new is V):
                pass  # kept (Kafka's transitionToUnattached)
            elif old is P:
                g.timer = (min(g.timer[0], fresh[0]), max(g.timer[1], fresh[1]))
            else:
                g.timer = fresh
        elif new is F:
            lo, hi = self._fetch_span
            g.timer = (now + lo, now + hi)
        else:
            g.timer = None
        if new is L:
            g.became = now
            g.accepted = {}
            g.maybe_accepted = -1
            # The timer starts expired; every connection is reset (Kafka's onBecomeLeader).
            g.begin_at = now
            g.begin_ready = {}
            g.maybe_fetched = {}
        else:
            g.begin_at = _FOREVER
        if new is not L:
            g.held = {}
        if old is L or new is not L:
            g.lingering = {}
        g.state, g.epoch = new, e.epoch
        g.requests = {}
        g.transferring = False
        g.validating = None

    def _action(
        self,
        node: NodeId,
        g: _Ghost,
        now: int,
        event: Event | None,
        action: Action,
        *,
        is_voter: bool,
        starting: bool = False,
    ) -> Violation | None:
        # The only voter stands as it starts (Kafka's initialize), its timer not yet run.
        alone = starting and len(self.voters) == 1
        if action is Action.ELECTION_TIMEOUT and is_voter and self.static and not alone:
            timer = g.timer
            if timer is not None and now < timer[0]:
                name = FETCH_TIMEOUT_NOT_EARLY if g.state is F else ELECTION_TIMEOUT_NOT_EARLY
                state = "?" if g.state is None else g.state.value
                return Violation(
                    name,
                    f"node {node} ({state}, epoch {g.epoch}) stood at t={now}ms, before its"
                    f" timer could run out (window {timer[0]}..{timer[1]}ms)",
                )
        elif (
            action is Action.RESIGN
            and type(event) is Tick
            and g.state is L
            and not g.shutting_down
            and (self.static or g.in_voters)
        ):
            # A dynamic leader outside its voter set resigns on its removal (KIP-856), not
            # for check-quorum: only a leader among its voters is judged.
            return self._check_quorum_resign(node, g, now)
        return None

    def _check_quorum_resign(self, node: NodeId, g: _Ghost, now: int) -> Violation | None:
        cq = self._check_quorum_ms
        if now - g.became < cq:
            return Violation(
                CHECK_QUORUM_NOT_EARLY,
                f"leader {node} (epoch {g.epoch}) resigned for want of fetches"
                f" {now - g.became}ms after it became leader (check-quorum {cq}ms)",
            )
        if now - g.regrown < cq:
            return Violation(
                CHECK_QUORUM_NOT_EARLY,
                f"leader {node} (epoch {g.epoch}) resigned for want of fetches"
                f" {now - g.regrown}ms after its voter set grew from one voter, which starts"
                f" its check-quorum timer (check-quorum {cq}ms)",
            )
        if not self.static:
            return None  # the majority below is the static voter set's
        # Voters that fetched within the last check-quorum timeout: if a majority with the
        # leader did, the timer restarted within it and has not run out.
        recent = sorted(v for v, at in g.accepted.items() if at > now - cq)
        if len(recent) >= self._needed:
            return Violation(
                CHECK_QUORUM_NOT_EARLY,
                f"leader {node} (epoch {g.epoch}) resigned for want of fetches at t={now}ms"
                f" although voters {recent} fetched within the last {cq}ms",
            )
        return None

    def _sent(
        self, node: NodeId, g: _Ghost, now: int, dst: NodeId, msg: Message
    ) -> Violation | None:
        t = type(msg)
        kind = _KIND.get(t)
        if kind is None:
            if t is FetchResponse and g.state is L:
                held = g.held.get(dst)
                if held:
                    held.remove(min(held))
            if t is FetchResponse and g.state is L and dst in self.voters:
                assert isinstance(msg, FetchResponse)
                g.maybe_accepted = now
                if (
                    msg.error is ErrorCode.NONE
                    and msg.diverging_epoch is None
                    and msg.snapshot_id is None
                    and msg.leader_epoch == g.epoch
                ):
                    g.accepted[dst] = now
                    g.maybe_fetched[dst] = now
            return None
        if kind == "BeginQuorumEpoch":
            return None  # judged with the step's other sends (_begin_round)
        key = (kind, None if kind == "Fetch" else dst)
        req = g.requests.get(key)
        if req is not None and req.allowed == _FOREVER:
            return Violation(
                _EARLY[kind],
                f"node {node} ({g.state.value if g.state else '?'}, epoch {g.epoch}) asked"
                f" {dst} again at t={now}ms although it counted its answer to the {kind}"
                f" request of t={req.sent}ms",
            )
        if req is not None and now < req.allowed:
            state = "?" if g.state is None else g.state.value
            return Violation(
                _EARLY[kind],
                f"node {node} ({state}, epoch {g.epoch}) sent its {kind} request to {dst} again"
                f" at t={now}ms, {now - req.sent}ms after the last one, before t={req.allowed}ms"
                f" (request timeout {self.timing.request_timeout_ms}ms, retry backoff"
                f" {self.timing.retry_backoff_ms}ms)",
            )
        rt = self.timing.request_timeout_ms
        g.requests[key] = _Request(now, now + rt, now + rt, msg, dst)
        if t is FetchSnapshotRequest:
            g.transferring = True
        return None

    def _fetch_wait(
        self, node: NodeId, g: _Ghost, now: int, dst: NodeId, msg: FetchRequest
    ) -> Violation | None:
        """DiscoveryFetchDoesNotWait: a Fetch to anyone but the known leader asks no long poll
        (README: Kafka's maybeSendAnyVoterFetch builds the leader's Fetch, with
        fetchMaxWaitMs, which only a leader would honour; this project asks 0 there); one
        to the leader asks quorum.fetch.max.wait.ms, or 0 while the leader is silent."""
        wait = msg.max_wait_ms
        to_leader = g.state is F and dst == g.leader
        if wait == 0 or (to_leader and wait == self.timing.fetch_max_wait_ms):
            return None
        state = "?" if g.state is None else g.state.value
        return Violation(
            DISCOVERY_FETCH_DOES_NOT_WAIT,
            f"node {node} ({state}, epoch {g.epoch}, leader {g.leader}) sent a Fetch to {dst}"
            f" at t={now}ms asking a long poll of {wait}ms (discovery: 0; to the leader: 0 or"
            f" {self.timing.fetch_max_wait_ms})",
        )

    def _after(
        self, node: NodeId, g: _Ghost, now: int, event: Event, effects: Sequence[Effect]
    ) -> Violation | None:
        """What the step says about the fetch timer and the accepted fetches, once its
        effects are known."""
        found = self._fetch_retry_exact(node, g, now, event, effects)
        self._timers_after(node, g, now, event, effects)
        begun = self._begin_round(node, g, now, effects)
        return found if found is not None else begun

    def _begin_round(
        self, node: NodeId, g: _Ghost, now: int, effects: Sequence[Effect]
    ) -> Violation | None:
        """BeginQuorumEpochRetryNotEarly / NotLate: the step's BeginQuorumEpoch requests are
        its round's, if its timer ran out (see the module's docstring)."""
        asked = [
            e.dst for e in effects if type(e) is Send and type(e.message) is BeginQuorumEpochRequest
        ]
        if g.state is not L:
            return None
        if now < g.begin_at:
            if asked:
                return Violation(
                    BEGIN_RETRY_NOT_EARLY,
                    f"leader {node} (epoch {g.epoch}) sent BeginQuorumEpoch to {sorted(asked)}"
                    f" at t={now}ms, before its timer ran out at t={g.begin_at}ms",
                )
            return None
        half = self.timing.fetch_timeout_ms // 2
        rt = self.timing.request_timeout_ms
        waiting = [v for v, at in g.begin_ready.items() if at > now]
        busy = [v for v in asked if v in waiting]
        if busy or len(set(asked)) != len(asked) or node in asked:
            return Violation(
                BEGIN_RETRY_NOT_EARLY,
                f"leader {node} (epoch {g.epoch}) sent BeginQuorumEpoch at t={now}ms to"
                f" {sorted(asked)}, of which {sorted(busy)} have a request in flight or back off"
                " (or one twice, or itself)",
            )
        if self.static:
            fresh = [v for v in asked if v in g.accepted and now - g.accepted[v] < half]
            if fresh or any(v not in self.voters for v in asked):
                return Violation(
                    BEGIN_RETRY_NOT_EARLY,
                    f"leader {node} (epoch {g.epoch}) sent BeginQuorumEpoch at t={now}ms to"
                    f" {sorted(asked)}: {sorted(fresh)} fetched within fetch timeout / 2"
                    f" ({half}ms), or one is no voter",
                )
            missed = sorted(
                v
                for v in self.voters
                if v != node
                and v not in asked
                and v not in waiting
                and (v not in g.maybe_fetched or now - g.maybe_fetched[v] >= half)
            )
            if missed:
                return Violation(
                    BEGIN_RETRY_NOT_LATE,
                    f"leader {node} (epoch {g.epoch}) ran its BeginQuorumEpoch round at"
                    f" t={now}ms (timer out at t={g.begin_at}ms) and did not ask {missed},"
                    f" ready and with no Fetch within {half}ms",
                )
        for v in asked:
            g.begin_ready[v] = now + rt
        g.begin_at = now + half
        return None

    def _fetch_retry_exact(
        self, node: NodeId, g: _Ghost, now: int, event: Event, effects: Sequence[Effect]
    ) -> Violation | None:
        """FetchRetryExact: when the next Fetch is due after this step, exactly.

        Kafka's RequestManager keeps one request in flight per destination and completes it
        with the first answer carrying its correlation id: a good answer makes the
        destination ready at once, a failed one (an error code, or a failed send) backs it
        off for quorum.retry.backoff.ms; the request timeout of a completed request no
        longer counts. A step that changed the replica's state, or fetched again, is judged
        by the rules of what it did; only an answer whose handling Kafka fixes is pinned."""
        rb = self.timing.retry_backoff_ms
        req = g.requests.get(("Fetch", None))
        changed = any(type(e) is StateChanged for e in effects)
        if not changed and g.state is F and any(type(e) is SnapshotRequired for e in effects):
            # This project's rule (kraft.core.follower): a replica that cannot fetch the
            # snapshot its leader names asks again only after a long backoff.
            backoff = max(min(SNAPSHOT_REFETCH_RETRIES * rb, self.timing.fetch_timeout_ms // 2), 0)
            fetched = _fetches(effects)
            if fetched != (backoff == 0):
                return Violation(
                    FETCH_RETRY_NOT_LATE if backoff == 0 else FETCH_RETRY_NOT_EARLY,
                    f"node {node} (Follower, epoch {g.epoch}) was told at t={now}ms to fetch a"
                    f" snapshot it cannot fetch and {'did' if fetched else 'did not'} fetch"
                    f" again in that step (backoff {backoff}ms)",
                )
            if req is not None and backoff > 0:
                req.allowed = now + backoff
                if self.static:
                    req.due = now + backoff
            return None
        if g.invalidated and not changed:
            # This project's rule (kraft.core.snapshot_transfer): a fetched snapshot the
            # driver found broken sends the Follower back to Fetch after the retry backoff,
            # as a chunk that cannot belong to the snapshot does.
            if _fetches(effects):
                return Violation(
                    FETCH_RETRY_NOT_EARLY,
                    f"node {node} (Follower, epoch {g.epoch}) was told at t={now}ms that the"
                    " snapshot it fetched is not valid and fetched again in that step (retry"
                    f" backoff {rb}ms)",
                )
            if req is not None:
                req.allowed = now + rb
                if self.static:
                    req.due = now + rb
            return None
        if changed or _fetches(effects):
            return None
        if not g.settled or req is None:
            return None
        if type(event) is Receive and not (
            _took(effects, Action.HANDLE_FETCH_RESPONSE)
            or _took(effects, Action.HANDLE_FETCH_SNAPSHOT_RESPONSE)
        ):
            req.answered = False  # not handled (a stub replica): as if it never came
            return None
        # Its own name: `backoff` above is an int, and mypyc keeps one type per local.
        waits: bool
        if type(event) is SendFailed:
            waits = True
        elif type(event) is Receive:
            assert isinstance(event, Receive)
            waits = self._failed_answer(g, event, req)
        else:
            waits = False
        if waits:
            req.allowed = now + rb
            if self.static:
                req.due = now + rb
        return None

    def _failed_answer(self, g: _Ghost, event: Receive, req: _Request) -> bool:
        """The first answer to the Fetch in flight, handled without a state change, is one
        after which the next Fetch waits the retry backoff: an error from the leader of the
        epoch, or the answer of another replica to a Fetch looking for the leader (it named
        no newer leader, or the state would have changed)."""
        msg = event.message
        src = event.src
        if type(msg) is FetchSnapshotResponse:
            assert isinstance(msg, FetchSnapshotResponse)
            # Only while the transfer certainly runs (its request is the one in flight): a
            # chunk answered after the transfer ended is put aside.
            return (
                type(req.message) is FetchSnapshotRequest
                and g.state is F
                and src == g.leader
                and msg.leader_epoch == g.epoch
                and msg.error not in _ANSWERED
            ) or _chunk_not_of_snapshot(g, event, req)
        if type(msg) is not FetchResponse:
            return False
        assert isinstance(msg, FetchResponse)
        if g.state is U:
            return True  # an observer looking for the leader
        if g.state is not F:
            return False
        if req.dst != g.leader:
            return src == req.dst  # a Follower of a silent leader asking the voters
        # An answer to a Fetch from another log position is put aside (stale).
        asked = req.message
        of = event.in_reply_to
        stale = (
            isinstance(of, FetchRequest)
            and isinstance(asked, FetchRequest)
            and (of.fetch_offset, of.last_fetched_epoch)
            != (asked.fetch_offset, asked.last_fetched_epoch)
        )
        return (
            src == g.leader
            and msg.leader_epoch == g.epoch
            and msg.error is not ErrorCode.NONE
            and not g.transferring
            and not stale
        )

    def _timers_after(
        self, node: NodeId, g: _Ghost, now: int, event: Event, effects: Sequence[Effect]
    ) -> None:
        t = type(event)
        if t is Receive:
            assert isinstance(event, Receive)
            msg = event.message
            mt = type(msg)
            if (
                (mt is FetchResponse or mt is FetchSnapshotResponse)
                and g.state is F
                and g.timer is not None
            ):
                assert isinstance(msg, FetchResponse | FetchSnapshotResponse)
                if event.src == g.leader and msg.leader_epoch == g.epoch:
                    # An answer from the leader may show it alive; one followed by a request
                    # at once certainly did (a successful Fetch answer, a snapshot chunk, a
                    # snapshot to fetch or gone).
                    self._leader_heard(g, now, definite=_fetches(effects))
            elif mt is FetchRequest and g.state is L and event.src in self.voters:
                assert isinstance(msg, FetchRequest)
                if msg.replica_epoch == g.epoch and not _answers(effects, event.src):
                    g.accepted[event.src] = now  # held until there is news
            elif (
                mt is EndQuorumEpochRequest
                and g.state is F
                and g.timer is not None
                and node in self.voters
            ):
                assert isinstance(msg, EndQuorumEpochRequest)
                if (
                    msg.leader_id == g.leader
                    and msg.leader_epoch == g.epoch
                    and node in msg.preferred_successors
                ):
                    d = successor_delay_ms(msg.preferred_successors.index(node), self.timing)
                    g.timer = (min(g.timer[0], now + d), min(g.timer[1], now + d))
        elif t is SnapshotValidated and g.state is F and g.timer is not None:
            # The fetch timer runs again from the driver's answer (unless the transfer was
            # abandoned meanwhile); certainly if the replica fetches again at once.
            self._leader_heard(g, now, definite=_fetches(effects))
        elif t is SendFailed:
            assert isinstance(event, SendFailed)
            req = event.request
            if (
                Replica.pre_vote_enabled
                and event.broken
                and g.state is F
                and g.timer is not None
                and node in self.voters
                and not g.shutting_down
                and event.dst == g.leader
                and isinstance(req, FetchRequest | FetchSnapshotRequest)
                and req.replica_epoch == g.epoch
            ):
                window = self._et // 4
                g.timer = (min(g.timer[0], now), min(g.timer[1], now + max(window - 1, 0)))
        elif t is ClientAppend:
            assert isinstance(event, ClientAppend)
            if (
                g.state is L
                and event.producer == NO_PRODUCER
                and event.records
                and not _decided(effects, event.request_id)
                and _took(effects, Action.CLIENT_APPEND)
            ):
                g.lingering[event.request_id] = (now, _bytes_of(event))

    def _leader_heard(self, g: _Ghost, now: int, *, definite: bool) -> None:
        """The fetch timer restarted now (`definite`), or may have."""
        assert g.timer is not None
        lo, hi = self._fetch_span
        if definite:
            g.timer = (now + lo, now + hi)
        else:
            g.timer = (g.timer[0], max(g.timer[1], now + hi))

    # ------------------------------------------------------------------ the accumulator

    def _append_result(
        self, node: NodeId, g: _Ghost, now: int, event: Event | None, res: AppendResult
    ) -> Violation | None:
        waited = g.lingering.pop(res.request_id, None)
        if g.state is not L or res.error is not ErrorCode.NONE:
            return None
        linger = max(self.timing.append_linger_ms, 0)
        arrival = now if waited is None else waited[0]
        if now - arrival > linger:
            return Violation(
                APPEND_LINGER_NOT_LATE,
                f"leader {node} (epoch {g.epoch}) wrote client append {res.request_id} at"
                f" t={now}ms, {now - arrival}ms after it arrived (linger {linger}ms)",
            )
        plain = isinstance(event, ClientAppend) and event.producer == NO_PRODUCER
        current = isinstance(event, ClientAppend) and event.request_id == res.request_id
        if linger == 0 and waited is not None:
            return Violation(
                APPEND_LINGER_NOT_LATE,
                f"leader {node} (epoch {g.epoch}) wrote client append {res.request_id} after"
                " the step that received it, with no linger",
            )
        if linger == 0 or (waited is None and not current) or g.flushed_at == now:
            return None
        g.flushed_at = now  # the first append of the batch is the oldest that waited
        if isinstance(event, Tick) and g.oldest is not None and now - g.oldest < linger:
            return Violation(
                APPEND_LINGER_NOT_EARLY,
                f"leader {node} (epoch {g.epoch}) wrote its gathered client appends at"
                f" t={now}ms, {now - g.oldest}ms after the first of them arrived (linger"
                f" {linger}ms)",
            )
        if plain and isinstance(event, ClientAppend):
            size = BATCH_HEADER_BYTES + g.waiting_bytes + _bytes_of(event)
            if size <= BATCH_LIMIT_BYTES:
                return Violation(
                    APPEND_LINGER_NOT_EARLY,
                    f"leader {node} (epoch {g.epoch}) wrote its gathered client appends at"
                    f" t={now}ms on another plain append, the oldest"
                    f" {now - (g.oldest if g.oldest is not None else now)}ms old, with at most"
                    f" {size} bytes waiting (linger {linger}ms, batch limit"
                    f" {BATCH_LIMIT_BYTES})",
                )
        return None


def append_at_reported_offsets(
    node: NodeId, res: AppendResult, sent: Sequence[KeyValue], held: Sequence[KeyValue]
) -> Violation | None:
    """AppendAtReportedOffsets: `held` is what the leader's log holds at the offsets `res`
    reports for an append of `sent`."""
    if list(held) != list(sent):
        return Violation(
            APPEND_AT_REPORTED_OFFSETS,
            f"leader {node} accepted client append {res.request_id} at"
            f" {res.first_offset}..{res.last_offset} (epoch {res.epoch}) but its log holds"
            f" {len(held)} other records there: {list(held)[:3]} for {list(sent)[:3]}",
        )
    return None


def _chunk_not_of_snapshot(g: _Ghost, event: Receive, req: _Request) -> bool:
    """The leader's successful answer to the FetchSnapshot in flight (the snapshot and
    position it asked) carries a chunk that cannot belong to the snapshot: no bytes, no size,
    or a chunk ending past the size. This project's rule (kraft.core.snapshot_transfer;
    Kafka's handleFetchSnapshotResponse appends whatever comes): the fetcher starts over from
    Fetch after quorum.retry.backoff.ms."""
    msg = event.message
    asked = req.message
    if type(msg) is not FetchSnapshotResponse or type(asked) is not FetchSnapshotRequest:
        return False
    assert isinstance(msg, FetchSnapshotResponse) and isinstance(asked, FetchSnapshotRequest)
    return (
        g.state is F
        and event.src == g.leader
        and msg.leader_epoch == g.epoch
        and msg.error is ErrorCode.NONE
        and msg.snapshot_id == asked.snapshot_id
        and msg.position == asked.position
        and (not msg.chunk or msg.size <= 0 or msg.position + len(msg.chunk) > msg.size)
    )


def _bytes_of(event: ClientAppend) -> int:
    """What the append adds to a batch, by a generous measure."""
    return sum(RECORD_FRAMING_BOUND + len(k or b"") + len(v or b"") for k, v in event.records)


# The voter changes a leader holds until they are decided (VoterChangeTimeoutNotLate).
_VOTER_CHANGES: frozenset[type] = frozenset({AddVoterRequest, RemoveVoterRequest})
_ANSWERED = frozenset(
    {ErrorCode.NONE, ErrorCode.SNAPSHOT_NOT_FOUND, ErrorCode.POSITION_OUT_OF_RANGE}
)
# Error answers to Vote and BeginQuorumEpoch after which Kafka backs off no request (its
# maybeHandleCommonResponse handles them: a newer epoch or leader is learned, or a stale
# answer is ignored).
_NO_BACKOFF = frozenset(
    {
        ErrorCode.NONE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    }
)
_KIND: dict[type, str] = {
    VoteRequest: "Vote",
    BeginQuorumEpochRequest: "BeginQuorumEpoch",
    FetchRequest: "Fetch",
    FetchSnapshotRequest: "Fetch",
}
_EARLY = {
    "Vote": VOTE_RETRY_NOT_EARLY,
    "BeginQuorumEpoch": BEGIN_RETRY_NOT_EARLY,
    "Fetch": FETCH_RETRY_NOT_EARLY,
}
_LATE = {
    "Vote": VOTE_RETRY_NOT_LATE,
    "BeginQuorumEpoch": BEGIN_RETRY_NOT_LATE,
    "Fetch": FETCH_RETRY_NOT_LATE,
}


def _begin_answer_handled(msg: BeginQuorumEpochResponse, epoch: int) -> bool:
    """Kafka's handleBeginQuorumEpochResponse result for a leader of `epoch` (false: the
    voter backs off): NONE is handled; an error with no partition data (decoded with epoch
    -1) is not; maybeHandleCommonResponse handles an answer naming another epoch,
    UNKNOWN_LEADER_EPOCH, FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER and INVALID_VOTER_KEY,
    and fails BROKER_NOT_AVAILABLE; any other error of the epoch is handleUnexpectedError's
    failure (INVALID_REQUEST: Kafka throws)."""
    if msg.error is ErrorCode.NONE:
        return True
    if msg.leader_epoch < 0:
        return False
    return msg.leader_epoch != epoch or msg.error in _BEGIN_HANDLED


_BEGIN_HANDLED = frozenset(
    {
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.INVALID_VOTER_KEY,
    }
)


def _request_epoch(request: Message) -> int | None:
    """The sender's epoch a Vote or BeginQuorumEpoch request carries (None: another kind)."""
    if isinstance(request, VoteRequest):
        return request.candidate_epoch
    if isinstance(request, BeginQuorumEpochRequest):
        return request.leader_epoch
    return None


def _fetches(effects: Iterable[Effect]) -> bool:
    """The step sent a Fetch or FetchSnapshot request."""
    return any(
        isinstance(e, Send) and isinstance(e.message, FetchRequest | FetchSnapshotRequest)
        for e in effects
    )


def _answers(effects: Iterable[Effect], dst: NodeId) -> bool:
    return any(
        type(e) is Send and e.dst == dst and type(e.message) is FetchResponse for e in effects
    )


def _decided(effects: Iterable[Effect], request_id: int) -> bool:
    return any(type(e) is AppendResult and e.request_id == request_id for e in effects)


def _took(effects: Iterable[Effect], action: Action) -> bool:
    return any(type(e) is ActionTaken and e.action is action for e in effects)
