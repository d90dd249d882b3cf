"""Run every benchmark in one process, each beside its baseline, and write BENCHMARKS.md.

Each figure is a median of several runs and is shown with the same work done by the machine's
own limit (raw CRC, raw write+fdatasync, raw pread, ...) measured in the same run, as a ratio.

Run: python -m benchmarks.run --out BENCHMARKS.md   (or: make bench)
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import crc32c

from benchmarks.figure import Figure

RUNS = 5


def median_rate(units: float, run: Callable[[], object], runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return units / statistics.median(times)


def _records_figures() -> list[Figure]:
    from benchmarks import bench_records as br

    n, batch = 1_000_000, 1000
    values = [os.urandom(br.VALUE_SIZE) for _ in range(batch)]

    def raw_concat_crc() -> None:
        # The floor for producing the same bytes: concatenate the values and checksum them.
        for _ in range(n // batch):
            crc32c.crc32c(b"".join(values))

    encode = br.bench_encode(n, batch)
    encode_base = median_rate(n, raw_concat_crc)
    log = br._log(n, batch)

    def raw_crc() -> None:
        crc32c.crc32c(log)

    validate = br.bench_decode_validate(n, batch)
    validate_base = median_rate(n, raw_crc)
    full = br.bench_decode_full()
    return [
        Figure(
            "encode 100-byte records into batches (CRC-32C)",
            encode,
            "records/s",
            ">= 2,000,000",
            encode >= 2_000_000,
            "join + CRC of the same bytes",
            encode_base,
        ),
        Figure(
            "decode + CRC-validate batches (header parse + CRC)",
            validate,
            "records/s",
            ">= 2,000,000",
            validate >= 2_000_000,
            "CRC of the same bytes",
            validate_base,
        ),
        Figure(
            "full per-record decode (every Record object)",
            full,
            "records/s",
            "(informative)",
            None,
            "CRC of the same bytes",
            validate_base,
        ),
    ]


def _log_figures() -> list[Figure]:
    import shutil
    import tempfile

    from benchmarks import bench_log as bl

    bl.BENCH_ROOT.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="bench-log-", dir=bl.BENCH_ROOT))
    try:
        batches = bl.encoded_batches()
        raw = bl.median_of(RUNS, bl.raw_write_fdatasync_rate(batches), root)
        follower = bl.median_of(RUNS, bl.append_as_follower_rate(batches), root)
        leader = bl.median_of(RUNS, bl.append_as_leader_rate(len(batches)), root)
        raw_cpu = bl.median_of(RUNS, bl.raw_write_fdatasync_rate(batches, sync=False), root)
        follower_cpu = bl.median_of(RUNS, bl.append_as_follower_rate(batches, sync=False), root)
        own_cpu = bl.median_of(RUNS, bl.append_leader_encoded_rate(batches, sync=False), root)
        mem = bl.memory_own_append_rates()
        fetch = bl.fetch_rates(batches, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    per = f"{bl.PER_BATCH} records of {bl.RECORD_BYTES} B per fsync"
    pread = fetch["baseline os.pread 1 MiB"]
    return [
        Figure(
            f"durable append_as_follower + flush ({per})",
            follower,
            "records/s",
            ">= 1,000,000 and >= 50% of raw",
            follower >= 1_000_000 and follower >= raw / 2,
            "os.write + os.fdatasync, same bytes",
            raw,
        ),
        Figure(
            f"durable append_as_leader, encoding included ({per})",
            leader,
            "records/s",
            ">= 1,000,000 (the raw baseline does not encode: ratio informative)",
            leader >= 1_000_000,
            "os.write + os.fdatasync, same bytes",
            raw,
        ),
        Figure(
            "append_as_follower without fsync (the software path alone)",
            follower_cpu,
            "records/s",
            "(informative)",
            None,
            "os.write, same bytes",
            raw_cpu,
        ),
        Figure(
            "a leader's own batch, append_leader_encoded without fsync",
            own_cpu,
            "records/s",
            "(informative: the CRC it skips is ~13 us of a 110 KB batch's write)",
            None,
            "append_as_follower (full validation), same bytes",
            follower_cpu,
        ),
        Figure(
            f"MemoryLog: a leader's own one-record batch ({bl.SMALL_BATCHES:,} appends)",
            mem["append_leader_encoded"],
            "batches/s",
            ">= the full validation it replaces",
            mem["append_leader_encoded"] >= mem["append_as_follower"],
            "append_as_follower (full validation), same bytes",
            mem["append_as_follower"],
        ),
        Figure(
            "fetch 1 MiB: read() view copied to bytes",
            fetch["read() view + copy to bytes"],
            "GB/s",
            ">= 1 GB/s",
            fetch["read() view + copy to bytes"] >= 1.0,
            "os.pread 1 MiB",
            pread,
        ),
        Figure(
            "fetch 1 MiB: read_region() + os.sendfile",
            fetch["read_region() + os.sendfile to /dev/null"],
            "GB/s",
            ">= 1 GB/s",
            fetch["read_region() + os.sendfile to /dev/null"] >= 1.0,
            "os.pread 1 MiB",
            pread,
        ),
    ]


def _sim_figures() -> list[Figure]:
    from benchmarks import bench_sim

    return bench_sim.figures()


def _protocol_figures() -> list[Figure]:
    from benchmarks import bench_protocol as bp
    from kraft.protocol import (
        ApiKey,
        RequestHeader,
        decode_request_payload,
        decode_response,
        encode_request_payload,
        encode_response,
    )

    body = encode_response(ApiKey.FETCH, 17, bp.FETCH_RESPONSE)
    records = bytes(1 << 20)
    fetch = bp.median_rate(
        lambda: decode_response(
            ApiKey.FETCH, 17, encode_response(ApiKey.FETCH, 17, bp.FETCH_RESPONSE)
        )
    )
    copy = bp.median_rate(lambda: bytes(bytearray(records)))
    header = RequestHeader(ApiKey.VOTE, 2, 1, "node-1")
    vote = bp.median_rate(
        lambda: decode_request_payload(encode_request_payload(header, bp.VOTE_REQUEST))
    )
    return [
        Figure(
            f"FetchResponse v17 with 1 MiB records: encode + decode ({len(body):,} B)",
            fetch,
            "msgs/s",
            "(informative)",
            None,
            "one copy of 1 MiB",
            copy,
        ),
        Figure(
            "VoteRequest v2 with header: encode + decode", vote, "msgs/s", "(informative)", None
        ),
    ]


def _snapshot_figures() -> list[Figure]:
    from benchmarks import bench_snapshot

    return bench_snapshot.figures()


def _retention_figures() -> list[Figure]:
    from benchmarks import bench_retention

    return bench_retention.figures()


def _cluster_figures() -> list[Figure]:
    from benchmarks import bench_cluster

    return bench_cluster.figures()


def _reconfig_figures() -> list[Figure]:
    from benchmarks import bench_reconfig

    return bench_reconfig.figures()


def _mutation_figures() -> list[Figure]:
    from benchmarks import bench_mutation

    return bench_mutation.figures()


def _fresh_mutation_figures() -> list[Figure]:
    from benchmarks import bench_mutation

    return bench_mutation.fresh_figures()


PEERS_SUITE = (
    "3-node clusters side by side: kraft, Apache Kafka's TestRaftServer, etcd (peers, issue #17)"
)

# Markdown a suite adds under its figures (the peers' side-by-side table).
NOTES: dict[str, str] = {}


def _peers_figures() -> list[Figure]:
    from benchmarks import bench_peers

    figures, table = bench_peers.figures_and_table()
    assert isinstance(table, str)
    NOTES[PEERS_SUITE] = table
    return figures


SUITES: dict[str, Callable[[], list[Figure]]] = {
    "record batch v2 codec": _records_figures,
    "replicated log: append and fetch path": _log_figures,
    "simulator": _sim_figures,
    "wire protocol codec": _protocol_figures,
    "snapshots: checkpoint write and load, FetchSnapshot transfer, catch-up (KIP-630)": (
        _snapshot_figures
    ),
    "disk bytes under a long run with a bounded key set (retention)": _retention_figures,
    "3-node cluster on loopback (kraft vs PySyncObj)": _cluster_figures,
    "voter changes on a loopback cluster (add-voter, remove-voter, reassign; KIP-853/642)": (
        _reconfig_figures
    ),
    PEERS_SUITE: _peers_figures,
    "mutation campaign: score without the unit tests, time, 1 -> 2 cores (issue #16)": (
        _mutation_figures
    ),
    "mutation score of the fresh samples on record, pooled (issue #16)": _fresh_mutation_figures,
}


def _ratio(r: float) -> str:
    # Two significant digits below 0.01, so a tiny ratio does not print as "0.00x".
    return f"{r:.2f}x" if r >= 0.01 else f"{r:.2g}x"


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:,.2f}"


def _sections(text: str) -> dict[str, list[str]]:
    """The suite sections of a BENCHMARKS.md written before: heading's suite -> its lines."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = out.setdefault(line[3:], [])
        elif current is not None:
            current.append(line)
    return out


