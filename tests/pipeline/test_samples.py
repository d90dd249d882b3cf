"""Which trace prefixes a campaign sends to TLC (samples.choose_samples), and the prefix
files themselves. A prefix of a behaviour is a behaviour: validating a trace up to the line
where a coverage class first occurs shows that class in a behaviour the spec allows."""

from __future__ import annotations

import random

from kraft.trace_format import read_trace
from refinement.pipeline.samples import Earmark, choose_samples
from refinement.pipeline.seedrun import (
    KIND_SIM,
    KIND_SPEC,
    NOOP_EVENTS,
    SPEC_ACTIONS,
    RunSpec,
    TraceDigest,
    Unit,
    simulate_into,
    write_trace,
)

A, B, C = ("mixed", 1), ("mixed", 2), ("mixed", 3)
_KIND = {
    **dict.fromkeys(("Start", "Stop", "Shutdown"), KIND_SIM),
    **dict.fromkeys(SPEC_ACTIONS, KIND_SPEC),
}


def test_each_class_goes_to_the_run_where_it_occurs_earliest():
    # Both runs are needed (a and y only in A, b only in B); x occurs in both, earlier in B.
    sites = {A: {"a": 0, "x": 50, "y": 7}, B: {"b": 3, "x": 5}}
    plan = choose_samples(sites, 8)
    assert plan.earmarks == (
        # prefix = the last first-occurrence index among the run's classes, plus one line
        Earmark("mixed", 1, ("a", "y"), 8),
        Earmark("mixed", 2, ("b", "x"), 6),
    )
    assert plan.left_out == ()


def test_a_run_is_added_when_it_reaches_a_late_class_much_sooner():
    # A alone holds everything, but only reaches `late` after 9000 lines; B reaches it at 10.
    sites = {A: {"a": 0, "b": 1, "late": 9000}, B: {"late": 10}}
    assert choose_samples(sites, 2, run_cost=300).earmarks == (
        Earmark("mixed", 1, ("a", "b"), 2),
        Earmark("mixed", 2, ("late",), 11),
    )
    # With one run allowed, A is validated up to `late`.
    assert choose_samples(sites, 1).earmarks == (Earmark("mixed", 1, ("a", "b", "late"), 9001),)
    # A second TLC run is not worth a saving smaller than its cost.
    near = {A: {"a": 0, "late": 120}, B: {"late": 10}}
    assert choose_samples(near, 2, run_cost=300).earmarks == (
        Earmark("mixed", 1, ("a", "late"), 121),
    )


def test_ties_are_broken_by_profile_then_seed_whatever_the_input_order():
    same = {"a": 4, "b": 9}
    sites = {("mixed", 7): same, ("lossy", 7): same, ("lossy", 2): same, ("mixed", 1): same}
    expected = (Earmark("lossy", 2, ("a", "b"), 10),)
    items = list(sites.items())
    for shuffle in range(5):
        random.Random(shuffle).shuffle(items)
        assert choose_samples(dict(items), 8).earmarks == expected


def test_classes_beyond_the_run_limit_are_left_out_and_named():
    sites = {A: {"a": 0, "b": 1, "c": 2}, B: {"d": 3, "e": 4}, C: {"f": 5}}
    plan = choose_samples(sites, 2)
    # The runs holding the most classes are taken first.
    assert [(m.seed, m.classes) for m in plan.earmarks] == [(1, ("a", "b", "c")), (2, ("d", "e"))]
    assert plan.left_out == ("f",)
    assert choose_samples(sites, 0).left_out == ("a", "b", "c", "d", "e", "f")


def test_the_prefix_file_is_the_first_lines_of_the_full_trace(tmp_path):
    unit, spec = Unit("mixed", 3), RunSpec(events=400, keep_events_every=0)
    full, prefix = tmp_path / "full.ndjson", tmp_path / "prefix.ndjson"
    write_trace(unit, spec, str(full))
    lines = full.read_text().splitlines(keepends=True)
    for k in (1, 57, len(lines), len(lines) + 10):
        write_trace(unit, spec, str(prefix), lines=k)
        assert prefix.read_text() == "".join(lines[:k])


def test_first_occurrence_indices_are_trace_line_indices(tmp_path):
    # The digest's first index of a class is the line of the written trace that first shows
    # it, so the prefix up to that line holds the class.
    unit, spec = Unit("mixed", 5), RunSpec(events=600, keep_events_every=0)
    digest = TraceDigest(keep_events=False)
    simulate_into(spec.config(unit), spec.factory(), digest)
    path = tmp_path / "t.ndjson"
    write_trace(unit, spec, str(path))
    events = read_trace(path)
    assert digest.lines == len(events)
    assert [e.index for e in events] == list(range(len(events)))

    def shows(name: str, i: int) -> bool:
        e = events[i]
        # A line without actions counts under its own name, unless it is a no-op event.
        return name in e.actions or (not e.actions and e.action == name and name not in NOOP_EVENTS)

    checked = 0
    for (kind, name), i in digest.first.items():
        if kind != "noop":
            assert shows(name, i), (name, i)
            assert not any(shows(name, j) for j in range(i)), name
            checked += 1
    assert checked >= 10
    for (_state, action), i in digest.pair_first.items():
        assert shows(action, i)
        assert i >= digest.first[(_KIND[action], action)]
