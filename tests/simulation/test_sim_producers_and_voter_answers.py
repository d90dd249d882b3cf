"""The checkers of idempotent producers (refinement.invariants_producers) and of the answers to
voter changes (refinement.invariants_voter_changes): each flags the state it names, and the
simulator's `+reconfig` sweep catches a core that breaks the rule (patched in process) with
the checker named for it, while the unmutated core passes the same seeds."""

from __future__ import annotations

import uuid

import pytest

from kraft.core import reconfig
from kraft.core.effects import AppendCommitted, AppendLost
from kraft.core.producers import Check, ProducerBatch, ProducerTable, Verdict
from kraft.core.voter_set import VoterSet
from kraft.errors import ErrorCode
from kraft.ids import DirectoryId, Epoch, NodeId, Offset, ProducerId, ReplicaKey
from refinement import invariants_producers as pinv
from refinement import invariants_voter_changes as vc
from refinement.faults import PROFILES
from refinement.sim import SimConfig, simulate

P = ProducerId(1000)
N = NodeId(1)


def batch(seq: int, count: int, first: int) -> ProducerBatch:
    return ProducerBatch(P, seq, Offset(first), Offset(first + count - 1), Epoch(1))


def key(i: int) -> ReplicaKey:
    return ReplicaKey(NodeId(i), DirectoryId(uuid.UUID(int=i)))


# --------------------------------------------------------------------------- the checkers


def test_producer_sequences_in_order_flags_a_repeat_a_gap_and_a_late_start() -> None:
    ok = [batch(0, 2, 0), batch(2, 1, 5), batch(3, 3, 9)]
    assert pinv.producer_sequences_in_order(N, ok, Offset(0)) is None
    for bad, start in (
        ([batch(0, 2, 0), batch(0, 2, 4)], 0),  # appended twice
        ([batch(0, 2, 0), batch(3, 1, 4)], 0),  # a gap
        ([batch(1, 1, 0)], 0),  # not from 0 in a log that starts at 0
    ):
        v = pinv.producer_sequences_in_order(N, bad, Offset(start))
        assert v is not None and v.name == pinv.PRODUCER_SEQUENCES_IN_ORDER
    # A log that starts later may begin anywhere in the producer's sequence.
    assert pinv.producer_sequences_in_order(N, [batch(7, 1, 20)], Offset(10)) is None


def test_duplicate_answered_with_original_flags_other_offsets_or_a_second_copy() -> None:
    held = batch(4, 2, 10)
    good = pinv.duplicate_answered_with_original(
        N, P, 4, first=Offset(10), last=Offset(11), held=held, earlier=(Offset(10), Offset(11))
    )
    assert good is None
    for first, last, h, earlier in (
        (Offset(12), Offset(13), None, None),  # no idempotent batch at those offsets
        (Offset(10), Offset(11), batch(6, 2, 10), None),  # another sequence there
        (Offset(10), Offset(11), held, (Offset(2), Offset(3))),  # acknowledged twice
    ):
        v = pinv.duplicate_answered_with_original(
            N, P, 4, first=first, last=last, held=h, earlier=earlier
        )
        assert v is not None and v.name == pinv.DUPLICATE_ANSWERED_WITH_ORIGINAL


def test_producer_next_sequence_accepted_flags_refusals_only() -> None:
    for error in (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
        v = pinv.producer_next_sequence_accepted(N, P, 3, error)
        assert v is not None and v.name == pinv.PRODUCER_NEXT_SEQUENCE_ACCEPTED
    assert pinv.producer_next_sequence_accepted(N, P, 3, ErrorCode.NONE) is None


def test_voter_change_answered_reads_the_answer_against_the_log() -> None:
    a, b, c, d = key(1), key(2), key(3), key(4)
    history = ((Offset(-1), VoterSet((a, b, c))), (Offset(7), VoterSet((a, b, c, d))))

    def check(
        error: ErrorCode, hwm: int, add: bool = True, accepted: bool = False, ack: bool = True
    ) -> str | None:
        v = vc.voter_change_answered(
            N,
            d if add else c,
            add,
            error,
            history=history,
            hwm=Offset(hwm),
            accepted=accepted,
            ack_when_committed=ack,
        )
        return None if v is None else v.name

    assert check(ErrorCode.NONE, 8) is None  # the record adding 4 is committed
    assert check(ErrorCode.NONE, 7) == vc.VOTER_CHANGE_ANSWERED  # not yet
    assert check(ErrorCode.NONE, 7, ack=False) is None  # appended
    assert check(ErrorCode.NONE, 8, ack=False) == vc.VOTER_CHANGE_ANSWERED
    assert check(ErrorCode.REQUEST_TIMED_OUT, 8, accepted=True) == vc.VOTER_CHANGE_ANSWERED
    assert check(ErrorCode.REQUEST_TIMED_OUT, 7, accepted=True) is None
    assert check(ErrorCode.REQUEST_TIMED_OUT, 8, accepted=False) is None
    assert check(ErrorCode.DUPLICATE_VOTER, 8) is None  # 4 is a voter
    assert check(ErrorCode.VOTER_NOT_FOUND, 8, add=False) == vc.VOTER_CHANGE_ANSWERED


# --------------------------------------------------------------------------- the sweep

SEEDS = range(3)
PROFILE = PROFILES["mixed+reconfig"]


def _violations() -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for seed in SEEDS:
        r = simulate(SimConfig(seed=seed, profile=PROFILE))
        if r.violations:
            out[seed] = [v.name for v in r.violations]
    return out


def test_the_unmutated_core_passes_the_seeds() -> None:
    assert PROFILE.producers > 0 and PROFILE.dynamic
    assert _violations() == {}


def test_a_table_that_never_recognises_a_resend_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ProducerTable, "check", lambda self, p, s, n: Check(Verdict.NEW))
    caught = _violations()
    assert caught, "appending every resend again escaped the sweep"
    expected = {pinv.DUPLICATE_ANSWERED_WITH_ORIGINAL, pinv.PRODUCER_SEQUENCES_IN_ORDER}
    assert all(set(names) <= expected for names in caught.values()), caught


def test_a_committed_change_never_answered_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    original = reconfig.VoterChanges._decided

    def forget_commits(self: reconfig.VoterChanges, outcomes: list[object]) -> None:
        kept = [o for o in outcomes if not isinstance(o, AppendCommitted)]
        assert all(isinstance(o, AppendLost) for o in kept)
        original(self, kept)  # type: ignore[arg-type]

    monkeypatch.setattr(reconfig.VoterChanges, "_decided", forget_commits)
    caught = _violations()
    assert caught, "a voter change committed and never answered escaped the sweep"
    expected = {vc.VOTER_CHANGE_ANSWERED, vc.VOTER_CHANGE_EVENTUALLY_ACKNOWLEDGED}
    assert all(set(names) <= expected for names in caught.values()), caught


def test_a_leader_that_never_finds_a_replica_caught_up_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reconfig.VoterChanges, "_caught_up", lambda self, voter: False)
    caught = _violations()
    assert caught, "a leader that adds no voter escaped the sweep"
    assert all(names == [vc.VOTER_CHANGE_EVENTUALLY_ACKNOWLEDGED] for names in caught.values()), (
        caught
    )
