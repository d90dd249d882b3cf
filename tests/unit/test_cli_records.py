"""`kraft append` and `kraft get` argument handling that needs no node (kraft.cli.records)."""

from __future__ import annotations

import pytest

from kraft.cli import main


def test_append_refuses_an_empty_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["append", "--bootstrap", "127.0.0.1:1", "=v"]) == 2
    assert "an empty key" in capsys.readouterr().err


def test_append_with_nothing_to_append_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["append", "--bootstrap", "127.0.0.1:1"]) == 2
    assert "nothing to append" in capsys.readouterr().err


def test_get_from_a_node_that_is_down_fails_with_status_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kraft.cluster import free_ports

    [port] = free_ports(1)
    assert main(["get", "--bootstrap", f"127.0.0.1:{port}", "k"]) == 1
    assert "cannot connect" in capsys.readouterr().err


def test_every_command_has_help() -> None:
    from kraft.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    helps = {c.dest: c.help for c in sub._choices_actions}  # type: ignore[attr-defined]
    assert {"append", "read", "get", "quorum", "format", "start", "cluster"} <= helps.keys()
    assert all(helps.values())
