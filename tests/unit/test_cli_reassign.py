"""`kraft quorum reassign` argument checks (exit 2) and an unreachable quorum (exit 1)."""

from __future__ import annotations

import pytest

from kraft.cli import main


def test_bad_voters_are_refused_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["quorum", "reassign", "--bootstrap", "127.0.0.1:1", "--voters", "x@y"])
    assert status == 2
    assert "--voters" in capsys.readouterr().err


def test_a_missing_configuration_is_refused_with_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(
        ["quorum", "reassign", "--bootstrap", "127.0.0.1:1", "--voters-from", "/nonexistent.p"]
    )
    assert status == 2
    assert "cannot read" in capsys.readouterr().err


def test_an_unreachable_quorum_is_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    from kraft.cluster import free_ports

    port = free_ports(1)[0]
    voters = "4@127.0.0.1:9:AAAAAAAAAAAAAAAAAAAAAQ"
    status = main(
        [
            "quorum",
            "reassign",
            "--bootstrap",
            f"127.0.0.1:{port}",
            "--voters",
            voters,
            "--dry-run",
            "--timeout-ms",
            "300",
        ]
    )
    assert status == 1
    assert "kraft quorum reassign" in capsys.readouterr().err
