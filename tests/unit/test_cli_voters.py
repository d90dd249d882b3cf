"""`kraft quorum add-voter / remove-voter` (add-controller / remove-controller): what they read
from the node's configuration and meta.properties, what they print, and their exit codes, as
kafka-metadata-quorum's (no quorum needed: --dry-run, bad input, an unreachable quorum)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraft.cli import main
from kraft.cli.voters import controller_endpoints
from kraft.protocol import uuid_to_base64
from kraft.protocol.rpc import Listener
from kraft.storage.meta_properties import format_storage


def test_controller_endpoints_prefer_advertised_listeners_in_controller_listener_order() -> None:
    props = {
        "listeners": "CONTROLLER://0.0.0.0:9093,OTHER://:9094,PLAINTEXT://[::1]:9092",
        "advertised.listeners": "CONTROLLER://c1.example:9093",
        "controller.listener.names": "OTHER,CONTROLLER",
    }
    assert controller_endpoints(props) == (
        Listener("OTHER", "localhost", 9094),
        Listener("CONTROLLER", "c1.example", 9093),
    )
    # No controller.listener.names: kraft's listener name (the listeners entry's).
    assert controller_endpoints({"listeners": "C://h:1"}) == (Listener("C", "h", 1),)


def _config(tmp_path: Path, **props: str) -> Path:
    path = tmp_path / "node.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return path


def test_add_voter_dry_run_prints_what_kafka_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    meta = format_storage(tmp_path / "data", "AAAAAAAAAAAAAAAAAAAAAA", 4)
    config = _config(
        tmp_path,
        **{
            "node.id": "4",
            "process.roles": "controller",
            "listeners": "CONTROLLER://127.0.0.1:9094",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": str(tmp_path / "data"),
        },
    )
    args = ["--bootstrap", "127.0.0.1:1", "--command-config", str(config), "--dry-run"]
    assert main(["quorum", "add-controller", *args]) == 0
    assert capsys.readouterr().out == (
        f"DRY RUN of adding controller 4 with directory id {uuid_to_base64(meta.directory_id)} "
        "and endpoints: CONTROLLER://127.0.0.1:9094\n"
    )


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"listeners": "CONTROLLER://h:1"}, "node.id not found"),
        ({"node.id": "-1"}, "negative"),
        ({"node.id": "4", "process.roles": "broker"}, "process.roles"),
        ({"node.id": "4", "process.roles": "controller"}, "neither metadata.log.dir"),
        ({"node.id": "4", "metadata.log.dir": "/nonexistent/x"}, "does not exist"),
    ],
)
def test_add_voter_refuses_an_unusable_configuration_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], props: dict[str, str], message: str
) -> None:
    config = _config(tmp_path, **props)
    assert main(["quorum", "add-voter", "--bootstrap", "h:1", "--command-config", str(config)]) == 2
    assert message in capsys.readouterr().err


def test_remove_voter_checks_its_arguments_then_reports_an_unreachable_quorum(
    capsys: pytest.CaptureFixture[str],
) -> None:
    d = "AAAAAAAAAAAAAAAAAAAAAQ"
    assert main(["quorum", "remove-voter", "--bootstrap", "h:1", "-i", "-3", "-d", d]) == 2
    assert "negative" in capsys.readouterr().err
    assert main(["quorum", "remove-controller", "--bootstrap", "h:1", "-i", "3", "-d", "??"]) == 2
    assert "--controller-directory-id" in capsys.readouterr().err
    assert (
        main(["quorum", "remove-voter", "--bootstrap", "h:1", "-i", "3", "-d", d, "--dry-run"]) == 0
    )
    # Kafka's words, the two spaces of its format string included.
    dry = f"DRY RUN of removing  KRaft controller 3 with directory id {d}\n"
    assert capsys.readouterr().out == dry
    # Nobody listens on port 1: exit 1, the reason named, within the timeout.
    argv = ["quorum", "remove-voter", "--bootstrap", "127.0.0.1:1", "-i", "3", "-d", d]
    assert main([*argv, "--timeout-ms", "300"]) == 1
    assert "cannot connect" in capsys.readouterr().err


def test_describe_shows_a_leader_that_removed_itself_instead_of_failing() -> None:
    """KIP-856: a leader that removed itself leads until the change commits; DescribeQuorum
    then lists it among the observers. Kafka's tool fails on such an answer; ours prints the
    leader's row from the observers (and refuses an answer that names no row for it)."""
    import uuid

    from kraft.cli.quorum import NoLeaderRowError, replication_lines, status_lines
    from kraft.core.quorum_info import QuorumDescription, ReplicaDescription
    from kraft.ids import DirectoryId, Epoch, NodeId, Offset, ReplicaKey

    def row(n: int, end: int) -> ReplicaDescription:
        return ReplicaDescription(
            ReplicaKey(NodeId(n), DirectoryId(uuid.UUID(int=n))), end, 1000, 1000
        )

    d = QuorumDescription(NodeId(1), Epoch(3), Offset(10), (row(2, 9), row(3, 10)), (row(1, 10),))
    status = status_lines("cid", d)
    assert status[1] == f"{'LeaderId:':<24}1" and status[4] == f"{'MaxFollowerLag:':<24}1"
    rows = [line.split("\t")[0].strip() for line in replication_lines(d, human=False, now_ms=0)]
    statuses = [
        line.split("\t")[-2].strip() for line in replication_lines(d, human=False, now_ms=0)
    ]
    assert list(zip(rows, statuses, strict=True)) == [
        ("NodeId", "Status"),
        ("1", "Leader"),
        ("2", "Follower"),
        ("3", "Follower"),
    ]
    gone = QuorumDescription(NodeId(7), Epoch(3), Offset(10), (row(2, 9),), ())
    with pytest.raises(NoLeaderRowError):
        status_lines("cid", gone)


def test_the_kraft_version_probe_of_an_unreachable_node_is_a_timeout() -> None:
    import asyncio

    from kraft.client import Address
    from kraft.client_voters import kraft_version_range
    from kraft.errors import ErrorCode

    got = asyncio.run(kraft_version_range(Address("127.0.0.1", 1), 0.5))
    assert got == (ErrorCode.REQUEST_TIMED_OUT, None)
