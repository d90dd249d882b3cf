"""The texts of a leader's voter-change refusals, checked against Kafka's: its AddVoterHandler
answers DUPLICATE_VOTER with "The voter id for <key> is already part of the set of voters
<set>." and its RemoveVoterHandler answers VOTER_NOT_FOUND with "Cannot remove voter <key>
from the set of voters <set>", where <set> is VoterSet.voterKeys(), a java.util.HashSet of
ReplicaKey, printed in that HashSet's iteration order (Kafka's tools show these texts).

- VoterChangeRefusalText: such a refusal carries that text, the set being the latest voter
  set of the refusing replica's log.

The HashSet's order is computed here by a literal model of java.util.HashMap (the table, the
spread hash, the resize that doubles the table at three quarters full and keeps each bucket's
order), from Java's own hash codes (Integer's, Kafka's Uuid's from its two longs, ReplicaKey's
Objects.hash(id, Optional<Uuid>)), written apart from kraft.core.java_order, the code it
checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from kraft.errors import ErrorCode
from kraft.ids import NO_DIRECTORY, DirectoryId, NodeId, ReplicaKey
from refinement.invariants import Violation

VOTER_CHANGE_REFUSAL_TEXT = "VoterChangeRefusalText"

T = TypeVar("T")

_INT = 1 << 32


def _java_int(x: int) -> int:
    """Java's int arithmetic: wrap to 32 bits, signed."""
    x %= _INT
    return x - _INT if x >= 1 << 31 else x


def java_uuid_hash(directory: DirectoryId) -> int:
    """org.apache.kafka.common.Uuid.hashCode: h = most ^ least significant bits (a long);
    (int) (h >> 32) ^ (int) h."""
    most, least = directory.int >> 64, directory.int % (1 << 64)
    h = most ^ least
    return _java_int((h >> 32) ^ h)


def java_replica_key_hash(key: ReplicaKey) -> int:
    """ReplicaKey.hashCode = Objects.hash(id, directoryId) = Arrays.hashCode of the two:
    31 * (31 * 1 + id.hashCode()) + directoryId.hashCode(), an empty Optional hashing to 0."""
    optional = 0 if key.directory_id == NO_DIRECTORY else java_uuid_hash(key.directory_id)
    return _java_int(31 * _java_int(31 + int(key.id)) + optional)


def java_hash_set(items: Iterable[T], hash_code: Callable[[T], int]) -> list[T]:
    """`items` added one by one to a new java.util.HashSet (a HashMap of initial capacity 16,
    load factor 0.75), then iterated."""
    table: list[list[T]] = [[] for _ in range(16)]
    size = 0

    def index(item: T, n: int) -> int:
        h = hash_code(item) % _INT  # the int's bits
        return (h ^ (h >> 16)) & (n - 1)

    for item in items:
        bucket = table[index(item, len(table))]
        if item in bucket:
            continue
        bucket.append(item)
        if len(bucket) >= 8:
            raise ValueError("a bucket of 8 keys would become a tree: not modelled")
        size += 1
        if size > len(table) * 3 // 4:  # resize(): each bucket splits, keeping its order
            grown: list[list[T]] = [[] for _ in range(2 * len(table))]
            for old in table:
                for moved in old:
                    grown[index(moved, len(grown))].append(moved)
            table = grown
    return [item for bucket in table for item in bucket]


def kafka_voter_keys_text(voters: Sequence[ReplicaKey]) -> str:
    """VoterSet.voterKeys().toString(): the voters' keys put into a HashSet in id order
    (the order of VoterSet's HashMap by id for the small ids of a quorum; the order
    tests/interop/test_java_order_kafka.py checks against Java itself)."""
    keys = java_hash_set(sorted(voters, key=lambda k: k.id), java_replica_key_hash)
    return "[" + ", ".join(k.kafka_text() for k in keys) + "]"


def voter_change_refusal_text(
    node: NodeId,
    voter: ReplicaKey,
    add: bool,
    error: ErrorCode,
    *,
    message: str | None,
    voters: Sequence[ReplicaKey] | None,
) -> Violation | None:
    """`node`'s answer (`error`, `message`) to adding (`add`) or removing `voter`, its log's
    latest voter set being `voters` (None: unknown, nothing checked)."""
    if voters is None:
        return None
    if add and error is ErrorCode.DUPLICATE_VOTER:
        expected = (
            f"The voter id for {voter.kafka_text()} is already part of the set of voters"
            f" {kafka_voter_keys_text(voters)}."
        )
    elif not add and error is ErrorCode.VOTER_NOT_FOUND:
        expected = (
            f"Cannot remove voter {voter.kafka_text()} from the set of voters"
            f" {kafka_voter_keys_text(voters)}"
        )
    else:
        return None
    if message == expected:
        return None
    return Violation(
        VOTER_CHANGE_REFUSAL_TEXT,
        f"node {node} answered {error.name} with {message!r}; Kafka's text is {expected!r}",
    )
