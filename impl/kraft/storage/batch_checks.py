"""The checks an append passes before either log stores it, shared by `SegmentedLog` and
`MemoryLog`: full validation of batches fetched from a leader, the cheap checks of a batch this
replica's core encoded as leader, and the verification of batches read back."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kraft.ids import Epoch, Offset
from kraft.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    CorruptRecordError,
    iter_batches,
    parse_batch_header,
    verify_crc,
)
from kraft.storage.replicated_log import (
    AppendInfo,
    AppendViolation,
    CorruptLogError,
    LogAppendError,
)

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta: the
# first 27 bytes of a v2 batch header, in order, big-endian and unpadded.
_HEAD = struct.Struct(">qiibIhi")


@dataclass(frozen=True, slots=True)
class ValidatedBatch:
    position: int
    base_offset: int
    next_offset: int
    epoch: int
    size: int


def validate_follower_data(
    data: bytes | memoryview, end_offset: int, last_epoch: int
) -> list[ValidatedBatch]:
    """Check whole batches for CRC, contiguity from end_offset and non-decreasing epochs."""
    if len(data) == 0:
        raise LogAppendError(AppendViolation.EMPTY, "no batches")
    out: list[ValidatedBatch] = []
    pos = 0
    expected = end_offset
    epoch_floor = last_epoch
    while pos < len(data):
        try:
            header = parse_batch_header(data, pos)
            verify_crc(data, pos, header)
        except CorruptRecordError as exc:
            raise LogAppendError(AppendViolation.CORRUPT_BATCH, str(exc)) from exc
        if header.base_offset != expected:
            raise LogAppendError(
                AppendViolation.NOT_CONTIGUOUS,
                f"batch at position {pos} has base offset {header.base_offset}, "
                f"expected {expected}",
            )
        epoch = header.partition_leader_epoch
        if epoch < epoch_floor:
            raise LogAppendError(
                AppendViolation.EPOCH_DECREASED,
                f"batch at offset {header.base_offset} has epoch {epoch} < {epoch_floor}",
            )
        size = header.size_in_bytes
        out.append(ValidatedBatch(pos, header.base_offset, header.next_offset, epoch, size))
        expected = header.next_offset
        epoch_floor = epoch
        pos += size
    return out


def leader_encoded_batch(
    data: bytes | memoryview,
    first_offset: Offset,
    last_offset: Offset,
    epoch: Epoch,
    *,
    end_offset: int,
    last_epoch: int,
) -> ValidatedBatch:
    """The one batch a leader's core encoded, checked in constant time: it starts at the log
    end, its epoch does not go back, and its fixed header fields agree with the offsets and
    epoch the core announced and with the length of `data`. Neither the records nor the CRC
    are read: the core wrote them a moment ago (a fetched batch gets the full check)."""
    size = len(data)
    if size == 0:
        raise LogAppendError(AppendViolation.EMPTY, "no batches")
    if first_offset != end_offset:
        raise LogAppendError(
            AppendViolation.NOT_CONTIGUOUS,
            f"leader batch at offset {first_offset}, log end is {end_offset}",
        )
    check_leader_epoch(epoch, Epoch(last_epoch))
    if size < BATCH_HEADER_SIZE:
        raise LogAppendError(AppendViolation.CORRUPT_BATCH, f"{size} bytes is below one header")
    base, length, batch_epoch, magic, _crc, _attributes, last_delta = _HEAD.unpack_from(data, 0)
    if (
        magic != MAGIC
        or base != first_offset
        or length + LOG_OVERHEAD != size
        or batch_epoch != epoch
        or last_delta < 0
        or base + last_delta != last_offset
    ):
        raise LogAppendError(
            AppendViolation.CORRUPT_BATCH,
            f"leader batch header (base {base}, length {length}, epoch {batch_epoch}, magic "
            f"{magic}, last delta {last_delta}) disagrees with [{first_offset}, {last_offset}] "
            f"epoch {epoch} in {size} bytes",
        )
    return ValidatedBatch(0, base, base + last_delta + 1, batch_epoch, size)


def check_leader_epoch(epoch: Epoch, last_epoch: Epoch) -> None:
    if epoch < 0 or epoch < last_epoch:
        raise LogAppendError(
            AppendViolation.EPOCH_DECREASED, f"leader epoch {epoch} < last epoch {last_epoch}"
        )


def batch_from_encoded(data: bytes) -> ValidatedBatch:
    header = parse_batch_header(data, 0)
    return ValidatedBatch(
        0, header.base_offset, header.next_offset, header.partition_leader_epoch, len(data)
    )


def info_of(batches: Sequence[ValidatedBatch]) -> AppendInfo:
    return AppendInfo(
        first_offset=Offset(batches[0].base_offset),
        last_offset=Offset(batches[-1].next_offset - 1),
        last_epoch=Epoch(batches[-1].epoch),
        batches=len(batches),
        bytes=sum(b.size for b in batches),
    )


def verify_batches(data: memoryview | bytes, path: Path, position: int) -> None:
    """Check every batch of `data` (read from `path` at byte `position`): CorruptLogError at
    the first one whose header or CRC is bad."""
    good = 0
    try:
        for pos, header in iter_batches(data):
            good = pos + header.length + LOG_OVERHEAD
    except CorruptRecordError as e:
        raise CorruptLogError(path, position + good, f"batch fails validation: {e}") from None


__all__ = [
    "ValidatedBatch",
    "batch_from_encoded",
    "check_leader_epoch",
    "info_of",
    "leader_encoded_batch",
    "validate_follower_data",
    "verify_batches",
]
