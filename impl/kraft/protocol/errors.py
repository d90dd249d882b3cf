"""Typed protocol errors, each carrying the Kafka error code a peer should see for it."""

from __future__ import annotations

from typing import ClassVar

from kraft.errors import ErrorCode, KraftError


class ProtocolError(KraftError):
    """Base of every error the wire-protocol layer raises; `error_code` is the Kafka code."""

    error_code: ClassVar[ErrorCode] = ErrorCode.INVALID_REQUEST


class InvalidRequestError(ProtocolError):
    """The bytes do not form a request this node can parse (Kafka closes the connection)."""

    error_code: ClassVar[ErrorCode] = ErrorCode.INVALID_REQUEST


class MalformedMessageError(ProtocolError):
    """A message body or header is truncated, oversized, or otherwise not of the format."""


class MalformedRequestError(MalformedMessageError, InvalidRequestError):
    """A request that does not parse: INVALID_REQUEST, as Kafka's request parser answers."""

    error_code: ClassVar[ErrorCode] = ErrorCode.INVALID_REQUEST


class MalformedResponseError(MalformedMessageError):
    """A response that does not parse: the client treats the bytes as corrupt."""

    error_code: ClassVar[ErrorCode] = ErrorCode.CORRUPT_MESSAGE


class UnknownApiKeyError(InvalidRequestError):
    """An API key this node does not implement."""

    def __init__(self, api_key: int) -> None:
        super().__init__(f"unknown API key {api_key}")
        self.api_key = api_key


class UnsupportedVersionError(ProtocolError):
    """A known API at a version outside the supported range."""

    error_code: ClassVar[ErrorCode] = ErrorCode.UNSUPPORTED_VERSION

    def __init__(self, api_key: int, version: int) -> None:
        super().__init__(f"API key {api_key} has no supported version {version}")
        self.api_key = api_key
        self.version = version


class FrameError(InvalidRequestError):
    """A size prefix that is negative or above the configured maximum."""

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"frame size {size} is outside [0, {max_size}]")
        self.size = size
        self.max_size = max_size


class EncodeError(ProtocolError):
    """A message value that cannot be written (wrong type, out of range, non-null required).

    This is a bug on the sending side, not something a peer did, hence UNKNOWN_SERVER_ERROR.
    """

    error_code: ClassVar[ErrorCode] = ErrorCode.UNKNOWN_SERVER_ERROR
