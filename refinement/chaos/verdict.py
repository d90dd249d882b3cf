"""The verdict of a chaos run: read every node's log back with kraft's own reader and hold it
against the writers' history.

- lost: an acknowledged value that is not at its acknowledged offset in the committed log
  (on any node); `lost_by_node` per node.
- identical: the committed prefixes (offsets below the final high watermark) of all nodes
  are the same records (offset, epoch, control or data, value).
- duplicated: values stored at more than one committed offset (`extra_copies` counts the
  surplus); appends are not idempotent yet, so a resend can do this.
- unacknowledged but present: values never acknowledged yet committed (their outcome was
  unknown to the writer); refused but present: every attempt was refused, yet it is there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kraft.ids import Offset
from kraft.records import decode_records, iter_batches
from kraft.storage.segmented_log import SegmentedLog
from refinement.chaos.writers import History, Outcome

__all__ = ["LogRecord", "Verdict", "judge", "percentile", "read_log"]

LogRecord = tuple[int, int, bool, bytes | None]  # offset, epoch, control, value


def read_log(data_dir: Path) -> list[LogRecord]:
    """Every record of the log under `data_dir` (opened, recovered, read, closed)."""
    out: list[LogRecord] = []
    with SegmentedLog.open(data_dir) as log:
        offset = log.start_offset
        while offset < log.end_offset:
            chunk = log.read(offset, 1 << 20)
            data = bytes(chunk.data)
            if not data:
                break
            for pos, header in iter_batches(data):
                epoch, control = header.partition_leader_epoch, header.is_control
                records = decode_records(data, pos, header)
                out.extend((r.offset, epoch, control, r.value) for r in records)
            offset = Offset(chunk.next_offset)
    return out


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, -(-len(ordered) * p // 100) - 1))
    return ordered[int(k)]


@dataclass
class Verdict:
    acknowledged: int = 0
    issued: int = 0
    committed_end: int = 0
    lost: int = 0
    lost_by_node: dict[int, int] = field(default_factory=dict)
    lost_examples: list[str] = field(default_factory=list)
    epoch_mismatch: int = 0
    identical: bool = True
    divergence: list[str] = field(default_factory=list)
    duplicated: int = 0
    extra_copies: int = 0
    duplicate_examples: list[str] = field(default_factory=list)
    unacked_present: int = 0
    refused_present: int = 0
    foreign: int = 0
    data_records: int = 0


def judge(history: History, logs: Mapping[int, list[LogRecord]], committed_end: int) -> Verdict:
    v = Verdict(acknowledged=len(history.acks), issued=len(history.issued))
    v.committed_end = committed_end
    committed = {n: [r for r in recs if r[0] < committed_end] for n, recs in logs.items()}
    nodes = sorted(committed)
    ref_node = nodes[0]
    ref = committed[ref_node]
    for n in nodes[1:]:
        other = committed[n]
        if other != ref:
            v.identical = False
            first = next(
                (i for i, (a, b) in enumerate(zip(ref, other, strict=False)) if a != b),
                min(len(ref), len(other)),
            )
            where = (
                ref[first][0]
                if first < len(ref)
                else (other[first][0] if first < len(other) else committed_end)
            )
            v.divergence.append(
                f"node {n} differs from node {ref_node} from offset {where} "
                f"({len(other)} vs {len(ref)} committed records)"
            )
    by_offset = {n: {r[0]: r for r in recs} for n, recs in committed.items()}
    for value, ack in history.acks.items():
        missing = [
            n
            for n in nodes
            if (rec := by_offset[n].get(ack.offset)) is None or rec[2] or rec[3] != value
        ]
        if missing:
            v.lost += 1
            for n in missing:
                v.lost_by_node[n] = v.lost_by_node.get(n, 0) + 1
            if len(v.lost_examples) < 5:
                v.lost_examples.append(
                    f"{value.decode(errors='replace')} acknowledged at offset {ack.offset} "
                    f"epoch {ack.epoch}, missing on nodes {missing}"
                )
        elif by_offset[ref_node][ack.offset][1] != ack.epoch:
            v.epoch_mismatch += 1
    data = [r for r in ref if not r[2]]
    v.data_records = len(data)
    copies = Counter(r[3] for r in data)
    issued = set(history.issued)
    outcomes: dict[bytes, set[Outcome]] = {}
    for a in history.attempts:
        outcomes.setdefault(a.value, set()).add(a.outcome)
    for stored, count in copies.items():
        if stored is None or stored not in issued:
            v.foreign += count
            continue
        if count > 1:
            v.duplicated += 1
            v.extra_copies += count - 1
            if len(v.duplicate_examples) < 5:
                offs = [r[0] for r in data if r[3] == stored]
                v.duplicate_examples.append(f"{stored.decode(errors='replace')} at {offs}")
        if stored not in history.acks:
            v.unacked_present += 1
            if outcomes.get(stored) == {Outcome.REFUSED}:
                v.refused_present += 1
    return v
