"""The `quorum-state` file: Apache Kafka's QuorumStateData as one line of JSON.

Kafka writes the JSON form of QuorumStateData (fields in schema order, compact) plus a
trailing "data_version" key, with no newline:

- version 0: clusterId, leaderId, leaderEpoch, votedId, appliedOffset, currentVoters
  [{"voterId": n}], data_version. Kafka never sets clusterId or appliedOffset (ElectionState's
  toQuorumStateData), so it writes "" and 0 whatever the cluster; so do we.
- version 1 (KIP-853): leaderId, leaderEpoch, votedId, votedDirectoryId, data_version

-1 stands for "no leader" and "no vote"; a directory id is a Kafka Uuid in URL-safe base64
without padding (all zero: "AAAAAAAAAAAAAAAAAAAAAA"). The file is replaced atomically.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterable
from pathlib import Path

from kraft.core.effects import ElectionState
from kraft.errors import KraftError
from kraft.ids import (
    MAX_EPOCH,
    MAX_NODE_ID,
    NO_DIRECTORY,
    DirectoryId,
    Epoch,
    NodeId,
    ReplicaKey,
)
from kraft.storage.durable import atomic_write

FILE_NAME = "quorum-state"
DATA_VERSION = "data_version"
LOWEST_VERSION = 0
HIGHEST_VERSION = 1
_NONE = -1


class QuorumStateError(KraftError):
    """The quorum-state file is not valid QuorumStateData JSON."""


def encode_uuid(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


def decode_uuid(text: str) -> uuid.UUID:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as e:
        raise QuorumStateError(f"bad uuid {text!r}") from e
    if len(raw) != 16:
        raise QuorumStateError(f"bad uuid {text!r}: {len(raw)} bytes")
    return uuid.UUID(bytes=raw)


def encode_quorum_state(
    state: ElectionState,
    *,
    version: int = HIGHEST_VERSION,
    voters: Iterable[NodeId] = (),
) -> str:
    """The one-line JSON Kafka writes for `state` (no trailing newline).

    A state outside what Kafka can read back (int32 epoch and ids) raises QuorumStateError, so
    that it is never written: a node must always be able to start from its own file."""
    _check_bounds(state)
    leader = _NONE if state.leader_id is None else int(state.leader_id)
    voted = _NONE if state.voted_for is None else int(state.voted_for.id)
    doc: dict[str, object]
    if version == 0:
        doc = {
            "clusterId": "",
            "leaderId": leader,
            "leaderEpoch": int(state.epoch),
            "votedId": voted,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": int(v)} for v in voters],
        }
    elif version == 1:
        directory = NO_DIRECTORY if state.voted_for is None else state.voted_for.directory_id
        doc = {
            "leaderId": leader,
            "leaderEpoch": int(state.epoch),
            "votedId": voted,
            "votedDirectoryId": encode_uuid(directory),
        }
    else:
        raise ValueError(f"quorum state version {version} is not supported")
    doc[DATA_VERSION] = version
    return json.dumps(doc, separators=(",", ":"))


def _check_bounds(state: ElectionState) -> None:
    voted = None if state.voted_for is None else state.voted_for.id
    ids = [i for i in (state.leader_id, voted) if i is not None]
    if not 0 <= state.epoch <= MAX_EPOCH or any(not 0 <= i <= MAX_NODE_ID for i in ids):
        raise QuorumStateError(f"election state {state} cannot be stored (int32 epoch and ids)")


def _int(doc: dict[str, object], name: str) -> int:
    if name not in doc:
        raise QuorumStateError(f"quorum state is missing {name!r}")
    value = doc[name]
    if not isinstance(value, int) or isinstance(value, bool):
        raise QuorumStateError(f"quorum state field {name!r} is not an integer: {value!r}")
    return value


def decode_quorum_state(text: str) -> ElectionState:
    """Parse the first line of a quorum-state file."""
    line = text.split("\n", 1)[0]
    try:
        doc = json.loads(line)
    except json.JSONDecodeError as e:
        raise QuorumStateError(f"quorum state is not JSON: {e}") from e
    if not isinstance(doc, dict):
        raise QuorumStateError("quorum state is not a JSON object")
    version = _int(doc, DATA_VERSION)
    if not LOWEST_VERSION <= version <= HIGHEST_VERSION:
        raise QuorumStateError(
            f"data_version {version} is not within {LOWEST_VERSION}..{HIGHEST_VERSION}"
        )
    leader = _int(doc, "leaderId")
    epoch = _int(doc, "leaderEpoch")
    voted = _int(doc, "votedId")
    directory = NO_DIRECTORY
    if version == 0:
        if not isinstance(doc.get("clusterId"), str):
            raise QuorumStateError("quorum state v0 needs a string clusterId")
        _int(doc, "appliedOffset")
        voters = doc.get("currentVoters")
        if voters is not None and not (
            isinstance(voters, list)
            and all(isinstance(v, dict) and isinstance(v.get("voterId"), int) for v in voters)
        ):
            raise QuorumStateError("quorum state v0 currentVoters is malformed")
    else:
        text_id = doc.get("votedDirectoryId")
        if not isinstance(text_id, str):
            raise QuorumStateError("quorum state v1 needs a string votedDirectoryId")
        directory = DirectoryId(decode_uuid(text_id))
    if epoch < 0 or leader < _NONE or voted < _NONE:
        raise QuorumStateError(f"quorum state has negative ids or epoch: {line}")
    if epoch > MAX_EPOCH or leader > MAX_NODE_ID or voted > MAX_NODE_ID:
        raise QuorumStateError(f"quorum state has an epoch or id beyond int32: {line}")
    return ElectionState(
        epoch=Epoch(epoch),
        leader_id=None if leader == _NONE else NodeId(leader),
        voted_for=None if voted == _NONE else ReplicaKey(NodeId(voted), directory),
    )


def write_quorum_state(
    path: Path,
    state: ElectionState,
    *,
    version: int = HIGHEST_VERSION,
    voters: Iterable[NodeId] = (),
) -> None:
    """Replace the file at `path` atomically: temp file, fsync, rename, directory fsync."""
    data = encode_quorum_state(state, version=version, voters=voters)
    atomic_write(path, data.encode("utf-8"))


def read_quorum_state(path: Path) -> ElectionState | None:
    """The stored election state, or None if there is no file yet."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise QuorumStateError(f"{path}: not UTF-8") from e
    if not text.strip():
        raise QuorumStateError(f"{path}: empty quorum state file")
    return decode_quorum_state(text)
