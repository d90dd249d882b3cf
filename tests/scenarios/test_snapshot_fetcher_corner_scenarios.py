"""Corners of a follower's snapshot transfer (kraft.core.snapshot_transfer) that the simulator's
sweep rarely or never delivers, on one replica driven by hand under the timing checkers:

- answers that do not belong to the transfer change nothing: one from a replica other than the
  leader, one for another snapshot, an error answer while the driver validates the last chunk,
  and the driver's verdict on another snapshot than the one it validates;
- a failure or error answer that ends the FetchSnapshot in flight just before that request
  would time out backs the transfer off from its arrival, not from the request's timeout; a
  late failure of a request no longer in flight changes nothing, during the transfer or after.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import pytest
from memory_logs import key
from test_retry_timing_scenarios import CLUSTER, EPOCH, LEADER, Solo

from kraft.core.effects import (
    DiscardSnapshotFetch,
    Effect,
    InstallSnapshot,
    ValidateSnapshot,
    WriteSnapshotChunk,
)
from kraft.core.events import SendFailed, SnapshotValidated, Tick
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from kraft.core.snapshots import UNKNOWN_SNAPSHOT
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch

E = TypeVar("E", bound=Effect)
SNAP = OffsetAndEpoch(EPOCH, Offset(10))
CHUNK = b"0123456789"


def _transfer(at: int = 5) -> tuple[Solo, FetchSnapshotRequest]:
    """A follower told by its leader's Fetch answer to fetch SNAP; its first FetchSnapshot."""
    s = Solo(snapshots=True)
    fetch = s.follow()
    effects = s.answer(at, fetch, snapshot_id=SNAP)
    [ask] = s.sent(FetchSnapshotRequest, effects)
    assert isinstance(ask.message, FetchSnapshotRequest) and ask.dst == LEADER
    assert (ask.message.snapshot_id, ask.message.position) == (SNAP, 0)
    return s, ask.message


def _chunk(
    sid: OffsetAndEpoch = SNAP, *, size: int = 20, position: int = 0, data: bytes = CHUNK
) -> FetchSnapshotResponse:
    return FetchSnapshotResponse(ErrorCode.NONE, LEADER, EPOCH, sid, size, position, data)


def _error(error: ErrorCode) -> FetchSnapshotResponse:
    """An error answer as a leader sends one (no snapshot id, size and position 0)."""
    return FetchSnapshotResponse(error, LEADER, EPOCH, UNKNOWN_SNAPSHOT, size=0, position=0)


def _of(effects: Sequence[Effect], kind: type[E]) -> list[E]:
    return [e for e in effects if isinstance(e, kind)]


def test_a_chunk_from_a_replica_other_than_the_leader_is_not_written() -> None:
    s, ask = _transfer()
    effects = s.receive(6, NodeId(3), _chunk(), ask)
    assert not _of(effects, WriteSnapshotChunk) and not _of(effects, DiscardSnapshotFetch)
    effects = s.receive(7, LEADER, _chunk(), ask)
    assert [(w.position, bytes(w.data)) for w in _of(effects, WriteSnapshotChunk)] == [(0, CHUNK)]


def test_a_chunk_of_another_snapshot_at_the_position_asked_is_not_written() -> None:
    s, ask = _transfer()
    other = OffsetAndEpoch(EPOCH, Offset(8))
    effects = s.receive(6, LEADER, _chunk(other), ask)
    assert not _of(effects, WriteSnapshotChunk) and not _of(effects, DiscardSnapshotFetch)
    [nxt] = s.sent(FetchSnapshotRequest, s.receive(7, LEADER, _chunk(), ask))
    assert isinstance(nxt.message, FetchSnapshotRequest) and nxt.message.position == len(CHUNK)


def _validating(s: Solo, ask: FetchSnapshotRequest) -> None:
    """The whole snapshot in one chunk: written, and handed to the driver to validate."""
    effects = s.receive(6, LEADER, _chunk(size=len(CHUNK)), ask)
    assert _of(effects, WriteSnapshotChunk)
    assert [v.snapshot_id for v in _of(effects, ValidateSnapshot)] == [SNAP]


