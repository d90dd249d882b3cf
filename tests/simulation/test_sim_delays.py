"""The delayed-answer fault (refinement.faults.with_delays): answers held until about their
request's timeout, or past an election or fetch timeout. The unmutated core keeps the timing
contract under it, and a core that lets an answered Fetch's timeout fire anyway is caught by
FetchRetryNotEarly."""

from __future__ import annotations

import pytest

from kraft.core import follower
from kraft.core.messages import FetchResponse, Request
from kraft.errors import ErrorCode
from kraft.ids import NodeId
from refinement import invariants_timing as timing
from refinement.faults import PROFILES, with_delays
from refinement.sim import SimConfig, Simulator, simulate

SEEDS = range(4)


def test_the_delays_variant_holds_answers_and_runs_observers() -> None:
    p = with_delays(PROFILES["crashes"])
    assert p.name == "crashes+delays" and PROFILES[p.name] == p
    assert p.hold_answer > 0 and p.refuse_cut and p.observers >= 2
    r = simulate(SimConfig(seed=0, profile=p))
    assert r.answers_held > 0, r.summary()


@pytest.mark.parametrize("profile", ["mixed+delays", "crashes+delays", "mixed+snapshots+delays"])
def test_the_core_keeps_its_timing_under_delayed_answers(profile: str) -> None:
    for seed in SEEDS:
        r = simulate(SimConfig(seed=seed, profile=PROFILES[profile]))
        assert r.ok, r.summary()


def test_a_kept_request_timeout_after_an_error_answer_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A follower that backs off after an error answer but keeps the answered Fetch's
    request timeout fetches again when that runs out, before the backoff ends, whenever the
    answer came within a retry backoff of the timeout: what the held answers make happen."""
    original = follower.FollowerRole.handle_fetch_response

    def keeps_timeout(
        self: follower.FollowerRole, src: NodeId, resp: FetchResponse, of: Request | None
    ) -> None:
        r = self._r
        kept = r._fetch_in_flight_until
        original(self, src, resp, of)
        if resp.error is not ErrorCode.NONE and r._fetch_send_at is not None:
            r._fetch_in_flight_until = kept

    monkeypatch.setattr(follower.FollowerRole, "handle_fetch_response", keeps_timeout)
    caught = {}
    for seed in SEEDS:
        r = simulate(SimConfig(seed=seed, profile=PROFILES["crashes+delays"]))
        if r.violations:
            caught[seed] = r.violations[0].name
    assert caught, f"escaped seeds {SEEDS}"
    assert set(caught.values()) == {timing.FETCH_RETRY_NOT_EARLY}, caught


def test_the_liveness_phase_holds_no_answer() -> None:
    """Healing ends the held answers as it ends losses and partitions: kept on, a follower
    far behind waited out a request timeout in about one Fetch in seven while it caught up,
    and mixed+snapshots+delays seed 32 (3000 events) failed EventuallyCommitted with the new
    leader's appends still uncommitted at the bound. Answers held before healing still
    arrive late."""
    config = SimConfig(seed=32, max_events=3000, profile=PROFILES["mixed+snapshots+delays"])
    sim = Simulator(config)
    held_after_healing = []
    held_until = sim._held_until

    def recording(requester: NodeId, responder: NodeId, request: Request) -> int:
        if sim._liveness:
            held_after_healing.append((requester, responder, type(request).__name__))
        return held_until(requester, responder, request)

    sim._held_until = recording  # type: ignore[method-assign]
    r = sim.run()
    assert r.answers_held > 0, r.summary()
    assert held_after_healing == []
    assert r.ok, r.summary()
