"""The order in which Java's HashMap and HashSet iterate, where Kafka lets it show: its
voter-change errors print a HashSet of ReplicaKey (VoterSet.voterKeys), so that Kafka's
tools print, from a kraft leader, the text they print from a Kafka leader.

A HashMap (and a HashSet, which is one) with the default capacity 16 and load factor 0.75
doubles its table whenever its size passes three quarters of it; it iterates bucket by
bucket, a bucket being the key's hash spread (`h ^ (h >>> 16)`) masked by the table size,
and the keys of one bucket in the order they were put (a resize keeps that order; buckets
of 8 keys or more, which Kafka's few voters never make, would become trees). The hashes are
Java's: Integer's is its value; Kafka's Uuid hashes to `(int)(h >> 32) ^ (int) h` of
`h = most ^ least` significant 64 bits; ReplicaKey's is `Objects.hash(id, directoryId)`
with the directory an Optional (empty: 0).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from kraft.ids import NO_DIRECTORY, DirectoryId, ReplicaKey

T = TypeVar("T")

_DEFAULT_CAPACITY = 16
_MASK64 = (1 << 64) - 1


def int32(x: int) -> int:
    """Java's int overflow: the low 32 bits, signed."""
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


def uuid_hash(directory: DirectoryId) -> int:
    """Kafka's Uuid.hashCode."""
    h = ((directory.int >> 64) ^ directory.int) & _MASK64
    return int32((h >> 32) ^ h)


def replica_key_hash(key: ReplicaKey) -> int:
    """Kafka's ReplicaKey.hashCode: Objects.hash(id, Optional<Uuid> directoryId)."""
    directory = 0 if key.directory_id == NO_DIRECTORY else uuid_hash(key.directory_id)
    return int32(31 * (31 + int(key.id)) + directory)


def hash_order(items: Iterable[T], hash_of: Callable[[T], int]) -> list[T]:
    """`items`, put in this order into a default HashMap/HashSet, in its iteration order."""
    put = list(items)
    capacity = _DEFAULT_CAPACITY
    while len(put) > capacity * 3 // 4:
        capacity *= 2

    def bucket(item: T) -> int:
        h = hash_of(item) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(put, key=bucket)  # stable: a bucket keeps the order of its puts


def voter_keys_text(voters: Iterable[ReplicaKey]) -> str:
    """A voter set as Kafka's errors print it: VoterSet.voterKeys(), a HashSet filled from the
    voters in id order (the order of VoterSet's own HashMap for ids below its table size)."""
    ordered = hash_order(sorted(voters), replica_key_hash)
    return "[" + ", ".join(k.kafka_text() for k in ordered) + "]"
