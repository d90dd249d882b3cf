"""The KRaft replica (KIP-595): a pure state machine, events in, effects out.

One object per replica. `step` handles one event and returns the effects the driver must
perform, in order (see kraft.core.effects for the durability contract). Time comes only from
events and randomness only from the injected `rng`. The replica mirrors its log's metadata
(kraft.core.log_metadata) and reads record bytes only through `reader`, to fill Fetch responses.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from kraft.core import quorum_math as qm
from kraft.core.bounds import out_of_bounds
from kraft.core.effects import (
    ActionTaken,
    AppendResult,
    AppendToLog,
    Effect,
    ElectionsExhausted,
    ElectionState,
    FlushLog,
    HighWatermarkMoved,
    MessageRefused,
    PersistElectionState,
    Send,
    ShutdownComplete,
    SnapshotRequired,
    StateChanged,
    TruncateLog,
)
from kraft.core.events import ClientAppend, Event, Receive, SendFailed, Shutdown, Tick
from kraft.core.log_metadata import LogMetadata, LogState
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
    Records,
    Request,
    VoteRequest,
    VoteResponse,
)
from kraft.core.producers import (
    MAX_SEQUENCE,
    ProducerBatch,
    ProducerTable,
    Verdict,
    producer_batch_of,
)
from kraft.core.quorum_info import UNKNOWN, QuorumDescription, ReplicaDescription
from kraft.core.quorum_math import PY
from kraft.core.timing import QuorumTiming
from kraft.core.transitions import IllegalTransitionError, check_transition
from kraft.core.vocabulary import Action, ReplicaState
from kraft.core.voter_set import VoterSet
from kraft.errors import ErrorCode
from kraft.ids import (
    MAX_EPOCH,
    NO_NODE,
    NO_PRODUCER,
    ClusterId,
    Epoch,
    NodeId,
    Offset,
    OffsetAndEpoch,
    ReplicaKey,
)
from kraft.records import (
    CorruptRecordError,
    LeaderChangeMessage,
    encode_batch,
    encode_control_batch,
    iter_batches,
)

__all__ = [
    "IllegalTransitionError",
    "LogReader",
    "Replica",
    "ReplicaConfig",
    "ReplicaView",
]

U = ReplicaState.UNATTACHED
V = ReplicaState.VOTED
C = ReplicaState.CANDIDATE
L = ReplicaState.LEADER
F = ReplicaState.FOLLOWER
R = ReplicaState.RESIGNED
P = ReplicaState.PROSPECTIVE

LEADER_CHANGE_VERSION = 0
_RESPONSES = (
    VoteResponse,
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchResponse,
    FetchSnapshotResponse,
)
# Kafka's LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR: a leader that has not heard a Fetch from a
# majority of voters (itself included) within fetch timeout x 1.5 resigns.
CHECK_QUORUM_TIMEOUT_FACTOR = 1.5
# A follower told to fetch a snapshot (not implemented yet) fetches again only after this many
# retry backoffs, capped at half a fetch timeout so that it still hears of a new leader well
# within the fetch timeout and never times out a live leader.
SNAPSHOT_REFETCH_RETRIES = 50


@dataclass(frozen=True, slots=True)
class ReplicaConfig:
    """Who this replica is and in which quorum, and the quorum's timing."""

    node: ReplicaKey
    cluster_id: ClusterId
    # The static voter set (the voter-set history's entry before the log's first record).
    voters: tuple[ReplicaKey, ...]
    timing: QuorumTiming = field(default_factory=QuorumTiming)


class LogReader(Protocol):
    def read(self, offset: Offset, max_bytes: int) -> Records:
        """Whole batches starting at `offset`, at most about `max_bytes` (at least one)."""
        ...


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """An immutable snapshot of a replica, for checkers and traces."""

    node_id: NodeId
    state: ReplicaState
    epoch: Epoch
    leader_id: NodeId | None
    voted_for: ReplicaKey | None
    is_voter: bool
    end_offset: Offset
    last_epoch: Epoch
    high_watermark: Offset | None
    log_start_offset: Offset
    voters: tuple[NodeId, ...]


@dataclass(slots=True)
class _Peer:
    """The leader's picture of one replica fetching from it in this epoch."""

    key: ReplicaKey
    end_offset: Offset | None = None
    last_fetch_ms: int | None = None
    last_caught_up_ms: int | None = None
    # The leader's end offset when this replica last fetched: reaching it means caught up.
    leader_end_at_last_fetch: int = 0


@dataclass(slots=True)
class _LeaderData:
    epoch_start: Offset
    granting: tuple[NodeId, ...]
    voters: dict[NodeId, _Peer]
    # The HWM of this epoch, the one Fetch and DescribeQuorum report: None until a majority
    # reached past epoch_start (Kafka's LeaderState.highWatermark starts empty).
    hwm: Offset | None = None
    # Check-quorum (Kafka LeaderState): voters heard from since the timer last restarted, and
    # when the timer runs out (None: a single-voter quorum never resigns for want of fetches).
    fetched: set[NodeId] = field(default_factory=set)
    check_quorum_at: int | None = None
    observers: dict[ReplicaKey, _Peer] = field(default_factory=dict)
    endorsed: set[NodeId] = field(default_factory=set)
    # Fetches with nothing to return, held until data, a HWM move or their wait runs out.
    # (sender, request, deadline, reply token)
    parked: list[tuple[NodeId, FetchRequest, int, int | None]] = field(default_factory=list)
    complete_parked_at: int | None = None
    # Client appends lingering for append_linger_ms, written together as one batch.
    lingering: list[tuple[int, tuple[bytes, ...]]] = field(default_factory=list)
    linger_until: int | None = None


