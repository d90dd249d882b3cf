"""Trace validation of snapshots (KIP-630): traces of the simulator's `snapshots` profile, whose
events take every snapshot action (CreateSnapshot, AdvanceLogStartOffset, a Fetch answered with
a SnapshotId, SendFetchSnapshotRequest, HandleFetchSnapshotRequest/Response, InstallSnapshot),
checked by TLC against spec/KRaft.tla through spec/TraceKRaft.tla.

Accepted: the committed trace tests/refinement/fixtures/trace-snapshots-1.ndjson (the first
300 lines of `python -m refinement.sim --seed 1 --profile snapshots --events 400 --trace T`: the
leader snapshots and advances its log start, a follower that restarted fetches at offset 0, is
answered with the SnapshotId, fetches it in two chunks and installs it, then fetches records
after it) and, marked slow, freshly simulated seeds. Rejected at the edited event: an
InstallSnapshot before the last chunk arrived, a CreateSnapshot past the HWM.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kraft.trace_format import TraceEvent, read_trace
from refinement.traces import (
    SIM_VOTERS,
    map_trace,
    simulate_trace,
    spec_message,
    validate_trace,
)

FIXTURE = Path(__file__).parent / "fixtures" / "trace-snapshots-1.ndjson"
SNAPSHOT_ACTIONS = {
    "CreateSnapshot",
    "AdvanceLogStartOffset",
    "SendFetchSnapshotRequest",
    "HandleFetchSnapshotRequest",
    "HandleFetchSnapshotResponse",
    "InstallSnapshot",
}


@pytest.fixture(scope="module")
def snapshot_trace() -> list[TraceEvent]:
    return read_trace(FIXTURE)


def _ops(events: list[TraceEvent], i: int) -> list[dict[str, object]]:
    ops = map_trace(events).records[i]["ops"]
    assert isinstance(ops, tuple)
    return [dict(op) for op in ops if isinstance(op, dict)]


# --------------------------------------------------------------------------- mapping (no TLC)


def test_the_fixture_takes_every_snapshot_action(snapshot_trace: list[TraceEvent]) -> None:
    taken = {a for ev in snapshot_trace for a in ev.actions}
    assert taken >= SNAPSHOT_ACTIONS
    assert any(
        ev.message is not None and ev.message.get("snapshotId") is not None
        for ev in snapshot_trace
        if ev.message is not None and ev.message.get("type") == "FetchResponse"
    )


def test_create_snapshot_carries_the_written_snapshot_end(snapshot_trace: list[TraceEvent]):
    i = next(i for i, ev in enumerate(snapshot_trace) if ev.action == "CreateSnapshot")
    written = snapshot_trace[i].message
    assert written is not None and written["type"] == "SnapshotWritten"
    ops = _ops(snapshot_trace, i)
    assert ops[0]["a"] == "CreateSnapshot"
    assert ops[0]["x"] == written["snapshotId"][0]  # type: ignore[index]


def test_a_fetch_answer_naming_a_snapshot_is_kind_snapshot() -> None:
    resp = {"type": "FetchResponse", "src": 1, "dst": 3, "error": 0, "leaderEpoch": 1,
            "leaderId": 1, "highWatermark": 10, "batches": [], "divergingEpoch": None,
            "snapshotId": [10, 1]}  # fmt: skip
    m, exact = spec_message(resp)
    assert not exact and m["kind"] == "snapshot" and m["snapshot"] == (10, 1)
    m, _ = spec_message(resp | {"snapshotId": None})
    assert m["kind"] == "ok" and m["snapshot"] == (-1, -1)


def test_fetch_snapshot_answers_map_errors_to_spec_kinds() -> None:
    base = {"type": "FetchSnapshotResponse", "src": 1, "dst": 3, "leaderEpoch": 2,
            "leaderId": 1, "snapshotId": [10, 1], "position": 160, "size": 234,
            "chunkBytes": 74}  # fmt: skip
    kinds = {0: "ok", 98: "notFound", 99: "outOfRange", 74: "error"}
    for code, kind in kinds.items():
        m, exact = spec_message(base | {"error": code})
        assert not exact and m["kind"] == kind
    m, _ = spec_message(base | {"error": 0})
    assert (m["position"], m["size"], m["len"]) == (160, 234, 74)


def test_a_served_chunk_has_the_length_its_answer_shows(snapshot_trace: list[TraceEvent]):
    # The leader's step logs the request only; its answer, received later, shows the length.
    i = next(i for i, ev in enumerate(snapshot_trace) if ev.action == "HandleFetchSnapshotRequest")
    req = snapshot_trace[i].message
    assert req is not None
    answer = next(
        ev.message
        for ev in snapshot_trace[i:]
        if ev.message is not None
        and ev.message.get("type") == "FetchSnapshotResponse"
        and ev.message.get("position") == req["position"]
        and ev.message.get("dst") == req["src"]
    )
    ops = _ops(snapshot_trace, i)
    assert [op["a"] for op in ops] == ["Recv", "HandleFetchSnapshotRequest"]
    assert ops[1]["x"] == answer["chunkBytes"] > 0


def test_an_invalid_fetched_snapshot_abandons_the_transfer() -> None:
    ev = TraceEvent(0, 0, 3, "SnapshotValidated", (), {"type": "SnapshotValidated",
                    "snapshotId": [10, 1], "valid": False}, None)  # fmt: skip
    assert [op["a"] for op in _ops([ev], 0)] == ["AbandonSnapFetch"]


def test_a_lost_disk_is_the_bridging_step_lose_disk() -> None:
    # The disk-loss profile: an observer crashes and its data directory is gone.
    ev = TraceEvent(7, 100, 4, "LoseDisk", (), None, {"state": "Down", "epoch": 0,
                    "endOffset": 0, "lastEpoch": 0, "hwm": None, "leader": None,
                    "logStartOffset": 0, "votedFor": None})  # fmt: skip
    mapped = map_trace([ev])
    assert [op["a"] for op in _ops([ev], 0)] == ["LoseDisk"]
    assert mapped.crashes == 1  # MaxRestarts counts it


# --------------------------------------------------------------------------- TLC


def _prefix_through(events: list[TraceEvent], i: int, extra: int = 1) -> list[TraceEvent]:
    """The trace up to event i and `extra` more: a prefix of a behaviour is a behaviour."""
    return events[: i + 1 + extra]


@pytest.mark.tlc
def test_snapshot_trace_is_accepted(snapshot_trace: list[TraceEvent]) -> None:
    res = validate_trace(snapshot_trace)
    assert res.accepted, res.summary()
    assert res.events == len(snapshot_trace)


@pytest.mark.tlc
def test_a_disk_loss_trace_is_accepted(tmp_path: Path) -> None:
    # Seed 0 (400 events): observers 4 and 5 lose their disks (4 twice), restart empty and
    # catch up; 5 installs the leader's snapshot after its loss. Voters 1-3, observers 4-5.
    path = tmp_path / "trace-disk-loss-0.ndjson"
    simulate_trace(0, "disk-loss", 400, path)
    events = read_trace(path)
    lost = [ev.index for ev in events if ev.action == "LoseDisk" and ev.node == 5]
    assert lost and any(
        ev.node == 5 and "InstallSnapshot" in ev.actions and ev.index > lost[0] for ev in events
    )
    res = validate_trace(events, voters=SIM_VOTERS)
    assert res.accepted, res.summary()


@pytest.mark.tlc
@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 5, 6, 7])
def test_simulated_snapshots_seeds_are_accepted(tmp_path: Path, seed: int) -> None:
    # Each of these seeds installs a snapshot (7: after a transfer a leader change abandoned).
    path = tmp_path / f"trace-snapshots-{seed}.ndjson"
    simulate_trace(seed, "snapshots", 400, path)
    events = read_trace(path)
    assert {a for ev in events for a in ev.actions} >= SNAPSHOT_ACTIONS
    res = validate_trace(events)
    assert res.accepted, res.summary()


@pytest.mark.tlc
def test_install_before_the_last_chunk_is_rejected_at_the_install(
    snapshot_trace: list[TraceEvent],
) -> None:
    trace = list(snapshot_trace)
    install = max(i for i, ev in enumerate(trace) if ev.action == "InstallSnapshot")
    node = trace[install].node
    last_chunk = max(
        i
        for i, ev in enumerate(trace[:install])
        if ev.node == node and ev.actions[:1] == ("HandleFetchSnapshotResponse",)
    )
    # The install (with its logged state) now comes before the last chunk is handled.
    moved = trace.pop(install)
    trace.insert(last_chunk, moved)
    res = validate_trace(_prefix_through(trace, last_chunk))
    assert not res.accepted
    assert res.first_unmatched == moved.index, res.summary()


@pytest.mark.tlc
def test_create_snapshot_past_the_hwm_is_rejected_at_that_event(
    snapshot_trace: list[TraceEvent],
) -> None:
    trace = list(snapshot_trace)
    i = next(i for i, ev in enumerate(trace) if ev.action == "CreateSnapshot")
    ev = trace[i]
    assert ev.state is not None and ev.message is not None
    hwm, end = ev.state["hwm"], ev.state["endOffset"]
    assert isinstance(hwm, int) and isinstance(end, int) and hwm < end
    _, epoch = ev.message["snapshotId"]  # type: ignore[misc]
    trace[i] = replace(ev, message={**ev.message, "snapshotId": [hwm + 1, epoch]})
    res = validate_trace(_prefix_through(trace, i))
    assert not res.accepted
    # The unedited trace is accepted (test_snapshot_trace_is_accepted), so is its prefix.
    assert res.first_unmatched == ev.index, res.summary()
