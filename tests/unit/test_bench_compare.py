"""benchmarks.compare reads the figures back from the tables `benchmarks.run` writes."""

from __future__ import annotations

from benchmarks.compare import parse_figures, render
from benchmarks.figure import Figure
from benchmarks.run import render as render_benchmarks


def test_parse_figures_reads_back_what_run_renders() -> None:
    figures = [
        Figure("encode", 6_493_835.0, "records/s", ">= 1", True, "raw", 9_000_000.0),
        Figure("latency p99 (open loop)", 13.78, "ms", "(informative)", None),
    ]
    md = render_benchmarks({"codec": figures}, {"cluster": "ImportError: no"})
    assert parse_figures(md) == {
        "codec: encode": (6_493_835.0, "records/s"),
        "codec: latency p99 (open loop)": (13.78, "ms"),
    }


def test_render_gives_the_ratio_of_medians_and_marks_gone_and_new_figures() -> None:
    table = render(
        "abc123",
        3,
        {"s: a": [10.0, 30.0, 20.0], "s: gone": [1.0]},
        {"s: a": [40.0, 10.0, 30.0], "s: new": [2.0]},
        {"s: a": "ops/s", "s: gone": "ops/s", "s: new": "ops/s"},
    )
    assert "| s: a | 20.00 ops/s | 30.00 ops/s | 1.50x |" in table
    assert "| s: gone | 1 | (gone) | |" in table
    assert "| s: new | (new) | 2.00 | |" in table


def test_a_section_written_after_the_files_last_kept_one_starts_on_its_own_line() -> None:
    from benchmarks.run import SUITES, _sections

    first, second = list(SUITES)[:2]
    before = f"# Benchmarks\n\n## {first}\n\n| a | b |"  # the file's end: no newline
    md = render_benchmarks({second: [Figure("x", 1.0, "ms", "", None)]}, {}, _sections(before))
    assert f"| a | b |\n\n## {second}\n" in md
