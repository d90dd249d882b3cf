"""The node's driver: group commit, and a client hears success only when the core says its
append committed (kraft.core.commits decides; the driver answers from AppendCommitted and
AppendLost, released after the fsync like every outbound effect).

kraft.core.effects: "everything before a PersistElectionState or FlushLog is durable before any
effect after it is performed (in particular before a Send or an AppendResult). A driver may
merge consecutive flushes across steps (group commit) as long as it keeps that order."
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from kraft.core.effects import (
    AdvanceLogStartOffset,
    AppendCommitted,
    AppendLost,
    AppendResult,
    AppendToLog,
    DiscardSnapshotFetch,
    Effect,
    ElectionState,
    FlushLog,
    HighWatermarkMoved,
    InstallSnapshot,
    PersistElectionState,
    Send,
    StateChanged,
    TruncateLog,
    ValidateSnapshot,
    WriteSnapshotChunk,
)
from kraft.core.events import ClientAppend, Event, SnapshotValidated, Tick
from kraft.core.messages import VoteResponse
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch, ProducerId
from kraft.records import encode_batch, encode_records
from kraft.server.driver import Driver
from kraft.server.snapshot_store import FileSnapshots
from kraft.storage.quorum_state import read_quorum_state
from kraft.storage.segmented_log import SegmentedLog
from kraft.storage.snapshot_files import CheckpointWriter, checkpoint_path

E = Epoch(3)


@dataclass
class _View:
    leader_id: int | None = 1


class ScriptedReplica:
    """Answers each ClientAppend with a leader's effects; other steps return `next_effects`."""

    def __init__(self) -> None:
        self.end = 0
        self.next_effects: list[Effect] = []

    def start(self) -> list[Effect]:
        return [PersistElectionState(ElectionState(E, NodeId(1)))]

    def step(self, event: Event) -> list[Effect]:
        if isinstance(event, ClientAppend):
            first = self.end
            self.end += len(event.records)
            data = encode_records(first, E, event.records, timestamp_ms=0)
            return [
                AppendToLog(Offset(first), Offset(self.end - 1), E, data, leader_encoded=True),
                FlushLog(),
                Send(NodeId(2), VoteResponse(ErrorCode.NONE, NodeId(1), E, False)),
                AppendResult(
                    event.request_id,
                    ErrorCode.NONE,
                    Offset(first),
                    Offset(self.end - 1),
                    E,
                    NodeId(1),
                ),
            ]
        out, self.next_effects = self.next_effects, []
        return out

    def next_deadline_ms(self) -> int:
        return 1 << 60

    def view(self) -> _View:
        return _View()


class Recorder:
    """The outbound side and the log's fsync write into one timeline."""

    def __init__(self, log: SegmentedLog) -> None:
        self.timeline: list[str] = []
        flush = log.flush

        def recorded_flush() -> None:
            flush()
            self.timeline.append("fsync")

        log.flush = recorded_flush  # type: ignore[method-assign]

    def prepare(self, send: Send) -> object:
        self.timeline.append("encode")
        return lambda: self.timeline.append(f"send->{send.dst}")


def committed(request_id: int, first: int, last: int) -> AppendCommitted:
    return AppendCommitted(request_id, Offset(first), Offset(last), E)


def _driver(
    tmp_path: Path, *, segment_bytes: int | None = None
) -> tuple[Driver, ScriptedReplica, Recorder, SegmentedLog]:
    log = (
        SegmentedLog.open(tmp_path)
        if segment_bytes is None
        else SegmentedLog.open(tmp_path, segment_bytes=segment_bytes)
    )
    rec = Recorder(log)
    replica = ScriptedReplica()
    clock = iter(range(1000, 10**9, 10))
    driver = Driver(
        replica,  # type: ignore[arg-type]
        log,
        tmp_path / "quorum-state",
        rec,  # type: ignore[arg-type]
        lambda: next(clock),
        voter_ids=(NodeId(1), NodeId(2), NodeId(3)),
        snapshot_files=FileSnapshots(log.dir),
    )
    driver.start()
    return driver, replica, rec, log


