"""benchmarks/bench_peers.py and benchmarks/peers/: parsing each peer's output, the /proc
readers and the side-by-side table (no JVM, no etcd, no timing)."""

from __future__ import annotations

import math
import os
import uuid
from typing import Any

import pytest

from benchmarks import bench_peers as bp
from benchmarks.peers import procstat
from benchmarks.peers.etcd import parse_put_report
from benchmarks.peers.kafka_raft import TOPIC_ID, fetch_request, fetch_state, parse_stats

ETCD_OUTPUT = """\
 3000 / 3000 [====================================] 100.00% 0s

Summary:
  Total:\t0.9683 secs.
  Slowest:\t0.0312 secs.
  Fastest:\t0.0012 secs.
  Average:\t0.0101 secs.
  Stddev:\t0.0040 secs.
  Requests/sec:\t3098.3429

Response time histogram:
  0.0012 [1]\t|
  0.0042 [95]\t|∎∎

Latency distribution:
  10% in 0.0055 secs.
  50% in 0.0091 secs.
  90% in 0.0150 secs.
  99% in 0.0247 secs.
  99.9% in 0.0301 secs.
"""


def test_etcd_put_report_reads_rate_and_percentiles() -> None:
    r = parse_put_report(ETCD_OUTPUT)
    assert r.requests_per_s == pytest.approx(3098.3429)
    assert r.total_s == pytest.approx(0.9683)
    assert r.p50_ms == pytest.approx(9.1)
    assert r.p99_ms == pytest.approx(24.7)  # not the 99.9 % line


def test_etcd_output_without_a_summary_is_an_error() -> None:
    with pytest.raises(ValueError, match="no benchmark summary"):
        parse_put_report("Error: context deadline exceeded\n")


def test_testraftserver_stats_lines() -> None:
    text = (
        "[2026-11-22 19:36:10,937] INFO something else (x)\n"
        "Throughput (bytes/second): 425231.67, Latency (ms): 37.0 p75 249.0 p99 250.5 p999\n"
        "noise\n"
        "Throughput (bytes/second): 755732.70, Latency (ms): 32.0 p75 NaN p99 NaN p999\n"
    )
    got = parse_stats(text)
    assert [s.bytes_per_s for s in got] == [425231.67, 755732.70]
    assert (got[0].p75_ms, got[0].p99_ms, got[0].p999_ms) == (37.0, 249.0, 250.5)
    assert math.isnan(got[1].p99_ms)


def test_fetch_request_targets_testraftservers_log_as_an_anonymous_observer() -> None:
    body: Any = fetch_request(7)
    part = body["topics"][0]["partitions"][0]
    assert body["topics"][0]["topic_id"] == TOPIC_ID == uuid.UUID(int=2)
    assert body["replica_state"] == {"replica_id": -1, "replica_epoch": -1}
    assert part["current_leader_epoch"] == 7
    assert part["last_fetched_epoch"] >= 0  # Kafka answers INVALID_REQUEST to a negative one


def test_fetch_state_of_an_answer_and_of_a_top_level_error() -> None:
    answer: Any = {
        "error_code": 0,
        "responses": [
            {
                "partitions": [
                    {
                        "error_code": 6,
                        "high_watermark": -1,
                        "current_leader": {"leader_id": 3, "leader_epoch": 2},
                    }
                ]
            }
        ],
    }
    s = fetch_state(answer)
    assert (s.error, s.high_watermark, s.leader_id, s.leader_epoch) == (6, -1, 3, 2)
    top = fetch_state({"error_code": 42, "responses": []})
    assert top.error == 42 and top.leader_id == -1


def test_proc_stat_cpu_ticks_skip_a_command_name_with_spaces() -> None:
    # fields: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    #         utime stime ...
    line = "4242 (java (main) x) S 1 2 3 0 -1 4194560 10 0 0 0 150 25 0 0 20 0 30 0"
    assert procstat.parse_stat_cpu_ticks(line) == 175


