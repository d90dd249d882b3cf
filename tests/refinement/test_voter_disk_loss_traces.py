"""Trace validation of a voter that loses its disk (KIP-853, issue #15): the simulator's
`shutdowns+reconfig` seed 160 has leader 1 lose its data directory while leading; it
comes back with a new directory id, an observer. To TLC each incarnation is a server of its
own (refinement.traces.incarnations: node 1's second one is server 1001, TraceData's Alias
maps it back); the old one crashes and never restarts while the voter set still names it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kraft.trace_format import TraceEvent, read_trace
from refinement.traces import map_trace, validate_trace
from refinement.traces.conformance import simulate_trace
from refinement.traces.incarnations import INCARNATION_STRIDE
from refinement.traces.validate import trace_config, trace_module

BOOTSTRAP_VOTERS = (1, 2, 3)
NEW_INCARNATION = 1 + INCARNATION_STRIDE


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> list[TraceEvent]:
    path = tmp_path_factory.mktemp("disk-loss") / "trace.ndjson"
    simulate_trace(160, "shutdowns+reconfig", 1500, path)
    return read_trace(path)


def _lose_disk(trace: list[TraceEvent]) -> int:
    return next(i for i, ev in enumerate(trace) if ev.action == "LoseDisk")


def _restart(trace: list[TraceEvent], after: int) -> int:
    return next(i for i, ev in enumerate(trace) if i > after and ev.action == "Restart"
                and ev.node == trace[after].node)  # fmt: skip


def test_the_wiped_voter_is_a_new_server_and_the_old_one_crashes(trace: list[TraceEvent]):
    lost = _lose_disk(trace)
    assert trace[lost].node == 1
    leader = next(ev for ev in reversed(trace[:lost]) if "BecomeLeader" in ev.actions)
    assert leader.node == 1  # the leader, a bootstrap voter, loses its disk
    mapped = map_trace(trace)
    assert mapped.dynamic and mapped.alias == {NEW_INCARNATION: 1}
    assert NEW_INCARNATION in mapped.servers
    ops = [(op["a"], op["n"]) for op in mapped.records[lost]["ops"]]  # type: ignore[union-attr]
    assert ops == [("Crash", 1), ("Crash", NEW_INCARNATION)]
    assert mapped.records[lost - 1]["node"] != NEW_INCARNATION
    assert {
        mapped.records[i]["node"] for i, ev in enumerate(trace) if ev.node == 1 and i >= lost
    } == {NEW_INCARNATION}
    # Two crashes (old and new server) for one LoseDisk; the voters are the bootstrap ones.
    assert "(1001 :> 1)" in trace_module(mapped)
    assert "Voters = {1, 2, 3, 4, 5}" in trace_config(mapped)


@pytest.mark.tlc
def test_a_trace_where_a_voter_loses_its_disk_is_accepted(trace: list[TraceEvent]):
    # Up to a while after the new incarnation restarted and looked for the leader.
    end = _restart(trace, _lose_disk(trace)) + 60
    res = validate_trace(trace[:end], voters=BOOTSTRAP_VOTERS)
    assert res.accepted, res.summary()
    assert res.events == end


@pytest.mark.tlc
@pytest.mark.slow
def test_a_wiped_voter_that_restarts_with_its_old_log_is_rejected(trace: list[TraceEvent]):
    # The new incarnation starts empty: a restart that claims the old leader's log and epoch
    # (what a node that kept its directory would show) is no behaviour of the spec.
    lost = _lose_disk(trace)
    i = _restart(trace, lost)
    before = trace[lost - 1 :: -1]
    old = next(
        ev.state for ev in before if ev.node == 1 and ev.state and ev.state["state"] != "Down"
    )
    assert old is not None and old["endOffset"] > 0
    edited = list(trace[: i + 1])
    state = {**trace[i].state, "endOffset": old["endOffset"], "lastEpoch": old["lastEpoch"]}  # type: ignore[dict-item]
    edited[i] = replace(trace[i], state=state)  # type: ignore[arg-type]
    res = validate_trace(edited, voters=BOOTSTRAP_VOTERS, report=False)
    assert not res.accepted
    assert res.first_unmatched == trace[i].index, res.summary()
