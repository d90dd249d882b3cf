"""A short mutation campaign on Spark (`kraft mutate` without its command line): eight fixed
mutants of the commit rule and the quorum arithmetic, through the scenarios and a small
simulator sweep. Known-bad mutants are killed by the layer expected, the known-equivalent ones
survive and are accepted through the committed equivalents file, and a survivor the file does
not list fails the run."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from refinement.mutation import report
from refinement.mutation.campaign import EQUIVALENTS, MutateConfig, run_campaign
from refinement.mutation.execute import LayerSettings

pytestmark = pytest.mark.spark

CHECKOUT = Path(__file__).resolve().parents[2]
# id -> (what it changes, the layer expected to kill it; None: equivalent)
MUTANTS: dict[str, tuple[str, str | None]] = {
    "6ed6f7afc436": ("commits.py:72 not undecided or undecided[-1] < entry -> not undecided", None),
    "0978a3aa014b": ("commits.py:76 last < high_watermark -> last <= high_watermark", None),
    "67fc0c338229": ("quorum_math.py:130 HWM = sorted(...)[majority - 2]", "scenarios"),
    "650b76ed3f01": ("commits.py:72 undecided[-1] on an empty list", "scenarios"),
    "7e5c1867195e": ("commits.py:54 no self._undecided", "scenarios"),
    "9b1474522db5": ("quorum_math.py:102 majority = n // 2", "scenarios"),
    "6ff86e1a54f9": ("commits.py:89 committed and lost swapped", "sim"),
    "05c0220ccf27": ("commits.py:73 the usual append forgotten", "sim"),
}
SETTINGS = LayerSettings(
    layers=("sim", "scenarios"),  # run cheapest first whatever the order given
    scenario_tests=("tests/scenarios/test_scenarios.py",),
    sim_profiles=("mixed", "lossy+snapshots"),
    sim_seeds=1,
    sim_events=600,
)


@pytest.fixture(scope="module")
def campaign(spark, tmp_path_factory):
    out = tmp_path_factory.mktemp("mutate")
    config = MutateConfig(ids=tuple(MUTANTS), settings=SETTINGS, out=out, min_timeout_s=120)
    return run_campaign(spark, config, progress=False)


def test_every_mutant_gets_its_row(campaign):
    rows = pd.read_parquet(campaign.config.out / "mutants").set_index("id")
    assert sorted(rows.index) == sorted(MUTANTS)
    assert campaign.baseline.layers_run == ["scenarios", "sim"]
    for mid, (what, layer) in MUTANTS.items():
        row = rows.loc[mid]
        assert bool(row["killed"]) == (layer is not None), (mid, what, row["detail"])
        assert row["killed_by"] == layer, (mid, what, row["detail"])
        assert row["diff"].startswith(f"--- a/impl/kraft/core/{what.split(':')[0]}")
        if layer == "sim":
            assert row["kill_profile"] in SETTINGS.sim_profiles
            assert row["events_needed"] > 0 and row["runs_needed"] >= 1
            assert list(row["layers_run"]) == ["scenarios", "sim"]


def test_the_equivalent_survivors_are_accepted_and_reported(campaign):
    assert campaign.unexplained == []
    page = (campaign.config.out / "report.md").read_text()
    assert "Mutation score: 100.0 % (6 killed of 8 mutants, 2 accepted as equivalent" in page
    for mid in ("6ed6f7afc436", "0978a3aa014b"):
        assert f"### {mid} kraft/core/commits.py" in page
    assert "+        if high_watermark is not None and last <= high_watermark:" in page
    assert (campaign.config.out / "report.html").exists()
    # The equivalents file the campaign read is the committed one.
    assert campaign.config.equivalents == EQUIVALENTS


def test_a_survivor_without_an_entry_fails_the_run(campaign, tmp_path):
    only_one = tmp_path / "equivalent.toml"
    only_one.write_text('[[equivalent]]\nid = "6ed6f7afc436"\nreason = "the fast path"\n')
    out = str(campaign.config.out)
    assert report.main([out, "--equivalents", str(only_one)]) == 1
    rebuilt = report.build_report(campaign.config.out, only_one)
    assert rebuilt.unexplained == ["0978a3aa014b"]
    assert "UNEXPLAINED" in (campaign.config.out / "report.md").read_text()
    assert report.main([out, "--equivalents", str(EQUIVALENTS)]) == 0
