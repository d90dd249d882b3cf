"""Identifiers shared by every layer: node ids, epochs, offsets, storage (directory) ids."""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from typing import NewType

NodeId = NewType("NodeId", int)
Epoch = NewType("Epoch", int)
Offset = NewType("Offset", int)
ClusterId = NewType("ClusterId", str)
# An idempotent client (Kafka's producer id): it numbers its records, the leader deduplicates.
ProducerId = NewType("ProducerId", int)
# KIP-856 names it the storage UUID; Apache Kafka's KIP-853 calls it the directory id.
DirectoryId = NewType("DirectoryId", uuid.UUID)

# The wire and quorum-state carry epochs and node ids as int32, offsets as int64.
MAX_EPOCH = Epoch(2**31 - 1)
MAX_NODE_ID = NodeId(2**31 - 1)
MAX_OFFSET = Offset(2**63 - 2)  # an end offset one past the last record must fit too

NO_NODE = NodeId(-1)
NO_PRODUCER = ProducerId(-1)
NO_EPOCH = Epoch(-1)
# Kafka encodes "no directory id" as the all-zero UUID.
NO_DIRECTORY = DirectoryId(uuid.UUID(int=0))


@dataclass(frozen=True, slots=True, order=True)
class ReplicaKey:
    """A replica as KIP-856 identifies it: its id and the UUID of its storage directory."""

    id: NodeId
    directory_id: DirectoryId = NO_DIRECTORY

    def __str__(self) -> str:
        if self.directory_id == NO_DIRECTORY:
            return str(self.id)
        return f"{self.id}:{self.directory_id}"

    def kafka_text(self) -> str:
        """Kafka's ReplicaKey.toString, as its error messages name a voter:
        `ReplicaKey(id=N, directoryId=<Kafka's base64 form, or <undefined> if none>)`."""
        raw = base64.urlsafe_b64encode(self.directory_id.bytes).decode("ascii").rstrip("=")
        text = "<undefined>" if self.directory_id == NO_DIRECTORY else raw
        return f"ReplicaKey(id={self.id}, directoryId={text})"


@dataclass(frozen=True, slots=True, order=True)
class OffsetAndEpoch:
    """A log position: the end offset and the epoch of the record before it.

    Ordering is by epoch first, then offset: KIP-595's "log is at least as up-to-date" rule.
    """

    epoch: Epoch
    offset: Offset
