"""Idempotent client appends at the leader: a resend is stored once and answered with the
offsets the first copy got, also by a new leader that replicated the first copy (issue: 120
acknowledged values were stored twice after resends to the next node)."""

from __future__ import annotations

from memory_logs import raw_batches
from replica_harness import Harness, of, sent
from test_replica_leader import fetch, leader

from kraft.core.effects import AppendResult, AppendToLog, ElectionState
from kraft.core.events import ClientAppend
from kraft.core.messages import FetchResponse, VoteRequest, VoteResponse
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch, ProducerId
from kraft.records import encode_batch, iter_batches
from kraft.storage.memory_log import MemoryLog

P = ProducerId(4242)


def elect(h: Harness) -> None:
    """Time out, win the pre-vote and the vote (voters 1 and 3 grant whatever is asked)."""
    effects = h.tick()
    for _ in range(50):
        if h.view.state is ReplicaState.LEADER:
            return
        asks = sent(effects, VoteRequest)
        effects = [] if asks else h.tick()  # a follower first waits out its fetch timeout
        for dst, req in asks:
            answer = VoteResponse(ErrorCode.NONE, NodeId(-1), req.candidate_epoch, True)
            effects += h.recv(dst, answer, req)
    raise AssertionError(f"not elected: {h.view}")


def send(h: Harness, request_id: int, seq: int, *values: bytes) -> AppendResult:
    effects = h.step(ClientAppend(h.now, tuple((None, v) for v in values), request_id, P, seq))
    [result] = of(effects, AppendResult)
    return result


def test_a_resend_is_answered_with_the_first_copys_offsets_and_not_stored_again() -> None:
    h = leader()
    first = send(h, 1, 0, b"a", b"b")
    assert first.error is ErrorCode.NONE
    end = h.log.end_offset
    effects = h.step(ClientAppend(h.now, ((None, b"a"), (None, b"b")), 2, P, 0))
    assert of(effects, AppendToLog) == []
    [again] = of(effects, AppendResult)
    assert (again.first_offset, again.last_offset, again.epoch) == (
        first.first_offset,
        first.last_offset,
        first.epoch,
    )
    assert h.log.end_offset == end
    nxt = send(h, 3, 2, b"c")
    assert nxt.error is ErrorCode.NONE and nxt.first_offset == end


def test_the_batch_carries_the_producer_id_and_sequence_as_kafka_writes_them() -> None:
    h = leader()
    send(h, 1, 7, b"x", b"y", b"z")
    *_, (_, data) = raw_batches(h.log)
    [(_, header)] = list(iter_batches(data))
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (P, 0, 7)


def test_gaps_old_resends_and_bad_sequences_are_refused() -> None:
    h = leader()
    for i in range(6):
        assert send(h, i, i, b"v").error is ErrorCode.NONE
    assert send(h, 10, 9, b"gap").error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert send(h, 11, 0, b"v").error is ErrorCode.DUPLICATE_SEQUENCE_NUMBER  # too old to tell
    assert send(h, 12, -1, b"v").error is ErrorCode.INVALID_REQUEST
    assert send(h, 13, 2**31 - 1, b"v", b"w").error is ErrorCode.INVALID_REQUEST


def test_a_new_leader_knows_what_the_old_one_stored_for_each_producer() -> None:
    """The table is in the log: a follower that replicated an idempotent batch, once leader,
    answers the client's resend from it instead of storing the values a second time."""
    old = leader()
    original = send(old, 1, 0, b"once")
    # Node 2 replicates the old leader's log through a Fetch answer.
    follower = Harness(node=2, election=ElectionState(Epoch(2), leader_id=NodeId(1)))
    data = b"".join(d for _, d in raw_batches(old.log))
    follower.recv(
        1,
        FetchResponse(ErrorCode.NONE, NodeId(1), Epoch(2), Offset(-1), Offset(0), records=data),
        fetch(2, 2, 0, 0),
    )
    assert follower.log.end_offset == old.log.end_offset
    # Restart node 2 from its log (the table is rebuilt from it), and elect it.
    log = MemoryLog()
    for _, batch in raw_batches(follower.log):
        log.append_as_follower(batch)
    h = Harness(node=2, log=log, election=ElectionState(Epoch(2)))
    elect(h)
    end = h.log.end_offset
    resend = send(h, 9, 0, b"once")
    assert (resend.first_offset, resend.epoch) == (original.first_offset, original.epoch)
    assert h.log.end_offset == end


def test_a_truncated_copy_is_forgotten_so_the_resend_is_stored_once() -> None:
    """A copy that divergence truncated away is no longer in the log: the new leader must
    store the resend (once), not answer it with offsets that hold something else now."""
    h = Harness(node=2, election=ElectionState(Epoch(2), leader_id=NodeId(1)))
    data = encode_batch(0, 1, [b"lost"], timestamp_ms=0, producer_id=P, base_sequence=0)
    h.recv(
        1,
        FetchResponse(ErrorCode.NONE, NodeId(1), Epoch(2), Offset(-1), Offset(0), records=data),
        fetch(2, 2, 0, 0),
    )
    assert h.log.end_offset == 1
    diverged = FetchResponse(
        ErrorCode.NONE,
        NodeId(1),
        Epoch(2),
        Offset(-1),
        Offset(0),
        diverging_epoch=OffsetAndEpoch(Epoch(0), Offset(0)),
    )
    h.recv(1, diverged, fetch(2, 2, 1, 1))
    assert h.log.end_offset == 0
    elect(h)
    stored = send(h, 5, 0, b"lost")
    assert stored.error is ErrorCode.NONE
    assert stored.epoch == h.view.epoch  # appended anew in this epoch, not the gone copy
