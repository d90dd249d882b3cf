"""DescribeQuorumMatches (refinement.invariants_describe): the simulator checks what a leader
would answer DescribeQuorum with after each of its steps. A leader that leaves a voter out of
its answer, lists one twice, reports a voter that fetched as never having fetched, or a last
fetch later than it was, is caught on the first seed; the unmutated core holds it. And
LogWrittenByItsRole (refinement.invariants_roles) on the steps it judges."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from kraft.core.effects import AppendToLog, TruncateLog
from kraft.core.quorum_info import QuorumDescription, ReplicaDescription
from kraft.core.replica import Replica
from kraft.core.vocabulary import ReplicaState as S
from kraft.ids import Epoch, NodeId, Offset
from refinement.faults import PROFILES
from refinement.invariants_describe import DESCRIBE_QUORUM_MATCHES
from refinement.invariants_roles import LOG_WRITTEN_BY_ITS_ROLE, log_written_by_its_role
from refinement.sim import SimConfig, simulate
from refinement.sim_config import NodeSetup, SimReplica, core_replica_factory


class _DropsAVoter(Replica):
    def describe_quorum(self) -> QuorumDescription | None:
        d = super().describe_quorum()
        return None if d is None else replace(d, voters=d.voters[1:])


class _ListsAVoterTwice(Replica):
    def describe_quorum(self) -> QuorumDescription | None:
        d = super().describe_quorum()
        return None if d is None else replace(d, voters=(*d.voters, d.voters[0]))


def _other_voters_edited(
    replica: Replica, edit: Callable[[ReplicaDescription], ReplicaDescription]
) -> QuorumDescription | None:
    """The replica's DescribeQuorum answer with `edit` applied to every voter but itself."""
    d = Replica.describe_quorum(replica)
    if d is None:
        return None
    me = replica.view().node_id
    return replace(d, voters=tuple(v if v.replica.id == me else edit(v) for v in d.voters))


class _ForgetsAFetch(Replica):
    """Reports every other voter as never having fetched."""

    def describe_quorum(self) -> QuorumDescription | None:
        return _other_voters_edited(
            self, lambda v: replace(v, log_end_offset=-1, last_fetch_timestamp_ms=-1)
        )


class _FetchedTooLate(Replica):
    """Reports each other voter's last fetch a millisecond in the future."""

    def describe_quorum(self) -> QuorumDescription | None:
        return _other_voters_edited(
            self,
            lambda v: (
                v
                if v.last_fetch_timestamp_ms < 0
                else replace(v, last_fetch_timestamp_ms=v.last_fetch_timestamp_ms + 1)
            ),
        )


def _factory(cls: type[Replica]):  # type: ignore[no-untyped-def]
    def build(setup: NodeSetup) -> SimReplica:
        replica = core_replica_factory(setup)
        replica.__class__ = cls
        return replica

    return build


@pytest.mark.parametrize("cls", [_DropsAVoter, _ListsAVoterTwice, _ForgetsAFetch, _FetchedTooLate])
def test_a_wrong_voter_list_is_caught(cls: type[Replica]) -> None:
    r = simulate(
        SimConfig(seed=0, profile=PROFILES["mixed"], max_events=300), replica_factory=_factory(cls)
    )
    assert [v.name for v in r.violations][:1] == [DESCRIBE_QUORUM_MATCHES]


def test_the_core_describes_its_quorum_as_it_is() -> None:
    r = simulate(SimConfig(seed=0, profile=PROFILES["mixed+reconfig"], max_events=300))
    assert r.violations == []


def test_only_a_leader_or_follower_writes_its_log() -> None:
    """LogWrittenByItsRole (refinement.invariants_roles), on the steps it judges."""
    fetched = AppendToLog(Offset(5), Offset(6), Epoch(2), b"")
    encoded = AppendToLog(Offset(5), Offset(6), Epoch(2), b"", leader_encoded=True)
    cut = TruncateLog(Offset(3))
    node = NodeId(1)
    assert log_written_by_its_role(node, S.FOLLOWER, S.FOLLOWER, [fetched, cut]) is None
    assert log_written_by_its_role(node, S.UNATTACHED, S.FOLLOWER, [fetched]) is None
    assert log_written_by_its_role(node, S.LEADER, S.RESIGNED, [encoded]) is None
    for before, after, effects in [
        (S.PROSPECTIVE, S.PROSPECTIVE, [fetched]),
        (S.CANDIDATE, S.CANDIDATE, [cut]),
        (S.FOLLOWER, S.FOLLOWER, [encoded]),
        (S.RESIGNED, S.RESIGNED, [encoded]),
    ]:
        found = log_written_by_its_role(node, before, after, effects)
        assert found is not None and found.name == LOG_WRITTEN_BY_ITS_ROLE
