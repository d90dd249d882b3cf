"""The KRaft replica (KIP-595): a pure state machine, events in, effects out.

This module owns the replica's state (`Replica`), its state changes (the transition table of
kraft.core.transitions, `_transition`/`_enter`) and its timers; events and messages reach their
handlers through tables keyed by type, which kraft.core.dispatch builds (with the receive
path). The steps themselves live by role:
kraft.core.election (timeouts, pre-votes, votes), kraft.core.leader (the leader's bookkeeping
and steps), kraft.core.follower (fetching from the leader), kraft.core.snapshots (KIP-630 on
the holding side: CreateSnapshot, AdvanceLogStartOffset, serving FetchSnapshot) and
kraft.core.snapshot_transfer (fetching a snapshot). Each role holds a reference to the replica
and works on its state.

One object per replica. `step` handles one event and returns the effects the driver must
perform, in order (see kraft.core.effects for the durability contract). Time comes only from
events and randomness only from the injected `rng`. The replica keeps its log's metadata
(kraft.core.log_metadata) and reads record bytes only through `reader`, to fill Fetch responses.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from kraft.core.appends import ClientAppends
from kraft.core.commits import CommitRule
from kraft.core.dispatch import dispatch_tables
from kraft.core.effects import (
    ActionTaken,
    AppendResult,
    Effect,
    ElectionState,
    HighWatermarkMoved,
    PersistElectionState,
    Send,
    ShutdownComplete,
    StateChanged,
)
from kraft.core.election import ElectionRole
from kraft.core.events import Event, SendFailed, Shutdown, Tick
from kraft.core.follower import FollowerRole
from kraft.core.leader import CHECK_QUORUM_TIMEOUT_FACTOR, LeaderRole, LeaderState
from kraft.core.log_metadata import LogMetadata, LogState
from kraft.core.messages import (
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchResponse,
    FetchSnapshotResponse,
    Message,
    Records,
    Request,
    VoteResponse,
)
from kraft.core.producers import ProducerBatch, ProducerTable
from kraft.core.quorum_info import QuorumDescription
from kraft.core.reconfig import VOTER_CHANGE_RESPONSES, VoterChanges
from kraft.core.replica_view import ReplicaView, ViewCache
from kraft.core.snapshot_transfer import SnapshotFetcher
from kraft.core.snapshots import NO_SNAPSHOTS, LogStartPolicy, SnapshotRole, SnapshotSource
from kraft.core.timing import QuorumTiming
from kraft.core.transitions import IllegalTransitionError, check_transition
from kraft.core.vocabulary import Action, ReplicaState
from kraft.core.voter_set import VoterSet
from kraft.errors import ErrorCode
from kraft.ids import NO_NODE, ClusterId, Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey

__all__ = [
    "IllegalTransitionError",
    "LogReader",
    "Replica",
    "ReplicaConfig",
    "SnapshotSource",
]

U = ReplicaState.UNATTACHED
V = ReplicaState.VOTED
C = ReplicaState.CANDIDATE
L = ReplicaState.LEADER
F = ReplicaState.FOLLOWER
R = ReplicaState.RESIGNED
P = ReplicaState.PROSPECTIVE

# The responses: a Send of one carries the reply token of the request it answers.
_RESPONSES: frozenset[type[Message]] = frozenset(
    {
        VoteResponse,
        BeginQuorumEpochResponse,
        EndQuorumEpochResponse,
        FetchResponse,
        FetchSnapshotResponse,
        *VOTER_CHANGE_RESPONSES,
    }
)


@dataclass(frozen=True, slots=True)
class ReplicaConfig:
    """Who this replica is and in which quorum, and the quorum's timing."""

    node: ReplicaKey
    cluster_id: ClusterId
    # The static voter set (the voter-set history's entry before the log's first record).
    voters: tuple[ReplicaKey, ...]
    timing: QuorumTiming = field(default_factory=QuorumTiming)
    # How far and when the log start moves (kraft.core.snapshots.LogStartPolicy).
    log_start_policy: LogStartPolicy = LogStartPolicy.KIP_630
    # The quorum's listener: a voter's endpoints must name it (KIP-853 voter changes).
    listener_name: str = "CONTROLLER"


