"""Campaigns on a local[2] Spark session: dataset schemas, determinism across partitionings,
a seeded bug found, grouped and reported."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from refinement.faults import ADVERSARY_PROFILES, PROFILES
from refinement.pipeline import aggregate
from refinement.pipeline.campaign import PROFILE_ORDER, CampaignConfig, run_campaign
from refinement.pipeline.schemas import events_schema, seeds_schema
from refinement.pipeline.seedrun import PAIR_ACTIONS, PAIR_STATES, SIM_ACTIONS, SPEC_ACTIONS
from refinement.traces.conformance import reconfig_conformance_profiles

pytestmark = pytest.mark.spark

SMALL = {"seeds": 2, "events": 300, "profile": "all", "trace_samples": 2, "report": False}


@pytest.fixture(scope="module")
def two_runs(spark, tmp_path_factory):
    """The same campaign split into 2 and into 5 partitions."""
    base = tmp_path_factory.mktemp("campaigns")
    runs = {}
    for parts in (2, 5):
        config = CampaignConfig(out=base / f"p{parts}", partitions=parts, **SMALL)
        runs[parts] = run_campaign(spark, config, progress=False)
    return runs


def read(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path)


def test_datasets_have_the_declared_schemas(spark, two_runs):
    out = two_runs[2].out
    # Parquet reads every column back as nullable: compare names and types.
    seeds = spark.read.parquet(str(out / "seeds"))
    assert seeds.schema.simpleString() == seeds_schema().simpleString()
    events = spark.read.parquet(str(out / "events"))
    assert events.schema.simpleString() == events_schema().simpleString()
    # 2 seeds x every profile (snapshots and the validated +reconfig ones among them), every
    # event kept: one events row per trace line.
    static = {n for n, p in PROFILES.items() if not p.dynamic and n not in ADVERSARY_PROFILES}
    assert set(PROFILE_ORDER) == static | set(reconfig_conformance_profiles())
    assert {"snapshots", "none+reconfig", "lossy+reconfig", "solo"} <= set(PROFILE_ORDER)
    assert "solo+lossy+reconfig" in PROFILE_ORDER
    assert seeds.count() == 2 * len(PROFILE_ORDER)
    assert events.count() == seeds.groupBy().sum("trace_events").first()[0]
    assert set(read(out / "seeds")["profile"]) == set(PROFILE_ORDER)
    for name in [*aggregate.TABLES, "trace_samples"]:
        assert (out / "aggregates" / name).is_dir(), name


def test_coverage_names_every_spec_and_sim_action(two_runs):
    out = two_runs[2].out
    actions = read(out / "aggregates" / "action_coverage")
    listed = set(zip(actions["kind"], actions["name"], strict=True))
    assert {("spec", a) for a in SPEC_ACTIONS} <= listed
    assert {("sim", a) for a in SIM_ACTIONS} <= listed
    spec = actions[actions["kind"] == "spec"].set_index("name")
    # An election happens in every run; the snapshots profile takes snapshots.
    assert spec.loc["BecomeLeader", "covered"]
    assert spec.loc["BecomeLeader", "seeds"] == 2 * len(PROFILE_ORDER)
    assert spec.loc["CreateSnapshot", "covered"]
    # The +reconfig profiles' operator adds voters (AddVoter's trace samples are validated).
    assert spec.loc["AddVoter", "covered"]
    uncovered = set(spec.index[~spec["covered"]])
    assert uncovered == set(two_runs[2].uncovered_spec)
    assert spec.loc[list(uncovered), "events"].eq(0).all()
    pairs = read(out / "aggregates" / "pair_coverage")
    assert len(pairs) == len(PAIR_STATES) * len(PAIR_ACTIONS)
    leader = pairs.set_index(["state", "action"])
    assert leader.loc[("Candidate", "BecomeLeader"), "covered"]
    assert not leader.loc[("Follower", "BecomeLeader"), "covered"]


def test_distributions_per_profile(two_runs):
    dists = read(two_runs[2].out / "aggregates" / "distributions")
    first = dists[dists["metric"] == "time_to_first_leader_ms"].set_index("profile")
    assert (first["count"] == 2).all() and len(first) == len(PROFILE_ORDER)
    # No election before the first election timeout (1000 ms), but where the only voter leads
    # as it starts (Kafka's initialize): `solo` and `solo+lossy+reconfig`, at 0 ms.
    solo = [n for n in first.index if PROFILES[n].voters == 1]
    assert len(solo) == 2 and (first.loc[solo, "min"] == 0).all()
    assert (first.drop(index=solo)["min"] >= 1000).all()
    lat = dists[dists["metric"] == "commit_latency_ms"].set_index("profile")
    assert lat.loc["none", "p99"] <= lat.loc["mixed", "p99"]
    assert (lat["p50"] <= lat["p99"]).all() and (lat["p99"] <= lat["max"]).all()


def test_aggregates_do_not_depend_on_the_partitioning(two_runs):
    a, b = two_runs[2].out / "aggregates", two_runs[5].out / "aggregates"
    for name in [*aggregate.TABLES, "trace_samples"]:
        left, right = read(a / name), read(b / name)
        pd.testing.assert_frame_equal(left, right, check_exact=True, obj=name)
    seeds_a = read(two_runs[2].out / "seeds").drop(columns="sim_wall_ms")
    seeds_b = read(two_runs[5].out / "seeds").drop(columns="sim_wall_ms")
    pd.testing.assert_frame_equal(seeds_a, seeds_b, check_exact=True)


def test_earmarked_traces_are_prefixes_that_reach_their_classes(two_runs):
    # Each sample is validated up to the last line where one of its classes first occurs.
    result = two_runs[2]
    out = result.out
    samples = read(out / "aggregates" / "trace_samples")
    seeds = read(out / "seeds").set_index(["profile", "seed"])
    assert 0 < len(samples) <= SMALL["trace_samples"]
    sampled: set[str] = set()
    for row in samples.itertuples():
        lines = (out / row.trace_path).read_text().splitlines()
        assert len(lines) == row.events_validated
        run = seeds.loc[(row.profile, row.seed)]
        first = {
            f"action:{c['name']}": c["first"] for c in run["action_counts"] if c["kind"] != "noop"
        }
        first |= {f"pair:{c['state']}/{c['action']}": c["first"] for c in run["pair_counts"]}
        assert row.events_validated == max(first[c] for c in row.classes) + 1
        assert row.events_validated < run["trace_events"]
        assert row.validation.startswith(f"accepted by TLC: {row.events_validated} events")
        sampled |= set(row.classes)
    # Every covered class is in a sample or named as left out (the limit of 2 runs).
    actions = read(out / "aggregates" / "action_coverage")
    pairs = read(out / "aggregates" / "pair_coverage")
    covered = {
        f"action:{n}" for n in actions[actions["covered"] & (actions["kind"] != "noop")].name
    }
    covered |= {f"pair:{r.state}/{r.action}" for r in pairs[pairs["covered"]].itertuples()}
    assert sampled.isdisjoint(result.left_out)
    assert sampled | set(result.left_out) == covered
    if result.left_out:
        assert "covered classes in no earmarked trace (--trace-samples 2)" in result.summary()


def test_a_seeded_bug_is_found_grouped_and_reported(spark, tmp_path):
    config = CampaignConfig(
        seeds=3,
        events=300,
        profile="none",
        out=tmp_path / "mutant",
        mutant="eager-hwm",
        keep_events_every=0,
        trace_samples=1,
    )
    result = run_campaign(spark, config, progress=False)
    assert result.failing == 3
    violations = read(config.out / "aggregates" / "violations")
    assert list(violations["invariant"]) == ["MajorityReachedHighWatermark"]
    failures = list(violations.loc[0, "failures"])
    assert [f["seed"] for f in failures] == [0, 1, 2]
    replay = failures[0]["replay_command"]
    assert replay == (
        "python -m refinement.pipeline.campaign --seed 0 --seeds 1 --profile none"
        " --events 300 --mutant eager-hwm"
    )
    page = (config.out / "report.html").read_text()
    assert "MajorityReachedHighWatermark" in page and replay in page
    for png in ("coverage.png", "commit_latency_ms.png", "election_ms.png"):
        assert (config.out / png).stat().st_size > 1000
    assert not (config.out / "events").exists()
    assert "MajorityReachedHighWatermark: 3 run(s)" in result.summary()
