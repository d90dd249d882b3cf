"""The campaign report's KIP-630 section: every snapshot action with the runs that took it and
the TLC-accepted trace samples that hold it (pandas only, no Spark)."""

from __future__ import annotations

import pandas as pd

from refinement.pipeline.report import SNAPSHOT_ACTIONS, snapshot_coverage


def _actions(counts: dict[str, int]) -> pd.DataFrame:
    names = [*SNAPSHOT_ACTIONS, "BecomeLeader"]
    return pd.DataFrame(
        {
            "kind": ["spec"] * len(names),
            "name": names,
            "events": [counts.get(n, 0) for n in names],
            "seeds": [1 if counts.get(n, 0) else 0 for n in names],
            "covered": [counts.get(n, 0) > 0 for n in names],
        }
    )


def test_every_snapshot_action_has_a_row_with_its_validated_samples() -> None:
    actions = _actions({"CreateSnapshot": 5, "InstallSnapshot": 2, "BecomeLeader": 9})
    samples = pd.DataFrame(
        {
            "profile": ["snapshots", "snapshots", "mixed"],
            "seed": [1, 2, 3],
            "classes": [
                ["action:CreateSnapshot", "action:InstallSnapshot"],
                ["action:CreateSnapshot"],
                ["action:BecomeLeader"],
            ],
            "validation": [
                "accepted by TLC: 300 events",
                "REJECTED at event 12",
                "accepted by TLC: 90 events",
            ],
        }
    )
    table = snapshot_coverage(actions, samples).set_index("action")
    assert list(table.index) == list(SNAPSHOT_ACTIONS)
    assert table.loc["CreateSnapshot", "events"] == 5 and table.loc["CreateSnapshot", "covered"]
    # Only accepted samples count as validated.
    assert table.loc["CreateSnapshot", "validated_in"] == "snapshots/1"
    assert table.loc["InstallSnapshot", "validated_in"] == "snapshots/1"
    assert not table.loc["HandleFetchSnapshotRequest", "covered"]
    assert table.loc["HandleFetchSnapshotRequest", "validated_in"] == "-"
