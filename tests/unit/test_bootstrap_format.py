"""A dynamic quorum's bootstrap (KIP-853) without a JVM: Kafka's --initial-controllers syntax
(DynamicVoter.parse), the Voters record in Java's HashMap order, `kraft format
--standalone/--initial-controllers`, the voter set a data directory states at start, and the
configuration keys of a dynamic quorum. The byte comparison with Kafka's own StorageTool is
tests/interop/test_bootstrap_checkpoint.py."""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from kraft.cli import main
from kraft.ids import DirectoryId, NodeId, Offset
from kraft.protocol import uuid_to_base64
from kraft.server.config import ConfigError, load_config
from kraft.server.voters import NoVotersError, voters_at_start
from kraft.storage.bootstrap import (
    BootstrapError,
    DynamicVoter,
    parse_initial_controllers,
    stated_voters,
    voters_record_of,
)
from kraft.storage.meta_properties import read_meta_properties
from kraft.storage.segmented_log import LOG_DIR_NAME, SegmentedLog
from kraft.storage.snapshot_files import check_snapshot

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
D = {n: DirectoryId(uuid.UUID(int=(0xB0 << 64) | n, version=4)) for n in range(1, 40)}


def _format(data: Path, node: int, *extra: str) -> int:
    args = ["format", "--data-dir", str(data), "--node-id", str(node), "--cluster-id", CLUSTER]
    return main([*args, *extra])


def _spec(*nodes: int, host: str = "127.0.0.1") -> str:
    return ",".join(f"{n}@{host}:{9000 + n}:{uuid_to_base64(D[n])}" for n in nodes)


def test_initial_controllers_parse_as_kafka_parses_them() -> None:
    voters = parse_initial_controllers(_spec(3, 1) + ",")
    assert voters == (
        DynamicVoter(NodeId(1), "127.0.0.1", 9001, D[1]),
        DynamicVoter(NodeId(3), "127.0.0.1", 9003, D[3]),
    )
    (v6,) = parse_initial_controllers(f"2@[::1]:9092:{uuid_to_base64(D[2])}")
    assert (v6.host, v6.port) == ("::1", 9092)
    assert str(v6) == f"2@[::1]:9092:{uuid_to_base64(D[2])}"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1@127.0.0.1:9091",  # no directory id
        "@127.0.0.1:9091:AAAAAAAAAAAAAAAAAAAAAQ",
        "x@127.0.0.1:9091:AAAAAAAAAAAAAAAAAAAAAQ",
        "-1@127.0.0.1:9091:AAAAAAAAAAAAAAAAAAAAAQ",
        "1@127.0.0.1:70000:AAAAAAAAAAAAAAAAAAAAAQ",
        "1@[::1:9091:AAAAAAAAAAAAAAAAAAAAAQ",
        "1@127.0.0.1:9091:AAAAAAAAAAAAAAAAAAAAAA",  # the reserved zero UUID
        "1@127.0.0.1:9091:not-a-uuid",
        "1@a:1:AAAAAAAAAAAAAAAAAAAAAQ,1@b:2:AAAAAAAAAAAAAAAAAAAAAg",  # twice
    ],
)
def test_bad_initial_controllers_are_refused(text: str) -> None:
    with pytest.raises(BootstrapError):
        parse_initial_controllers(text)


def test_the_voters_record_lists_voters_in_java_hashmap_order() -> None:
    def order(*nodes: int) -> list[int]:
        record = voters_record_of(parse_initial_controllers(_spec(*nodes)), "controller")
        return [v.voter_id for v in record.voters]

    assert order(3, 2, 1) == [1, 2, 3]
    # 17 lands in bucket 1 of a 16- (then 8-) bucket table, right after 1.
    assert order(1, 2, 3, 17) == [1, 17, 2, 3]
    record = voters_record_of(parse_initial_controllers(_spec(1)), "controller")
    (voter,) = record.voters
    assert [(e.name, e.host, e.port) for e in voter.endpoints] == [
        ("CONTROLLER", "127.0.0.1", 9001)
    ]
    assert (voter.min_supported_version, voter.max_supported_version) == (0, 1)


def test_format_initial_controllers_writes_the_bootstrap_and_the_voters_directory_id(
    tmp_path: Path,
) -> None:
    data = tmp_path / "n2"
    spec = _spec(1, 2, 3)
    assert _format(data, 2, "--initial-controllers", spec) == 0
    assert read_meta_properties(data).directory_id == D[2]
    summary = check_snapshot(data / LOG_DIR_NAME / "00000000000000000000-0000000000.checkpoint")
    assert summary.kraft_version == 1 and summary.voters is not None
    assert [(v.voter_id, v.voter_directory_id) for v in summary.voters.voters] == [
        (n, D[n]) for n in (1, 2, 3)
    ]
    # A directory id that contradicts the node's in --initial-controllers is refused.
    other = ["format", "--data-dir", str(tmp_path / "x"), "--node-id", "2", "--cluster-id", CLUSTER]
    assert (
        main([*other, "--initial-controllers", spec, "--directory-id", uuid_to_base64(D[9])]) == 2
    )
    # A node not among the initial controllers gets a new directory id and the bootstrap.
    obs = tmp_path / "n7"
    assert _format(obs, 7, "--initial-controllers", spec) == 0
    assert read_meta_properties(obs).directory_id not in D.values()
    # --standalone needs this node's endpoint.
    assert _format(tmp_path / "s", 1, "--standalone") == 2
    assert _format(tmp_path / "s", 1, "--standalone", "--listener", "127.0.0.1:9999") == 0


def _config(tmp_path: Path, **props: str) -> Path:
    path = tmp_path / "node.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return path


def test_a_dynamic_quorum_node_starts_from_its_storage_not_its_configuration(
    tmp_path: Path,
) -> None:
    data = tmp_path / "n1"
    spec = _spec(1, 2, 3)
    assert _format(data, 1, "--initial-controllers", spec) == 0
    config = load_config(
        _config(
            tmp_path,
            **{
                "node.id": "1",
                "metadata.log.dir": str(data),
                "listeners": "CONTROLLER://127.0.0.1:9001",
                "controller.quorum.bootstrap.servers": "127.0.0.1:9001,127.0.0.1:9002",
            },
        )
    )
    assert config.voters == () and len(config.bootstrap_servers) == 2
    with SegmentedLog.open(data) as log_:
        started, history = voters_at_start(config, None, log_)
    assert [(v.node_id, v.port) for v in started.voters] == [(1, 9001), (2, 9002), (3, 9003)]
    [(offset, voters)] = history
    assert offset == Offset(-1)
    assert [(k.id, k.directory_id) for k in voters] == [(n, D[n]) for n in (1, 2, 3)]
    # Reformatted without a bootstrap and configured with bootstrap servers only: no voters;
    # the node starts as an observer that finds the quorum through the bootstrap servers.
    bare = tmp_path / "bare"
    assert _format(bare, 1) == 0
    with SegmentedLog.open(bare) as log_:
        assert stated_voters(None, log_).latest is None
        assert voters_at_start(config, None, log_) == (config, ())
        # With neither bootstrap servers nor static voters there is nobody to ask.
        with pytest.raises(NoVotersError):
            voters_at_start(replace(config, bootstrap_servers=()), None, log_)


def test_a_node_needs_static_voters_or_bootstrap_servers(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        load_config(_config(tmp_path, **{"node.id": "1", "metadata.log.dir": str(tmp_path)}))
