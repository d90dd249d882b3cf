"""Observers across implementations: a kraft observer (a node id outside the voters)
replicates a Kafka quorum's log, and a Kafka broker (process.roles=broker) replicates a kraft
quorum's log; byte-identical batches below the HWM."""

from __future__ import annotations

import json
import random

import pytest
from kafka_harness import (
    KRAFT_QUORUM,
    METADATA_DIR,
    METADATA_VERSION_LEVEL,
    Batch,
    KafkaNode,
    Procs,
    batches_below,
    feature_level_record,
    kafka_nodes,
    kraft_append,
    kraft_cli,
    kraft_cluster,
    noop_record,
    ports_for,
    read_batches,
    stop_kafka,
    voters_string,
)
from polling import kraft_info, wait_for

from kraft.storage.meta_properties import generate_cluster_id

pytestmark = pytest.mark.interop

WAIT_S = 60.0


def _log_end(batches: list[Batch]) -> int:
    return batches[-1].last_offset + 1 if batches else 0


def _safe_batches(k: KafkaNode) -> list[Batch] | None:
    try:
        return read_batches(k.metadata_dir)
    except Exception:  # a batch still being written: look again
        return None


def _assert_same_below(hwm: int, logs: dict[str, list[Batch]]) -> None:
    committed = {name: batches_below(b, hwm) for name, b in logs.items()}
    names = sorted(committed)
    ref = committed[names[0]]
    assert ref and _log_end(ref) == hwm, f"{names[0]} holds {_log_end(ref)}, HWM {hwm}"
    for name in names[1:]:
        assert [b.raw for b in committed[name]] == [b.raw for b in ref], (
            f"{name} differs from {names[0]} below the HWM {hwm}"
        )


@pytest.mark.parametrize("fetch_max_bytes", [None, 300])
def test_a_kraft_observer_replicates_a_kafka_quorums_log(
    procs: Procs, fetch_max_bytes: int | None
) -> None:
    """With controller.quorum.fetch.max.bytes at 300 the Kafka leader cuts its Fetch answers
    inside a batch (it reads that many bytes of its log, and always one whole batch): the
    observer appends the whole batches before each cut and fetches on from there."""
    cluster_id = generate_cluster_id(random.Random())
    ports = ports_for([1, 2, 3])
    voters = voters_string(ports)
    kafka = kafka_nodes(procs, ports, voters, cluster_id)
    for k in kafka.values():
        k.start()
    quorum = dict(KRAFT_QUORUM)
    if fetch_max_bytes is not None:
        quorum["controller.quorum.fetch.max.bytes"] = str(fetch_max_bytes)
    observer = kraft_cluster(procs, ports_for([4]), voters, cluster_id, quorum=quorum)
    observer.start()
    address = observer.addresses[4]

    # Kafka's bootstrap records, its controller registrations and NoOpRecords every 500 ms.
    info = wait_for(
        "the kraft observer to learn a HWM past Kafka's bootstrap records",
        lambda: (i := kraft_info(address)) and (i.high_watermark or 0) >= 20 and i,
        WAIT_S,
    )
    assert info.state in ("Follower", "Unattached")  # an observer never stands for election
    assert info.node_id == 4 and 4 not in info.voters
    hwm = int(info.high_watermark or 0)
    wait_for(
        "every Kafka voter to hold the log up to the observer's HWM",
        lambda: all(
            (b := _safe_batches(k)) is not None and _log_end(b) >= hwm for k in kafka.values()
        ),
        WAIT_S,
    )
    assert observer.stop(4) == 0
    assert set(stop_kafka(kafka.values()).values()) == {True}
    logs = {f"kafka-{n}": read_batches(k.metadata_dir) for n, k in kafka.items()}
    logs["kraft-observer-4"] = read_batches(observer.data_dir(4) / METADATA_DIR)
    _assert_same_below(hwm, logs)
    for k in kafka.values():
        assert "RaftManager" in k.log_text()
        assert k.fatal_lines() == [], "\n".join(k.fatal_lines())


def test_a_kafka_broker_replicates_a_kraft_quorums_log(procs: Procs) -> None:
    cluster_id = generate_cluster_id(random.Random())
    ports = ports_for([1, 2, 3])
    voters = voters_string(ports)
    cluster = kraft_cluster(procs, ports, voters, cluster_id, trace=False)
    cluster.start()
    bootstrap = list(cluster.addresses.values())
    # What a Kafka broker replays must be metadata records: metadata.version first.
    ack = kraft_append(
        bootstrap,
        [feature_level_record("metadata.version", METADATA_VERSION_LEVEL), noop_record()],
        timeout_ms=30_000,
    )
    broker = kafka_nodes(procs, ports_for([10]), voters, cluster_id, role="broker")[10]
    broker.start()
    for _ in range(5):
        ack = kraft_append(bootstrap, [noop_record(), noop_record()], timeout_ms=30_000)
    end = int(ack.last_offset) + 1
    wait_for(
        f"the Kafka broker to replicate the log up to {end}",
        lambda: (b := _safe_batches(broker)) is not None and _log_end(b) >= end,
        WAIT_S,
    )
    # The kraft leader reports the broker among its observers.
    boot = ",".join(str(a) for a in bootstrap)
    status = kraft_cli("quorum", "describe", "--bootstrap", boot, "--status")
    assert status.returncode == 0, status.stderr
    observers = next(x for x in status.stdout.splitlines() if x.startswith("CurrentObservers:"))
    assert [o["id"] for o in json.loads(observers.split(":", 1)[1])] == [10]
    assert broker.stop()
    assert set(cluster.stop_all().values()) == {0}
    logs = {"kafka-broker-10": read_batches(broker.metadata_dir)}
    for n in cluster.node_ids:
        logs[f"kraft-{n}"] = read_batches(cluster.data_dir(n) / METADATA_DIR)
    _assert_same_below(end, logs)
    assert "RaftManager" in broker.log_text()
    assert broker.fatal_lines() == [], "\n".join(broker.fatal_lines())
