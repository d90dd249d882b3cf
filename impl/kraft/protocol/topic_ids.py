"""Kafka's text form of UUIDs and the fixed identity of KRaft's metadata partition."""

from __future__ import annotations

import base64
import binascii
import uuid
from typing import Final

# Apache Kafka's Uuid.METADATA_TOPIC_ID is the UUID with most-significant bits 0, least 1.
METADATA_TOPIC_NAME: Final = "__cluster_metadata"
METADATA_TOPIC_ID: Final = uuid.UUID(int=1)
METADATA_PARTITION: Final = 0


def uuid_to_base64(u: uuid.UUID) -> str:
    """Kafka prints a UUID as URL-safe base64 of its 16 bytes, without padding."""
    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


def uuid_from_base64(text: str) -> uuid.UUID:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"not a Kafka UUID: {text!r}") from e
    if len(raw) != 16:
        raise ValueError(f"not a Kafka UUID: {text!r}")
    return uuid.UUID(bytes=raw)
