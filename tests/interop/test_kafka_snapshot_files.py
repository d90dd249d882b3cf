"""Checkpoint files (KIP-630 snapshots) both ways: Kafka's DumpLogSegments decodes the snapshots
kraft writes (header, metadata records, footer, every batch valid), and kraft's reader accepts
the bootstrap snapshot Kafka's StorageTool writes for a dynamic quorum (`format --standalone`:
SnapshotHeader, KRaftVersion and Voters in the first batch, then the footer)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from dump_compare import compare_headers, header_lines, kafka_dump, kraft_dump, record_lines
from kafka_harness import METADATA_DIR, STORAGE_TOOL, ports_for, run_tool

from kraft.app.kv import KeyValueStore
from kraft.app.port import CommittedBatch
from kraft.ids import Epoch, Offset, OffsetAndEpoch
from kraft.metadata_records import feature_level_record, no_op_record
from kraft.storage.meta_properties import generate_cluster_id
from kraft.storage.snapshot_directory import list_snapshots, write_state_snapshot
from kraft.storage.snapshot_files import CheckpointReader, CheckpointWriter, check_snapshot

pytestmark = pytest.mark.interop


def _metadata_snapshot(directory: Path) -> Path:
    """A snapshot of metadata records (which Kafka's decoder prints), in two data batches."""
    with CheckpointWriter(
        directory,
        OffsetAndEpoch(Epoch(3), Offset(1234)),
        timestamp_ms=1_700_000_000_000,
        last_contained_log_timestamp=1_699_999_999_999,
        batch_bytes=64,
    ) as writer:
        writer.append([(None, feature_level_record("metadata.version", 30))])
        writer.append([(None, no_op_record()) for _ in range(5)])
        return writer.freeze()


def test_kafka_dump_log_segments_decodes_a_kraft_snapshot(tmp_path: Path) -> None:
    path = _metadata_snapshot(tmp_path / METADATA_DIR)
    out = kafka_dump(tmp_path, [path], "--cluster-metadata-decoder")
    assert "Snapshot end offset: 1234, epoch: 3" in out, out
    headers = header_lines(out)
    assert len(headers) >= 4
    assert all(h["isvalid"] == "true" for h in headers), out
    assert {h["partitionLeaderEpoch"] for h in headers} == {"3"}
    assert [h["isControl"] for h in (headers[0], headers[-1])] == ["true", "true"]
    ours = kraft_dump([path])
    assert compare_headers(out, ours) == []
    assert "Snapshot end offset: 1234, epoch: 3" in ours
    records = record_lines(out)
    header = json.loads(records[0].split("SnapshotHeader ", 1)[1])
    assert header == {"version": 0, "lastContainedLogTimestamp": 1_699_999_999_999}
    assert json.loads(records[-1].split("SnapshotFooter ", 1)[1]) == {"version": 0}
    payloads = [json.loads(r.split("payload: ", 1)[1]) for r in records[1:-1]]
    assert [p["type"] for p in payloads] == ["FEATURE_LEVEL_RECORD"] + ["NO_OP_RECORD"] * 5
    assert payloads[0]["data"] == {"name": "metadata.version", "featureLevel": 30}
    # Offsets inside a snapshot run from 0 without a gap, as Kafka numbers them.
    assert [int(r.split()[2]) for r in records] == list(range(len(records)))


def test_kafka_dump_log_segments_reads_a_key_value_snapshot(tmp_path: Path) -> None:
    """The key-value store's records are not metadata records: the batches and the header and
    footer are still valid to Kafka, and its metadata decoder says it skips each record."""
    store = KeyValueStore()
    store.handle_commit(
        [CommittedBatch(Offset(0), Offset(1), Epoch(1), ((b"a", b"1"), (b"b", b"2")))]
    )
    path = write_state_snapshot(
        store, tmp_path / METADATA_DIR, timestamp_ms=1000, last_contained_log_timestamp=999
    )
    out = kafka_dump(tmp_path, [path], "--cluster-metadata-decoder")
    headers = header_lines(out)
    assert len(headers) == 3 and all(h["isvalid"] == "true" for h in headers), out
    records = record_lines(out)
    assert "SnapshotHeader " in records[0] and "SnapshotFooter " in records[-1]
    assert all("Could not deserialize metadata record" in r for r in records[1:-1]), out
    plain = kafka_dump(tmp_path, [path])
    assert [r.split("payload: ", 1)[1] for r in record_lines(plain)[1:-1]] == ["1", "2"]


def test_kraft_reads_the_bootstrap_snapshot_of_kafka_storage_format_standalone(
    tmp_path: Path,
) -> None:
    port = ports_for([1])[1]
    data = tmp_path / "kafka-1"
    config = tmp_path / "kafka-1.properties"
    config.write_text(
        "node.id=1\nprocess.roles=controller\ncontroller.listener.names=CONTROLLER\n"
        f"listeners=CONTROLLER://127.0.0.1:{port}\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT\n"
        f"controller.quorum.bootstrap.servers=127.0.0.1:{port}\nlog.dirs={data}\n",
        encoding="utf-8",
    )
    cluster_id = generate_cluster_id(random.Random(7))
    done = run_tool(
        tmp_path, STORAGE_TOOL, ["format", "-t", cluster_id, "-c", str(config), "--standalone"]
    )
    assert done.returncode == 0, f"StorageTool format failed:\n{done.stdout}\n{done.stderr}"
    (summary,) = list_snapshots(data / METADATA_DIR)
    assert summary.path.name == "00000000000000000000-0000000000.checkpoint"
    assert summary.snapshot_id == OffsetAndEpoch(Epoch(0), Offset(0))
    assert summary.kraft_version == 1
    assert summary.voters is not None
    (voter,) = summary.voters.voters
    assert voter.voter_id == 1
    assert [(e.name, e.host, e.port) for e in voter.endpoints] == [
        ("CONTROLLER", "127.0.0.1", port)
    ]
    assert (summary.data_batches, summary.records) == (0, 0)
    with CheckpointReader(summary.path) as reader:
        assert list(reader.batches()) == []
    assert check_snapshot(summary.path) == summary