def test_one_fsync_per_batch_and_nothing_sent_before_it(tmp_path: Path) -> None:
    async def run() -> None:
        driver, replica, rec, log = _driver(tmp_path)
        # Idempotent appends, so that each is its own step (plain ones would be coalesced
        # into one, kraft.server.coalesce).
        futures = [
            driver.client_append(
                ((None, f"v{i}".encode()),), 5000, producer=ProducerId(10 + i), sequence=0
            )
            for i in range(3)
        ]
        driver.process_batch()
        # Three appends, three FlushLogs, one fsync; every Send encoded at once but released
        # only after the fsync, in order.
        assert rec.timeline == ["encode"] * 3 + ["fsync"] + ["send->2"] * 3
        assert driver.fsyncs == 1
        assert log.end_offset == 3
        # Accepted is not committed: no client has an answer yet.
        assert not any(f.done() for f in futures)
        replica.next_effects = [
            HighWatermarkMoved(Offset(2)),
            committed(1, 0, 0),
            committed(2, 1, 1),
        ]
        driver.submit(Tick(0))
        driver.process_batch()
        assert [f.done() for f in futures] == [True, True, False]
        assert futures[1].result().last_offset == 1
        assert futures[1].result().error is ErrorCode.NONE
        replica.next_effects = [HighWatermarkMoved(Offset(3)), committed(3, 2, 2)]
        driver.submit(Tick(0))
        driver.process_batch()
        assert futures[2].result().first_offset == 2
        log.close()

    asyncio.run(run())


def test_the_election_state_is_persisted_as_kafka_writes_it(tmp_path: Path) -> None:
    async def run() -> None:
        _, _, _, log = _driver(tmp_path)
        assert read_quorum_state(tmp_path / "quorum-state") == ElectionState(E, NodeId(1))
        text = (tmp_path / "quorum-state").read_text()
        assert '"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}]' in text
        log.close()

    asyncio.run(run())


def test_a_truncated_append_is_an_error_never_an_ack(tmp_path: Path) -> None:
    async def run() -> None:
        driver, replica, _, log = _driver(tmp_path)
        kept = driver.client_append(((None, b"kept"),), 5000)
        lost = driver.client_append(((None, b"lost"),), 5000)
        driver.process_batch()
        # A new leader's log diverges at offset 1: our record there goes.
        replica.next_effects = [
            TruncateLog(Offset(1)),
            AppendLost(2, Offset(1), Offset(1), E),
            HighWatermarkMoved(Offset(1)),
            committed(1, 0, 0),
        ]
        driver.submit(Tick(0))
        driver.process_batch()
        assert lost.result().error is ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert "not known to be committed" in (lost.result().message or "")
        assert kept.result().error is ErrorCode.NONE
        log.close()

    asyncio.run(run())


def test_appends_pending_when_the_leader_steps_down_are_answered_outcome_unknown_at_once(
    tmp_path: Path,
) -> None:
    """A leader that resigns (its removal committed, or check-quorum) learns whether its
    pending appends commit only once it follows the next leader, an election timeout or more
    later; its clients hear at once that the outcome is unknown, so that their idempotent
    producer resends to the new leader (Kafka's controller fails its pending writes with
    NOT_CONTROLLER when it renounces). Never an acknowledgement: a later AppendCommitted of
    the same request changes nothing."""

    async def run() -> None:
        driver, replica, _, log = _driver(tmp_path)
        pending = driver.client_append(((None, b"in flight"),), 5000)
        driver.process_batch()
        assert not pending.done()
        replica.next_effects = [StateChanged(ReplicaState.LEADER, ReplicaState.RESIGNED, E)]
        driver.submit(Tick(0))
        driver.process_batch()
        outcome = pending.result()
        assert outcome.error is ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert "outcome is unknown" in (outcome.message or "")
        assert outcome.leader_id is None
        replica.next_effects = [HighWatermarkMoved(Offset(1)), committed(1, 0, 0)]
        driver.submit(Tick(0))
        driver.process_batch()
        assert pending.result() is outcome
        log.close()

    asyncio.run(run())


