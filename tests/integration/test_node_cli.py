"""Configuration parsing and the node commands' argument handling (in process, no cluster)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from kraft.cli import main
from kraft.cli.quorum import status_lines
from kraft.client import Address, ClientError, QuorumReport, append, describe_quorum
from kraft.client_read import ReadResult, read
from kraft.errors import ErrorCode
from kraft.ids import NodeId
from kraft.protocol import api_versions_response
from kraft.protocol.client_api import KRAFT_APPEND_KEY
from kraft.server.config import (
    ConfigError,
    VoterAddress,
    load_config,
    parse_properties,
    parse_voters,
)
from kraft.storage.meta_properties import read_meta_properties

CID = "MkU3OEVBNTcwNTJENDM2Qg"


def test_voters_use_kafkas_controller_quorum_voters_format() -> None:
    # Kafka: controller.quorum.voters is a list of `{id}@{host}:{port}` entries.
    assert parse_voters("1@localhost:9092, 2@10.0.0.2:9093") == (
        VoterAddress(NodeId(1), "localhost", 9092),
        VoterAddress(NodeId(2), "10.0.0.2", 9093),
    )
    for bad in ("", "1@host", "x@h:1", "1@h:1,1@h:2", "1@h:99999"):
        with pytest.raises(ConfigError):
            parse_voters(bad)


def test_properties_file_with_overrides(tmp_path: Path) -> None:
    text = (
        "# a comment\n! another\nnode.id=2\n"
        "controller.quorum.voters=1@h:1,\\\n  2@h:2\n"
        "listeners=CONTROLLER://0.0.0.0:9093\nlog.dirs=/a,/b\n"
        "controller.quorum.election.timeout.ms: 300\n"
    )
    assert parse_properties(text)["controller.quorum.voters"] == "1@h:1,2@h:2"
    path = tmp_path / "server.properties"
    path.write_text(text)
    cfg = load_config(path, {"quorum.fetch.timeout.ms": "900", "metadata.log.dir": "/m"})
    assert cfg.node_id == 2
    assert (cfg.listener_host, cfg.listener_port) == ("0.0.0.0", 9093)
    assert cfg.timing.election_timeout_ms == 300
    assert cfg.timing.fetch_timeout_ms == 900
    # metadata.log.dir wins over log.dirs, as in Kafka.
    assert cfg.data_dir == Path("/m")
    assert load_config(path).data_dir == Path("/a")


def test_config_errors_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"node\.id"):
        load_config(None, {"controller.quorum.voters": "1@h:1", "log.dirs": "/d"})
    with pytest.raises(ConfigError, match=r"election\.timeout"):
        load_config(
            None,
            {
                "node.id": "1",
                "controller.quorum.voters": "1@h:1",
                "log.dirs": "/d",
                "quorum.election.timeout.ms": "soon",
            },
        )
    with pytest.raises(ConfigError, match="listeners"):
        load_config(None, {"node.id": "7", "controller.quorum.voters": "1@h:1", "log.dirs": "/d"})


def test_format_then_refuse_to_format_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "n1"
    assert main(["format", "--data-dir", str(d), "--cluster-id", CID, "--node-id", "1"]) == 0
    assert read_meta_properties(d).node_id == 1
    assert main(["format", "--data-dir", str(d), "--cluster-id", CID, "--node-id", "1"]) == 2
    assert "already formatted" in capsys.readouterr().err
    assert main(["format", "--random-cluster-id"]) == 0
    assert len(capsys.readouterr().out.strip()) == 22


def test_start_refuses_a_directory_formatted_for_another_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "n1"
    assert main(["format", "--data-dir", str(d), "--cluster-id", CID, "--node-id", "1"]) == 0
    argv = ["start", "--node-id", "2", "--data-dir", str(d), "--voters", "2@127.0.0.1:1"]
    assert main(argv) == 1
    assert "formatted for node 1, but this is node 2" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["start", "--node-id", "1"],
        ["start", "--config", "/nonexistent.properties"],
        ["start", "--override", "novalue"],
        ["append", "--bootstrap", "nohostport", "v"],
        ["read", "--bootstrap", "127.0.0.1:1", "--from", "-1"],
        ["quorum", "describe", "--bootstrap", "127.0.0.1:1"],
        ["quorum", "describe", "--bootstrap", "127.0.0.1:1", "--status", "--replication"],
        ["format", "--data-dir", "/tmp/x"],
        ["cluster", "up", "--nodes", "0"],
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kraft ")


@pytest.mark.parametrize("command", ["format", "start", "quorum", "append", "read", "cluster"])
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    assert "usage: kraft " + command in capsys.readouterr().out


def test_argparse_errors_exit_2() -> None:
    with pytest.raises(SystemExit) as e:
        main(["append", "v"])  # --bootstrap missing
    assert e.value.code == 2


def test_listener_name_comes_from_kafkas_keys(tmp_path: Path) -> None:
    base = {"node.id": "1", "controller.quorum.voters": "1@h:1", "metadata.log.dir": "d"}
    assert load_config(None, base).listener_name == "CONTROLLER"
    assert load_config(None, {**base, "listeners": "CTL://h:1"}).listener_name == "CTL"
    both = {**base, "listeners": "CTL://h:1", "controller.listener.names": "QUORUM,OTHER"}
    assert load_config(None, both).listener_name == "QUORUM"


# --- `kraft quorum describe` against a node that speaks only Kafka's APIs -------------------

# What Apache Kafka 4.3.1's controller answered (ApiVersions trimmed to what matters), with
# a Kafka controller's habit: a request for an API it does not know closes the connection.
KAFKA_CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


async def _fake_kafka_controller(port_box: list[int], seen: list[int]) -> asyncio.Server:
    from kraft.protocol import (
        DESCRIBE_QUORUM,
        FrameDecoder,
        decode_request_payload,
        encode_response_payload,
    )

    apis = {1: (4, 18), 18: (0, 4), 55: (0, 2), 60: (0, 2), 82: (0, 0)}

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder(1 << 20)
        while chunk := await reader.read(65536):
            for payload in decoder.feed(chunk):
                key = int.from_bytes(payload[:2], "big", signed=True)
                seen.append(key)
                if key not in apis:
                    writer.close()
                    return
                header, _ = decode_request_payload(payload)
                if key == 18:
                    answer = api_versions_response(apis=apis)
                elif key == 60:
                    answer = {
                        "endpoint_type": 2,
                        "cluster_id": KAFKA_CLUSTER,
                        "controller_id": 1,
                        "brokers": [{"broker_id": 1, "host": "127.0.0.1", "port": port_box[0]}],
                    }
                else:
                    assert key == DESCRIBE_QUORUM.api_key
                    voter = {
                        "replica_id": 1,
                        "replica_directory_id": uuid.UUID(int=0),
                        "log_end_offset": 41,
                        "last_fetch_timestamp": 1795341583547,
                        "last_caught_up_timestamp": 1795341583547,
                    }
                    answer = {
                        "error_message": "",
                        "topics": [
                            {
                                "topic_name": "__cluster_metadata",
                                "partitions": [
                                    {
                                        "partition_index": 0,
                                        "error_message": "",
                                        "leader_id": 1,
                                        "leader_epoch": 1,
                                        "high_watermark": 39,
                                        "current_voters": [voter],
                                    }
                                ],
                            }
                        ],
                        "nodes": [
                            {
                                "node_id": 1,
                                "listeners": [
                                    {"name": "CONTROLLER", "host": "127.0.0.1", "port": 19093}
                                ],
                            }
                        ],
                    }
                writer.write(
                    encode_response_payload(
                        key, header.api_version, header.correlation_id, answer, framed=True
                    )
                )
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port_box.append(server.sockets[0].getsockname()[1])
    return server


def test_quorum_describe_speaks_only_kafkas_apis_to_a_kafka_controller(
    capsys: pytest.CaptureFixture[str],
) -> None:
    seen: list[int] = []

    async def run() -> tuple[QuorumReport, int]:
        box: list[int] = []
        server = await _fake_kafka_controller(box, seen)
        async with server:
            report = await describe_quorum([Address("127.0.0.1", box[0])], timeout_ms=3000)
        return report, box[0]

    report, _ = asyncio.run(run())
    assert seen == [18, 60, 55]  # ApiVersions, DescribeCluster, DescribeQuorum: nothing private
    assert report.cluster_id == KAFKA_CLUSTER
    # What kafka-metadata-quorum printed against that controller, line for line.
    assert status_lines(report.cluster_id, report.description, report.nodes) == [
        "ClusterId:              MkU3OEVBNTcwNTJENDM2Qg",
        "LeaderId:               1",
        "LeaderEpoch:            1",
        "HighWatermark:          39",
        "MaxFollowerLag:         0",
        "MaxFollowerLagTimeMs:   0",
        'CurrentVoters:          [{"id": 1, "endpoints": ["CONTROLLER://127.0.0.1:19093"]}]',
        "CurrentObservers:       []",
    ]


def test_append_to_a_kafka_controller_is_refused_before_sending_a_private_api() -> None:
    seen: list[int] = []

    async def run() -> None:
        box: list[int] = []
        server = await _fake_kafka_controller(box, seen)
        async with server:
            with pytest.raises(ClientError, match="does not support KraftAppend"):
                await append([Address("127.0.0.1", box[0])], [b"x"], timeout_ms=500)

    asyncio.run(run())
    assert KRAFT_APPEND_KEY not in seen


async def _fake_kafka_fetch_leader(
    port_box: list[int], asked: list[tuple[int, int, int]]
) -> asyncio.Server:
    """A Kafka leader in epoch 3 as KafkaRaftClient.handleFetchRequest checks a Fetch: a last
    fetched epoch < 0 or above the request's epoch is INVALID_REQUEST, an older epoch
    FENCED_LEADER_EPOCH; records go out uncommitted too (two batches, high watermark 2)."""
    from kraft.protocol import (
        FrameDecoder,
        decode_request_payload,
        encode_response_payload,
    )
    from kraft.records import encode_batch

    log = encode_batch(0, 3, [b"a", b"b"], timestamp_ms=1) + encode_batch(
        2, 3, [b"c"], timestamp_ms=1
    )

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder(1 << 20)
        while chunk := await reader.read(65536):
            for payload in decoder.feed(chunk):
                header, body = decode_request_payload(payload)
                if header.api_key == 18:
                    answer = api_versions_response(apis={1: (4, 18), 18: (0, 4)})
                else:
                    p = body["topics"][0]["partitions"][0]  # type: ignore[index]
                    epoch, last, offset = (
                        p["current_leader_epoch"],
                        p["last_fetched_epoch"],
                        p["fetch_offset"],  # type: ignore[index]
                    )
                    asked.append((epoch, last, offset))
                    error = 0
                    if last < 0 or last > epoch:
                        error = int(ErrorCode.INVALID_REQUEST)
                    elif epoch < 3:
                        error = int(ErrorCode.FENCED_LEADER_EPOCH)
                    answer = {
                        "responses": [
                            {
                                "topic_id": uuid.UUID(int=1),
                                "partitions": [
                                    {
                                        "error_code": error,
                                        "high_watermark": -1 if error else 2,
                                        "current_leader": {"leader_id": 1, "leader_epoch": 3},
                                        "records": b"" if error or offset else log,
                                    }
                                ],
                            }
                        ],
                        "node_endpoints": [
                            {"node_id": 1, "host": "127.0.0.1", "port": port_box[0]}
                        ],
                    }
                writer.write(
                    encode_response_payload(
                        header.api_key,
                        header.api_version,
                        header.correlation_id,
                        answer,
                        framed=True,
                    )
                )
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port_box.append(server.sockets[0].getsockname()[1])
    return server


def test_read_sends_fetches_a_kafka_leader_accepts() -> None:
    asked: list[tuple[int, int, int]] = []

    async def run() -> ReadResult:
        box: list[int] = []
        server = await _fake_kafka_fetch_leader(box, asked)
        async with server:
            return await read(Address("127.0.0.1", box[0]))

    result = asyncio.run(run())
    # First in epoch 0 (fenced: the leader names epoch 3), then in the leader's epoch.
    assert asked == [(0, 0, 0), (3, 0, 0)]
    # Only what is below the high watermark: the uncommitted batch at 2 is not reported.
    assert result.records == ((0, b"a"), (1, b"b"))
    assert result.high_watermark == 2 and result.next_offset == 2
