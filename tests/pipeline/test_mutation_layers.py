"""One mutant through the layers (refinement.mutation.execute), without Spark: the mutated
copy is what the layers run, the expected layer kills a known-bad mutant, and a crash or a
timeout counts as a kill by the layer that saw it."""

from __future__ import annotations

from pathlib import Path

import pytest

from refinement.mutation.execute import LayerSettings, run_mutant
from refinement.mutation.generate import Mutant, generate

CHECKOUT = Path(__file__).resolve().parents[2]
# A small sweep: one seed of one profile.
SIM = LayerSettings(layers=("sim",), sim_profiles=("mixed",), sim_seeds=1, sim_events=600)


def find(
    file: str, function: str, operator: str, original: str, replacement: str, nth: int = 0
) -> Mutant:
    """The nth mutant of `function` in `file` that makes this change (in source order)."""
    found = [
        m
        for m in generate(CHECKOUT / "impl", [file])
        if (m.function, m.operator, m.original, m.replacement)
        == (function, operator, original, replacement)
    ]
    assert len(found) > nth, (file, function, operator, original, replacement)
    return found[nth]


def test_the_unmutated_core_passes_the_sweep():
    result = run_mutant(None, SIM, CHECKOUT)
    assert not result.killed and result.layers_run == ["sim"]


def test_an_eager_high_watermark_is_killed_by_the_simulator():
    # The leader's HWM taken as the largest end offset instead of the majority-th largest.
    m = find("kraft/core/quorum_math.py", "high_watermark_fast", "const", "1", "2", nth=1)
    result = run_mutant(m, SIM, CHECKOUT)
    assert result.killed and result.killed_by == "sim" and result.kill_kind == "failed"
    assert "HighWatermark" in result.detail and result.kill_profile == "mixed"
    assert result.runs_needed == 1 and result.events_needed is not None
    assert "+    return sorted(end_offsets, reverse=True)[majority - 2]" in result.diff
    # The checkout itself is untouched.
    assert "[majority - 1]" in (CHECKOUT / "impl" / m.file).read_text()


def test_an_exception_out_of_the_core_is_a_crash_kill():
    # `not undecided or ...` without its first operand indexes an empty list.
    m = find(
        "kraft/core/commits.py",
        "CommitRule.accepted",
        "bool-drop",
        "not undecided or undecided[-1] < entry",
        "undecided[-1] < entry",
    )
    result = run_mutant(m, SIM, CHECKOUT)
    assert result.killed_by == "sim" and result.kill_kind == "crash"
    assert result.detail.startswith("ReplicaRaised") and "IndexError" in result.detail


def test_a_layer_past_its_timeout_kills():
    result = run_mutant(None, SIM.with_timeouts({"sim": 0.2}), CHECKOUT)
    assert result.killed_by == "sim" and result.kill_kind == "timeout"


@pytest.mark.slow
@pytest.mark.tlc
def test_tlc_accepts_the_core_and_rejects_an_eager_high_watermark():
    tlc = LayerSettings(layers=("tlc",), tlc_profiles=("mixed",), tlc_traces=1, tlc_events=200)
    assert not run_mutant(None, tlc, CHECKOUT).killed
    m = find("kraft/core/quorum_math.py", "high_watermark_fast", "const", "1", "2", nth=1)
    result = run_mutant(m, tlc, CHECKOUT)
    assert result.killed_by == "tlc" and result.kill_kind == "failed"
    assert result.detail.startswith("REJECTED by TLC at event") and result.events_needed


@pytest.mark.slow
@pytest.mark.tlc
def test_tlc_sees_past_a_checker_violation_to_the_answer_it_rejects():
    # A follower that never fetched grants a pre-vote to a shorter log (a31665170500). In mixed
    # seed 2 the grant is event 831; its answer, received at event 834, is what TLC rejects
    # (the grant leaves the follower's state as it was). With the simulator's checkers on,
    # GrantedVoteLogUpToDate ended the run at the grant and TLC accepted the cut trace.
    m = find(
        "kraft/core/election.py",
        "ElectionRole._can_grant",
        "bool-drop",
        "req.pre_vote and (not r._has_fetched) and up_to_date",
        "req.pre_vote and (not r._has_fetched)",
    )
    tlc = LayerSettings(
        layers=("tlc",), tlc_profiles=("mixed",), tlc_traces=1, tlc_events=900, sim_first_seed=2
    )
    result = run_mutant(m, tlc, CHECKOUT)
    assert result.killed_by == "tlc" and result.kill_kind == "failed"
    assert result.detail.startswith("REJECTED by TLC at event 834")


@pytest.mark.slow
def test_the_hypothesis_machine_kills_an_eager_high_watermark():
    hyp = LayerSettings(layers=("hypothesis",), hypothesis_examples=100)
    m = find("kraft/core/quorum_math.py", "high_watermark_fast", "const", "1", "2", nth=1)
    result = run_mutant(m, hyp, CHECKOUT)
    assert result.killed_by == "hypothesis" and result.kill_kind == "failed"
    assert "MajorityReachedHighWatermark" in result.detail and result.runs_needed >= 1