def test_a_state_change_of_a_non_leader_leaves_pending_appends_alone(tmp_path: Path) -> None:
    async def run() -> None:
        driver, replica, _, log = _driver(tmp_path)
        pending = driver.client_append(((None, b"v"),), 5000)
        driver.process_batch()
        replica.next_effects = [StateChanged(ReplicaState.CANDIDATE, ReplicaState.LEADER, E)]
        driver.submit(Tick(0))
        driver.process_batch()
        assert not pending.done()
        log.close()

    asyncio.run(run())


def test_an_outcome_is_released_only_after_the_fsync_of_its_batch(tmp_path: Path) -> None:
    async def run() -> None:
        driver, replica, _, log = _driver(tmp_path)
        fut = driver.client_append(((None, b"v"),), 5000)
        driver.process_batch()
        # The outcome comes in a batch that also appends (a flush is pending): held until
        # that batch's fsync, like a Send.
        data = encode_batch(1, E, [b"w"], timestamp_ms=0)
        replica.next_effects = [
            AppendToLog(Offset(1), Offset(1), E, data),
            FlushLog(),
            HighWatermarkMoved(Offset(1)),
            committed(1, 0, 0),
        ]
        seen: list[bool] = []
        flush = log.flush

        def observed_flush() -> None:
            seen.append(fut.done())
            flush()

        log.flush = observed_flush  # type: ignore[method-assign]
        driver.submit(Tick(0))
        driver.process_batch()
        assert seen == [False]
        assert fut.result().error is ErrorCode.NONE
        assert driver.high_watermark == 1
        log.close()

    asyncio.run(run())


def test_an_append_not_committed_in_time_times_out_without_an_ack(tmp_path: Path) -> None:
    async def run() -> None:
        driver, _, _, log = _driver(tmp_path)
        fut = driver.client_append(((None, b"slow"),), 0)
        driver.process_batch()
        assert fut.result().error is ErrorCode.REQUEST_TIMED_OUT
        log.close()

    asyncio.run(run())


class Hooks:
    """The state machine's side of the snapshot effects, recorded into the timeline."""

    def __init__(self, timeline: list[str]) -> None:
        self.timeline = timeline

    def write_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        self.timeline.append(f"write {snapshot_id.offset}")

    def snapshot_refused(self, end_offset: Offset, reason: str) -> None:
        self.timeline.append(f"refused {end_offset}")

    def before_log_start(self, snapshot_id: OffsetAndEpoch, path: Path) -> None:
        assert path.name.startswith(f"{snapshot_id.offset:020d}-")
        self.timeline.append(f"catch up to {snapshot_id.offset}")

    def snapshot_installed(self, path: Path) -> None:
        self.timeline.append(f"load {path.name}")


def _record_steps(replica: ScriptedReplica) -> list[Event]:
    """Every event the driver steps from now on (the driver's own answers included)."""
    stepped: list[Event] = []
    step = replica.step

    def recorded(event: Event) -> list[Effect]:
        stepped.append(event)
        return step(event)

    replica.step = recorded  # type: ignore[method-assign]
    return stepped


def _checkpoint(directory: Path, offset: int) -> OffsetAndEpoch:
    sid = OffsetAndEpoch(E, Offset(offset))
    with CheckpointWriter(directory, sid, timestamp_ms=0, last_contained_log_timestamp=0) as w:
        w.append([(f"k{i}".encode(), b"v" * 200) for i in range(40)])
        w.freeze()
    return sid


