"""KIP-630's FetchSnapshot transfer on the fetching replica, in corners the simulator's sweep
rarely draws, on a small cluster (the sweep's checkers are refinement.invariants_snapshot_transfer):

- a Fetch answer naming a snapshot the replica may not install (the bootstrap checkpoint, one
  of an epoch past its own, one with a negative epoch) starts no transfer: no FetchSnapshot;
- a chunk answered by the leader in an older epoch (a late answer to a request of that epoch)
  is put aside, as Kafka puts aside any answer of an epoch below its own: nothing is written;
- an error answer from the leader to a chunk request is retried quorum.retry.backoff.ms later
  (Kafka backs the request off), and the transfer goes on;
- a new leader in the middle of a transfer ends it: the `.part` is discarded at once;
- a validation that takes longer than the fetch timeout does not start an election: the
  follower's fetch timer is suspended until its driver answers, then the snapshot is
  installed, all under the same leader and epoch.
"""

from __future__ import annotations

import heapq

from scenario_harness import Cluster, Recording, committed

from kraft.core.effects import (
    DiscardSnapshotFetch,
    Effect,
    InstallSnapshot,
    Send,
    ValidateSnapshot,
    WriteSnapshotChunk,
)
from kraft.core.events import CreateSnapshot, Event, Receive, SnapshotValidated
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from kraft.core.snapshots import UNKNOWN_SNAPSHOT
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch
from kraft.storage.memory_snapshots import MemorySnapshots

S = ReplicaState
RETRY_BACKOFF_MS = 20  # quorum.retry.backoff.ms (Kafka's default)
FETCH_TIMEOUT_MS = 2000  # quorum.fetch.timeout.ms


def _leader_of_voters(c: Cluster, voters: tuple[int, ...]) -> int:
    c.run_until(
        lambda: c.leader() is not None and all(c.view(i).leader_id == c.leader() for i in voters)
    )
    lead = c.leader()
    assert lead is not None
    return lead


def _snaps(c: Cluster, i: int) -> MemorySnapshots:
    snaps = c.nodes[i].snaps
    assert snaps is not None
    return snaps


def _snapshot_while_cut_off(c: Cluster, lead: int, behind: int) -> int:
    """Cut `behind` off, commit, wait past a fetch timeout and snapshot the leader at its HWM
    (its log start moves there); `behind` stays cut off. Returns that HWM."""
    c.isolate(behind)
    committed(c, lead, 12)
    c.run(c.now + 3000)
    hwm = c.view(lead).high_watermark
    assert hwm is not None
    c.step(lead, CreateSnapshot(c.now, hwm))
    c.run_until(lambda: c.view(lead).log_start_offset == hwm)
    return hwm


def _mid_transfer(c: Cluster, behind: int) -> tuple[int, OffsetAndEpoch]:
    """Elect, cut `behind` off, commit, wait past a fetch timeout, snapshot the leader at its
    HWM (its log start moves there), heal, and run until `behind` holds part of the snapshot
    (not all of it): a transfer in the middle."""
    voters = tuple(i for i in c.nodes if i != behind)
    lead = _leader_of_voters(c, voters)
    hwm = _snapshot_while_cut_off(c, lead, behind)
    [sid] = [s for s in _snaps(c, lead).complete if s.offset == hwm]
    size = len(_snaps(c, lead).complete[sid])
    c.heal()
    parts = _snaps(c, behind).parts
    c.run_until(lambda: sid in parts and 0 < len(parts[sid]) < size, step_ms=1)
    return lead, sid


def test_a_fetch_answer_naming_a_snapshot_it_may_not_install_starts_no_transfer() -> None:
    c = Recording(3, observers=1, seed=31, snapshots=True)
    c.isolate(4)
    lead = _leader_of_voters(c, (1, 2, 3))
    epoch = c.view(lead).epoch
    for bad in (
        OffsetAndEpoch(Epoch(0), Offset(0)),  # the bootstrap checkpoint: never replicated
        OffsetAndEpoch(Epoch(epoch + 1), Offset(3)),  # no leader of our epoch holds it
    ):
        answer = FetchResponse(
            ErrorCode.NONE, NodeId(lead), epoch, Offset(-1), Offset(3), snapshot_id=bad
        )
        effects = c.step(4, Receive(c.now, NodeId(lead), answer))
        assert c.view(4).state is S.FOLLOWER and c.view(4).leader_id == lead
        asked = [
            e
            for e in effects
            if isinstance(e, Send) and isinstance(e.message, FetchSnapshotRequest)
        ]
        assert asked == [], bad
        assert not _snaps(c, 4).parts
        c.run(c.now + 100)


def test_a_chunk_answered_in_an_older_epoch_is_put_aside() -> None:
    c = Recording(3, observers=1, seed=37, snapshots=True, fetch_max_bytes=24)
    lead, sid = _mid_transfer(c, behind=4)
    epoch = c.view(lead).epoch
    held = len(_snaps(c, 4).parts[sid])
    data = _snaps(c, lead).complete[sid]
    late = FetchSnapshotResponse(
        ErrorCode.NONE,
        NodeId(lead),
        Epoch(epoch - 1),
        sid,
        size=len(data),
        position=held,
        chunk=data[held : held + 24],
    )
    effects = c.step(4, Receive(c.now, NodeId(lead), late))
    assert not [e for e in effects if isinstance(e, WriteSnapshotChunk)]
    assert len(_snaps(c, 4).parts[sid]) == held
    assert c.view(4).epoch == epoch
    # The transfer still completes from the leader's own answers.
    c.run_until(lambda: c.nodes[4].log.start_offset == sid.offset, limit=10_000)


