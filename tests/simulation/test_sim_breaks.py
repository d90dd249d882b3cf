"""The simulator can break connections as a real node sees them (FaultProfile.notice_breaks:
a request to a node that is down fails with SendFailed(broken=True), as a refused connection
does), so a follower of a crashed leader stands early (kraft.core.follower) under the
simulator's invariants, and profiles without it are untouched."""

from __future__ import annotations

import io
import json
from dataclasses import replace

from refinement import sim
from refinement.faults import CRASHES
from refinement.sim_config import SimConfig

SEEDS = range(12)
FETCH_TIMEOUT_MS = 2000


def _trace(seed: int, notice: bool) -> tuple[list[dict[str, object]], int]:
    buf = io.StringIO()
    profile = replace(CRASHES, notice_breaks=notice)
    result = sim.simulate(SimConfig(seed=seed, profile=profile, max_events=1500), trace=buf)
    return [json.loads(line) for line in buf.getvalue().splitlines()], len(result.violations)


def _early_stands(lines: list[dict[str, object]]) -> int:
    """Followers that stood (ElectionTimeout) sooner than the fetch timeout after the last
    answer without error they handled from their leader (an error answer, such as a restarted
    leader's NOT_LEADER_OR_FOLLOWER, does not reset the fetch timer; besides noticed breaks,
    an EndQuorumEpoch makes a few)."""
    answered_at: dict[object, int] = {}
    early = 0
    for line in lines:
        node, state, t = line["node"], line["state"], line["time"]
        if not isinstance(state, dict) or not isinstance(t, int):
            continue  # a simulator line (a fault, a phase)
        actions = line["actions"]
        assert isinstance(actions, list)
        stood = "ElectionTimeout" in actions and node in answered_at
        if stood and t - answered_at[node] < FETCH_TIMEOUT_MS:
            early += 1
        if state.get("state") != "Follower":
            answered_at.pop(node, None)
        elif "HandleFetchResponse" in actions:
            msg = line.get("message")
            if isinstance(msg, dict) and msg.get("error") == 0:
                answered_at[node] = t
    return early


def test_followers_notice_a_crashed_leader_only_when_breaks_are_noticed() -> None:
    with_breaks = [_trace(seed, True) for seed in SEEDS]
    without = [_trace(seed, False) for seed in SEEDS]
    assert all(violations == 0 for _, violations in with_breaks + without)
    noticed = sum(_early_stands(lines) for lines, _ in with_breaks)
    assert noticed > 2 * sum(_early_stands(lines) for lines, _ in without)
