"""The voter set: who may vote and what a majority is.

Static (the bootstrap voters) for KIP-595; kept behind this one object so KIP-856 can derive it
from the log (with rollback on truncation) without touching the replica's rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kraft.ids import NO_DIRECTORY, NodeId, ReplicaKey


@dataclass(frozen=True, slots=True)
class VoterSet:
    voters: tuple[ReplicaKey, ...]

    def __post_init__(self) -> None:
        ids = [v.id for v in self.voters]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate voter ids in {self.voters}")

    def contains(self, key: ReplicaKey) -> bool:
        """True if `key` is a voter. A directory id on either side that is unknown (all-zero)
        matches any: KIP-595 replicas carry only an id."""
        for v in self.voters:
            if v.id == key.id:
                return NO_DIRECTORY in (v.directory_id, key.directory_id) or (
                    v.directory_id == key.directory_id
                )
        return False

    def contains_id(self, node: NodeId) -> bool:
        return any(v.id == node for v in self.voters)

    @property
    def ids(self) -> tuple[NodeId, ...]:
        return tuple(v.id for v in self.voters)

    @property
    def majority(self) -> int:
        """The smallest number of voters that is more than half of them."""
        return len(self.voters) // 2 + 1

    def is_majority(self, ids: Iterable[NodeId]) -> bool:
        return len({i for i in ids if self.contains_id(i)}) >= self.majority

    def cannot_reach_majority(self, rejected: Iterable[NodeId]) -> bool:
        """True once so many voters refused that the rest can no longer form a majority."""
        refused = len({i for i in rejected if self.contains_id(i)})
        return len(self.voters) - refused < self.majority

    def __len__(self) -> int:
        return len(self.voters)

    def __iter__(self) -> Iterator[ReplicaKey]:
        return iter(self.voters)
