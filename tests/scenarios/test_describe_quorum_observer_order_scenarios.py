"""A leader's DescribeQuorum answer lists its observers in the order a Kafka leader does (the
values of LeaderState.observerStates, a HashMap<ReplicaKey, ReplicaState>, filled in the order
of their first Fetches), also where that order reads bit 63 of a directory id's hash input.

Kafka's Uuid.hashCode is `(int)(h >> 32) ^ (int) h` of `h = most ^ least`, so bit 63 of `h`
is bit 31 of the Uuid's hash, and of the ReplicaKey's (`31 * (31 + id) + hash`: the bit only
adds a carry out of the int). HashMap's spread `h ^ (h >>> 16)` moves it to bit 15 of the
bucket index, which only a table of 65536 buckets reads, and a default HashMap grows to that
when it holds more than 24576 (0.75 x 32768) entries. So the leader here has 24577 observers,
with random directory ids: with fewer, or with the small directory ids of the other
scenarios and the simulator, a hash that drops bit 63 orders them the same.

The leader's description is built here, not fetched into being: every new observer makes the
core's leader look for observers out of session (LeaderState.observer, as Kafka's
clearInactiveObservers), so 24577 first Fetches take the core about 40 s. The order asserted
is the wire's: the description as the node's listener answers it (in_kafka_order), encoded
as DescribeQuorum v2 and decoded.
"""

from __future__ import annotations

import hashlib
import random
import uuid

from kraft.core.quorum_info import QuorumDescription, ReplicaDescription
from kraft.errors import ErrorCode
from kraft.ids import DirectoryId, Epoch, NodeId, Offset, ReplicaKey
from kraft.protocol import ApiKey, decode_response, encode_response
from kraft.protocol.rpc import describe_quorum_from_wire, describe_quorum_response, in_kafka_order

# The fewest entries for which a default HashMap has 65536 buckets.
OBSERVERS = 24577
LEADER = NodeId(1)


def observer_keys() -> list[ReplicaKey]:
    """The observers in the order of their first Fetches: ids 100 up, random directory ids
    (about half of them with bit 63 of `most ^ least` set)."""
    rng = random.Random(853)
    return [
        ReplicaKey(NodeId(100 + i), DirectoryId(uuid.UUID(int=rng.getrandbits(128))))
        for i in range(OBSERVERS)
    ]


def java_input() -> str:
    """observer_keys() as tests/interop/java/ReplicaKeySetOrder.java reads them (one line)."""
    return " ".join(f"{k.id}:{k.directory_id}" for k in observer_keys())


# Java 17 with Kafka 4.3.1's jars printed this set (a HashSet<ReplicaKey>, which iterates as
# a HashMap with the same puts), from the repository root:
#   PYTHONPATH=tests/scenarios python -c \
#     'import test_describe_quorum_observer_order_scenarios as t; print(t.java_input())' \
#     > /tmp/keys.txt
#   java -cp 'tools/kafka/libs/*' tests/interop/java/ReplicaKeySetOrder.java /tmp/keys.txt \
#     > /tmp/java.txt
# The ids of its first and last eight keys, and the SHA-256 of its one line (without the
# newline: `head -1 /tmp/java.txt | tr -d '\n' | sha256sum`).
JAVA_FIRST = (5494, 21029, 23534, 20088, 15802, 8265, 15999, 17444)
JAVA_LAST = (13619, 14890, 16696, 6519, 15890, 10574, 3614, 11448)
JAVA_SHA256 = "061ce9ec2c5f5c902dd4f8a30f2eb67ab902d9ef3820bdb6103882b57ca70fd7"


def test_describe_quorum_lists_24577_observers_in_javas_hash_map_order() -> None:
    voter = ReplicaDescription(ReplicaKey(LEADER), 10, 1000, 1000)
    observers = tuple(ReplicaDescription(k, 10, 1000, 1000) for k in observer_keys())
    desc = QuorumDescription(LEADER, Epoch(2), Offset(10), (voter,), observers)
    body = describe_quorum_response(in_kafka_order(desc), 2)
    wire = encode_response(ApiKey.DESCRIBE_QUORUM, 2, body)
    error, answered = describe_quorum_from_wire(2, decode_response(ApiKey.DESCRIBE_QUORUM, 2, wire))
    assert error is ErrorCode.NONE and answered is not None
    listed = [r.replica for r in answered.observers]
    assert sorted(listed) == sorted(observer_keys())  # every observer, once
    assert tuple(k.id for k in listed[:8]) == JAVA_FIRST
    assert tuple(k.id for k in listed[-8:]) == JAVA_LAST
    printed = "[" + ", ".join(k.kafka_text() for k in listed) + "]"
    assert hashlib.sha256(printed.encode()).hexdigest() == JAVA_SHA256
