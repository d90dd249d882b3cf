"""The campaign report: report.html with PNG plots, built from a campaign's output directory
alone (Parquet aggregates read with pandas; no Spark needed).

    python -m refinement.pipeline.report out/campaign-NAME
"""

from __future__ import annotations

import html
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kraft.core.vocabulary import Action
from refinement.pipeline.seedrun import PAIR_ACTIONS, PAIR_STATES

if TYPE_CHECKING:
    import pandas as pd

_MAX_FAILURES_SHOWN = 20
# The KIP-630 actions (KRaft.tla's snapshot steps), each shown with its coverage.
SNAPSHOT_ACTIONS: tuple[str, ...] = tuple(
    a.value
    for a in (
        Action.CREATE_SNAPSHOT,
        Action.ADVANCE_LOG_START_OFFSET,
        Action.SEND_FETCH_SNAPSHOT_REQUEST,
        Action.HANDLE_FETCH_SNAPSHOT_REQUEST,
        Action.HANDLE_FETCH_SNAPSHOT_RESPONSE,
        Action.INSTALL_SNAPSHOT,
    )
)
_METRIC_TITLES = {
    "time_to_first_leader_ms": "time to first leader (virtual ms)",
    "election_ms": "election time: first timeout to new leader (virtual ms)",
    "commit_latency_ms": "commit latency: accepted to committed (virtual ms)",
}


def _table(name: str, out: Path) -> pd.DataFrame:
    import pandas as pd

    return pd.read_parquet(out / "aggregates" / name)


