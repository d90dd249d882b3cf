"""The short chaos run (about a minute): a real 3-voter cluster of `kraft start` processes
under one round of every fault kind, with three writers; no acknowledged value may be lost,
the committed logs must be identical, and the nodes' merged traces must be accepted by TLC
up to the restart that lost an un-fsynced tail (KRaft.tla has no such step; see
refinement/chaos/runner.py). The long run is `make chaos CYCLES=100`."""

from __future__ import annotations

from pathlib import Path

import pytest

from refinement.chaos.report import ChaosConfig
from refinement.chaos.runner import run_chaos
from refinement.chaos.schedule import ALL_KINDS, FaultKind, make_schedule

# Appends are idempotent (producer id and sequence): a resend after a lost connection is
# answered with the first copy's offsets, so a value stored twice fails the run.
ALLOW_DUPLICATES = False

CYCLES = len(ALL_KINDS)


def _seed() -> int:
    """The first seed whose round ends with crash-unflushed, so that TLC validates the trace
    of every other fault (deterministic: the schedule is a pure function of the seed)."""
    return next(
        s for s in range(1, 1000) if make_schedule(s, CYCLES)[-1].kind is FaultKind.CRASH_UNFLUSHED
    )


@pytest.mark.tlc
def test_a_short_chaos_run_loses_nothing_acknowledged(tmp_path: Path) -> None:
    config = ChaosConfig(
        seed=_seed(),
        cycles=CYCLES,
        min_hold_ms=600,
        max_hold_ms=1200,
        writer_pause_s=0.1,
        allow_duplicates=ALLOW_DUPLICATES,
        root=tmp_path / "chaos",
        keep=True,
        progress=True,
    )
    report = run_chaos(config)
    summary = report.summary()
    print(summary)
    v = report.verdict
    assert v is not None, summary
    assert {c.fault.kind for c in report.cycles} == set(ALL_KINDS), summary
    assert v.acknowledged > 0, summary
    assert v.lost == 0, summary
    assert v.identical, summary
    assert ALLOW_DUPLICATES or v.duplicated == 0, summary
    assert report.converged, summary
    assert not report.problems, summary
    assert report.exit_codes == {1: 0, 2: 0, 3: 0}, summary
    assert report.tlc_ok is True, summary
    assert report.passed, summary
