"""Fresh samples scored together (`python -m refinement.mutation.report --pool`): survivors
listed as equivalent since leave the count, survivors killed since still count as survivors, a
mutant drawn twice counts once, and the pooled score carries a Wilson interval."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from refinement.mutation import report


def _sample(root: Path, name: str, rows: list[tuple[str, bool]]) -> Path:
    out = root / name
    (out / "mutants").mkdir(parents=True)
    df = pd.DataFrame({"id": [i for i, _ in rows], "killed": [k for _, k in rows]})
    df.to_parquet(out / "mutants" / "part-0.parquet")
    return out


def test_samples_pool_under_todays_equivalents(tmp_path: Path) -> None:
    eq = tmp_path / "equivalent.toml"
    eq.write_text('[[equivalent]]\nid = "e1"\nreason = "no input tells it apart"\n')
    a = _sample(tmp_path, "a", [("k1", True), ("k2", True), ("e1", False), ("s1", False)])
    b = _sample(tmp_path, "b", [("k1", True), ("k3", True), ("s2", False)])
    table = report.pool([a, b], eq).splitlines()
    assert table[2].endswith("| 4 | 2 | 1 | 1 | 66.7 % |")  # e1 left the count
    assert table[3].endswith("| 2 | 1 | 0 | 1 | 50.0 % |")  # k1 counted in `a` only
    pooled = table[4]
    assert pooled.startswith("| pooled | | 6 | 3 |")
    low, high = report.wilson_interval(3, 5)
    assert f"60.0 % (95 % interval {100 * low:.1f} % - {100 * high:.1f} %)" in pooled


@pytest.mark.parametrize(
    ("killed", "counted", "low", "high"),
    [(38, 40, 0.8350, 0.9862), (0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0)],
)
def test_the_wilson_interval(killed: int, counted: int, low: float, high: float) -> None:
    got = report.wilson_interval(killed, counted)
    assert got == pytest.approx((low, high), abs=1e-4)