def render(
    results: dict[str, list[Figure]],
    errors: dict[str, str],
    kept: dict[str, list[str]] | None = None,
) -> str:
    """The whole file; `kept`: sections of suites not run this time, carried over as they were
    (with --only), in the suites' order."""
    kept = kept or {}
    lines = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (`python -m benchmarks.run`); do not edit by hand.",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}.",
        f"Each figure is the median of {RUNS} runs; the baseline is measured in the same "
        "process, in the same run.",
        "",
    ]
    for suite in [*SUITES, *(s for s in results if s not in SUITES)]:
        if suite in kept and suite not in results and suite not in errors:
            # One blank line after a kept section, also after the file's last one.
            body = kept[suite]
            while body and not body[-1].strip():
                body = body[:-1]
            lines += [f"## {suite}", *body, ""]
            continue
        if suite not in results:
            continue
        figures = results[suite]
        lines += [
            f"## {suite}",
            "",
            f"Measured {time.strftime('%Y-%m-%d')}.",
            "",
            "| benchmark | median | target | met | baseline | baseline median | ratio |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for f in figures:
            met = "" if f.met is None else ("yes" if f.met else "**no**")
            base = _fmt(f.baseline_value) if f.baseline_value is not None else ""
            ratio = _ratio(f.ratio) if f.ratio is not None else ""
            lines.append(
                f"| {f.name} | {_fmt(f.value)} {f.unit} | {f.target} | {met} | "
                f"{f.baseline_name} | {base} | {ratio} |"
            )
        lines.append("")
        if suite in NOTES:
            lines += [NOTES[suite], ""]
    for suite, err in errors.items():
        lines += [f"## {suite}", "", f"not measured: {err}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("BENCHMARKS.md"))
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help="run only suites whose name contains this text (repeatable)",
    )
    args = parser.parse_args(argv)
    results: dict[str, list[Figure]] = {}
    errors: dict[str, str] = {}
    for suite, run in SUITES.items():
        if args.only and not any(o in suite for o in args.only):
            continue
        print(f"[bench] {suite} ...", file=sys.stderr, flush=True)
        try:
            results[suite] = run()
        except (ImportError, AttributeError, FileNotFoundError) as exc:
            errors[suite] = f"{type(exc).__name__}: {exc}"
        for f in results.get(suite, []):
            print(f"[bench]   {f.name}: {_fmt(f.value)} {f.unit}", file=sys.stderr)
    # With --only, the other suites' sections of the existing file are kept as they were.
    kept = _sections(args.out.read_text()) if args.only and args.out.exists() else {}
    args.out.write_text(render(results, errors, kept))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