def test_a_fetched_snapshot_is_validated_then_installed_before_the_hwm_moves(
    tmp_path: Path,
) -> None:
    driver, replica, rec, log = _driver(tmp_path / "follower")
    driver.snapshot_hooks = Hooks(rec.timeline)
    leader = tmp_path / "leader"
    leader.mkdir()
    sid = _checkpoint(leader, 500)
    raw = checkpoint_path(leader, sid).read_bytes()
    half = len(raw) // 2
    replica.next_effects = [
        WriteSnapshotChunk(sid, 0, len(raw), raw[:half]),
        WriteSnapshotChunk(sid, half, len(raw), memoryview(raw)[half:]),
        ValidateSnapshot(sid, len(raw)),
    ]
    stepped = _record_steps(replica)
    driver.submit(Tick(0))
    driver.process_batch()
    answers = [e for e in stepped if isinstance(e, SnapshotValidated)]
    assert len(answers) == 1
    validated = answers[0]
    assert validated.valid and validated.snapshot_id == sid
    driver.on_high_watermark = lambda hwm: rec.timeline.append(f"hwm {hwm}")
    replica.next_effects = [InstallSnapshot(sid), HighWatermarkMoved(Offset(500))]
    driver.submit(Tick(0))
    driver.process_batch()
    assert checkpoint_path(log.dir, sid).read_bytes() == raw
    assert (log.start_offset, log.end_offset) == (500, 500)
    name = checkpoint_path(log.dir, sid).name
    assert rec.timeline[-2:] == [f"load {name}", "hwm 500"]
    log.close()


def test_a_damaged_fetch_is_answered_invalid_and_discarded(tmp_path: Path) -> None:
    driver, replica, _rec, log = _driver(tmp_path / "follower")
    leader = tmp_path / "leader"
    leader.mkdir()
    sid = _checkpoint(leader, 500)
    raw = bytearray(checkpoint_path(leader, sid).read_bytes())
    raw[-5] ^= 0xFF
    replica.next_effects = [
        WriteSnapshotChunk(sid, 0, len(raw), bytes(raw)),
        ValidateSnapshot(sid, len(raw)),
    ]
    stepped = _record_steps(replica)
    driver.submit(Tick(0))
    driver.process_batch()
    answers = [e for e in stepped if isinstance(e, SnapshotValidated)]
    assert len(answers) == 1
    assert not answers[0].valid
    assert answers[0].reason
    part = FileSnapshots(log.dir).part_path(sid)
    assert part.exists()
    replica.next_effects = [DiscardSnapshotFetch(sid)]
    driver.submit(Tick(0))
    driver.process_batch()
    assert not part.exists()
    assert log.start_offset == 0
    log.close()


def test_advance_log_start_deletes_whole_segments_and_older_snapshots(tmp_path: Path) -> None:
    driver, replica, rec, log = _driver(tmp_path, segment_bytes=1024)
    driver.snapshot_hooks = Hooks(rec.timeline)
    for i in range(60):
        data = encode_records(i, E, [(b"k", b"x" * 100)], timestamp_ms=0)
        log.append_leader_encoded(data, Offset(i), Offset(i), E)
    log.flush()
    segments = log.segment_count
    old, kept = _checkpoint(log.dir, 20), _checkpoint(log.dir, 40)
    replica.next_effects = [AdvanceLogStartOffset(kept)]
    driver.submit(Tick(0))
    driver.process_batch()
    assert rec.timeline[-1] == "catch up to 40"
    assert log.start_offset == 40
    assert 1 < log.segment_count < segments
    assert log.segment_paths()[0].name <= f"{40:020d}.log"
    assert not checkpoint_path(log.dir, old).exists()
    assert checkpoint_path(log.dir, kept).exists()
    log.close()
    with SegmentedLog.open(tmp_path) as again:
        assert again.start_offset == 40


def test_the_driver_performs_every_kind_of_effect_the_core_emits(tmp_path: Path) -> None:
    """The driver dispatches on an effect's exact type: a kind of effect added to the core but
    not to the driver's table would be dropped without a word. Only ActionTaken (for traces)
    has nothing to perform."""
    import typing

    from kraft.core import effects

    driver, *_ = _driver(tmp_path)
    kinds = set(typing.get_args(effects.Effect))
    assert effects.WriteSnapshot in kinds and effects.AppendToLog in kinds  # unions flattened
    assert kinds - set(driver._performers) == {effects.ActionTaken}