class LogReader(Protocol):
    def read(self, offset: Offset, max_bytes: int) -> Records:
        """Whole batches starting at `offset`, at most about `max_bytes` (at least one)."""
        ...


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
        snapshots: SnapshotSource | None = None,
    ) -> None:
        """`snapshots`: the driver's snapshots (KIP-630). Without it the replica serves none,
        and a follower told to fetch one says so (SnapshotRequired) instead of fetching."""
        self._cfg = config
        self._timing = config.timing
        self._me = config.node
        self._log = LogMetadata(log_state, VoterSet(config.voters))
        self._voters = self._log.voters
        # Asked on every message; recompute wherever the voter set changes (KIP-856).
        self._is_voter = self._voters.contains(self._me)
        # The appends this replica accepted, until each is decided (kraft.core.commits).
        self._commits = CommitRule()
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
        # Per peer, when it is ready for this state's next request (Kafka's RequestManager:
        # one request in flight until its timeout, or a backoff after a failure). Prospective,
        # Candidate: the peers still to ask (Vote), due then. Leader: the voters asked with
        # BeginQuorumEpoch, consulted when its timer runs out (LeaderRole); absent: ready.
        self._retry: dict[NodeId, int] = {}
        self._granted: set[NodeId] = set()
        self._rejected: set[NodeId] = set()
        self._leader: LeaderState | None = None
        self._discovery_next = 0
        # Follower: a successful Fetch answer from the leader came in this epoch (Kafka's
        # FollowerState.hasFetchedFromLeader); until then the follower may grant pre-votes.
        self._has_fetched = False
        # Observer follower: its fetch timeout expired with no answer from the leader, so it
        # asks its leader and the voters in turn until the leader answers or another epoch is
        # heard of (Kafka's pollFollowerAsObserver); it stays the leader's Follower meanwhile.
        self._leader_silent = False
        # The last snapshot id a leader asked us to fetch (reported once per id).
        self._snapshot_reported: OffsetAndEpoch | None = None

        self._shutting_down = False
        self._shutdown_done = False
        self._shutdown_deadline: int | None = None
        self._end_pending: set[NodeId] = set()
        self._views = ViewCache()
        # The reply token of the request being answered (Receive.reply_to), for Send.
        self._reply_to: int | None = None

        self._elect = ElectionRole(self)
        self._lead = LeaderRole(self)
        self._appends = ClientAppends(self)
        self._follow = FollowerRole(self)
        self._snaps = SnapshotRole(self, snapshots or NO_SNAPSHOTS)
        self._fetcher = SnapshotFetcher(self) if snapshots is not None else None
        self._reconfig = VoterChanges(self)
        # Dispatch tables, keyed by the exact type of the event, message or request
        # (kraft.core.dispatch builds them; the simulator's mutants re-point entries).
        tables = dispatch_tables(self)
        self._on_event = tables.on_event
        self._on_message = tables.on_message
        self._refusals = tables.refusals
        self._on_failed = tables.on_failed

    # ------------------------------------------------------------------ public API

    @property
    def is_voter(self) -> bool:
        return self._is_voter

    @property
    def has_fetched_from_leader(self) -> bool:
        """Kafka's FollowerState.hasFetchedFromLeader: a Follower whose leader answered a
        Fetch in this epoch (False in every other state); for checkers."""
        return self._has_fetched

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
        elif es.leader_id == me.id:
            # A leader comes back Resigned in its epoch: no second vote, no second leader.
            # A voter or not (Kafka's QuorumState.initialize asks no voter set): a leader that
            # removed itself ends its epoch too, going Unattached in the next one when its
            # election timer runs out (Kafka's pollResigned). Back as an Unattached observer
            # it would keep that epoch for good, and a lagging voter that still follows it
            # there would refuse every pre-vote of that epoch: no leader ever again.
            self._enter(R, es.epoch, leader=me.id)
        elif voter and es.voted_for is not None and self._same_replica(es.voted_for, me):
            self._enter(C, es.epoch, voted=es.voted_for)
        elif es.voted_for is not None:  # an observer's vote too (KIP-853: any replica votes)
            self._enter(V, es.epoch, voted=es.voted_for)
        elif es.leader_id is not None:  # another's: ours came back Resigned above
            self._enter(F, es.epoch, leader=es.leader_id)
        else:
            self._enter(U, es.epoch)
        self._out.append(StateChanged(U, self._state, self._epoch))
        if self._state is C:
            # Kafka's onBecomeCandidate: a Candidate counts its own vote (the only voter wins).
            self._elect.maybe_win_election()
        elif voter and len(self._voters) == 1:
            # Kafka's initialize: the only voter does not wait for its election timer.
            self._elect.election_timeout(at_start=True)
        self._send_due()
        return self._take()

    def step(self, event: Event) -> list[Effect]:
        if not self._started:
            raise IllegalTransitionError("step() before start()")
        self._out = []
        self._now = max(self._now, event.now_ms)
        self._on_event[type(event)](event)
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
        ld = self._leader
        if ld is None:
            if self._retry:
                t = min(self._retry.values())
                if soonest is None or t < soonest:
                    soonest = t
        else:
            # A leader's `_retry` only gates its BeginQuorumEpoch rounds: the timer wakes it.
            for t in (
                ld.complete_parked_at,
                ld.lingering.until,
                ld.check_quorum_at,
                ld.resign_at,
                ld.begin_quorum_epoch_at,
            ):
                if t is not None and (soonest is None or t < soonest):
                    soonest = t
            for _, _, t, _ in ld.parked:
                if soonest is None or t < soonest:
                    soonest = t
        t = self._reconfig.next_deadline()
        if t is not None and (soonest is None or t < soonest):
            soonest = t
        if soonest is None:
            return self._now + self._timing.election_timeout_ms
        return soonest if soonest > self._now else self._now

    def view(self) -> ReplicaView:
        """The replica as checkers and traces see it (rebuilt only on a change)."""
        return self._views.view_of(self)

    def producer_batches(self) -> tuple[ProducerBatch, ...]:
        """The idempotent batches the producer table retains (for checkers)."""
        return self._producers.batches()

    def describe_quorum(self) -> QuorumDescription | None:
        ld = self._leader
        if ld is None:
            return None
        return ld.describe(self._epoch, self._log.end_offset, self._now)

    # ------------------------------------------------------------------ state changes

    def _take(self) -> list[Effect]:
        out, self._out = self._out, []
        return out

    @staticmethod
    def _same_replica(a: ReplicaKey, b: ReplicaKey) -> bool:
        return VoterSet((a,)).contains(b)

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
        if epoch == old_epoch and self._leader_id is not None and new in (U, V):
            # One vote per epoch: a replica that knew its epoch's leader keeps no vote (as
            # Kafka stores none once it knows the leader), so it must never be back in a
            # state that may grant one in that epoch (Kafka: Unattached in the same epoch
            # only from Prospective, which keeps the leader).
            raise IllegalTransitionError(
                f"{old.value}@{old_epoch} -> {new.value}: the epoch's leader is known"
            )
        if new in (F, L, R):
            voted = None  # as Kafka: a known leader replaces the vote in the stored state
        elif epoch == old_epoch and voted is None and new is not C:
            voted = self._voted_for  # a vote cast in this epoch stays on record
        parked = self._leader.parked if self._leader is not None else []
        lingering = self._leader.lingering.entries if self._leader is not None else []
        if self._fetcher is not None:
            self._fetcher.abandon()  # a snapshot is fetched from one leader in one epoch
        if old is L:
            self._reconfig.left_leadership()
        self._enter(new, epoch, leader=leader, voted=voted)
        if new is not P or old is P:
            self._persist()
        self._out.append(StateChanged(old, new, epoch))
        for request_id, _ in lingering:
            self._appends.refuse(request_id)
        # Fetches held by a leader that stepped down are answered at once (see
        # LeaderRole.answer_stepped_down).
        for src, _, _, token in parked:
            self._lead.answer_stepped_down(token, src)

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
        kept = self._election_deadline if self._elect.keeps_election_timer(new) else None
        self._state, self._epoch = new, epoch
        self._leader_id, self._voted_for = leader, voted
        self._election_deadline = self._fetch_deadline = None
        self._fetch_send_at = self._fetch_in_flight_until = None
        self._retry = {}
        self._granted, self._rejected = set(), set()
        self._leader = None  # set again below only for L: it is not None exactly while leading
        self._has_fetched = False
        self._leader_silent = False
        others = [v.id for v in self._voters if v.id != self._me.id]
        if new in (U, V):
            if self.is_voter:
                if kept is not None:
                    self._election_deadline = kept
                else:
                    self._election_deadline = now + self._elect.random_election_timeout()
            else:
                self._fetch_send_at = now  # an observer looks for the leader
        elif new in (P, C):
            # Both ask every other voter (pre-votes, then votes) and count themselves.
            if new is C:
                self._voted_for = self._me
            self._granted = {self._me.id}
            self._election_deadline = now + self._elect.random_election_timeout()
            self._retry = dict.fromkeys(others, now)
        elif new is F:
            self._fetch_deadline = now + self._follow.random_fetch_timeout()
            self._fetch_send_at = now
        elif new is L:
            self._leader_id = self._me.id
            single = self.is_voter and len(self._voters) == 1
            check_ms = int(self._timing.fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR)
            self._leader = LeaderState(
                self._me,
                self._voters,
                epoch_start=self._log.end_offset,
                granting=tuple(sorted(granted)),
                check_quorum_at=None if single else now + check_ms,
                check_quorum_ms=check_ms,
                begin_quorum_epoch_at=now,
                begin_quorum_epoch_ms=self._timing.fetch_timeout_ms // 2,
            )
            # `_retry` stays empty: every voter is ready (Kafka's onBecomeLeader resets the
            # connections).
        elif new is R:
            self._leader_id = self._me.id
            self._election_deadline = now + self._elect.random_election_timeout()

    # ------------------------------------------------------------------ timers

    def _on_tick(self, _ev: Tick) -> None:
        now = self._now
        st = self._state
        ld = self._leader
        self._reconfig.tick()
        if ld is not None and self._lead.tick(ld):
            return  # resigned
        if self._fetch_in_flight_until is not None and self._fetch_in_flight_until <= now:
            self._fetch_in_flight_until = None
            self._fetch_send_at = now
        if st in (U, V, P, C, R) and self._election_deadline is not None:
            if self._election_deadline <= now:
                if self._shutting_down:
                    self._election_deadline = None  # a replica on its way out stands for nothing
                else:
                    self._elect.election_timeout()
        elif st is F and self._fetch_deadline is not None and self._fetch_deadline <= now:
            if self.is_voter:
                if self._shutting_down:
                    self._fetch_deadline = None
                else:
                    self._elect.election_timeout()
            else:
                # An observer stays the Follower of its epoch's leader and asks the voters
                # (Kafka's pollFollowerAsObserver): forgetting the leader in the same epoch
                # could let it grant a second vote in that epoch.
                self._follow.leader_silent()
        if self._shutdown_deadline is not None and self._shutdown_deadline <= now:
            self._end_pending.clear()

    # ------------------------------------------------------------------ sending

    def _send(self, dst: NodeId, msg: Message) -> None:
        reply_to = self._reply_to if type(msg) in _RESPONSES else None
        self._out.append(Send(dst, msg, reply_to))

    def _send_due(self) -> None:
        now = self._now
        st = self._state
        if st in (P, C):
            # The retry map is emptied once a majority rejected: nothing more to ask.
            for dst, at in sorted(self._retry.items()):
                if at <= now:
                    self._retry[dst] = now + self._timing.request_timeout_ms
                    self._send(dst, self._elect.vote_request(dst))
        elif self._leader is not None:  # leading (a LeaderState exists only in Leader)
            self._lead.send_begin_quorum_epoch(self._leader)
        if self._fetch_send_at is not None and self._fetch_send_at <= now:
            self._follow.send_fetch()

    def _voter_key(self, node: NodeId) -> ReplicaKey | None:
        for v in self._voters:
            if v.id == node:
                return v
        return None

    # ------------------------------------------------------------------ receiving

    def _leader_or_none(self) -> NodeId:
        return NO_NODE if self._leader_id is None else self._leader_id

    def _request_error(self, cluster_id: ClusterId) -> ErrorCode | None:
        if cluster_id != self._cfg.cluster_id:
            return ErrorCode.INCONSISTENT_CLUSTER_ID
        return None

    def _leader_only_error(self, epoch: Epoch) -> ErrorCode | None:
        """Kafka's validateLeaderOnlyRequest for a request naming the leader's `epoch`
        (Fetch, FetchSnapshot, UpdateRaftVoter; Add/RemoveRaftVoter pass our own): a past
        epoch is fenced, a later one unknown, then we must lead and not be shutting down."""
        if epoch < self._epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if epoch > self._epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH  # we cannot confirm that epoch's leader
        if self._leader is None:  # not leading: a LeaderState exists only in Leader
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self._shutting_down:
            return ErrorCode.BROKER_NOT_AVAILABLE
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

    def _addressed_to_me(self, voter: ReplicaKey | None) -> bool:
        """KIP-853: a request naming the replica it is meant for must name us."""
        return voter is None or self._same_replica(voter, self._me)

    # ------------------------------------------------------------------ shutdown

    def _on_shutdown(self, _ev: Shutdown) -> None:
        """Graceful shutdown: a leader resigns and sends EndQuorumEpoch (best effort)."""
        if self._shutting_down:
            return
        self._shutting_down = True
        if self._leader is None:  # not leading
            self._end_pending.clear()
            return
        successors = self._lead.resign()
        self._end_pending = set(successors)
        self._shutdown_deadline = self._now + self._timing.request_timeout_ms

    def _end_failed(self, ev: SendFailed) -> None:
        self._end_pending.discard(ev.dst)

    def _check_shutdown(self) -> None:
        if self._shutting_down and not self._shutdown_done and not self._end_pending:
            self._shutdown_done = True
            self._shutdown_deadline = None
            self._out.append(ShutdownComplete())

    def _handle_end_response(
        self, src: NodeId, resp: EndQuorumEpochResponse, _in_reply_to: Request | None
    ) -> None:
        self._out.append(ActionTaken(Action.HANDLE_END_QUORUM_EPOCH_RESPONSE))
        self._end_pending.discard(src)
        # A replica that is shutting down ignores news of a newer leader (KIP-595).
        if not self._shutting_down:
            self._learn(resp.leader_id, resp.leader_epoch)

    # ------------------------------------------------------------------ the HWM

    def _raise_hwm(self, value: Offset) -> bool:
        """The replica's own HWM rises (never falls); the driver hears HighWatermarkMoved."""
        if self._hwm is not None and value <= self._hwm:
            return False
        self._hwm = value
        self._out.append(HighWatermarkMoved(value))
        # Appends below `value` that the log still holds in their epoch are committed.
        self._out.extend(self._commits.high_watermark_raised(value, self._log))
        self._reconfig.high_watermark_raised(value)
        return True

    def accept(self, request_id: int, first: Offset, last: Offset, epoch: Epoch) -> None:
        """Answer an accepted client append; its outcome follows from the commit rule."""
        self._out.append(AppendResult(request_id, ErrorCode.NONE, first, last, epoch, self._me.id))
        self._out.extend(
            self._commits.accepted(
                request_id, first, last, epoch, high_watermark=self._hwm, log=self._log
            )
        )
