"""Configuration parsing and the node commands' argument handling (in process, no cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraft.cli import main
from kraft.ids import NodeId
from kraft.meta_properties import read_meta_properties
from kraft.server.config import (
    ConfigError,
    VoterAddress,
    load_config,
    parse_properties,
    parse_voters,
)

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
    assert cfg.election_timeout_ms == 300
    assert cfg.fetch_timeout_ms == 900
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
