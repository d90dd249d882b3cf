"""UpdateRaftVoter gives a voter known by its id alone the directory id it names (KIP-853).

A dynamic voter set may hold a voter without a directory id: a Voters record a Kafka leader
wrote from a static quorum's voters, or a hand-made bootstrap. Such a voter is any replica with
its id (Kafka's VoterNode.isVoter). When that replica sends UpdateRaftVoter naming its
directory id, Kafka 4.3.1's VoterSet.updateVoter puts the request's voter node in the set, key
and all, so the Voters record the leader writes holds the voter with the request's directory
id from then on. kraft's leader kept the empty one (and the simulator's checker expected it).
"""

from __future__ import annotations

from dataclasses import replace

from memory_logs import key
from scenario_harness import CLUSTER, DynamicCluster, Node, controller_endpoints, settled

from kraft.control_records import VoterEntry, VotersRecord
from kraft.core.effects import Send
from kraft.core.events import Receive
from kraft.core.log_metadata import LogState
from kraft.core.messages import RemoveVoterRequest, UpdateVoterRequest, UpdateVoterResponse
from kraft.core.voter_records import voter_set_of
from kraft.errors import ErrorCode
from kraft.ids import NO_DIRECTORY, NodeId, Offset

BARE = 3  # the voter the bootstrap Voters record knows by its id alone


class OneBareVoter(DynamicCluster):
    """Voters 1-3 from a bootstrap Voters record in which voter 3 has no directory id."""

    def boot_state(self, n: Node) -> LogState:
        state = super().boot_state(n)
        (offset, voters), *_ = state.voter_history
        assert voters.record is not None
        entries = tuple(
            VoterEntry(v.voter_id, NO_DIRECTORY, v.endpoints, 0, 1) if v.voter_id == BARE else v
            for v in voters.record.voters
        )
        return replace(state, voter_history=((offset, voter_set_of(VotersRecord(0, entries))),))


def test_an_update_from_a_voter_known_by_id_alone_records_its_directory_id() -> None:
    c = OneBareVoter(3, seed=3)
    lead = settled(c)
    c.run(c.now + 500)  # the HWM of the leader's epoch is known
    view = c.view(lead)
    me = key(BARE)
    assert me.directory_id != NO_DIRECTORY
    ld = c.r(lead)
    before = ld._voters.record
    assert before is not None
    assert [v.voter_directory_id for v in before.voters if v.voter_id == BARE] == [NO_DIRECTORY]
    update = UpdateVoterRequest(CLUSTER, view.epoch, me, controller_endpoints(BARE), 0, 1)
    effects = c.step(lead, Receive(c.now, NodeId(BARE), update, None, reply_to=5))
    answers = [e.message for e in effects if isinstance(e, Send) and e.reply_to == 5]
    assert answers == [UpdateVoterResponse(ErrorCode.NONE, NodeId(lead), view.epoch)]
    after = ld._voters.record
    assert after is not None
    assert [(v.voter_id, v.voter_directory_id) for v in after.voters] == [
        (1, key(1).directory_id),
        (2, key(2).directory_id),
        (BARE, me.directory_id),
    ]
    assert ld._log.voters_offset >= Offset(view.end_offset)  # written as a new Voters record


def test_the_voter_then_removed_is_listed_as_an_observer_by_the_key_it_fetched_with() -> None:
    """After the update, removing the voter (by its new key) moves its progress to the
    observers under the key its Fetches carry, (3, its directory id): DescribeQuorum lists it
    so, as Kafka's leader, which keys the voter's state by the updated voter-set key."""
    c = OneBareVoter(3, seed=3)
    lead = settled(c)
    assert lead != BARE
    c.run(c.now + 500)
    me = key(BARE)
    view = c.view(lead)
    update = UpdateVoterRequest(CLUSTER, view.epoch, me, controller_endpoints(BARE), 0, 1)
    c.step(lead, Receive(c.now, NodeId(BARE), update, None, reply_to=5))
    c.run(c.now + 500)  # the updated voter set commits
    removal = c.step(lead, Receive(c.now, NodeId(-7), RemoveVoterRequest(CLUSTER, me), None, 6))
    assert not [e for e in removal if isinstance(e, Send) and e.reply_to == 6]  # not yet decided
    desc = c.r(lead).describe_quorum()
    assert desc is not None
    assert [v.replica.id for v in desc.voters] == sorted({1, 2, 3} - {BARE})
    assert [d.replica for d in desc.observers] == [me]
