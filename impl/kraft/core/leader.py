"""The leader's side of the replica: its bookkeeping for one epoch and the steps only a leader
takes.

`LeaderState` is the bookkeeping, like etcd's `tracker/`: the voters and observers fetching
from us and their progress (`Peer`), the epoch's high watermark (AdvanceHighWatermark over
kraft.core.quorum_math), check-quorum, the Fetches held until there is news, the client
appends lingering to be written as one batch (kraft.core.appends), and DescribeQuorum. Its
voter set can be replaced while leading (`set_voters`, KIP-856). It emits nothing.

`LeaderRole` takes the leader's steps over the replica's state (kraft.core.replica owns the
state, the transition table and the dispatch): BecomeLeader, HandleFetchRequest
(a snapshot id for a fetcher the log cannot serve, kraft.core.snapshots), BeginQuorumEpoch
answers, Resign; client appends are kraft.core.appends'.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kraft.control_records import (
    ControlRecord,
    KRaftVersionRecord,
    LeaderChangeMessage,
    encode_control_records,
)
from kraft.core import quorum_math as qm
from kraft.core.appends import Lingering
from kraft.core.effects import ActionTaken, AppendToLog, FlushLog
from kraft.core.events import SendFailed
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    Records,
    Request,
)
from kraft.core.quorum_info import UNKNOWN, QuorumDescription, ReplicaDescription
from kraft.core.vocabulary import Action, ReplicaState
from kraft.core.voter_set import KRAFT_VERSION_DYNAMIC, VoterSet
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey

if TYPE_CHECKING:
    from kraft.core.replica import Replica

L = ReplicaState.LEADER
R = ReplicaState.RESIGNED

LEADER_CHANGE_VERSION = 0
# Kafka's LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR: a leader that has not heard a Fetch from a
# majority of voters (itself included) within fetch timeout x 1.5 resigns.
CHECK_QUORUM_TIMEOUT_FACTOR = 1.5

# A Fetch held by the leader: (sender, request, deadline, reply token).
Parked = tuple[NodeId, FetchRequest, int, int | None]


@dataclass(slots=True)
class Peer:
    """The leader's picture of one replica fetching from it in this epoch."""

    key: ReplicaKey
    end_offset: Offset | None = None
    last_fetch_ms: int | None = None
    last_caught_up_ms: int | None = None
    # The leader's end offset when this replica last fetched: reaching it means caught up.
    leader_end_at_last_fetch: int = 0

    def fetched(self, fetch_offset: Offset, leader_end: Offset, now: int) -> None:
        """A Fetch from `fetch_offset` (its durable end) while the leader's end is
        `leader_end`: caught up if it reached our end now, or the end we had at its last
        fetch."""
        if fetch_offset >= leader_end:
            self.last_caught_up_ms = now
        elif self.last_fetch_ms is not None and fetch_offset >= self.leader_end_at_last_fetch:
            self.last_caught_up_ms = self.last_fetch_ms
        self.end_offset = fetch_offset
        self.last_fetch_ms = now
        self.leader_end_at_last_fetch = leader_end

    def describe(self) -> ReplicaDescription:
        return ReplicaDescription(
            self.key,
            UNKNOWN if self.end_offset is None else self.end_offset,
            UNKNOWN if self.last_fetch_ms is None else self.last_fetch_ms,
            UNKNOWN if self.last_caught_up_ms is None else self.last_caught_up_ms,
        )


# Kafka's LeaderState.OBSERVER_SESSION_TIMEOUT_MS: an observer whose last Fetch is this old is
# no longer listed by DescribeQuorum (a Peer that never fetched counts as fetching at -1 ms).
OBSERVER_SESSION_MS = 300_000


def _in_session(peer: Peer, now: int) -> bool:
    last = -1 if peer.last_fetch_ms is None else peer.last_fetch_ms
    return now - last < OBSERVER_SESSION_MS


