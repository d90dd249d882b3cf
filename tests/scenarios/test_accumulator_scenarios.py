"""Scenario tests of the leader's accumulator at its batch limit (quorum.append.linger.ms and
Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES, 8 MiB with the batch header), as Kafka 4.3.1's
BatchAccumulator keeps it: appends within the linger are gathered into one batch, written when
the linger runs out; an append that does not fit beside what waits completes that batch, and
both batches are written at once; an append too large for any batch is refused with
RECORD_LIST_TOO_LARGE (Kafka's RecordBatchTooLargeException). The simulator's timing checkers
(refinement.invariants_timing) see the linger with the simulator's small appends; the limit
takes appends of megabytes, driven here.

The sizes keep a margin of 4 KiB from the limit on either side, beyond any record framing,
except in the last test, which pins how a batch is measured: its 61-byte header, and each
record's framing as Kafka 4.3.1's DefaultRecord.MAX_RECORD_OVERHEAD, 21 bytes, the most a
record's own framing can take.
"""

from __future__ import annotations

import pytest
from scenario_harness import Cluster

from kraft.core.effects import AppendResult, AppendToLog, Effect
from kraft.core.events import ClientAppend
from kraft.errors import ErrorCode

# Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES.
BATCH_LIMIT = 8 * 1024 * 1024
MARGIN = 4096
LINGER_MS = 25
# A key larger than the margin, so that a batch measured without its keys is not full.
KEY = b"k" * (2 * MARGIN)


def _cluster() -> tuple[Cluster, int]:
    """Three voters with a linger, once every voter follows one leader."""
    c = Cluster(3, seed=3, election_timeout_ms=1000, fetch_timeout_ms=2000,
                append_linger_ms=LINGER_MS)  # fmt: skip
    c.run_until(
        lambda: c.leader() is not None and all(c.view(i).leader_id == c.leader() for i in c.nodes)
    )
    leader = c.leader()
    assert leader is not None
    return c, leader


def _append(c: Cluster, leader: int, rid: int, payload: int) -> list[Effect]:
    """A client append of one keyed record, `payload` bytes of key and value together, and a
    record with no value (a tombstone)."""
    value = b"v" * (payload - len(KEY))
    records = ((KEY, value), (b"t", None))
    return c.step(leader, ClientAppend(c.now, records, rid))


def _written(effects: list[Effect], rid: int) -> bool:
    return any(isinstance(e, AppendToLog) for e in effects) and any(
        isinstance(e, AppendResult) and e.request_id == rid and e.error is ErrorCode.NONE
        for e in effects
    )


def test_an_append_below_the_batch_limit_lingers() -> None:
    """Appends wait for the linger while what waits is below the batch limit (by 4 KiB), then
    are written as one batch."""
    c, leader = _cluster()
    effects = _append(c, leader, 1, BATCH_LIMIT - MARGIN)
    assert not _written(effects, 1)
    c.run(c.now + LINGER_MS + 5)
    assert c.view(leader).end_offset >= 2


def test_an_append_too_large_for_a_batch_is_refused() -> None:
    """An append larger than a batch (by 4 KiB) is refused with RECORD_LIST_TOO_LARGE and
    nothing of it is written; what waited before it keeps waiting for the linger."""
    c, leader = _cluster()
    end = c.view(leader).end_offset
    assert not _written(c.append(leader, b"a", request_id=1), 1)
    effects = _append(c, leader, 2, BATCH_LIMIT + MARGIN)
    assert not any(isinstance(e, AppendToLog) for e in effects)
    assert [e.error for e in effects if isinstance(e, AppendResult)] == [
        ErrorCode.RECORD_LIST_TOO_LARGE
    ]
    c.run(c.now + LINGER_MS + 5)
    assert c.view(leader).end_offset == end + 1


def test_an_append_that_does_not_fit_beside_what_waits_writes_both_batches() -> None:
    """Two appends of half a batch and 4 KiB each do not fit in one batch: the second completes
    the first's batch, and both are written at once, as two batches in arrival order, neither
    above the limit."""
    c, leader = _cluster()
    half = BATCH_LIMIT // 2 + MARGIN
    end = c.view(leader).end_offset
    assert not _written(_append(c, leader, 1, half), 1)
    effects = _append(c, leader, 2, half)
    assert _written(effects, 1)
    assert _written(effects, 2)
    batches = [e for e in effects if isinstance(e, AppendToLog)]
    assert [(b.first_offset, b.last_offset) for b in batches] == [
        (end, end + 1),
        (end + 2, end + 3),
    ]
    assert all(len(b.data) <= BATCH_LIMIT for b in batches)
    answers = {e.request_id: e for e in effects if isinstance(e, AppendResult)}
    assert (answers[1].first_offset, answers[2].first_offset) == (end, end + 2)


@pytest.mark.parametrize("linger_ms", [0, LINGER_MS])
def test_a_single_voter_commits_a_batch_as_it_writes_it(linger_ms: int) -> None:
    """A single voter is a majority by itself: the batch it writes, once the linger runs out,
    is committed at once (its HWM follows its log end; nobody fetches to move it)."""
    c = Cluster(1, seed=1, election_timeout_ms=1000, append_linger_ms=linger_ms)
    c.run_until(lambda: c.leader() == 1)
    c.run(c.now + 10)
    c.append(1, b"a", b"b", request_id=7)
    c.run(c.now + linger_ms + 1)
    view = c.view(1)
    assert view.end_offset >= 3
    assert view.high_watermark == view.end_offset


def test_the_shortest_linger_still_gathers_appends() -> None:
    """quorum.append.linger.ms = 1: an append waits 1 ms (with other appends of that ms), it is
    not written in the step that receives it."""
    c = Cluster(3, seed=3, election_timeout_ms=1000, fetch_timeout_ms=2000, append_linger_ms=1)
    c.run_until(lambda: c.leader() is not None)
    leader = c.leader()
    assert leader is not None
    end = c.view(leader).end_offset
    assert not _written(c.append(leader, b"a", request_id=1), 1)
    assert not _written(c.append(leader, b"b", request_id=2), 2)
    c.run(c.now + 1)
    assert c.view(leader).end_offset == end + 2


@pytest.mark.parametrize(("extra", "refused"), [(0, False), (1, True)])
def test_a_batch_counts_its_header_and_kafkas_max_record_overhead(
    extra: int, refused: bool
) -> None:
    """One record whose key and value with 21 bytes of framing and a 61-byte batch header make
    exactly 8 MiB fits a batch: it lingers like any append (Kafka completes a batch only when the
    next append does not fit). A byte more is refused."""
    c, leader = _cluster()
    end = c.view(leader).end_offset
    batch_header, max_record_overhead = 61, 21  # Kafka's RECORD_BATCH_OVERHEAD, MAX_RECORD_OVERHEAD
    value = b"v" * (BATCH_LIMIT - batch_header - max_record_overhead - len(KEY) + extra)
    effects = c.step(leader, ClientAppend(c.now, ((KEY, value),), 1))
    assert not any(isinstance(e, AppendToLog) for e in effects)
    errors = [e.error for e in effects if isinstance(e, AppendResult)]
    assert errors == ([ErrorCode.RECORD_LIST_TOO_LARGE] if refused else [])
    c.run(c.now + LINGER_MS + 5)
    assert c.view(leader).end_offset == end + (0 if refused else 1)