def test_proc_status_rss() -> None:
    status = "Name:\tjava\nVmPeak:\t 9999 kB\nVmRSS:\t  123456 kB\nThreads:\t40\n"
    assert procstat.parse_status_rss_bytes(status) == 123456 * 1024
    assert procstat.parse_status_rss_bytes("Name:\tzombie\n") == 0


def test_proc_status_anonymous_part_of_rss() -> None:
    status = "VmRSS:\t  900 kB\nRssAnon:\t  300 kB\nRssFile:\t  600 kB\n"
    assert procstat.parse_status_kb_field(status, "RssAnon") == 300 * 1024
    assert procstat.parse_status_kb_field(status, "RssShmem") == 0


def test_proc_stat_steal_and_io_pressure() -> None:
    stat = "cpu  100 5 50 800 20 0 10 15 7 0\ncpu0 50 2 25 400 10 0 5 8 3 0\n"
    # user nice system idle iowait irq softirq steal; guest is inside user, not added again
    assert procstat.parse_proc_stat_cpu(stat) == (1000, 15)
    pressure = (
        "some avg10=0.60 avg60=5.33 avg300=8.71 total=25101538\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=4156\n"
    )
    assert procstat.parse_pressure_full_us(pressure) == 4156
    assert procstat.parse_pressure_full_us("some avg10=0.00 total=1\n") is None
    a = procstat.Machine(1000, 15, 1_000_000)
    b = procstat.Machine(1200, 65, 1_500_000)
    assert procstat.steal_share(a, b) == pytest.approx(0.25)
    assert procstat.io_stall_share(a, b, 2.0) == pytest.approx(0.25)
    assert math.isnan(procstat.io_stall_share(a, procstat.Machine(1200, 65, None), 2.0))
    assert math.isnan(procstat.steal_share(a, a))


def test_proc_readers_on_this_process() -> None:
    assert procstat.cpu_seconds([os.getpid()]) > 0
    assert procstat.rss_bytes([os.getpid()]) > 0
    assert procstat.cpu_seconds([2**22 + 12345]) == 0  # no such process
    assert 0 < procstat.anon_bytes([os.getpid()]) <= procstat.rss_bytes([os.getpid()])
    assert procstat.machine().total_ticks > 0


def test_a_window_meter_reads_the_servers_and_the_machine() -> None:
    meter = bp.Meter.start([os.getpid()])
    sum(i * i for i in range(200_000))  # some CPU inside the window
    got = meter.sample(1000.0, 1.0, 2.0)
    assert got.records_per_s == 1000.0 and got.cores > 0
    assert 0 < got.anon_mb <= got.rss_mb
    assert got.steal >= 0 or math.isnan(got.steal)


def test_the_table_says_what_the_machine_lost_in_each_systems_windows() -> None:
    names = bp.shape_names(bp.QUICK)
    res = bp.Results()
    res.add(names[0], "kraft", bp.Sample(1.0, 1.0, 1.0, 1.0, 500.0, anon_mb=120.0, io_stall=0.02))
    res.add(names[1], "kraft", bp.Sample(1.0, 1.0, 1.0, 1.0, 500.0, steal=0.1, io_stall=0.3))
    res.add(names[1], "etcd", bp.Sample(1.0, 1.0, 1.0, 1.0, 400.0, steal=0.0))
    table = bp.render_table(res, "T")
    assert "RSS 500 MB (heap 120 MB)" in table
    line = next(x for x in table.splitlines() if x.startswith("Machine during the windows"))
    assert "kraft: CPU stolen 10.0 %, I/O full stall 16.0 % (worst window 30.0 %)" in line
    assert "etcd: CPU stolen 0.0 %, I/O full stall — (worst window —)" in line


def test_systems_alternate_between_runs() -> None:
    assert list(bp.rotations(("a", "b", "c"), 4)) == [
        ("a", "b", "c"),
        ("b", "c", "a"),
        ("c", "a", "b"),
        ("a", "b", "c"),
    ]