class LeaderState:
    """The leader's bookkeeping for one epoch. Pure: no effects, time passed in."""

    __slots__ = (
        "begin_quorum_epoch_at",
        "begin_quorum_epoch_ms",
        "check_quorum_at",
        "check_quorum_ms",
        "complete_parked_at",
        "epoch_start",
        "fetched",
        "granting",
        "hwm",
        "lingering",
        "me",
        "me_is_voter",
        "observers",
        "parked",
        "resign_at",
        "voter_set",
        "voters",
    )

    def __init__(
        self,
        me: ReplicaKey,
        voters: VoterSet,
        *,
        epoch_start: Offset,
        granting: tuple[NodeId, ...],
        check_quorum_at: int | None,
        check_quorum_ms: int,
        begin_quorum_epoch_at: int,
        begin_quorum_epoch_ms: int,
    ) -> None:
        self.me = me
        self.epoch_start = epoch_start
        self.granting = granting
        # The other voters (not us) and the observers fetching from us, with their progress.
        self.voters: dict[NodeId, Peer] = {}
        self.observers: dict[ReplicaKey, Peer] = {}
        self.voter_set = voters
        self.me_is_voter = voters.contains(me)
        # The HWM of this epoch, the one Fetch and DescribeQuorum report: None until a
        # majority reached past epoch_start (Kafka's LeaderState.highWatermark starts empty).
        self.hwm: Offset | None = None
        # Check-quorum (Kafka LeaderState): voters heard from since the timer last restarted,
        # and when the timer runs out (None: a single-voter quorum never resigns for want of
        # fetches).
        self.fetched: set[NodeId] = set()
        self.check_quorum_at = check_quorum_at
        self.check_quorum_ms = check_quorum_ms
        # Kafka's LeaderState.beginQuorumEpochTimer: when it runs out the leader announces
        # itself again to every voter that has not fetched within begin_quorum_epoch_ms
        # (fetch timeout / 2); it starts expired, so the first round goes out at once.
        self.begin_quorum_epoch_at = begin_quorum_epoch_at
        self.begin_quorum_epoch_ms = begin_quorum_epoch_ms
        # Fetches with nothing to return, held until data, a HWM move or their wait runs out.
        self.parked: list[Parked] = []
        self.complete_parked_at: int | None = None
        # Client appends lingering to be written together as one batch (kraft.core.appends).
        self.lingering = Lingering()
        # When to resign: set once a committed voter set leaves us out (KIP-856; Kafka's
        # LeaderState.requestResign, acted on by pollLeader).
        self.resign_at: int | None = None
        self.set_voters(voters)

    def set_voters(self, voters: VoterSet) -> None:
        """Replace the voter set while leading (KIP-856). A voter that stays keeps its
        progress; a new voter already fetching as an observer brings its progress along; a
        removed voter's progress moves to the observers (it may go on fetching, as in Kafka's
        LeaderState). The HWM is never lowered. The voters that fetched since the
        check-quorum timer last restarted are kept, removed ones too: Kafka's
        updateVoterAndObserverStates leaves fetchedVoters as it is, so a removed voter's Fetch
        counts until the next restart."""
        old = self.voters
        kept: dict[NodeId, Peer] = {}
        for v in voters:
            if v.id == self.me.id:
                continue
            peer = old.pop(v.id, None)
            if peer is None:
                peer = self._take_observer(v, voters)
            kept[v.id] = peer
        for peer in old.values():
            self.observers.setdefault(peer.key, peer)
        self.voters = kept
        self.voter_set = voters
        self.me_is_voter = voters.contains(self.me)

    def _take_observer(self, voter: ReplicaKey, voters: VoterSet) -> Peer:
        for key in self.observers:
            if key.id == voter.id and voters.contains(key):
                return self.observers.pop(key)
        return Peer(voter)

    def observer(self, key: ReplicaKey, now: int) -> Peer:
        """The progress of an observer fetching at `now`. A new one first makes the leader
        forget the observers out of session, so churning observers cannot grow it forever."""
        peer = self.observers.get(key)
        if peer is None:
            for stale in [k for k, p in self.observers.items() if not _in_session(p, now)]:
                del self.observers[stale]
            peer = self.observers[key] = Peer(key)
        return peer

    def advance_hwm(self, own_end: Offset) -> Offset | None:
        """AdvanceHighWatermark: the largest offset a majority of voters reached (our own end
        counted while we are a voter), only past the start of our epoch, never lowered.
        Returns the new HWM, or None if it did not move."""
        ends = [-1 if p.end_offset is None else p.end_offset for p in self.voters.values()]
        if self.me_is_voter:
            ends.append(own_end)
        k = self.voter_set.majority
        if len(ends) < k:
            return None
        candidate = Offset(qm.high_watermark_fast(ends, k))
        if candidate <= self.epoch_start or (self.hwm is not None and candidate <= self.hwm):
            return None
        self.hwm = candidate
        return candidate

    def need_to_send_begin_quorum(self, now: int) -> list[NodeId]:
        """Kafka's LeaderState.needToSendBeginQuorumRequests: the other voters of the latest
        voter set whose last Fetch (of this epoch, accepted) is at least
        begin_quorum_epoch_ms old, or who never fetched (Kafka's -1 under a wall clock),
        by id. Whether a voter answered an earlier BeginQuorumEpoch does not count."""
        due = []
        for node, peer in sorted(self.voters.items()):
            last = peer.last_fetch_ms
            if last is None or now - last >= self.begin_quorum_epoch_ms:
                due.append(node)
        return due

    def heard_from_voter(self, src: NodeId, now: int) -> None:
        """Check-quorum (Kafka LeaderState.updateCheckQuorumForFollowingVoter): once voters
        making a majority with us have fetched, restart the timer."""
        if self.check_quorum_at is None or src == self.me.id:
            return
        self.fetched.add(src)
        needed = self.voter_set.majority - (1 if self.me_is_voter else 0)
        if len(self.fetched) >= needed:
            self.fetched.clear()
            self.check_quorum_at = now + self.check_quorum_ms

    def successors(self) -> tuple[NodeId, ...]:
        """The other voters, most caught-up first (ties by id): EndQuorumEpoch's order."""
        ranked = sorted(
            self.voters.values(),
            key=lambda p: (-(p.end_offset if p.end_offset is not None else -1), p.key.id),
        )
        return tuple(p.key.id for p in ranked)

    def describe(self, epoch: Epoch, own_end: Offset, now: int) -> QuorumDescription:
        """DescribeQuorum's answer: every voter (us included), named by its key in the voter
        set as Kafka's leader names them (a static voter set's have the zero directory id,
        whatever directory their Fetches carried), and every observer by the key it fetched
        with."""
        voters = []
        for v in self.voter_set:
            if v.id == self.me.id:
                voters.append(ReplicaDescription(v, own_end, now, now))
            else:
                p = self.voters[v.id]
                voters.append(p.describe() if p.key == v else replace(p.describe(), replica=v))
        return QuorumDescription(
            leader_id=self.me.id,
            leader_epoch=epoch,
            high_watermark=self.hwm,
            voters=tuple(voters),
            observers=tuple(p.describe() for p in self.observers.values() if _in_session(p, now)),
        )


