"""Which state machine a node runs (`kraft.state.machine`): the key-value store (kv, the
default: kraft.app.kv) or, in a quorum shared with Apache Kafka controllers, the metadata
state machine (metadata: kraft.app.metadata), whose records and snapshots are Kafka's
metadata records."""

from __future__ import annotations

from enum import Enum

from kraft.app.kv import KeyValueStore
from kraft.app.metadata import MetadataStateMachine
from kraft.app.port import ReadableStateMachine
from kraft.ids import Offset

__all__ = ["StateMachineKind", "new_state_machine"]


class StateMachineKind(Enum):
    KV = "kv"
    METADATA = "metadata"


def new_state_machine(kind: StateMachineKind, start_offset: Offset) -> ReadableStateMachine:
    """An empty state machine of `kind` at `start_offset`."""
    if kind is StateMachineKind.METADATA:
        return MetadataStateMachine(start_offset)
    return KeyValueStore(start_offset)
