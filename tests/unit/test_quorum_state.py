"""The quorum-state file: Kafka's QuorumStateData JSON with data_version, one line."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kraft.core.effects import ElectionState
from kraft.ids import DirectoryId, Epoch, NodeId, ReplicaKey
from kraft.storage.quorum_state import (
    QuorumStateError,
    decode_quorum_state,
    decode_uuid,
    encode_quorum_state,
    encode_uuid,
    read_quorum_state,
    write_quorum_state,
)

DIR = DirectoryId(uuid.UUID("27c6803d-c7cb-42dd-9baa-cd494ffacc81"))


def test_kafka_uuid_text_is_urlsafe_base64_without_padding() -> None:
    # Kafka's FileQuorumStateStore documents "J8aAPcfLQt2bqs1JT_rMgQ" as a votedDirectoryId.
    assert encode_uuid(DIR) == "J8aAPcfLQt2bqs1JT_rMgQ"
    assert decode_uuid("J8aAPcfLQt2bqs1JT_rMgQ") == DIR
    assert encode_uuid(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"


def test_golden_version_1_voted() -> None:
    state = ElectionState(Epoch(2), None, ReplicaKey(NodeId(1), DIR))
    golden = (
        '{"leaderId":-1,"leaderEpoch":2,"votedId":1,'
        '"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ","data_version":1}'
    )
    assert encode_quorum_state(state) == golden
    assert decode_quorum_state(golden) == state


def test_golden_version_1_leader() -> None:
    state = ElectionState(Epoch(7), NodeId(3), None)
    golden = (
        '{"leaderId":3,"leaderEpoch":7,"votedId":-1,'
        '"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}'
    )
    assert encode_quorum_state(state) == golden
    assert decode_quorum_state(golden) == state


def test_golden_version_0() -> None:
    state = ElectionState(Epoch(2), NodeId(1), None)
    golden = (
        '{"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,'
        '"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}'
    )
    assert encode_quorum_state(state, version=0, voters=(1, 2, 3)) == golden  # type: ignore[arg-type]
    assert decode_quorum_state(golden) == state


def test_version_0_vote_has_no_directory() -> None:
    text = (
        '{"clusterId":"abc","leaderId":-1,"leaderEpoch":4,"votedId":2,"appliedOffset":0,'
        '"currentVoters":null,"data_version":0}'
    )
    assert decode_quorum_state(text) == ElectionState(Epoch(4), None, ReplicaKey(NodeId(2)))


def test_write_then_read_round_trips_atomically(tmp_path: Path) -> None:
    path = tmp_path / "quorum-state"
    assert read_quorum_state(path) is None
    state = ElectionState(Epoch(9), None, ReplicaKey(NodeId(2), DIR))
    write_quorum_state(path, state)
    assert read_quorum_state(path) == state
    assert "\n" not in path.read_text()
    write_quorum_state(path, ElectionState(Epoch(10), NodeId(2)))
    assert read_quorum_state(path) == ElectionState(Epoch(10), NodeId(2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quorum-state"]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[1,2]",
        '{"leaderId":1,"leaderEpoch":2,"votedId":-1}',
        '{"leaderId":1,"leaderEpoch":2,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA",'
        '"data_version":2}',
        '{"leaderId":1,"leaderEpoch":2,"votedId":-1,"data_version":1}',
        '{"leaderId":"1","leaderEpoch":2,"votedId":-1,'
        '"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}',
        '{"leaderId":1,"leaderEpoch":-1,"votedId":-1,'
        '"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}',
        '{"leaderId":1,"leaderEpoch":2,"votedId":-1,"votedDirectoryId":"short","data_version":1}',
    ],
)
def test_corrupt_file_raises_typed_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "quorum-state"
    path.write_text(text)
    with pytest.raises(QuorumStateError):
        read_quorum_state(path)
