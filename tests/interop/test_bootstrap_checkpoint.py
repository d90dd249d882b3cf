"""`kraft format --initial-controllers` / `--standalone` against Apache Kafka's own
`kafka-storage format` (kafka.tools.StorageTool) with the same arguments: the bootstrap
checkpoint `00000000000000000000-0000000000.checkpoint` is the same file except what is
legitimately different (the time of writing: batch timestamps, the SnapshotHeader's last
contained log timestamp, and so the CRCs), and meta.properties carries the same directory id.
Three JVM runs of the storage tool, one of DumpLogSegments, one of kafka-metadata-quorum."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from dump_compare import header_lines, kafka_dump, record_lines
from kafka_harness import METADATA_DIR, METADATA_QUORUM, STORAGE_TOOL, ports_for, run_tool
from polling import kraft_info, wait_for

from kraft.client import append, describe_quorum
from kraft.cluster import LocalCluster
from kraft.control_records import SnapshotHeaderRecord, decode_control_record
from kraft.ids import DirectoryId, NodeId
from kraft.protocol import uuid_to_base64
from kraft.records import BatchHeader, Record, decode_batch, iter_batches
from kraft.storage.bootstrap import DynamicVoter
from kraft.storage.meta_properties import generate_cluster_id, read_meta_properties

pytestmark = pytest.mark.interop

BOOTSTRAP = "00000000000000000000-0000000000.checkpoint"


def _kafka_format(tmp: Path, node: int, port: int, cluster_id: str, extra: list[str]) -> Path:
    data = tmp / f"kafka-{node}"
    config = tmp / f"kafka-{node}.properties"
    config.write_text(
        f"node.id={node}\nprocess.roles=controller\ncontroller.listener.names=CONTROLLER\n"
        f"listeners=CONTROLLER://127.0.0.1:{port}\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT\n"
        f"controller.quorum.bootstrap.servers=127.0.0.1:{port}\nlog.dirs={data}\n",
        encoding="utf-8",
    )
    done = run_tool(tmp, STORAGE_TOOL, ["format", "-t", cluster_id, "-c", str(config), *extra])
    assert done.returncode == 0, f"StorageTool format failed:\n{done.stdout}\n{done.stderr}"
    return data


def _kraft_format(data: Path, node: int, cluster_id: str, extra: list[str]) -> None:
    args = ["format", "--data-dir", str(data), "--node-id", str(node), "--cluster-id", cluster_id]
    done = subprocess.run(
        [sys.executable, "-m", "kraft.cli", *args, *extra],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


Batches = list[tuple[BatchHeader, list[Record]]]


def _batches(path: Path) -> Batches:
    data = path.read_bytes()
    return [decode_batch(data, pos) for pos, _ in iter_batches(data)]


def _timeless(batches: Batches) -> list[object]:
    """Everything of the file but the time it was written at: the batch headers without
    timestamps and CRC, every record's offset, key and value (the SnapshotHeader's value
    without its timestamp), timestamps relative to their batch."""
    out: list[object] = []
    for header, records in batches:
        out.append(header._replace(crc=0, base_timestamp=0, max_timestamp=0))
        for r in records:
            value = r.value
            control = decode_control_record(r)
            if isinstance(control, SnapshotHeaderRecord):
                value = repr(control.version).encode()
            out.append((r.offset, r.timestamp - header.base_timestamp, r.key, value, r.headers))
    return out


def _compare(kafka: Path, ours: Path) -> None:
    theirs, mine = _batches(kafka), _batches(ours)
    assert _timeless(mine) == _timeless(theirs)
    # Byte for byte, the records that carry no time (KRaftVersion, Voters, SnapshotFooter).
    for (_, a), (_, b) in zip(theirs, mine, strict=True):
        for x, y in zip(a, b, strict=True):
            if not isinstance(decode_control_record(x), SnapshotHeaderRecord):
                assert (x.key, x.value) == (y.key, y.value)
    assert ours.stat().st_size == kafka.stat().st_size


def test_initial_controllers_writes_the_bootstrap_checkpoint_kafka_writes(tmp_path: Path) -> None:
    rng = random.Random(11)
    ports = ports_for([1, 2, 3, 17])
    voters = [
        DynamicVoter(
            NodeId(n), "127.0.0.1", ports[n], DirectoryId(uuid.UUID(int=rng.getrandbits(128)))
        )
        for n in (17, 3, 1, 2)  # Java's HashMap order: 1, 17, 2, 3
    ]
    text = ",".join(str(v) for v in voters)
    cluster_id = generate_cluster_id(rng)
    kafka = _kafka_format(tmp_path, 2, ports[2], cluster_id, ["--initial-controllers", text])
    ours = tmp_path / "kraft-2"
    _kraft_format(ours, 2, cluster_id, ["--initial-controllers", text])
    _compare(kafka / METADATA_DIR / BOOTSTRAP, ours / METADATA_DIR / BOOTSTRAP)
    node2 = next(v for v in voters if v.node_id == 2)
    assert read_meta_properties(kafka).directory_id == node2.directory_id
    assert read_meta_properties(ours).directory_id == node2.directory_id


def test_standalone_writes_the_bootstrap_checkpoint_kafka_writes(tmp_path: Path) -> None:
    port = ports_for([1])[1]
    cluster_id = generate_cluster_id(random.Random(12))
    kafka = _kafka_format(tmp_path, 1, port, cluster_id, ["--standalone"])
    directory = read_meta_properties(kafka).directory_id
    ours = tmp_path / "kraft-1"
    _kraft_format(
        ours,
        1,
        cluster_id,
        [
            "--standalone",
            "--listener",
            f"127.0.0.1:{port}",
            "--directory-id",
            uuid_to_base64(directory),
        ],
    )
    _compare(kafka / METADATA_DIR / BOOTSTRAP, ours / METADATA_DIR / BOOTSTRAP)


def test_a_kraft_node_leads_a_quorum_kafka_formatted_and_kafka_reads_its_voters_record(
    tmp_path: Path,
) -> None:
    """Kafka's `format --standalone` directory, started as a kraft node: the node takes its
    voter set (with the directory id Kafka drew) from Kafka's bootstrap checkpoint, leads,
    and writes KRaftVersion and Voters after its LeaderChange record, which Kafka's
    DumpLogSegments decodes."""
    cluster = LocalCluster(tmp_path / "cluster", [ports_for([1])[1]])
    port = cluster.addresses[1].port
    kafka = _kafka_format(tmp_path, 1, port, cluster.cluster_id, ["--standalone"])
    shutil.copytree(kafka, cluster.data_dir(1))
    directory = read_meta_properties(cluster.data_dir(1)).directory_id
    cluster.format()  # the configuration file only: the directory is formatted
    cluster.start()
    try:
        lead = wait_for(
            "the node to lead",
            lambda: (i := kraft_info(cluster.addresses[1])) is not None and i.state == "Leader",
            60.0,
        )
        assert lead
        info = kraft_info(cluster.addresses[1])
        assert info is not None and info.directory_id == directory
        ack = asyncio.run(append([cluster.addresses[1]], [b"v"], timeout_ms=10_000))
        assert ack.base_offset >= 3  # after LeaderChange, KRaftVersion and Voters
        report = asyncio.run(describe_quorum([cluster.addresses[1]]))
        [voter] = report.description.voters
        assert (voter.replica.id, voter.replica.directory_id) == (1, directory)
    finally:
        assert cluster.stop_all() == {1: 0}
    segment = cluster.data_dir(1) / METADATA_DIR / "00000000000000000000.log"
    out = kafka_dump(tmp_path, [segment])
    headers = header_lines(out)
    assert headers[0]["isControl"] == "true" and headers[0]["isvalid"] == "true"
    records = record_lines(out)
    assert "LeaderChange" in records[0] and "KRaftVersion" in records[1]
    assert "Voters" in records[2] and uuid_to_base64(directory) in records[2], records[2]


def test_kafka_metadata_quorum_describes_a_dynamic_kraft_quorum_with_directory_ids(
    tmp_path: Path,
) -> None:
    """kafka-metadata-quorum --bootstrap-controller describe --status on a kraft dynamic
    quorum lists the voters with the directory ids they were formatted with."""
    cluster = LocalCluster(
        tmp_path / "cluster",
        list(ports_for([1, 2, 3]).values()),
        dynamic=True,
        overrides={"controller.quorum.election.timeout.ms": "500"},
    )
    cluster.format()
    cluster.start()
    try:
        wait_for(
            "a leader",
            lambda: any(
                (i := kraft_info(a)) is not None and i.state == "Leader"
                for a in cluster.addresses.values()
            ),
            60.0,
        )
        bootstrap = ",".join(str(a) for a in cluster.addresses.values())
        done = run_tool(
            tmp_path, METADATA_QUORUM, ["--bootstrap-controller", bootstrap, "describe", "--status"]
        )
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        line = next(x for x in done.stdout.splitlines() if x.startswith("CurrentVoters:"))
        voters = json.loads(line.split(":", 1)[1])
        assert {(v["id"], v["directoryId"]) for v in voters} == {
            (n, uuid_to_base64(d)) for n, d in cluster.directory_ids.items()
        }
    finally:
        assert cluster.stop_all() == {1: 0, 2: 0, 3: 0}