class LeaderRole:
    """The steps only a leader takes, over the replica's state."""

    __slots__ = ("_r",)

    def __init__(self, replica: Replica) -> None:
        self._r = replica

    # ------------------------------------------------------------------ becoming, leaving

    def become_leader(self) -> None:
        """BecomeLeader: persist, write LeaderChange as the epoch's first record; the
        BeginQuorumEpoch timer starts expired, so the step ends with BeginQuorumEpoch to
        every other voter (Replica._send_due)."""
        r = self._r
        r._out.append(ActionTaken(Action.BECOME_LEADER))
        r._transition(L, r._epoch)
        ld = r._leader
        assert ld is not None
        records: list[ControlRecord] = [
            LeaderChangeMessage(
                LEADER_CHANGE_VERSION,
                r._me.id,
                voters=r._voters.ids,
                granting_voters=ld.granting,
            )
        ]
        offset = r._log.end_offset
        voter_sets: list[tuple[Offset, VoterSet]] = []
        stated = r._voters.record
        if stated is not None and r._log.voters_offset < 0:
            # KIP-853 (Kafka's appendStartOfEpochControlRecords): a voter set known only from
            # the bootstrap checkpoint is written into the log, so that every replica fetching
            # it (observers without that checkpoint too) learns it from the log.
            records += (KRaftVersionRecord(0, KRAFT_VERSION_DYNAMIC), stated)
            voter_sets.append((Offset(offset + 2), r._voters))
        data = encode_control_records(offset, r._epoch, records, timestamp_ms=r._now)
        self._append(offset, Offset(offset + len(records) - 1), data, voter_sets)
        self._maybe_advance_hwm()

    def resign(self) -> tuple[NodeId, ...]:
        """Resign (graceful shutdown, or check-quorum expiry as Kafka's pollLeader): become
        Resigned in this epoch and send EndQuorumEpoch to the other voters, most caught-up
        first, so that the best successor stands for election first."""
        r = self._r
        ld = r._leader
        assert ld is not None
        r._out.append(ActionTaken(Action.RESIGN))
        successors = ld.successors()
        r._transition(R, r._epoch, leader=r._me.id)
        for dst in successors:
            r._send(
                dst,
                EndQuorumEpochRequest(r._cfg.cluster_id, r._me.id, r._epoch, successors),
            )
        return successors

    def tick(self, ld: LeaderState) -> bool:
        """The leader's timers: lingering appends, held fetches, check-quorum. True if the
        leader resigned. Run only while leading (Replica._on_tick: `ld` is the LeaderState,
        which exists only in Leader), and what runs before the resignations below (appends,
        held fetches) makes no transition, so the replica is the Leader at both tests."""
        r = self._r
        now = r._now
        if ld.lingering.until is not None and ld.lingering.until <= now:
            self._append_lingering()
        if ld.complete_parked_at is not None and ld.complete_parked_at <= now:
            ld.complete_parked_at = None
            self._complete_parked(all_of_them=True)
        elif any(d <= now for _, _, d, _ in ld.parked):
            self._complete_parked(all_of_them=False)
        if ld.resign_at is not None and ld.resign_at <= now:
            self.resign()  # removed from the committed voter set (kraft.core.reconfig)
            return True
        if r._shutting_down or (ld.check_quorum_at is not None and ld.check_quorum_at <= now):
            # Kafka's pollLeader resigns a leader asked to shut down, or whose check-quorum
            # expired (no Fetch from a majority in time). Shutdown resigns a Leader at once
            # (Replica._on_shutdown), so a shutting-down Leader is only one that won its
            # election after saying ShutdownComplete, from events its driver still had queued.
            self.resign()
            return True
        return False

    # ------------------------------------------------------------------ BeginQuorumEpoch

    def handle_begin_response(
        self, src: NodeId, resp: BeginQuorumEpochResponse, in_reply_to: Request | None
    ) -> None:
        r = self._r
        r._out.append(ActionTaken(Action.HANDLE_BEGIN_QUORUM_EPOCH_RESPONSE))
        # Kafka's RequestManager.onResponseResult: the answer to this epoch's request makes
        # the voter ready for the next round at once, or backs it off when Kafka's handler
        # counts it a failure. (An answer to an earlier epoch's request is Kafka's stale
        # correlation id: ignored; its connections were reset when this epoch began.)
        if (
            r._state is L
            and src in r._retry
            and (
                not isinstance(in_reply_to, BeginQuorumEpochRequest)
                or in_reply_to.leader_epoch == r._epoch
            )
        ):
            if self._begin_answer_handled(resp):
                del r._retry[src]
            else:
                r._retry[src] = r._now + r._timing.retry_backoff_ms
        if resp.error is not ErrorCode.UNKNOWN_LEADER_EPOCH:
            # Kafka's maybeHandleCommonResponse: the epoch and leader an answer names count
            # whatever its error. Whether a voter answered is not recorded: Kafka's
            # hasAcknowledgedLeader is read by nothing; whom the leader asks depends on fetches.
            r._learn(resp.leader_id, resp.leader_epoch)

    def _begin_answer_handled(self, resp: BeginQuorumEpochResponse) -> bool:
        """Kafka's handleBeginQuorumEpochResponse result (false: back the voter off): an
        error with no partition data (a top-level one, decoded with epoch -1) fails; an
        answer naming an earlier epoch, UNKNOWN_LEADER_EPOCH, a later epoch,
        FENCED_LEADER_EPOCH and NOT_LEADER_OR_FOLLOWER are handled (maybeHandleCommonResponse),
        as are NONE and INVALID_VOTER_KEY; BROKER_NOT_AVAILABLE and any other error of our
        epoch fail (INVALID_REQUEST too: Kafka's leader throws there)."""
        epoch = self._r._epoch
        err = resp.error
        if err is ErrorCode.NONE:
            return True
        if resp.leader_epoch < 0:
            return False
        if resp.leader_epoch != epoch or err in (
            ErrorCode.UNKNOWN_LEADER_EPOCH,
            ErrorCode.FENCED_LEADER_EPOCH,
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ):
            return True
        return err is ErrorCode.INVALID_VOTER_KEY

    def begin_failed(self, ev: SendFailed) -> None:
        """A BeginQuorumEpoch that could not be sent backs its voter off (Kafka: the failed
        send is an error answer to the request in flight)."""
        r = self._r
        req = ev.request
        assert isinstance(req, BeginQuorumEpochRequest)
        if r._state is L and req.leader_epoch == r._epoch and ev.dst in r._retry:
            r._retry[ev.dst] = r._now + r._timing.retry_backoff_ms

    def send_begin_quorum_epoch(self, ld: LeaderState) -> None:
        """Kafka's maybeSendBeginQuorumEpochRequests: once the timer has run out, a
        BeginQuorumEpoch to every voter that has not fetched within fetch timeout / 2 and
        has no request in flight nor backs off (RequestManager.isReady: `_retry` holds when
        each such voter is ready again), then the timer restarts."""
        r = self._r
        now = r._now
        if ld.begin_quorum_epoch_at > now:
            return
        for dst in ld.need_to_send_begin_quorum(now):
            busy = r._retry.get(dst)
            if busy is None or busy <= now:
                r._retry[dst] = now + r._timing.request_timeout_ms
                r._send(
                    dst,
                    BeginQuorumEpochRequest(
                        r._cfg.cluster_id, r._me.id, r._epoch, voter=r._voter_key(dst)
                    ),
                )
        ld.begin_quorum_epoch_at = now + ld.begin_quorum_epoch_ms

    # ------------------------------------------------------------------ Fetch

    def fetch_response(
        self,
        error: ErrorCode,
        *,
        diverging: OffsetAndEpoch | None = None,
        snapshot: OffsetAndEpoch | None = None,
        records: Records = b"",
    ) -> FetchResponse:
        # Only a leader answering in its epoch reports a HWM, and only its epoch's HWM: a
        # follower's HWM it kept from the previous leader may be below what another follower
        # already holds (Kafka: "Non-monotonic update of high watermark").
        r = self._r
        ld = r._leader
        hwm = ld.hwm if ld is not None and error is ErrorCode.NONE else None
        return FetchResponse(
            error=error,
            leader_id=r._leader_or_none(),
            leader_epoch=r._epoch,
            high_watermark=Offset(-1) if hwm is None else hwm,
            log_start_offset=r._log.start_offset,
            diverging_epoch=diverging,
            snapshot_id=snapshot,
            records=records,
        )

    def fetch_refusal(self) -> FetchResponse:
        return self.fetch_response(ErrorCode.INVALID_REQUEST)

    def handle_fetch_request(
        self,
        src: NodeId,
        req: FetchRequest,
        _in_reply_to: Request | None = None,
        *,
        park: bool = True,
    ) -> None:
        r = self._r
        r._out.append(ActionTaken(Action.HANDLE_FETCH_REQUEST))
        err = r._request_error(req.cluster_id)
        if err is None and (
            req.fetch_offset < 0
            or req.last_fetched_epoch < 0
            or req.last_fetched_epoch > req.replica_epoch
        ):
            err = ErrorCode.INVALID_REQUEST
        if err is None:
            err = r._leader_only_error(req.replica_epoch)
        ld = r._leader
        if err is not None or ld is None:
            r._send(src, self.fetch_response(err or ErrorCode.NOT_LEADER_OR_FOLLOWER))
            return
        # KIP-630: a fetcher our log cannot serve gets the latest snapshot's id.
        snapshot = r._snaps.snapshot_for_fetch(req)
        if snapshot is not None:
            r._send(src, self.fetch_response(ErrorCode.NONE, snapshot=snapshot))
            return
        if req.fetch_offset < r._log.start_offset:
            # Below the log start with no snapshot to send (a log started elsewhere).
            r._send(src, self.fetch_response(ErrorCode.OFFSET_OUT_OF_RANGE))
            return
        # The fetcher's (last fetched epoch, fetch offset) must lie on our log.
        ours = r._log.end_offset_for_epoch(req.last_fetched_epoch)
        if ours.epoch != req.last_fetched_epoch or ours.offset < req.fetch_offset:
            r._send(src, self.fetch_response(ErrorCode.NONE, diverging=ours))
            return
        hwm_before = ld.hwm
        self._record_fetch(ld, src, req)
        end = r._log.end_offset
        if req.fetch_offset < end:
            max_bytes = min(req.max_bytes, r._timing.fetch_max_bytes)
            data = r._reader.read(req.fetch_offset, max_bytes)
            r._send(src, self.fetch_response(ErrorCode.NONE, records=data))
        elif park and req.max_wait_ms > 0 and ld.hwm == hwm_before:
            # Nothing new for the fetcher (a HWM it moved itself is news: answer at once).
            ld.parked.append((src, req, r._now + req.max_wait_ms, r._reply_to))
        else:
            r._send(src, self.fetch_response(ErrorCode.NONE))

    def _record_fetch(self, ld: LeaderState, src: NodeId, req: FetchRequest) -> None:
        """The leader learns the fetcher's durable end offset and when it last fetched (no
        BeginQuorumEpoch is due to a voter fetching); a voter's Fetch may move the HWM."""
        r = self._r
        now = r._now
        if src in ld.voters and ld.voter_set.contains(req.replica):
            peer = ld.voters[src]
            peer.key = req.replica
            ld.heard_from_voter(src, now)
        else:
            peer = ld.observer(req.replica, now)
        peer.fetched(req.fetch_offset, r._log.end_offset, now)
        if src in ld.voters:
            self._maybe_advance_hwm()
        r._snaps.maybe_advance_log_start()

    def heard_from_voter(self, src: NodeId) -> None:
        ld = self._r._leader
        if ld is not None:
            ld.heard_from_voter(src, self._r._now)

    def _maybe_advance_hwm(self) -> None:
        """AdvanceHighWatermark (LeaderState.advance_hwm); the replica's own HWM follows."""
        r = self._r
        ld = r._leader
        if ld is None:
            return
        hwm = ld.advance_hwm(r._log.end_offset)
        if hwm is None:
            return
        r._raise_hwm(hwm)
        r._out.append(ActionTaken(Action.ADVANCE_HIGH_WATERMARK))
        if ld.parked:
            ld.complete_parked_at = r._now

    def _complete_parked(self, *, all_of_them: bool) -> None:
        r = self._r
        ld = r._leader
        assert ld is not None
        now = r._now
        due = [p for p in ld.parked if all_of_them or p[2] <= now]
        ld.parked = [p for p in ld.parked if p not in due]
        for src, req, _, token in due:
            self.answer_held(token, src, req)

    def answer_held(self, token: int | None, src: NodeId, req: FetchRequest) -> None:
        """Handle a held Fetch again, its answer routed by the token it arrived with; it is
        answered now, not held again."""
        r = self._r
        outer, r._reply_to = r._reply_to, token
        try:
            self.handle_fetch_request(src, req, park=False)
        finally:
            r._reply_to = outer

    def answer_stepped_down(self, token: int | None, src: NodeId) -> None:
        """A Fetch held by a leader that stepped down, answered NOT_LEADER_OR_FOLLOWER with
        the new epoch and leader, as Kafka completes its fetch purgatory when it resigns or
        follows another leader (transitionToResigned, onBecomeFollower). Kafka keeps it held
        as it becomes Unattached; kraft answers then too (README, deviations)."""
        r = self._r
        outer, r._reply_to = r._reply_to, token
        try:
            r._out.append(ActionTaken(Action.HANDLE_FETCH_REQUEST))
            r._send(src, self.fetch_response(ErrorCode.NOT_LEADER_OR_FOLLOWER))
        finally:
            r._reply_to = outer

    # ------------------------------------------------------------------ client appends

    def _append(
        self,
        first: Offset,
        last: Offset,
        data: bytes,
        voter_sets: list[tuple[Offset, VoterSet]] | None = None,
    ) -> None:
        """Leader append of one batch in its epoch, made durable before later effects; the
        voter sets its Voters records set take effect now (KIP-856)."""
        r = self._r
        r._out.append(AppendToLog(first, last, r._epoch, data, leader_encoded=True))
        r._log.append([(r._epoch, first)], Offset(last + 1), voter_sets or ())
        r._out.append(FlushLog())
        if r._leader is not None and r._leader.parked:
            # Answer held fetches next tick, once the driver has applied this append.
            r._leader.complete_parked_at = r._now

    def _append_lingering(self) -> None:
        """Write what lingers now (kraft.core.appends), before a control record."""
        self._r._appends.append_lingering()
