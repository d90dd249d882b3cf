"""KIP-853 refusals on a dynamic quorum {1, 2, 3} whose voters carry directory ids: adding a
voter whose id is already a voter (DUPLICATE_VOTER) and removing one that is not
(VOTER_NOT_FOUND) are answered with Kafka's texts, which print the voter set as a Java HashSet
of ReplicaKey iterates it. The expected set below was printed by Java with Kafka's own
ReplicaKey and Uuid (tests/interop/java/ReplicaKeySetOrder.java, the program
tests/interop/test_java_order_kafka.py runs) for these very keys; a wrong hash prints the
keys in another order."""

from __future__ import annotations

from memory_logs import key
from scenario_harness import Cluster, DynamicCluster, controller_endpoints

from kraft.core.effects import Send
from kraft.core.events import Receive
from kraft.core.messages import (
    AddVoterRequest,
    AddVoterResponse,
    Message,
    RemoveVoterRequest,
    RemoveVoterResponse,
)
from kraft.errors import ErrorCode
from kraft.ids import NodeId

ADMIN = NodeId(-1)  # an admin client has no node id
TOKEN = 77

# Java 17, Kafka 4.3.1: new HashSet<ReplicaKey>() filled with key(1), key(2), key(3).
JAVA_SET = (
    "[ReplicaKey(id=1, directoryId=AAAAAAAAAAAAAAAAAAAAAg),"
    " ReplicaKey(id=2, directoryId=AAAAAAAAAAAAAAAAAAAAAw),"
    " ReplicaKey(id=3, directoryId=AAAAAAAAAAAAAAAAAAAABA)]"
)


def _settled() -> tuple[DynamicCluster, int]:
    c = DynamicCluster(3, seed=21)
    c.run_until(lambda: c.leader() is not None)
    lead = c.leader()
    assert lead is not None
    c.append(lead, b"x")
    end = c.view(lead).end_offset
    c.run_until(lambda: c.view(lead).high_watermark == end)  # its epoch's records committed
    return c, lead


def _ask(c: Cluster, lead: int, request: Message) -> list[Message]:
    effects = c.r(lead).step(Receive(c.now, ADMIN, request, reply_to=TOKEN))
    return [e.message for e in effects if isinstance(e, Send) and e.dst == ADMIN]


def test_adding_a_voter_id_already_in_the_set_names_the_set_in_javas_order() -> None:
    c, lead = _settled()
    other = 2 if lead != 2 else 3
    [answer] = _ask(c, lead, AddVoterRequest(c.nodes[lead].config.cluster_id, key(other),
                                             controller_endpoints(other)))  # fmt: skip
    assert answer == AddVoterResponse(
        ErrorCode.DUPLICATE_VOTER,
        f"The voter id for {key(other).kafka_text()} is already part of the set of voters"
        f" {JAVA_SET}.",
    )


def test_removing_a_replica_that_is_no_voter_names_the_set_in_javas_order() -> None:
    c, lead = _settled()
    stranger = key(7)
    [answer] = _ask(c, lead, RemoveVoterRequest(c.nodes[lead].config.cluster_id, stranger))
    assert answer == RemoveVoterResponse(
        ErrorCode.VOTER_NOT_FOUND,
        f"Cannot remove voter {stranger.kafka_text()} from the set of voters {JAVA_SET}",
    )
