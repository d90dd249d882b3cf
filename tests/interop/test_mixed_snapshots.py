"""KIP-630 snapshots across a mixed quorum (kraft voters 1 and 2, Kafka controller 3, one
cluster id, static voters), one test per direction (each about a minute; `make interop` runs
them side by side). The kraft nodes run the metadata state machine (kraft.app.metadata).

- kraft leader -> Kafka follower: a kraft leader commits metadata.version and NoOpRecords,
  which Kafka 3 replicates as a follower; Kafka 3 stops; the leader commits more, snapshots
  and moves its log start past Kafka's log end (Kafka, no longer live, does not hold it back).
  Kafka 3 restarts, is answered with the snapshot id, fetches the snapshot (FetchSnapshot),
  truncates its log fully and its controller loads the snapshot: the checkpoint file is
  byte-identical to the leader's, Kafka's log starts at its end offset, and what commits
  after it reaches Kafka's log, byte for byte as the leader's.
- Kafka leader -> kraft follower: Kafka 3 leads (started first, it stands first; the kraft
  leaders resign until it wins); kraft follower X stops; Kafka's leader snapshots and, in its
  log cleaner, moves its log start past X's log end (`metadata.max.retention.bytes` tiny: the
  cleaner moves it to the newest snapshot; Kafka runs the cleaner 60 s after its raft client
  starts, then every 60 s). X restarts, is answered with the snapshot id, fetches and installs
  Kafka's snapshot (the same bytes), loads every record of it into its metadata state
  machine, and its log then matches Kafka's byte for byte.

No Kafka process logs a fatal fault (its controller replays every record and snapshot)."""

from __future__ import annotations

import asyncio
import random
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka_harness import (
    FREQUENT_SNAPSHOTS,
    METADATA_DIR,
    METADATA_VERSION_LEVEL,
    Batch,
    KafkaNode,
    Procs,
    feature_level_record,
    kafka_nodes,
    kraft_append,
    kraft_cluster,
    noop_record,
    ports_for,
    quorum_timeouts,
    read_batches,
    stop_kafka,
    voters_string,
)
from polling import kraft_info, wait_for

from kraft.client_read import get
from kraft.cluster import LocalCluster
from kraft.ids import Epoch, Offset, OffsetAndEpoch
from kraft.storage.meta_properties import generate_cluster_id
from kraft.storage.snapshot_directory import list_snapshots, snapshot_files
from kraft.storage.snapshot_files import SnapshotFileKind

pytestmark = pytest.mark.interop

KRAFT_IDS = (1, 2)
KAFKA_ID = 3
WAIT_S = 60.0
# Kafka's raft client runs its log cleaner 60 s after it starts, then every 60 s.
CLEANER_WAIT_S = 150.0
KRAFT_SNAPSHOTS = {
    "kraft.state.machine": "metadata",
    "metadata.log.max.record.bytes.between.snapshots": "400",
    "metadata.log.max.snapshot.interval.ms": "0",
    # With Kafka's retention on the node (kraft.server.retention), the log start moves to the
    # newest snapshot as soon as there are two, as Kafka's cleaner moves it.
    "metadata.max.retention.bytes": "1",
}
KAFKA_SNAPSHOTS = {
    **FREQUENT_SNAPSHOTS,
    # The cleaner moves the log start to the newest snapshot whenever there are two.
    "metadata.max.retention.bytes": "1",
}
_LOG_START = re.compile(r"Incremented log start offset to (\d+)")
_INSTALLED = re.compile(r"snapshot (\d+)-(\d+) installed")
_KAFKA_LOADED = re.compile(r"Successfully loaded snapshot (\d{20})-(\d{10})")


