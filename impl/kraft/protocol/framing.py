"""Size-prefixed frames: every Kafka request and response is an int32 length then that many
bytes. `FrameDecoder` turns arbitrary chunks (as a socket or asyncio delivers them) into whole
frames and refuses a negative size or one above its maximum before buffering the body."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final

from kraft.protocol.errors import FrameError

DEFAULT_MAX_FRAME_SIZE: Final = 8 * 1024 * 1024
_SIZE: Final = struct.Struct(">i")


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """Prefix one payload with its int32 size."""
    return _SIZE.pack(len(payload)) + payload


def frame_parts(parts: Iterable[bytes]) -> bytes:
    """One frame from several pieces (e.g. header and body), joined once."""
    pieces = list(parts)
    return _SIZE.pack(sum(len(p) for p in pieces)) + b"".join(pieces)


class FrameDecoder:
    """Incremental splitter of a byte stream into frames. After a FrameError it stays failed:
    the stream has lost its framing and the connection must be closed."""

    __slots__ = ("_buf", "_failed", "_need", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._need = -1  # body size of the frame in progress, -1 while reading its prefix
        self._failed: FrameError | None = None

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Add a chunk; return every frame it completes, in order."""
        if self._failed is not None:
            raise self._failed
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos = 0
        while True:
            if self._need < 0:
                if len(buf) - pos < 4:
                    break
                (size,) = _SIZE.unpack_from(buf, pos)
                if size < 0 or size > self.max_frame_size:
                    self._failed = FrameError(size, self.max_frame_size)
                    del buf[:]
                    raise self._failed
                pos += 4
                self._need = size
            if len(buf) - pos < self._need:
                break
            frames.append(bytes(buf[pos : pos + self._need]))
            pos += self._need
            self._need = -1
        if pos:
            del buf[:pos]
        return frames
