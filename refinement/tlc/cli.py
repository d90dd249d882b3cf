"""The command line of the TLC models (`make tlc`, `make tlc-table`):

python -m refinement.tlc check-all [--deep] [--only NAME ...]
python -m refinement.tlc table --write spec/README.md [--deep]
python -m refinement.tlc list
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from refinement.tlc.models import Model, check_model, load_models, select_models
from refinement.tlc.output import TlcError, TlcResult
from refinement.tlc.run import SPEC_DIR

TABLE_BEGIN = "<!-- models:begin -->"
TABLE_END = "<!-- models:end -->"


def _fmt_seconds(s: float) -> str:
    return f"{s:.0f} s" if s >= 10 else f"{s:.1f} s"


_TABLE_HEADER = (
    "| model | kind | spec | constants | distinct states | depth | time | result |\n"
    "| --- | --- | --- | --- | ---: | ---: | ---: | --- |"
)


def _row(model: Model, res: TlcResult | None, verdict: str) -> str:
    consts = (
        ", ".join(f"{k} {v}" if v.startswith("<-") else f"{k}={v}" for k, v in model.constants)
        or "-"
    )
    consts = consts.replace("|", "\\|")
    spec = model.spec.relative_to(SPEC_DIR).as_posix()
    if res is None:
        return f"| {model.name} | {model.kind.value} | {spec} | {consts} | - | - | - | {verdict} |"
    return (
        f"| {model.name} | {model.kind.value} | {spec} | {consts} | {res.distinct_states:,} "
        f"| {res.depth} | {_fmt_seconds(res.seconds)} | {verdict} |"
    )


def _existing_rows(readme: Path) -> dict[str, str]:
    """Rows of the generated table already in `readme`, by model name."""
    if not readme.exists():
        return {}
    text = readme.read_text()
    if TABLE_BEGIN not in text or TABLE_END not in text:
        return {}
    section = text.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines()[2:]:
        cells = line.split("|")
        if len(cells) > 2:
            rows[cells[1].strip()] = line
    return rows


def _table(order: Sequence[Model], rows: dict[str, str]) -> str:
    """The table in registry order; models without a row (not run, none kept) are left out."""
    return "\n".join([_TABLE_HEADER, *(rows[m.name] for m in order if m.name in rows)])


def _run_models(models: Sequence[Model], workers: int) -> tuple[dict[str, str], bool]:
    rows: dict[str, str] = {}
    all_good = True
    for model in models:
        print(f"[tlc] {model.name} ({model.kind.value}) ...", flush=True)
        try:
            res = check_model(model, workers=workers)
        except TlcError as exc:
            print(f"[tlc] {model.name}: ERROR {exc}", flush=True)
            rows[model.name] = _row(model, None, "ERROR (TLC did not finish)")
            all_good = False
            continue
        good, verdict = model.judge(res)
        all_good = all_good and good
        print(
            f"[tlc] {model.name:<32} {verdict:<45} distinct={res.distinct_states:,} "
            f"depth={res.depth} time={_fmt_seconds(res.seconds)}",
            flush=True,
        )
        rows[model.name] = _row(model, res, verdict)
    return rows, all_good


def write_table(readme: Path, table: str) -> None:
    """Replace the marked section of `readme` with `table` (append the section if absent)."""
    text = readme.read_text() if readme.exists() else ""
    block = f"{TABLE_BEGIN}\n{table}\n{TABLE_END}"
    if TABLE_BEGIN in text and TABLE_END in text:
        head, rest = text.split(TABLE_BEGIN, 1)
        _, tail = rest.split(TABLE_END, 1)
        text = head + block + tail
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    readme.write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m refinement.tlc")
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("check-all", "table", "list"):
        p = sub.add_parser(name)
        p.add_argument("--deep", action="store_true", help="also run the deep models")
        p.add_argument("--only", nargs="*", default=[], help="model names to run")
        p.add_argument("--workers", type=int, default=2)
        if name == "table":
            p.add_argument("--write", type=Path, help="README whose marked section is rewritten")
    args = parser.parse_args(argv)
    models = select_models(load_models(), deep=args.deep, only=args.only)
    if args.cmd == "list":
        for m in models:
            print(f"{m.name}\t{m.kind.value}\t{m.spec.name}\t{m.expect or ''}")
        return 0
    rows, all_good = _run_models(models, args.workers)
    if args.cmd == "table":
        # Rows of models not run this time (--only, or deep without --deep) are kept.
        kept = _existing_rows(args.write) if args.write is not None else {}
        table = _table(load_models(), {**kept, **rows})
        if args.write is not None:
            write_table(args.write, table)
            print(f"[tlc] wrote {len(rows)} new rows to {args.write}")
        else:
            print(table)
    print(f"[tlc] {'all models as expected' if all_good else 'UNEXPECTED RESULTS'}")
    return 0 if all_good else 1
