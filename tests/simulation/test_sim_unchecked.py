"""A run with the checkers off (SimConfig.check_invariants=False, as the mutation tlc layer
simulates) is the same run as with them on: no checker fires, so none cuts it short. A
crash's check once ran unguarded, against commit bookkeeping that only checked runs keep."""

from __future__ import annotations

import io

from refinement.faults import PROFILES
from refinement.sim import SimConfig, simulate


def _run(profile: str, seed: int, events: int, check: bool) -> tuple[list[str], str]:
    config = SimConfig(
        seed=seed, max_events=events, profile=PROFILES[profile], check_invariants=check
    )
    out = io.StringIO()
    result = simulate(config, trace=out)
    return [v.name for v in result.violations], out.getvalue()


def test_a_crash_in_an_unchecked_snapshot_run_raises_no_violation() -> None:
    # mixed+snapshots seed 0: node 1 crashes at event 229 holding a snapshot.
    unchecked, trace = _run("mixed+snapshots", 0, 400, check=False)
    assert unchecked == []
    assert '"Violation"' not in trace
    checked, checked_trace = _run("mixed+snapshots", 0, 400, check=True)
    assert checked == [] and checked_trace == trace
