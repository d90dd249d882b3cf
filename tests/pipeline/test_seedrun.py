"""One campaign unit, without Spark: what the trace digest derives from a simulator run."""

from __future__ import annotations

import pyarrow as pa

from refinement.faults import PROFILES
from refinement.pipeline import seedrun
from refinement.pipeline.schemas import seeds_schema
from refinement.pipeline.seedrun import RunSpec, TraceDigest, Unit, percentile, run_unit
from refinement.sim import SimConfig, simulate

COLUMNS = [f.name for f in seeds_schema().fields]


def col(row, name):
    return row[COLUMNS.index(name)]


def test_nearest_rank_percentile():
    values = list(range(1, 101))
    assert percentile(values, 50) == 50
    assert percentile(values, 99) == 99
    assert percentile([7], 99) == 7
    assert percentile([], 50) is None


def test_commit_latencies_follow_the_simulators_acknowledgements():
    # One latency per acknowledged append (the core's AppendCommitted), as the simulator
    # measured it from the append's acceptance.
    for profile, seed in (("none", 1), ("crashes", 2), ("partitions", 3)):
        row, _ = run_unit(Unit(profile, seed), RunSpec(events=1500, keep_events_every=0))
        assert col(row, "ok"), col(row, "violations")
        assert col(row, "commit_latency_count") == col(row, "commits") > 0
        lat = col(row, "commit_latency_ms")
        assert lat == sorted(lat) and lat[0] >= 0
        assert col(row, "commit_latency_p50_ms") <= col(row, "commit_latency_p99_ms")
        result = simulate(SimConfig(seed=seed, max_events=1500, profile=PROFILES[profile]))
        assert lat == sorted(result.commit_latency_ms)


def test_row_matches_the_seeds_schema_and_the_simulation():
    unit = Unit("mixed", 4)
    row, blob = run_unit(unit, RunSpec(events=800, keep_events_every=1))
    assert len(row) == len(COLUMNS)
    result = simulate(SimConfig(seed=4, max_events=800, profile=PROFILES["mixed"]))
    assert col(row, "events") == result.events
    assert col(row, "elections") == result.elections
    assert col(row, "replay_command") == result.replay_command
    first = col(row, "time_to_first_leader_ms")
    assert first is not None and first == col(row, "election_ms")[0]
    assert blob is not None
    table = pa.ipc.open_stream(pa.py_buffer(blob)).read_all()
    assert table.num_rows == col(row, "trace_events")
    assert table.schema == seedrun.events_arrow_schema()
    assert set(table.column("seed").to_pylist()) == {4}


def test_coverage_counts_actions_under_the_state_before_the_step():
    digest = TraceDigest(keep_events=False)
    lines = [
        '{"action":"Start","actions":["Start"],"index":0,"message":null,"node":1,'
        '"state":{"endOffset":0,"epoch":0,"hwm":null,"lastEpoch":0,"leader":null,'
        '"logStartOffset":0,"state":"Unattached","votedFor":null},"time":0}',
        '{"action":"ElectionTimeout","actions":["ElectionTimeout"],"index":1,"message":null,'
        '"node":1,"state":{"endOffset":0,"epoch":1,"hwm":null,"lastEpoch":0,"leader":null,'
        '"logStartOffset":0,"state":"Candidate","votedFor":1},"time":1000}',
        '{"action":"Tick","actions":[],"index":2,"message":null,"node":1,"state":{"endOffset":0,'
        '"epoch":1,"hwm":null,"lastEpoch":0,"leader":null,"logStartOffset":0,'
        '"state":"Candidate","votedFor":1},"time":1001}',
        '{"action":"DropMessage","actions":[],"index":3,"message":{"type":"VoteRequest"},'
        '"node":2,"state":null,"time":1002}',
    ]
    for line in lines:
        digest.write(line)
        digest.write("\n")
    assert digest.pairs == {("Down", "Start"): 1, ("Unattached", "ElectionTimeout"): 1}
    assert digest.counts[("spec", "ElectionTimeout")] == 1
    assert digest.counts[("noop", "Tick")] == 1
    assert digest.counts[("sim", "DropMessage")] == 1
    assert digest.lines == 4
    # Where each class first occurs: the index of its line (a campaign validates up to it).
    assert digest.first == {
        ("sim", "Start"): 0,
        ("spec", "ElectionTimeout"): 1,
        ("noop", "Tick"): 2,
        ("sim", "DropMessage"): 3,
    }
    assert digest.pair_first == {("Down", "Start"): 0, ("Unattached", "ElectionTimeout"): 1}


def test_the_mutant_is_caught_and_its_replay_names_it():
    row, _ = run_unit(Unit("none", 0), RunSpec(events=500, keep_events_every=0, mutant="eager-hwm"))
    assert [v[0] for v in col(row, "violations")] == ["MajorityReachedHighWatermark"]
    assert "--mutant eager-hwm" in col(row, "replay_command")
    assert not col(row, "ok")


def test_event_sink_and_ndjson_paths_digest_alike():
    # The fast path (TraceEvents handed over as objects) must see exactly what the ndjson
    # trace says: same counts, pairs, timings and kept columns.
    config = SimConfig(seed=9, max_events=1200, profile=PROFILES["mixed"])
    digests = []
    for fast in (True, False):
        digest = TraceDigest(keep_events=True)
        result = seedrun.simulate_into(
            config, RunSpec(events=1200, keep_events_every=1).factory(), digest, fast=fast
        )
        digests.append((digest, result.events))
    (a, ea), (b, eb) = digests
    assert ea == eb and a.lines == b.lines > 1200
    assert a.counts == b.counts and a.pairs == b.pairs
    assert a.election_ms == b.election_ms
    assert a.columns == b.columns


def test_every_class_a_snapshot_profile_shows_is_in_the_coverage_universe():
    # The campaign's action coverage lists SPEC_ACTIONS and SIM_ACTIONS; a simulator line
    # outside both (disk-loss's LoseDisk, the snapshot events the core took no action on)
    # would be counted yet never reported. Events the core handled without an action are
    # no-ops.
    seen: set[tuple[str, str]] = set()
    for profile, seed in (("disk-loss", 0), ("mixed+snapshots", 1), ("crashes+snapshots", 2)):
        digest = TraceDigest(keep_events=False)
        config = SimConfig(seed=seed, max_events=600, profile=PROFILES[profile])
        seedrun.simulate_into(config, RunSpec(events=600, keep_events_every=0).factory(), digest)
        seen |= set(digest.counts)
    assert ("sim", "LoseDisk") in seen
    universe = {("spec", a) for a in seedrun.SPEC_ACTIONS} | {
        ("sim", a) for a in seedrun.SIM_ACTIONS
    }
    outside = {(k, n) for k, n in seen if k != "noop"} - universe
    assert not outside, outside
