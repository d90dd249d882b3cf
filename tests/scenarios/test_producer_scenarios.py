"""Scenario tests of idempotent producers (kraft.core.producers) across a leader change: what a
Kafka producer with several batches in flight, or one that comes back late, hears from the
next leader. The simulator's producers (refinement.sim_clients) send one batch at a time and
never reach the table's bounds; these stories do."""

from __future__ import annotations

from scenario_harness import Cluster

from kraft.core.effects import AppendResult
from kraft.core.events import ClientAppend
from kraft.core.producers import MAX_SEQUENCE
from kraft.errors import ErrorCode
from kraft.ids import ProducerId

P = ProducerId(77)
# The table's bounds, written out (a test that read them from the module would follow a change):
# the batches kept per producer (Kafka's max.in.flight limit) and the producers kept.
KEEP = 5
MAX_PRODUCERS = 10_000


def produce(
    c: Cluster, node: int, producer: ProducerId, sequence: int, count: int, rid: int
) -> AppendResult:
    values = tuple((None, b"p%d.%d" % (producer, sequence + k)) for k in range(count))
    effects = c.step(node, ClientAppend(c.now, values, rid, producer, sequence))
    [result] = [e for e in effects if isinstance(e, AppendResult)]
    return result


def elected(c: Cluster) -> int:
    c.run_until(lambda: c.leader() is not None)
    leader = c.leader()
    assert leader is not None
    return leader


def fail_over(c: Cluster, first: int) -> int:
    """Once every replica holds and has committed the leader `first`'s whole log, crash it;
    the next leader elected."""
    end = c.nodes[first].log.end_offset
    c.run_until(
        lambda: all(
            n.log.end_offset == end and n.hwm_history and n.hwm_history[-1] == end
            for n in c.nodes.values()
        )
    )
    c.crash(first)
    second = elected(c)
    assert second != first
    return second


def offsets(r: AppendResult) -> tuple[object, object, object]:
    return (r.first_offset, r.last_offset, r.epoch)


def test_the_next_leader_answers_the_last_five_batches_and_refuses_older_or_odd_resends() -> None:
    """Six batches of two records (sequences 0..11) commit under the first leader; it crashes.
    The next leader, whose table was built from the batches it fetched, answers a resend of
    each of the last five batches with the offsets the first copy got, and refuses the rest:
    the oldest batch (too old to tell, DUPLICATE_SEQUENCE_NUMBER), a batch that starts where a
    kept one starts or ends where the last one ends but has another length (the same), and a
    batch past a gap (OUT_OF_ORDER_SEQUENCE_NUMBER). The next sequence is appended."""
    c = Cluster(3, seed=11)
    first = elected(c)
    sent = [produce(c, first, P, 2 * k, 2, 100 + k) for k in range(KEEP + 1)]
    assert all(r.error is ErrorCode.NONE for r in sent)
    second = fail_over(c, first)
    for k in range(1, KEEP + 1):
        again = produce(c, second, P, 2 * k, 2, 200 + k)
        assert again.error is ErrorCode.NONE
        assert offsets(again) == offsets(sent[k]), k
    assert produce(c, second, P, 0, 2, 300).error is ErrorCode.DUPLICATE_SEQUENCE_NUMBER
    # A kept batch's base sequence with another length; the last batch's last sequence alone.
    assert produce(c, second, P, 10, 1, 301).error is ErrorCode.DUPLICATE_SEQUENCE_NUMBER
    assert produce(c, second, P, 11, 1, 302).error is ErrorCode.DUPLICATE_SEQUENCE_NUMBER
    # Gaps of one and of two sequences.
    assert produce(c, second, P, 13, 1, 303).error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(c, second, P, 14, 1, 304).error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    log_end = c.nodes[second].log.end_offset
    nxt = produce(c, second, P, 12, 1, 305)
    assert nxt.error is ErrorCode.NONE and nxt.first_offset == log_end