def _snapshots(metadata_dir: Path) -> dict[OffsetAndEpoch, bytes]:
    """The complete checkpoint files of a directory, but the bootstrap one, by snapshot id
    (a file Kafka deletes meanwhile is left out)."""
    out: dict[OffsetAndEpoch, bytes] = {}
    for found in snapshot_files(metadata_dir):
        if found.kind is SnapshotFileKind.COMPLETE and found.snapshot_id.offset > 0:
            try:
                out[found.snapshot_id] = found.path.read_bytes()
            except FileNotFoundError:
                continue
    return out


def _kraft_leader(kraft: LocalCluster, among: list[int]) -> int | None:
    for n in among:
        info = kraft_info(kraft.addresses[n])
        if info is not None and info.state == "Leader" and info.leader_id == n:
            return n
    return None


def _leader_view(kraft: LocalCluster, kafka: KafkaNode, up: list[int]) -> int | None:
    """The leader every running voter agrees on (Kafka's quorum-state file for Kafka)."""
    views: set[int | None] = set()
    for n in up:
        if n == KAFKA_ID:
            qs = kafka.quorum_state() if kafka.started else None
            views.add(None if qs is None else int(str(qs["leaderId"])))
        else:
            info = kraft_info(kraft.addresses[n])
            views.add(None if info is None else info.leader_id)
    if len(views) != 1:
        return None
    (leader,) = views
    return leader if leader in up else None


def _kafka_log_start(kafka: KafkaNode) -> int:
    found = [int(m.group(1)) for m in _LOG_START.finditer(kafka.log_text())]
    return max(found, default=0)


def _kafka_loaded(kafka: KafkaNode, past: int) -> OffsetAndEpoch | None:
    """The newest snapshot past offset `past` that Kafka's controller loaded, if any."""
    ids = [
        OffsetAndEpoch(Epoch(int(e)), Offset(int(o)))
        for o, e in _KAFKA_LOADED.findall(kafka.log_text())
        if int(o) > past
    ]
    return max(ids, default=None)


def _kafka_ok(kafka: KafkaNode) -> bool:
    """True while Kafka runs and logged no fatal fault (a wait fails at once otherwise)."""
    if not kafka.running:
        raise AssertionError("Kafka exited:\n" + "\n".join(kafka.fatal_lines()[-10:]))
    assert kafka.fatal_lines() == [], "\n".join(kafka.fatal_lines())
    return True


def _batches(metadata_dir: Path) -> list[Batch]:
    """A running node's batches, or none while its last one is being written."""
    try:
        return read_batches(metadata_dir)
    except Exception:
        return []


def _raws_from(batches: list[Batch], start: int, end: int) -> list[bytes]:
    return [b.raw for b in batches if start <= b.base_offset and b.last_offset < end]


@dataclass
class Quorum:
    kraft: LocalCluster
    kafka: KafkaNode
    dirs: dict[int, Path]


def _quorum(procs: Procs) -> Quorum:
    """kraft 1 and 2 and Kafka 3, formatted, none started. Kafka's election timeout is the
    shorter: once a kraft leader resigns, Kafka stands first."""
    cluster_id = generate_cluster_id(random.Random())
    ports = ports_for([*KRAFT_IDS, KAFKA_ID])
    voters = voters_string(ports)
    (kafka,) = kafka_nodes(
        procs,
        {KAFKA_ID: ports[KAFKA_ID]},
        voters,
        cluster_id,
        quorum=quorum_timeouts(500, 1000, kraft=False),
        extra=KAFKA_SNAPSHOTS,
    ).values()
    kraft = kraft_cluster(
        procs,
        {n: ports[n] for n in KRAFT_IDS},
        voters,
        cluster_id,
        quorum={**quorum_timeouts(1500, 3000, kraft=True), **KRAFT_SNAPSHOTS},
    )
    return Quorum(kraft, kafka, {n: kraft.data_dir(n) / METADATA_DIR for n in KRAFT_IDS})


def _wait_replicated(kafka: KafkaNode, last_offset: int) -> None:
    wait_for(
        f"Kafka to replicate up to offset {last_offset}",
        lambda: (
            _kafka_ok(kafka)
            and (b := _batches(kafka.metadata_dir))
            and b[-1].last_offset >= last_offset
        ),
        WAIT_S,
    )


