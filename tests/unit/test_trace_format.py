"""kraft.trace_format: the one trace-line format, written and read the same way by the
simulator and by a real node's trace file."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import pytest

from kraft.core.events import SnapshotWritten, Tick
from kraft.core.messages import FetchSnapshotResponse
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch
from kraft.trace_format import (
    TraceEvent,
    TraceFormatError,
    TraceWriter,
    encode,
    local_event_json,
    message_json,
    parse_line,
    read_trace,
)

STATE: dict[str, object] = {
    "state": "Leader",
    "epoch": 2,
    "votedFor": 1,
    "leader": 1,
    "endOffset": 3,
    "lastEpoch": 2,
    "hwm": None,
    "logStartOffset": 0,
}


def _event(ns: int | None) -> TraceEvent:
    return TraceEvent(
        index=4,
        time=120,
        node=1,
        action="HandleVoteResponse",
        actions=("HandleVoteResponse", "BecomeLeader"),
        message={"type": "VoteResponse", "src": 2, "dst": 1, "voteGranted": True},
        state=dict(STATE),  # type: ignore[arg-type]
        ns=ns,
    )


def test_a_line_has_sorted_keys_and_no_spaces() -> None:
    line = encode(_event(None))
    assert line.startswith('{"action":"HandleVoteResponse","actions":["HandleVoteResponse",')
    assert " " not in line
    assert '"ns"' not in line  # simulator lines carry no ns


def test_a_node_line_carries_ns_and_reads_back() -> None:
    line = encode(_event(123_456))
    assert line.endswith('"ns":123456,"state":' + line.split('"state":', 1)[1])
    assert parse_line(line) == _event(123_456)


def test_a_voter_change_line_names_its_voter_and_reads_back() -> None:
    event = replace(_event(None), action="AddVoter", actions=("AddVoter",), voter=5)
    line = encode(event)
    assert line.endswith(',"voter":5}')
    assert parse_line(line) == event
    assert '"voter"' not in encode(_event(None))  # only a voter change's line has it


def test_writer_and_reader_round_trip(tmp_path: Path) -> None:
    out = io.StringIO()
    writer = TraceWriter(out)
    writer.write(_event(None))
    writer.write(_event(7))
    path = tmp_path / "t.ndjson"
    path.write_text(out.getvalue() + "\n", encoding="utf-8")
    assert writer.count == 2
    assert read_trace(path) == [_event(None), _event(7)]


@pytest.mark.parametrize(
    "text",
    [
        "[1, 2]",
        '{"time": 1, "action": "Tick"}',
        '{"index": 0, "time": 1, "action": "Tick", "actions": "Tick"}',
        '{"index": 0, "time": 1, "action": "Tick", "ns": "soon"}',
        '{"index": 0, "time": 1, "action": "Tick", "state": 3}',
    ],
)
def test_malformed_lines_are_a_typed_error(text: str) -> None:
    with pytest.raises(TraceFormatError):
        parse_line(text, 9)


def test_snapshot_events_carry_their_snapshot_id_and_other_events_nothing() -> None:
    snap = OffsetAndEpoch(Epoch(3), Offset(10))
    assert local_event_json(SnapshotWritten(5, snap)) == {
        "type": "SnapshotWritten",
        "snapshotId": [10, 3],
    }
    assert local_event_json(Tick(5)) is None


def test_a_snapshot_chunk_is_logged_with_its_length() -> None:
    resp = FetchSnapshotResponse(
        ErrorCode.NONE,
        NodeId(1),
        Epoch(2),
        OffsetAndEpoch(Epoch(1), Offset(10)),
        size=234,
        position=160,
        chunk=b"x" * 74,
    )
    line = message_json(resp, 1, 3)
    assert line["chunkBytes"] == 74 and line["position"] == 160 and line["size"] == 234
