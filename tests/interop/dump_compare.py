"""Batch header lines of Kafka's DumpLogSegments and of `kraft dump-log`, parsed for a
field-by-field comparison."""

from __future__ import annotations

import re
from pathlib import Path

from kafka_harness import DUMP_LOG_SEGMENTS, kraft_cli, run_tool

_PAIR = re.compile(r"(\w+): (\S+)")

# The fields both tools print for every batch (Kafka also prints lastSequence and
# deleteHorizonMs, which kraft does not).
HEADER_FIELDS = (
    "baseOffset",
    "lastOffset",
    "count",
    "baseSequence",
    "producerId",
    "producerEpoch",
    "partitionLeaderEpoch",
    "isTransactional",
    "isControl",
    "position",
    "CreateTime",
    "size",
    "magic",
    "compresscodec",
    "crc",
    "isvalid",
)


def header_lines(output: str) -> list[dict[str, str]]:
    return [
        dict(_PAIR.findall(line)) for line in output.splitlines() if line.startswith("baseOffset:")
    ]


def record_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("| offset:")]


def kafka_dump(root: Path, files: list[Path], *extra: str) -> str:
    done = run_tool(
        root,
        DUMP_LOG_SEGMENTS,
        [
            "--files",
            ",".join(str(f) for f in files),
            "--deep-iteration",
            "--print-data-log",
            *extra,
        ],
    )
    assert done.returncode == 0, f"DumpLogSegments failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def kraft_dump(files: list[Path]) -> str:
    done = kraft_cli("dump-log", "--print-records", *(str(f) for f in files))
    assert done.returncode == 0, f"kraft dump-log failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def per_file(output: str) -> dict[str, str]:
    """Split a dump of several files at its `Dumping <file>` lines."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in output.splitlines():
        if line.startswith("Dumping "):
            current = out.setdefault(Path(line.removeprefix("Dumping ").strip()).name, [])
        elif current is not None:
            current.append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def compare_headers(kafka_out: str, kraft_out: str) -> list[str]:
    """Differences between the two tools' batch header lines, field by field ([] if none)."""
    ka, kr = header_lines(kafka_out), header_lines(kraft_out)
    problems: list[str] = []
    if len(ka) != len(kr):
        problems.append(f"Kafka prints {len(ka)} batches, kraft {len(kr)}")
    for i, (a, b) in enumerate(zip(ka, kr, strict=False)):
        problems += [
            f"batch {i}: {f}: Kafka {a.get(f)!r}, kraft {b.get(f)!r}"
            for f in HEADER_FIELDS
            if a.get(f) != b.get(f)
        ]
    return problems
