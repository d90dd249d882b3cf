"""The adversary of refinement.sim_adversary: under mixed+adversary the unmutated core rejects
every forged message with Kafka's error and moves nothing, over a deterministic sweep in which
every kind of forgery comes up; each checker of refinement.invariants_input is named by the
run of a core weakened the way it must catch; and no other profile draws a forgery."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kraft.core import bounds, dispatch
from kraft.core.election import ElectionRole
from kraft.core.follower import FollowerRole
from kraft.core.messages import FetchRequest, FetchSnapshotResponse, Message, VoteRequest
from kraft.core.replica import Replica
from kraft.core.vocabulary import ReplicaState
from refinement import invariants_input as inp
from refinement import sim_adversary as adv
from refinement.faults import ADVERSARY_PROFILES, PROFILES
from refinement.invariants_input import Forgery
from refinement.sim import SimConfig, simulate

PROFILE = PROFILES["mixed+adversary"]
SEEDS = range(6)


def _names(seeds: range = SEEDS) -> Iterator[tuple[int, list[str]]]:
    for seed in seeds:
        r = simulate(SimConfig(seed=seed, profile=PROFILE))
        yield seed, [v.name for v in r.violations]


def test_only_the_adversary_profiles_forge() -> None:
    assert ADVERSARY_PROFILES == ("mixed+adversary", "mixed+snapshots+adversary")
    for name, p in PROFILES.items():
        if name not in ADVERSARY_PROFILES:
            assert p.adversary_rate == 0 and p.corrupt_fetch == 0, name


def test_the_core_rejects_every_forgery(monkeypatch: pytest.MonkeyPatch) -> None:
    kinds: set[str] = set()
    inject = adv.SimAdversary._inject

    def counted(self: adv.SimAdversary, victim: Any, f: Forgery) -> None:
        kinds.add(f.kind)
        inject(self, victim, f)

    monkeypatch.setattr(adv.SimAdversary, "_inject", counted)
    corrupted = 0
    for seed in SEEDS:
        r = simulate(SimConfig(seed=seed, profile=PROFILE))
        assert r.ok, r.summary()
        assert r.forged > 0
        corrupted += r.fetches_corrupted
    assert corrupted > 0
    # Every entry of the catalogue was injected (edge forgeries name no field).
    bounds = {k for k in kinds if "=" in k or "edge" in k}
    assert len(bounds) == sum(1 for name, _ in adv.CATALOGUE if name[-1] in "<>" or "@" in name)
    semantic = {name for name, _ in adv._SEMANTIC}
    made = {k for k in kinds if "=" not in k and "edge" not in k}
    assert len(made) == len(semantic)


def _caught(expected: str, seeds: range = SEEDS) -> None:
    """Some seed catches the weakened core, by the checker named (a weakness may also break
    a safety invariant first on another seed)."""
    caught = {seed: names for seed, names in _names(seeds) if names}
    assert caught, f"no seed of {PROFILE.name} caught it"
    assert [expected] in caught.values(), caught


def test_a_bounds_check_dropped_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A core that forgets to bound a Fetch's fetch offset."""
    real = bounds.out_of_bounds

    def weak(msg: Message) -> str | None:
        if isinstance(msg, FetchRequest) and msg.fetch_offset > 0:
            return None
        return real(msg)

    monkeypatch.setattr(dispatch, "out_of_bounds", weak)
    _caught(inp.OUT_OF_BOUNDS_REFUSED)


def test_a_bound_too_strict_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A core that refuses an empty snapshot chunk's size 0, inside the bounds."""
    real = bounds.out_of_bounds

    def strict(msg: Message) -> str | None:
        if isinstance(msg, FetchSnapshotResponse) and msg.size == 0:
            return "size 0"
        return real(msg)

    monkeypatch.setattr(dispatch, "out_of_bounds", strict)
    _caught(inp.OUT_OF_BOUNDS_REFUSED)


def test_a_cluster_id_unchecked_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Replica, "_request_error", lambda _self, _cluster: None)
    _caught(inp.REJECTION_ERROR_CODE)


def test_an_answer_from_a_non_leader_taken_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower that takes a Fetch answer from whoever sends it, as if from its leader."""
    real = FollowerRole.handle_fetch_response

    def trusting(self: FollowerRole, src: Any, resp: Any, in_reply_to: Any) -> None:
        leader = self._r._leader_id
        real(self, leader if leader is not None else src, resp, in_reply_to)

    monkeypatch.setattr(FollowerRole, "handle_fetch_response", trusting)
    _caught(inp.REJECTED_MESSAGE_CHANGES_NOTHING, range(20))


def test_a_prospective_vote_not_recorded_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """election.py: a Prospective grants its vote without persisting it (the transition that
    records the vote dropped)."""
    real: Callable[..., None] = Replica._transition

    def forgetful(self: Replica, new: ReplicaState, epoch: Any, **kw: Any) -> None:
        if new is ReplicaState.PROSPECTIVE and self._state is new and kw.get("voted"):
            return
        real(self, new, epoch, **kw)

    monkeypatch.setattr(Replica, "_transition", forgetful)
    _caught(inp.GRANTED_VOTE_IS_DURABLE)


def test_a_corrupt_batch_appended_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower that appends fetched batches without checking their CRC: the simulated log
    refuses the corrupted batch (EffectRejected, as Kafka's log validates it too)."""
    from kraft import records
    from kraft.core import follower

    def unchecked(buf: Any, pos: int = 0, **_kw: Any) -> Any:
        return records.iter_batches(buf, pos, verify=False)

    monkeypatch.setattr(follower, "iter_batches", unchecked)
    _caught("EffectRejected")


def test_a_pre_vote_recorded_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """election.py: a replica that records the vote a pre-vote asked about (KIP-996: a pre-vote
    binds nothing)."""
    real = ElectionRole.handle_vote_request

    def binding(self: ElectionRole, src: Any, req: VoteRequest, in_reply_to: Any) -> None:
        r = self._r
        real(self, src, req, in_reply_to)
        if req.pre_vote and r._state is ReplicaState.UNATTACHED and self._can_grant(req):
            r._transition(ReplicaState.VOTED, r._epoch, voted=req.candidate)

    monkeypatch.setattr(ElectionRole, "handle_vote_request", binding)
    _caught(inp.VOTE_RECORDED_ONLY_WHEN_GRANTED)
