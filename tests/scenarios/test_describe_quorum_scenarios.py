"""What a leader's DescribeQuorum says of its voters, in two corners the simulator's checker
does not state (refinement.invariants_describe checks fetch times and offsets):

- a static voter set (`controller.quorum.voters`: ids without directory ids) names its voters
  with the zero directory id, whatever directory id their Fetches carry, as Kafka's leader
  names them from its voter set;
- a replica's last caught-up time follows Kafka's ReplicaState.updateFetchState: the time of a
  Fetch that reached the leader's end, or else, when a Fetch reaches the end the leader had at
  the replica's previous Fetch, the time of that previous Fetch.
"""

from __future__ import annotations

from dataclasses import replace

from scenario_harness import Cluster, committed, elect, settled

from kraft.core.events import Receive, Tick
from kraft.core.messages import FetchRequest
from kraft.ids import NO_DIRECTORY, NodeId, Offset, ReplicaKey


def _static(voters: int, seed: int) -> Cluster:
    """A cluster whose voter set is static (no directory ids) while every replica has one."""
    c = Cluster(voters, seed=seed)
    static = tuple(ReplicaKey(NodeId(i), NO_DIRECTORY) for i in range(1, voters + 1))
    for i, n in c.nodes.items():
        n.config = replace(n.config, voters=static)
        c.start(i)
    return c


def test_a_static_quorum_names_its_voters_without_directory_ids() -> None:
    c = _static(3, seed=3)
    lead = settled(c)
    fetching = {n.config.node for i, n in c.nodes.items() if i != lead}
    assert all(k.directory_id != NO_DIRECTORY for k in fetching)  # their Fetches carry one
    desc = c.r(lead).describe_quorum()
    assert desc is not None
    assert {d.replica for d in desc.voters} == {
        ReplicaKey(NodeId(i), NO_DIRECTORY) for i in c.nodes
    }


def test_a_fetch_reaching_the_leaders_end_at_the_previous_fetch_dates_catching_up_from_it() -> None:
    c = Cluster(3, seed=3)
    lead = elect(c)
    committed(c, lead, 2)
    other = next(i for i in c.nodes if i != lead)
    c.isolate(other)  # its own Fetches stop; the test sends them
    me = c.nodes[other].config.node
    epoch = c.view(lead).epoch

    def fetch(at: int, offset: int) -> None:
        c.run(at)
        c.step(lead, Tick(at))
        req = FetchRequest(
            c.nodes[lead].config.cluster_id, me, epoch, Offset(offset), epoch, Offset(0)
        )
        c.r(lead).step(Receive(at, NodeId(other), req, None))

    def caught_up() -> int:
        desc = c.r(lead).describe_quorum()
        assert desc is not None
        [d] = [d for d in desc.voters if d.replica.id == other]
        return d.last_caught_up_timestamp_ms

    start = int(c.view(other).end_offset)
    committed(c, lead, 3)
    first_end = int(c.view(lead).end_offset)
    t1 = c.now + 10
    fetch(t1, start)  # behind: the leader's end is first_end
    before = caught_up()
    assert before < t1
    committed(c, lead, 3)
    assert int(c.view(lead).end_offset) > first_end
    t2 = c.now + 10
    fetch(t2, first_end)  # reaches the end the leader had at t1, not its end now
    assert caught_up() == t1
    t3 = t2 + 10
    fetch(t3, start + 1)  # behind what the leader had at t2: no news
    assert caught_up() == t1
    t4 = t3 + 10
    fetch(t4, int(c.view(lead).end_offset))  # exactly the leader's end: caught up now
    assert caught_up() == t4