@pytest.mark.parametrize("error", [ErrorCode.SNAPSHOT_NOT_FOUND, ErrorCode.POSITION_OUT_OF_RANGE])
def test_an_answer_while_the_driver_validates_changes_nothing(error: ErrorCode) -> None:
    """The leader's late answer that it no longer has the snapshot arrives while the driver
    validates the bytes already written: the transfer is not abandoned, and the driver's
    verdict installs the snapshot."""
    s, ask = _transfer()
    _validating(s, ask)
    gone = _error(error)
    effects = s.receive(7, LEADER, gone, ask)
    assert not _of(effects, DiscardSnapshotFetch)
    effects = s.step(SnapshotValidated(8, SNAP, True))
    assert [i.snapshot_id for i in _of(effects, InstallSnapshot)] == [SNAP]


def test_a_verdict_on_another_snapshot_does_not_install_the_one_validated() -> None:
    s, ask = _transfer()
    _validating(s, ask)
    other = OffsetAndEpoch(EPOCH, Offset(8))
    effects = s.step(SnapshotValidated(7, other, True))
    assert not _of(effects, InstallSnapshot) and not _of(effects, DiscardSnapshotFetch)
    effects = s.step(SnapshotValidated(8, SNAP, True))
    assert [i.snapshot_id for i in _of(effects, InstallSnapshot)] == [SNAP]


def _ended_late(s: Solo, ask: FetchSnapshotRequest, how: str, at: int) -> None:
    if how == "failed":
        s.step(SendFailed(at, LEADER, ask))
    elif how == "error":
        s.receive(at, LEADER, _error(ErrorCode.UNKNOWN_SERVER_ERROR), ask)
    else:  # a chunk that cannot belong to the snapshot: the transfer starts over
        effects = s.receive(at, LEADER, _chunk(data=b""), ask)
        assert _of(effects, DiscardSnapshotFetch)


@pytest.mark.parametrize("how", ["failed", "error", "mangled"])
@pytest.mark.parametrize("late_by", [1, 5, 19])
def test_a_fetch_snapshot_ended_just_before_its_timeout_backs_off_from_then(
    how: str, late_by: int
) -> None:
    """The FetchSnapshot in flight fails, gets an error answer, or a chunk that cannot belong,
    `late_by` ms before its request timeout: the next request (FetchSnapshot, or Fetch once
    the transfer started over) goes a retry backoff after that, not at the request timeout."""
    s, ask = _transfer(at=5)
    arrival = 5 + s.timing.request_timeout_ms - late_by
    s.step(Tick(arrival - 1))
    _ended_late(s, ask, how, arrival)
    kind = FetchRequest if how == "mangled" else FetchSnapshotRequest
    s.tick_until_sent(kind, limit=arrival + 100)
    assert s.now == arrival + s.timing.retry_backoff_ms


def test_a_late_failure_of_an_answered_fetch_snapshot_does_not_delay_the_retry() -> None:
    """An error answer backs the transfer off; the failure of that same request, reported
    after its answer, ends nothing more: the retry goes at the backoff from the answer."""
    s, ask = _transfer(at=5)
    _ended_late(s, ask, "error", 10)
    s.step(SendFailed(15, LEADER, ask))
    s.tick_until_sent(FetchSnapshotRequest, limit=200)
    assert s.now == 10 + s.timing.retry_backoff_ms


def test_a_late_failure_of_a_fetch_snapshot_after_the_install_leaves_the_fetch_in_flight() -> None:
    s, ask = _transfer()
    _validating(s, ask)
    effects = s.step(SnapshotValidated(8, SNAP, True))
    [fetch] = s.sent(FetchRequest, effects)
    assert isinstance(fetch.message, FetchRequest) and fetch.message.fetch_offset == SNAP.offset
    s.step(SendFailed(9, LEADER, ask))
    again = s.tick_until_sent(FetchRequest, limit=10 * s.timing.request_timeout_ms)
    assert again.dst == LEADER
    assert s.now == 8 + s.timing.request_timeout_ms
    assert Epoch(EPOCH) == s.replica.view().epoch