def test_an_error_answer_to_a_chunk_request_is_retried_after_the_backoff() -> None:
    c = Recording(3, observers=1, seed=41, snapshots=True, fetch_max_bytes=24)
    lead, sid = _mid_transfer(c, behind=4)
    epoch = c.view(lead).epoch

    # The request in flight and the leader's answer to it are lost; an error answer comes
    # instead (INVALID_REQUEST: what a leader answers a request it refuses).
    def in_flight(q: tuple[int, int, int, Event]) -> bool:
        ev = q[3]
        if not isinstance(ev, Receive):
            return False
        m = ev.message
        return (q[2] == 4 and isinstance(m, FetchSnapshotResponse)) or (
            q[2] == lead and ev.src == 4 and isinstance(m, FetchSnapshotRequest)
        )

    c.queue = [q for q in c.queue if not in_flight(q)]
    heapq.heapify(c.queue)
    failed = FetchSnapshotResponse(
        ErrorCode.INVALID_REQUEST, NodeId(lead), epoch, UNKNOWN_SNAPSHOT, size=0, position=0
    )
    at = c.now
    held = len(_snaps(c, 4).parts[sid])
    before = len(c.sent)
    c.step(4, Receive(at, NodeId(lead), failed))

    def asked_after() -> list[tuple[int, FetchSnapshotRequest]]:
        return [
            (t, m)
            for t, src, dst, m in c.sent[before:]
            if src == 4 and dst == lead and isinstance(m, FetchSnapshotRequest)
        ]

    c.run(at + RETRY_BACKOFF_MS - 1)
    assert asked_after() == []  # backed off
    c.run(at + RETRY_BACKOFF_MS + 5)
    again = asked_after()
    assert again and again[0][0] == at + RETRY_BACKOFF_MS
    assert again[0][1].snapshot_id == sid and again[0][1].position == held
    c.run_until(lambda: c.nodes[4].log.start_offset == sid.offset, limit=1000)


def test_a_new_leader_mid_transfer_discards_the_part() -> None:
    c = Recording(3, observers=1, seed=47, snapshots=True, fetch_max_bytes=24)
    lead, sid = _mid_transfer(c, behind=4)
    epoch = c.view(lead).epoch
    other = next(i for i in (1, 2, 3) if i != lead)
    begin = BeginQuorumEpochRequest(
        c.nodes[4].config.cluster_id, NodeId(other), Epoch(epoch + 1), None
    )
    effects = c.step(4, Receive(c.now, NodeId(other), begin))
    assert c.view(4).epoch == epoch + 1 and c.view(4).leader_id == other
    assert DiscardSnapshotFetch(sid) in effects
    assert not _snaps(c, 4).parts


class SlowValidation(Recording):
    """Node `slow`'s driver answers ValidateSnapshot `hold_ms` after it is asked."""

    slow = 0
    hold_ms = 0

    def apply_snapshot_effect(self, i: int, snaps: MemorySnapshots, e: Effect) -> None:
        if i != self.slow or not isinstance(e, ValidateSnapshot):
            super().apply_snapshot_effect(i, snaps, e)
            return
        problem = snaps.validate(e.snapshot_id, e.size)
        at = self.now + self.hold_ms
        self.push(
            at, i, SnapshotValidated(at, e.snapshot_id, problem is None, reason=problem or "")
        )


def test_a_validation_longer_than_the_fetch_timeout_starts_no_election() -> None:
    c = SlowValidation(3, seed=43, snapshots=True, fetch_max_bytes=64)
    lead = _leader_of_voters(c, (1, 2, 3))
    behind = next(i for i in (1, 2, 3) if i != lead)
    c.slow = behind
    c.hold_ms = 2 * FETCH_TIMEOUT_MS
    hwm = _snapshot_while_cut_off(c, lead, behind)
    c.heal()

    def validating() -> list[int]:
        return [t for t, e in c.effects.get(behind, []) if isinstance(e, ValidateSnapshot)]

    c.run_until(lambda: bool(validating()), limit=10_000, step_ms=1)
    asked_at = validating()[0]
    epoch = c.view(behind).epoch
    states_before = len(c.nodes[behind].states)
    c.run_until(lambda: c.nodes[behind].log.start_offset == hwm, limit=3 * FETCH_TIMEOUT_MS)
    # Installed on the driver's answer, after the whole wait, in the same epoch and under the
    # same leader, with no election meanwhile and no second transfer.
    installs = [t for t, e in c.effects[behind] if isinstance(e, InstallSnapshot)]
    assert installs == [asked_at + c.hold_ms]
    assert len(validating()) == 1
    assert c.nodes[behind].states[states_before:] == []
    assert c.view(behind).state is S.FOLLOWER and c.view(behind).leader_id == lead
    assert c.view(behind).epoch == epoch
