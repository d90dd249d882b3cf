"""Kafka protocol error codes used by KRaft (values as in Apache Kafka's Errors table)."""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    # Kafka's RecordBatchTooLargeException: an append too large for one batch.
    RECORD_LIST_TOO_LARGE = 18
    UNSUPPORTED_VERSION = 35
    # Kafka's answer when the log cannot be read (a damaged segment).
    KAFKA_STORAGE_ERROR = 56
    INVALID_REQUEST = 42
    # Idempotent appends (Kafka's producer errors): a gap, or a resend too old to tell.
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    INCONSISTENT_VOTER_SET = 94
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    INCONSISTENT_CLUSTER_ID = 104
    # KIP-919: DescribeCluster asked a controller about brokers (or an unknown endpoint type).
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    # KIP-853: a Vote/BeginQuorumEpoch addressed to another replica key (id + directory).
    INVALID_VOTER_KEY = 125
    # KIP-853: AddRaftVoter for an id already in the voter set.
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127


class KraftError(Exception):
    """Base class of every error this package raises on purpose."""
