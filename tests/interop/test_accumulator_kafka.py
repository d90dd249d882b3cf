"""kraft's accumulator against Kafka's own: the same scripts of appends and passing lingers run
through Kafka 4.3.1's BatchAccumulator (tests/interop/java/BatchAccumulatorRun.java, one JVM
run) and through a kraft leader with the same linger, 25 ms, must refuse the same appends
(Kafka's RecordBatchTooLargeException, our RECORD_LIST_TOO_LARGE) and write the same batches
at the same steps: at the linger, or at once when an append does not fit beside what waits.

kraft measures a record's framing by Kafka's bound (DefaultRecord.MAX_RECORD_OVERHEAD) where
Kafka counts it exactly, so a batch near the limit may end sooner in kraft. The scripts keep
away from that edge: values are whole multiples of 4 KiB and a batch holds at most 18 records,
so framing and the batch header never reach 4 KiB."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest
from kafka_harness import kafka_libs
from scenarios.scenario_harness import Cluster

from kraft.core.effects import AppendResult, AppendToLog
from kraft.core.events import ClientAppend, Tick
from kraft.errors import ErrorCode

pytestmark = pytest.mark.interop

PROGRAM = Path(__file__).parent / "java" / "BatchAccumulatorRun.java"
LINGER_MS = 25
KIB4 = 4096
MIB = 1024 * 1024

# The edges, then random scripts.
SCRIPTS = [
    "a:9437184",  # 9 MiB: larger than any batch
    "a:8388608",  # 8 MiB of value: with its framing, larger than a batch
    "a:4194304,4194304",  # two 4 MiB records in one append
    "a:8384512 t",  # 8 MiB less 4 KiB: fits, lingers
    "a:3145728 a:3145728 a:3145728 t",  # the third does not fit beside two
    "a:5242880 a:9437184 a:1048576 t",  # a refusal leaves what waits waiting
    "a:4096 t a:4096 a:8380416 t",  # the second batch fills up to 4 KiB below the limit
]


def _random_scripts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    scripts = []
    for _ in range(n):
        steps = []
        for _ in range(rng.randint(1, 6)):
            if steps and rng.random() < 0.3:
                steps.append("t")
            else:
                sizes = [KIB4 * rng.randint(1, 9 * MIB // KIB4) for _ in range(rng.randint(1, 3))]
                steps.append("a:" + ",".join(map(str, sizes)))
        steps.append("t")
        scripts.append(" ".join(steps))
    return scripts


def _kraft(script: str) -> str:
    """The script through a single kraft voter (it leads at once), as BatchAccumulatorRun
    prints it, offsets counted from the first append."""
    c = Cluster(1, seed=1, election_timeout_ms=1000, append_linger_ms=LINGER_MS)
    c.run_until(lambda: c.leader() == 1)
    base = c.view(1).end_offset
    now = c.now
    out: list[str] = []
    for rid, step in enumerate(script.split(), start=1):
        if step == "t":
            now += LINGER_MS
            effects = c.step(1, Tick(now))
        else:
            records = tuple((None, bytes(int(s))) for s in step[2:].split(","))
            effects = c.step(1, ClientAppend(now, records, rid))
            # An accepted append is answered when its batch is written; a refusal at once.
            refusals = [
                e.error.name
                for e in effects
                if isinstance(e, AppendResult)
                and e.request_id == rid
                and e.error is not ErrorCode.NONE
            ]
            out.append(
                "too-large" if refusals == ["RECORD_LIST_TOO_LARGE"] else " ".join(refusals) or "ok"
            )
        out.extend(
            f"b{e.first_offset - base}+{e.last_offset - e.first_offset + 1}"
            for e in effects
            if isinstance(e, AppendToLog)
        )
    return " ".join(out)


def test_kraft_batches_appends_as_kafkas_batch_accumulator(tmp_path: Path) -> None:
    scripts = SCRIPTS + _random_scripts(30, seed=630)
    lines = tmp_path / "scripts.txt"
    lines.write_text("\n".join(scripts) + "\n")
    done = subprocess.run(
        ["java", "-Xshare:auto", "-cp", f"{kafka_libs()}/*", str(PROGRAM), str(lines)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    kafka = done.stdout.splitlines()
    assert len(kafka) == len(scripts)
    # The edges behave as their comments say (so the comparison below is not vacuous).
    assert kafka[:3] == ["too-large"] * 3
    assert kafka[4] == "ok ok ok b0+2 b2+1"
    assert kafka[5] == "ok too-large ok b0+2"
    for script, theirs in zip(scripts, kafka, strict=True):
        assert _kraft(script) == theirs, script