class Replica:
    # KIP-996 pre-vote is always on. Tests may switch it off (monkeypatch) to show what it
    # prevents; with it off a Prospective skips the pre-vote and stands at once, as Kafka does
    # when a voter does not support pre-vote. Not part of any configuration.
    pre_vote_enabled: ClassVar[bool] = True

    def __init__(
        self,
        config: ReplicaConfig,
        *,
        election_state: ElectionState | None,
        log_state: LogState,
        reader: LogReader,
        rng: random.Random,
        now_ms: int,
    ) -> None:
        self._cfg = config
        self._timing = config.timing
        self._me = config.node
        self._log = LogMetadata(log_state, VoterSet(config.voters))
        self._voters = self._log.voters
        # Asked on every message; recompute wherever the voter set changes (KIP-856).
        self._is_voter = self._voters.contains(self._me)
        self._producers = ProducerTable()
        for batch in log_state.producer_batches:
            self._producers.record(batch)
        self._reader = reader
        self._rng = rng
        self._now = now_ms
        self._stored = election_state or ElectionState(Epoch(0))
        self._started = False
        self._out: list[Effect] = []

        self._state = U
        self._epoch = self._stored.epoch
        self._leader_id: NodeId | None = None
        self._voted_for: ReplicaKey | None = None
        self._hwm: Offset | None = None

        # Timers: absolute times, None when not running.
        self._election_deadline: int | None = None  # -> Prospective (voters)
        self._fetch_deadline: int | None = None  # follower: leader silent too long
        self._fetch_send_at: int | None = None  # when to send the next Fetch
        self._fetch_in_flight_until: int | None = None  # resend if unanswered by then
        # Per-peer next send time of this state's request (Vote / BeginQuorumEpoch).
        self._retry: dict[NodeId, int] = {}
        self._granted: set[NodeId] = set()
        self._rejected: set[NodeId] = set()
        self._leader: _LeaderData | None = None
        self._discovery_next = 0
        # Follower: a successful Fetch answer from the leader came in this epoch (Kafka's
        # FollowerState.hasFetchedFromLeader); until then the follower may grant pre-votes.
        self._has_fetched = False
        # The last snapshot id a leader asked us to fetch (reported once per id).
        self._snapshot_reported: OffsetAndEpoch | None = None

        self._shutting_down = False
        self._shutdown_done = False
        self._shutdown_deadline: int | None = None
        self._end_pending: set[NodeId] = set()
        self._view: ReplicaView | None = None
        self._view_key: tuple[object, ...] = ()
        # The reply token of the request being answered (Receive.reply_to), for Send.
        self._reply_to: int | None = None

    # ------------------------------------------------------------------ public API

    @property
    def is_voter(self) -> bool:
        return self._is_voter

    def start(self) -> list[Effect]:
        """Enter the initial state from the stored election state (Kafka's restart rules)."""
        if self._started:
            raise IllegalTransitionError("start() called twice")
        self._started = True
        self._out = []
        es = self._stored
        me = self._me
        voter = self.is_voter
        log_epoch = self._log.last_epoch
        if es.epoch < log_epoch:
            # The log saw a later epoch than the file: trust the log, forget leader and vote.
            self._enter(U, log_epoch)
            self._persist()
        elif voter and es.leader_id == me.id:
            # A leader comes back Resigned in its epoch: no second vote, no second leader.
            self._enter(R, es.epoch, leader=me.id)
        elif voter and es.voted_for is not None and self._same_replica(es.voted_for, me):
            self._enter(C, es.epoch, voted=es.voted_for)
        elif voter and es.voted_for is not None:
            self._enter(V, es.epoch, voted=es.voted_for)
        elif es.leader_id is not None and es.leader_id != me.id:
            self._enter(F, es.epoch, leader=es.leader_id)
        else:
            self._enter(U, es.epoch)
        self._out.append(StateChanged(U, self._state, self._epoch))
        if self._state is C:
            self._maybe_win_election()
        self._send_due()
        return self._take()

    def step(self, event: Event) -> list[Effect]:
        if not self._started:
            raise IllegalTransitionError("step() before start()")
        self._out = []
        self._now = max(self._now, event.now_ms)
        if isinstance(event, Tick):
            self._on_tick()
        elif isinstance(event, Receive):
            self._on_receive(event)
        elif isinstance(event, SendFailed):
            self._on_send_failed(event)
        elif isinstance(event, ClientAppend):
            self._on_client_append(event)
        elif isinstance(event, Shutdown):
            self._on_shutdown()
        self._check_shutdown()
        self._send_due()
        return self._take()

    def next_deadline_ms(self) -> int:
        # Called after every event by its driver: a plain running minimum, no temporaries.
        soonest: int | None = None
        for t in (
            self._election_deadline,
            self._fetch_deadline,
            self._fetch_send_at,
            self._fetch_in_flight_until,
            self._shutdown_deadline,
        ):
            if t is not None and (soonest is None or t < soonest):
                soonest = t
        if self._retry:
            t = min(self._retry.values())
            if soonest is None or t < soonest:
                soonest = t
        ld = self._leader
        if ld is not None:
            for t in (ld.complete_parked_at, ld.linger_until, ld.check_quorum_at):
                if t is not None and (soonest is None or t < soonest):
                    soonest = t
            for _, _, t, _ in ld.parked:
                if soonest is None or t < soonest:
                    soonest = t
        if soonest is None:
            return self._now + self._timing.election_timeout_ms
        return soonest if soonest > self._now else self._now

    def view(self) -> ReplicaView:
        """The replica as checkers and traces see it. Drivers ask after every event, and most
        events change none of it, so the last view is kept and rebuilt only on a change."""
        log = self._log
        key = (
            self._state,
            self._epoch,
            self._leader_id,
            self._voted_for,
            self._hwm,
            log.version,
            self._voters,
        )
        if key == self._view_key and self._view is not None:
            return self._view
        self._view_key = key
        self._view = ReplicaView(
            node_id=self._me.id,
            state=self._state,
            epoch=self._epoch,
            leader_id=self._leader_id,
            voted_for=self._voted_for,
            is_voter=self.is_voter,
            end_offset=log.end_offset,
            last_epoch=log.last_epoch,
            high_watermark=self._hwm,
            log_start_offset=log.start_offset,
            voters=self._voters.ids,
        )
        return self._view

    def describe_quorum(self) -> QuorumDescription | None:
        ld = self._leader
        if ld is None:
            return None
        me = ReplicaDescription(self._me, self._log.end_offset, self._now, self._now)

        def desc(p: _Peer) -> ReplicaDescription:
            return ReplicaDescription(
                p.key,
                UNKNOWN if p.end_offset is None else p.end_offset,
                UNKNOWN if p.last_fetch_ms is None else p.last_fetch_ms,
                UNKNOWN if p.last_caught_up_ms is None else p.last_caught_up_ms,
            )

        voters = [me if v.id == self._me.id else desc(ld.voters[v.id]) for v in self._voters]
        return QuorumDescription(
            leader_id=self._me.id,
            leader_epoch=self._epoch,
            high_watermark=ld.hwm,
            voters=tuple(voters),
            observers=tuple(desc(p) for p in ld.observers.values()),
        )

    # ------------------------------------------------------------------ state changes

    def _take(self) -> list[Effect]:
        out, self._out = self._out, []
        return out

    @staticmethod
    def _same_replica(a: ReplicaKey, b: ReplicaKey) -> bool:
        return VoterSet((a,)).contains(b)

    def _random_election_timeout(self) -> int:
        t = self._timing.election_timeout_ms
        return qm.randomized_election_timeout(PY, t, self._rng.randrange(t)) if t > 0 else 0

    def _random_fetch_timeout(self) -> int:
        """Deviation from Kafka (README): a voter's fetch timeout is jittered by up to half an
        election timeout, as Raft randomizes follower timeouts, so that the followers of a
        dead leader do not all stand in the same epoch and split the vote."""
        jitter = self._timing.election_timeout_ms // 2 if self.is_voter else 0
        draw = self._rng.randrange(jitter) if jitter > 0 else 0
        return qm.randomized_fetch_timeout(PY, self._timing.fetch_timeout_ms, draw)

    def _persist(self) -> None:
        self._out.append(
            PersistElectionState(ElectionState(self._epoch, self._leader_id, self._voted_for))
        )

    def _transition(
        self,
        new: ReplicaState,
        epoch: Epoch,
        *,
        leader: NodeId | None = None,
        voted: ReplicaKey | None = None,
    ) -> None:
        """Move to `new` in `epoch` per the transition table; persist before any later Send.
        Entering Prospective persists nothing (Kafka: nothing stored changes)."""
        old, old_epoch = self._state, self._epoch
        check_transition(old, old_epoch, new, epoch, is_voter=self.is_voter)
        if new in (F, L, R):
            voted = None  # as Kafka: a known leader replaces the vote in the stored state
        elif epoch == old_epoch and voted is None and new is not C:
            voted = self._voted_for  # a vote cast in this epoch stays on record
        parked = self._leader.parked if self._leader is not None else []
        lingering = self._leader.lingering if self._leader is not None else []
        self._enter(new, epoch, leader=leader, voted=voted)
        if new is not P or old is P:
            self._persist()
        self._out.append(StateChanged(old, new, epoch))
        for request_id, _ in lingering:
            self._refuse_append(request_id)
        # Fetches held by a leader that stepped down get the new epoch and leader at once.
        for src, req, _, token in parked:
            self._answer_held(token, src, req, park=True)

    def _keeps_election_timer(self, new: ReplicaState) -> bool:
        """Kafka's transitionToUnattached: moving to Unattached (or back to Voted) keeps the
        time left on the election timer when coming from Unattached, Voted, Candidate,
        Resigned, or a Prospective whose pre-vote a majority did not reject; so a candidate
        with a stale log bumping epochs cannot keep postponing everyone else's election.
        Casting a vote restarts the timer (Kafka: the candidate has at least our chances)."""
        old = self._state
        if not self._started or new not in (U, V) or self._election_deadline is None:
            return False
        if old is U and new is V:
            return False  # a vote granted
        if old is P:
            return not self._voters.cannot_reach_majority(self._rejected)
        return old in (U, V, C, R)

    def _enter(
        self,
        new: ReplicaState,
        epoch: Epoch,
        *,
        leader: NodeId | None = None,
        voted: ReplicaKey | None = None,
    ) -> None:
        """Set the state's fields and start its timers (no checks, no effects)."""
        now = self._now
        granted = self._granted
        kept = self._election_deadline if self._keeps_election_timer(new) else None
        self._state, self._epoch = new, epoch
        self._leader_id, self._voted_for = leader, voted
        self._election_deadline = self._fetch_deadline = None
        self._fetch_send_at = self._fetch_in_flight_until = None
        self._retry = {}
        self._granted, self._rejected = set(), set()
        self._leader = None
        self._has_fetched = False
        others = [v.id for v in self._voters if v.id != self._me.id]
        if new in (U, V):
            if self.is_voter:
                if kept is not None:
                    self._election_deadline = kept
                else:
                    self._election_deadline = now + self._random_election_timeout()
            else:
                self._fetch_send_at = now  # an observer looks for the leader
        elif new in (P, C):
            # Both ask every other voter (pre-votes, then votes) and count themselves.
            if new is C:
                self._voted_for = self._me
            self._granted = {self._me.id}
            self._election_deadline = now + self._random_election_timeout()
            self._retry = dict.fromkeys(others, now)
        elif new is F:
            self._fetch_deadline = now + self._random_fetch_timeout()
            self._fetch_send_at = now
        elif new is L:
            self._leader_id = self._me.id
            single = self.is_voter and len(self._voters) == 1
            check_ms = int(self._timing.fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR)
            self._leader = _LeaderData(
                epoch_start=self._log.end_offset,
                granting=tuple(sorted(granted)),
                voters={v.id: _Peer(v) for v in self._voters if v.id != self._me.id},
                check_quorum_at=None if single else now + check_ms,
            )
            self._retry = dict.fromkeys(others, now)
        elif new is R:
            self._leader_id = self._me.id
            self._election_deadline = now + self._random_election_timeout()

    # ------------------------------------------------------------------ timers

    def _on_tick(self) -> None:
        now = self._now
        st = self._state
        ld = self._leader
        if ld is not None:
            if ld.linger_until is not None and ld.linger_until <= now:
                self._append_lingering()
            if ld.complete_parked_at is not None and ld.complete_parked_at <= now:
                ld.complete_parked_at = None
                self._complete_parked(all_of_them=True)
            elif any(d <= now for _, _, d, _ in ld.parked):
                self._complete_parked(all_of_them=False)
            if (
                self._state is L
                and ld.check_quorum_at is not None
                and ld.check_quorum_at <= now
                and not self._shutting_down
            ):
                # Check-quorum (Kafka pollLeader): no Fetch from a majority in time.
                self._resign()
                return
        if self._fetch_in_flight_until is not None and self._fetch_in_flight_until <= now:
            self._fetch_in_flight_until = None
            self._fetch_send_at = now
        if st in (U, V, P, C, R) and self._election_deadline is not None:
            if self._election_deadline <= now:
                if self._shutting_down:
                    self._election_deadline = None  # a replica on its way out stands for nothing
                else:
                    self._election_timeout()
        elif st is F and self._fetch_deadline is not None and self._fetch_deadline <= now:
            if self.is_voter:
                if self._shutting_down:
                    self._fetch_deadline = None
                else:
                    self._election_timeout()
            else:
                # An observer forgets the silent leader and rediscovers (KIP-595 observers).
                self._transition(U, self._epoch)
        if self._shutdown_deadline is not None and self._shutdown_deadline <= now:
            self._end_pending.clear()

    def _election_timeout(self) -> None:
        """ElectionTimeout (Kafka 4.x poll*): Unattached, Voted, Follower (fetch timer) and
        Candidate become Prospective in their epoch; a Prospective that got no majority in time
        goes back; Resigned moves to Unattached in the next epoch."""
        st = self._state
        if st is not P and self._epoch >= MAX_EPOCH:
            # No larger epoch can be encoded or persisted: stand no more (still vote, follow).
            self._election_deadline = self._fetch_deadline = None
            self._out.append(ElectionsExhausted(self._epoch))
            return
        self._out.append(ActionTaken(Action.ELECTION_TIMEOUT))
        if st is P:
            self._prospective_lost()
        elif st is R:
            self._transition(U, Epoch(self._epoch + 1))
        else:
            leader = self._leader_id if st is F else None
            self._transition(P, self._epoch, leader=leader)
            if not self.pre_vote_enabled:
                self._become_candidate()
            else:
                self._maybe_win_election()

    def _prospective_lost(self) -> None:
        """A lost or timed-out pre-vote: back to the leader we knew, else to Voted (a vote cast
        in this epoch) or Unattached, in the same epoch (Kafka
        prospectiveTransitionAfterElectionLoss)."""
        if self._leader_id is not None:
            self._transition(F, self._epoch, leader=self._leader_id)
        elif self._voted_for is not None:
            self._transition(V, self._epoch, voted=self._voted_for)
        else:
            self._transition(U, self._epoch)

    def _become_candidate(self) -> None:
        """BecomeCandidate: bump the epoch, vote for ourselves (persisted first), ask for votes."""
        self._out.append(ActionTaken(Action.BECOME_CANDIDATE))
        self._transition(C, Epoch(self._epoch + 1))
        self._maybe_win_election()

    # ------------------------------------------------------------------ sending

    def _send(self, dst: NodeId, msg: Message) -> None:
        reply_to = self._reply_to if isinstance(msg, _RESPONSES) else None
        self._out.append(Send(dst, msg, reply_to))

    def _answer_held(
        self, token: int | None, src: NodeId, req: FetchRequest, *, park: bool
    ) -> None:
        """Handle a held Fetch again, its answer routed by the token it arrived with."""
        outer, self._reply_to = self._reply_to, token
        try:
            self._handle_fetch_request(src, req, park=park)
        finally:
            self._reply_to = outer

    def _send_due(self) -> None:
        now = self._now
        st = self._state
        if st in (P, C):
            # The retry map is emptied once a majority rejected: nothing more to ask.
            for dst, at in sorted(self._retry.items()):
                if at <= now:
                    self._retry[dst] = now + self._timing.request_timeout_ms
                    self._send(dst, self._vote_request(dst))
        elif st is L:
            for dst, at in sorted(self._retry.items()):
                if at <= now:
                    self._retry[dst] = now + self._timing.request_timeout_ms
                    self._send(
                        dst,
                        BeginQuorumEpochRequest(
                            self._cfg.cluster_id,
                            self._me.id,
                            self._epoch,
                            voter=self._voter_key(dst),
                        ),
                    )
        if self._fetch_send_at is not None and self._fetch_send_at <= now:
            self._send_fetch()

    def _voter_key(self, node: NodeId) -> ReplicaKey | None:
        for v in self._voters:
            if v.id == node:
                return v
        return None

    def _vote_request(self, dst: NodeId) -> VoteRequest:
        """A Candidate's vote request carries its new epoch; a Prospective's pre-vote carries
        its current epoch, unchanged (Kafka buildVoteRequest: quorum.epoch() either way)."""
        return VoteRequest(
            cluster_id=self._cfg.cluster_id,
            candidate=self._me,
            candidate_epoch=self._epoch,
            last_epoch=self._log.last_epoch,
            last_end_offset=self._log.end_offset,
            voter=self._voter_key(dst),
            pre_vote=self._state is P,
        )

    def _send_fetch(self) -> None:
        """SendFetchRequest: ask the leader (or, to discover it, a voter) for what follows."""
        if self._state is F and self._leader_id is not None:
            dst = self._leader_id
            wait = self._timing.fetch_max_wait_ms
        elif self._state is U and not self.is_voter and len(self._voters) > 0:
            ids = self._voters.ids
            dst = ids[self._discovery_next % len(ids)]
            self._discovery_next += 1
            wait = 0
        else:
            self._fetch_send_at = None
            return
        self._fetch_send_at = None
        self._fetch_in_flight_until = self._now + self._timing.request_timeout_ms
        self._out.append(ActionTaken(Action.SEND_FETCH_REQUEST))
        self._send(
            dst,
            FetchRequest(
                cluster_id=self._cfg.cluster_id,
                replica=self._me,
                replica_epoch=self._epoch,
                fetch_offset=self._log.end_offset,
                last_fetched_epoch=self._log.last_epoch,
                log_start_offset=self._log.start_offset,
                max_bytes=self._timing.fetch_max_bytes,
                max_wait_ms=wait,
            ),
        )

    def _on_send_failed(self, ev: SendFailed) -> None:
        """An unreachable peer: retry after retry_backoff_ms (EndQuorumEpoch is not retried)."""
        req = ev.request
        retry_at = self._now + self._timing.retry_backoff_ms
        if isinstance(req, VoteRequest):
            if req.candidate_epoch == self._epoch and ev.dst in self._retry:
                self._retry[ev.dst] = retry_at
        elif isinstance(req, BeginQuorumEpochRequest):
            if req.leader_epoch == self._epoch and ev.dst in self._retry:
                self._retry[ev.dst] = retry_at
        elif isinstance(req, FetchRequest):
            if self._fetch_in_flight_until is not None:
                self._fetch_in_flight_until = None
                self._fetch_send_at = retry_at
        elif isinstance(req, EndQuorumEpochRequest):
            self._end_pending.discard(ev.dst)

    # ------------------------------------------------------------------ receiving

    def _on_receive(self, ev: Receive) -> None:
        self._reply_to = ev.reply_to
        try:
            self._dispatch(ev)
        finally:
            self._reply_to = None

    def _dispatch(self, ev: Receive) -> None:
        msg = ev.message
        src = ev.src
        problem = out_of_bounds(msg)
        if problem is not None:
            self._refuse_out_of_bounds(src, msg, problem)
            return
        if isinstance(msg, VoteRequest):
            self._handle_vote_request(src, msg)
        elif isinstance(msg, VoteResponse):
            self._handle_vote_response(src, msg, ev.in_reply_to)
        elif isinstance(msg, BeginQuorumEpochRequest):
            self._handle_begin_request(src, msg)
        elif isinstance(msg, BeginQuorumEpochResponse):
            self._handle_begin_response(src, msg)
        elif isinstance(msg, EndQuorumEpochRequest):
            self._handle_end_request(src, msg)
        elif isinstance(msg, EndQuorumEpochResponse):
            self._handle_end_response(src, msg)
        elif isinstance(msg, FetchRequest):
            self._handle_fetch_request(src, msg)
        elif isinstance(msg, FetchResponse):
            self._handle_fetch_response(src, msg, ev.in_reply_to)
        elif isinstance(msg, FetchSnapshotRequest):
            # A voter fetching a snapshot from us in our epoch counts for check-quorum.
            if (
                self._state is L
                and msg.replica_epoch == self._epoch
                and self._voters.contains_id(src)
                and self._request_error(msg.cluster_id) is None
            ):
                self._heard_from_voter(src)
            # KIP-630 is not implemented yet: no snapshot can be served.
            self._send(
                src,
                FetchSnapshotResponse(
                    self._request_error(msg.cluster_id) or ErrorCode.SNAPSHOT_NOT_FOUND,
                    self._leader_or_none(),
                    self._epoch,
                    msg.snapshot_id,
                    size=0,
                    position=msg.position,
                ),
            )
        # FetchSnapshotResponse: nothing asks for snapshots yet; ignored.

    def _refuse_out_of_bounds(self, src: NodeId, msg: Message, reason: str) -> None:
        """Answer a request carrying an unrepresentable value with INVALID_REQUEST, before it
        touches any state; drop such a response (the request it answers is retried)."""
        self._out.append(MessageRefused(src, type(msg).__name__, reason))
        err = ErrorCode.INVALID_REQUEST
        leader, epoch = self._leader_or_none(), self._epoch
        if isinstance(msg, VoteRequest):
            self._send(src, self._vote_response(err, False))
        elif isinstance(msg, FetchRequest):
            self._send(src, self._fetch_response(err))
        elif isinstance(msg, BeginQuorumEpochRequest):
            self._send(src, BeginQuorumEpochResponse(err, leader, epoch))
        elif isinstance(msg, EndQuorumEpochRequest):
            self._send(src, EndQuorumEpochResponse(err, leader, epoch))
        elif isinstance(msg, FetchSnapshotRequest):
            unknown = OffsetAndEpoch(Epoch(-1), Offset(-1))
            self._send(src, FetchSnapshotResponse(err, leader, epoch, unknown, 0, 0))

    def _leader_or_none(self) -> NodeId:
        return NO_NODE if self._leader_id is None else self._leader_id

    def _request_error(self, cluster_id: ClusterId) -> ErrorCode | None:
        if cluster_id != self._cfg.cluster_id:
            return ErrorCode.INCONSISTENT_CLUSTER_ID
        return None

    def _learn(self, leader: NodeId, epoch: Epoch) -> None:
        """A message names the leader and epoch: move to a larger epoch (as a follower of the
        named leader, or Unattached), or follow a leader newly learned in our own epoch."""
        if epoch > self._epoch:
            if leader not in (NO_NODE, self._me.id):
                self._transition(F, epoch, leader=leader)
            else:
                self._transition(U, epoch)
        elif (
            epoch == self._epoch
            and leader not in (NO_NODE, self._me.id)
            and self._leader_id is None
        ):
            self._transition(F, epoch, leader=leader)

    # --- Vote

    def _addressed_to_me(self, voter: ReplicaKey | None) -> bool:
        """KIP-853: a request naming the replica it is meant for must name us."""
        return voter is None or self._same_replica(voter, self._me)

    def _may_vote_for(self, candidate: ReplicaKey) -> bool:
        """Voter membership for an election: the candidate must be a voter and so must we.
        (KIP-856 relaxes the second half; this is the one place to change.)"""
        return self._voters.contains(candidate) and self.is_voter

    def _vote_response(self, error: ErrorCode, granted: bool) -> VoteResponse:
        return VoteResponse(error, self._leader_or_none(), self._epoch, granted)

    def _handle_vote_request(self, src: NodeId, req: VoteRequest) -> None:
        """HandleVoteRequest, checks in Kafka's order (handleVoteRequest). A pre-vote is
        answered like a vote but never records one."""
        self._out.append(ActionTaken(Action.HANDLE_VOTE_REQUEST))
        err = self._request_error(req.cluster_id)
        # A candidate bumped its epoch past its log's; a prospective did not (Kafka).
        if req.pre_vote:
            bad_epoch = req.last_epoch > req.candidate_epoch
        else:
            bad_epoch = req.last_epoch >= req.candidate_epoch
        if err is None and (req.last_epoch < 0 or req.last_end_offset < 0 or bad_epoch):
            err = ErrorCode.INVALID_REQUEST
        if err is not None:
            self._send(src, self._vote_response(err, False))
            return
        # 1. A larger epoch is known: reject. A larger epoch moves us to it first, for a
        #    pre-vote too (Kafka: the prospective's epoch is one a leader or candidate reached).
        if req.candidate_epoch < self._epoch:
            self._send(src, self._vote_response(ErrorCode.FENCED_LEADER_EPOCH, False))
            return
        if req.candidate_epoch > self._epoch:
            self._transition(U, req.candidate_epoch)
        if not self._addressed_to_me(req.voter):
            self._send(src, self._vote_response(ErrorCode.INVALID_VOTER_KEY, False))
            return
        granted = self._can_grant(req)
        if granted and not req.pre_vote and self._voted_for is None:
            if self._state is U:
                self._transition(V, self._epoch, voted=req.candidate)  # persisted first
            elif self._state is P:
                self._transition(P, self._epoch, voted=req.candidate)  # persisted first
        self._send(src, self._vote_response(ErrorCode.NONE, granted))

    def _can_grant(self, req: VoteRequest) -> bool:
        """The granting rules of Kafka's EpochState.canGrantVote, per state."""
        # Voter membership (KIP-595): the candidate must be a voter and so must we.
        if not self._may_vote_for(req.candidate):
            return False
        # The candidate's log is at least as up-to-date: (last epoch, end offset).
        mine = self._log.end
        up_to_date = qm.log_up_to_date(
            PY, req.last_epoch, req.last_end_offset, mine.epoch, mine.offset
        )
        st = self._state
        if st in (U, V, P):
            if req.pre_vote:
                return up_to_date  # a vote cast in this epoch does not bind a pre-vote
            # One vote per epoch: only the candidate already voted for gets it again.
            if self._voted_for is not None:
                return self._same_replica(self._voted_for, req.candidate)
            if self._leader_id is not None:
                return False  # a Prospective that still knows its leader
            return up_to_date
        if st is F:
            # A follower vouches for a pre-vote only until its leader answered a Fetch: a
            # voter cut off from a live leader cannot disrupt it (KIP-996).
            return req.pre_vote and not self._has_fetched and up_to_date
        if st is C:
            return req.pre_vote and up_to_date
        return False  # a leader or resigned replica has chosen

    def _handle_vote_response(
        self, src: NodeId, resp: VoteResponse, in_reply_to: Request | None
    ) -> None:
        self._out.append(ActionTaken(Action.HANDLE_VOTE_RESPONSE))
        if resp.error is ErrorCode.UNSUPPORTED_VERSION and self._state is P:
            # Kafka: a voter that does not know pre-vote; stand for election at once.
            self._become_candidate()
            return
        if resp.error not in (ErrorCode.NONE, ErrorCode.FENCED_LEADER_EPOCH):
            if self._state in (P, C) and src in self._retry:
                self._retry[src] = self._now + self._timing.retry_backoff_ms
            return
        self._learn(resp.leader_id, resp.leader_epoch)
        st = self._state
        if st not in (P, C) or resp.leader_epoch != self._epoch:
            return  # no longer standing, or an answer from another election
        if isinstance(in_reply_to, VoteRequest) and (
            in_reply_to.pre_vote != (st is P) or in_reply_to.candidate_epoch != self._epoch
        ):
            return  # answers a request of another round (pre-vote vs vote)
        if resp.error is not ErrorCode.NONE or src in self._granted or src in self._rejected:
            self._retry.pop(src, None)
            return
        if src not in self._voters.ids:
            return
        self._retry.pop(src, None)
        if resp.vote_granted:
            self._granted.add(src)
            self._maybe_win_election()
            return
        self._rejected.add(src)
        if self._voters.cannot_reach_majority(self._rejected):
            if st is P:
                self._prospective_lost()
            else:
                # Kafka: a rejected candidate stops asking and waits out its election timer,
                # then becomes Prospective (e.g. two voters: one refusal decides).
                self._retry = {}

    def _maybe_win_election(self) -> None:
        """A majority of pre-votes makes a Prospective a Candidate; a majority of votes makes
        a Candidate the Leader (a single voter goes all the way in one step)."""
        if self._state is P and self._voters.is_majority(self._granted):
            self._become_candidate()
        elif self._state is C and self._voters.is_majority(self._granted):
            self._become_leader()

    def _become_leader(self) -> None:
        """BecomeLeader: persist, write LeaderChange as the epoch's first record, then
        BeginQuorumEpoch to every voter until each endorses."""
        self._out.append(ActionTaken(Action.BECOME_LEADER))
        self._transition(L, self._epoch)
        ld = self._leader
        assert ld is not None
        record = LeaderChangeMessage(
            LEADER_CHANGE_VERSION,
            self._me.id,
            voters=self._voters.ids,
            granting_voters=ld.granting,
        )
        offset = self._log.end_offset
        data = encode_control_batch(offset, self._epoch, record, timestamp_ms=self._now)
        self._append(offset, offset, data)
        self._maybe_advance_hwm()

    def _append(self, first: Offset, last: Offset, data: bytes) -> None:
        """Leader append of one batch in its epoch, made durable before later effects."""
        self._out.append(AppendToLog(first, last, self._epoch, data))
        self._log.append([(self._epoch, first)], Offset(last + 1))
        self._out.append(FlushLog())
        if self._leader is not None and self._leader.parked:
            # Answer held fetches next tick, once the driver has applied this append.
            self._leader.complete_parked_at = self._now

    # --- BeginQuorumEpoch

    def _handle_begin_request(self, src: NodeId, req: BeginQuorumEpochRequest) -> None:
        self._out.append(ActionTaken(Action.HANDLE_BEGIN_QUORUM_EPOCH_REQUEST))
        err = self._request_error(req.cluster_id)
        if err is None and req.leader_epoch < self._epoch:
            err = ErrorCode.FENCED_LEADER_EPOCH
        if err is None and req.leader_id == self._me.id:
            err = ErrorCode.INVALID_REQUEST
        if err is None:
            self._learn(req.leader_id, req.leader_epoch)
            if self._leader_id != req.leader_id:
                # Another leader is known for this epoch: the request conflicts (KIP-595).
                err = ErrorCode.INVALID_REQUEST
            elif not self._addressed_to_me(req.voter):
                err = ErrorCode.INVALID_VOTER_KEY
        self._send(
            src,
            BeginQuorumEpochResponse(err or ErrorCode.NONE, self._leader_or_none(), self._epoch),
        )

    def _handle_begin_response(self, src: NodeId, resp: BeginQuorumEpochResponse) -> None:
        self._out.append(ActionTaken(Action.HANDLE_BEGIN_QUORUM_EPOCH_RESPONSE))
        if resp.error not in (ErrorCode.NONE, ErrorCode.FENCED_LEADER_EPOCH):
            if self._state is L and src in self._retry:
                self._retry[src] = self._now + self._timing.retry_backoff_ms
            return
        self._learn(resp.leader_id, resp.leader_epoch)
        if (
            self._state is L
            and resp.error is ErrorCode.NONE
            and resp.leader_epoch == self._epoch
            and resp.leader_id == self._me.id
        ):
            self._endorse(src)

    def _endorse(self, src: NodeId) -> None:
        ld = self._leader
        if ld is not None and src in ld.voters:
            ld.endorsed.add(src)
            self._retry.pop(src, None)

    # --- EndQuorumEpoch

    def _on_shutdown(self) -> None:
        """Graceful shutdown: a leader resigns and sends EndQuorumEpoch (best effort)."""
        if self._shutting_down:
            return
        self._shutting_down = True
        if self._state is not L or self._leader is None:
            self._end_pending.clear()
            return
        successors = self._resign()
        self._end_pending = set(successors)
        self._shutdown_deadline = self._now + self._timing.request_timeout_ms

    def _resign(self) -> tuple[NodeId, ...]:
        """Resign (graceful shutdown, or check-quorum expiry as Kafka's pollLeader): become
        Resigned in this epoch and send EndQuorumEpoch to the other voters, most caught-up
        first, so that the best successor stands for election first."""
        ld = self._leader
        assert ld is not None
        self._out.append(ActionTaken(Action.RESIGN))
        ranked = sorted(
            ld.voters.values(),
            key=lambda p: (-(p.end_offset if p.end_offset is not None else -1), p.key.id),
        )
        successors = tuple(p.key.id for p in ranked)
        self._transition(R, self._epoch, leader=self._me.id)
        for dst in successors:
            self._send(
                dst,
                EndQuorumEpochRequest(self._cfg.cluster_id, self._me.id, self._epoch, successors),
            )
        return successors

    def _check_shutdown(self) -> None:
        if self._shutting_down and not self._shutdown_done and not self._end_pending:
            self._shutdown_done = True
            self._shutdown_deadline = None
            self._out.append(ShutdownComplete())

    def _handle_end_request(self, src: NodeId, req: EndQuorumEpochRequest) -> None:
        self._out.append(ActionTaken(Action.HANDLE_END_QUORUM_EPOCH_REQUEST))
        err = self._request_error(req.cluster_id)
        if err is None and req.leader_epoch < self._epoch:
            err = ErrorCode.FENCED_LEADER_EPOCH
        if err is None:
            self._learn(req.leader_id, req.leader_epoch)
            if self._me.id not in req.preferred_successors:
                err = ErrorCode.INCONSISTENT_VOTER_SET
        # Only a follower of the resigning leader reacts; with no leader named there is
        # nothing to end (KIP-595: the request is rejected, harmlessly answered here).
        if (
            err is None
            and self._state is F
            and req.leader_epoch == self._epoch
            and self._leader_id == req.leader_id
        ):
            # The fetch timer runs out at once for the first successor (Kafka: its next poll
            # makes it Prospective), after a backoff for the others.
            n = req.preferred_successors.index(self._me.id)
            delay = 0
            if n > 0:
                # KIP-595: MIN(backoff max, retry backoff * 2^(N-1)) for priority N > 0.
                delay = qm.successor_backoff_ms(
                    PY, n, self._timing.retry_backoff_ms, self._timing.election_backoff_max_ms
                )
            deadline = self._now + delay
            if self._fetch_deadline is None or deadline < self._fetch_deadline:
                self._fetch_deadline = deadline
        self._send(
            src,
            EndQuorumEpochResponse(err or ErrorCode.NONE, self._leader_or_none(), self._epoch),
        )

    def _handle_end_response(self, src: NodeId, resp: EndQuorumEpochResponse) -> None:
        self._out.append(ActionTaken(Action.HANDLE_END_QUORUM_EPOCH_RESPONSE))
        self._end_pending.discard(src)
        # A replica that is shutting down ignores news of a newer leader (KIP-595).
        if not self._shutting_down:
            self._learn(resp.leader_id, resp.leader_epoch)

    # --- Fetch (leader side)

    def _fetch_response(
        self,
        error: ErrorCode,
        *,
        diverging: OffsetAndEpoch | None = None,
        records: Records = b"",
    ) -> FetchResponse:
        # Only a leader answering in its epoch reports a HWM, and only its epoch's HWM: a
        # follower's HWM it kept from the previous leader may be below what another follower
        # already holds (Kafka: "Non-monotonic update of high watermark").
        ld = self._leader
        hwm = ld.hwm if ld is not None and error is ErrorCode.NONE else None
        return FetchResponse(
            error=error,
            leader_id=self._leader_or_none(),
            leader_epoch=self._epoch,
            high_watermark=Offset(-1) if hwm is None else hwm,
            log_start_offset=self._log.start_offset,
            diverging_epoch=diverging,
            records=records,
        )

    def _handle_fetch_request(self, src: NodeId, req: FetchRequest, *, park: bool = True) -> None:
        self._out.append(ActionTaken(Action.HANDLE_FETCH_REQUEST))
        err = self._request_error(req.cluster_id)
        if err is None and (
            req.fetch_offset < 0
            or req.last_fetched_epoch < 0
            or req.last_fetched_epoch > req.replica_epoch
        ):
            err = ErrorCode.INVALID_REQUEST
        if err is None:
            if req.replica_epoch < self._epoch:
                err = ErrorCode.FENCED_LEADER_EPOCH
            elif req.replica_epoch > self._epoch:
                err = ErrorCode.UNKNOWN_LEADER_EPOCH  # we cannot confirm that epoch's leader
            elif self._state is not L:
                err = ErrorCode.NOT_LEADER_OR_FOLLOWER
        ld = self._leader
        if err is not None or ld is None:
            self._send(src, self._fetch_response(err or ErrorCode.NOT_LEADER_OR_FOLLOWER))
            return
        # The fetcher's (last fetched epoch, fetch offset) must lie on our log.
        ours = self._log.end_offset_for_epoch(req.last_fetched_epoch)
        if ours.epoch != req.last_fetched_epoch or ours.offset < req.fetch_offset:
            self._send(src, self._fetch_response(ErrorCode.NONE, diverging=ours))
            return
        hwm_before = ld.hwm
        self._record_fetch(src, req)
        end = self._log.end_offset
        if req.fetch_offset < end:
            max_bytes = min(req.max_bytes, self._timing.fetch_max_bytes)
            data = self._reader.read(req.fetch_offset, max_bytes)
            self._send(src, self._fetch_response(ErrorCode.NONE, records=data))
        elif park and req.max_wait_ms > 0 and ld.hwm == hwm_before:
            # Nothing new for the fetcher (a HWM it moved itself is news: answer at once).
            ld.parked.append((src, req, self._now + req.max_wait_ms, self._reply_to))
        else:
            self._send(src, self._fetch_response(ErrorCode.NONE))

    def _record_fetch(self, src: NodeId, req: FetchRequest) -> None:
        """The leader learns the fetcher's durable end offset; a voter's Fetch in this epoch
        endorses the leader and may move the HWM."""
        ld = self._leader
        assert ld is not None
        now = self._now
        end = self._log.end_offset
        if src in ld.voters and self._voters.contains(req.replica):
            peer = ld.voters[src]
            peer.key = req.replica
            self._endorse(src)
            self._heard_from_voter(src)
        else:
            peer = ld.observers.setdefault(req.replica, _Peer(req.replica))
        if req.fetch_offset >= end:
            peer.last_caught_up_ms = now
        elif peer.last_fetch_ms is not None and req.fetch_offset >= peer.leader_end_at_last_fetch:
            peer.last_caught_up_ms = peer.last_fetch_ms
        peer.end_offset = req.fetch_offset
        peer.last_fetch_ms = now
        peer.leader_end_at_last_fetch = end
        if src in ld.voters:
            self._maybe_advance_hwm()

    def _heard_from_voter(self, src: NodeId) -> None:
        """Check-quorum (Kafka LeaderState.updateCheckQuorumForFollowingVoter): once voters
        making a majority with us have fetched, restart the timer."""
        ld = self._leader
        if ld is None or ld.check_quorum_at is None or src == self._me.id:
            return
        ld.fetched.add(src)
        needed = self._voters.majority - (1 if self.is_voter else 0)
        if len(ld.fetched) >= needed:
            ld.fetched.clear()
            check_ms = int(self._timing.fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR)
            ld.check_quorum_at = self._now + check_ms

    def _maybe_advance_hwm(self) -> None:
        """AdvanceHighWatermark: the largest offset a majority of voters reached (our own end
        included), only past the start of our epoch, never lowered. The epoch's HWM (what
        Fetch reports) starts then; the replica's own HWM never goes down."""
        ld = self._leader
        if ld is None:
            return
        ends = [-1 if p.end_offset is None else p.end_offset for p in ld.voters.values()]
        if self.is_voter:
            ends.append(self._log.end_offset)
        k = self._voters.majority
        if len(ends) < k:
            return
        candidate = Offset(qm.high_watermark_fast(ends, k))
        if candidate <= ld.epoch_start or (ld.hwm is not None and candidate <= ld.hwm):
            return
        ld.hwm = candidate
        self._raise_hwm(candidate)
        self._out.append(ActionTaken(Action.ADVANCE_HIGH_WATERMARK))
        if ld.parked:
            ld.complete_parked_at = self._now

    def _raise_hwm(self, value: Offset) -> bool:
        if self._hwm is not None and value <= self._hwm:
            return False
        self._hwm = value
        self._out.append(HighWatermarkMoved(value))
        return True

    def _complete_parked(self, *, all_of_them: bool) -> None:
        ld = self._leader
        assert ld is not None
        now = self._now
        due = [p for p in ld.parked if all_of_them or p[2] <= now]
        ld.parked = [p for p in ld.parked if p not in due]
        for src, req, _, token in due:
            self._answer_held(token, src, req, park=False)

    # --- Fetch (follower / observer side)

    def _handle_fetch_response(
        self, src: NodeId, resp: FetchResponse, in_reply_to: Request | None
    ) -> None:
        self._out.append(ActionTaken(Action.HANDLE_FETCH_RESPONSE))
        self._learn(resp.leader_id, resp.leader_epoch)
        if self._state is not F or src != self._leader_id or resp.leader_epoch != self._epoch:
            if self._state is U and not self.is_voter and self._fetch_send_at is None:
                # Discovery answer without a leader: ask another voter after a backoff.
                self._fetch_in_flight_until = None
                self._fetch_send_at = self._now + self._timing.retry_backoff_ms
            return
        if isinstance(in_reply_to, FetchRequest) and (
            in_reply_to.fetch_offset != self._log.end_offset
            or in_reply_to.last_fetched_epoch != self._log.last_epoch
        ):
            return  # answers a fetch from a log position we no longer have
        if resp.error is not ErrorCode.NONE:
            self._fetch_in_flight_until = None
            self._fetch_send_at = self._now + self._timing.retry_backoff_ms
            return
        if resp.diverging_epoch is None and resp.snapshot_id is not None:
            self._snapshot_required(src, resp.snapshot_id)
            return
        if resp.diverging_epoch is not None:
            self._truncate_diverging(resp.diverging_epoch)
        elif len(resp.records) > 0 and not self._append_fetched(resp.records):
            return  # stale or corrupt: wait for the in-flight fetch or its timeout
        # A successful answer from the leader: it is alive.
        self._fetch_deadline = self._now + self._random_fetch_timeout()
        self._has_fetched = True
        if resp.high_watermark >= 0:
            self._raise_hwm(Offset(min(resp.high_watermark, self._log.end_offset)))
        self._fetch_in_flight_until = None
        self._fetch_send_at = self._now

    def _snapshot_required(self, leader: NodeId, snapshot_id: OffsetAndEpoch) -> None:
        """The leader's log starts after a snapshot we would have to fetch (KIP-630, not
        implemented yet). The leader is alive (its answer resets our fetch timer, as Kafka's
        does), but nothing can be appended, truncated or committed from this answer. Say so
        once per snapshot id and fetch again only after a long backoff, instead of at once."""
        self._fetch_deadline = self._now + self._random_fetch_timeout()
        self._has_fetched = True
        if self._snapshot_reported != snapshot_id:
            self._snapshot_reported = snapshot_id
            self._out.append(SnapshotRequired(leader, snapshot_id))
        backoff = min(
            SNAPSHOT_REFETCH_RETRIES * self._timing.retry_backoff_ms,
            self._timing.fetch_timeout_ms // 2,
        )
        self._fetch_in_flight_until = None
        self._fetch_send_at = self._now + max(backoff, 0)

    def _truncate_diverging(self, diverging: OffsetAndEpoch) -> None:
        """Truncate to where our log and the leader's agree for that epoch, then refetch."""
        local = self._log.end_offset_for_epoch(diverging.epoch)
        target = self._batch_base(Offset(min(diverging.offset, local.offset, self._log.end_offset)))
        if self._hwm is not None and target < self._hwm:
            return  # committed records never diverge: a stale answer
        if target < self._log.end_offset:
            self._out.append(TruncateLog(target))
            self._log.truncate(target)
            self._producers.truncate(target)

    def _batch_base(self, offset: Offset) -> Offset:
        """Snap a truncation point inside one of our batches down to that batch's base: a
        batch that runs past the leader's end of an epoch is not on the leader's log at all
        (batches of one epoch are the same everywhere), and logs truncate whole batches."""
        if offset >= self._log.end_offset or offset <= self._log.start_offset:
            return offset
        try:
            data = self._reader.read(offset, 1)
            _, header = next(iter_batches(data, verify=False))
        except (CorruptRecordError, StopIteration):
            return offset
        if header.base_offset < offset < header.next_offset:
            return Offset(header.base_offset)
        return offset

    def _append_fetched(self, records: Records) -> bool:
        end = self._log.end_offset
        batches: list[tuple[Epoch, Offset]] = []
        idempotent: list[ProducerBatch] = []
        next_offset = end
        try:
            for _, h in iter_batches(records):
                if h.base_offset != next_offset:
                    return False
                batches.append((Epoch(h.partition_leader_epoch), Offset(h.base_offset)))
                next_offset = Offset(h.next_offset)
                if h.producer_id >= 0:
                    idempotent.append(producer_batch_of(h))
        except CorruptRecordError:
            return False
        epochs = [self._log.last_epoch] + [e for e, _ in batches]
        if not batches or epochs[-1] > self._epoch:
            return False
        if any(a > b for a, b in itertools.pairwise(epochs)):
            return False  # epochs never decrease along a log
        self._out.append(AppendToLog(end, Offset(next_offset - 1), batches[-1][0], records))
        self._log.append(batches, next_offset)
        for b in idempotent:
            self._producers.record(b)
        self._out.append(FlushLog())
        return True

    # ------------------------------------------------------------------ client

    def _refuse_append(self, request_id: int) -> None:
        self._out.append(
            AppendResult(request_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, leader_id=self._leader_id)
        )

    def _on_client_append(self, ev: ClientAppend) -> None:
        ld = self._leader
        if self._state is not L or self._shutting_down or ld is None:
            self._refuse_append(ev.request_id)
            return
        if not ev.values or (
            ev.producer != NO_PRODUCER and not 0 <= ev.sequence <= MAX_SEQUENCE - len(ev.values) + 1
        ):
            self._out.append(AppendResult(ev.request_id, ErrorCode.INVALID_REQUEST))
            return
        if ev.producer != NO_PRODUCER:
            self._idempotent_append(ev)
            return
        self._out.append(ActionTaken(Action.CLIENT_APPEND))
        ld.lingering.append((ev.request_id, ev.values))
        if self._timing.append_linger_ms <= 0:
            self._append_lingering()
        elif ld.linger_until is None:
            ld.linger_until = self._now + self._timing.append_linger_ms

    def _idempotent_append(self, ev: ClientAppend) -> None:
        """An idempotent client's append (kraft.core.producers): a resend of a batch the log
        holds is answered with that batch's offsets and epoch (acknowledged once it commits,
        like any append), a gap or a resend too old to tell is refused, and new values become
        their own batch carrying the producer id and sequence, after whatever lingers."""
        check = self._producers.check(ev.producer, ev.sequence, len(ev.values))
        if check.verdict is Verdict.DUPLICATE:
            b = check.batch
            assert b is not None
            self._out.append(
                AppendResult(
                    ev.request_id,
                    ErrorCode.NONE,
                    b.first_offset,
                    b.last_offset,
                    b.epoch,
                    self._me.id,
                )
            )
            return
        if check.verdict is not Verdict.NEW:
            refused = (
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
                if check.verdict is Verdict.OUT_OF_ORDER
                else ErrorCode.DUPLICATE_SEQUENCE_NUMBER
            )
            self._out.append(AppendResult(ev.request_id, refused))
            return
        self._out.append(ActionTaken(Action.CLIENT_APPEND))
        self._append_lingering()  # appends keep their arrival order
        first = self._log.end_offset
        last = Offset(first + len(ev.values) - 1)
        data = encode_batch(
            first,
            self._epoch,
            ev.values,
            timestamp_ms=self._now,
            producer_id=ev.producer,
            base_sequence=ev.sequence,
        )
        self._append(first, last, data)
        self._producers.record(ProducerBatch(ev.producer, ev.sequence, first, last, self._epoch))
        self._out.append(
            AppendResult(ev.request_id, ErrorCode.NONE, first, last, self._epoch, self._me.id)
        )
        self._maybe_advance_hwm()

    def _append_lingering(self) -> None:
        """Write the waiting client values as one batch in our epoch, durable before the
        AppendResults that answer them."""
        ld = self._leader
        assert ld is not None
        waiting, ld.lingering, ld.linger_until = ld.lingering, [], None
        if not waiting:
            return
        values = [v for _, vs in waiting for v in vs]
        first = self._log.end_offset
        data = encode_batch(first, self._epoch, values, timestamp_ms=self._now)
        self._append(first, Offset(first + len(values) - 1), data)
        at = first
        for request_id, vs in waiting:
            last = Offset(at + len(vs) - 1)
            self._out.append(
                AppendResult(request_id, ErrorCode.NONE, at, last, self._epoch, self._me.id)
            )
            at = Offset(last + 1)
        self._maybe_advance_hwm()
