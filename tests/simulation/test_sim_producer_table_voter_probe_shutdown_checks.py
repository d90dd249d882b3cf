"""The checkers added for the replica, reconfig and producer survivors of issue #16: each fires
on the state it names and stays silent on what is allowed."""

from __future__ import annotations

from memory_logs import key

from kraft.control_records import Endpoint, VoterEntry, VotersRecord
from kraft.core.producers import ProducerBatch
from kraft.core.voter_set import VoterSet
from kraft.ids import Epoch, NodeId, Offset, ProducerId
from refinement import invariants_effects as eff
from refinement import invariants_producers as pinv
from refinement import invariants_voter_changes as vc

N = NodeId(1)
P = ProducerId(9)


def _batch(seq: int, first: int, epoch: int = 1) -> ProducerBatch:
    return ProducerBatch(P, seq, Offset(first), Offset(first), Epoch(epoch))


def test_the_producer_table_must_hold_only_what_the_log_holds() -> None:
    log = (_batch(0, 1), _batch(1, 2))
    assert pinv.producer_table_follows_log(N, log, log) is None
    assert pinv.producer_table_follows_log(N, log[1:], log) is None  # older ones forgotten
    assert pinv.producer_table_follows_log(N, (), log) is None  # a producer forgotten
    stale = pinv.producer_table_follows_log(N, (_batch(0, 1, epoch=2),), log)
    assert stale is not None and stale.name == pinv.PRODUCER_TABLE_FOLLOWS_LOG
    behind = pinv.producer_table_follows_log(N, log[:1], log)
    assert behind is not None and behind.name == pinv.PRODUCER_TABLE_FOLLOWS_LOG
    truncated = pinv.producer_table_follows_log(N, log, ())
    assert truncated is not None


def _set(*entries: VoterEntry) -> VoterSet:
    record = VotersRecord(0, entries)
    keys = tuple(key(e.voter_id) for e in entries)
    return VoterSet(keys, record=record)


def _entry(i: int, lo: int, hi: int) -> VoterEntry:
    return VoterEntry(i, key(i).directory_id, (Endpoint("CONTROLLER", "h", 1),), lo, hi)


def test_an_added_voter_states_its_probed_range() -> None:
    before = _set(_entry(1, 0, 1))
    spans = {NodeId(2): range(0, 3)}
    good = _set(_entry(1, 0, 1), _entry(2, 0, 2))
    assert vc.voter_added_with_probed_versions(N, Offset(5), before, good, spans) is None
    bad = _set(_entry(1, 0, 1), _entry(2, 2, 2))
    found = vc.voter_added_with_probed_versions(N, Offset(5), before, bad, spans)
    assert found is not None and found.name == vc.VOTER_ADDED_WITH_PROBED_VERSIONS
    # A voter already in the set (an UpdateRaftVoter changes its range) is not checked.
    updated = _set(_entry(1, 1, 1))
    assert (
        vc.voter_added_with_probed_versions(N, Offset(5), before, updated, {N: range(0, 2)}) is None
    )


def test_a_shutdown_waits_for_its_end_quorum_epoch_or_the_request_timeout() -> None:
    led = eff.EffectLedger(linger=False)
    led.shutdown_asked(N, 100)
    led.end_sent(N, NodeId(2))
    led.end_sent(N, NodeId(3))
    led.end_settled(N, NodeId(2))
    early = led.shutdown_completed(N, 150, 2000)
    assert early is not None and early.name == eff.SHUTDOWN_AWAITS_END_QUORUM_EPOCH
    led.stopped(N)
    led.shutdown_asked(N, 100)
    led.end_sent(N, NodeId(2))
    assert led.shutdown_completed(N, 2100, 2000) is None  # the request timeout passed
    led.stopped(N)
    led.shutdown_asked(N, 100)
    led.end_sent(N, NodeId(2))
    led.end_settled(N, NodeId(2))  # answered, or the send failed
    assert led.shutdown_completed(N, 150, 2000) is None
