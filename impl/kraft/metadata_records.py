"""Kafka's metadata record framing, so that what kraft commits can be replayed by a Kafka
controller sharing the quorum (it decodes every committed data record as a metadata record).

A metadata record's value (MetadataRecordSerde, via AbstractApiMessageSerde) is:

    frame version   unsigned varint, 1
    api key         unsigned varint, the record type (NoOpRecord = 20, ...)
    version         unsigned varint, the record's schema version
    body            the record in its flexible-version encoding (tagged fields last)

and the record's key is null. NoOpRecord v0 has no fields, so its whole value is 01 14 00 00.

A Kafka controller cannot build a metadata image before it has read the metadata.version
FeatureLevelRecord (it exits: "Unknown metadata version for FeaturesImage"). A Kafka leader
writes one from its bootstrap checkpoint when the log is empty; a kraft leader does not, so a
quorum that a Kafka controller is to join needs `feature_level_record("metadata.version", N)`
committed first (`kraft append --metadata-version N`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kraft.errors import KraftError
from kraft.protocol.wire import WireFormatError, read_uvarint, uvarint

__all__ = [
    "FEATURE_LEVEL_RECORD",
    "METADATA_FRAME_VERSION",
    "METADATA_VERSION_FEATURE",
    "NO_OP_RECORD",
    "REGISTER_CONTROLLER_RECORD",
    "MetadataRecordError",
    "MetadataRecordHeader",
    "decode_feature_level_record",
    "decode_metadata_header",
    "decode_register_controller_id",
    "encode_metadata_record",
    "feature_level_record",
    "no_op_record",
]

METADATA_FRAME_VERSION: Final = 1
NO_OP_RECORD: Final = 20
FEATURE_LEVEL_RECORD: Final = 12
REGISTER_CONTROLLER_RECORD: Final = 27
METADATA_VERSION_FEATURE: Final = "metadata.version"
_EMPTY_TAGGED_FIELDS: Final = b"\x00"


class MetadataRecordError(KraftError):
    """A value that is not a framed metadata record."""


@dataclass(frozen=True, slots=True)
class MetadataRecordHeader:
    api_key: int
    version: int
    body_offset: int


def encode_metadata_record(api_key: int, version: int, body: bytes) -> bytes:
    """The framed value of a metadata record whose encoded body is `body`."""
    if not 0 <= api_key <= 0x7FFF or not 0 <= version <= 0x7FFF:
        raise ValueError(f"api key {api_key} and version {version} must fit an int16")
    return uvarint(METADATA_FRAME_VERSION) + uvarint(api_key) + uvarint(version) + body


def no_op_record() -> bytes:
    """A NoOpRecord (v0): what a Kafka controller appends to show it is alive."""
    return encode_metadata_record(NO_OP_RECORD, 0, _EMPTY_TAGGED_FIELDS)


def feature_level_record(name: str, level: int) -> bytes:
    """A FeatureLevelRecord (v0): Name (compact string), FeatureLevel (int16), tagged fields."""
    if not 0 <= level <= 0x7FFF:
        raise ValueError(f"feature level {level} does not fit an int16")
    raw = name.encode("utf-8")
    body = uvarint(len(raw) + 1) + raw + level.to_bytes(2, "big") + _EMPTY_TAGGED_FIELDS
    return encode_metadata_record(FEATURE_LEVEL_RECORD, 0, body)


def decode_metadata_header(value: bytes) -> MetadataRecordHeader:
    """The record type and version of a framed metadata record value."""
    view = memoryview(value)
    try:
        frame, pos = read_uvarint(view, 0)
        api_key, pos = read_uvarint(view, pos)
        version, pos = read_uvarint(view, pos)
    except (WireFormatError, IndexError) as e:
        raise MetadataRecordError(f"truncated metadata record header: {e}") from None
    if frame != METADATA_FRAME_VERSION:
        raise MetadataRecordError(f"metadata record frame version {frame}, expected 1")
    return MetadataRecordHeader(api_key, version, pos)


def decode_feature_level_record(value: bytes) -> tuple[str, int]:
    """The (feature name, level) of a framed FeatureLevelRecord v0 value (level 0: the
    feature is removed). Tagged fields after the level are skipped."""
    header = decode_metadata_header(value)
    if header.api_key != FEATURE_LEVEL_RECORD:
        raise MetadataRecordError(f"record type {header.api_key} is not a FeatureLevelRecord")
    if header.version != 0:
        raise MetadataRecordError(f"FeatureLevelRecord version {header.version} is not known")
    view = memoryview(value)
    try:
        length, pos = read_uvarint(view, header.body_offset)
    except (WireFormatError, IndexError) as e:
        raise MetadataRecordError(f"truncated FeatureLevelRecord: {e}") from None
    end = pos + length - 1
    if length == 0 or end + 2 > len(value):
        raise MetadataRecordError("FeatureLevelRecord: bad or truncated name")
    try:
        name = bytes(view[pos:end]).decode("utf-8")
    except UnicodeDecodeError as e:
        raise MetadataRecordError(f"FeatureLevelRecord: name is not UTF-8: {e}") from None
    return name, int.from_bytes(value[end : end + 2], "big", signed=True)


def decode_register_controller_id(value: bytes) -> int:
    """The ControllerId (int32, its first field) of a framed RegisterControllerRecord v0."""
    header = decode_metadata_header(value)
    if header.api_key != REGISTER_CONTROLLER_RECORD or header.version != 0:
        raise MetadataRecordError(
            f"record type {header.api_key} v{header.version} is not a RegisterControllerRecord v0"
        )
    start = header.body_offset
    if start + 4 > len(value):
        raise MetadataRecordError("truncated RegisterControllerRecord")
    return int.from_bytes(value[start : start + 4], "big", signed=True)
