"""TLC on spec/KRaftSnapshot.tla (KIP-630) and spec/KRaftReconfig.tla (KIP-856/853).

The CI and liveness models must pass and explore more than a floor of distinct states (a
spec whose actions were accidentally disabled would pass vacuously with a handful); each
mutant must be reported violating exactly the invariant or property its config names.
"""

from __future__ import annotations

import pytest

from refinement.tlc import ErrorKind, Model, ModelKind, check_model, load_models

SPECS = ("KRaftSnapshot.tla", "KRaftReconfig.tla", "MCKRaftReconfigScripted.tla")
OURS = [m for m in load_models() if m.spec.name in SPECS]
MUST_PASS = [m for m in OURS if m.kind in (ModelKind.CI, ModelKind.LIVENESS)]
MUTANTS = [m for m in OURS if m.kind is ModelKind.MUTANT]

# Distinct states each passing model explored when the floors were set; a quarter of that
# is the floor, so tuning the spec is free but a vacuous spec is caught.
FLOOR = {
    "KRaftSnapshot": 100_000,
    "KRaftSnapshotFaults": 80_000,
    "KRaftReconfig": 30_000,
    "KRaftReconfigDiskLoss": 70_000,
    "KRaftReconfigLiveness": 5_000,
}

# Invariants a mutant may be judged on are state invariants, except the HWM one, which is
# an action property (it looks at the step that moves the HWM).
ACTION_PROPERTIES = {"MajorityReachedHighWatermark", "HighWatermarkMonotonic"}

ACTIONS = {
    "ElectionTimeout",
    "HandleVoteRequest",
    "HandleVoteResponse",
    "BecomeLeader",
    "HandleBeginQuorumEpochRequest",
    "ClientAppend",
    "SendFetchRequest",
    "HandleFetchRequest",
    "HandleFetchResponse",
    "AdvanceHighWatermark",
    "Restart",
    "DropMessage",
    "DiskLoss",
    "Resign",
    "AddVoter",
    "RemoveVoter",
    "CreateSnapshot",
    "AdvanceLogStartOffset",
    "SendFetchSnapshotRequest",
    "HandleFetchSnapshotRequest",
    "HandleFetchSnapshotResponse",
}


def _ids(models: list[Model]) -> list[str]:
    return [m.name for m in models]


def test_every_model_of_ours_is_registered() -> None:
    names = {m.name for m in OURS}
    assert set(FLOOR) <= names
    assert {
        "SnapshotBeyondHwm",
        "ReconfigEarlyVoterChange",
        "ReconfigRemovedLeaderCountsItself",
    } <= names


@pytest.mark.tlc
@pytest.mark.parametrize("model", MUST_PASS, ids=_ids(MUST_PASS))
def test_model_passes(model: Model) -> None:
    result = check_model(model)
    assert result.ok, (
        f"{model.name}: {result.error_kind} {result.violated}\n{result.raw_output[-4000:]}"
    )
    assert result.distinct_states >= FLOOR[model.name]
    assert result.depth > 10


@pytest.mark.tlc
@pytest.mark.parametrize("model", MUTANTS, ids=_ids(MUTANTS))
def test_mutant_violates_expected_name(model: Model) -> None:
    result = check_model(model)
    assert not result.ok
    expected_kind = ErrorKind.PROPERTY if model.expect in ACTION_PROPERTIES else ErrorKind.INVARIANT
    assert result.error_kind is expected_kind
    assert result.violated == model.expect
    assert result.counterexample_actions[0] == "Initial predicate"
    assert len(result.counterexample) == len(result.counterexample_actions) >= 2
    assert set(result.counterexample_actions[1:]) <= ACTIONS