def test_a_producer_near_the_end_of_the_sequence_space() -> None:
    """The batch header's BaseSequence is an int32: a batch may end at 2**31 - 1, never past
    it (INVALID_REQUEST), whatever the producer sent before (new producers here)."""
    c = Cluster(3, seed=12)
    leader = elected(c)
    assert MAX_SEQUENCE == 2**31 - 1
    assert produce(c, leader, ProducerId(1), 2**31 - 2, 2, 1).error is ErrorCode.NONE
    assert produce(c, leader, ProducerId(2), 2**31 - 1, 1, 2).error is ErrorCode.NONE
    assert produce(c, leader, ProducerId(3), 2**31 - 1, 2, 3).error is ErrorCode.INVALID_REQUEST
    assert produce(c, leader, ProducerId(4), 2**31, 1, 4).error is ErrorCode.INVALID_REQUEST
    assert produce(c, leader, ProducerId(5), -1, 1, 5).error is ErrorCode.INVALID_REQUEST


def test_the_least_recently_appending_producer_is_forgotten_past_the_bound() -> None:
    """The table keeps 10,000 producers (DEFAULT_MAX_PRODUCERS); one more forgets the producer whose
    newest batch is oldest: its resend is appended anew, while the next one's is still
    answered with its first copy's offsets."""
    c = Cluster(1, seed=13)
    leader = elected(c)
    first = [produce(c, leader, ProducerId(p), 0, 1, p + 1) for p in range(MAX_PRODUCERS + 1)]
    assert all(r.error is ErrorCode.NONE for r in first)
    again = produce(c, leader, ProducerId(1), 0, 1, 10**6)
    assert offsets(again) == offsets(first[1])
    end = c.nodes[leader].log.end_offset
    anew = produce(c, leader, ProducerId(0), 0, 1, 10**6 + 1)
    assert anew.error is ErrorCode.NONE and anew.first_offset == end


def test_a_batch_truncated_away_is_appended_anew_when_resent() -> None:
    """A producer's first batch commits; a zombie leader then accepts its second batch (one
    record, the last of its log) that never commits. The others elect a new leader, and the
    zombie, back, truncates that batch away. Once it leads again, a resend of the second
    batch is a new append at its log end (the table forgot the batch truncated away, not
    answered with offsets that now hold other records), and a resend of the first is still
    answered with its offsets (the table kept what the truncation left)."""
    slow = {"election_timeout_ms": 5000}
    c = Cluster(3, seed=14, overrides={2: slow, 3: slow})
    old = elected(c)
    assert old == 1
    committed = produce(c, old, P, 0, 2, 1)
    assert committed.error is ErrorCode.NONE
    c.run_until(
        lambda: all(n.log.end_offset == c.nodes[old].log.end_offset for n in c.nodes.values())
    )
    c.run(c.now + 100)
    c.isolate(old)
    zombie = produce(c, old, P, 2, 1, 2)
    assert zombie.error is ErrorCode.NONE
    assert zombie.last_offset == c.nodes[old].log.end_offset - 1
    c.run_until(lambda: any(i != old for i in c.leaders()))
    new = next(i for i in c.leaders() if i != old)
    c.append(new, b"a", b"b", b"c")
    c.heal()
    c.run_until(
        lambda: (
            c.view(old).leader_id == new
            and c.nodes[old].log.end_offset == c.nodes[new].log.end_offset
        )
    )
    # The third voter falls behind, so that the new leader's EndQuorumEpoch names the zombie
    # (the most caught up) its first successor.
    third = next(i for i in c.nodes if i not in (old, new))
    c.partition(new, third)
    c.append(new, b"d")
    c.run_until(lambda: c.nodes[old].log.end_offset == c.nodes[new].log.end_offset)
    c.shutdown(new)
    c.run_until(lambda: c.leader() not in (None, new))
    assert c.leader() == old
    first = produce(c, old, P, 0, 2, 3)
    assert first.error is ErrorCode.NONE and offsets(first) == offsets(committed)
    end = c.nodes[old].log.end_offset
    again = produce(c, old, P, 2, 1, 4)
    assert again.error is ErrorCode.NONE and again.first_offset == end
