"""The fault schedule is a pure function of the seed (the processes' timing is not)."""

from __future__ import annotations

import pytest

from refinement.chaos.schedule import (
    ALL_KINDS,
    LEADER_LOSS_KINDS,
    LEADER_LOSS_MIN_HOLD_MS,
    FaultKind,
    Target,
    make_schedule,
    parse_kinds,
)


def test_the_same_seed_gives_the_same_schedule() -> None:
    a = [f.describe() for f in make_schedule(7, 40)]
    b = [f.describe() for f in make_schedule(7, 40)]
    assert a == b


def test_different_seeds_give_different_schedules() -> None:
    assert [f.describe() for f in make_schedule(7, 20)] != [
        f.describe() for f in make_schedule(8, 20)
    ]


def test_every_kind_comes_once_per_round() -> None:
    schedule = make_schedule(3, 3 * len(ALL_KINDS))
    for r in range(3):
        round_ = schedule[r * len(ALL_KINDS) : (r + 1) * len(ALL_KINDS)]
        assert sorted(f.kind.value for f in round_) == sorted(k.value for k in ALL_KINDS)
    assert [f.cycle for f in schedule] == list(range(len(schedule)))


def test_draws_stay_in_their_ranges() -> None:
    for f in make_schedule(11, 200, min_hold_ms=400, max_hold_ms=900):
        if f.kind in LEADER_LOSS_KINDS:
            assert f.hold_ms == LEADER_LOSS_MIN_HOLD_MS
        else:
            assert 400 <= f.hold_ms <= 900
        assert 0.05 <= f.loss <= 0.3
        assert 0 <= f.cut <= 1
        assert f.style in ("blackhole", "reset")
        if f.kind is FaultKind.KILL_FOLLOWER:
            assert f.target is Target.FOLLOWER
        if f.kind in (FaultKind.KILL_LEADER, FaultKind.PAUSE_LEADER):
            assert f.target is Target.LEADER


def test_a_subset_of_kinds_is_respected() -> None:
    kinds = (FaultKind.PAUSE_LEADER, FaultKind.KILL_TWO)
    assert {f.kind for f in make_schedule(5, 30, kinds)} == set(kinds)


def test_parse_kinds() -> None:
    assert parse_kinds("all") == ALL_KINDS
    assert parse_kinds("kill-leader, one-way,kill-leader") == (
        FaultKind.KILL_LEADER,
        FaultKind.ONE_WAY,
    )
    with pytest.raises(ValueError, match="unknown fault kind 'nope'"):
        parse_kinds("kill-leader,nope")
    with pytest.raises(ValueError, match="no fault kind"):
        parse_kinds(" , ")


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        make_schedule(1, -1)
    with pytest.raises(ValueError):
        make_schedule(1, 3, ())
    with pytest.raises(ValueError):
        make_schedule(1, 3, min_hold_ms=500, max_hold_ms=100)
