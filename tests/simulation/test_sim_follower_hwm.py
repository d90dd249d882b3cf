"""FollowerHighWatermarkFollowsAnswer (refinement.invariants_general): a Follower that takes
its leader's Fetch answer ends the step with its high watermark at min(the answer's, its log
end), or where it already was if that is higher (Kafka's updateFollowerHighWatermark)."""

from __future__ import annotations

import uuid

import pytest

from kraft.core.effects import Effect, Send
from kraft.core.messages import FetchRequest, FetchResponse
from kraft.core.replica import Replica
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, DirectoryId, Epoch, NodeId, Offset, ReplicaKey
from refinement import invariants_general as gen
from refinement.faults import PROFILES
from refinement.sim import SimConfig, simulate

LEADER = NodeId(2)
ME = NodeId(3)


def _answer(hwm: int, *, error: ErrorCode = ErrorCode.NONE) -> FetchResponse:
    return FetchResponse(
        error, LEADER, Epoch(4), high_watermark=Offset(hwm), log_start_offset=Offset(0)
    )


def _fetch_again() -> list[Effect]:
    request = FetchRequest(
        cluster_id=ClusterId("c"),
        replica=ReplicaKey(ME, DirectoryId(uuid.UUID(int=1))),
        replica_epoch=Epoch(4),
        fetch_offset=Offset(7),
        last_fetched_epoch=Epoch(4),
        log_start_offset=Offset(0),
        max_bytes=1024,
        max_wait_ms=500,
    )
    return [Send(LEADER, request)]


def _check(
    answer: FetchResponse, effects: list[Effect], *, before: int | None, after: int | None
) -> str | None:
    found = gen.follower_high_watermark_follows_answer(
        ME,
        LEADER,
        answer,
        effects,
        was_following=True,
        end_before=Offset(7),
        before=None if before is None else Offset(before),
        state=ReplicaState.FOLLOWER,
        epoch=Epoch(4),
        leader=LEADER,
        end_offset=Offset(7),
        after=None if after is None else Offset(after),
    )
    return None if found is None else found.name


def test_the_high_watermark_taken_is_the_answers_capped_at_the_log_end() -> None:
    assert _check(_answer(5), _fetch_again(), before=None, after=5) is None
    assert _check(_answer(9), _fetch_again(), before=3, after=7) is None  # capped at the end
    assert _check(_answer(0), _fetch_again(), before=None, after=0) is None
    caught = gen.FOLLOWER_HIGH_WATERMARK_FOLLOWS_ANSWER
    assert _check(_answer(0), _fetch_again(), before=None, after=None) == caught
    assert _check(_answer(5), _fetch_again(), before=None, after=4) == caught
    assert _check(_answer(9), _fetch_again(), before=3, after=9) == caught  # past the log end


def test_a_high_watermark_never_falls_and_an_untaken_answer_says_nothing() -> None:
    assert _check(_answer(2), _fetch_again(), before=5, after=5) is None
    assert _check(_answer(2), _fetch_again(), before=5, after=2) is not None
    # Not taken (no Fetch again), an error, or no HWM in the answer: no rule applies.
    assert _check(_answer(5), [], before=None, after=None) is None
    assert _check(_answer(5, error=ErrorCode.NOT_LEADER_OR_FOLLOWER), [], before=1, after=1) is None
    assert _check(_answer(-1), _fetch_again(), before=None, after=None) is None
    # Records that did not grow the log were not appended (stale or corrupt): not taken.
    stale = FetchResponse(
        ErrorCode.NONE,
        LEADER,
        Epoch(4),
        high_watermark=Offset(5),
        log_start_offset=Offset(0),
        records=b"\x00" * 61,
    )
    assert _check(stale, _fetch_again(), before=None, after=None) is None


def test_a_follower_that_keeps_its_high_watermark_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """follower.py: a Follower that never raises its HWM from its leader's answers."""
    real = Replica._raise_hwm

    def deaf(self: Replica, value: Offset) -> bool:
        if self._state is ReplicaState.FOLLOWER:
            return False
        return real(self, value)

    monkeypatch.setattr(Replica, "_raise_hwm", deaf)
    r = simulate(SimConfig(seed=0, profile=PROFILES["mixed"], max_events=600))
    assert gen.FOLLOWER_HIGH_WATERMARK_FOLLOWS_ANSWER in {v.name for v in r.violations}


def test_the_core_takes_its_leaders_high_watermark() -> None:
    r = simulate(SimConfig(seed=1, profile=PROFILES["mixed"], max_events=600))
    assert r.ok, r.summary()
