"""Files: Kafka's DumpLogSegments reads kraft's segments, `kraft dump-log` reads a Kafka
controller's segments and checkpoints; every batch valid, control records decoded, and the two
tools' batch header lines agree field by field."""

from __future__ import annotations

import json

import pytest
from dump_compare import (
    compare_headers,
    header_lines,
    kafka_dump,
    kraft_dump,
    per_file,
    record_lines,
)
from kafka_harness import (
    FREQUENT_SNAPSHOTS,
    METADATA_DIR,
    METADATA_VERSION_LEVEL,
    Procs,
    feature_level_record,
    kafka_nodes,
    kraft_append,
    kraft_cluster,
    noop_record,
    ports_for,
    voters_string,
)
from polling import kraft_info, wait_for

from kraft.metadata_records import decode_metadata_header
from kraft.storage.meta_properties import generate_cluster_id
from kraft.storage.snapshot_files import CheckpointReader, check_snapshot

pytestmark = pytest.mark.interop


def _cluster_id() -> str:
    import random

    return generate_cluster_id(random.Random())


def test_kafka_dump_log_segments_reads_kraft_segments(procs: Procs) -> None:
    ports = ports_for([1])
    cluster = kraft_cluster(procs, ports, voters_string(ports), _cluster_id(), trace=False)
    address = cluster.addresses[1]
    for round_ in range(2):  # two epochs: a LeaderChange each
        cluster.start(1)
        wait_for("kraft to lead", lambda: (i := kraft_info(address)) and i.state == "Leader")
        values = [noop_record() for _ in range(3)]
        if round_ == 0:
            values.insert(0, feature_level_record("metadata.version", METADATA_VERSION_LEVEL))
        kraft_append([address], values)
        kraft_append([address], [noop_record()])
        assert cluster.stop(1) == 0

    segments = sorted((cluster.data_dir(1) / METADATA_DIR).glob("*.log"))
    assert segments
    kafka_out = kafka_dump(procs.root, segments, "--cluster-metadata-decoder")
    kraft_out = kraft_dump(segments)
    headers = header_lines(kafka_out)
    assert len(headers) >= 6
    assert all(h["isvalid"] == "true" for h in headers), kafka_out
    assert compare_headers(kafka_out, kraft_out) == []
    records = record_lines(kafka_out)
    # Kafka decodes each of kraft's LeaderChange control records...
    leader_changes = [r for r in records if "LeaderChange:" in r]
    assert len(leader_changes) == 2, kafka_out
    for line in leader_changes:
        body = json.loads(line.split("LeaderChange: ", 1)[1])
        assert body["leaderId"] == 1
        assert body["voters"] == [{"voterId": 1}]
    # ...and every data record as a metadata record.
    data = [r for r in records if "LeaderChange:" not in r]
    assert len(data) == 2 * 4 + 1
    payloads = [json.loads(r.split("payload: ", 1)[1]) for r in data]
    assert {p["type"] for p in payloads} == {"NO_OP_RECORD", "FEATURE_LEVEL_RECORD"}


def test_kraft_dump_log_reads_a_kafka_controllers_log_and_checkpoints(procs: Procs) -> None:
    ports = ports_for([1])
    kafka = kafka_nodes(
        procs, ports, voters_string(ports), _cluster_id(), extra=FREQUENT_SNAPSHOTS
    )[1]
    kafka.start()
    wait_for(
        "a Kafka checkpoint (snapshot)",
        lambda: list(kafka.metadata_dir.glob("*.checkpoint")),
        timeout_s=90.0,
    )
    assert kafka.stop()
    segments = sorted(kafka.metadata_dir.glob("*.log"))
    checkpoints = sorted(kafka.metadata_dir.glob("*.checkpoint"))
    bootstrap = kafka.data_dir / "bootstrap.checkpoint"
    files = [*segments, *checkpoints, bootstrap]
    kraft_out = kraft_dump(files)
    kafka_out = kafka_dump(procs.root, files)
    kraft_files, kafka_files = per_file(kraft_out), per_file(kafka_out)
    assert set(kraft_files) == {f.name for f in files}
    for name, text in kraft_files.items():
        headers = header_lines(text)
        assert headers, f"{name}: no batches"
        assert all(h["isvalid"] == "true" for h in headers), text
        assert compare_headers(kafka_files[name], text) == [], name
    log_records = "\n".join(record_lines(kraft_files[segments[0].name]))
    assert "LeaderChangeMessage(" in log_records
    assert "leader_id=1" in log_records
    for cp in checkpoints:
        text = kraft_files[cp.name]
        records = record_lines(text)
        assert "SnapshotHeaderRecord(" in records[0], text
        assert "SnapshotFooterRecord(" in records[-1], text
        assert not any("undecodable" in r for r in records), text
        # kraft's snapshot reader accepts Kafka's snapshot, and its records are metadata records.
        summary = check_snapshot(cp)
        assert summary.snapshot_id.offset == int(cp.name[:20]) and summary.records > 0
        with CheckpointReader(cp) as reader:
            for batch in reader.batches():
                for key, value in batch:
                    assert key is None and value is not None
                    decode_metadata_header(value)
