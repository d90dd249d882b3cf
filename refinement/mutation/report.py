"""The mutation report: report.md and report.html from a campaign's directory alone (the
`mutants` Parquet dataset read with pandas, campaign.json) and the equivalents file.

Score = killed / (mutants - accepted equivalents), per module, per operator, and per layer
(the mutants each layer killed first, and the score cumulated layer by layer, cheapest first).
Every survivor is shown with its diff, and with its reason where the equivalents file lists
it; a survivor the file does not list is "unexplained" and fails the campaign.

    python -m refinement.mutation.report out/mutate-NAME [--equivalents FILE]

`--pool DIR DIR ...` scores fresh samples together, judged by today's equivalents file: a
survivor since listed as equivalent leaves the count, one killed since by a new check still
counts as a survivor of its sample (the estimate is of what the layers caught before anyone
looked), and a mutant drawn by two samples counts once, from the first. The pooled score comes
with a 95 % Wilson interval: a sample of 40 cannot tell 95 % from 90 %.
"""

from __future__ import annotations

import argparse
import html
import json
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from refinement.mutation.execute import LAYERS

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True, slots=True)
class Equivalent:
    id: str
    reason: str


def load_equivalents(path: Path) -> dict[str, Equivalent]:
    """The `[[equivalent]]` tables of a TOML file, by id; each must give a reason."""
    if not path.exists():
        return {}
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    out: dict[str, Equivalent] = {}
    for entry in data.get("equivalent", []):
        mid, reason = str(entry.get("id", "")), str(entry.get("reason", "")).strip()
        if not mid or not reason:
            raise ValueError(f"{path}: every [[equivalent]] needs an id and a reason: {entry}")
        if mid in out:
            raise ValueError(f"{path}: mutant {mid} listed twice")
        out[mid] = Equivalent(mid, reason)
    return out


@dataclass(slots=True)
class Report:
    path: Path
    summary: str
    unexplained: list[str]
    score: float | None


def _score(killed: int, total: int, equivalent: int) -> float | None:
    counted = total - equivalent
    return None if counted <= 0 else killed / counted


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def _group(df: pd.DataFrame, by: str) -> pd.DataFrame:
    import pandas as pd

    rows = []
    for key, g in df.groupby(by, sort=True):
        killed = int(g["killed"].sum())
        eq = int(g["equivalent"].sum())
        rows.append(
            {
                by: key,
                "mutants": len(g),
                "killed": killed,
                "equivalent": eq,
                "unexplained": int(g["unexplained"].sum()),
                "score": _pct(_score(killed, len(g), eq)),
            }
        )
    return pd.DataFrame(rows)


def _layers(df: pd.DataFrame, layers: Sequence[str], equivalent: int) -> pd.DataFrame:
    import pandas as pd

    rows = []
    cumulative = 0
    total = len(df)
    for layer in layers:
        g = df[df["killed_by"] == layer]
        cumulative += len(g)
        ran = df[df["layers_run"].map(lambda names, lay=layer: lay in list(names))]
        secs = [
            s
            for names, times in zip(ran["layers_run"], ran["layer_seconds"], strict=True)
            for n, s in zip(names, times, strict=True)
            if n == layer
        ]
        rows.append(
            {
                "layer": layer,
                "ran on": len(ran),
                "killed first": len(g),
                "failed": int((g["kill_kind"] == "failed").sum()),
                "crash": int((g["kill_kind"] == "crash").sum()),
                "timeout": int((g["kill_kind"] == "timeout").sum()),
                "cumulative score": _pct(_score(cumulative, total, equivalent)),
                "mean s": round(sum(secs) / len(secs), 1) if secs else 0.0,
            }
        )
    return pd.DataFrame(rows)


