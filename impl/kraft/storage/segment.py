"""One segment file of the segmented log: a `%020d.log` file of whole batches in Kafka's
format, its file descriptor and read-only mmap, and its sparse in-memory offset index."""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from array import array
from bisect import bisect_right
from pathlib import Path

from kraft.records import LOG_OVERHEAD

LOG_SUFFIX = ".log"
# A batch's base offset and length: its first 12 bytes.
OFFSET_AND_LENGTH = struct.Struct(">qi")
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_POS = 23
# A read within this many bytes of the end of a segment that grew since it was mapped copies
# that tail with pread instead of remapping the file: a follower fetching what was just
# appended would otherwise cost an munmap (with its TLB shootdown across the process's
# threads), an mmap and fresh page faults per read.
TAIL_READ_BYTES = 64 * 1024


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{LOG_SUFFIX}"


def write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data) :]


class Segment:
    """One `%020d.log` file plus its sparse in-memory offset index (base offset -> position)."""

    __slots__ = (
        "_map",
        "_map_len",
        "base_offset",
        "bytes_since_index",
        "fd",
        "index_offsets",
        "index_positions",
        "next_offset",
        "path",
        "size",
    )

    def __init__(self, path: Path, base_offset: int, *, create: bool) -> None:
        flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT | os.O_EXCL if create else 0)
        self.path = path
        self.fd = os.open(path, flags, 0o644)
        self.base_offset = base_offset
        self.next_offset = base_offset
        self.size = os.fstat(self.fd).st_size
        self.index_offsets = array("q")
        self.index_positions = array("q")
        self.bytes_since_index = 0
        self._map: mmap.mmap | None = None
        self._map_len = 0

    def note_batch(self, position: int, base_offset: int, size: int, interval: int) -> None:
        """Index the batch at `position` if `interval` bytes were written since the last entry."""
        if not self.index_offsets or self.bytes_since_index >= interval:
            self.index_offsets.append(base_offset)
            self.index_positions.append(position)
            self.bytes_since_index = 0
        self.bytes_since_index += size

    def view(self) -> memoryview:
        """A read-only view of the whole file (remapped when the file grew)."""
        if self._map is None or self._map_len < self.size:
            self.drop_map()
            self._map = mmap.mmap(self.fd, self.size, prot=mmap.PROT_READ)
            self._map_len = self.size
        return memoryview(self._map)[: self.size]

    def drop_map(self) -> None:
        if self._map is not None:
            # A view still held by a caller keeps the mapping alive until it is released.
            with contextlib.suppress(BufferError):
                self._map.close()
            self._map = None
            self._map_len = 0

    def truncate(self, size: int, next_offset: int) -> None:
        self.drop_map()
        os.ftruncate(self.fd, size)
        self.size = size
        self.next_offset = next_offset
        keep = bisect_right(self.index_positions, size - 1) if size > 0 else 0
        del self.index_offsets[keep:]
        del self.index_positions[keep:]
        # Conservative: the next batch gets an entry of its own.
        self.bytes_since_index = 1 << 62 if keep else 0

    def _window(self, pos: int) -> tuple[memoryview, int]:
        """A buffer of the file from `pos` (or earlier) to its end, and the file position of
        its first byte: the mapping while it covers the file, else a copy of a short tail
        (TAIL_READ_BYTES), else the file remapped."""
        if self._map is not None and self._map_len >= self.size:
            return memoryview(self._map)[: self.size], 0
        if self.size - pos <= TAIL_READ_BYTES:
            return memoryview(os.pread(self.fd, self.size - pos, pos)), pos
        return self.view(), 0

    def locate(self, offset: int, max_bytes: int) -> tuple[int, int, int, int]:
        """(start position, end position, first base offset, next offset) of a read."""
        start, end, first, nxt, _ = self._locate(offset, max_bytes)
        return start, end, first, nxt

    def read(self, offset: int, max_bytes: int) -> tuple[int, memoryview, int, int]:
        """(start position, the bytes, first base offset, next offset) of a read of whole
        batches from the one holding `offset`: a view of the mapped file, or of a copy of its
        tail (see _window)."""
        start, end, first, nxt, (buf, at) = self._locate(offset, max_bytes)
        return start, buf[start - at : end - at], first, nxt

    def _locate(
        self, offset: int, max_bytes: int
    ) -> tuple[int, int, int, int, tuple[memoryview, int]]:
        i = bisect_right(self.index_offsets, offset) - 1
        pos = self.index_positions[max(i, 0)]
        window = self._window(pos)
        buf, at = window
        while True:
            base, length = OFFSET_AND_LENGTH.unpack_from(buf, pos - at)
            last = base + _LAST_OFFSET_DELTA.unpack_from(buf, pos - at + _LAST_OFFSET_DELTA_POS)[0]
            if last >= offset:
                break
            pos += length + LOG_OVERHEAD
        start, first_base = pos, base
        first_end = start + length + LOG_OVERHEAD
        bound = start + max(max_bytes, 0)
        if bound >= self.size:
            return start, self.size, first_base, self.next_offset, window
        j = bisect_right(self.index_positions, bound) - 1
        pos = max(self.index_positions[j], first_end) if j >= 0 else first_end
        while pos < bound:
            size = OFFSET_AND_LENGTH.unpack_from(buf, pos - at)[1] + LOG_OVERHEAD
            if pos + size > bound:
                break
            pos += size
        end = max(pos, first_end)
        if end >= self.size:
            return start, self.size, first_base, self.next_offset, window
        next_base = OFFSET_AND_LENGTH.unpack_from(buf, end - at)[0]
        return start, end, first_base, next_base, window

    def close(self) -> None:
        self.drop_map()
        os.close(self.fd)


__all__ = ["LOG_SUFFIX", "OFFSET_AND_LENGTH", "Segment", "segment_name", "write_all"]
