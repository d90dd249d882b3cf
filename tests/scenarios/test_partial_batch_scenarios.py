"""A Fetch answer that ends inside a batch, as a Kafka leader sends one: Kafka's leader reads
the Fetch's max bytes from its log (UnifiedLog.read with minOneMessage), so whenever more than
that waits the answer ends with part of a batch. Kafka's follower appends the whole batches
before the cut and ignores the rest (its log drops the invalid tail); kraft's does the same,
and fetches next from after the last whole batch. An answer with no whole batch at all
(nothing but a piece of one) is ignored as corrupt, high watermark included. And an answer
naming a snapshot that ends at the follower's high watermark is fetched, one ending below it
is not, and a transfer believes any positive size the leader states.
"""

from __future__ import annotations

import pytest
from test_retry_timing_scenarios import EPOCH, LEADER, Solo

from kraft.core.effects import AppendToLog, ValidateSnapshot, WriteSnapshotChunk
from kraft.core.events import Tick
from kraft.core.messages import (
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from kraft.errors import ErrorCode
from kraft.ids import Offset, OffsetAndEpoch
from kraft.records import encode_batch


def _batch(base: int) -> bytes:
    """A batch of one 200-byte record (270 bytes with its header and framing)."""
    return encode_batch(base, EPOCH, [b"%03d" % base * 66 + b"xx"], timestamp_ms=0)


def _answer(hwm: int, records: bytes) -> FetchResponse:
    return FetchResponse(ErrorCode.NONE, LEADER, EPOCH, Offset(hwm), Offset(0), records=records)


@pytest.mark.parametrize("cut", [1, 30, 61, 269])
def test_the_whole_batches_before_a_cut_are_appended(cut: int) -> None:
    """Two whole batches and `cut` bytes of a third (inside its header, or past it)."""
    s = Solo()
    fetch = s.follow()
    records = _batch(0) + _batch(1) + _batch(2)[:cut]
    effects = s.receive(5, LEADER, _answer(3, records), fetch)
    [append] = [e for e in effects if isinstance(e, AppendToLog)]
    assert (append.first_offset, append.last_offset) == (0, 1)
    assert bytes(append.data) == _batch(0) + _batch(1)
    view = s.replica.view()
    assert (view.end_offset, view.high_watermark) == (2, 2)
    [nxt] = s.sent(FetchRequest, effects)
    assert isinstance(nxt.message, FetchRequest) and nxt.message.fetch_offset == 2


@pytest.mark.parametrize("cut", [1, 30, 269])
def test_an_answer_with_no_whole_batch_is_ignored(cut: int) -> None:
    """After two batches at HWM 0, an answer holding only a piece of the next batch moves
    neither the log nor the high watermark it states (2)."""
    s = Solo()
    fetch = s.follow()
    effects = s.receive(5, LEADER, _answer(0, _batch(0) + _batch(1)), fetch)
    [again] = s.sent(FetchRequest, effects)
    effects = s.receive(6, LEADER, _answer(2, _batch(2)[:cut]), again.message)  # type: ignore[arg-type]
    assert not [e for e in effects if isinstance(e, AppendToLog)]
    view = s.replica.view()
    assert (view.end_offset, view.high_watermark) == (2, 0)


@pytest.mark.parametrize(("offset", "fetched"), [(2, True), (1, False)])
def test_a_snapshot_ending_at_the_high_watermark_is_fetched_one_below_is_not(
    offset: int, fetched: bool
) -> None:
    """At HWM 2, an answer naming a snapshot that ends at 2 drops nothing committed: the
    follower fetches it at once. One ending at 1 would leave the HWM above the log end: this
    project's follower backs off instead (Kafka would fetch it; see the README's deviations)."""
    s = Solo(snapshots=True)
    fetch = s.follow()
    effects = s.receive(5, LEADER, _answer(2, _batch(0) + _batch(1)), fetch)
    assert s.replica.view().high_watermark == 2
    [again] = s.sent(FetchRequest, effects)
    named = FetchResponse(
        ErrorCode.NONE, LEADER, EPOCH, Offset(2), Offset(0),
        snapshot_id=OffsetAndEpoch(EPOCH, Offset(offset)),
    )  # fmt: skip
    effects = s.receive(6, LEADER, named, again.message)  # type: ignore[arg-type]
    assert bool(s.sent(FetchSnapshotRequest, effects)) is fetched


def test_a_snapshot_of_any_positive_size_is_taken_at_its_word() -> None:
    """The first chunk answer of a transfer states the snapshot's size; any positive size is
    believed (1 byte here, no real snapshot is that small) and the chunk written: whether it
    holds a snapshot is for the validation to say, not the size."""
    s = Solo(snapshots=True)
    fetch = s.follow()
    named = FetchResponse(
        ErrorCode.NONE, LEADER, EPOCH, Offset(0), Offset(5),
        snapshot_id=OffsetAndEpoch(EPOCH, Offset(5)),
    )  # fmt: skip
    effects = s.receive(5, LEADER, named, fetch)
    if not s.sent(FetchSnapshotRequest, effects):
        effects = s.step(Tick(s.replica.next_deadline_ms()))
    [ask] = s.sent(FetchSnapshotRequest, effects)
    assert isinstance(ask.message, FetchSnapshotRequest) and ask.message.position == 0
    chunk = FetchSnapshotResponse(
        ErrorCode.NONE, LEADER, EPOCH, OffsetAndEpoch(EPOCH, Offset(5)), size=1, position=0,
        chunk=b"x",
    )  # fmt: skip
    effects = s.receive(s.now, LEADER, chunk, ask.message)
    assert [type(e) for e in effects if isinstance(e, WriteSnapshotChunk | ValidateSnapshot)] == [
        WriteSnapshotChunk,
        ValidateSnapshot,
    ]
