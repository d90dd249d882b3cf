"""The KRaft APIs' message schemas, in our declarative form, and the table of them by API key.

- `dsl`: the building blocks (primitive names, `spec`, the KIP-853 endpoint lists).
- `quorum`: Vote, BeginQuorumEpoch, EndQuorumEpoch, DescribeQuorum.
- `fetch`: Fetch, FetchSnapshot.
- `admin`: ApiVersions, DescribeCluster, AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter.
"""

from __future__ import annotations

from typing import Final

from kraft.protocol.messages.admin import (
    ADD_RAFT_VOTER,
    API_VERSIONS,
    DESCRIBE_CLUSTER,
    REMOVE_RAFT_VOTER,
    UPDATE_RAFT_VOTER,
)
from kraft.protocol.messages.fetch import FETCH, FETCH_SNAPSHOT
from kraft.protocol.messages.quorum import (
    BEGIN_QUORUM_EPOCH,
    DESCRIBE_QUORUM,
    END_QUORUM_EPOCH,
    VOTE,
)
from kraft.protocol.schema import ApiSpec

__all__ = [
    "ADD_RAFT_VOTER",
    "APIS",
    "API_VERSIONS",
    "BEGIN_QUORUM_EPOCH",
    "DESCRIBE_CLUSTER",
    "DESCRIBE_QUORUM",
    "END_QUORUM_EPOCH",
    "FETCH",
    "FETCH_SNAPSHOT",
    "REMOVE_RAFT_VOTER",
    "UPDATE_RAFT_VOTER",
    "VOTE",
]

APIS: Final[dict[int, ApiSpec]] = {
    spec.api_key: spec
    for spec in (
        FETCH,
        API_VERSIONS,
        VOTE,
        BEGIN_QUORUM_EPOCH,
        END_QUORUM_EPOCH,
        DESCRIBE_QUORUM,
        FETCH_SNAPSHOT,
        DESCRIBE_CLUSTER,
        ADD_RAFT_VOTER,
        REMOVE_RAFT_VOTER,
        UPDATE_RAFT_VOTER,
    )
}