@pytest.mark.parametrize(
    ("epoch", "offset", "fetched"), [(0, 10, True), (-1, 10, False), (1, 1, True), (1, 0, False)]
)
def test_which_named_snapshots_are_fetched(epoch: int, offset: int, fetched: bool) -> None:
    """Kafka's handleFetchResponse refuses a snapshot id whose epoch is negative and fetches
    any other (no leader writes in epoch 0, but nothing in Kafka's follower assumes it); one
    ending at offset 1 holds one record, one ending at 0 is the bootstrap checkpoint, never
    replicated."""
    s = Solo(snapshots=True)
    fetch = s.follow()
    effects = s.answer(5, fetch, snapshot_id=OffsetAndEpoch(Epoch(epoch), Offset(offset)))
    asked = s.sent(FetchSnapshotRequest, effects)
    assert bool(asked) == fetched


def _observer_fetching() -> tuple[Solo, FetchSnapshotRequest]:
    """Observer 4 finds the leader (2) through a voter and is told to fetch SNAP."""
    s = Solo(me=4, snapshots=True)
    [probe] = s.sent(FetchRequest)
    assert isinstance(probe.message, FetchRequest)
    named = FetchResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, LEADER, EPOCH, Offset(-1), Offset(-1))
    [fetch] = s.sent(FetchRequest, s.receive(5, probe.dst, named, probe.message))
    assert fetch.dst == LEADER and isinstance(fetch.message, FetchRequest)
    effects = s.answer(6, fetch.message, snapshot_id=SNAP)
    [ask] = s.sent(FetchSnapshotRequest, effects)
    assert isinstance(ask.message, FetchSnapshotRequest)
    return s, ask.message


@pytest.mark.parametrize(("voters", "is_voter"), [((1, 2, 4), True), ((1, 2, 3), False)])
def test_an_installed_snapshot_decides_whether_the_replica_is_a_voter(
    voters: tuple[int, ...], is_voter: bool
) -> None:
    """The snapshot's voter set (its Voters record, KIP-853) replaces the replica's: an
    observer that the snapshot names a voter is one from the install on."""
    s, ask = _observer_fetching()
    assert not s.replica.view().is_voter
    _validating(s, ask)
    keys = tuple(key(v) for v in voters)
    effects = s.step(SnapshotValidated(8, SNAP, True, voters=keys))
    assert _of(effects, InstallSnapshot)
    view = s.replica.view()
    assert view.voters == voters
    assert view.is_voter is is_voter


def test_a_verdict_after_the_transfer_was_abandoned_is_ignored() -> None:
    """The leader of a newer epoch begins while the driver validates: the transfer is
    abandoned with the state, and the driver's late verdict on it installs nothing."""
    s, ask = _transfer()
    _validating(s, ask)
    begin = BeginQuorumEpochRequest(CLUSTER, LEADER, Epoch(EPOCH + 1))
    effects = s.receive(7, LEADER, begin, None)
    assert [d.snapshot_id for d in _of(effects, DiscardSnapshotFetch)] == [SNAP]
    effects = s.step(SnapshotValidated(8, SNAP, True))
    assert not _of(effects, InstallSnapshot)
    assert s.replica.view().log_start_offset == 0


@pytest.mark.parametrize(("offset", "fetched"), [(9, False), (10, True), (12, True)])
def test_a_restarted_follower_fetches_no_snapshot_ending_below_its_log_start(
    offset: int, fetched: bool
) -> None:
    """A follower restarted from its snapshot at 10 (its log starts and ends there, its HWM
    not yet known) is told to fetch a snapshot: one ending below 10 would take its log start
    back and is not fetched (this project's rule; Kafka 4.3.1 refuses only a snapshot id it
    holds: see the README's deviations), one ending at 10 or later is."""
    s = Solo(snapshots=True, start=OffsetAndEpoch(EPOCH, Offset(10)))
    assert s.replica.view().high_watermark is None
    fetch = s.follow()
    assert (fetch.fetch_offset, fetch.log_start_offset) == (10, 10)
    effects = s.answer(5, fetch, snapshot_id=OffsetAndEpoch(EPOCH, Offset(offset)))
    assert bool(s.sent(FetchSnapshotRequest, effects)) == fetched
