"""`kraft chaos`: help, the printed schedule, and clear errors for bad usage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kraft.cli import main


def test_help_lists_the_fault_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["chaos", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "crash-unflushed" in out and "--allow-duplicates" in out and "--seed" in out


def test_print_schedule_is_deterministic(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["chaos", "--print-schedule", "--seed", "9", "--cycles", "12"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert main(args) == 0
    assert capsys.readouterr().out == first
    lines = [json.loads(line) for line in first.splitlines()]
    assert [d["cycle"] for d in lines] == list(range(12))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--faults", "kill-leader,bogus"], "unknown fault kind 'bogus'"),
        (["--nodes", "2"], "--nodes must be at least 3"),
        (["--writers", "0"], "--writers must be at least 1"),
        (["--min-hold-ms", "900", "--max-hold-ms", "100"], "--min-hold-ms <= --max-hold-ms"),
        (["--tlc-max-events", "-1"], "--tlc-max-events must not be negative"),
    ],
)
def test_bad_usage_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["chaos", *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_non_empty_data_root_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "something").write_text("x")
    assert main(["chaos", "--data-root", str(tmp_path)]) == 2
    assert "is not empty" in capsys.readouterr().err
