"""The verdict finds what it is there to find: lost acknowledged values, divergent committed
logs, duplicates, values present without an acknowledgement."""

from __future__ import annotations

from refinement.chaos.verdict import LogRecord, judge, percentile
from refinement.chaos.writers import Attempt, History, Outcome


def history(*attempts: tuple[bytes, Outcome, int]) -> History:
    h = History()
    for value, outcome, offset in attempts:
        if value not in h.issued:
            h.issued.append(value)
        h.record(Attempt(0, value, 1, 0.0, 1.0, outcome, offset=offset, epoch=1))
    return h


def rec(offset: int, value: bytes, epoch: int = 1) -> LogRecord:
    return (offset, epoch, False, value)


LEADER_CHANGE: LogRecord = (0, 1, True, b"\x00\x00")


def test_a_clean_run_passes() -> None:
    h = history((b"a", Outcome.ACK, 1), (b"b", Outcome.ACK, 2))
    log = [LEADER_CHANGE, rec(1, b"a"), rec(2, b"b")]
    v = judge(h, {1: log, 2: list(log), 3: list(log)}, committed_end=3)
    assert (v.lost, v.identical, v.duplicated, v.unacked_present, v.foreign) == (0, True, 0, 0, 0)
    assert v.acknowledged == 2
    assert v.data_records == 2


def test_an_acknowledged_value_missing_on_one_node_is_lost() -> None:
    h = history((b"a", Outcome.ACK, 1), (b"b", Outcome.ACK, 2))
    log = [LEADER_CHANGE, rec(1, b"a"), rec(2, b"b")]
    v = judge(h, {1: log, 2: log, 3: log[:2]}, committed_end=3)
    assert v.lost == 1
    assert v.lost_by_node == {3: 1}
    assert not v.identical
    assert "node 3" in v.divergence[0]


def test_an_acknowledged_value_at_another_offset_is_lost() -> None:
    h = history((b"a", Outcome.ACK, 1))
    log = [LEADER_CHANGE, rec(1, b"x"), rec(2, b"a")]
    v = judge(h, {1: log, 2: log, 3: log}, committed_end=3)
    assert v.lost == 1
    assert v.identical


def test_only_the_committed_prefix_counts() -> None:
    h = history((b"a", Outcome.ACK, 1))
    full = [LEADER_CHANGE, rec(1, b"a"), rec(2, b"tail-1")]
    other = [LEADER_CHANGE, rec(1, b"a"), rec(2, b"tail-2")]
    v = judge(h, {1: full, 2: other, 3: full}, committed_end=2)
    assert v.identical and v.lost == 0
    v = judge(h, {1: full, 2: other, 3: full}, committed_end=3)
    assert not v.identical


def test_duplicates_and_unacknowledged_values_are_counted() -> None:
    h = history(
        (b"a", Outcome.UNKNOWN, -1),
        (b"a", Outcome.ACK, 2),
        (b"b", Outcome.UNKNOWN, -1),
        (b"c", Outcome.REFUSED, -1),
    )
    log = [LEADER_CHANGE, rec(1, b"a"), rec(2, b"a"), rec(3, b"b"), rec(4, b"c"), rec(5, b"?")]
    v = judge(h, {1: log, 2: log, 3: log}, committed_end=6)
    assert v.lost == 0
    assert (v.duplicated, v.extra_copies) == (1, 1)
    assert v.unacked_present == 2  # b (unknown) and c (refused)
    assert v.refused_present == 1
    assert v.foreign == 1
    assert v.duplicate_examples == ["a at [1, 2]"]


def test_an_acknowledged_epoch_that_differs_is_counted() -> None:
    h = history((b"a", Outcome.ACK, 1))
    log = [LEADER_CHANGE, rec(1, b"a", epoch=2)]
    assert judge(h, {1: log, 2: log, 3: log}, committed_end=2).epoch_mismatch == 1


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0], 99) == 3.0
    values = [float(i) for i in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
