"""The node's applier (kraft.server.applier): committed batches read back from a log reach the
state machine in offset order, only whole batches below the high watermark, with their keys;
control batches are delivered marked; a leader change is told once."""

from __future__ import annotations

from kraft.app.kv import KeyValueStore
from kraft.app.port import LeaderAndEpoch
from kraft.control_records import LeaderChangeMessage, encode_control_batch
from kraft.ids import Epoch, NodeId, Offset
from kraft.records import encode_records, iter_batches
from kraft.server.applier import Applier, committed_batches


class Log:
    """Whole batches from an offset, as the node's BatchReader gives them."""

    def __init__(self, *batches: bytes) -> None:
        self.data = b"".join(batches)
        self.reads = 0

    def read(self, offset: Offset, max_bytes: int) -> memoryview:
        self.reads += 1
        for pos, h in iter_batches(self.data):
            if h.last_offset >= offset:
                return memoryview(self.data)[pos : pos + max(max_bytes, h.size_in_bytes)]
        return memoryview(b"")


LEADER_CHANGE = LeaderChangeMessage(0, 1, (1, 2, 3), (1, 2))


def log3() -> Log:
    return Log(
        encode_control_batch(0, 1, LEADER_CHANGE, timestamp_ms=5),
        encode_records(1, 1, [(b"a", b"1"), (b"b", b"2")], timestamp_ms=6),
        encode_records(3, 1, [(b"a", None)], timestamp_ms=7),
        encode_records(4, 2, [(None, b"plain")], timestamp_ms=8),
    )


def test_committed_batches_decodes_keys_and_marks_control_batches() -> None:
    got = committed_batches(log3().data, Offset(4))
    assert [(b.base_offset, b.last_offset, b.epoch, b.control) for b in got] == [
        (0, 0, 1, True),
        (1, 2, 1, False),
        (3, 3, 1, False),
    ]
    assert got[0].records == ()
    assert got[1].records == ((b"a", b"1"), (b"b", b"2"))
    assert got[2].records == ((b"a", None),)


def test_only_whole_batches_below_the_high_watermark_are_applied() -> None:
    store = KeyValueStore()
    released = Released()
    applier = Applier(log3(), store, released, lambda: LeaderAndEpoch(NodeId(1), Epoch(1)))
    released.hwm = Offset(2)
    applier.catch_up()  # inside the batch 1..2: not yet
    assert store.applied_offset == 1 and len(store) == 0
    released.hwm = Offset(3)
    applier.catch_up()
    assert store.items() == [(b"a", b"1"), (b"b", b"2")]
    released.hwm = Offset(5)
    applier.catch_up()
    assert store.items() == [(b"b", b"2")]
    assert store.applied_offset == 5 and store.plain_values == 1


def test_a_restarted_store_replays_the_log_up_to_the_high_watermark_it_learns() -> None:
    log = log3()
    first = KeyValueStore()
    released = Released()
    one = Applier(log, first, released, lambda: LeaderAndEpoch(None, Epoch(1)))
    released.hwm = Offset(5)
    one.catch_up()
    again = KeyValueStore()
    two = Applier(log, again, released, lambda: LeaderAndEpoch(None, Epoch(2)))
    released.hwm = Offset(5)
    two.catch_up()
    assert again.items() == first.items() and again.applied_offset == first.applied_offset


class Released:
    """The driver's released high watermark, as the applier reads it."""

    def __init__(self) -> None:
        self.hwm: Offset | None = None

    def __call__(self) -> Offset | None:
        return self.hwm


class Listening(KeyValueStore):
    __slots__ = ("heard",)

    def __init__(self) -> None:
        super().__init__()
        self.heard: list[LeaderAndEpoch] = []

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        self.heard.append(leader)
        super().handle_leader_change(leader)


def test_a_leader_change_is_told_once_after_the_commits() -> None:
    store = Listening()
    heard = store.heard
    leader = LeaderAndEpoch(NodeId(1), Epoch(1))
    released = Released()
    applier = Applier(log3(), store, released, lambda: leader)
    released.hwm = Offset(1)
    applier.catch_up()
    released.hwm = Offset(3)
    applier.catch_up()
    leader = LeaderAndEpoch(NodeId(2), Epoch(2))
    released.hwm = Offset(5)
    applier.catch_up()
    assert heard == [LeaderAndEpoch(NodeId(1), Epoch(1)), LeaderAndEpoch(NodeId(2), Epoch(2))]


def test_a_batch_that_cannot_be_applied_stops_the_state_machine_with_a_reason() -> None:
    store = KeyValueStore(Offset(1))  # expects offset 1, but the log is read from 0 ...
    log = Log(encode_records(5, 1, [(b"k", b"v")], timestamp_ms=0))  # ... and has 5
    released = Released()
    applier = Applier(log, store, released, lambda: LeaderAndEpoch(None, Epoch(1)))
    released.hwm = Offset(6)
    applier.catch_up()
    assert applier.failed is not None and "does not follow" in applier.failed
    reads = log.reads
    released.hwm = Offset(6)
    applier.catch_up()
    assert log.reads == reads  # not fed again


def test_nothing_is_applied_before_a_catch_up() -> None:
    log = log3()
    store = KeyValueStore()
    released = Released()
    applier = Applier(log, store, released, lambda: LeaderAndEpoch(None, Epoch(1)))
    applier.catch_up()  # no high watermark known yet: nothing to apply
    assert store.applied_offset == 0 and log.reads == 0
    released.hwm = Offset(5)
    assert store.applied_offset == 0 and log.reads == 0  # released, not yet applied
    applier.catch_up()
    assert store.applied_offset == 5 and store.items() == [(b"b", b"2")]
