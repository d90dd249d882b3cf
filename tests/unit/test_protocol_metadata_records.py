"""Kafka's metadata record framing (MetadataRecordSerde), golden bytes from the format."""

from __future__ import annotations

import pytest

from kraft.metadata_records import (
    NO_OP_RECORD,
    MetadataRecordError,
    MetadataRecordHeader,
    decode_metadata_header,
    encode_metadata_record,
    feature_level_record,
    no_op_record,
)


def test_no_op_record_golden() -> None:
    assert no_op_record() == bytes.fromhex(
        "01"  # frame version 1 (unsigned varint)
        "14"  # api key 20: NoOpRecord
        "00"  # record version 0
        "00"  # body: no fields, an empty tagged-field section
    )
    assert decode_metadata_header(no_op_record()) == MetadataRecordHeader(NO_OP_RECORD, 0, 3)


def test_large_api_keys_are_varints() -> None:
    assert encode_metadata_record(200, 1, b"\x00") == bytes.fromhex("01 c801 01 00")


@pytest.mark.parametrize("value", [b"", b"\x01", b"\x01\x14", b"\x02\x14\x00\x00", b"\x01\xff"])
def test_not_a_metadata_record(value: bytes) -> None:
    with pytest.raises(MetadataRecordError):
        decode_metadata_header(value)


def test_feature_level_record_golden() -> None:
    """Kafka 4.3.1's MetadataRecordSerde writes FeatureLevelRecord(metadata.version, 30) so."""
    assert (
        feature_level_record("metadata.version", 30)
        == bytes.fromhex(
            "01"  # frame version
            "0c"  # api key 12: FeatureLevelRecord
            "00"  # version 0
            "11"
            + b"metadata.version".hex()  # Name: compact string of 16
            + "001e"  # FeatureLevel 30 (int16)
            "00"  # tagged fields
        )
    )