def _sample(rate: float, p50: float = 1.0, p99: float = 2.0, cores: float = 0.5) -> bp.Sample:
    return bp.Sample(rate, p50, p99, cores, 100.0)


def test_median_sample_is_taken_field_by_field() -> None:
    m = bp.median_sample([_sample(10, p99=9), _sample(30, p99=1), _sample(20, p99=5)])
    assert (m.records_per_s, m.p99_ms) == (20, 5)


def test_cpu_per_record() -> None:
    assert _sample(1000, cores=0.5).cpu_us_per_record == pytest.approx(500.0)
    assert math.isnan(_sample(0).cpu_us_per_record)


def test_table_has_a_row_per_shape_with_ratios_to_each_peer() -> None:
    cfg = bp.QUICK
    names = bp.shape_names(cfg)
    res = bp.Results()
    res.add(names[0], "kraft", _sample(300_000))
    res.add(names[0], "kafka", bp.Sample(600_000, 30.0, 60.0, 1.0, 900.0, p50_is_p75=True))
    res.add(names[1], "kraft", _sample(6_000))
    res.add(names[1], "etcd", _sample(3_000))
    res.add(names[4], "kraft", _sample(50_000, p99=10.0))
    res.add(names[4], "kafka", _sample(50_000, p99=40.0))
    res.failover_s = {"kraft": [1.0, 2.0, 3.0], "kafka": [4.0]}
    table = bp.render_table(res, "T")
    open_row = next(line for line in table.splitlines() if line.startswith(f"| {names[4]}"))
    assert "| 0.25x (p99) | — |" in open_row  # an open loop compares p99, not its rate
    rows = [line for line in table.splitlines() if line.startswith(f"| {names[0]}")]
    assert len(rows) == 1
    assert "0.50x" in rows[0] and "p75 30.0 ms" in rows[0]  # kraft / Kafka; Kafka's p75
    etcd_row = next(line for line in table.splitlines() if line.startswith(f"| {names[1]}"))
    assert etcd_row.endswith("| — | 2.00x (records/s) |")  # no Kafka figure; twice etcd
    assert "p50 2,000 ms over 3 kills" in table and "0.50x (time)" in table
    assert "fsync" in table


def test_figures_carry_the_issues_targets() -> None:
    cfg = bp.QUICK
    names = bp.shape_names(cfg)
    res = bp.Results()
    res.add(names[0], "kraft", _sample(700_000))
    res.add(names[0], "kafka", _sample(600_000))
    res.add(names[1], "kraft", _sample(9_000))
    res.add(names[1], "etcd", _sample(3_000))
    res.failover_s = {"kraft": [1.2]}
    figs = {f.name: f for f in bp.to_figures(res, cfg)}
    bulk = figs[f"{names[0]}: committed records/s"]
    assert bulk.met is False and bulk.baseline_value == 600_000  # 1.17x < 1.2x
    assert figs[f"{names[1]}: committed records/s"].met is True  # exactly 3x
    fo = next(f for n, f in figs.items() if n.startswith("SIGKILL"))
    assert fo.value == pytest.approx(1200.0) and fo.met is True and fo.baseline_value is None


def test_only_peers_selects_the_peers_suite_and_its_table_is_written_under_it() -> None:
    from benchmarks import run
    from benchmarks.figure import Figure

    assert [s for s in run.SUITES if "peers" in s] == [run.PEERS_SUITE]
    run.NOTES[run.PEERS_SUITE] = "### the side-by-side table"
    try:
        text = run.render({run.PEERS_SUITE: [Figure("x", 1.0, "records/s", "t", None)]}, {})
    finally:
        del run.NOTES[run.PEERS_SUITE]
    section = text[text.index(f"## {run.PEERS_SUITE}") :]
    assert section.index("| x | 1.00 records/s") < section.index("### the side-by-side table")


def test_per_second_rates_between_high_watermark_readings() -> None:
    assert bp.per_second([(0.0, 0), (1.0, 500), (3.0, 1500), (3.0, 1500)]) == [500, 500, 0]
