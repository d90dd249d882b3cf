"""What this node supports, and the ApiVersions answers built from it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from kraft.errors import ErrorCode
from kraft.protocol.client_api import CLIENT_APIS
from kraft.protocol.envelope import encode_response_payload
from kraft.protocol.errors import UnknownApiKeyError, UnsupportedVersionError
from kraft.protocol.messages import API_VERSIONS, APIS
from kraft.protocol.values import MessageDict

SUPPORTED_APIS: Final[dict[int, tuple[int, int]]] = {
    key: (spec.versions.lo, spec.versions.hi) for key, spec in sorted(APIS.items())
}

# What a kraft node advertises: Kafka's APIs and our private ones. A Kafka client
# ignores keys it does not know; our client uses a private API only where it is advertised,
# so it never sends one to a Kafka node (which would close the connection).
NODE_APIS: Final[dict[int, tuple[int, int]]] = {
    **SUPPORTED_APIS,
    **{api.api_key: (api.versions.lo, api.versions.hi) for api in CLIENT_APIS},
}


def check_supported(api_key: int, api_version: int) -> None:
    """Raise UnknownApiKeyError or UnsupportedVersionError unless the pair is supported."""
    rng = SUPPORTED_APIS.get(api_key)
    if rng is None:
        raise UnknownApiKeyError(api_key)
    if not rng[0] <= api_version <= rng[1]:
        raise UnsupportedVersionError(api_key, api_version)


# The features a kraft node supports, advertised in ApiVersions v3+ (supported_features) as a
# Kafka controller does: a Kafka leader asked to add a voter (KIP-853) checks that the new
# voter supports the finalized kraft.version before it adds it.
NODE_FEATURES: Final[tuple[tuple[str, int, int], ...]] = (("kraft.version", 0, 1),)


def node_features(version: int) -> tuple[tuple[str, int, int], ...]:
    """What an ApiVersions answer of `version` lists (Kafka, KIP-1022): below v4 a feature
    whose range starts at 0 is left out (older clients cannot read such a range)."""
    return tuple(f for f in NODE_FEATURES if version >= 4 or f[1] > 0)


def api_versions_response(
    error_code: ErrorCode = ErrorCode.NONE,
    throttle_time_ms: int = 0,
    apis: Mapping[int, tuple[int, int]] = SUPPORTED_APIS,
    features: Sequence[tuple[str, int, int]] = (),
) -> MessageDict:
    body: MessageDict = {
        "error_code": int(error_code),
        "api_keys": [
            {"api_key": key, "min_version": lo, "max_version": hi}
            for key, (lo, hi) in sorted(apis.items())
        ],
        "throttle_time_ms": throttle_time_ms,
    }
    if features:
        body["supported_features"] = [
            {"name": name, "min_version": lo, "max_version": hi} for name, lo, hi in features
        ]
    return body


def api_versions_unsupported_reply(
    correlation_id: int, apis: Mapping[int, tuple[int, int]] = SUPPORTED_APIS
) -> bytes:
    """The unframed reply to an ApiVersions request of a version we do not support: Kafka
    answers it at version 0 (header v0) with UNSUPPORTED_VERSION and its full version table,
    so the client can retry at a version both sides know."""
    body = api_versions_response(ErrorCode.UNSUPPORTED_VERSION, apis=apis)
    return encode_response_payload(API_VERSIONS.api_key, 0, correlation_id, body)
