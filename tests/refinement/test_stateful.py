"""Hypothesis explores schedules of the cluster (message delivery, loss, duplication,
reordering, time, crashes, restarts, partitions, client appends, shutdowns); every invariant
must hold after every rule. Mutants show the search is not vacuous."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test
from hypothesis_profiles import mutant_search

from kraft.core.effects import FlushLog
from kraft.core.election import ElectionRole
from refinement import invariants as inv
from refinement import invariants_input as inp
from refinement.sim import SimConfig, core_replica_factory
from refinement.stateful import ClusterHarness, KraftMachine, check, replay, violation_names

FAST = settings(max_examples=100, stateful_step_count=40)


def test_machine_finds_no_violation():
    run_state_machine_as_test(KraftMachine, settings=FAST)


# --------------------------------------------------------------------------- mutants


class _NoFlush:
    """A driver that never flushes: it drops every FlushLog the core emits."""

    def __init__(self, inner):
        self.inner = inner

    def start(self):
        return [e for e in self.inner.start() if not isinstance(e, FlushLog)]

    def step(self, event):
        return [e for e in self.inner.step(event) if not isinstance(e, FlushLog)]

    def next_deadline_ms(self):
        return self.inner.next_deadline_ms()

    def view(self):
        return self.inner.view()


class NoFlushMachine(KraftMachine):
    replica_factory = staticmethod(lambda setup: _NoFlush(core_replica_factory(setup)))


_CAN_GRANT = ElectionRole._can_grant


def _double_vote(self, req):
    # Mutant: a replica that voted in this epoch grants every other candidate as well
    # (pre-votes are answered as the real rules say: they bind nothing anyway).
    if not req.pre_vote and self._r._state.value in ("Unattached", "Voted"):
        return True
    return _CAN_GRANT(self, req)


# Up to 1000 examples. The search is derandomized, so each mutant falls at the same example
# every run, but which one depends on the machine's rules and the core: after the snapshot
# work the double vote was no longer found within 300 (it had fallen at the 94th). A budget
# well above what is needed keeps a change elsewhere from silently losing the mutant; the
# search stops at the first failure, so a found mutant costs only what it takes.
MAX_EXAMPLES = 1000


def _failure(machine: type[KraftMachine], *, shrink: bool = True) -> AssertionError:
    search = mutant_search(max_examples=MAX_EXAMPLES, shrink=shrink, steps=40)
    with pytest.raises(AssertionError) as info:
        run_state_machine_as_test(machine, settings=search)
    return info.value


def test_driver_skipping_flush_breaks_majority_reached_high_watermark():
    found, report = _search_in_child("no-flush")
    assert inv.MAJORITY_REACHED_HIGH_WATERMARK in found, report


def test_second_vote_in_an_epoch_is_caught():
    # The vote granted to a second candidate is not the one in the voter's quorum-state
    # (GrantedVoteIsDurable), found before the two leaders it allows (ElectionSafety); or it
    # went to a candidate with a shorter log (GrantedVoteLogUpToDate: the mutant grants
    # without comparing logs too).
    found, report = _search_in_child("double-vote")
    expected = {inv.ELECTION_SAFETY, inp.GRANTED_VOTE_IS_DURABLE, inp.GRANTED_VOTE_LOG_UP_TO_DATE}
    assert expected & set(found), report


def _search(mutant: str) -> list[str]:
    """Run one mutant's search here; the names of the invariants it broke ([] if none)."""
    if mutant == "no-flush":
        machine: type[KraftMachine] = NoFlushMachine
        shrink = True
    else:
        ElectionRole._can_grant = _double_vote  # type: ignore[method-assign]
        # Unshrunk: shrinking this one takes long; the no-flush mutant shows shrinking.
        machine, shrink = KraftMachine, False
    try:
        return violation_names(_failure(machine, shrink=shrink))
    except pytest.fail.Exception:
        return []


def _search_in_child(mutant: str) -> tuple[list[str], str]:
    """A derandomized search still walks Hypothesis's rule tables in an order that depends on
    the interpreter's hash seed and memory layout (which other test modules were imported).
    So each mutant search runs in a fresh interpreter with a fixed hash seed that imports only
    this module: the same examples, the same verdict, every run."""
    support = str(Path(__file__).resolve().parents[1] / "support")
    path = os.pathsep.join(p for p in (support, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, __file__, mutant],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    report = f"exit {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    if done.returncode != 0 or not lines:
        return [], report
    return json.loads(lines[-1]), report


if __name__ == "__main__":
    print(json.dumps(_search(sys.argv[1])))


# --------------------------------------------------------------------------- the harness


def test_failing_schedule_trace_replays_to_the_same_violation():
    """A schedule found for the no-flush mutant is an ndjson trace; replaying its rules
    reproduces the violation."""
    factory = NoFlushMachine.replica_factory
    h = ClusterHarness(SimConfig(seed=1), replica_factory=factory)
    h.advance(2500)
    h.run_network(1500)
    h.client_append(1)
    h.client_append(2)
    h.client_append(3)
    h.run_network(300)
    found = check(h, h.cluster())
    assert [v.name for v in found] == [inv.MAJORITY_REACHED_HIGH_WATERMARK]
    trace = io.StringIO(h.trace_text())
    h2, again = replay(trace, SimConfig(seed=1), replica_factory=factory)
    assert [v.name for v in again] == [inv.MAJORITY_REACHED_HIGH_WATERMARK]
    # Replay stops at the first rule after which an invariant fails.
    assert h2.rules == h.rules[: len(h2.rules)] and h2.rules[-1]["rule"] == "run_network"
    assert again[0].detail == found[0].detail


def test_harness_rules_control_the_network():
    """Messages wait in flight until a rule delivers, drops or duplicates them."""
    h = ClusterHarness(SimConfig(seed=0))
    h.advance(2500)
    votes = [m for m in h.inflight if m.kind == "VoteRequest"]
    assert votes and len(votes) == len(h.inflight)
    n = len(h.inflight)
    h.duplicate(0)
    assert len(h.inflight) == n + 1
    h.drop(0)
    h.drop(0)
    assert len(h.inflight) == n - 1
    h.partition([1])
    h.run_network(3000)
    states = {i: s.state for i, s in h.cluster().nodes.items()}
    assert states[1] is not None and h.violation is None
    h.heal()
    h.crash(2)
    assert h.cluster().nodes[2].state is None  # type: ignore[index]
    h.restart(2)
    assert h.cluster().nodes[2].state is not None  # type: ignore[index]
