"""The follower's (and observer's) side of the replica: fetching from the leader.

`FollowerRole` takes these steps over the replica's state (kraft.core.replica owns the state,
the fetch timers among it, and the transition table; kraft.core.dispatch routes messages
here): SendFetchRequest (to the leader, or to a voter to discover it, or to the leader and
the voters in turn for an observer whose leader went silent), HandleFetchResponse (divergence
truncation, appending fetched batches, the HWM the leader reports, handing over to
kraft.core.snapshot_transfer when the leader names a snapshot, or the snapshot-required
backoff of a replica that fetches none), and the follower's answers to BeginQuorumEpoch and
EndQuorumEpoch.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from kraft.core import quorum_math as qm
from kraft.core.effects import ActionTaken, AppendToLog, FlushLog, SnapshotRequired, TruncateLog
from kraft.core.events import SendFailed
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    Records,
    Request,
)
from kraft.core.producers import ProducerBatch, producer_batch_of
from kraft.core.quorum_math import PY
from kraft.core.vocabulary import Action, ReplicaState
from kraft.core.voter_records import refresh_voters, voter_sets_in
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch
from kraft.records import CorruptRecordError, TruncatedBatchError, iter_batches

if TYPE_CHECKING:
    from kraft.core.replica import Replica

U = ReplicaState.UNATTACHED
V = ReplicaState.VOTED
F = ReplicaState.FOLLOWER

# A follower told to fetch a snapshot it cannot fetch (no SnapshotSource) fetches again only
# after this many retry backoffs, capped at half a fetch timeout so that it still hears of a
# new leader well within the fetch timeout and never times out a live leader.
SNAPSHOT_REFETCH_RETRIES = 50


class FollowerRole:
    """The steps of a replica fetching from a leader, over the replica's state."""

    __slots__ = ("_r",)

    def __init__(self, replica: Replica) -> None:
        self._r = replica

    # ------------------------------------------------------------------ Fetch

    def random_fetch_timeout(self) -> int:
        """Deviation from Kafka (README): a voter's fetch timeout is jittered by up to half an
        election timeout, as Raft randomizes follower timeouts, so that the followers of a
        dead leader do not all stand in the same epoch and split the vote."""
        r = self._r
        jitter = r._timing.election_timeout_ms // 2 if r.is_voter else 0
        draw = r._rng.randrange(jitter) if jitter > 0 else 0
        return qm.randomized_fetch_timeout(PY, r._timing.fetch_timeout_ms, draw)

    def send_fetch(self) -> None:
        """SendFetchRequest: ask the leader (or, to discover it, a voter; or, an observer
        whose leader went silent, the leader and the voters in turn) for what follows; while
        a snapshot is being fetched from a leader that answers, ask for its next chunk. "In
        turn": round the list in ascending id order, each time the one after the last asked
        (Kafka starts from a random one; this core stays deterministic)."""
        r = self._r
        silent = r._leader_silent  # only ever set in Follower: every transition clears it
        # A transfer lives only in Follower: every transition abandons it.
        if r._fetcher is not None and r._fetcher.active and not silent:
            r._fetcher.send()
            return
        if silent and r._leader_id is not None:
            # Kafka's maybeSendAnyVoterFetch: the leader and the voters in turn, no long poll.
            ids = tuple(sorted({*r._voters.ids, r._leader_id} - {r._me.id}))
            dst = ids[r._discovery_next % len(ids)]
            r._discovery_next += 1
            wait = 0
        elif r._state is F and r._leader_id is not None:
            dst = r._leader_id
            wait = r._timing.fetch_max_wait_ms
        elif r._state in (U, V) and not r._is_voter and len(r._voters) > 0:
            # An observer with no leader asks the voters, one that granted a vote too
            # (Kafka's pollUnattachedAsObserver: Kafka's Unattached holds the vote).
            ids = r._voters.ids
            dst = ids[r._discovery_next % len(ids)]
            r._discovery_next += 1
            wait = 0
        else:
            r._fetch_send_at = None
            return
        r._fetch_send_at = None
        r._fetch_in_flight_until = r._now + r._timing.request_timeout_ms
        r._out.append(ActionTaken(Action.SEND_FETCH_REQUEST))
        log = r._log
        r._send(
            dst,
            FetchRequest(
                cluster_id=r._cfg.cluster_id,
                replica=r._me,
                replica_epoch=r._epoch,
                fetch_offset=log.end_offset,
                last_fetched_epoch=log.last_epoch,
                log_start_offset=log.start_offset,
                max_bytes=r._timing.fetch_max_bytes,
                max_wait_ms=wait,
            ),
        )

    def handle_fetch_response(
        self, src: NodeId, resp: FetchResponse, in_reply_to: Request | None
    ) -> None:
        r = self._r
        r._out.append(ActionTaken(Action.HANDLE_FETCH_RESPONSE))
        r._learn(resp.leader_id, resp.leader_epoch)
        asking = (r._state in (U, V) and not r._is_voter) or r._leader_silent
        if r._state is not F or src != r._leader_id or resp.leader_epoch != r._epoch:
            if asking and r._fetch_send_at is None:
                # A discovery answer that names no leader (or only the one we know): ask
                # another voter after a backoff.
                r._fetch_in_flight_until = None
                r._fetch_send_at = r._now + r._timing.retry_backoff_ms
            return
        if r._fetcher is not None and r._fetcher.active:
            if asking and resp.error is ErrorCode.NONE:
                # The silent leader answered: the snapshot transfer goes on from it.
                self.leader_answered()
                r._fetch_in_flight_until = None
                r._fetch_send_at = r._now
            return  # Fetch is paused while a snapshot is fetched: a late answer
        if isinstance(in_reply_to, FetchRequest) and (
            in_reply_to.fetch_offset != r._log.end_offset
            or in_reply_to.last_fetched_epoch != r._log.last_epoch
        ):
            return  # answers a fetch from a log position we no longer have
        if resp.error is not ErrorCode.NONE:
            r._fetch_in_flight_until = None
            r._fetch_send_at = r._now + r._timing.retry_backoff_ms
            return
        if resp.diverging_epoch is None and resp.snapshot_id is not None:
            if r._fetcher is not None:
                r._fetcher.start(src, resp.snapshot_id)
            else:
                self._snapshot_required(src, resp.snapshot_id)
            return
        if resp.diverging_epoch is not None:
            self._truncate_diverging(resp.diverging_epoch)
        elif len(resp.records) > 0 and not self._append_fetched(resp.records):
            return  # stale or corrupt: wait for the in-flight fetch or its timeout
        # A successful answer from the leader: it is alive.
        self.leader_answered()
        if resp.high_watermark >= 0:
            r._raise_hwm(Offset(min(resp.high_watermark, r._log.end_offset)))
        if resp.log_start_offset >= 0:
            r._snaps.maybe_advance_log_start(resp.log_start_offset)
        r._fetch_in_flight_until = None
        r._fetch_send_at = r._now

    def leader_answered(self) -> None:
        """The leader answered a Fetch (or FetchSnapshot) of this epoch: it is alive."""
        r = self._r
        r._fetch_deadline = r._now + self.random_fetch_timeout()
        r._has_fetched = True
        r._leader_silent = False

    def leader_silent(self) -> None:
        """An observer's fetch timeout expired (Kafka's pollFollowerAsObserver): it stays the
        Follower of its epoch's leader, with no vote to grant in that epoch, and sends its
        next Fetches to the leader and the voters in turn (SendFetchRequest), until the leader
        answers or an answer names a newer epoch. (Forgetting the leader in the same epoch,
        Follower -> Unattached, would let it grant a vote in an epoch where it may already have
        voted for and followed another candidate: Kafka never does that.) One Fetch at a time,
        as before: a Fetch in flight is answered or times out first, so the retry rules of one
        Fetch stream hold (Kafka may ask a bootstrap server while the leader's is in flight)."""
        r = self._r
        r._fetch_deadline = None
        r._leader_silent = True

    def fetch_failed(self, ev: SendFailed) -> None:
        r = self._r
        if r._fetch_in_flight_until is not None:
            r._fetch_in_flight_until = None
            r._fetch_send_at = r._now + r._timing.retry_backoff_ms
        if ev.broken:
            self.leader_connection_broke(ev)

    def leader_connection_broke(self, ev: SendFailed) -> None:
        """Deviation from Kafka (README; Kafka's network channel turns a disconnect into
        BROKER_NOT_AVAILABLE, which only backs the Fetch off until the fetch timeout): a
        voter whose connection to its leader broke (refused, reset, closed by the leader's
        end) under a Fetch or FetchSnapshot of this epoch lets its fetch timer run out within
        a short random delay (a quarter of an election timeout at most, so that the followers
        of a crashed leader, which all notice at once, rarely stand together and split the
        vote). It then becomes Prospective:
        pre-vote (KIP-996) keeps a false alarm harmless, since voters still fetching from a
        live leader, and the leader itself, refuse the pre-vote, and the Prospective goes back
        to following the same leader in the same epoch."""
        r = self._r
        req = ev.request
        if (
            r._state is not F
            or not r.is_voter
            or not r.pre_vote_enabled
            or r._shutting_down
            or ev.dst != r._leader_id
            or not isinstance(req, FetchRequest | FetchSnapshotRequest)
            or req.replica_epoch != r._epoch
        ):
            return
        window = r._timing.election_timeout_ms // 4
        deadline = r._now + (r._rng.randrange(window) if window > 0 else 0)
        if r._fetch_deadline is None or deadline < r._fetch_deadline:
            r._fetch_deadline = deadline

    def _snapshot_required(self, leader: NodeId, snapshot_id: OffsetAndEpoch) -> None:
        """The leader's log starts after a snapshot we would have to fetch, and this replica
        was built without snapshots (no SnapshotSource). The leader is alive (its answer resets
        our fetch timer, as Kafka's does), but nothing can be appended, truncated or committed
        from this answer. Say so once per snapshot id and fetch again only after a long
        backoff, instead of at once."""
        r = self._r
        self.leader_answered()
        if r._snapshot_reported != snapshot_id:
            r._snapshot_reported = snapshot_id
            r._out.append(SnapshotRequired(leader, snapshot_id))
        backoff = min(
            SNAPSHOT_REFETCH_RETRIES * r._timing.retry_backoff_ms,
            r._timing.fetch_timeout_ms // 2,
        )
        r._fetch_in_flight_until = None
        r._fetch_send_at = r._now + max(backoff, 0)

    def _truncate_diverging(self, diverging: OffsetAndEpoch) -> None:
        """Truncate to where our log and the leader's agree for that epoch, then refetch."""
        r = self._r
        log = r._log
        local = log.end_offset_for_epoch(diverging.epoch)
        target = self._batch_base(Offset(min(diverging.offset, local.offset, log.end_offset)))
        if target < log.start_offset or (r._hwm is not None and target < r._hwm):
            # Committed records never diverge, and those below the log start are in a
            # snapshot (a replica just restarted does not know its HWM yet): a stale or bad
            # answer. Kafka's log refuses it too (KafkaRaftLog.truncateTo: not below its HWM,
            # which its log keeps at or above the log start).
            return
        if target < log.end_offset:
            r._out.append(TruncateLog(target))
            log.truncate(target)
            refresh_voters(r)  # a voter set truncated away is undone (KIP-856)
            # Appends accepted at or after `target` are lost (kraft.core.commits).
            r._out.extend(r._commits.truncated(target))
            r._producers.truncate(target)

    def _batch_base(self, offset: Offset) -> Offset:
        """Snap a truncation point inside one of our batches down to that batch's base: a
        batch that runs past the leader's end of an epoch is not on the leader's log at all
        (batches of one epoch are the same everywhere), and logs truncate whole batches."""
        r = self._r
        if offset >= r._log.end_offset or offset <= r._log.start_offset:
            return offset
        try:
            data = r._reader.read(offset, 1)
            _, header = next(iter_batches(data, verify=False))
        except (CorruptRecordError, StopIteration):
            return offset
        if header.base_offset < offset < header.next_offset:
            return Offset(header.base_offset)
        return offset

    def _append_fetched(self, records: Records) -> bool:
        r = self._r
        log = r._log
        end = log.end_offset
        batches: list[tuple[Epoch, Offset]] = []
        idempotent: list[ProducerBatch] = []
        next_offset = end
        control = False
        whole = 0  # the bytes of the whole batches
        try:
            for pos, h in iter_batches(records):
                if h.base_offset != next_offset:
                    return False
                batches.append((Epoch(h.partition_leader_epoch), Offset(h.base_offset)))
                next_offset = Offset(h.next_offset)
                control = control or h.is_control
                if h.producer_id >= 0:
                    idempotent.append(producer_batch_of(h))
                whole = pos + h.size_in_bytes
        except TruncatedBatchError:
            # A Kafka leader cuts its answer at the Fetch's max bytes, inside a batch: the
            # whole batches before the cut are appended, as Kafka's follower does.
            if not batches:
                return False
            records = records[:whole]
        except (CorruptRecordError, ValueError):
            return False
        try:
            # KIP-853: Voters records set the voter set as they are appended.
            voter_sets = voter_sets_in(records) if control else []
        except (CorruptRecordError, ValueError):
            return False
        epochs = [log.last_epoch] + [e for e, _ in batches]
        if not batches or epochs[-1] > r._epoch:
            return False
        if any(a > b for a, b in itertools.pairwise(epochs)):
            return False  # epochs never decrease along a log
        r._out.append(AppendToLog(end, Offset(next_offset - 1), batches[-1][0], records))
        log.append(batches, next_offset, voter_sets)
        if voter_sets:
            refresh_voters(r)
        for b in idempotent:
            r._producers.record(b)
        r._out.append(FlushLog())
        return True

    # ------------------------------------------------------------------ Begin/EndQuorumEpoch

    def handle_begin_request(
        self, src: NodeId, req: BeginQuorumEpochRequest, _in_reply_to: Request | None
    ) -> None:
        r = self._r
        r._out.append(ActionTaken(Action.HANDLE_BEGIN_QUORUM_EPOCH_REQUEST))
        err = r._request_error(req.cluster_id)
        if err is None and req.leader_epoch < r._epoch:
            err = ErrorCode.FENCED_LEADER_EPOCH
        if err is None and req.leader_id == r._me.id:
            err = ErrorCode.INVALID_REQUEST
        if err is None:
            r._learn(req.leader_id, req.leader_epoch)
            if r._leader_id != req.leader_id:
                # Another leader is known for this epoch: the request conflicts (KIP-595).
                err = ErrorCode.INVALID_REQUEST
            elif not r._addressed_to_me(req.voter):
                err = ErrorCode.INVALID_VOTER_KEY
        r._send(
            src,
            BeginQuorumEpochResponse(err or ErrorCode.NONE, r._leader_or_none(), r._epoch),
        )

    def begin_refusal(self) -> BeginQuorumEpochResponse:
        r = self._r
        return BeginQuorumEpochResponse(ErrorCode.INVALID_REQUEST, r._leader_or_none(), r._epoch)

    def end_refusal(self) -> EndQuorumEpochResponse:
        r = self._r
        return EndQuorumEpochResponse(ErrorCode.INVALID_REQUEST, r._leader_or_none(), r._epoch)

    def handle_end_request(
        self, src: NodeId, req: EndQuorumEpochRequest, _in_reply_to: Request | None
    ) -> None:
        r = self._r
        r._out.append(ActionTaken(Action.HANDLE_END_QUORUM_EPOCH_REQUEST))
        err = r._request_error(req.cluster_id)
        if err is None and req.leader_epoch < r._epoch:
            err = ErrorCode.FENCED_LEADER_EPOCH
        if err is None:
            r._learn(req.leader_id, req.leader_epoch)
            if r._me.id not in req.preferred_successors:
                err = ErrorCode.INCONSISTENT_VOTER_SET
        # Only a follower of the resigning leader reacts; with no leader named there is
        # nothing to end (KIP-595: the request is rejected, harmlessly answered here).
        if (
            err is None
            and r._state is F
            and req.leader_epoch == r._epoch
            and r._leader_id == req.leader_id
        ):
            # The fetch timer runs out at once for the first successor (Kafka: its next poll
            # makes it Prospective), after a backoff for the others.
            n = req.preferred_successors.index(r._me.id)
            delay = 0
            if n > 0:
                # KIP-595: MIN(backoff max, retry backoff * 2^(N-1)) for priority N > 0.
                delay = qm.successor_backoff_ms(
                    PY, n, r._timing.retry_backoff_ms, r._timing.election_backoff_max_ms
                )
            deadline = r._now + delay
            if r._fetch_deadline is None or deadline < r._fetch_deadline:
                r._fetch_deadline = deadline
        r._send(
            src,
            EndQuorumEpochResponse(err or ErrorCode.NONE, r._leader_or_none(), r._epoch),
        )
