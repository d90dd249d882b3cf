"""The voter set: who may vote and what a majority is, and who is a voter (KIP-853 identity).

A voter is a replica key: (replica id, directory id). The set comes from the static
configuration (`controller.quorum.voters`: ids only, kraft.version 0) or from the log's Voters
records (the bootstrap checkpoint, snapshots and the log itself, kraft.version 1: ids and
directory ids); kraft.core.log_metadata keeps its history, with rollback on truncation.

The identity rule is Kafka's (`VoterSet.VoterNode.isVoter`): a voter known with a directory id
is only the replica with that same directory id; one known by its id alone (a static voter) is
any replica with that id. So a replica whose disk was wiped and reformatted (a new directory
id) is an observer, never the voter it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from kraft.control_records import VotersRecord
from kraft.core import quorum_math as qm
from kraft.core.quorum_math import PY
from kraft.ids import NO_DIRECTORY, DirectoryId, NodeId, ReplicaKey

# kraft.version 1 (KIP-853): the voter set lives in the log; 0: the static configuration's.
KRAFT_VERSION_DYNAMIC = 1


@dataclass(frozen=True, slots=True)
class VoterSet:
    voters: tuple[ReplicaKey, ...]
    # The Voters record this set was read from (with the voters' endpoints), if any: what a
    # leader writes again at the start of its epoch (Kafka's LeaderState). Opaque to the rules.
    record: VotersRecord | None = field(default=None, compare=False, repr=False)
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
        """True if `key` is a voter (Kafka's isVoter): the ids match, and the directory ids
        too unless the voter has none (a static voter). A replica that names no directory id
        is not a voter known with one."""
        mine = self._by_id.get(key.id)
        if mine is None:
            return False
        return mine is key.directory_id or mine in (NO_DIRECTORY, key.directory_id)

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