def _plot_histograms(hist: pd.DataFrame, metric: str, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    rows = hist[hist["metric"] == metric]
    for profile, group in rows.groupby("profile", sort=True):
        group = group.sort_values("bucket_lo")
        total = group["count"].sum()
        # Bucket [2^k, 2^(k+1)) drawn at its lower edge; 0 drawn at 0.5 on the log axis.
        xs = [max(0.5, float(b)) for b in group["bucket_lo"]]
        ys = list(group["count"] / total)
        # Close the last bucket at its upper edge.
        ax.step([*xs, xs[-1] * 2], [*ys, ys[-1]], where="post", label=f"{profile} (n={total:,})")
    if rows.empty:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    else:
        ax.set_xscale("log", base=2)
        ax.legend(fontsize="small")
    ax.set_xlabel(_METRIC_TITLES[metric])
    ax.set_ylabel("fraction (power-of-two buckets)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _plot_coverage(pairs: pd.DataFrame, path: Path) -> None:
    import matplotlib.pyplot as plt
    import numpy as np

    grid = pairs.pivot(index="state", columns="action", values="events")
    grid = grid.reindex(index=list(PAIR_STATES), columns=list(PAIR_ACTIONS)).fillna(0)
    values = grid.to_numpy(dtype=float)
    fig, ax = plt.subplots(figsize=(12, 4.8))
    image = ax.imshow(np.log10(values + 1.0), cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(grid.columns)), list(grid.columns), rotation=60, ha="right")
    ax.set_yticks(range(len(grid.index)), list(grid.index))
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            if values[i, j] == 0:
                ax.text(j, i, "0", ha="center", va="center", color="red", fontsize=7)
    fig.colorbar(image, ax=ax, label="log10(events + 1)")
    ax.set_title("coverage: state before the step x action (red 0: never seen)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def snapshot_coverage(actions: pd.DataFrame, samples: pd.DataFrame) -> pd.DataFrame:
    """One row per KIP-630 action: the campaign's events and runs that took it, and the
    TLC-validated trace samples (accepted) whose validated prefix holds it."""
    import pandas as pd

    spec = actions[actions["kind"] == "spec"].set_index("name")
    rows = []
    for name in SNAPSHOT_ACTIONS:
        validated = [
            f"{r.profile}/{r.seed}"
            for r in samples.itertuples()
            if f"action:{name}" in set(r.classes) and str(r.validation).startswith("accepted")
        ]
        known = name in spec.index
        rows.append(
            {
                "action": name,
                "events": int(spec.loc[name, "events"]) if known else 0,
                "seeds": int(spec.loc[name, "seeds"]) if known else 0,
                "covered": bool(spec.loc[name, "covered"]) if known else False,
                "validated_in": ", ".join(validated) or "-",
            }
        )
    return pd.DataFrame(rows)


def _frame_html(df: pd.DataFrame) -> str:
    page: str = df.to_html(index=False, border=0, classes="t", float_format=lambda x: f"{x:,.1f}")
    return page


def build_report(out: Path) -> Path:
    """Write out/report.html and its PNGs; return the page's path."""
    import matplotlib

    matplotlib.use("Agg")
    manifest = json.loads((out / "campaign.json").read_text())
    hist = _table("histograms", out)
    dists = _table("distributions", out)
    actions = _table("action_coverage", out)
    pairs = _table("pair_coverage", out)
    violations = _table("violations", out)
    profiles = _table("profiles", out)
    samples = _table("trace_samples", out)

    parts: list[str] = []
    e = html.escape
    cfg = manifest["config"]
    parts.append(
        f"<h1>KRaft simulation campaign</h1><p>{manifest['units']:,} runs: seeds"
        f" {cfg['first_seed']}..{cfg['first_seed'] + cfg['seeds'] - 1}, profile"
        f" <b>{e(cfg['profile'])}</b>, {cfg['events']:,} fault-phase events per run"
        f"{', mutant <b>' + e(cfg['mutant']) + '</b>' if cfg['mutant'] else ''}."
        f" {manifest['events']:,} events in {manifest['wall_s']:.1f}s wall"
        f" ({manifest['events_per_s']:,.0f} events/s); failing runs:"
        f" <b>{manifest['failing']}</b>.</p>"
    )
    parts.append("<h2>Profiles</h2>" + _frame_html(profiles))

    parts.append("<h2>Violations by invariant</h2>")
    if violations.empty:
        parts.append("<p>None.</p>")
    for row in violations.itertuples():
        failures = list(row.failures)
        parts.append(f"<h3>{e(row.invariant)}: {row.seeds} run(s)</h3><table class=t>")
        parts.append("<tr><th>profile</th><th>seed</th><th>replay</th><th>detail</th></tr>")
        parts.extend(
            f"<tr><td>{e(f['profile'])}</td><td>{f['seed']}</td>"
            f"<td><code>{e(f['replay_command'])}</code></td><td>{e(f['detail'])}</td></tr>"
            for f in failures[:_MAX_FAILURES_SHOWN]
        )
        parts.append("</table>")
        if len(failures) > _MAX_FAILURES_SHOWN:
            parts.append(f"<p>... and {len(failures) - _MAX_FAILURES_SHOWN} more.</p>")

    parts.append("<h2>Distributions (virtual time)</h2>" + _frame_html(dists))
    for metric, title in _METRIC_TITLES.items():
        png = f"{metric}.png"
        _plot_histograms(hist, metric, out / png)
        parts.append(f"<h3>{e(title)}</h3><img src='{png}'>")

    parts.append("<h2>Coverage</h2>")
    for kind in ("spec", "sim"):
        missing = actions[(actions["kind"] == kind) & ~actions["covered"]]["name"].tolist()
        parts.append(f"<p>{kind} actions uncovered: <b>{e(', '.join(missing) or 'none')}</b></p>")
    snaps = snapshot_coverage(actions, samples)
    missing = snaps[~snaps["covered"]]["action"].tolist()
    parts.append(
        "<h3>Snapshot actions (KIP-630)</h3><p>Runs that took each snapshot action, and the"
        " earmarked traces accepted by TLC (TraceKRaft.tla) whose validated prefix holds it."
        f" Uncovered: <b>{e(', '.join(missing) or 'none')}</b>.</p>" + _frame_html(snaps)
    )
    parts.append(_frame_html(actions[["kind", "name", "events", "seeds", "first_seed"]]))
    _plot_coverage(pairs, out / "coverage.png")
    covered = int(pairs["covered"].sum())
    parts.append(
        f"<p>(state, action) pairs covered: {covered}/{len(pairs)}; uncovered pairs (many are"
        " unreachable by design, e.g. BecomeLeader outside Candidate):</p>"
        "<img src='coverage.png'>"
    )
    uncovered = pairs[~pairs["covered"]]
    parts.append(
        "<details><summary>uncovered pairs</summary><p>"
        + e(
            ", ".join(
                f"{s}/{a}" for s, a in zip(uncovered["state"], uncovered["action"], strict=True)
            )
        )
        + "</p></details>"
    )

    parts.append(
        "<h2>Traces earmarked for TLC trace validation</h2><p>Each trace is validated up to"
        " the last event its coverage classes first occur at (events_validated): a prefix of"
        f" a behaviour is a behaviour. Events validated: {int(samples['events_validated'].sum()):,}"
        ".</p>"
    )
    shown = samples.assign(classes=samples["classes"].map(lambda c: f"{len(c)} classes"))
    parts.append(_frame_html(shown))
    left_out = _classes_left_out(actions, pairs, samples)
    parts.append(
        f"<p>Covered classes in no earmarked trace (--trace-samples {cfg['trace_samples']}):"
        f" <b>{len(left_out)}</b>{': ' + e(', '.join(left_out)) if left_out else ''}</p>"
    )

    style = (
        "body{font-family:sans-serif;margin:2em;max-width:1200px}"
        "table.t{border-collapse:collapse;font-size:13px}"
        "table.t td,table.t th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
    )
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>KRaft campaign</title>"
        f"<style>{style}</style></head><body>{''.join(parts)}</body></html>\n"
    )
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path


def _classes_left_out(
    actions: pd.DataFrame, pairs: pd.DataFrame, samples: pd.DataFrame
) -> list[str]:
    """Covered coverage classes (named as in the trace_samples table) that no sample has."""
    covered = {
        f"action:{n}"
        for n, kind, c in zip(actions["name"], actions["kind"], actions["covered"], strict=True)
        if c and kind != "noop"
    }
    covered |= {
        f"pair:{s}/{a}"
        for s, a, c in zip(pairs["state"], pairs["action"], pairs["covered"], strict=True)
        if c
    }
    sampled = {str(name) for names in samples["classes"] for name in names}
    return sorted(covered - sampled)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m refinement.pipeline.report CAMPAIGN_DIR", file=sys.stderr)
        return 2
    print(build_report(Path(args[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
