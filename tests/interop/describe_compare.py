"""Comparing `kraft quorum describe` with Kafka's kafka-metadata-quorum describe, run one after
the other on the same quorum: the same lines, the same columns and padding, the same values,
except the cells that may move between the two runs (timestamps and lag times always; the
offsets too when the leader is a Kafka controller, which appends a NoOp record every
`metadata.max.idle.interval.ms`). Those must still be integers of the same kind (-1, "never",
on both sides or on neither) and, in the table, of the same width."""

from __future__ import annotations

import json
import re

STATUS_KEYS = (
    "ClusterId",
    "LeaderId",
    "LeaderEpoch",
    "HighWatermark",
    "MaxFollowerLag",
    "MaxFollowerLagTimeMs",
    "CurrentVoters",
    "CurrentObservers",
)
REPLICATION_HEADER = (
    "NodeId",
    "DirectoryId",
    "LogEndOffset",
    "Lag",
    "LastFetchTimestamp",
    "LastCaughtUpTimestamp",
    "Status",
)
# Columns of the table that are times (and, with `moving` offsets, offsets).
_TIMES = (4, 5)
_OFFSETS = (2, 3)
_INT = re.compile(r"-?\d+( ms ago)?")


def status_fields(text: str) -> dict[str, str]:
    """`--status` output as {field: value}, in the printed order."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def voter_ids(fields: dict[str, str]) -> list[int]:
    return sorted(v["id"] for v in json.loads(fields["CurrentVoters"]))


def observer_ids(fields: dict[str, str]) -> list[int]:
    return sorted(v["id"] for v in json.loads(fields["CurrentObservers"]))


def _same_kind(a: str, b: str, what: str) -> None:
    """Two integers (or `--human-readable`'s "N ms ago") of the same form, -1 on both sides
    or on neither."""
    x, y = _INT.fullmatch(a), _INT.fullmatch(b)
    assert x and y and x.group(1) == y.group(1), f"{what}: {a!r} / {b!r}"
    assert (a == "-1") == (b == "-1"), f"{what}: {a!r} / {b!r}"


def assert_same_status(ours: str, theirs: str, *, moving: bool = False) -> None:
    """--status: line for line (each name padded to 24 columns, Kafka's layout), the values
    exactly but MaxFollowerLagTimeMs (and the HWM and lag when `moving`)."""
    both = f"kafka:\n{theirs}\nkraft:\n{ours}"
    mine, kafka = ours.rstrip("\n").split("\n"), theirs.rstrip("\n").split("\n")
    assert len(mine) == len(kafka) == len(STATUS_KEYS), both
    loose = {"MaxFollowerLagTimeMs"} | ({"HighWatermark", "MaxFollowerLag"} if moving else set())
    for key, a, b in zip(STATUS_KEYS, mine, kafka, strict=True):
        prefix = f"{key + ':':<24}"
        assert a.startswith(prefix) and b.startswith(prefix), f"{key}\n{both}"
        if key in loose:
            _same_kind(a[24:], b[24:], key)
        else:
            assert a == b, f"{key}\n{both}"
    # What Kafka's tool prints must also be well-formed JSON lists of replicas.
    for key in ("CurrentVoters", "CurrentObservers"):
        assert isinstance(json.loads(status_fields(theirs)[key]), list)


def replication_rows(text: str) -> list[list[str]]:
    """The table's rows, each a list of its tab-terminated cells (padding kept)."""
    rows = []
    for line in text.rstrip("\n").split("\n"):
        cells = line.split("\t")
        assert cells[-1] == "", f"every cell ends with a tab: {line!r}"
        rows.append(cells[:-1])
    return rows


def assert_same_replication(ours: str, theirs: str, *, moving: bool = False) -> None:
    """--replication: the same header, rows in the same order (leader, followers, observers),
    every cell padded alike; equal cells but the times (and offsets when `moving`)."""
    both = f"kafka:\n{theirs}\nkraft:\n{ours}"
    mine, kafka = replication_rows(ours), replication_rows(theirs)
    assert [c.strip() for c in kafka[0]] == list(REPLICATION_HEADER), both
    assert len(mine) == len(kafka), both
    loose = _TIMES + (_OFFSETS if moving else ())
    for r, (a, b) in enumerate(zip(mine, kafka, strict=True)):
        assert len(a) == len(b) == len(REPLICATION_HEADER), both
        for c, (x, y) in enumerate(zip(a, b, strict=True)):
            if r > 0 and c in loose:
                _same_kind(x.strip(), y.strip(), f"row {r} {REPLICATION_HEADER[c]}\n{both}")
            else:
                assert x == y, f"row {r} {REPLICATION_HEADER[c]}\n{both}"
    # Padding: each table's cells of a column are as wide as its widest cell.
    for table in (mine, kafka):
        for c in range(len(REPLICATION_HEADER)):
            width = max(len(row[c].rstrip()) for row in table)
            assert all(len(row[c]) == width for row in table), both
