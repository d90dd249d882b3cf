"""The record of fresh samples (`python -m refinement.mutation.fresh`): a sample campaign's
outcome is added once, read back as written, and scored as `report --pool` scores the same
campaign directories."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from refinement.mutation import fresh, report

EQUIVALENTS = '[[equivalent]]\nid = "e1"\nreason = "no input tells it apart"\n'


def _campaign(root: Path, seed: int, rows: list[tuple[str, bool]], **config: object) -> Path:
    out = root / f"mutate-s{seed}"
    (out / "mutants").mkdir(parents=True)
    df = pd.DataFrame(
        {
            "id": [i for i, _ in rows],
            "file": ["kraft/core/leader.py"] * len(rows),
            "operator": ["const"] * len(rows),
            "killed": [k for _, k in rows],
            "killed_by": ["sim" if k else None for _, k in rows],
        }
    )
    df.to_parquet(out / "mutants" / "part-0.parquet")
    settings = {"ids": [], "files": None, "sample": len(rows), "seed": seed, **config}
    (out / "campaign.json").write_text(json.dumps({"config": settings}))
    return out


def test_a_sample_is_recorded_once_and_scored_as_the_pool_scores_it(tmp_path: Path) -> None:
    eq = tmp_path / "equivalent.toml"
    eq.write_text(EQUIVALENTS)
    record = tmp_path / "fresh_samples.csv"
    a = _campaign(tmp_path, 7, [("k1", True), ("k2", True), ("e1", False), ("s1", False)])
    b = _campaign(tmp_path, 9, [("k1", True), ("k3", True), ("s2", False)])
    fresh.record(a, "abc1234", record)
    fresh.record(b, "def5678", record)
    with pytest.raises(ValueError, match="seed 7 is recorded already"):
        fresh.record(a, "abc1234", record)
    rows = fresh.load(record)
    assert [(o.sample, o.id, o.killed, o.killed_by) for o in rows[:4]] == [
        ("7", "e1", False, ""),
        ("7", "k1", True, "sim"),
        ("7", "k2", True, "sim"),
        ("7", "s1", False, ""),
    ]
    pooled = fresh.pool(rows, report.load_equivalents(eq))
    assert (pooled.killed, pooled.counted) == (3, 5)
    assert [(s.sample, s.drawn_on, s.mutants, s.equivalent) for s in pooled.samples] == [
        ("7", "abc1234", 4, 1),
        ("9", "def5678", 2, 0),
    ]
    # The same figures as `report --pool` over the campaign directories.
    mine = fresh.table(pooled).splitlines()
    theirs = report.pool([a, b], eq).splitlines()
    assert [line.split("|")[3:] for line in mine] == [line.split("|")[3:] for line in theirs]


def test_only_a_sample_campaign_is_recorded(tmp_path: Path) -> None:
    chosen = _campaign(tmp_path, 5, [("k1", True)], ids=["k1"])
    with pytest.raises(ValueError, match="not a sample campaign"):
        fresh.record(chosen, "abc1234", tmp_path / "fresh_samples.csv")
    assert not (tmp_path / "fresh_samples.csv").exists()


def test_the_committed_record_names_each_sample_once_with_its_revision() -> None:
    rows = fresh.load()
    seeds = list(dict.fromkeys(o.sample for o in rows))
    assert len(seeds) >= 9
    for seed in seeds:
        mine = [o for o in rows if o.sample == seed]
        assert len({o.id for o in mine}) == len(mine)
        assert len({o.drawn_on for o in mine}) == 1 and mine[0].drawn_on
        assert all(o.killed == bool(o.killed_by) for o in mine)
