"""kraft.core.java_order: Java's HashMap/HashSet iteration order and the hashes of Integer,
Kafka's Uuid and ReplicaKey, worked out by hand from their definitions (the interop test
test_kafka_voter_changes checks a Kafka leader's error text against them)."""

from __future__ import annotations

import uuid

from kraft.core.java_order import (
    hash_order,
    int32,
    replica_key_hash,
    uuid_hash,
    voter_keys_text,
)
from kraft.ids import NO_DIRECTORY, DirectoryId, NodeId, ReplicaKey


def _dir(most: int, least: int) -> DirectoryId:
    return DirectoryId(uuid.UUID(int=(most << 64) | least))


def test_int32_wraps_as_java_does() -> None:
    assert int32(2**31 - 1) == 2**31 - 1
    assert int32(2**31) == -(2**31)
    assert int32(-1) == -1
    assert int32(2**32 + 5) == 5


def test_uuid_hash_folds_the_two_halves() -> None:
    # h = most ^ least; (int)(h >> 32) ^ (int) h
    assert uuid_hash(_dir(0, 1)) == 1
    assert uuid_hash(_dir(1 << 32, 0)) == 1
    assert uuid_hash(_dir(1 << 32, 1)) == 0
    assert uuid_hash(_dir(0, 0xFFFFFFFF)) == -1
    assert uuid_hash(_dir(0xFFFFFFFF_00000000, 0)) == -1


def test_replica_key_hash_is_objects_hash_of_id_and_optional() -> None:
    # Objects.hash(a, b) = 31 * (31 * 1 + a.hashCode()) + b.hashCode(); Optional.empty() is 0.
    assert replica_key_hash(ReplicaKey(NodeId(1), NO_DIRECTORY)) == 31 * 32
    assert replica_key_hash(ReplicaKey(NodeId(1), _dir(0, 7))) == 31 * 32 + 7
    assert replica_key_hash(ReplicaKey(NodeId(2**31 - 1), _dir(0, 0x7FFFFFFF))) == int32(
        31 * (31 + 2**31 - 1) + 0x7FFFFFFF
    )


def test_a_hash_map_of_integers_iterates_by_bucket_then_insertion() -> None:
    # Capacity 16: 1 and 17 share bucket 1 (the order Kafka writes its --initial-controllers).
    assert hash_order([17, 3, 1, 2], lambda n: n) == [17, 1, 2, 3]
    assert hash_order([1, 17, 2, 3], lambda n: n) == [1, 17, 2, 3]
    # The spread mixes the high half in: 65536 lands in bucket 1, after 1 if put after it.
    assert hash_order([1, 65536, 0], lambda n: n) == [0, 1, 65536]
    # Thirteen keys pass 16 * 0.75: a table of 32, where 17 no longer shares 1's bucket.
    keys = [*range(1, 13), 17]
    assert hash_order(keys, lambda n: n) == keys
    assert hash_order([17, *range(1, 13)], lambda n: n) == [*range(1, 13), 17]
    assert hash_order([17, *range(1, 12)], lambda n: n) == [17, *range(1, 12)]


def test_voter_keys_print_as_kafkas_hash_set_does() -> None:
    a = ReplicaKey(NodeId(1), _dir(0, 15))  # hash 992 + 15 = 1007: bucket 15
    b = ReplicaKey(NodeId(2), _dir(0, 0))  # an all-zero id is "no directory": 1023, bucket 15
    c = ReplicaKey(NodeId(3), _dir(0, 2))  # 31 * 34 + 2 = 1056: bucket 0
    text = voter_keys_text([b, c, a])
    assert text == (
        "[ReplicaKey(id=3, directoryId=AAAAAAAAAAAAAAAAAAAAAg), "
        "ReplicaKey(id=1, directoryId=AAAAAAAAAAAAAAAAAAAADw), "
        "ReplicaKey(id=2, directoryId=<undefined>)]"
    )
