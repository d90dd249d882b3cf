"""A kraft node advertises the kraft.version range it supports in ApiVersions v4+
(supported_features, tag 0), as a Kafka controller does: a Kafka leader asked to add it as a
voter (KIP-853) refuses a voter that does not name kraft.version 1 there."""

from __future__ import annotations

from kraft.protocol import ApiKey, decode_response_payload, encode_response_payload
from kraft.protocol.api_versions import NODE_FEATURES, api_versions_response, node_features
from kraft.protocol.values import get_int, get_str, get_structs


def test_api_versions_v4_names_kraft_version_0_to_1() -> None:
    body = api_versions_response(apis={52: (0, 2)}, features=node_features(4))
    data = encode_response_payload(ApiKey.API_VERSIONS, 4, 5, body)
    _, decoded = decode_response_payload(ApiKey.API_VERSIONS, 4, data)
    features = {
        get_str(f, "name"): (get_int(f, "min_version"), get_int(f, "max_version"))
        for f in get_structs(decoded, "supported_features")
    }
    assert features == {"kraft.version": (0, 1)}
    # Without features, the bytes are those of an answer that names none (tagged field absent).
    plain = encode_response_payload(
        ApiKey.API_VERSIONS, 4, 5, api_versions_response(apis={52: (0, 2)})
    )
    assert len(data) > len(plain)
    # v2 has no tagged fields: the features are not sent.
    old = encode_response_payload(ApiKey.API_VERSIONS, 2, 5, body)
    assert old == encode_response_payload(
        ApiKey.API_VERSIONS, 2, 5, api_versions_response(apis={52: (0, 2)})
    )


def test_kraft_version_is_listed_from_v4_only_as_kafka_lists_it() -> None:
    """Kafka (KIP-1022) leaves a feature whose range starts at 0 out of answers below v4."""
    assert node_features(4) == NODE_FEATURES == (("kraft.version", 0, 1),)
    assert node_features(3) == ()