def test_a_kafka_follower_catches_up_from_a_kraft_leaders_snapshot(procs: Procs) -> None:
    q = _quorum(procs)
    kraft, kafka = q.kraft, q.kafka
    kraft.start()
    leader = wait_for("a kraft leader", lambda: _kraft_leader(kraft, list(KRAFT_IDS)), WAIT_S)
    at = [kraft.addresses[leader]]
    kraft_append(at, [feature_level_record("metadata.version", METADATA_VERSION_LEVEL)])
    ack = kraft_append(at, [noop_record() for _ in range(3)])
    kafka.start()
    _wait_replicated(kafka, ack.last_offset)
    # Stopped mid-start-up, Kafka 4.3.1 can fail its own start-up (a NullPointerException on
    # ControllerServer.registrationManager): it stops once started.
    wait_for("Kafka to finish starting", lambda: _kafka_ok(kafka) and kafka.started, WAIT_S)
    assert kafka.stop(), "Kafka did not shut down cleanly"
    kafka_end = read_batches(kafka.metadata_dir)[-1].last_offset + 1

    def moved() -> OffsetAndEpoch | None:
        """The leader's newest snapshot once its log starts there, past Kafka's log end (the
        leader holds its log start back while Kafka counts as live, a fetch timeout)."""
        i = kraft_info(at[0])
        snaps = _snapshots(q.dirs[leader])
        if i is None or not snaps or max(snaps).offset != i.log_start_offset:
            return None
        return max(snaps) if i.log_start_offset > kafka_end else None

    def append_until_moved() -> OffsetAndEpoch | None:
        kraft_append(at, [noop_record() for _ in range(3)])
        return moved()

    wait_for(
        f"kraft leader {leader} to move its log start past Kafka's log end {kafka_end}",
        append_until_moved,
        WAIT_S,
        every_s=0.1,
    )
    sid = wait_for("the leader's newest snapshot", moved, WAIT_S)

    kafka.start()
    wait_for(
        f"Kafka to fetch kraft leader {leader}'s snapshot",
        lambda: _kafka_ok(kafka) and _kafka_loaded(kafka, kafka_end),
        WAIT_S,
    )
    # Kafka's controller loaded the newest snapshot of the leader, whose file it holds as is
    # (a snapshot the controller cannot load is a fatal fault).
    assert _kafka_loaded(kafka, kafka_end) == sid
    leader_snaps = _snapshots(q.dirs[leader])
    assert max(leader_snaps) == sid
    assert _snapshots(kafka.metadata_dir)[sid] == leader_snaps[sid]
    # Records committed after the snapshot reach Kafka's log, which starts at its end offset.
    ack = kraft_append(at, [noop_record() for _ in range(2)])
    _wait_replicated(kafka, ack.last_offset)
    assert set(kraft.stop_all().values()) == {0}
    assert set(stop_kafka([kafka]).values()) == {True}
    assert kafka.fatal_lines() == [], "\n".join(kafka.fatal_lines())
    kafka_log = read_batches(kafka.metadata_dir)
    assert kafka_log[0].base_offset == sid.offset, (kafka_log[0].base_offset, sid)
    leader_log = read_batches(q.dirs[leader])
    end = int(ack.last_offset) + 1
    assert _raws_from(kafka_log, sid.offset, end) == _raws_from(leader_log, sid.offset, end)
    assert _raws_from(kafka_log, sid.offset, end), "nothing replicated past the snapshot"


