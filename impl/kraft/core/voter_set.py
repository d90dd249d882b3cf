"""The voter set: who may vote and what a majority is.

Static (the bootstrap voters) for KIP-595; kept behind this one object so KIP-856 can derive it
from the log (with rollback on truncation) without touching the replica's rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from kraft.core import quorum_math as qm
from kraft.core.quorum_math import PY
from kraft.ids import NO_DIRECTORY, DirectoryId, NodeId, ReplicaKey


@dataclass(frozen=True, slots=True)
class VoterSet:
    voters: tuple[ReplicaKey, ...]
    # Derived once: membership is asked on every message, on the hot path.
    _by_id: dict[NodeId, DirectoryId] = field(init=False, repr=False, compare=False)
    ids: tuple[NodeId, ...] = field(init=False, repr=False, compare=False)
    majority: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_id = {v.id: v.directory_id for v in self.voters}
        if len(by_id) != len(self.voters):
            raise ValueError(f"duplicate voter ids in {self.voters}")
        object.__setattr__(self, "_by_id", by_id)
        object.__setattr__(self, "ids", tuple(v.id for v in self.voters))
        # The smallest number of voters that is more than half of them.
        object.__setattr__(self, "majority", qm.majority_size(PY, len(self.voters)))

    def contains(self, key: ReplicaKey) -> bool:
        """True if `key` is a voter. A directory id on either side that is unknown (all-zero)
        matches any: KIP-595 replicas carry only an id."""
        mine = self._by_id.get(key.id)
        if mine is None:
            return False
        theirs = key.directory_id
        return mine is theirs or NO_DIRECTORY in (mine, theirs) or mine == theirs

    def contains_id(self, node: NodeId) -> bool:
        return node in self._by_id

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
