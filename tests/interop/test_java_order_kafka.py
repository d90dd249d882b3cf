"""kraft.core.java_order against Java itself: random voter sets (ids 0-39, random directory
ids, 1-14 voters, so that tables resize and buckets collide), printed by a HashSet of Kafka's
own ReplicaKey (tests/interop/java/ReplicaKeySetOrder.java, one JVM run) and by
voter_keys_text, must read the same. Kafka's voter-change errors print such a set."""

from __future__ import annotations

import random
import subprocess
import uuid
from pathlib import Path

import pytest
from kafka_harness import kafka_libs

from kraft.core.java_order import voter_keys_text
from kraft.ids import DirectoryId, NodeId, ReplicaKey

pytestmark = pytest.mark.interop

PROGRAM = Path(__file__).parent / "java" / "ReplicaKeySetOrder.java"


def test_voter_sets_print_in_the_order_of_javas_hash_set(tmp_path: Path) -> None:
    rng = random.Random(853)
    sets = [
        [
            ReplicaKey(NodeId(n), DirectoryId(uuid.UUID(int=rng.getrandbits(128))))
            for n in sorted(rng.sample(range(40), rng.randint(1, 14)))
        ]
        for _ in range(200)
    ]
    lines = tmp_path / "sets.txt"
    lines.write_text(
        "".join(" ".join(f"{k.id}:{k.directory_id}" for k in s) + "\n" for s in sets),
        encoding="utf-8",
    )
    done = subprocess.run(
        ["java", "-Xshare:auto", "-cp", f"{kafka_libs()}/*", str(PROGRAM), str(lines)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    java = done.stdout.splitlines()
    assert len(java) == len(sets)
    ours = [voter_keys_text(s) for s in sets]
    assert ours == java
    # Not vacuous: most of these sets are not in id order in Java.
    in_id_order = sum(
        t == "[" + ", ".join(k.kafka_text() for k in s) + "]"
        for t, s in zip(ours, sets, strict=True)
    )
    assert in_id_order < len(sets) // 2