def test_a_kraft_follower_catches_up_from_a_kafka_leaders_snapshot(procs: Procs) -> None:
    q = _quorum(procs)
    kraft, kafka = q.kraft, q.kafka
    everyone = [*KRAFT_IDS, KAFKA_ID]
    # Kafka up first: it stands while the kraft nodes start, and wins.
    kafka.start()
    wait_for("Kafka to start", lambda: _kafka_ok(kafka) and kafka.started, WAIT_S)
    kraft.start()
    leader = wait_for("a first leader", lambda: _leader_view(kraft, kafka, everyone), WAIT_S)
    # Else the kraft leader resigns (SIGTERM) until Kafka wins.
    for _ in range(6):
        if leader == KAFKA_ID:
            break
        assert kraft.stop(leader) == 0
        up = [n for n in everyone if n != leader]
        now = wait_for(
            f"a leader after kraft {leader} resigned",
            lambda up=up: _leader_view(kraft, kafka, up),
            WAIT_S,
        )
        kraft.start(leader)
        leader = wait_for(
            f"kraft {leader} to rejoin", lambda: _leader_view(kraft, kafka, everyone), WAIT_S
        )
        assert leader == now
    assert leader == KAFKA_ID, "Kafka never won an election"

    # Kafka's leader commits (its bootstrap records, NoOpRecords): X replicates some, stops.
    x = KRAFT_IDS[0]
    wait_for(
        f"kraft {x} to replicate Kafka's records",
        lambda: (i := kraft_info(kraft.addresses[x])) is not None and i.end_offset > 3,
        WAIT_S,
    )
    assert kraft.stop(x) == 0
    x_end = read_batches(q.dirs[x])[-1].last_offset + 1
    wait_for(
        f"Kafka's leader to move its log start past kraft {x}'s log end {x_end}",
        lambda: _kafka_ok(kafka) and _kafka_log_start(kafka) > x_end,
        CLEANER_WAIT_S,
        every_s=0.5,
    )
    kafka_snaps = _snapshots(kafka.metadata_dir)
    kafka_start = _kafka_log_start(kafka)

    kraft.start(x)

    def installed() -> OffsetAndEpoch | None:
        text = kraft.log_path(x).read_text(encoding="utf-8")
        ids = [OffsetAndEpoch(Epoch(int(e)), Offset(int(o))) for o, e in _INSTALLED.findall(text)]
        return max(ids) if ids and max(ids).offset >= kafka_start else None

    ksid = wait_for(
        f"kraft {x} to install a snapshot of Kafka's at {kafka_start} or past", installed, WAIT_S
    )
    kafka_bytes = kafka_snaps.get(ksid) or _snapshots(kafka.metadata_dir)[ksid]
    assert _snapshots(q.dirs[x])[ksid] == kafka_bytes
    # X's metadata state machine loaded every record of Kafka's snapshot.
    (summary,) = [s for s in list_snapshots(q.dirs[x]) if s.snapshot_id == ksid]
    loaded = f"loaded from the fetched snapshot {summary.path.name} ({summary.records} records)"
    assert loaded in kraft.log_path(x).read_text(encoding="utf-8")
    got = asyncio.run(get(kraft.addresses[x], b"metadata.version"))
    assert got.value is not None and int(got.value) >= METADATA_VERSION_LEVEL

    # X follows on; its log above the snapshot is Kafka's, byte for byte.
    hwm = wait_for(
        f"kraft {x} to follow past the snapshot",
        lambda: (
            (i := kraft_info(kraft.addresses[x])) is not None
            and i.high_watermark is not None
            and i.end_offset >= i.high_watermark > ksid.offset
            and int(i.high_watermark)
        ),
        WAIT_S,
    )
    _kafka_ok(kafka)
    assert set(kraft.stop_all().values()) == {0}
    assert set(stop_kafka([kafka]).values()) == {True}
    assert kafka.fatal_lines() == [], "\n".join(kafka.fatal_lines())
    x_batches = read_batches(q.dirs[x])
    assert x_batches[0].base_offset == ksid.offset
    kafka_batches = read_batches(kafka.metadata_dir)
    assert _raws_from(x_batches, ksid.offset, hwm) == _raws_from(kafka_batches, ksid.offset, hwm)
    assert _raws_from(x_batches, ksid.offset, hwm), "nothing replicated past the snapshot"