def _md_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "(none)\n"
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        cells = [str(v).replace("|", "\\|").replace("\n", " ") for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _html_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "<p>(none)</p>"
    page: str = df.to_html(index=False, border=0, classes="t", escape=True)
    return page


class _Page:
    """The same content in Markdown and in HTML."""

    def __init__(self) -> None:
        self.md: list[str] = []
        self.html: list[str] = []

    def heading(self, level: int, text: str) -> None:
        self.md.append(f"{'#' * level} {text}\n")
        self.html.append(f"<h{level}>{html.escape(text)}</h{level}>")

    def para(self, text: str) -> None:
        self.md.append(text + "\n")
        self.html.append(f"<p>{html.escape(text)}</p>")

    def table(self, df: pd.DataFrame) -> None:
        self.md.append(_md_table(df))
        self.html.append(_html_table(df))

    def code(self, text: str, lang: str = "diff") -> None:
        self.md.append(f"```{lang}\n{text.rstrip()}\n```\n")
        self.html.append(f"<pre>{html.escape(text)}</pre>")


def build_report(out: Path, equivalents_path: Path) -> Report:
    """Write out/report.md and out/report.html; say whether any survivor is unexplained."""
    import pandas as pd

    manifest = json.loads((out / "campaign.json").read_text())
    df = pd.read_parquet(out / "mutants").sort_values(["file", "line", "id"])
    equivalents = load_equivalents(equivalents_path)
    survived = ~df["killed"]
    df["equivalent"] = survived & df["id"].isin(equivalents)
    df["unexplained"] = survived & ~df["id"].isin(equivalents)
    df["module"] = df["file"].map(lambda f: Path(str(f)).stem)
    killed_n = int(df["killed"].sum())
    eq_n = int(df["equivalent"].sum())
    score = _score(killed_n, len(df), eq_n)
    listed_killed = sorted(df[df["killed"] & df["id"].isin(equivalents)]["id"])
    unexplained = sorted(df[df["unexplained"]]["id"])
    cfg = manifest["config"]
    s = cfg["settings"]
    layers = [n for n in LAYERS if n in s["layers"]]

    page = _Page()
    page.heading(1, "KRaft mutation campaign")
    sample = (
        f"a sample of {manifest['mutants']} (seed {cfg['seed']})"
        if cfg["sample"]
        else f"{manifest['mutants']}"
    )
    page.para(
        f"{sample} of the {manifest['generated']} mutants of the core; layers"
        f" {', '.join(layers)}; simulator sweep {s['sim_seeds']} seed(s) x"
        f" {', '.join(s['sim_profiles'])} at {s['sim_events']} events; hypothesis"
        f" {s['hypothesis_examples']} examples x {s['hypothesis_steps']} steps; TLC"
        f" {s['tlc_traces']} trace(s) of {s['tlc_events']} events. {manifest['wall_s']:.0f} s"
        f" wall on {manifest['cores']} core(s); the unmutated core's layers took"
        f" {', '.join(f'{k} {v:.1f} s' for k, v in manifest['baseline'].items())}; timeouts"
        f" {', '.join(f'{k} {v:.0f} s' for k, v in manifest['timeouts_s'].items())}."
    )
    page.para(
        f"Mutation score: {_pct(score)} ({killed_n} killed of {len(df)} mutants, {eq_n}"
        f" accepted as equivalent, {len(unexplained)} unexplained survivor(s))."
    )
    page.heading(2, "Per layer (the layer that killed each mutant first, cheapest first)")
    page.table(_layers(df, layers, eq_n))
    page.heading(2, "Per module")
    page.table(_group(df, "module"))
    page.heading(2, "Per operator")
    page.table(_group(df, "operator"))

    page.heading(2, "Survivors")
    survivors = df[survived]
    if survivors.empty:
        page.para("None: every mutant was killed.")
    for r in survivors.itertuples():
        eq = equivalents.get(str(r.id))
        verdict = f"equivalent: {eq.reason}" if eq else "UNEXPLAINED (not in the equivalents file)"
        page.heading(3, f"{r.id} {r.file}:{r.line} [{r.operator}] in {r.function or '<module>'}")
        page.para(f"`{r.original}` -> `{r.replacement}`; {verdict}")
        page.code(str(r.diff))
    if listed_killed:
        page.heading(2, "Listed as equivalent but killed (remove from the equivalents file)")
        page.para(", ".join(listed_killed))

    page.heading(2, "Killed mutants")
    killed = df[df["killed"]][
        [
            "id", "file", "line", "operator", "killed_by", "kill_kind", "runs_needed",
            "events_needed", "kill_profile", "kill_seed", "detail",
        ]
    ]  # fmt: skip
    page.table(killed.assign(detail=killed["detail"].map(lambda d: str(d)[:160])))

    (out / "report.md").write_text("\n".join(page.md), encoding="utf-8")
    style = (
        "body{font-family:sans-serif;margin:2em;max-width:1200px}"
        "table.t{border-collapse:collapse;font-size:13px}"
        "table.t td,table.t th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
        "pre{background:#f6f6f6;padding:6px;font-size:12px}"
    )
    path = out / "report.html"
    path.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>KRaft mutation campaign"
        f"</title><style>{style}</style></head><body>{''.join(page.html)}</body></html>\n",
        encoding="utf-8",
    )
    lines = [
        f"mutation campaign {out}: {len(df)} mutants, {killed_n} killed, {eq_n} equivalent,"
        f" {len(unexplained)} unexplained; score {_pct(score)}; {manifest['wall_s']:.0f} s",
        "  killed first by: "
        + ", ".join(f"{n} {int((df['killed_by'] == n).sum())}" for n in layers),
    ]
    lines += [f"  UNEXPLAINED survivor {i}" for i in unexplained]
    lines.append(f"  report: {path} (and report.md)")
    return Report(path, "\n".join(lines), unexplained, score)


def wilson_interval(killed: int, counted: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion killed/counted (95 % for z = 1.96)."""
    if counted <= 0:
        return (0.0, 1.0)
    p = killed / counted
    centre = p + z * z / (2 * counted)
    spread = z * ((p * (1 - p) + z * z / (4 * counted)) / counted) ** 0.5
    scale = 1 + z * z / counted
    return (max(0.0, (centre - spread) / scale), min(1.0, (centre + spread) / scale))


def pool(outs: Sequence[Path], equivalents_path: Path) -> str:
    """Per-sample and pooled scores of fresh samples under today's equivalents (module doc)."""
    import pandas as pd

    from refinement.mutation import fresh

    outcomes = [
        fresh.Outcome(str(out), "", str(r.id), "", "", bool(r.killed), "")
        for out in outs
        for r in pd.read_parquet(out / "mutants", columns=["id", "killed"]).itertuples()
    ]
    return fresh.table(fresh.pool(outcomes, load_equivalents(equivalents_path)))


def main(argv: Sequence[str] | None = None) -> int:
    from refinement.mutation.campaign import EQUIVALENTS

    p = argparse.ArgumentParser(prog="python -m refinement.mutation.report")
    p.add_argument("out", type=Path, nargs="+", help="a campaign's directory (several with --pool)")
    p.add_argument("--equivalents", type=Path, default=EQUIVALENTS)
    p.add_argument(
        "--pool", action="store_true", help="score fresh samples together (see the module doc)"
    )
    args = p.parse_args(argv)
    if args.pool:
        print(pool(args.out, args.equivalents))
        return 0
    if len(args.out) != 1:
        p.error("one campaign directory, or several with --pool")
    report = build_report(args.out[0], args.equivalents)
    print(report.summary)
    return 1 if report.unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
