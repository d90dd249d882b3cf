"""Fetching a snapshot from the leader (KIP-630), on a follower or observer.

`SnapshotFetcher` takes these steps over the replica's state (kraft.core.replica owns the
state, the fetch timers among it; kraft.core.dispatch routes messages here, and
kraft.core.follower hands over when a Fetch answer names a snapshot):

1. A Fetch answer names a snapshot id: Fetch pauses and the transfer starts at position 0.
2. SendFetchSnapshotRequest: ask for the bytes from the current position, on the follower's
   fetch timers (a lost request or answer is asked for again after the request timeout).
3. HandleFetchSnapshotResponse: a chunk at exactly the current position is written
   (WriteSnapshotChunk) and the position moves past it; a chunk for another position or
   snapshot (a duplicate, a stale answer) is ignored; SNAPSHOT_NOT_FOUND or
   POSITION_OUT_OF_RANGE (the leader no longer has it) or an inconsistent answer abandons the
   transfer and Fetch resumes, which names the leader's snapshot again.
4. All `size` bytes written: the driver validates the file (ValidateSnapshot, off its event
   loop on the node) and answers with the event SnapshotValidated. Nothing changes before
   that answer: a failed validation abandons the transfer (DiscardSnapshotFetch) and the
   replica is the one it was. The fetch timeout is suspended meanwhile (the follower asks the
   leader nothing) and runs again from the answer.
5. InstallSnapshot (the spec's Install): the log is truncated fully and starts and ends at the
   snapshot's end offset (LogMetadata.install_snapshot), the high watermark is that offset
   (as Kafka's after truncateToLatestSnapshot), and Fetch resumes from there with
   LastFetchedEpoch = the snapshot's epoch. A snapshot ending below the HWM is refused at
   step 1, and the HWM cannot move while Fetch is paused, so it never falls at the install.

Any state change of the replica (a new leader or epoch, an election) abandons the transfer:
a snapshot is fetched from one leader in one epoch, start to end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kraft.core.effects import (
    ActionTaken,
    DiscardSnapshotFetch,
    InstallSnapshot,
    ValidateSnapshot,
    WriteSnapshotChunk,
)
from kraft.core.events import SendFailed, SnapshotValidated
from kraft.core.messages import FetchSnapshotRequest, FetchSnapshotResponse, Request
from kraft.core.vocabulary import Action
from kraft.core.voter_records import voter_set_of
from kraft.core.voter_set import VoterSet
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, OffsetAndEpoch

if TYPE_CHECKING:
    from kraft.core.replica import Replica


@dataclass(slots=True)
class Transfer:
    """One snapshot being fetched from `leader` in `epoch`."""

    snapshot_id: OffsetAndEpoch
    leader: NodeId
    epoch: Epoch
    position: int = 0
    # The whole snapshot's size, as the leader's first answer gave it.
    size: int | None = None
    # Every byte written: waiting for the driver's SnapshotValidated.
    validating: bool = False


class SnapshotFetcher:
    """The follower's side of KIP-630, over the replica's state."""

    __slots__ = ("_r", "transfer")

    def __init__(self, replica: Replica) -> None:
        self._r = replica
        self.transfer: Transfer | None = None

    @property
    def active(self) -> bool:
        return self.transfer is not None

    # ------------------------------------------------------------------ start, abandon

    def start(self, leader: NodeId, snapshot_id: OffsetAndEpoch) -> None:
        """The leader's Fetch answer names `snapshot_id`: pause Fetch, fetch the snapshot."""
        r = self._r
        self._leader_alive()
        r._fetch_in_flight_until = None
        if (
            snapshot_id.epoch < 0
            or snapshot_id.offset <= 0
            or snapshot_id.epoch > r._epoch
            or snapshot_id.offset < r._log.start_offset
            or (r._hwm is not None and snapshot_id.offset < r._hwm)
        ):
            # Not a snapshot a leader of our epoch can hold, or one older than our own log
            # start (installing it would take the log start back), or one ending below our
            # HWM: installing it would drop records we committed and leave the HWM above the
            # log end, which Kafka never does (its FollowerState refuses a HWM that moves down,
            # and its log's HWM after the full truncation is the snapshot's end offset). A leader
            # names such a snapshot only for a stale or damaged answer; back off. (Kafka 4.3.1
            # refuses only a snapshot id it already holds: both are README deviations.)
            r._fetch_send_at = r._now + r._timing.retry_backoff_ms
            return
        self.transfer = Transfer(snapshot_id, leader, r._epoch)
        r._fetch_send_at = r._now

    def abandon(self) -> None:
        t = self.transfer
        if t is not None:
            self.transfer = None
            self._r._out.append(DiscardSnapshotFetch(t.snapshot_id))

    def _restart_fetch(self, *, backoff: bool = False) -> None:
        """Back to Fetch: at once, or after the retry backoff."""
        r = self._r
        self.abandon()
        r._fetch_in_flight_until = None
        r._fetch_send_at = r._now + (r._timing.retry_backoff_ms if backoff else 0)

    def _leader_alive(self) -> None:
        self._r._follow.leader_answered()

    # ------------------------------------------------------------------ sending

    def send(self) -> None:
        """SendFetchSnapshotRequest for the bytes from the current position."""
        r = self._r
        t = self.transfer
        assert t is not None
        r._fetch_send_at = None
        if t.validating:
            return  # nothing to ask until the driver validated what it holds
        r._fetch_in_flight_until = r._now + r._timing.request_timeout_ms
        r._out.append(ActionTaken(Action.SEND_FETCH_SNAPSHOT_REQUEST))
        r._send(
            t.leader,
            FetchSnapshotRequest(
                cluster_id=r._cfg.cluster_id,
                replica=r._me,
                replica_epoch=r._epoch,
                snapshot_id=t.snapshot_id,
                position=t.position,
                max_bytes=r._timing.fetch_max_bytes,
            ),
        )

    def fetch_snapshot_failed(self, ev: SendFailed) -> None:
        r = self._r
        if self.transfer is not None and r._fetch_in_flight_until is not None:
            r._fetch_in_flight_until = None
            r._fetch_send_at = r._now + r._timing.retry_backoff_ms
        if ev.broken:
            r._follow.leader_connection_broke(ev)  # the leader may have crashed

    # ------------------------------------------------------------------ receiving

    def handle_response(
        self, src: NodeId, resp: FetchSnapshotResponse, _in_reply_to: Request | None
    ) -> None:
        """HandleFetchSnapshotResponse (Kafka's order: the leader and epoch it names first)."""
        r = self._r
        r._out.append(ActionTaken(Action.HANDLE_FETCH_SNAPSHOT_RESPONSE))
        if resp.error is not ErrorCode.UNKNOWN_LEADER_EPOCH:
            r._learn(resp.leader_id, resp.leader_epoch)  # a change abandons the transfer
        t = self.transfer
        # A transfer lives only while the replica follows its leader in its epoch: every
        # transition abandons it (Replica._transition), so its epoch is the replica's.
        if t is None or t.validating or src != t.leader or resp.leader_epoch != t.epoch:
            return  # for a transfer that is over, or from elsewhere
        if resp.error in (ErrorCode.SNAPSHOT_NOT_FOUND, ErrorCode.POSITION_OUT_OF_RANGE):
            # The leader no longer has it (it moved on to a newer one): start over from Fetch.
            self._leader_alive()
            self._restart_fetch()
            return
        if resp.error is not ErrorCode.NONE:
            r._fetch_in_flight_until = None
            r._fetch_send_at = r._now + r._timing.retry_backoff_ms
            return
        if resp.snapshot_id != t.snapshot_id or resp.position != t.position:
            return  # a duplicate or stale chunk: the one asked for is still on its way
        chunk = resp.chunk
        end = resp.position + len(chunk)
        # (A size of 0 fails `end > resp.size` with any bytes; a negative one never gets here:
        # kraft.core.bounds drops it.)
        if not chunk or end > resp.size or (t.size is not None and resp.size != t.size):
            # An answer that cannot belong to this snapshot: start over.
            self._restart_fetch(backoff=True)
            return
        self._leader_alive()
        t.size = resp.size
        r._out.append(WriteSnapshotChunk(t.snapshot_id, t.position, resp.size, chunk))
        t.position = end
        r._fetch_in_flight_until = None
        if end < resp.size:
            r._fetch_send_at = r._now
            return
        t.validating = True
        r._fetch_send_at = None
        # The leader is not asked anything until the driver answers: its silence meanwhile
        # is ours, so the fetch timeout is suspended (a long validation must not start an
        # election, which would abandon the transfer, again and again).
        r._fetch_deadline = None
        r._out.append(ValidateSnapshot(t.snapshot_id, resp.size))

    def on_validated(self, ev: SnapshotValidated) -> None:
        """The driver's answer to ValidateSnapshot: install, or start over."""
        r = self._r
        t = self.transfer
        if t is None or not t.validating or ev.snapshot_id != t.snapshot_id:
            return  # a transfer already abandoned: its file is discarded
        self._leader_alive()  # the fetch timeout runs again from now
        if not ev.valid:
            self._restart_fetch(backoff=True)
            return
        self.transfer = None
        self._install(t.snapshot_id, ev)
        r._fetch_in_flight_until = None
        r._fetch_send_at = r._now

    def _install(self, snap: OffsetAndEpoch, ev: SnapshotValidated) -> None:
        """Install: the log starts and ends at the snapshot's end offset; every append this
        replica accepted at or past it is lost, those below are decided by the high watermark
        that rises to it (kraft.core.commits)."""
        r = self._r
        r._out.append(ActionTaken(Action.INSTALL_SNAPSHOT))
        r._out.append(InstallSnapshot(snap))
        if ev.voters_record is not None:
            voters = voter_set_of(ev.voters_record)  # with the endpoints (KIP-853)
        else:
            voters = VoterSet(ev.voters if ev.voters is not None else r._cfg.voters)
        r._log.install_snapshot(snap, voters)
        r._voters = r._log.voters
        r._is_voter = r._voters.contains(r._me)
        r._out.extend(r._commits.truncated(snap.offset))
        r._producers.clear()  # the snapshot holds no producer's batches
        r._raise_hwm(snap.offset)
